"""ChatPromptTemplate | TurnTrimmer | model: the model sees the newest whole turns."""

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_turntrim import TurnTrimmer

prompt = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a concise travel assistant."),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ]
)
trimmer = TurnTrimmer(max_tokens=120)  # LangChain's count_tokens_approximately
model = GenericFakeChatModel(messages=iter(["Lisbon in May: mild, sunny, few crowds."]))
chain = prompt | trimmer | model

history = []
for city in ["Paris", "Rome", "Oslo", "Vienna", "Prague", "Madrid"]:
    history.append(HumanMessage(f"What should I see in {city}?"))
    history.append(AIMessage(f"In {city}: the old town, a museum or two, and the river."))
inputs = {"history": history, "question": "And Lisbon, in May?"}

# What the model gets: the prompt's messages, trimmed.
report = trimmer.trim_with_report(prompt.invoke(inputs))
plan = report.plan
print(f"prompt: {plan.size} messages, {plan.turns} turns, {plan.tokens_before} tokens")
print(
    f"kept {plan.kept_turns} turns ({len(report.kept)} messages), dropped {plan.dropped_turns}: "
    f"{plan.tokens_after} tokens, budget {plan.max_tokens}"
)
for message in report.kept:
    print(f"  {message.type:>6}: {message.text}")

print("model:", chain.invoke(inputs).text)
