"""``Copies``: the compacted copies made lately, the same objects while what
they were made from has not changed.

Compaction makes a new message object for each message it changes (a result
cleared to a note, a message truncated around one). Made afresh on every
call, a copy would be new to the count cache's identity layer, and its key
digested every time. ``Copies`` remembers, for each of the last ``size``
messages it copied, the copies made of it, by edit (what each changed piece
now says, whether data was dropped): the same edit of the same message is
then the same copy, counted by identity.

A copy is given again while the message it was made from holds the same
field values (every field, ``is``, not ``==``) and no extra fields, and the
copy too (reassigning a field of a copy the caller was given makes a new
one). As in the count cache, a value edited in place (appending to a content
list) is not seen. An entry goes when its message is garbage collected, so
no copy outlives its message here.
"""

from __future__ import annotations

import contextlib
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from itertools import chain
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction import edits

__all__ = ["Copies", "fields_of", "unchanged"]

#: Copies remembered per message (a truncation tries a few lengths).
EDITS: Final = 8
_EXTRA: Final = operator.attrgetter("__pydantic_extra__")


def fields_of(messages: Sequence[BaseMessage]) -> list[Any] | None:
    """Every field value of each of ``messages``, one after the other, as they
    are (not copied); None when one of them has extra fields."""
    if any(map(_EXTRA, messages)):
        return None
    return list(chain.from_iterable(map(dict.values, map(vars, messages))))


def unchanged(messages: Sequence[BaseMessage], fields: Sequence[Any]) -> bool:
    """Whether ``messages`` still hold ``fields`` (``fields_of``), object for object."""
    if any(map(_EXTRA, messages)) or sum(map(len, map(vars, messages))) != len(fields):
        return False
    now = chain.from_iterable(map(dict.values, map(vars, messages)))
    return all(map(operator.is_, now, fields))


class Copies:
    """The copies compaction made of the last ``size`` messages it changed (see the module).

    Thread-safe: the lock guards the map's changes; a weak-reference callback
    drops a collected message's entry without it (``_forgetter``).
    """

    __slots__ = ("_forget", "_known", "_lock", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        # id(message) -> (weak reference, fields_of(message), {edit: (copy, fields_of(copy))})
        self._known: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self._forget = _forgetter(self._known)

    def __len__(self) -> int:
        """Number of messages whose copies are remembered."""
        return len(self._known)

    def clear(self) -> None:
        with self._lock:
            self._known.clear()

    def rebuild(
        self, message: BaseMessage, parts: Sequence[edits.Piece], *, drop_data: bool
    ) -> BaseMessage:
        """``edits.rebuild(message, parts, drop_data=drop_data)``: the copy made
        before of the same edit, if ``message`` and it are unchanged."""
        edit = (drop_data, *(p.text if p.change else None for p in parts))
        entry = self._known.get(id(message))
        if entry is not None and entry[0]() is message and unchanged((message,), entry[1]):
            found = entry[2].get(edit)
            if found is not None and unchanged((found[0],), found[1]):
                return found[0]  # type: ignore[no-any-return]
        copy = edits.rebuild(message, parts, drop_data=drop_data)
        if copy is not message:
            self._put(message, edit, copy)
        return copy

    def _put(self, message: BaseMessage, edit: Hashable, copy: BaseMessage) -> None:
        fields, copy_fields = fields_of((message,)), fields_of((copy,))
        if not self.size or fields is None or copy_fields is None:
            return
        key = id(message)
        entry = self._known.get(key)
        if entry is None or entry[0]() is not message or not unchanged((message,), entry[1]):
            try:
                ref = _Ref(message, self._forget)
            except TypeError:  # not weakly referenceable: not remembered
                return
            ref.key = key
            entry = (ref, fields, {})
        known = self._known
        with self._lock:
            known.pop(key, None)
            known[key] = entry  # the newest, at the end
            copies = entry[2]
            copies.pop(edit, None)
            copies[edit] = (copy, copy_fields)
            if len(copies) > EDITS:
                del copies[next(iter(copies))]
            if len(known) > self.size:
                with contextlib.suppress(KeyError):  # emptied by collections meanwhile
                    known.popitem(last=False)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start empty (a lock cannot be copied)."""
        return (type(self), (self.size,))


class _Ref(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to a compacted message that knows its entry's key."""

    __slots__ = ("key",)
    key: int


def _forgetter(known: OrderedDict[int, tuple[Any, ...]]) -> Any:
    """The weak-reference callback dropping a dead message's entry.

    It runs whenever the message is collected, maybe inside another cache
    operation, so it takes no lock: ``pop`` is atomic, and if another thread
    replaced the entry in between, dropping that one is only a cache miss.
    """

    def forget(ref: _Ref) -> None:
        entry = known.get(ref.key)
        if entry is not None and entry[0] is ref:
            known.pop(ref.key, None)

    return forget
