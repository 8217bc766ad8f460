"""Warm trims as histories grow: what a call costs once the trimmer has seen the history.

Between two model calls an agent's history gains a message or two; the
trimmer has planned the rest before. The floor of such a call is checking
that the messages it remembers are still there and unchanged (each counted
field still the same object: ``floors.Remembered``), and counting what is
new. Each size gives two rows, exact counting, side by side with the floor:
one warm ``TurnTrimmer.trim`` of the history it trimmed just before, against
the check alone; and a trim of a history one message longer than the last
one it trimmed, against the check plus the full count of that message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

from langchain_core.messages import BaseMessage

from benchmarks.conversations import fresh_messages
from benchmarks.encoding import EXACT_MODEL
from benchmarks.floors import Remembered, full_count
from benchmarks.report import Row, Target, seconds_summary
from benchmarks.scenarios import BUDGET_FRACTION, Settings, exact_encode
from benchmarks.timing import interleave, median_ratio
from langchain_turntrim import TiktokenCounter, TurnTrimmer

__all__ = ["SIZES", "warm_scaling"]

#: History sizes of the scaling table; the targets apply from TARGET_FROM messages.
SIZES: Final = (10, 100, 1_000, 2_000, 10_000)
QUICK_SIZES: Final = (10, 100, 1_000, 2_000)
TARGET_FROM: Final = 2_000
#: Each timed sample covers at least this many messages (many calls on small histories).
SAMPLE_MESSAGES: Final = 100_000
#: At most this many appended calls per sample (each needs its own primed trimmer).
APPENDED_CALLS: Final = 20


def warm_scaling(settings: Settings) -> list[Row]:
    sizes = QUICK_SIZES if settings.quick else SIZES
    return [row for n in sizes for row in _at(settings, n)]


def _at(settings: Settings, n: int) -> list[Row]:
    base = settings.source.conversation(n)
    calls = max(1, SAMPLE_MESSAGES // n)
    counter = TiktokenCounter(EXACT_MODEL)
    total = counter.count(fresh_messages(base, "budget"))
    budget = int(total * BUDGET_FRACTION)

    def seen(tag: str) -> tuple[TurnTrimmer, list[BaseMessage]]:
        """A trimmer that trimmed the history's two previous versions, as in an
        agent loop (a history is remembered from its second plan on)."""
        trimmer = TurnTrimmer(max_tokens=budget, token_counter=TiktokenCounter(EXACT_MODEL))
        messages = fresh_messages(base, tag)
        trimmer.trim(messages[:-2])
        trimmer.trim(messages[:-1])
        return trimmer, messages

    def same(tag: str) -> Callable[[], object]:
        trimmer, messages = seen(tag)
        trimmer.trim(messages)
        return lambda: [trimmer.trim(messages) for _ in range(calls)]

    def appended(tag: str) -> Callable[[], object]:
        # Every call gets a history one message longer than the last one it saw:
        # a fresh trimmer per call, each primed with the history minus its last message.
        primed = [seen(f"{tag}.{i}") for i in range(min(calls, APPENDED_CALLS))]
        return lambda: [trimmer.trim(messages) for trimmer, messages in primed]

    count = functools.partial(full_count, exact_encode())

    def floor(tag: str) -> Callable[[], object]:
        remembered = Remembered()
        remembered.add(fresh_messages(base, tag))
        return lambda: [remembered.unchanged() for _ in range(calls)]

    def floor_appended(tag: str) -> Callable[[], object]:
        # As many histories as the appended arm has: each checked, its last message counted.
        histories = []
        for i in range(min(calls, APPENDED_CALLS)):
            messages = fresh_messages(base, f"{tag}.{i}")
            remembered = Remembered()
            remembered.add(messages[:-1])
            histories.append((remembered, messages[-1:]))
        return lambda: [(r.unchanged(), count(new)) for r, new in histories]

    times = interleave(
        {"warm": same, "appended": appended, "floor": floor, "floor-appended": floor_appended},
        settings.repeats,
    )
    big = n >= TARGET_FROM

    def row(comparison: str, target: float, arm: str, floor: str) -> Row:
        found = Row(
            f"warm trim, {n:,} msgs",
            comparison,
            Target("<=", target) if big else None,
            median_ratio(times[arm], times[floor]),
            details=seconds_summary({k: times[k] for k in (arm, floor)}),
        )
        found.details.update(messages=n, budget=budget, calls_per_sample=calls)
        return found

    return [
        row(
            "TurnTrimmer.trim, history seen / the check of its fields (Remembered.unchanged)",
            1.5,
            "warm",
            "floor",
        ),
        row(
            "one message appended: TurnTrimmer.trim / the check plus full_count of that message",
            1.25,
            "appended",
            "floor-appended",
        ),
    ]
