"""What a message's count depends on: the fields a cache watches, the digest it
files a count under, and the frozen copy a counter is given."""

from __future__ import annotations

import hashlib
import io
import operator
import pickle
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, ToolMessage

__all__ = [
    "Fields",
    "UnkeyableError",
    "digest",
    "digests",
    "fields_getter",
    "fields_keys",
    "frozen_copy",
    "message_fields",
    "message_key",
    "read_fields",
]

_COMMON_FIELDS: Final = ("content", "name", "additional_kwargs", "type")
# In TiktokenCounter's order of classes, so that its fields are always read.
_FIELDS_BY_CLASS: Final = (
    (ChatMessage, (*_COMMON_FIELDS, "role")),
    (AIMessage, (*_COMMON_FIELDS, "tool_calls", "invalid_tool_calls")),
    (ToolMessage, (*_COMMON_FIELDS, "tool_call_id")),
)
#: ``message_fields``: content, name, additional_kwargs, type, then the class's own.
Fields = tuple[Any, ...]
Getter = Callable[[dict[str, Any]], Fields]
_specs: dict[type, tuple[tuple[str, ...], Getter]] = {}


def _spec(message: BaseMessage) -> tuple[tuple[str, ...], Getter]:
    spec = _specs.get(type(message))
    if spec is None:
        if not isinstance(message, BaseMessage):
            msg = f"expected a BaseMessage, got {type(message).__name__}"
            raise TypeError(msg)
        names = next((n for c, n in _FIELDS_BY_CLASS if isinstance(message, c)), _COMMON_FIELDS)
        spec = _specs[type(message)] = (names, operator.itemgetter(*names))
    return spec


def fields_getter(message: BaseMessage) -> Getter:
    """An ``itemgetter`` of the fields that matter, over a message's ``__dict__``
    (pydantic keeps every field there; a dict lookup beats an attribute's)."""
    return _spec(message)[1]


def read_fields(
    messages: Sequence[BaseMessage], indices: Sequence[int]
) -> tuple[list[Getter], list[Fields]]:
    """``fields_getter`` and ``message_fields`` of ``messages[i]`` for each of
    ``indices``, in one pass (each message's fields read once). Raises
    ``TypeError`` for an item that is not a ``BaseMessage``."""
    getters: list[Getter] = []
    fields: list[Fields] = []
    specs = _specs
    for i in indices:
        message = messages[i]
        spec = specs.get(type(message))
        get = (spec or _spec(message))[1]
        getters.append(get)
        fields.append(get(vars(message)))
    return getters, fields


def message_fields(message: BaseMessage) -> tuple[Any, ...]:
    """The field values a message's count depends on, as they are (not copied):
    class-specific ones (tool calls, tool call id, chat role) after content,
    name, ``additional_kwargs`` and type.

    ``CachedCounter`` remembers them for each message object it has counted:
    while the object's fields are these very objects (``is``, not ``==``: a
    value mutated in place would equal its new self), its count is reused.
    Reading them is one C-level call, so another thread's assignment is seen
    wholly or not at all.
    """
    return _spec(message)[1](vars(message))


def frozen_copy(message: BaseMessage, fields: Sequence[Any]) -> BaseMessage:
    """A shallow copy of ``message`` whose counted fields are ``fields``.

    Counters are given this copy, so the count is of exactly the values the
    key was made from, whatever another thread assigns to ``message`` meanwhile.
    """
    names = _spec(message)[0]
    copy = message.__copy__()
    vars(copy).update(zip(names, fields, strict=True))
    return copy


# -- digests --------------------------------------------------------------------------------

#: A pickler that drops a buffer larger than this after use (no copy of a big content stays).
_KEEP_BUFFER: Final = 1 << 16


class UnkeyableError(Exception):
    """A value ``digest`` cannot key faithfully."""


class _Pickler(pickle.Pickler):
    """Pickles exact ``str``, ``int``, ``float``, ``bool``, ``None``, ``bytes``,
    ``list``, ``tuple``, ``dict``, ``set`` and ``frozenset`` only.

    The C pickler handles those types itself and asks ``reducer_override``
    about every other object (subclasses included), which refuses. Fast mode
    (no memo) makes equal values pickle to equal bytes, whatever objects
    they share; a container that holds itself then recurses until
    ``RecursionError``.
    """

    def reducer_override(self, obj: object) -> NoReturn:
        raise UnkeyableError(type(obj).__name__)


_local = threading.local()


def _pickler() -> tuple[io.BytesIO, _Pickler]:
    state: tuple[io.BytesIO, _Pickler] | None = getattr(_local, "pickler", None)
    if state is None:
        buffer = io.BytesIO()
        pickler = _Pickler(buffer, protocol=5)
        pickler.fast = True
        state = _local.pickler = (buffer, pickler)
    return state


def digest(values: Sequence[Any]) -> bytes | None:
    """A SHA-256 digest of ``values``, faithful to their types, or None.

    The values are pickled (protocol 5, no memo) and hashed: two values share
    a digest only if they are equal and of the same exact types all the way
    down (``str`` vs ``list``, ``1`` vs ``True`` vs ``1.0``, ``tuple`` vs
    ``list`` and dict key order are all told apart). Only the types JSON and
    LangChain messages are made of are understood (see ``_Pickler``);
    anything else, a container that holds itself or nesting too deep to
    pickle gives None, and the value is not cached. The content itself is
    never kept, only hashed.
    """
    return digests([values])[0]


def digests(many: Sequence[Sequence[Any]]) -> list[bytes | None]:
    """``digest`` of each of ``many``, in one pass: they are pickled one after
    the other into one buffer, hashed slice by slice whenever it outgrows
    ``_KEEP_BUFFER`` and at the end."""
    buffer, pickler = _pickler()
    dump, tell, seek, truncate = pickler.dump, buffer.tell, buffer.seek, buffer.truncate
    results: list[bytes | None] = []
    ends: list[int] = []  # where each pending value's pickle ends; -1: not keyable
    grown = False
    try:
        for values in many:
            start = tell()
            try:
                dump(values)
            except (UnkeyableError, RecursionError, ValueError, pickle.PicklingError):
                seek(start)
                truncate()
                ends.append(-1)
                continue
            ends.append(tell())
            if ends[-1] > _KEEP_BUFFER:
                grown = True
                _hash_slices(buffer, ends, results)
        _hash_slices(buffer, ends, results)
    finally:
        if grown:  # no copy of a big content stays
            del _local.pickler
        else:
            seek(0)
            truncate()
    return results


def _hash_slices(buffer: io.BytesIO, ends: list[int], results: list[bytes | None]) -> None:
    """Append the digest of each pickle in ``buffer`` (None where ``ends`` holds
    -1), then empty ``buffer`` and ``ends``."""
    sha256 = hashlib.sha256
    start = 0
    with buffer.getbuffer() as data:
        for end in ends:
            if end < 0:
                results.append(None)
            else:
                results.append(sha256(data[start:end]).digest())
                start = end
    ends.clear()
    buffer.seek(0)
    buffer.truncate()


def fields_keys(
    classes: Sequence[type], fields: Sequence[Sequence[Any]]
) -> list[tuple[type, bytes] | None]:
    """The key of each message of class ``classes[i]`` whose ``message_fields``
    are ``fields[i]``."""
    return [
        None if value is None else (cls, value)
        for cls, value in zip(classes, digests(fields), strict=True)
    ]


def message_key(message: BaseMessage) -> tuple[type, bytes] | None:
    """What a message's count depends on: its class and a 32-byte digest of
    its ``message_fields`` (content, name, ``additional_kwargs``, type, tool
    calls, tool call id, chat role).

    Two messages with equal keys are of the same class and have equal fields
    of the same types, so they get the same count from every counter this
    package ships. None when a field holds a value ``digest`` does not
    understand: such a message is not cached by content.
    """
    return fields_keys([type(message)], [message_fields(message)])[0]
