"""Planning with an additive counter: per-message counts plus a per-request constant."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import TrimPlan, check_count, describe, plan_costs
from langchain_turntrim._counting.protocol import TokenCounter
from langchain_turntrim._counting.tools import tool_messages
from langchain_turntrim._counting.warm import HistoryMemo
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["AdditiveCounter", "Uncached", "Wrapper", "checked_counts", "counts_list"]


class AdditiveCounter:
    """The ``ResolvedCounter`` of every additive counter.

    A subclass provides ``overhead`` and ``count_each``; planning, whole-list
    counts and tool prices follow from them. ``source`` is the counter whose
    numbers these are (the wrapped one, for a wrapper): errors name it.
    A subclass whose counts depend only on the messages' counted fields sets
    ``memo`` (a ``HistoryMemo``): a history that grew since a recent plan is
    then counted and grouped only for what it gained.
    """

    __slots__ = ()

    #: Counting is local: async callers run it on the event loop.
    blocking = False
    #: The histories planned last (None: every plan counts every message).
    memo: HistoryMemo | None = None

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
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        reserved: int = 0,
        trim_to: int | None = None,
    ) -> TrimPlan:
        overhead = self._overhead() + reserved
        memo = self.memo
        if memo is not None:
            return memo.plan(messages, kinds, self._costs, max_tokens, overhead, trim_to)
        kinds = message_kinds(messages) if kinds is None else kinds
        costs = self._costs(messages)
        return plan_costs(kinds, costs, max_tokens, overhead, trim_to)

    def count(self, messages: Sequence[BaseMessage]) -> int:
        return self._overhead() + sum(self._costs(messages))

    def _costs(self, messages: Sequence[BaseMessage]) -> list[int]:
        """``count_each(messages)``, checked: what planning and counting add up."""
        return checked_counts(self.count_each(messages), messages, self.source)

    def _overhead(self) -> int:
        """``overhead``, checked where it is used (a property may change its answer)."""
        overhead = self.overhead
        if type(overhead) is int and overhead >= 0:
            return overhead
        return check_count(overhead, f"{type(self.source).__name__}.overhead")

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
        return safe_repr(self.counter)


def counts_list(counts: object, counter: object) -> list[Any]:
    """What ``counter.count_each`` returned, as a list (a generator or tuple is fine)."""
    if type(counts) is list:
        return counts
    if isinstance(counts, (str, bytes, Mapping)) or not isinstance(counts, Iterable):
        msg = (
            f"{safe_repr(counter)}.count_each returned {type(counts).__name__}, "
            "expected a list of one int per message"
        )
        raise TypeError(msg)
    return list(counts)


def checked_counts(counts: object, messages: Sequence[BaseMessage], counter: object) -> list[int]:
    """``counts`` as a list of exact ints if it holds one int >= 0 per message;
    else raise naming the message.

    ``int`` subclasses are read as the ints they hold (their own comparison or
    arithmetic is never used): the result holds only exact ints.
    """
    counts = counts_list(counts, counter)
    if len(counts) != len(messages):
        msg = f"{safe_repr(counter)} returned {len(counts)} counts for {len(messages)} messages"
        raise ValueError(msg)
    if not counts or (set(map(type, counts)) == {int} and min(counts) >= 0):
        return counts
    checked = []
    for i, count in enumerate(counts):
        if not isinstance(count, int) or isinstance(count, bool):
            where = describe(i, messages[i])
            what = f"{type(count).__name__} {safe_repr(count)}"
            msg = f"{safe_repr(counter)} counted {where} as {what}, expected an int"
            raise TypeError(msg)
        value = int.__int__(count)
        if value < 0:
            where = describe(i, messages[i])
            msg = f"{safe_repr(counter)} counted {where} as {value}, expected a count >= 0"
            raise ValueError(msg)
        checked.append(value)
    return checked
