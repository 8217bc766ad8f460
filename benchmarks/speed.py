"""The timed trimmer scenarios: each compares ``TurnTrimmer`` with its floor or a
baseline, side by side (see ``benchmarks/README.md``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.conversations import OpenAIMessage, assistant_steps, fresh_messages
from benchmarks.encoding import exact_counter
from benchmarks.floors import Count, approximate_count, counted_loop, full_count
from benchmarks.report import Row, Target
from benchmarks.timing import BUDGET_FRACTION, Prepare, Settings, interleave, ratio_row
from langchain_turntrim import TurnTrimmer

__all__ = [
    "TRIM_MESSAGES_OPTIONS",
    "approximate_loop",
    "cold_approximate",
    "cold_exact",
    "exact_loop",
    "invoke",
    "reloaded",
]

#: trim_messages configured to keep whole turns, as close to TurnTrimmer as it gets.
TRIM_MESSAGES_OPTIONS: Final[dict[str, Any]] = {
    "strategy": "last",
    "start_on": "human",
    "include_system": True,
}
#: History sizes: the loops, invoke and reloaded; cold exact; cold approximate.
LOOP_MESSAGES: Final = 200
COLD_EXACT_MESSAGES: Final = 1_000
COLD_APPROXIMATE_MESSAGES: Final = 10_000
#: A timed sample of cold calls covers at least this many messages (several fresh
#: histories when they are small), so that no sample lasts only a few milliseconds.
SAMPLE_MESSAGES: Final = 5_000
#: Whole agent loops timed together per sample.
LOOPS: Final = 5
#: Warm calls timed together per sample.
WARM_CALLS: Final = 100
#: Reloaded (and cold, and warm) calls timed together per sample.
RELOADED_CALLS: Final = 50


class Exact:
    """A history with exact counting: its budget, fresh trimmers, and its floor's count."""

    def __init__(self, base: list[OpenAIMessage]) -> None:
        self.base = base
        self.counter = exact_counter()
        self.budget = int(self.counter.count(fresh_messages(base, "budget")) * BUDGET_FRACTION)
        self.count: Count = functools.partial(full_count, self.counter.encoding.encode_ordinary)

    def trimmer(self) -> TurnTrimmer:
        return TurnTrimmer(self.budget, token_counter=self.counter)


def approximate_budget(base: list[OpenAIMessage]) -> int:
    return int(count_tokens_approximately(fresh_messages(base, "budget")) * BUDGET_FRACTION)


def dropping(trimmer: TurnTrimmer, base: list[OpenAIMessage], steps: Sequence[int]) -> str:
    """A note: at how many steps ``trimmer`` drops turns (the loop does real trims)."""
    messages = fresh_messages(base, "plan")
    found = sum(trimmer.report(messages[:k]).dropped_turns > 0 for k in steps)
    return f"turns dropped at {found} of {len(steps)} steps"


def _loop(
    settings: Settings,
    base: list[OpenAIMessage],
    name: str,
    make: Callable[[], TurnTrimmer],
    count: Count,
    target: float,
) -> Row:
    """A history growing to 200 messages, trimmed before every assistant message by
    one fresh trimmer, whole loops (``LOOPS`` a sample, each on its own fresh
    messages), vs ``counted_loop`` on the same steps (the budget: 25% of the
    whole history's total)."""
    steps = assistant_steps(base)

    def trimmed(tag: str) -> Callable[[], object]:
        loops = []
        for i in range(LOOPS):
            trim, messages = make().trim, fresh_messages(base, f"{tag}.{i}")
            loops.append((trim, [messages[:k] for k in steps]))
        return lambda: [[trim(prefix) for prefix in prefixes] for trim, prefixes in loops]

    def floor(tag: str) -> Callable[[], object]:
        histories = _histories(base, tag, LOOPS)
        return lambda: [counted_loop(count, messages, steps) for messages in histories]

    times = interleave({"trim": trimmed, "floor": floor}, settings.repeats)
    row = ratio_row(
        f"{name} agent loop, {len(base)} msgs",
        "TurnTrimmer.trim before every assistant message, whole loop / counted floor "
        "(count each new message once, check each remembered one's fields)",
        Target("<=", target),
        times,
        "trim",
        "floor",
        messages=len(base),
        steps=len(steps),
        loops_per_sample=LOOPS,
    )
    row.notes.append(f"{len(steps)} trims; {dropping(make(), base, steps)}")
    return row


def exact_loop(settings: Settings) -> list[Row]:
    exact = Exact(settings.source.conversation(LOOP_MESSAGES))
    return [_loop(settings, exact.base, "exact", exact.trimmer, exact.count, 1.8)]


def approximate_loop(settings: Settings) -> list[Row]:
    base = settings.source.conversation(LOOP_MESSAGES)
    budget = approximate_budget(base)
    make = functools.partial(TurnTrimmer, budget)
    return [_loop(settings, base, "approximate", make, approximate_count, 2.5)]


def invoke(settings: Settings) -> list[Row]:
    """``.invoke`` and ``.trim`` of one trimmer on the history it trimmed before."""
    exact = Exact(settings.source.conversation(LOOP_MESSAGES))

    def warm(method: str) -> Prepare:
        def prepare(tag: str) -> Callable[[], object]:
            trimmer, messages = exact.trimmer(), fresh_messages(exact.base, tag)
            trimmer.trim(messages)
            call = getattr(trimmer, method)
            return lambda: [call(messages) for _ in range(WARM_CALLS)]

        return prepare

    times = interleave({"invoke": warm("invoke"), "trim": warm("trim")}, settings.repeats)
    row = ratio_row(
        f"warm exact trim, {len(exact.base)} msgs",
        "TurnTrimmer.invoke / TurnTrimmer.trim, the same warm history",
        Target("<=", 1.25),
        times,
        "invoke",
        "trim",
        calls_per_sample=WARM_CALLS,
    )
    return [row]


def _histories(base: list[OpenAIMessage], tag: str, calls: int) -> list[list[BaseMessage]]:
    return [fresh_messages(base, f"{tag}.{i}") for i in range(calls)]


def cold_exact(settings: Settings) -> list[Row]:
    """A fresh trimmer on fresh messages vs tokenizing every message once."""
    exact = Exact(settings.source.conversation(COLD_EXACT_MESSAGES))
    calls = max(1, SAMPLE_MESSAGES // len(exact.base))

    def ours(tag: str) -> Callable[[], object]:
        pairs = [(exact.trimmer(), m) for m in _histories(exact.base, tag, calls)]
        return lambda: [trimmer.trim(messages) for trimmer, messages in pairs]

    def floor(tag: str) -> Callable[[], object]:
        histories = _histories(exact.base, tag, calls)
        return lambda: [exact.count(messages) for messages in histories]

    times = interleave({"trim": ours, "floor": floor}, settings.repeats)
    report = exact.trimmer().report(fresh_messages(exact.base, "plan"))
    row = ratio_row(
        f"cold exact trim, {len(exact.base):,} msgs",
        "TurnTrimmer.trim / full floor (tokenize every message once)",
        Target("<=", 1.0),
        times,
        "trim",
        "floor",
        calls_per_sample=calls,
        budget=exact.budget,
    )
    row.notes.append(f"{len(report.kept):,} of {len(exact.base):,} messages kept")
    return [row]


def cold_approximate(settings: Settings) -> list[Row]:
    """``trim_messages(count_tokens_approximately)`` vs ``TurnTrimmer()``, both cold."""
    base = settings.source.conversation(COLD_APPROXIMATE_MESSAGES)
    budget = approximate_budget(base)
    calls = max(1, SAMPLE_MESSAGES // len(base))
    baseline = functools.partial(
        trim_messages,
        max_tokens=budget,
        token_counter=count_tokens_approximately,
        **TRIM_MESSAGES_OPTIONS,
    )

    def ours(tag: str) -> Callable[[], object]:
        pairs = [(TurnTrimmer(budget), m) for m in _histories(base, tag, calls)]
        return lambda: [trimmer.trim(messages) for trimmer, messages in pairs]

    def theirs(tag: str) -> Callable[[], object]:
        histories = _histories(base, tag, calls)
        return lambda: [baseline(messages) for messages in histories]

    times = interleave({"trim_messages": theirs, "trim": ours}, settings.repeats)
    row = ratio_row(
        f"cold approximate trim, {len(base):,} msgs",
        "trim_messages(count_tokens_approximately, whole turns) / TurnTrimmer.trim",
        Target(">=", 5),
        times,
        "trim_messages",
        "trim",
        calls_per_sample=calls,
        budget=budget,
    )
    return [row]


def reloaded(settings: Settings) -> list[Row]:
    """A history reloaded (the same content in new message objects, converted again
    from the same dicts) by a trimmer that trimmed the original, vs a warm call on
    the original and a cold call (a fresh trimmer)."""
    exact = Exact(settings.source.conversation(LOOP_MESSAGES))
    base, calls = exact.base, RELOADED_CALLS

    def warm(tag: str) -> Callable[[], object]:
        trimmer, messages = exact.trimmer(), fresh_messages(base, tag)
        trimmer.trim(messages)
        return lambda: [trimmer.trim(messages) for _ in range(calls)]

    def reload(tag: str) -> Callable[[], object]:
        trimmer = exact.trimmer()
        trimmer.trim(fresh_messages(base, tag))
        copies = [fresh_messages(base, tag) for _ in range(calls)]
        return lambda: [trimmer.trim(messages) for messages in copies]

    def cold(tag: str) -> Callable[[], object]:
        pairs = [(exact.trimmer(), fresh_messages(base, tag)) for _ in range(calls)]
        return lambda: [trimmer.trim(messages) for trimmer, messages in pairs]

    times = interleave({"reloaded": reload, "warm": warm, "cold": cold}, settings.repeats)
    name = f"reloaded exact trim, {len(base)} msgs"
    return [
        ratio_row(
            name,
            "reloaded history (new objects, same content) / warm call, same trimmer",
            Target("<=", 2.5),
            times,
            "reloaded",
            "warm",
            calls_per_sample=calls,
        ),
        ratio_row(
            name,
            "cold call (fresh trimmer) / reloaded history",
            Target(">=", 3),
            times,
            "cold",
            "reloaded",
            calls_per_sample=calls,
        ),
    ]
