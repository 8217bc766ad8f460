"""trim_messages and trim_turns on the same history, called alike."""

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from langchain_turntrim import trim_turns

calls = [{"name": "weather", "args": {"city": c}, "id": c} for c in ("Rome", "Oslo")]
history = [
    SystemMessage("You are a weather assistant."),
    HumanMessage("Weather in Rome and Oslo?"),
    AIMessage("", tool_calls=calls),
    ToolMessage("Rome: 24C, clear. " * 5, tool_call_id="Rome"),
    ToolMessage("Oslo: 9C, rain. " * 5, tool_call_id="Oslo"),
    AIMessage("Rome is warm; Oslo is wet."),
    HumanMessage("Which one is warmer?"),
]


def orphans(messages: list[BaseMessage]) -> int:
    called = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return sum(isinstance(m, ToolMessage) and m.tool_call_id not in called for m in messages)


budget, counter = 60, count_tokens_approximately
theirs = trim_messages(
    history, max_tokens=budget, token_counter=counter, strategy="last", include_system=True
)
ours = trim_turns(history, max_tokens=budget, token_counter=counter)
print("trim_messages:", [m.type for m in theirs], f"{orphans(theirs)} orphan tool result(s)")
print("trim_turns:   ", [m.type for m in ours], f"{orphans(ours)} orphan tool result(s)")
