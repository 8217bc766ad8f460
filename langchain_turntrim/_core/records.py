"""The plain-record API: ``plan_trim`` and ``trim_history`` on mappings of
``role`` and ``tokens``, validated and grouped in one pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from langchain_turntrim._core.grouping import previous_call
from langchain_turntrim._core.kinds import (
    PINNED,
    REPLY,
    ROLE_KINDS,
    START,
    check_count,
    check_trim_to,
    describe,
)
from langchain_turntrim._core.plan import TrimPlan, plan_turns
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["plan_trim", "trim_history"]

_ACCEPTED_ROLES: Final = ", ".join(repr(role) for role in ROLE_KINDS)


def plan_trim(
    messages: Sequence[Mapping[str, Any]], max_tokens: int, *, trim_to: int | None = None
) -> TrimPlan:
    """Validate ``messages`` and plan their trim to ``max_tokens``.

    With ``trim_to``, a history over budget is cut down to about ``trim_to``
    tokens at a turn boundary that later, longer versions of the history keep
    (see ``stable``), instead of just under ``max_tokens``.

    Each message is a mapping with ``"role"`` (one of ``ROLE_KINDS``) and
    ``"tokens"`` (a non-negative int); ``"id"`` is used in error messages and
    other keys are ignored. Raises ``TypeError``/``ValueError`` naming the
    offending index, id and field before anything is returned.
    """
    check_count(max_tokens)
    check_trim_to(trim_to, max_tokens)
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes, bytearray)):
        msg = f"messages must be a sequence of mappings, got {type(messages).__name__}"
        raise TypeError(msg)
    kinds = ROLE_KINDS
    system = orphan = current = 0
    starts: list[int] = []
    turn_costs: list[int] = []
    pinned: list[int] = []
    # Validation and grouping are fused into one pass: this loop is the hot path.
    for i, message in enumerate(messages):
        try:
            role = message["role"]
            tokens = message["tokens"]
            kind = kinds[role]
        except (KeyError, TypeError):
            kind, tokens = _check_message(i, message)
        if type(tokens) is not int or tokens < 0 or type(role) is not str:
            kind, tokens = _check_message(i, message)
        if kind == START:
            if starts:
                turn_costs.append(current)
            starts.append(i)
            current = tokens
        elif kind == PINNED:
            system += tokens
            pinned.append(i)
        elif starts:
            current += tokens
        else:
            orphan += tokens
    if starts:
        turn_costs.append(current)
    previous = None
    reply = _newest_reply(messages, starts[0] if starts else len(messages))
    if reply >= 0:
        tail = [_check_message(i, messages[i]) for i in range(reply, len(messages))]
        previous = previous_call(
            starts,
            turn_costs,
            system,
            len(messages),
            reply,
            [kind for kind, _ in tail],
            [tokens for _, tokens in tail],
        )
    return plan_turns(
        len(messages), starts, turn_costs, pinned, system, 0, orphan, max_tokens, trim_to, previous
    )


def _newest_reply(messages: Sequence[Mapping[str, Any]], first_turn: int) -> int:
    """The index of the newest assistant message after ``first_turn`` (-1: none),
    looked for from the end (the hot loop above does not track it). The
    messages were validated: their roles are known."""
    for i in range(len(messages) - 1, first_turn, -1):
        if ROLE_KINDS[str.__str__(messages[i]["role"])] == REPLY:
            return i
    return -1


def _check_message(index: int, message: object) -> tuple[int, int]:
    """Return a message's kind and tokens, or raise the precise error naming it."""
    if not isinstance(message, Mapping):
        msg = f"messages[{index}] must be a mapping, got {type(message).__name__}"
        raise TypeError(msg)
    where = describe(index, message)
    for field in ("role", "tokens"):
        if field not in message:
            msg = f"{where} has no {field!r} field"
            raise ValueError(msg)
    role = message["role"]
    if not isinstance(role, str):
        what = f"{type(role).__name__} {safe_repr(role, 80)}"
        msg = f"{where}: 'role' must be a str, got {what}"
        raise TypeError(msg)
    role = str.__str__(role)  # a str subclass as the text it holds, whatever it compares like
    if role not in ROLE_KINDS:
        msg = f"{where}: unknown 'role' {role!r}; accepted roles are {_ACCEPTED_ROLES}"
        raise ValueError(msg)
    tokens = message["tokens"]
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        what = f"{type(tokens).__name__} {safe_repr(tokens, 80)}"
        msg = f"{where}: 'tokens' must be an int, got {what}"
        raise TypeError(msg)
    exact = int.__int__(tokens)  # an int subclass as the int it holds
    if exact < 0:
        msg = f"{where}: 'tokens' must be >= 0, got {exact}"
        raise ValueError(msg)
    return ROLE_KINDS[role], exact


def trim_history(
    messages: Sequence[Mapping[str, Any]], max_tokens: int, *, trim_to: int | None = None
) -> list[Mapping[str, Any]]:
    """Keep the newest whole turns that fit ``max_tokens``, plus every system message.

    Returns a new list of the original mapping objects in their original order;
    the input is never mutated.

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
