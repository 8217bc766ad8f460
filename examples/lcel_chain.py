"""ChatPromptTemplate | TurnTrimmer | model: the model sees the newest whole turns."""

from itertools import cycle

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_turntrim import TurnTrimmer

prompt = ChatPromptTemplate.from_messages(
    [("system", "You are a travel assistant."), MessagesPlaceholder("history"), ("human", "{q}")]
)
trimmer = TurnTrimmer(max_tokens=120)  # token_counter="approximate"
model = GenericFakeChatModel(messages=cycle(["Lisbon in May: mild and sunny."]))
chain = prompt | trimmer | model

history: list[BaseMessage] = []
for city in ["Paris", "Rome", "Oslo", "Vienna", "Prague", "Madrid"]:
    history += [HumanMessage(f"What to see in {city}?"), AIMessage(f"{city}: the old town.")]
inputs = {"history": history, "q": "And Lisbon, in May?"}

report = trimmer.trim_with_report(prompt.invoke(inputs))  # what the model is sent
print(f"kept {report.kept_turns} of {report.turns} turns, {report.tokens_after} tokens <= 120")
print("model:", chain.invoke(inputs).text)
