"""``CachedCounter``: bounded, thread-safe caches of per-message counts."""

from __future__ import annotations

import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import check_count
from langchain_turntrim._counting.additive import Wrapper
from langchain_turntrim._counting.keys import fields_getter, message_fields, message_key
from langchain_turntrim._counting.protocol import TokenCounter
from langchain_turntrim._messages import check_messages

__all__ = ["DEFAULT_CACHE_SIZE", "LRU", "CachedCounter"]

#: Messages whose counts a ``CachedCounter`` keeps by default (LRU).
DEFAULT_CACHE_SIZE: Final = 16_384


class LRU:
    """A thread-safe LRU map. The lock guards dict operations only; callers
    compute values outside it."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = check_count(maxsize, "cache_size")
        self._data: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, keys: Sequence[Hashable]) -> list[int | None]:
        data = self._data
        get = data.get
        touch = data.move_to_end
        with self._lock:
            found = [get(key) for key in keys]
            for key, value in zip(keys, found, strict=True):
                if value is not None:
                    touch(key)
        return found

    def put_many(self, items: Sequence[tuple[Hashable, int]]) -> None:
        if not self.maxsize:
            return
        data = self._data
        with self._lock:
            for key, value in items:
                data[key] = value
                data.move_to_end(key)
            while len(data) > self.maxsize:
                data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class CachedCounter(Wrapper):
    """Wraps a ``TokenCounter`` with bounded, thread-safe caches of per-message counts.

    Two layers, each holding at most ``maxsize`` entries:

    * by message object: a message seen before is recognised by identity (a
      weak reference) and its count reused while its fields still are the
      same objects (``message_fields``); reassigning a field
      (``message.content = ...``, as LangChain and LangGraph do) makes it
      count again. This is the warm path of an agent loop: no key is built.
    * by content (LRU): ``message_key(message)``, so an equal message in a
      new object (e.g. restored from a checkpoint) is not tokenized again.

    Editing a nested value in place (appending to a content list, changing a
    tool call's ``args`` dict) is not seen by the first layer: assign a new
    value instead, or call ``clear()``. Counting happens outside the locks,
    so threads never wait on each other's tokenization.
    """

    def __init__(self, counter: TokenCounter, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(counter, TokenCounter):
            msg = f"CachedCounter wraps a TokenCounter, got {type(counter).__name__}"
            raise TypeError(msg)
        self.counter = counter
        self._cache = LRU(maxsize)
        # id(message) -> (weak reference, fields getter, message_fields(message), count)
        self._known: dict[int, tuple[Any, ...]] = {}
        self._known_lock = threading.Lock()

    @property
    def maxsize(self) -> int:
        return self._cache.maxsize

    def __len__(self) -> int:
        """Number of cached counts (by content)."""
        return len(self._cache)

    def clear(self) -> None:
        self._cache.clear()
        with self._known_lock:
            self._known.clear()

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        known = self._known.get
        counts: list[int | None] = []
        append = counts.append
        is_ = operator.is_
        for m in messages:
            # entry: (weak reference, fields getter, message_fields(m), count)
            entry = known(id(m))
            if entry is not None and entry[0]() is m and all(map(is_, entry[2], entry[1](vars(m)))):
                append(entry[3])
            else:
                append(None)
        unknown = [i for i, count in enumerate(counts) if count is None]
        if unknown:
            self._count_unknown(messages, unknown, counts)
        return counts  # type: ignore[return-value]

    def _count_unknown(
        self, messages: Sequence[BaseMessage], unknown: list[int], counts: list[int | None]
    ) -> None:
        keys = [message_key(messages[i]) for i in unknown]
        cached = self._cache.get_many(keys)
        missing = [j for j, count in enumerate(cached) if count is None]
        if missing:
            fresh = self.counter.count_each([messages[unknown[j]] for j in missing])
            if len(fresh) != len(missing):
                msg = (
                    f"{type(self.counter).__name__}.count_each returned {len(fresh)} counts "
                    f"for {len(missing)} messages"
                )
                raise ValueError(msg)
            for j, value in zip(missing, fresh, strict=True):
                cached[j] = value
            self._cache.put_many([(keys[j], cached[j]) for j in missing])  # type: ignore[misc]
        remembered = []
        for i, count in zip(unknown, cached, strict=True):
            counts[i] = count
            m = messages[i]
            entry = (weakref.ref(m), fields_getter(m), message_fields(m), count)
            remembered.append((id(m), entry))
        self._remember(remembered)

    def _remember(self, entries: list[tuple[int, tuple[Any, ...]]]) -> None:
        maxsize = self.maxsize
        if not maxsize:
            return
        known = self._known
        with self._known_lock:
            known.update(entries)
            while len(known) > maxsize:  # oldest first: dicts keep insertion order
                del known[next(iter(known))]

    def __repr__(self) -> str:
        return f"CachedCounter({self.counter!r}, maxsize={self.maxsize})"
