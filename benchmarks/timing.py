"""Side-by-side timing: every arm runs once per repeat, interleaved, in rotating order.

An arm's ``prepare(tag)`` builds its inputs outside the clock (fresh messages
tagged ``tag``, a fresh trimmer...) and returns the call to time. Figures are
ratios of two arms' times taken in the same repeat, and the reported ratio is
the median of those per-repeat ratios, so a slow spell on a shared machine
slows both sides of a pair alike.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from benchmarks.conversations import Source
from benchmarks.report import Row, Target, seconds_summary

__all__ = [
    "BUDGET_FRACTION",
    "Prepare",
    "Settings",
    "Times",
    "interleave",
    "median_ratio",
    "ratio_row",
]

#: Every timed budget is this fraction of the history's total tokens.
BUDGET_FRACTION: Final = 0.25

#: Given a tag unique to the repeat and arm, build the inputs and return the timed call.
Prepare = Callable[[str], Callable[[], object]]
Times = dict[str, list[float]]


@dataclass(frozen=True)
class Settings:
    """What a run was asked for: the input, the repeats, and ``--quick`` (fewer
    repeats; the quality scenarios replay fewer conversations)."""

    source: Source
    repeats: int
    quick: bool


def _time_one(prepare: Prepare, tag: str) -> float:
    run = prepare(tag)
    gc.collect()
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    del run
    return elapsed


def interleave(arms: Mapping[str, Prepare], repeats: int, *, warmup: bool = True) -> Times:
    """Time each arm ``repeats`` times, interleaved: A B C, B C A, C A B, ...

    One untimed warm-up round first loads lazy imports and fills CPU caches.
    """
    names = list(arms)
    if warmup:
        for name in names:
            _time_one(arms[name], f"warmup-{name}")
    times: Times = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(_time_one(arms[name], f"r{repeat}-{name}"))
    return times


def median_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The median of the per-repeat ratios ``numerator[i] / denominator[i]``."""
    return statistics.median(n / d for n, d in zip(numerator, denominator, strict=True))


def ratio_row(
    scenario: str,
    comparison: str,
    target: Target | None,
    times: Times,
    numerator: str,
    denominator: str,
    **details: object,
) -> Row:
    """A row for ``times[numerator] / times[denominator]``, the two arms' times kept."""
    row = Row(scenario, comparison, target, median_ratio(times[numerator], times[denominator]))
    row.details.update(seconds_summary({k: times[k] for k in (numerator, denominator)}), **details)
    return row
