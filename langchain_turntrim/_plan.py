"""``TrimPlan``, and how one is made from turn costs: plain data and arithmetic.

This module imports nothing from LangChain. ``_core`` groups messages into
turns; ``plan_turns`` decides, from the turns' costs, which newest ones fit.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from langchain_turntrim._stable import stable_first

__all__ = ["TrimPlan", "plan_turns"]

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
    def overflowed(self) -> bool:
        """The pinned messages alone exceed the budget, or not even the newest
        turn fits beside them: where ``on_overflow`` decides what happens."""
        return not self.budget_met or (self.turns > 0 and self.dropped_turns == self.turns)

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
        return tuple(self.select_dropped(range(self.size)))

    def select_dropped(self, items: Sequence[_T]) -> list[_T]:
        """The dropped items of ``items`` (the sequence the plan was made for),
        oldest first: the runs between pinned messages, sliced."""
        if len(items) != self.size:
            msg = f"plan is for {self.size} messages, got {len(items)}"
            raise ValueError(msg)
        dropped: list[_T] = []
        start = 0
        for i in self._pinned_before():
            dropped.extend(items[start:i])
            start = i + 1
        dropped.extend(items[start : self.keep_from])
        return dropped

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


def plan_turns(
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
