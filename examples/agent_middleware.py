"""create_agent + TurnTrimMiddleware: a tool call every turn, whole turns dropped per call."""

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_turntrim import TurnTrimMiddleware


class FakeToolModel(BaseChatModel):  # calls `weather` for each question, then answers
    @property
    def _llm_type(self):
        return "fake-tool-model"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = messages[-1]
        if isinstance(last, HumanMessage):
            call = {"name": "weather", "args": {"city": last.text.split()[-1]}, "id": last.id}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"Forecast: {last.text}.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 21C and sunny, light wind from the west"


class ShowTrims(BaseCallbackHandler):
    def on_custom_event(self, name, d, **kwargs):  # "turntrim_cache" follows each call
        if name != "turntrim":
            return
        print(f"  model call: dropped {d['dropped_turns']} of {d['turns']} turns, kept", end=" ")
        print(f"{d['messages_after']}/{d['messages_before']} messages, {d['tokens_after']} tokens")


agent = create_agent(
    FakeToolModel(),
    tools=[weather],
    system_prompt="You are a weather assistant.",
    middleware=[TurnTrimMiddleware(max_tokens=250)],  # system prompt and tools count too
    checkpointer=InMemorySaver(),
)
config = {"configurable": {"thread_id": "demo"}, "callbacks": [ShowTrims()]}
print("budget 250 tokens per model call: system prompt + tool schema + the newest whole turns")
for city in ["Paris", "Rome", "Oslo", "Vienna", "Lisbon", "Prague"]:
    print(f"user: weather in {city}")
    state = agent.invoke({"messages": [HumanMessage(f"Weather in {city}")]}, config)
    print(f"  agent: {state['messages'][-1].text} (state: {len(state['messages'])} messages)")
