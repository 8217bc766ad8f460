"""``ApproximateCounter``: LangChain's ``count_tokens_approximately``, per message."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.tools import check_tools, remembered, tool_json, tools_key
from langchain_turntrim._messages import check_messages, explain_bad_fields
from langchain_turntrim._safe_repr import deep_repr

__all__ = ["ApproximateCounter"]


class ApproximateCounter(AdditiveCounter):
    """LangChain's ``count_tokens_approximately``, one message at a time.

    That function rounds up per message and adds a fixed amount per message,
    so it is additive: the sum of per-message counts equals its count of the
    whole list. It is never wrapped in a ``CachedCounter``: counting a message
    costs less than building its cache key (a trimmer still remembers the
    histories it planned, see ``TurnTrimmer``).
    """

    overhead: Final = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        with explain_bad_fields(messages):
            return _approximate_each(messages)

    def costs(self, messages: Sequence[BaseMessage]) -> list[int]:
        if type(self).count_each is not ApproximateCounter.count_each:  # a subclass's own
            return super().costs(messages)
        with explain_bad_fields(messages):
            return _approximate_each(messages)  # ints >= 0, one per message: nothing to check

    def count_tools(self, tools: Sequence[Any]) -> int:
        """``count_tokens_approximately([], tools=tools)``: LangChain's own estimate,
        the number ``SummarizationMiddleware`` uses (remembered: see ``tools``)."""
        listed = check_tools(tools)
        if not listed:
            return 0
        return remembered("approximate", tools_key(listed), lambda: _approximate_tools(listed))

    def __repr__(self) -> str:
        return "ApproximateCounter()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApproximateCounter)

    def __hash__(self) -> int:
        return hash(ApproximateCounter)


# count_tokens_approximately, for the common messages, without its per-call
# overhead (converting its input, checking its options), which costs several
# times the count itself. A test checks both agree on every kind of message.
_ROLE_LENGTHS: Final = {
    HumanMessage: len("user"),
    AIMessage: len("assistant"),
    ToolMessage: len("tool"),
}


def _approximate_tools(tools: list[Any]) -> int:
    """LangChain's estimate of ``tools``; it takes tools and dicts only, so any
    other tool (a function, a pydantic class) is given as its JSON schema."""
    from langchain_core.tools import BaseTool  # noqa: PLC0415 - costly to import

    given = [t if isinstance(t, (dict, BaseTool)) else json.loads(tool_json(t)) for t in tools]
    return count_tokens_approximately([], tools=given)


#: ``-(-chars // 4) + 3`` (a quarter, rounded up, plus 3 a message) is ``(chars + 15) // 4``.
_ROUNDING: Final = 4 * 3 + 3


def _approximate_each(messages: Sequence[BaseMessage]) -> list[int]:
    """``[count_tokens_approximately([m]) for m in messages]`` with its default options.

    One pass, inlined: at 10,000 messages the per-message call and attribute
    lookups cost as much as the counting. Raises ``TypeError`` naming the
    first item that is not a ``BaseMessage``.
    """
    counts: list[int] = []
    append = counts.append
    for message in messages:
        kind = type(message)
        role = _ROLE_LENGTHS.get(kind)
        if role is None:
            append(_approximate_other(messages, message))
            continue
        fields = message.__dict__  # one lookup, then plain dict reads of the fields
        try:
            content = fields["content"]
            if type(content) is not str:
                append(_approximate_any(message))
                continue
            chars = len(content) + role
            name = fields["name"]
            if name:
                chars += len(name)
            if kind is ToolMessage:
                chars += len(fields["tool_call_id"])
            elif kind is AIMessage:
                calls = fields["tool_calls"]
                if calls:
                    chars += len(repr(calls))
        except (KeyError, RecursionError):  # a field deleted, or nested deeper than repr goes
            append(_approximate_any(message))
            continue
        append((chars + _ROUNDING) // 4)
    return counts


def _approximate_other(messages: Sequence[BaseMessage], message: object) -> int:
    """A message of another type (system, chunks, subclasses), or not a message: raise
    naming the first item of ``messages`` that is not one."""
    if isinstance(message, BaseMessage):
        return _approximate_any(message)
    check_messages(messages)  # raises: ``message`` is not one
    raise AssertionError  # pragma: no cover - check_messages found it


def _approximate_any(message: BaseMessage) -> int:
    try:
        return count_tokens_approximately((message,))
    except RecursionError:
        # Nested deeper than repr can go: count the same characters, flattened.
        text = deep_repr(message.content)
        update: dict[str, Any] = {"content": text}
        if isinstance(message, AIMessage) and message.tool_calls:
            update = {"content": text + deep_repr(message.tool_calls), "tool_calls": []}
        return count_tokens_approximately((message.model_copy(update=update),))
