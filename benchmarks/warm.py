"""Warm trims as histories grow: what a call costs once the trimmer has seen the history.

Between two model calls an agent's history gains a message or two; the
trimmer has planned the rest before. The floor of such a call is checking
that the messages it remembers are still there and unchanged: a bare loop
that, for each message, reads its counted fields and checks that each one is
still the same object (``message_fields``, ``is``). Each row compares one
warm ``TurnTrimmer.trim`` (exact counting) with that loop over the same
messages, side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage

from benchmarks.conversations import fresh_messages
from benchmarks.encoding import EXACT_MODEL
from benchmarks.report import Row, Target, seconds_summary
from benchmarks.scenarios import BUDGET_FRACTION, Settings
from benchmarks.timing import Prepare, interleave, median_ratio
from langchain_turntrim import TiktokenCounter, TurnTrimmer
from langchain_turntrim._counting.keys import fields_getter, message_fields

__all__ = ["SIZES", "bare_check", "warm_scaling"]

#: History sizes of the scaling table; the target applies from TARGET_FROM messages.
SIZES: Final = (10, 100, 1_000, 2_000, 10_000)
QUICK_SIZES: Final = (10, 100, 1_000, 2_000)
TARGET_FROM: Final = 2_000
#: Each timed sample covers at least this many messages (many calls on small histories).
SAMPLE_MESSAGES: Final = 100_000
#: At most this many appended calls per sample (each needs its own primed trimmer).
APPENDED_CALLS: Final = 20


def bare_check(messages: Sequence[BaseMessage], remembered: Sequence[tuple[Any, ...]]) -> bool:
    """The floor: each message's counted fields are still the remembered objects."""
    for message, fields in zip(messages, remembered, strict=True):
        for now, then in zip(fields_getter(message)(vars(message)), fields, strict=True):
            if now is not then:
                return False
    return True


def warm_scaling(settings: Settings) -> list[Row]:
    sizes = QUICK_SIZES if settings.quick else SIZES
    return [_at(settings, n) for n in sizes]


def _at(settings: Settings, n: int) -> Row:
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

    def floor(repeats: int) -> Prepare:
        def prepare(tag: str) -> Callable[[], object]:
            messages = fresh_messages(base, tag)
            remembered = [message_fields(m) for m in messages]
            return lambda: [bare_check(messages, remembered) for _ in range(repeats)]

        return prepare

    arms: dict[str, Prepare] = {
        "warm": same,
        "appended": appended,
        "floor": floor(calls),
        "floor-appended": floor(min(calls, APPENDED_CALLS)),
    }
    times = interleave(arms, settings.repeats)
    ratio = median_ratio(times["warm"], times["floor"])
    appended_ratio = median_ratio(times["appended"], times["floor-appended"])
    target = Target("<=", 1.5) if n >= TARGET_FROM else None
    row = Row(
        f"warm trim, {n:,} msgs",
        "TurnTrimmer.trim, history seen / bare field-identity loop",
        target,
        ratio,
        details=seconds_summary(times),
    )
    row.details.update(
        messages=n, budget=budget, calls_per_sample=calls, ratio_appended=appended_ratio
    )
    row.notes.append(f"one message appended since the last call: {appended_ratio:.2f}x")
    return row
