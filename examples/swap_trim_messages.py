"""Swap trim_messages for trim_turns: same call, but never an orphan tool result."""

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from langchain_turntrim import trim_turns


def weather_call(*cities: str) -> AIMessage:
    calls = [{"name": "get_weather", "args": {"city": c}, "id": f"call_{c}"} for c in cities]
    return AIMessage("", tool_calls=calls)


history = [
    SystemMessage("You are a weather assistant."),
    HumanMessage("What's the weather in Paris?"),
    weather_call("Paris"),
    ToolMessage("18C, sunny", tool_call_id="call_Paris"),
    AIMessage("It is 18C and sunny in Paris."),
    HumanMessage("And in Rome and Oslo?"),
    weather_call("Rome", "Oslo"),
    ToolMessage("24C, clear", tool_call_id="call_Rome"),
    ToolMessage("9C, rain", tool_call_id="call_Oslo"),
    AIMessage("Rome is 24C and clear; Oslo is 9C with rain."),
    HumanMessage("Which city is warmest?"),
]

# The call most code writes; only the function's name changes.
options = {
    "max_tokens": 100,
    "token_counter": count_tokens_approximately,
    "strategy": "last",
    "include_system": True,
}
theirs = trim_messages(history, **options)
ours = trim_turns(history, **options)


def orphans(messages):
    called = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    return [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id not in called]


def show(m):
    return f"{m.type}: {m.text or m.tool_calls[0]['name'] + '(...)'}"[:38]


print(f"{'trim_messages(...)':<40}trim_turns(...)")
for i in range(max(len(theirs), len(ours))):
    left, right = (show(m[i]) if i < len(m) else "" for m in (theirs, ours))
    print(f"{left:<40}{right}")
print(f"orphan ToolMessages: trim_messages {len(orphans(theirs))}, trim_turns {len(orphans(ours))}")
careful = trim_messages(history, start_on="human", **options)
print("Without start_on, trim_messages keeps tool results whose call was cut (OpenAI: 400).")
print(f"With start_on='human' it leaves {len(orphans(careful))} here, if you remember to pass it;")
print("trim_turns always cuts between whole turns.")
