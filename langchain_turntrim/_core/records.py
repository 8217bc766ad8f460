"""The spec on plain records (``plan_trim``, ``trim_history``), and the checks
every entry point shares, with how their errors name a value."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from langchain_turntrim._core.turns import CONTINUE, PINNED, REPLY, START, TrimPlan, group, plan

__all__ = [
    "ROLE_KINDS",
    "check_count",
    "check_rate",
    "check_trim_to",
    "describe",
    "plan_trim",
    "shown",
    "trim_history",
]

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60


def shown(value: object) -> str:
    """``str 'abc'``: a value's type and a short repr, for an error message."""
    try:
        text = _SHORT.repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = "(unprintable)"
    return f"{type(value).__name__} {text}"


def describe(index: int, message: object) -> str:
    """``messages[3] (id 'abc')``: how every error names a message."""
    try:
        ident = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
    except Exception:  # noqa: BLE001 - an odd mapping: name the index alone
        ident = None
    return f"messages[{index}]" + (f" (id {_SHORT.repr(ident)})" if ident is not None else "")


def check_count(value: object, name: str = "max_tokens") -> int:
    """``value`` if it is an int >= 0 (not a bool), else ``TypeError``/``ValueError``."""
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"{name} must be an int, got {shown(value)}"
        raise TypeError(msg)
    if value < 0:
        msg = f"{name} must be >= 0, got {value}"
        raise ValueError(msg)
    return int(value)


def check_rate(value: object, name: str, *, positive: bool = False) -> float:
    """``value`` as a float if it is a finite number >= 0 (> 0 when ``positive``)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        msg = f"{name} must be a number, got {shown(value)}"
        raise TypeError(msg)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        msg = f"{name} must be finite and {'> 0' if positive else '>= 0'}, got {value!r}"
        raise ValueError(msg)
    return float(value)


#: Counts past this are never multiplied by a float (which would overflow).
_FLOATS: Final = 2**1000


def scaled(count: int, factor: float) -> int:
    """``count * factor`` rounded up; a count past any float stays as it is."""
    return math.ceil(count * factor) if count < _FLOATS else count


def check_trim_to(trim_to: object, max_tokens: int) -> int | None:
    """``trim_to`` if it is None or an int from 0 to ``max_tokens``."""
    if trim_to is None:
        return None
    value = check_count(trim_to, "trim_to")
    if value > max_tokens:
        msg = f"trim_to ({value}) must be <= max_tokens ({max_tokens})"
        raise ValueError(msg)
    return value


#: The roles a record may have, and the turn kind of each.
ROLE_KINDS: Final[Mapping[str, int]] = {
    "system": PINNED,
    "developer": PINNED,
    "user": START,
    "assistant": REPLY,
    "tool": CONTINUE,
    "function": CONTINUE,
}


def plan_trim(
    messages: Sequence[Mapping[str, Any]], max_tokens: int, *, trim_to: int | None = None
) -> TrimPlan:
    """Check ``messages`` and plan their trim to ``max_tokens``.

    Each message is a mapping with a ``"role"`` (one of ``ROLE_KINDS``) and
    ``"tokens"`` (an int >= 0); its ``"id"`` names it in errors. Bad input
    raises ``TypeError``/``ValueError`` naming the index, the id and the field.
    """
    check_count(max_tokens)
    check_trim_to(trim_to, max_tokens)
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        msg = f"messages must be a sequence of mappings, got {type(messages).__name__}"
        raise TypeError(msg)
    checked = [_checked(i, message) for i, message in enumerate(messages)]
    kinds, tokens = [kind for kind, _ in checked], [cost for _, cost in checked]
    return plan(
        group(kinds), lambda indices: [tokens[i] for i in indices], max_tokens, trim_to=trim_to
    )


def _checked(index: int, message: object) -> tuple[int, int]:
    if not isinstance(message, Mapping):
        msg = f"messages[{index}] must be a mapping, got {type(message).__name__}"
        raise TypeError(msg)
    where = describe(index, message)
    for key in ("role", "tokens"):
        if key not in message:
            msg = f"{where} has no {key!r} field"
            raise ValueError(msg)
    role = message["role"]
    if type(role) is not str:
        msg = f"{where}: 'role' must be a str, got {shown(role)}"
        raise TypeError(msg)
    if role not in ROLE_KINDS:
        accepted = ", ".join(map(repr, ROLE_KINDS))
        msg = f"{where}: unknown 'role' {role!r}; accepted roles are {accepted}"
        raise ValueError(msg)
    return ROLE_KINDS[role], check_count(message["tokens"], f"{where}: 'tokens'")


def trim_history(
    messages: Sequence[Mapping[str, Any]], max_tokens: int, *, trim_to: int | None = None
) -> list[Mapping[str, Any]]:
    """Keep the newest whole turns that fit ``max_tokens``, and every system message.

    Returns a new list of the original records, in order; the input is never
    changed.

    Examples:
        >>> msgs = [
        ...     {"id": "s0", "role": "system", "tokens": 20},
        ...     {"id": "u1", "role": "user", "tokens": 30},
        ...     {"id": "a1", "role": "assistant", "tokens": 30},
        ...     {"id": "u2", "role": "user", "tokens": 25},
        ...     {"id": "a2", "role": "assistant", "tokens": 25},
        ... ]
        >>> [m["id"] for m in trim_history(msgs, 100)]
        ['s0', 'u2', 'a2']
    """
    return plan_trim(messages, max_tokens, trim_to=trim_to).select(messages)
