"""Planning a remembered history under a new calibration, newest-first.

When ``observe`` changes a ``CalibratedCounter``'s calibration, every base
count a planner remembers maps to a new count. The spec's cut reads only the
pinned messages and the newest turns, back to the first one that does not
fit (and, for ``start_moved``, as far back as the previous model call's
cut): so only those are mapped, as far back as the base counts say the
budget reaches, and a turn more. Should the plan read an older turn after
all, every turn is mapped then; ``tokens_before`` and ``growth``, which
need every message, are computed when read. The plan is the one a
``Grouping`` of every mapped count makes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import NamedTuple, cast, overload

from langchain_turntrim._core import Grouping, TrimPlan, plan_turns
from langchain_turntrim._core.grouping import regroup
from langchain_turntrim._core.kinds import REPLY

__all__ = ["Rate", "plan_recosted"]

#: Maps base counts (checked ints) to counts under one calibration, elementwise.
Calibrate = Callable[[Sequence[int]], list[int]]


class Rate(NamedTuple):
    """About what a calibration maps a turn to: ``per_base`` a base token
    and ``per_message`` a message (to pick the turns mapped up front)."""

    per_base: float
    per_message: float


class _Turns(Sequence[int]):
    """Each turn's tokens, as a plan reads them: the newest turns' mapped up
    front (None for the others), every turn's once another one is read."""

    __slots__ = ("costs", "whole")

    def __init__(self, costs: list[int | None], whole: Callable[[], Grouping]) -> None:
        self.costs, self.whole = costs, whole

    def __len__(self) -> int:
        return len(self.costs)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        value = self.costs[index]
        if value is None or (isinstance(value, list) and None in value):
            self._fill()
            value = self.costs[index]
        return cast("int | list[int]", value)

    def __iter__(self) -> Iterator[int]:
        if None in self.costs:
            self._fill()
        return cast("Iterator[int]", iter(self.costs))

    def _fill(self) -> None:
        grouping = self.whole()
        self.costs = [*grouping.turn_costs, grouping.current]


def plan_recosted(
    grouping: Grouping,
    base: Sequence[int],
    calibrate: Calibrate,
    rate: Rate,
    max_tokens: int,
    overhead: int,
) -> TrimPlan:
    """The spec's plan (no ``trim_to``) of the messages ``grouping`` groups,
    whose base counts are ``base``, under the calibration ``calibrate``
    applies: what ``regroup`` of every mapped count would plan, with only
    the pinned messages and the newest turns mapped (``rate`` estimates how
    many). ``grouping`` and ``base`` may grow once this returns (the figures
    computed later use what they held)."""
    size, kinds, starts, pinned = grouping.size, grouping.kinds, grouping.starts, grouping.pinned
    pinned_costs = calibrate([base[i] for i in pinned]) if pinned else []
    system = sum(pinned_costs)
    whole = _whole(grouping, base, calibrate)
    previous = None
    reply, before = size, system
    if grouping.previous is not None:
        reply = _newest_reply(kinds, size)
        before = sum(pinned_costs[: bisect_left(pinned, reply)])
    first = _first_mapped(grouping, rate, max_tokens - overhead - before)
    start = starts[first] if starts else size
    tail = calibrate(base[start:size])
    for i in pinned[bisect_left(pinned, start) :]:
        tail[i - start] = 0  # a pinned message's tokens are the system's, not a turn's
    prefix = list(accumulate(tail, initial=0))
    ends = [*starts[first + 1 :], size] if starts else []
    costs: list[int | None] = [None] * first
    costs += [
        prefix[end - start] - prefix[s - start] for s, end in zip(starts[first:], ends, strict=True)
    ]
    if grouping.previous is not None:
        turns = grouping.previous[0]
        if not turns:
            current = 0
        elif starts[turns - 1] >= start:
            current = prefix[reply - start] - prefix[starts[turns - 1] - start]
        else:
            current = cast("tuple[int, int, int]", whole().previous)[1]
        previous = (turns, current, before + overhead)
    plan = plan_turns(
        size,
        starts,
        _Turns(costs, whole),
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
    plan.compute_later(
        tokens_before=lambda: whole().system + overhead + whole().orphan + whole().total,
        growth=lambda: whole().growth,
    )
    return plan


def _whole(grouping: Grouping, base: Sequence[int], calibrate: Calibrate) -> Callable[[], Grouping]:
    """The grouping of every message ``grouping`` groups now, each mapped,
    made when first asked for: its lists only grow, so their prefixes are
    what they hold now, whatever is appended meanwhile."""
    kinds, starts, pinned = grouping.kinds, grouping.starts, grouping.pinned
    size, turns, pins = grouping.size, len(starts), len(pinned)
    made: list[Grouping] = []

    def whole() -> Grouping:
        if not made:
            costs = calibrate(base[:size])
            made.append(regroup(kinds[:size], starts[:turns], pinned[:pins], costs))
        return made[0]

    return whole


def _newest_reply(kinds: Sequence[int], size: int) -> int:
    """The index of the newest reply (there is one), searched from the end."""
    i = size - 1
    while kinds[i] != REPLY:
        i -= 1
    return i


def _first_mapped(grouping: Grouping, rate: Rate, room: int) -> int:
    """The oldest turn to map: the newest turns whose estimated tokens exceed
    ``room`` (what the previous call's pinned messages left) by what the
    previous call may have sent less of them, and one turn more."""
    starts, turn_costs = grouping.starts, grouping.turn_costs
    turn = len(starts) - 1
    if turn <= 0:
        return 0
    per_base, per_message = rate
    # From this turn on, the previous call's turns may be shorter, or missing.
    shorter = turn + 1
    if grouping.previous is not None and grouping.previous[0]:
        shorter = grouping.previous[0] - 1
    reached = per_base * grouping.current + per_message * (grouping.size - starts[turn])
    need = room + (reached if turn >= shorter else 0.0)
    while turn > 0 and reached <= need:
        end, turn = starts[turn], turn - 1
        estimate = per_base * turn_costs[turn] + per_message * (end - starts[turn])
        reached += estimate
        if turn >= shorter:
            need += estimate
    return max(0, turn - 1)
