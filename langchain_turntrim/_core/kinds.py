"""The turn kinds a message can have, the roles that map to them, and the
validators every count and every message error share.

Five kinds:

* ``PINNED`` (system and developer messages): never dropped, paid for first;
* ``START`` (user messages): each one opens a turn;
* ``REPLY`` (assistant messages): extends the open turn, and marks the end of
  a model call's input: the history before the newest ``REPLY`` is what the
  previous model call was sent;
* ``CONTINUE`` (tool and function results): extend the open turn;
* ``ANCHOR`` (a summary standing for dropped history): pinned like ``PINNED``
  and, like ``START``, opening a turn of the messages that follow it, so they
  are not discarded as messages before the first user message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress
from typing import Final

from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "ANCHOR",
    "CHAT_ROLE_KINDS",
    "CONTINUE",
    "PINNED",
    "REPLY",
    "ROLE_KINDS",
    "START",
    "check_count",
    "check_kinds",
    "check_trim_to",
    "describe",
    "positions",
    "request_order",
]

PINNED: Final = 0
START: Final = 1
CONTINUE: Final = 2
ANCHOR: Final = 3
REPLY: Final = 4

#: The roles ``trim_history`` accepts and what each one does.
ROLE_KINDS: Final[Mapping[str, int]] = {
    "system": PINNED,
    "developer": PINNED,
    "user": START,
    "assistant": REPLY,
    "tool": CONTINUE,
    "function": CONTINUE,
}
#: The five kinds, as ``check_kinds`` names them.
_KIND_NAMES: Final = {
    PINNED: "PINNED",
    START: "START",
    CONTINUE: "CONTINUE",
    ANCHOR: "ANCHOR",
    REPLY: "REPLY",
}
_ALIASES: Final = {"user": ("human",), "assistant": ("ai",)}
#: How a ``ChatMessage`` (or an OpenAI-style dict) is treated, by its ``role``:
#: the core's roles, each followed by LangChain's spelling of it (``human``, ``ai``).
CHAT_ROLE_KINDS: Final[Mapping[str, int]] = {
    name: kind for role, kind in ROLE_KINDS.items() for name in (role, *_ALIASES.get(role, ()))
}


#: Below this share of matches, ``positions`` finds them one by one.
_SPARSE: Final = 16
_tables: dict[tuple[int, ...], bytes] = {}


def positions(marks: bytes, *wanted: int) -> list[int]:
    """The indices of ``marks`` (a history's kinds as bytes, ``bytes(kinds)``)
    holding one of the kinds ``wanted``, found in C: a few matches one by one
    (``bytes.find``), many in one pass; neither compares an object per message."""
    table = _tables.get(wanted)
    if table is None:
        table = _tables[wanted] = bytes(1 if i in wanted else 0 for i in range(256))
    flags = marks.translate(table)
    count = flags.count(1)
    if count * _SPARSE > len(flags):
        return list(compress(range(len(flags)), flags))
    found: list[int] = []
    append, find = found.append, flags.find
    i = find(1)
    while i >= 0:
        append(i)
        i = find(1, i + 1)
    return found


def request_order(indices: Sequence[int], kinds: Sequence[int]) -> list[int]:
    """``indices`` in the order a request to a provider puts them: the system
    (``PINNED``) messages first, then every other one in order (a summary,
    ``ANCHOR``, is a user message: it keeps its place in the conversation)."""
    return [i for i in indices if kinds[i] == PINNED] + [i for i in indices if kinds[i] != PINNED]


def check_count(value: object, name: str = "max_tokens") -> int:
    """Return ``value`` as an exact int if it is a non-negative int (not a
    bool), else raise ``TypeError``/``ValueError`` naming it ``name``.

    The one rule for every count and size the package accepts (budgets,
    reserves, cache sizes, token counts), with one message style. An ``int``
    subclass is read as the int it holds: its own comparisons are never used.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"{name} must be an int, got {type(value).__name__} {safe_repr(value, 80)}"
        raise TypeError(msg)
    exact = int.__int__(value)
    if exact < 0:
        msg = f"{name} must be >= 0, got {exact}"
        raise ValueError(msg)
    return exact


def check_trim_to(trim_to: object, max_tokens: int) -> int | None:
    """``trim_to`` if it is None or an int from 0 to ``max_tokens``, else raise."""
    if trim_to is None:
        return None
    value = check_count(trim_to, "trim_to")
    if value > max_tokens:
        msg = f"trim_to ({value}) must be <= max_tokens ({max_tokens})"
        raise ValueError(msg)
    return value


def describe(index: int, message: object) -> str:
    """``messages[3] (id 'abc')``: how every error names a message, a mapping's
    ``"id"`` or an object's ``id`` attribute. Never raises."""
    try:
        ident = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
    except Exception:  # noqa: BLE001 - a mapping or property that fails: name the index alone
        ident = None
    return f"messages[{index}]" + (f" (id {safe_repr(ident, 80)})" if ident is not None else "")


def check_kinds(kinds: Sequence[int], size: int) -> list[int]:
    """``kinds`` as a list, checked to hold one turn kind per message of ``size``.

    A planner given its messages' kinds (``trimmer.planner.plan(messages,
    kinds, max_tokens)``) reads them beside the messages: a list of another
    length, or a value that is not a kind, raises ``ValueError``/``TypeError``
    naming the lengths or the index, instead of a plan of the wrong messages.
    """
    if isinstance(kinds, (str, bytes, bytearray)) or not isinstance(kinds, Sequence):
        msg = f"kinds must be a sequence of turn kinds (or None), got {type(kinds).__name__}"
        raise TypeError(msg)
    listed = list(kinds)
    if len(listed) != size:
        msg = (
            f"kinds has {len(listed)} items for {size} messages: "
            "expected one turn kind per message (or None)"
        )
        raise ValueError(msg)
    if all(type(kind) is int for kind in listed) and set(listed) <= _KIND_NAMES.keys():
        return listed
    accepted = ", ".join(f"{name}={kind}" for kind, name in sorted(_KIND_NAMES.items()))
    for i, kind in enumerate(listed):
        if type(kind) is not int:
            what = f"{type(kind).__name__} {safe_repr(kind, 80)}"
            msg = f"kinds[{i}] must be an int, one of {accepted}; got {what}"
            raise TypeError(msg)
        if kind not in _KIND_NAMES:
            msg = f"kinds[{i}] must be one of {accepted}; got {kind}"
            raise ValueError(msg)
    raise AssertionError  # pragma: no cover - the loop found it
