"""The turn rule and the plan it makes, on turn kinds and costs (no LangChain).

A message is of one of five kinds:

* ``PINNED`` (system, developer): never dropped, paid for first;
* ``START`` (a user message): opens a turn;
* ``CONTINUE`` (a tool result): continues the open turn;
* ``REPLY`` (an assistant message): continues it, and ends a model call's input;
* ``ANCHOR`` (a summary standing for dropped history): pinned, and opens a turn.

``group`` is the rule, written once: a turn runs from a ``START`` or ``ANCHOR``
up to the next one; non-pinned messages before the first turn belong to none.
``plan`` keeps the newest whole turns that fit beside the pinned messages,
reading the turns' costs newest first: the older ones are never counted.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Final, TypeVar

from langchain_turntrim._core.stable import Cut, candidates, moved_cut

__all__ = [
    "ANCHOR",
    "CONTINUE",
    "PINNED",
    "REPLY",
    "START",
    "Count",
    "TrimPlan",
    "Turns",
    "group",
    "plan",
]

PINNED: Final = 0
START: Final = 1
CONTINUE: Final = 2
REPLY: Final = 3
ANCHOR: Final = 4
_PINNED: Final = frozenset((PINNED, ANCHOR))
_OPENS: Final = frozenset((START, ANCHOR))

_T = TypeVar("_T")
#: The costs of the messages at some indices, in order (each index asked once).
Count = Callable[[Sequence[int]], Sequence[int]]


@dataclass(frozen=True)
class Turns:
    """A history's messages grouped into turns: the one place the rule lives."""

    kinds: tuple[int, ...]
    #: Indices of the pinned messages (``PINNED`` and ``ANCHOR``).
    pinned: tuple[int, ...]
    #: Index of each turn's first message (a ``START`` or an ``ANCHOR``).
    starts: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.kinds)

    def span(self, turn: int) -> range:
        """The indices from the turn's first message to the next turn's."""
        starts = self.starts
        return range(starts[turn], starts[turn + 1] if turn + 1 < len(starts) else self.size)

    def members(self, turn: int) -> Sequence[int]:
        """The turn's messages that are not pinned: what it costs."""
        span = self.span(turn)
        if bisect_left(self.pinned, span.start) == bisect_left(self.pinned, span.stop):
            return span  # none pinned (the usual case): a range, read as a slice
        kinds = self.kinds
        return [i for i in span if kinds[i] not in _PINNED]

    def previous_call(self) -> Turns | None:
        """The history the previous model call was sent: everything before the
        newest assistant message (None when there is none)."""
        kinds = self.kinds
        reply = next((i for i in range(len(kinds) - 1, -1, -1) if kinds[i] == REPLY), -1)
        if reply < 0:
            return None
        before = bisect_left(self.pinned, reply), bisect_left(self.starts, reply)
        return Turns(kinds[:reply], self.pinned[: before[0]], self.starts[: before[1]])


def group(kinds: Sequence[int]) -> Turns:
    """Group messages of ``kinds`` into turns."""
    every = range(len(kinds))
    return Turns(
        tuple(kinds),
        tuple(compress(every, map(_PINNED.__contains__, kinds))),
        tuple(compress(every, map(_OPENS.__contains__, kinds))),
    )


@dataclass(frozen=True)
class TrimPlan:
    """Which whole turns a trim keeps, by position in its input.

    Only what the plan reads is counted: the pinned messages and the newest
    turns back to the first that does not fit (every turn under ``trim_to``).
    """

    #: Number of input messages.
    size: int
    #: Where the first kept turn starts (``size`` when no turn is kept).
    keep_from: int
    #: Indices of every pinned message, in order.
    pinned: tuple[int, ...]
    #: Number of turns in the input.
    turns: int
    #: Number of turns dropped, oldest first.
    dropped_turns: int
    #: Tokens of the pinned messages.
    system_tokens: int
    #: Tokens counted once per request: the counter's constant and the tools.
    overhead_tokens: int
    #: Tokens of what is kept, the overhead included.
    tokens_after: int
    max_tokens: int
    #: Tokens of the newest turn (0 when there is none).
    newest_turn_tokens: int
    #: Where the newest turn starts (``size`` when there is none).
    newest_turn_start: int
    #: The level a cut trims down to (None: just under ``max_tokens``).
    trim_to: int | None = None
    #: The first kept turn differs from the one the previous model call kept
    #: (it was sent this history up to its newest assistant message): that
    #: call's prompt prefix, and a provider's cache of it, is lost. Under a
    #: whole-list counter, it compares the cuts its estimate plans.
    start_moved: bool = False
    #: The kept messages' indices, ascending.
    kept: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        before = tuple(i for i in self.pinned if i < self.keep_from)
        object.__setattr__(self, "kept", (*before, *range(self.keep_from, self.size)))

    @property
    def budget_met(self) -> bool:
        """False only when the pinned messages alone exceed the budget."""
        return self.tokens_after <= self.max_tokens

    @property
    def overflowed(self) -> bool:
        """Not even the newest turn fits beside the pinned messages (or they
        alone exceed the budget): where ``on_overflow`` decides."""
        return not self.budget_met or (self.turns > 0 and self.dropped_turns == self.turns)

    @property
    def kept_turns(self) -> int:
        return self.turns - self.dropped_turns

    @property
    def dropped(self) -> tuple[int, ...]:
        """The dropped messages' indices, ascending."""
        pinned = set(self.pinned)
        return tuple([i for i in range(self.keep_from) if i not in pinned])

    @property
    def removed(self) -> tuple[int, ...]:
        """What a state trim deletes: nothing while every turn is kept (messages
        before the first turn go with the first dropped turn), then the dropped
        messages before the newest turn, which is never deleted."""
        if not self.dropped_turns:
            return ()
        return tuple([i for i in self.dropped if i < self.newest_turn_start])

    def select(self, items: Sequence[_T], indices: Sequence[int] | None = None) -> list[_T]:
        """The items at ``indices`` (default: ``kept``) of the sequence planned."""
        if len(items) != self.size:
            msg = f"the plan is for {self.size} messages, got {len(items)}"
            raise ValueError(msg)
        return [items[i] for i in (self.kept if indices is None else indices)]


def plan(
    turns: Turns,
    count: Count,
    max_tokens: int,
    *,
    overhead: int = 0,
    trim_to: int | Cut | None = None,
    previous: bool = True,
    _costs: list[int | None] | None = None,
) -> TrimPlan:
    """The plan of ``turns`` (costs from ``count``) for ``max_tokens``.

    Whole turns are dropped from the oldest while the pinned tokens, the
    ``overhead`` and the kept turns exceed the budget. ``trim_to`` moves the
    cut to the earliest of ``candidates`` after which the rest fits, so it
    stays put as the history grows; a ``Cut`` also keeps the previous call's
    cut while it fits, and cuts deeper when the cache is cold.
    """
    n = len(turns.starts)
    memo: list[int | None] = [None] * n if _costs is None else _costs  # each turn's, once

    def cost(turn: int) -> int:
        found = memo[turn]
        if found is None:
            found = memo[turn] = sum(count(turns.members(turn)))
        return found

    system = (sum(count(turns.pinned)) if turns.pinned else 0) + overhead
    room = max_tokens - system
    greedy, kept = n, 0
    while greedy and kept + (newer := cost(greedy - 1)) <= room:
        greedy -= 1
        kept += newer
    cut, level = (trim_to, trim_to.level) if isinstance(trim_to, Cut) else (None, trim_to)
    first, step = greedy, max_tokens - (max_tokens if level is None else level)
    if (greedy and step > 0) or cut is not None:
        costs = [cost(j) for j in range(n)]
        total = sum(costs)
        if greedy and step > 0:
            stable = (k for k, before in candidates(costs, step) if total - before <= room)
            first = next(stable, greedy)
        if cut is not None and first < n:
            first = moved_cut(cut, turns.starts, costs, greedy, first, step, room)
    if first != greedy and first < n:
        kept = sum(cost(j) for j in range(first, n))
    keep_from = turns.starts[first] if first < n else turns.size
    moved = False
    before = turns.previous_call() if previous else None
    if before is not None:
        held = cut._replace(cold=False) if cut is not None else level
        older = len(before.starts)  # the same turns, but for the newest, shorter
        shared = [*memo[: older - 1], None] if older else []
        old = plan(
            before,
            count,
            max_tokens,
            overhead=overhead,
            trim_to=held,
            previous=False,
            _costs=shared,
        )
        moved = old.keep_from < old.size and old.keep_from != keep_from
    return TrimPlan(
        size=turns.size,
        keep_from=keep_from,
        pinned=turns.pinned,
        turns=n,
        dropped_turns=first,
        system_tokens=system - overhead,
        overhead_tokens=overhead,
        tokens_after=system + (kept if first < n else 0),
        max_tokens=max_tokens,
        newest_turn_tokens=cost(n - 1) if n else 0,
        newest_turn_start=turns.starts[-1] if n else turns.size,
        trim_to=level,
        start_moved=moved,
    )
