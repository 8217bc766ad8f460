"""``AdditiveCounter``: the base of every counter whose count of a request is
its per-request constant plus each message's count plus the tools' price."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import check_count, describe
from langchain_turntrim._counting.keys import Fields
from langchain_turntrim._counting.protocol import TokenCounter
from langchain_turntrim._counting.tools import check_tools, tool_messages
from langchain_turntrim._messages import check_messages
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["AdditiveCounter", "Uncached", "Wrapper", "checked_counts", "counts_list"]


class AdditiveCounter:
    """A resolved additive counter: ``count(messages, tools)`` is ``overhead``
    plus the sum of ``count_each(messages)`` plus ``count_tools(tools)``.

    A subclass provides ``overhead`` and ``count_each``; ``costs`` (the
    checked counts planners add up), ``count`` and tool prices follow from
    them. ``source`` is the counter whose numbers these are (the wrapped one,
    for a wrapper): errors name it.
    """

    __slots__ = ()

    #: Counting is local: async callers run it on the event loop.
    blocking = False
    #: A message always counts the same, from its counted fields alone
    #: (``message_fields``): a planner may remember the counts of a history.
    stable = True
    #: Counts are kept in a cache (``file`` keeps them): only then may a
    #: planner count without it and file later (``costs_of(..., cached=False)``).
    caches = False

    @property
    def overhead(self) -> int:
        raise NotImplementedError

    @property
    def source(self) -> object:
        return self

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        raise NotImplementedError

    def costs(self, messages: Sequence[BaseMessage]) -> list[int]:
        """``count_each(messages)``, checked: one exact int >= 0 per message."""
        return checked_counts(self.count_each(messages), messages, self.source)

    def costs_of(
        self, messages: Sequence[BaseMessage], fields: Sequence[Fields], *, cached: bool = True
    ) -> list[int]:
        """``costs(messages)``, whose ``message_fields`` the caller read as
        ``fields`` (a cache files the counts under them; others read anew).
        ``cached=False``: a cache neither looks the messages up nor files their
        counts, which the caller files later, if ever (``file``)."""
        del fields, cached
        return self.costs(messages)

    def file(
        self, classes: Sequence[type], fields: Sequence[Fields], counts: Sequence[int]
    ) -> None:
        """File ``counts`` of messages of ``classes`` whose fields were ``fields``
        (counted by ``costs_of(..., cached=False)``); nothing to do without a cache."""

    def checked_overhead(self) -> int:
        """``overhead``, checked where it is used (a property may change its answer)."""
        overhead = self.overhead
        if type(overhead) is int and overhead >= 0:
            return overhead
        return check_count(overhead, f"{type(self.source).__name__}.overhead")

    def measure(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> tuple[list[int], int]:
        """Each message's checked count, and what the request adds once: the
        per-request constant and the tools' price."""
        constant = self.checked_overhead()
        return self.costs(messages), constant + self.count_tools(tools) if tools else constant

    def count(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The tokens of ``messages`` sent as one request with ``tools``."""
        costs, constant = self.measure(messages, tools)
        return constant + sum(costs)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Each tool's JSON schema counted as one system message (see ``tool_messages``)."""
        listed = check_tools(tools)
        if not listed:
            return 0
        return sum(self.costs(tool_messages(listed)))


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
        if not callable(own):
            return super().count_tools(tools)
        return check_count(own(check_tools(tools)), f"{safe_repr(self.counter)}.count_tools")


class Uncached(Wrapper):
    """A user's ``TokenCounter``, resolved without a cache (``cache_size=0``)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        return checked_counts(self.counter.count_each(messages), messages, self.counter)

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
