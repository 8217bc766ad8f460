"""Cut points that stay put while a history grows, so that provider prompt caches stay valid.

Plain arithmetic on turn costs (imports nothing from LangChain). The running
total of the turns, from the oldest, is the same for every later version of a
growing history; the candidate cuts are the turn boundaries where that total
first reaches each multiple of ``step`` (``max_tokens - trim_to``), so they
depend only on the history's prefix, never on a previous call. The cut is the
earliest candidate after which the rest fits the budget: it stays where it is
while the history grows, and moves (by at least about ``step`` tokens) only
when the budget forces it, leaving at most about ``trim_to`` tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["candidates", "stable_first"]


def candidates(turn_costs: Sequence[int], step: int) -> list[tuple[int, int]]:
    """``(turn index, tokens of the turns before it)`` for each candidate cut.

    Turn 0 is always one; then, for each multiple of ``step``, the first turn
    boundary at which the running total reaches it. ``step`` must be > 0.
    """
    found = [(0, 0)]
    total = 0
    mark = step
    for k in range(len(turn_costs) - 1):
        total += turn_costs[k]
        if total >= mark:
            found.append((k + 1, total))
            mark = (total // step + 1) * step
    return found


def stable_first(turn_costs: Sequence[int], room: int, step: int) -> int | None:
    """The earliest candidate turn whose suffix (it and every newer turn) fits
    ``room`` tokens, or None when none does."""
    total = sum(turn_costs)
    for k, before in candidates(turn_costs, step):
        if total - before <= room:
            return k
    return None
