"""``LRU``: the bounded, thread-safe map of the caches looked up by key.

It holds the count caches by content (``CachedCounter``'s,
``WholeListCounter``'s requests), the remembered tool prices and the
middleware's trimmers per routed model. What is not looked up by key keeps a
structure of its own: ``HistoryMemo`` and the whole-list planner's noted cuts
(a few entries matched by a history's last message).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

from langchain_turntrim._core import check_count

__all__ = ["LRU", "SizedLRU"]

V = TypeVar("V")


class LRU(Generic[V]):
    """A thread-safe LRU map that never holds more than ``maxsize`` entries.

    The lock guards dict operations only; callers compute values outside it.
    A ``None`` key is never stored or found, and ``None`` is not a value.
    ``argument``: what a bad ``maxsize``'s error calls it (the caller's argument).
    """

    def __init__(self, maxsize: int, argument: str = "maxsize") -> None:
        self.maxsize = check_count(maxsize, argument)
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> V | None:
        """One lookup (``get_many`` of one key, without its lists)."""
        data = self._data
        with self._lock:
            value = data.get(key)
            if value is not None:
                data.move_to_end(key)
        return value

    def get_many(self, keys: Sequence[Hashable | None]) -> list[V | None]:
        data = self._data
        get = data.get
        touch = data.move_to_end
        with self._lock:
            found = [None if key is None else get(key) for key in keys]
            for key, value in zip(keys, found, strict=True):
                if value is not None:
                    touch(key)
        return found

    def put_many(self, items: Sequence[tuple[Hashable | None, V]]) -> None:
        maxsize = self.maxsize
        if not maxsize:
            return
        data = self._data
        # Only the newest maxsize items could stay: the older ones are not inserted.
        items = [item for item in items if item[0] is not None][-maxsize:]
        with self._lock:
            for key, value in items:
                data[key] = value
                data.move_to_end(key)
                if len(data) > maxsize:
                    data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.maxsize,))


class SizedLRU(LRU[V]):
    """An ``LRU`` that also never holds more than ``maxbytes`` bytes, by the
    size each entry is put with (``put``); an entry larger than that alone is
    not stored."""

    def __init__(
        self,
        maxsize: int,
        maxbytes: int,
        argument: str = "maxsize",
        bytes_argument: str = "maxbytes",
    ) -> None:
        super().__init__(maxsize, argument)
        self.maxbytes = check_count(maxbytes, bytes_argument)
        self._sizes: dict[Hashable, int] = {}
        self.nbytes = 0

    def put(self, key: Hashable | None, value: V, size: int) -> None:
        """Store ``value`` under ``key``, ``size`` bytes, evicting the least
        recently used entries until both bounds hold."""
        if key is None or not self.maxsize or size > self.maxbytes:
            return
        data, sizes = self._data, self._sizes
        with self._lock:
            self.nbytes += size - sizes.get(key, 0)
            sizes[key] = size
            data[key] = value
            data.move_to_end(key)
            while len(data) > self.maxsize or self.nbytes > self.maxbytes:
                oldest, _ = data.popitem(last=False)
                self.nbytes -= sizes.pop(oldest)

    def put_many(self, items: Sequence[tuple[Hashable | None, V]]) -> None:  # noqa: ARG002
        msg = "SizedLRU stores entries with their sizes: use put(key, value, size)"
        raise TypeError(msg)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._sizes.clear()
            self.nbytes = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.maxsize, self.maxbytes))
