"""``ApproximateCounter``: LangChain's ``count_tokens_approximately``, per message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.cache import DEFAULT_CACHE_SIZE
from langchain_turntrim._counting.tool_cache import memo, tools_key
from langchain_turntrim._counting.warm import HistoryMemo
from langchain_turntrim._messages import check_messages
from langchain_turntrim._safe_repr import deep_repr

__all__ = ["ApproximateCounter"]


class ApproximateCounter(AdditiveCounter):
    """LangChain's ``count_tokens_approximately``, one message at a time.

    That function rounds up per message and adds a fixed amount per message,
    so it is additive: the sum of per-message counts equals its count of the
    whole list. It is never wrapped in a ``CachedCounter``: counting a message
    costs less than building its cache key. It does remember the last
    histories it planned (``HistoryMemo``, of up to ``max_messages`` messages
    each; 0 remembers none): a history that only grew since is counted for
    its new messages alone. ``clear()`` forgets them.
    """

    overhead: Final = 0

    def __init__(self, max_messages: int = DEFAULT_CACHE_SIZE) -> None:
        self.memo = HistoryMemo(max_messages) if max_messages else None

    def clear(self) -> None:
        """Forget the remembered histories (after editing a message in place)."""
        if self.memo is not None:
            self.memo.clear()

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        return [_approximate(m) for m in messages]

    def count_tools(self, tools: Sequence[Any]) -> int:
        """``count_tokens_approximately([], tools=tools)``: LangChain's own estimate,
        the number ``SummarizationMiddleware`` uses (remembered: see ``tool_cache``)."""
        if not tools:
            return 0
        listed = list(tools)
        return memo("approximate", tools_key(listed), lambda: _approximate_tools(listed))

    def __repr__(self) -> str:
        return "ApproximateCounter()"

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start with an empty memo."""
        histories = self.memo
        return (type(self), (histories.max_messages if histories is not None else 0,))

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
    return count_tokens_approximately([], tools=tools)


def _approximate(message: BaseMessage) -> int:
    """``count_tokens_approximately([message])`` with its default options."""
    content = message.content
    role = _ROLE_LENGTHS.get(type(message))
    if role is None or type(content) is not str:
        return _approximate_any(message)
    chars = len(content) + role + (len(message.name) if message.name else 0)
    if type(message) is ToolMessage:
        chars += len(message.tool_call_id)
    elif type(message) is AIMessage and message.tool_calls:
        try:
            chars += len(repr(message.tool_calls))
        except RecursionError:
            return _approximate_any(message)
    return -(-chars // 4) + 3


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
