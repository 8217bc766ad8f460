"""The turn-atomic trimming algorithm, on plain data.

This module imports nothing from LangChain (only ``_safe_repr``, which imports
nothing either). It knows three kinds of message:

* ``PINNED`` (system and developer messages): never dropped, paid for first;
* ``START`` (user messages): each one opens a turn;
* ``CONTINUE`` (assistant, tool and function messages): extend the open turn;
* ``ANCHOR`` (a summary standing for dropped history): pinned like ``PINNED``
  and, like ``START``, opening a turn of the messages that follow it, so they
  are not discarded as messages before the first user message.

A turn runs from a ``START`` message up to, not including, the next one.
``CONTINUE`` messages before the first ``START`` belong to no turn and are
always discarded. Whole turns are dropped from the oldest end until the pinned
cost plus the kept turns fits the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from langchain_turntrim._plan import TrimPlan, plan_turns
from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "ANCHOR",
    "CHAT_ROLE_KINDS",
    "CONTINUE",
    "PINNED",
    "ROLE_KINDS",
    "START",
    "Grouping",
    "TrimPlan",
    "check_count",
    "check_trim_to",
    "describe",
    "plan_costs",
    "plan_trim",
    "trim_history",
]

PINNED: Final = 0
START: Final = 1
CONTINUE: Final = 2
ANCHOR: Final = 3

#: The roles ``trim_history`` accepts and what each one does.
ROLE_KINDS: Final[Mapping[str, int]] = {
    "system": PINNED,
    "developer": PINNED,
    "user": START,
    "assistant": CONTINUE,
    "tool": CONTINUE,
    "function": CONTINUE,
}
_ACCEPTED_ROLES: Final = ", ".join(repr(role) for role in ROLE_KINDS)
_ALIASES: Final = {"user": ("human",), "assistant": ("ai",)}
#: How a ``ChatMessage`` (or an OpenAI-style dict) is treated, by its ``role``:
#: the core's roles, each followed by LangChain's spelling of it (``human``, ``ai``).
CHAT_ROLE_KINDS: Final[Mapping[str, int]] = {
    name: kind for role, kind in ROLE_KINDS.items() for name in (role, *_ALIASES.get(role, ()))
}


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


class Grouping:
    """The grouping pass over a history's messages, resumable.

    ``extend`` feeds it more messages (their kinds and costs, already
    validated), in place; ``plan`` decides what fits a budget. A history
    planned once and then appended to is grouped again only for what was
    appended: this is what the warm path keeps of each history it planned.
    """

    __slots__ = ("current", "orphan", "pinned", "size", "starts", "system", "turn_costs")

    def __init__(self) -> None:
        self.size = 0
        self.system = 0  # the pinned messages' tokens
        self.orphan = 0  # the tokens before the first turn
        self.current = 0  # the open (newest) turn's tokens so far
        self.starts: list[int] = []
        self.turn_costs: list[int] = []  # the closed turns'
        self.pinned: list[int] = []

    def extend(self, kinds: Sequence[int], costs: Sequence[int]) -> None:
        """Group ``len(kinds)`` more messages: one pass, O(len(kinds))."""
        system, orphan, current = self.system, self.orphan, self.current
        starts, turn_costs, pinned = self.starts, self.turn_costs, self.pinned
        for i, kind, cost in zip(
            range(self.size, self.size + len(kinds)), kinds, costs, strict=True
        ):
            if kind == START:
                if starts:
                    turn_costs.append(current)
                starts.append(i)
                current = cost
            elif kind == PINNED:
                system += cost
                pinned.append(i)
            elif kind == ANCHOR:  # pinned, and the start of a turn that costs nothing itself
                system += cost
                pinned.append(i)
                if starts:
                    turn_costs.append(current)
                starts.append(i)
                current = 0
            elif starts:
                current += cost
            else:
                orphan += cost
        self.size += len(kinds)
        self.system, self.orphan, self.current = system, orphan, current

    def plan(self, max_tokens: int, overhead: int = 0, trim_to: int | None = None) -> TrimPlan:
        """The plan of the messages grouped so far; O(turns), and nothing is changed."""
        turn_costs = [*self.turn_costs, self.current] if self.starts else []
        return plan_turns(
            self.size,
            self.starts,
            turn_costs,
            self.pinned,
            self.system + overhead,
            overhead,
            self.orphan,
            max_tokens,
            trim_to,
        )


def plan_costs(
    kinds: Sequence[int],
    costs: Sequence[int],
    max_tokens: int,
    overhead: int = 0,
    trim_to: int | None = None,
) -> TrimPlan:
    """Plan a trim from each message's kind and cost (already validated).

    One grouping pass and one backward pass over the turns: O(n).
    """
    grouping = Grouping()
    grouping.extend(kinds, costs)
    return grouping.plan(max_tokens, overhead, trim_to)


def describe(index: int, message: object) -> str:
    """``messages[3] (id 'abc')``: how every error names a message, a mapping's
    ``"id"`` or an object's ``id`` attribute. Never raises."""
    try:
        ident = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
    except Exception:  # noqa: BLE001 - a mapping or property that fails: name the index alone
        ident = None
    return f"messages[{index}]" + (f" (id {safe_repr(ident, 80)})" if ident is not None else "")


def plan_trim(
    messages: Sequence[Mapping[str, Any]], max_tokens: int, *, trim_to: int | None = None
) -> TrimPlan:
    """Validate ``messages`` and plan their trim to ``max_tokens``.

    With ``trim_to``, a history over budget is cut down to about ``trim_to``
    tokens at a turn boundary that later, longer versions of the history keep
    (see ``_stable``), instead of just under ``max_tokens``.

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
    return plan_turns(
        len(messages), starts, turn_costs, pinned, system, 0, orphan, max_tokens, trim_to
    )


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
