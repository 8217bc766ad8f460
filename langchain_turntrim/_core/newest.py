"""Planning a history newest-first: only what the plan reads is counted.

The spec's cut reads the pinned messages, then the newest turns back to the
first one that does not fit (and, for ``start_moved``, as far back as the
previous model call's cut). The older turns only make ``tokens_before`` and
``growth``, figures a plan computes when they are read. So a history no
planner remembers (a cold trim) is counted from its end, in chunks of
about what the budget still takes at the average count so far, and the
rest only if a figure that needs it is read.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, compress
from operator import sub
from typing import Final, overload

from langchain_turntrim._core.grouping import Grouping
from langchain_turntrim._core.kinds import ANCHOR, CONTINUE, PINNED, REPLY, START, positions
from langchain_turntrim._core.plan import TrimPlan, plan_turns

__all__ = ["plan_newest"]

#: Counts the messages at some indices (checked ints, one per index).
CountAt = Callable[[Sequence[int]], list[int]]

_NOT_PINNED: Final = frozenset((START, CONTINUE, REPLY)).__contains__
#: The fewest messages counted at a time from the end (the first chunk).
_FIRST_CHUNK: Final = 64
#: Counted beyond what the room left takes at the average so far: about the
#: turn that crosses the budget, which the plan reads whole.
_MARGIN: Final = 16


class _Tail:
    """The count of each message that is not pinned (0 for a pinned one), from
    ``start`` to the end: extended towards the oldest message in chunks of
    about what the budget's ``room`` still needs, at the counts' average so far."""

    __slots__ = ("costs", "count", "marks", "room", "start", "total")

    def __init__(self, marks: bytes, count: CountAt, room: int) -> None:
        self.marks, self.count, self.room = marks, count, room  # marks: the kinds as bytes
        self.start = len(marks)
        self.costs: list[int] = []
        self.total = 0

    def reach(self, index: int) -> None:
        """Count back to ``index`` at least."""
        if index >= self.start:
            return
        start = max(0, min(index, self.start - self._chunk()))
        chunk = self.marks[start : self.start]
        unpinned: Sequence[int] = range(start, self.start)
        if PINNED in chunk or ANCHOR in chunk:
            unpinned = list(compress(unpinned, map(_NOT_PINNED, chunk)))
        counted = self.count(unpinned) if unpinned else []
        if len(unpinned) == self.start - start:  # no pinned message among them (the usual chunk)
            costs = counted
        else:
            costs = [0] * (self.start - start)
            for i, cost in zip(unpinned, counted, strict=True):
                costs[i - start] = cost
        self.costs[:0] = costs
        self.start = start
        self.total += sum(costs)

    def _chunk(self) -> int:
        """How many messages to count next: what the room left takes at the
        average count so far (and a little more, for the turn that crosses
        the budget), at least ``_FIRST_CHUNK``; half of what is counted when
        nothing counted costs anything."""
        if not self.total:
            return max(_FIRST_CHUNK, len(self.costs) // 2)
        left = self.room - self.total
        if left <= 0:  # the budget is spent: only a turn's start is looked for
            return _FIRST_CHUNK
        return max(_FIRST_CHUNK, left * len(self.costs) // self.total + _MARGIN)

    def sum(self, start: int, end: int) -> int:
        """The tokens of the messages from ``start`` to ``end`` that are not pinned."""
        self.reach(start)
        return sum(self.costs[start - self.start : end - self.start])


class _TurnCosts(Sequence[int]):
    """Each turn's tokens, read newest first as a plan reads them: a turn
    not counted yet has the tail counted back to it, and then every turn
    counted whole gets its cost at once (prefix sums)."""

    __slots__ = ("_filled", "_found", "size", "starts", "tail")

    def __init__(self, starts: list[int], size: int, tail: _Tail) -> None:
        self.starts, self.tail, self.size = starts, tail, size
        self._found: list[int | None] = [None] * len(starts)
        #: The turns from this one on have their cost in ``_found``.
        self._filled = len(starts)

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        found = self._found[index]
        if found is None:
            turn = range(len(self.starts))[index]
            self._fill(turn)
            found = self._found[turn]
        return found  # type: ignore[return-value]

    def __iter__(self) -> Iterator[int]:
        return (self[i] for i in range(len(self)))

    def _fill(self, turn: int) -> None:
        """Count back to ``turn`` and find the cost of every turn counted whole."""
        starts, tail = self.starts, self.tail
        tail.reach(starts[turn])
        base, filled = tail.start, self._filled
        first = bisect_left(starts, base, 0, filled)
        end = starts[filled] if filled < len(starts) else self.size
        sums = list(accumulate(tail.costs[: end - base], initial=0))
        bounds = [sums[start - base] for start in starts[first:filled]]
        bounds.append(sums[end - base])
        self._found[first:filled] = map(sub, bounds[1:], bounds[:-1])
        self._filled = first


def plan_newest(
    kinds: Sequence[int], count: CountAt, max_tokens: int, overhead: int = 0
) -> TrimPlan:
    """The spec's plan (no ``trim_to``) of messages of turn kinds ``kinds``,
    counting (``count``) the pinned ones and, from the end, only what the
    plan reads; ``tokens_before`` and ``growth`` are computed when read."""
    size = len(kinds)
    marks = bytes(kinds)  # every scan of a long history below is in C
    pinned = positions(marks, PINNED, ANCHOR)
    starts = positions(marks, START, ANCHOR)
    pinned_costs = count(pinned) if pinned else []
    system = sum(pinned_costs)
    tail = _Tail(marks, count, max_tokens - system - overhead)
    turn_costs = _TurnCosts(starts, size, tail)
    previous = None
    # The newest reply: the history before it is what the previous call was sent.
    reply = marks.rfind(REPLY)
    if reply >= 0:
        turns = bisect_left(starts, reply)
        current = tail.sum(starts[turns - 1], reply) if turns else 0
        previous = (turns, current, sum(pinned_costs[: bisect_left(pinned, reply)]) + overhead)
    plan = plan_turns(
        size,
        starts,
        turn_costs,
        pinned,
        system + overhead,
        overhead,
        0,
        max_tokens,
        None,
        previous,
        0.0,
        lazy=True,
    )
    whole: list[Grouping] = []

    def grouped() -> Grouping:
        if not whole:
            tail.reach(0)
            costs = list(tail.costs)
            for i, cost in zip(pinned, pinned_costs, strict=True):
                costs[i] = cost
            grouping = Grouping()
            grouping.extend(kinds, costs)
            whole.append(grouping)
        return whole[0]

    plan.compute_later(
        tokens_before=lambda: grouped().system + overhead + grouped().orphan + grouped().total,
        growth=lambda: grouped().growth,
    )
    return plan
