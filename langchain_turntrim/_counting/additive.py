"""Planning with an additive counter: per-message counts plus a per-request constant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import TrimPlan, describe, plan_costs
from langchain_turntrim._counting.protocol import TokenCounter
from langchain_turntrim._counting.tools import tool_messages

__all__ = ["AdditiveCounter", "Uncached", "Wrapper", "checked_counts"]


class AdditiveCounter:
    """The ``ResolvedCounter`` of every additive counter.

    A subclass provides ``overhead`` and ``count_each``; planning, whole-list
    counts and tool prices follow from them. ``source`` is the counter whose
    numbers these are (the wrapped one, for a wrapper): errors name it.
    """

    __slots__ = ()

    #: Counting is local: async callers run it on the event loop.
    blocking = False

    @property
    def overhead(self) -> int:
        raise NotImplementedError

    @property
    def source(self) -> object:
        return self

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        raise NotImplementedError

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int],
        max_tokens: int,
        *,
        reserved: int = 0,
        trim_to: int | None = None,
    ) -> TrimPlan:
        costs = checked_counts(self.count_each(messages), messages, self.source)
        return plan_costs(kinds, costs, max_tokens, self.overhead + reserved, trim_to)

    def count(self, messages: Sequence[BaseMessage]) -> int:
        return self.overhead + sum(checked_counts(self.count_each(messages), messages, self.source))

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Each tool's JSON schema counted as one system message (see ``tool_messages``)."""
        if not tools:
            return 0
        return sum(self.count_each(tool_messages(tools)))


class Wrapper(AdditiveCounter):
    """An ``AdditiveCounter`` around a user's ``TokenCounter`` (``self.counter``):
    its overhead, its name in errors, and its own tool rule where it has one."""

    counter: TokenCounter

    @property
    def overhead(self) -> int:
        return self.counter.overhead

    @property
    def source(self) -> object:
        return self.counter

    def count_tools(self, tools: Sequence[Any]) -> int:
        own = getattr(self.counter, "count_tools", None)
        return int(own(tools)) if callable(own) else super().count_tools(tools)


class Uncached(Wrapper):
    """A user's ``TokenCounter``, resolved without a cache (``cache_size=0``)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return self.counter.count_each(messages)

    def __repr__(self) -> str:
        return repr(self.counter)


def checked_counts(
    counts: Sequence[int], messages: Sequence[BaseMessage], counter: object
) -> list[int]:
    """``counts`` as a list if it holds one int >= 0 per message; else raise naming the message."""
    if not isinstance(counts, list):
        counts = list(counts)
    if len(counts) != len(messages):
        msg = f"{counter!r} returned {len(counts)} counts for {len(messages)} messages"
        raise ValueError(msg)
    if not counts or (set(map(type, counts)) == {int} and min(counts) >= 0):
        return counts
    for i, count in enumerate(counts):
        where = describe(i, messages[i])
        if not isinstance(count, int) or isinstance(count, bool):
            what = f"{type(count).__name__} {count!r}"
            msg = f"{counter!r} counted {where} as {what}, expected an int"
            raise TypeError(msg)
        if count < 0:
            msg = f"{counter!r} counted {where} as {count}, expected a count >= 0"
            raise ValueError(msg)
    return counts
