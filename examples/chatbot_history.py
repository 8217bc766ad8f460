"""A chatbot with RunnableWithMessageHistory: the stored history grows, the prompt does not."""

import warnings

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from langchain_turntrim import TurnTrimmer

# Both classes are deprecated in langchain-core 1.x (see the note printed at the end).
warnings.filterwarnings("ignore", ".*(RunnableWithMessageHistory|InMemoryChatMessageHistory)")

prompt = ChatPromptTemplate.from_messages(
    [
        ("system", "You are a friendly cooking assistant."),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ]
)
trimmer = TurnTrimmer(max_tokens=100)
seen: list[int] = []  # how many messages each model call got


def record(messages):
    seen.append(len(messages))
    return messages


model = FakeListChatModel(responses=[f"Here is idea number {i}, with a tip." for i in range(1, 9)])
chain = prompt | trimmer | RunnableLambda(record) | model

sessions: dict[str, InMemoryChatMessageHistory] = {}


def history_for(session_id: str) -> InMemoryChatMessageHistory:
    return sessions.setdefault(session_id, InMemoryChatMessageHistory())


bot = RunnableWithMessageHistory(
    chain, history_for, input_messages_key="question", history_messages_key="history"
)
config = {"configurable": {"session_id": "demo"}}
for i in range(1, 9):
    answer = bot.invoke({"question": f"Give me dinner idea {i}, please."}, config)
    stored = len(history_for("demo").messages)
    print(f"call {i}: stored history {stored:>2} messages, model saw {seen[-1]}: {answer.text}")
print("Note: RunnableWithMessageHistory is deprecated; for new code keep history in LangGraph")
print("and trim it with TurnTrimMiddleware or trim_update (see agent_middleware.py).")
