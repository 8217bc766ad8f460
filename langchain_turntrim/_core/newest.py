"""Planning a history newest-first: only what the plan reads is counted.

The spec's cut reads the pinned messages, then the newest turns back to the
first one that does not fit (and, for ``start_moved``, as far back as the
previous model call's cut). The older turns only make ``tokens_before`` and
``growth``, figures a plan computes when they are read. So a history no
planner remembers (a cold trim) is counted from its end, in chunks that
grow by half, and the rest only if a figure that needs it is read.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from itertools import compress
from typing import Final, overload

from langchain_turntrim._core.grouping import Grouping
from langchain_turntrim._core.kinds import ANCHOR, CONTINUE, PINNED, REPLY, START
from langchain_turntrim._core.plan import TrimPlan, plan_turns

__all__ = ["plan_newest"]

#: Counts the messages at some indices (checked ints, one per index).
CountAt = Callable[[Sequence[int]], list[int]]

_IS_PINNED: Final = frozenset((PINNED, ANCHOR)).__contains__
_IS_START: Final = frozenset((START, ANCHOR)).__contains__
_NOT_PINNED: Final = frozenset((START, CONTINUE, REPLY)).__contains__
#: The first chunk counted from the end, in messages; each next one is half what is
#: counted (so at most a third of what is counted was not needed).
_FIRST_CHUNK: Final = 64


class _Tail:
    """The count of each message that is not pinned (0 for a pinned one), from
    ``start`` to the end: extended towards the oldest message in chunks that
    grow by half."""

    __slots__ = ("costs", "count", "kinds", "start")

    def __init__(self, kinds: Sequence[int], count: CountAt) -> None:
        self.kinds, self.count = kinds, count
        self.start = len(kinds)
        self.costs: list[int] = []

    def reach(self, index: int) -> None:
        """Count back to ``index`` at least."""
        if index >= self.start:
            return
        chunk = max(_FIRST_CHUNK, len(self.costs) // 2)
        start = max(0, min(index, self.start - chunk))
        unpinned = list(
            compress(range(start, self.start), map(_NOT_PINNED, self.kinds[start : self.start]))
        )
        costs = [0] * (self.start - start)
        for i, cost in zip(unpinned, self.count(unpinned) if unpinned else [], strict=True):
            costs[i - start] = cost
        self.costs[:0] = costs
        self.start = start

    def sum(self, start: int, end: int) -> int:
        """The tokens of the messages from ``start`` to ``end`` that are not pinned."""
        self.reach(start)
        return sum(self.costs[start - self.start : end - self.start])


class _TurnCosts(Sequence[int]):
    """Each turn's tokens, counted when first read (the newest first, as a
    plan reads them)."""

    __slots__ = ("_found", "size", "starts", "tail")

    def __init__(self, starts: list[int], size: int, tail: _Tail) -> None:
        self.starts, self.tail, self.size = starts, tail, size
        self._found: list[int | None] = [None] * len(starts)

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        turn = range(len(self))[index]
        found = self._found[turn]
        if found is None:
            starts = self.starts
            end = starts[turn + 1] if turn + 1 < len(starts) else self.size
            found = self._found[turn] = self.tail.sum(starts[turn], end)
        return found

    def __iter__(self) -> Iterator[int]:
        return (self[i] for i in range(len(self)))


def plan_newest(
    kinds: Sequence[int], count: CountAt, max_tokens: int, overhead: int = 0
) -> TrimPlan:
    """The spec's plan (no ``trim_to``) of messages of turn kinds ``kinds``,
    counting (``count``) the pinned ones and, from the end, only what the
    plan reads; ``tokens_before`` and ``growth`` are computed when read."""
    size = len(kinds)
    pinned = list(compress(range(size), map(_IS_PINNED, kinds)))
    starts = list(compress(range(size), map(_IS_START, kinds)))
    pinned_costs = count(pinned) if pinned else []
    system = sum(pinned_costs)
    tail = _Tail(kinds, count)
    turn_costs = _TurnCosts(starts, size, tail)
    previous = None
    if REPLY in kinds:
        # The newest reply: the history before it is what the previous call was sent.
        reply = size - 1 - list(reversed(kinds)).index(REPLY)
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
