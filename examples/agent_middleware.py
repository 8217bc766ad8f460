"""create_agent + TurnTrimMiddleware: a tool call every turn, old turns left out of each call."""

from itertools import cycle
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_turntrim import TurnTrimMiddleware


class FakeToolModel(GenericFakeChatModel):  # a stand-in for any chat model with tools
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 21C and sunny, light wind from the west."


call = {"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}
replies = cycle([AIMessage("", tool_calls=[call]), AIMessage("Sunny.")])
model = FakeToolModel(messages=(reply.model_copy() for reply in replies))  # one object a reply


class ShowTrims(BaseCallbackHandler):
    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "turntrim":
            print(f"  sent {data['messages_after']} of {data['messages_before']} messages")


agent = create_agent(
    model,
    tools=[weather],
    system_prompt="You are a weather assistant.",
    middleware=[TurnTrimMiddleware(max_tokens=200)],  # system prompt and tools count too
    checkpointer=InMemorySaver(),
)
config: Any = {"configurable": {"thread_id": "demo"}, "callbacks": [ShowTrims()]}
for city in ["Paris", "Rome", "Oslo", "Vienna"]:
    state = agent.invoke({"messages": [HumanMessage(f"Weather in {city}?")]}, config)
    print(f"{city}: the state holds {len(state['messages'])} messages")
