"""Counters from plain functions: ``per_message`` and ``per_list``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._counting.additive import AdditiveCounter, checked_counts
from langchain_turntrim._counting.protocol import TokenCounter
from langchain_turntrim._counting.whole_list import WholeListCounter
from langchain_turntrim._messages import check_messages, explain_bad_fields
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["per_list", "per_message"]


class _MessageFunctionCounter(AdditiveCounter):
    """A ``BaseMessage -> int`` function, summed over the messages."""

    overhead: Final = 0

    def __init__(self, function: Callable[[BaseMessage], int]) -> None:
        self.function = function

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        with explain_bad_fields(messages):
            counts = list(map(self.function, messages))
        return checked_counts(counts, messages, self)

    def __repr__(self) -> str:
        return f"per_message({safe_repr(self.function)})"


def per_message(function: Callable[[BaseMessage], int]) -> TokenCounter:
    """Say explicitly that ``function`` counts one message (``BaseMessage -> int``).

    The list's count is the sum of the messages' counts.
    """
    if not callable(function):
        msg = f"per_message needs a callable, got {type(function).__name__}"
        raise TypeError(msg)
    return _MessageFunctionCounter(function)


def per_list(function: Callable[..., int], *, takes_tools: bool = False) -> WholeListCounter:
    """Say explicitly that ``function`` counts a whole list (``list[BaseMessage] -> int``),
    like ``len`` or ``count_tokens_approximately``.

    ``takes_tools=True`` says that it also takes the request's tools
    (``function(messages, tools=[...])``, as ``get_num_tokens_from_messages``
    does) and counts them; otherwise tools are priced as LangChain's
    approximate estimate, scaled to the function's units. The counter's cache
    takes the size of the trimmer it is given to (its ``cache_size``; 0
    disables it).
    """
    if not callable(function):
        msg = f"per_list needs a callable, got {type(function).__name__}"
        raise TypeError(msg)
    if not isinstance(takes_tools, bool):
        msg = f"takes_tools must be a bool, got {type(takes_tools).__name__}"
        raise TypeError(msg)
    return WholeListCounter(function, None, takes_tools=takes_tools)
