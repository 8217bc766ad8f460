"""``CachedCounter``: bounded, thread-safe caches of per-message counts."""

from __future__ import annotations

import contextlib
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._counting.additive import Wrapper, checked_counts, counts_list
from langchain_turntrim._counting.keys import Fields, fields_keys, frozen_copy, read_fields
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._counting.protocol import TokenCounter
from langchain_turntrim._messages import check_messages
from langchain_turntrim._options import DEFAULT_CACHE_SIZE
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["CachedCounter", "Ref", "forgetter"]

#: Counts of messages from their classes and ``message_fields`` (see TiktokenCounter).
FieldsCounter = Callable[[Sequence[type], Sequence[Fields]], list[int]]


class Ref(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to a counted message that knows its identity-layer key."""

    __slots__ = ("key",)
    key: int


class CachedCounter(Wrapper):
    """Wraps a ``TokenCounter`` with bounded, thread-safe caches of per-message counts.

    Two layers, each an LRU of at most ``cache_size`` entries:

    * by message object: a message seen before is recognised by identity (a
      weak reference) and its count reused while its fields still are the
      same objects (``message_fields``); reassigning a field
      (``message.content = ...``, as LangChain and LangGraph do) makes it
      count again. This is the warm path of an agent loop: no key is built.
      An entry goes when its message is garbage collected, so it never keeps
      a dead message's content alive.
    * by content: ``message_key(message)``, a digest of the class and fields
      (the content is never copied), so an equal message in a new object
      (e.g. restored from a checkpoint) is not tokenized again.

    The wrapped counter is given a frozen shallow copy of each message it
    counts (``frozen_copy``): the count is of exactly the fields both layers
    file it under, even if another thread reassigns a field meanwhile. A
    ``TiktokenCounter`` (not a subclass overriding ``count_each``) counts
    straight from those fields instead, with no copy.
    Editing a nested value in place (appending to a content list, changing a
    tool call's ``args`` dict) is not seen by the first layer: assign a new
    value instead, or call ``clear()``. Counting happens outside the locks,
    so threads never wait on each other's tokenization.

    The identity layer is an ``OrderedDict`` of its own rather than an ``LRU``:
    its entries leave when their message is collected, from a weak-reference
    callback that may run inside another cache operation and so takes no lock.
    """

    def __init__(self, counter: TokenCounter, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(counter, TokenCounter):
            msg = f"CachedCounter wraps a TokenCounter, got {type(counter).__name__}"
            raise TypeError(msg)
        self.counter = counter
        # A counter that counts from message_fields needs no frozen copies.
        fields_counter = getattr(counter, "_fields_counter", None)
        self._count_fields: FieldsCounter | None = (
            fields_counter() if callable(fields_counter) else None
        )
        self._cache: LRU[int] = LRU(cache_size)
        # id(message) -> (weak reference, fields getter, message_fields(message), count)
        self._known: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        self._known_lock = threading.Lock()
        self._forget = forgetter(self._known)

    @property
    def cache_size(self) -> int:
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
        if len(unknown) < len(messages):
            self._touch(messages, counts)
        if unknown:
            return self._count_unknown(messages, unknown, counts)
        return counts  # type: ignore[return-value]

    def _touch(self, messages: Sequence[BaseMessage], counts: list[int | None]) -> None:
        """Mark the messages found by identity as the most recently used."""
        touch = self._known.move_to_end
        with self._known_lock:
            for m, count in zip(messages, counts, strict=True):
                if count is not None:
                    with contextlib.suppress(KeyError):  # collected meanwhile
                        touch(id(m))

    def _count_unknown(
        self, messages: Sequence[BaseMessage], unknown: list[int], counts: list[int | None]
    ) -> list[int]:
        # One read of each message's fields; the key, the identity entry and
        # the count are all made from it.
        getters, fields = read_fields(messages, unknown)
        keys = fields_keys([type(messages[i]) for i in unknown], fields)
        cached = self._cache.get_many(keys)
        missing = [j for j, count in enumerate(cached) if count is None]
        if missing:
            fresh = self._count_missing(messages, unknown, fields, missing)
            if len(fresh) != len(missing):
                msg = (
                    f"{safe_repr(self.counter)} returned {len(fresh)} counts "
                    f"for {len(missing)} messages"
                )
                raise ValueError(msg)
            for j, value in zip(missing, fresh, strict=True):
                cached[j] = value
        for i, count in zip(unknown, cached, strict=True):
            counts[i] = count
        checked = checked_counts(counts, messages, self.counter)
        if self.cache_size:
            self._cache.put_many([(keys[j], checked[unknown[j]]) for j in missing])
            self._remember(messages, unknown, getters, fields, checked)
        return checked

    def _count_missing(
        self,
        messages: Sequence[BaseMessage],
        unknown: list[int],
        fields: list[Fields],
        missing: list[int],
    ) -> list[Any]:
        """Counts of exactly the ``fields`` read, whatever is assigned meanwhile."""
        if self._count_fields is not None:
            classes = [type(messages[unknown[j]]) for j in missing]
            return self._count_fields(classes, [fields[j] for j in missing])
        copies = [frozen_copy(messages[unknown[j]], fields[j]) for j in missing]
        return counts_list(self.counter.count_each(copies), self.counter)

    def _remember(
        self,
        messages: Sequence[BaseMessage],
        unknown: list[int],
        getters: list[Any],
        fields: list[tuple[Any, ...]],
        counts: list[int],
    ) -> None:
        cache_size = self.cache_size
        entries = []
        for j in range(max(0, len(unknown) - cache_size), len(unknown)):
            m = messages[unknown[j]]
            try:
                ref = Ref(m, self._forget)
            except TypeError:  # not weakly referenceable: not remembered
                continue
            ref.key = id(m)
            entries.append((ref.key, (ref, getters[j], fields[j], counts[unknown[j]])))
        known = self._known
        with self._known_lock:
            for key, entry in entries:
                known.pop(key, None)
                known[key] = entry  # the newest, at the end
                if len(known) > cache_size:
                    with contextlib.suppress(KeyError):  # emptied by collections meanwhile
                        known.popitem(last=False)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start with empty caches (a lock cannot be copied)."""
        return (type(self), (self.counter, self.cache_size))

    def __repr__(self) -> str:
        return f"CachedCounter({safe_repr(self.counter)}, cache_size={self.cache_size})"


def forgetter(known: OrderedDict[int, tuple[Any, ...]]) -> Any:
    """The weak-reference callback dropping a dead message's identity entry.

    It runs whenever the message is collected, maybe inside another cache
    operation, so it takes no lock: ``pop`` is atomic, and if another thread
    replaced the entry in between, dropping that one is only a cache miss.
    """

    def forget(ref: Ref) -> None:
        entry = known.get(ref.key)
        if entry is not None and entry[0] is ref:
            known.pop(ref.key, None)

    return forget
