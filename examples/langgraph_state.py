"""A LangGraph node that deletes the turns that no longer fit from the state."""

from itertools import cycle
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from langchain_turntrim import TurnTrimmer, trim_update

model = GenericFakeChatModel(messages=cycle(["Noted. " * 30]))
trimmer = TurnTrimmer(max_tokens=200)


def trim(state: MessagesState) -> dict[str, Any]:  # before the model: RemoveMessage updates
    return trim_update(state["messages"], trimmer)


def answer(state: MessagesState) -> dict[str, Any]:
    return {"messages": [model.invoke(state["messages"])]}


graph = StateGraph(MessagesState)
graph.add_node("trim", trim)
graph.add_node("answer", answer)
graph.add_edge(START, "trim")
graph.add_edge("trim", "answer")
app = graph.compile(checkpointer=InMemorySaver())
config: Any = {"configurable": {"thread_id": "demo"}}
for i in range(5):
    state = app.invoke({"messages": [HumanMessage(f"Note {i}: " + "detail " * 20)]}, config)
    print(f"call {i}: the state holds {len(state['messages'])} messages")
