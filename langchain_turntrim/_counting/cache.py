"""The one LRU, and the per-message cache built on it.

``CountCache`` remembers, for each message object it has seen (and while
that object is alive), its turn kind and count, as long as every field the
count depends on (``fields_of``) is still the very object it was read from:
an agent's history is the same objects from one call to the next, so a warm
call checks identities and counts only what is new. A message in a new
object with the same content (a history reloaded from a checkpoint, converted
from dicts again) finds its count again by a digest of those fields.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable, Sequence
from itertools import compress
from operator import is_
from typing import Any, Generic, NoReturn, TypeVar, cast

from langchain_core.messages import BaseMessage

from langchain_turntrim._anatomy import GETTERS, check, fields_of
from langchain_turntrim._core import check_count

__all__ = ["LRU", "CountCache", "Seen", "digest"]

_V = TypeVar("_V")


class LRU(Generic[_V]):
    """A thread-safe map of at most ``maxsize`` entries; the least recently
    used leaves first. ``maxsize=0`` keeps nothing."""

    def __init__(self, maxsize: int, name: str = "cache_size") -> None:
        self.maxsize = check_count(maxsize, name)
        self._data: OrderedDict[Hashable, _V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, keys: Sequence[Hashable | None]) -> list[_V | None]:
        data = self._data
        with self._lock:
            found = list(map(data.get, keys))  # a None key finds nothing
            deque(map(data.move_to_end, compress(keys, found)), maxlen=0)  # in C
        return found

    def get(self, key: Hashable | None) -> _V | None:
        return self.get_many([key])[0]

    def put_many(self, items: Iterable[tuple[Hashable | None, _V]]) -> None:
        if not self.maxsize:
            return
        data = self._data
        with self._lock:
            for key, value in items:
                if key is None:
                    continue
                data[key] = value
                data.move_to_end(key)
                if len(data) > self.maxsize:
                    data.popitem(last=False)

    def discard(self, key: Hashable, value: _V) -> None:
        """Remove ``key`` if it still holds ``value``."""
        with self._lock:
            if self._data.get(key) is value:
                del self._data[key]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class Seen(weakref.ref):  # type: ignore[type-arg]
    """What is known of one message object while it lives: the fields it was
    read with, its turn kind, and its count and ``links`` (None until read)."""

    __slots__ = ("count", "fields", "key", "kind", "links")
    count: int | None
    fields: tuple[Any, ...]
    key: int
    kind: int
    links: tuple[str, ...] | None


class CountCache:
    """Kinds and counts of messages, by object, then by content (see the module).

    At most ``maxsize`` message objects and ``maxsize`` contents are
    remembered (``maxsize=0``: none); a message's entry goes when it is garbage
    collected. ``by_content``: counts are also filed by a 16-byte digest of
    their fields, for a counter whose counting costs more than the digest.
    """

    def __init__(self, maxsize: int, *, by_content: bool = True) -> None:
        self._seen: LRU[Seen] = LRU(maxsize)
        self._counts: LRU[int] | None = LRU(maxsize) if by_content else None
        self._gone: deque[Seen] = deque()

        def died(seen: Seen) -> None:  # its fields go with it, its entry at the next scan
            seen.fields = ()
            self._gone.append(seen)

        self._died = died

    def __len__(self) -> int:
        """Message objects remembered."""
        return len(self._seen)

    def clear(self) -> None:
        self._seen.clear()
        if self._counts is not None:
            self._counts.clear()

    def scan(self, messages: Sequence[BaseMessage]) -> list[Seen]:
        """What is known of each message: remembered, or checked now (``check``
        raises naming the first bad one)."""
        while self._gone:
            dead = self._gone.popleft()
            self._seen.discard(dead.key, dead)
        found = self._seen.get_many(list(map(id, messages)))
        new = []
        getters = GETTERS
        for i, message, known in zip(range(len(messages)), messages, found, strict=True):
            if (
                known is not None
                and known() is message
                and all(map(is_, getters[type(message)](message.__dict__), known.fields))
            ):
                continue
            kind = check(i, message)
            seen = found[i] = Seen(message, self._died)
            seen.fields, seen.kind, seen.key = fields_of(message), kind, id(message)
            seen.count = seen.links = None
            new.append((seen.key, seen))
        self._seen.put_many(new)
        return found  # type: ignore[return-value]

    def counts(
        self,
        count_each: Any,
        seen: Sequence[Seen],
        indices: Sequence[int],
    ) -> list[int]:
        """The counts of the messages ``seen`` at ``indices``, by ``count_each``
        (given the indices nothing remembers, and the fields they were read
        with: the count is of those) for the rest."""
        counts = [seen[i].count for i in indices]
        missing = [j for j, found in enumerate(counts) if found is None]
        keys: list[Any] = [None] * len(missing)
        if self._counts is not None:
            keys = [_key(seen[indices[j]]) for j in missing]
            for j, found in zip(missing, self._counts.get_many(keys), strict=True):
                counts[j] = found
        todo = [j for j in missing if counts[j] is None]
        if todo:
            where = [indices[j] for j in todo]
            fields = [seen[i].fields for i in where]
            for j, value in zip(todo, count_each(where, fields), strict=True):
                counts[j] = value
        done = cast("list[int]", counts)
        for j in missing:
            seen[indices[j]].count = done[j]
        if self._counts is not None:
            self._counts.put_many(zip(keys, (done[j] for j in missing), strict=False))
        return done


def _key(seen: Seen) -> tuple[type, bytes] | None:
    fingerprint = digest(seen.fields)
    return None if fingerprint is None else (type(seen()), fingerprint)  # alive: being counted


class _Plain(pickle.Pickler):
    """Pickles only the exact types JSON and messages are made of: the C pickler
    handles those itself and asks ``reducer_override`` about anything else."""

    def reducer_override(self, obj: object) -> NoReturn:
        raise TypeError(type(obj).__name__)


def digest(value: object) -> bytes | None:
    """A 16-byte digest of ``value``, equal only for equal values of the same
    exact types all the way down (``1``, ``1.0`` and ``True`` differ, and so do
    dict orders); None when it holds anything else, or nests too deep."""
    buffer = io.BytesIO()
    pickler = _Plain(buffer, protocol=5)
    pickler.fast = True  # no memo: equal values pickle alike, whatever they share
    try:
        pickler.dump(value)
    except (TypeError, RecursionError, pickle.PicklingError, ValueError):
        return None
    return hashlib.blake2b(buffer.getbuffer(), digest_size=16).digest()
