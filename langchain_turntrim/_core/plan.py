"""``TrimPlan``, and how one is made from turn costs: plain data and arithmetic.

``grouping`` groups messages into turns; ``plan_turns`` decides, from the
turns' costs, which newest ones fit, and whether the first kept turn differs
from the one the previous model call kept.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_turntrim._core.depth import Cut, cold_keep, floor_turn
from langchain_turntrim._core.stable import candidates, stable_first

__all__ = ["Previous", "TrimPlan", "plan_turns"]

_T = TypeVar("_T")

#: The history the previous model call was sent (this one before its newest
#: reply), as ``plan_turns`` needs it: its number of turns, the tokens of the
#: last of them, and its pinned tokens (the per-request constant included).
Previous = tuple[int, int, int]


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
        overhead_tokens: Tokens counted once per request: a counter's constant
            (e.g. 3 for OpenAI's reply priming) and the price of the request's
            tool schemas (0 for plain records).
        tokens_before: Tokens of the whole input, overhead included.
        tokens_after: Tokens of the kept messages, overhead included.
        max_tokens: The budget.
        newest_turn_tokens: Tokens of the newest turn (0 when there is none):
            when it alone does not fit beside the pinned messages, no turn fits.
        newest_turn_start: Index where the newest turn starts (``size`` when
            there is none), whether or not it is kept.
        trim_to: The level a cut trims down to (``None``: just under
            ``max_tokens``, the spec).
        start_moved: Whether the first kept turn differs from the one the
            previous model call kept: the previous call was sent this history
            up to its newest assistant message, and a different first kept
            turn means that call's prompt prefix is lost (a prompt-cache
            bust). False when there is no assistant message, or when the
            previous call kept no turn.
        unanswered: The assistant messages whose tool calls have no result
            right after them, by index, with those calls' ids (a planner of
            messages finds them; plain records have none).
        growth: How many tokens the history grew by per model call, over its
            most recent calls (what ``trim_to="auto"`` prices a cut with).
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
    # What is sent, not the cut: two plans of the same cut are the same decision.
    unanswered: tuple[tuple[int, frozenset[str]], ...] = field(default=(), compare=False)
    # No class attribute (a factory): a plan may compute it when read (``compute_later``).
    growth: float = field(default_factory=float, compare=False)

    if not TYPE_CHECKING:  # mypy would take any attribute name as valid

        def __getattr__(self, name: str) -> Any:
            """A figure left to compute when read (``compute_later``)."""
            later = vars(self).get("_later")
            if later is None or name not in later:
                msg = f"{type(self).__name__!r} object has no attribute {name!r}"
                raise AttributeError(msg)
            value = later[name]()
            vars(self)[name] = value
            return value

    def compute_later(self, **figures: Callable[[], Any]) -> None:
        """Leave the fields ``figures`` names to compute when first read (a
        plan made newest-first counts what it reads: ``newest.plan_newest``)."""
        state = vars(self)
        for name in figures:
            del state[name]
        state["_later"] = {**state.get("_later", {}), **figures}

    def replaced(self, **changes: Any) -> TrimPlan:
        """``dataclasses.replace(self, **changes)``, leaving the figures still
        to compute uncomputed."""
        plan = object.__new__(TrimPlan)
        vars(plan).update(vars(self))
        vars(plan).update(changes)
        return plan

    def __getstate__(self) -> dict[str, Any]:
        """Every figure computed: what is left to compute cannot be pickled."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

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

    @property
    def removed(self) -> tuple[int, ...]:
        """Indices of the messages a state trim deletes (see ``removed_until``)."""
        end = self.removed_until
        return tuple(self.select_dropped(range(self.size), end)) if end else ()

    @property
    def removed_until(self) -> int:
        """Where a state trim stops deleting: the non-pinned messages before
        this index go. Nothing goes while every turn is kept (messages before
        the first user message go only with the first dropped turn), and the
        newest turn never goes, even when it does not fit."""
        if not self.dropped_turns:
            return 0
        return min(self.keep_from, self.newest_turn_start)

    def select_dropped(self, items: Sequence[_T], end: int | None = None) -> list[_T]:
        """The dropped items of ``items`` (the sequence the plan was made for),
        oldest first, up to index ``end`` (default: every dropped item): the
        runs between pinned messages, sliced."""
        if len(items) != self.size:
            msg = f"plan is for {self.size} messages, got {len(items)}"
            raise ValueError(msg)
        stop = self.keep_from if end is None else min(end, self.keep_from)
        dropped: list[_T] = []
        start = 0
        for i in self.pinned:
            if i >= stop:
                break
            dropped.extend(items[start:i])
            start = i + 1
        dropped.extend(items[start:stop])
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
    turn_costs: Sequence[int],
    pinned: list[int],
    system: int,
    overhead: int,
    orphan: int,
    max_tokens: int,
    trim_to: int | Cut | None = None,
    previous: Previous | None = None,
    growth: float = 0.0,
    *,
    lazy: bool = False,
) -> TrimPlan:
    """The plan of turns costing ``turn_costs`` (starting at ``starts``) beside
    ``system`` pinned tokens (``overhead`` included) and ``orphan`` tokens
    before the first turn; ``previous`` is the previous model call's history.
    ``trim_to`` is a level, or a ``Cut`` (a level that may cut now, or stay
    at or after a floor). ``lazy``: ``tokens_before`` is left for the caller
    to set (``compute_later``), so older turns' costs are not read.
    """
    room = max_tokens - system
    n = len(turn_costs)
    cut, level = (trim_to, trim_to.level) if isinstance(trim_to, Cut) else (None, trim_to)
    # Dropping the oldest turn while over budget keeps the longest run of
    # newest turns that fits; costs are non-negative, so walk back from the end.
    greedy, greedy_cost = _walk_back(turn_costs, n, 0, room)
    first, kept_cost = _stable(turn_costs, greedy, greedy_cost, room, max_tokens, level)
    if cut is not None and first < n:
        first, kept_cost = _deeper(
            turn_costs, starts, greedy, first, kept_cost, room, max_tokens, cut
        )
    keep_from = starts[first] if first < n else size
    moved = False
    if previous is not None and previous[0]:
        before = _previous_first(turn_costs, first, kept_cost, previous, max_tokens, level)
        if cut is not None and cut.floor and before < previous[0]:
            # The previous call stayed at the same floor.
            floor = floor_turn(starts, cut.floor)
            before = max(before, floor) if floor < previous[0] else before
        moved = before < previous[0] and starts[before] != keep_from
    before = 0 if lazy else system + orphan + (sum(turn_costs) if first else kept_cost)
    return _plan(
        size=size,
        keep_from=keep_from,
        pinned=tuple(pinned),
        turns=len(starts),
        dropped_turns=first,
        system_tokens=system - overhead,
        overhead_tokens=overhead,
        tokens_before=before,
        tokens_after=system + kept_cost,
        max_tokens=max_tokens,
        newest_turn_tokens=turn_costs[-1] if turn_costs else 0,
        newest_turn_start=starts[-1] if starts else size,
        trim_to=level,
        start_moved=moved,
        unanswered=(),
        growth=growth,
    )


def _plan(**fields: object) -> TrimPlan:
    """``TrimPlan(**fields)``, every field given, without the frozen dataclass's
    per-field ``object.__setattr__`` (a plan is made at every trim)."""
    plan = object.__new__(TrimPlan)
    vars(plan).update(fields)
    return plan


def _deeper(
    turn_costs: Sequence[int],
    starts: Sequence[int],
    greedy: int,
    first: int,
    cost: int,
    room: int,
    max_tokens: int,
    cut: Cut,
) -> tuple[int, int]:
    """The stable cut ``first`` moved by ``cut``: to its floor while what
    follows the floor fits (the floor is at or after the greedy cut
    ``greedy``: the previous call's cut stays), then, when ``cold``, to the
    deepest candidate ``cold_keep`` allows. Never before ``greedy``: what
    is kept still fits."""
    chosen = first
    if cut.floor:
        floor = floor_turn(starts, cut.floor)
        if floor >= greedy:
            chosen = floor
    if cut.cold and cut.level < max_tokens:
        total = sum(turn_costs)
        kept = total - sum(turn_costs[:chosen])
        least = cold_keep(kept, cut.level - (max_tokens - room), room, cut.hold)
        for k, before in candidates(turn_costs, max_tokens - cut.level):
            if k > chosen and total - before >= least:
                chosen = k
    if chosen == first:
        return first, cost
    return chosen, sum(turn_costs[chosen:])


def _walk_back(turn_costs: Sequence[int], first: int, cost: int, room: int) -> tuple[int, int]:
    """Extend the kept run ``turn_costs[first:]`` (costing ``cost``) towards
    older turns while it fits ``room``."""
    while first > 0 and cost + turn_costs[first - 1] <= room:
        first -= 1
        cost += turn_costs[first]
    return first, cost


def _stable(
    turn_costs: Sequence[int],
    first: int,
    cost: int,
    room: int,
    max_tokens: int,
    trim_to: int | None,
) -> tuple[int, int]:
    """The greedy cut ``first`` moved to the stable cut ``trim_to`` asks for."""
    if first and trim_to is not None and trim_to < max_tokens:
        stable = stable_first(turn_costs, room, max_tokens - trim_to)
        if stable is not None:
            return stable, sum(turn_costs[stable:])
    return first, cost


def _previous_first(
    turn_costs: Sequence[int],
    first: int,
    kept_cost: int,
    previous: Previous,
    max_tokens: int,
    trim_to: int | None,
) -> int:
    """The first turn the previous model call kept (``previous[0]`` when none).

    Its history is this one without the messages after its newest reply: the
    same turns up to its last one, which is the same or shorter, and no more
    pinned tokens. So its greedy run reaches at least as far back as this
    one's: extend it from here rather than walking every turn again.
    """
    turns, last, system = previous
    room = max_tokens - system
    if first <= turns - 1:
        start, cost = first, kept_cost - sum(turn_costs[turns - 1 :]) + last
    elif last <= room:
        start, cost = turns - 1, last
    else:
        return turns
    before, cost = _walk_back(turn_costs, start, cost, room)
    if before and trim_to is not None and trim_to < max_tokens:
        costs = list(turn_costs[: turns - 1])
        costs.append(last)
        before = _stable(costs, before, cost, room, max_tokens, trim_to)[0]
    return before
