"""``CachedCounter``: a bounded, thread-safe cache of per-message counts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._counting.additive import Wrapper, checked_counts, counts_list
from langchain_turntrim._counting.keys import Fields, fields_keys, frozen_copy, read_fields
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._counting.protocol import TokenCounter, refuse_class
from langchain_turntrim._messages import check_messages, explain_bad_fields
from langchain_turntrim._options import DEFAULT_CACHE_SIZE
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["CachedCounter"]

#: Counts of messages from their classes and ``message_fields`` (see TiktokenCounter).
FieldsCounter = Callable[[Sequence[type], Sequence[Fields]], list[int]]


class CachedCounter(Wrapper):
    """Wraps a ``TokenCounter`` with a bounded, thread-safe cache of per-message counts.

    The cache is an LRU of at most ``cache_size`` counts filed by content:
    ``message_key(message)``, a digest of the class and counted fields
    (``message_fields``; the content is never copied), so an equal message in
    a new object (converted from a dict again, restored from a checkpoint) is
    not tokenized again, and a reassigned field (``message.content = ...``)
    files the message under a new key. What a trimmer's planner remembers of
    each history (``HistoryMemo``) is the warm path of an agent loop: the
    messages it remembers are checked by identity and never looked up here,
    and the messages such a history gains are counted without a key (they
    are new: a lookup would miss) and filed here once a plan may look them
    up (``costs_of(..., cached=False)``, then ``file``).

    The wrapped counter is given a frozen shallow copy of each message it
    counts (``frozen_copy``): the count is of exactly the fields the key was
    made from, even if another thread reassigns a field meanwhile. A
    ``TiktokenCounter`` (not a subclass overriding ``count_each``) counts
    straight from those fields instead, with no copy. Counting happens
    outside the cache's lock, so threads never wait on each other's
    tokenization.
    """

    caches = True

    def __init__(self, counter: TokenCounter, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        refuse_class(counter, "CachedCounter's counter")
        if not isinstance(counter, TokenCounter):
            msg = f"CachedCounter wraps a TokenCounter, got {type(counter).__name__}"
            raise TypeError(msg)
        self.counter = counter
        # A counter that counts from message_fields needs no frozen copies.
        fields_counter = getattr(counter, "_fields_counter", None)
        self._count_fields: FieldsCounter | None = (
            fields_counter() if callable(fields_counter) else None
        )
        self._cache: LRU[int] = LRU(cache_size, "cache_size")

    @property
    def cache_size(self) -> int:
        return self._cache.maxsize

    def __len__(self) -> int:
        """Number of cached counts."""
        return len(self._cache)

    def clear(self) -> None:
        self._cache.clear()

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        with explain_bad_fields(messages):
            return self.costs_of(messages, read_fields(messages, range(len(messages)))[1])

    def costs(self, messages: Sequence[BaseMessage]) -> list[int]:
        return self.count_each(messages)  # checked by the cache

    def costs_of(
        self, messages: Sequence[BaseMessage], fields: Sequence[Fields], *, cached: bool = True
    ) -> list[int]:
        """The checked counts of ``messages``, whose ``message_fields`` were read
        as ``fields`` (one read: the key and the count are both made from it).
        ``cached=False``: counted without keys (no digest), for the caller to
        ``file`` when a later lookup may need them."""
        if not cached:
            every = list(range(len(messages)))
            return checked_counts(self._fresh(messages, fields, every), messages, self.counter)
        keys = fields_keys(list(map(type, messages)), fields)
        counts = self._cache.get_many(keys)
        missing = [j for j, count in enumerate(counts) if count is None]
        if not missing:
            return counts  # type: ignore[return-value]
        for j, value in zip(missing, self._fresh(messages, fields, missing), strict=True):
            counts[j] = value
        checked = checked_counts(counts, messages, self.counter)
        self._cache.put_many([(keys[j], checked[j]) for j in missing])
        return checked

    def file(
        self, classes: Sequence[type], fields: Sequence[Fields], counts: Sequence[int]
    ) -> None:
        """File checked ``counts`` made by ``costs_of(..., cached=False)``."""
        keys = fields_keys(classes, fields)
        self._cache.put_many(list(zip(keys, counts, strict=True)))

    def _fresh(
        self, messages: Sequence[BaseMessage], fields: Sequence[Fields], missing: list[int]
    ) -> list[Any]:
        """``_count_missing``, one count per missing message, or raise."""
        fresh = self._count_missing(messages, fields, missing)
        if len(fresh) != len(missing):
            msg = (
                f"{safe_repr(self.counter)} returned {len(fresh)} counts "
                f"for {len(missing)} messages"
            )
            raise ValueError(msg)
        return fresh

    def _count_missing(
        self, messages: Sequence[BaseMessage], fields: Sequence[Fields], missing: list[int]
    ) -> list[Any]:
        """Counts of exactly the ``fields`` read, whatever is assigned meanwhile."""
        if self._count_fields is not None:
            classes = [type(messages[j]) for j in missing]
            return self._count_fields(classes, [fields[j] for j in missing])
        copies = [frozen_copy(messages[j], fields[j]) for j in missing]
        try:
            return counts_list(self.counter.count_each(copies), self.counter)
        except (TypeError, ValueError):
            if len(missing) < len(messages):
                # Its errors name a message by its index: give it every message.
                self.counter.count_each(list(map(frozen_copy, messages, fields)))
            raise

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start with an empty cache (a lock cannot be copied)."""
        return (type(self), (self.counter, self.cache_size))

    def __repr__(self) -> str:
        return f"CachedCounter({safe_repr(self.counter)}, cache_size={self.cache_size})"
