"""``trim_to``'s stable cut: cut points that depend only on a history's
prefix, so a cut stays put while the history grows and a provider's prompt
cache stays valid; and ``trim_to="auto"``'s ``Cut``, timed to the cache."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Cut", "candidates", "moved_cut"]


class Cut(NamedTuple):
    """A cut ``trim_to="auto"`` asks for: ``trim_to``'s stable cut at ``level``;
    ``floor``, the index of the message the previous call's cut kept first (0:
    none), where a warm call stays while what follows it fits; ``cold``, the
    cache is gone, so the cut moves to the deepest candidate whose calls cost
    less than the cycle's mean, ``hold`` being what a cache bust adds to it."""

    level: int
    cold: bool = False
    floor: int = 0
    hold: float = 0.0


def candidates(turn_costs: Sequence[int], step: int) -> list[tuple[int, int]]:
    """``trim_to``'s cut points: ``(turn, tokens of the turns before it)`` for
    turn 0, then each turn boundary at least ``step`` tokens after the
    previous point. They depend only on the history's prefix, so they stay put
    while it grows, and where a prefix ending at one is deleted (a state trim)."""
    found = [(0, 0)]
    total, mark = 0, step
    for k in range(len(turn_costs) - 1):
        total += turn_costs[k]
        if total >= mark:
            found.append((k + 1, total))
            mark = total + step
    return found


def moved_cut(
    cut: Cut,
    starts: Sequence[int],
    costs: Sequence[int],
    greedy: int,
    first: int,
    step: int,
    room: int,
) -> int:
    """The stable cut ``first`` moved by ``cut``: to its floor while what follows
    the floor fits (never before ``greedy``), then, when cold, to the deepest
    candidate that keeps at least what the cycle's mean is worth."""
    floor = bisect_left(starts, cut.floor) if cut.floor else len(starts)
    if floor < len(starts) and starts[floor] == cut.floor and floor >= greedy:
        first = floor
    if cut.cold and step > 0:
        total = sum(costs)
        kept = total - sum(costs[:first])
        level_room = room - step  # the turn tokens the level leaves
        least = level_room + room - 2 * cut.hold - kept
        for k, before in candidates(costs, step):
            if k > first and total - before >= least:
                first = k
    return first
