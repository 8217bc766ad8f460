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

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from langchain_turntrim._safe_repr import safe_repr
from langchain_turntrim._stable import stable_first

__all__ = [
    "ANCHOR",
    "CONTINUE",
    "PINNED",
    "ROLE_KINDS",
    "START",
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

_T = TypeVar("_T")


@dataclass(frozen=True)
class TrimPlan:
    """What a trim keeps and drops, by position in the input.

    Attributes:
        size: Number of input messages.
        keep_from: Index where the first kept turn starts (``size`` when no turn
            is kept). Every message from here on is kept.
        pinned: Indices of all pinned (system) messages, in order.
        turns: Number of turns in the input.
        dropped_turns: Number of turns dropped, oldest first.
        system_tokens: Tokens of all pinned messages.
        overhead_tokens: A per-request constant counted once (0 for plain
            records; e.g. 3 for OpenAI's reply priming).
        tokens_before: Tokens of the whole input, overhead included.
        tokens_after: Tokens of the kept messages, overhead included.
        max_tokens: The budget.
        newest_turn_tokens: Tokens of the newest turn (0 when there is none):
            when it alone does not fit beside the pinned messages, no turn fits.
        newest_turn_start: Index where the newest turn starts (``size`` when
            there is none), whether or not it is kept.
        trim_to: The level a cut trims down to (``None``: just under
            ``max_tokens``, the spec).
        start_moved: Whether the first kept turn differs from the one the same
            history without its newest turn would keep: a prompt-cache bust
            (False when neither keeps a turn).
    """

    size: int
    keep_from: int
    pinned: tuple[int, ...]
    turns: int
    dropped_turns: int
    system_tokens: int
    overhead_tokens: int
    tokens_before: int
    tokens_after: int
    max_tokens: int
    newest_turn_tokens: int
    newest_turn_start: int
    trim_to: int | None = None
    start_moved: bool = False

    @property
    def budget_met(self) -> bool:
        """False only when the pinned messages alone exceed the budget."""
        return self.tokens_after <= self.max_tokens

    @property
    def kept_turns(self) -> int:
        return self.turns - self.dropped_turns

    @property
    def kept(self) -> tuple[int, ...]:
        """Indices of the kept messages, ascending."""
        return self._pinned_before() + tuple(range(self.keep_from, self.size))

    @property
    def dropped_count(self) -> int:
        """How many messages are dropped (``len(dropped)`` without building it)."""
        return self.keep_from - bisect_left(self.pinned, self.keep_from)

    @property
    def dropped(self) -> tuple[int, ...]:
        """Indices of the dropped messages, ascending."""
        pinned = set(self.pinned)
        return tuple(i for i in range(self.keep_from) if i not in pinned)

    def select(self, items: Sequence[_T]) -> list[_T]:
        """The kept items of ``items`` (the sequence the plan was made for)."""
        if len(items) != self.size:
            msg = f"plan is for {self.size} messages, got {len(items)}"
            raise ValueError(msg)
        kept = [items[i] for i in self._pinned_before()]
        kept.extend(items[self.keep_from :])
        return kept

    def _pinned_before(self) -> tuple[int, ...]:
        if self.keep_from == self.size:
            return self.pinned
        return tuple(i for i in self.pinned if i < self.keep_from)


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
    system = overhead
    orphan = 0
    starts: list[int] = []
    turn_costs: list[int] = []
    pinned: list[int] = []
    current = 0
    for i, kind in enumerate(kinds):
        if kind == START:
            if starts:
                turn_costs.append(current)
            starts.append(i)
            current = costs[i]
        elif kind == PINNED:
            system += costs[i]
            pinned.append(i)
        elif kind == ANCHOR:  # pinned, and the start of a turn that costs nothing itself
            system += costs[i]
            pinned.append(i)
            if starts:
                turn_costs.append(current)
            starts.append(i)
            current = 0
        elif starts:
            current += costs[i]
        else:
            orphan += costs[i]
    if starts:
        turn_costs.append(current)
    return _finish(
        len(kinds), starts, turn_costs, pinned, system, overhead, orphan, max_tokens, trim_to
    )


def _finish(
    size: int,
    starts: list[int],
    turn_costs: list[int],
    pinned: list[int],
    system: int,
    overhead: int,
    orphan: int,
    max_tokens: int,
    trim_to: int | None = None,
) -> TrimPlan:
    room = max_tokens - system
    n = len(turn_costs)
    first, kept_cost, previous = _first_kept(turn_costs, room, max_tokens, trim_to)
    total_turns = sum(turn_costs) if first else kept_cost
    return TrimPlan(
        size=size,
        keep_from=starts[first] if first < len(starts) else size,
        pinned=tuple(pinned),
        turns=len(starts),
        dropped_turns=first,
        system_tokens=system - overhead,
        overhead_tokens=overhead,
        tokens_before=system + orphan + total_turns,
        tokens_after=system + kept_cost,
        max_tokens=max_tokens,
        newest_turn_tokens=turn_costs[-1] if turn_costs else 0,
        newest_turn_start=starts[-1] if starts else size,
        trim_to=trim_to,
        start_moved=first != previous and (first < n or previous < n - 1),
    )


def _first_kept(
    turn_costs: Sequence[int], room: int, max_tokens: int, trim_to: int | None
) -> tuple[int, int, int]:
    """The first kept turn, the kept turns' cost, and the first turn the same
    history without its newest turn would keep."""
    # Dropping the oldest turn while over budget keeps the longest run of
    # newest turns that fits; costs are non-negative, so walk back from the end.
    n = len(turn_costs)
    kept_cost = 0
    first = n
    while first > 0 and kept_cost + turn_costs[first - 1] <= room:
        first -= 1
        kept_cost += turn_costs[first]
    # Without the newest turn, the run can only reach further back: extend it
    # (a step or two, not a second walk).
    previous, previous_cost = first, kept_cost - turn_costs[n - 1] if first < n else 0
    if first == n:
        previous = n - 1
    while previous > 0 and previous_cost + turn_costs[previous - 1] <= room:
        previous -= 1
        previous_cost += turn_costs[previous]
    if trim_to is not None and trim_to < max_tokens:
        step = max_tokens - trim_to
        if first:
            stable = stable_first(turn_costs, room, step)
            if stable is not None:
                first, kept_cost = stable, sum(turn_costs[stable:])
        if previous:
            stable = stable_first(turn_costs[: n - 1], room, step)
            previous = previous if stable is None else stable
    return first, kept_cost, max(previous, 0)


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
    return _finish(
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
