"""LangChain histories built from plain records, and ways to run a Runnable.

A record history (``tests.records``) maps onto LangChain messages one to one,
with a content of exactly ``tokens`` characters, so a per-message counter of
``len(content)`` makes the naive reference an oracle for ``TurnTrimmer``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable

from langchain_turntrim import per_message
from langchain_turntrim._core import ANCHOR, PINNED, START
from langchain_turntrim._messages import message_kinds
from tests.helpers import arun
from tests.records import histories

_BUILDERS: dict[str, Callable[[str, str], BaseMessage]] = {
    "system": lambda text, ident: SystemMessage(text, id=ident),
    "developer": lambda text, ident: SystemMessage(
        text, id=ident, additional_kwargs={"__openai_role__": "developer"}
    ),
    "user": lambda text, ident: HumanMessage(text, id=ident),
    "assistant": lambda text, ident: AIMessage(text, id=ident),
    "tool": lambda text, ident: ToolMessage(text, tool_call_id="call", id=ident),
    "function": lambda text, ident: FunctionMessage(content=text, name="f", id=ident),
}


def to_message(record: dict[str, Any], chat: bool = False) -> BaseMessage:
    """The LangChain message for a record; ``chat`` uses ChatMessage roles."""
    role, ident, text = record["role"], record["id"], "x" * record["tokens"]
    if chat:
        return ChatMessage(content=text, role=role, id=ident)
    return _BUILDERS[role](text, ident)


def content_length(message: BaseMessage) -> int:
    return len(message.content)


# Annotations are postponed (strings) in this module; trim_messages only
# recognises a per-message function by the class itself, so give it that.
content_length.__annotations__["message"] = BaseMessage


#: A per-message counter: a message costs its content's length.
LENGTH = per_message(content_length)


@st.composite
def message_histories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[BaseMessage], int]:
    """Records, the matching messages (some as ChatMessage), and a budget."""
    records = draw(histories())
    chat = draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)))
    messages = [to_message(r, c) for r, c in zip(records, chat, strict=True)]
    total = sum(r["tokens"] for r in records)
    return records, messages, draw(st.integers(min_value=0, max_value=total + 10))


async def _collect(iterator: Any) -> list[Any]:
    return [chunk async for chunk in iterator]


#: Every way to call a Runnable on one input; each returns the output.
CALLS: dict[str, Callable[[Runnable[Any, Any], Any], Any]] = {
    "invoke": lambda r, x: r.invoke(x),
    "ainvoke": lambda r, x: arun(r.ainvoke(x)),
    "batch": lambda r, x: r.batch([x, x])[1],
    "abatch": lambda r, x: arun(r.abatch([x, x]))[1],
    "stream": lambda r, x: _single(list(r.stream(x))),
    "astream": lambda r, x: _single(arun(_collect(r.astream(x)))),
}


def _single(chunks: Sequence[Any]) -> Any:
    assert len(chunks) == 1
    return chunks[0]


class NetworkUsedError(AssertionError):
    """Something tried to reach the network."""


def refuse(*args: Any, **kwargs: Any) -> Any:
    """A stand-in for anything that would reach the network."""
    raise NetworkUsedError(f"network access attempted: {args!r}")


class InvalidConversationError(AssertionError):
    pass


def tool_results(message: BaseMessage) -> list[str]:
    """The call ids a message answers: a ToolMessage's, or a user message's
    Anthropic-style ``tool_result`` blocks."""
    if isinstance(message, ToolMessage):
        return [message.tool_call_id]
    if isinstance(message, HumanMessage) and isinstance(message.content, list):
        return [
            b["tool_use_id"]
            for b in message.content
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
    return []


def check_conversation(messages: Sequence[BaseMessage]) -> None:
    """Raise unless OpenAI and Anthropic would both accept ``messages``.

    System messages first (systems alone are the spec's overflow result);
    then a user message; every tool result answers a call made earlier in
    the list, and a call's results follow it before anything else.
    """
    if not messages:
        raise InvalidConversationError("empty")
    kinds = message_kinds(messages)
    rest = list(messages)
    while kinds and kinds[0] == PINNED:
        kinds.pop(0)
        rest.pop(0)
    if not rest:
        return
    if kinds[0] not in (START, ANCHOR):  # a summary is a user message too
        raise InvalidConversationError(f"starts with {type(rest[0]).__name__}")
    pending: set[str] = set()
    for i, (m, kind) in enumerate(zip(rest, kinds, strict=True)):
        if kind == PINNED:
            raise InvalidConversationError("system message after the start")
        answered = tool_results(m)
        if answered:
            for call_id in answered:
                if call_id not in pending:
                    raise InvalidConversationError(f"orphan tool result {call_id}")
                pending.discard(call_id)
        elif pending:
            raise InvalidConversationError(f"tool calls {pending} cut before message {i}")
        if isinstance(m, AIMessage):
            pending = {c["id"] for c in m.tool_calls if c["id"]}
