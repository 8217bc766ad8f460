"""Compaction of a long newest turn: what a call costs once that turn alone overflows.

An agent working on one task may take hundreds of tool steps in one turn, and
with ``on_overflow="compact"`` every model call then compacts it. The turn is
built from the input: its system prompt, its first user message, then tool
steps (an assistant message with calls, and their results) taken in order
from it, replayed with a tag when more are needed. Exact counting (gpt-4o).

* ``warm``: a 200-step turn the trimmer compacted before, compacted again,
  vs the same history through ``on_overflow="drop"`` (the same plan, then the
  pinned messages alone), side by side, budget 25% of the history's total.
  The note: one step appended since the last call, on both sides.
* ``scaling``: the time per step of compacting a 16,000-step turn vs a
  1,000-step one at one budget (25% of the smaller history's total), with
  one step appended since the trimmer's last call (an agent loop's call:
  the ladder runs on the whole turn, whose counts the counter has cached).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from langchain_core.messages import BaseMessage

from benchmarks.conversations import OpenAIMessage, Source, fresh_messages, mark
from benchmarks.encoding import EXACT_MODEL
from benchmarks.report import Row, Target, seconds_summary
from benchmarks.scenarios import BUDGET_FRACTION, Settings
from benchmarks.timing import Prepare, interleave, median_ratio
from langchain_turntrim import OnOverflow, TiktokenCounter, TurnTrimmer
from langchain_turntrim._counting import CachedCounter

__all__ = ["compaction", "long_turn"]

#: Steps of the warm row's turn (quick: its own size).
WARM_STEPS: Final = 200
QUICK_WARM_STEPS: Final = 50
#: Warm calls per timed sample (the note's arms: each appended call has its own trimmer).
WARM_CALLS: Final = 100
APPENDED_CALLS: Final = 10
#: The scaling row's turns, smaller then larger.
SCALING_STEPS: Final = (1_000, 16_000)
QUICK_SCALING_STEPS: Final = (250, 2_000)
#: Each scaling sample covers at least this many steps (several calls on the smaller turn).
SAMPLE_STEPS: Final = 4_000
#: Messages of the input read for its tool steps.
SOURCE_MESSAGES: Final = 2_000
_PINNED_ROLES: Final = ("system", "developer")


def _steps(messages: list[OpenAIMessage]) -> list[list[OpenAIMessage]]:
    """The tool steps of ``messages``: each assistant message with calls, and
    the results right after it (a step without results is left out)."""
    steps: list[list[OpenAIMessage]] = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        end = i + 1
        while end < len(messages) and messages[end]["role"] == "tool":
            end += 1
        if end > i + 1:
            steps.append(messages[i:end])
    return steps


def long_turn(source: Source, steps: int) -> list[OpenAIMessage]:
    """The source's pinned messages, its first user message, then ``steps`` of its tool steps."""
    messages = source.conversation(SOURCE_MESSAGES)
    found = _steps(messages)
    if not found:
        msg = f"{source.label} has no tool steps"
        raise ValueError(msg)
    head = [m for m in messages if m["role"] in _PINNED_ROLES]
    user = next(m for m in messages if m["role"] == "user")

    def replayed() -> Iterator[list[OpenAIMessage]]:
        yield from found
        cycle = 1
        while True:
            yield from ([mark(m, f"s{cycle}") for m in step] for step in found)
            cycle += 1

    turn = [*head, user]
    for _, step in zip(range(steps), replayed(), strict=False):
        turn.extend(step)
    return turn


def _last_step(base: list[OpenAIMessage]) -> int:
    """How many messages the newest step of ``base`` holds."""
    return len(base) - max(i for i, m in enumerate(base) if m["role"] == "assistant")


def _exact_total(base: list[OpenAIMessage]) -> int:
    return TiktokenCounter(EXACT_MODEL).count(fresh_messages(base, "budget"))


def compaction(settings: Settings) -> list[Row]:
    return [_warm(settings), _scaling(settings)]


def _warm(settings: Settings) -> Row:
    steps = settings.size(WARM_STEPS, QUICK_WARM_STEPS)
    base = long_turn(settings.source, steps)
    budget = int(_exact_total(base) * BUDGET_FRACTION)
    last = _last_step(base)

    def trimmer(on_overflow: OnOverflow) -> TurnTrimmer:
        counter = TiktokenCounter(EXACT_MODEL)
        return TurnTrimmer(max_tokens=budget, token_counter=counter, on_overflow=on_overflow)

    def same(on_overflow: OnOverflow) -> Prepare:
        def prepare(tag: str) -> Callable[[], object]:
            trim, messages = trimmer(on_overflow).trim, fresh_messages(base, tag)
            for _ in range(3):  # remembered from its second plan on
                trim(messages)
            return lambda: [trim(messages) for _ in range(WARM_CALLS)]

        return prepare

    def appended(on_overflow: OnOverflow) -> Prepare:
        def prepare(tag: str) -> Callable[[], object]:
            primed = []
            for i in range(APPENDED_CALLS):
                trim, messages = trimmer(on_overflow).trim, fresh_messages(base, f"{tag}.{i}")
                trim(messages[:-last])
                trim(messages[:-last])
                primed.append((trim, messages))
            return lambda: [trim(messages) for trim, messages in primed]

        return prepare

    report = trimmer("compact").report(fresh_messages(base, "check"))
    if report.compaction is None:
        msg = f"the {steps}-step turn was not compacted at {budget} tokens"
        raise RuntimeError(msg)
    arms = {
        "compact": same("compact"),
        "drop": same("drop"),
        "compact-appended": appended("compact"),
        "drop-appended": appended("drop"),
    }
    times = interleave(arms, settings.repeats)
    ratio = median_ratio(times["compact"], times["drop"])
    appended_ratio = median_ratio(times["compact-appended"], times["drop-appended"])
    row = Row(
        f"warm compaction, {steps}-step turn",
        'history seen: on_overflow="compact" / "drop"',
        Target("<=", 2.0),
        ratio,
        details=seconds_summary(times),
    )
    row.details.update(
        messages=len(base),
        budget=budget,
        calls_per_sample=WARM_CALLS,
        ratio_appended=appended_ratio,
        compaction=report.compaction.figures(),
    )
    row.notes.append(f"one step appended since the last call: {appended_ratio:.2f}x")
    return row


def _scaling(settings: Settings) -> Row:
    small, large = QUICK_SCALING_STEPS if settings.quick else SCALING_STEPS
    bases = {steps: long_turn(settings.source, steps) for steps in (small, large)}
    budget = int(_exact_total(bases[small]) * BUDGET_FRACTION)
    calls = {steps: max(1, SAMPLE_STEPS // steps) for steps in bases}

    def arm(steps: int) -> Prepare:
        base = bases[steps]
        last = _last_step(base)
        # One counter per size, its counts kept across repeats: each trimmer
        # (fresh, so nothing of its compactions is remembered) finds them cached.
        size = 4 * len(base)
        counter = CachedCounter(TiktokenCounter(EXACT_MODEL), cache_size=size)
        messages = fresh_messages(base, f"scaling-{steps}")

        def prepare(_tag: str) -> Callable[[], object]:
            primed: list[Callable[[list[BaseMessage]], object]] = []
            for _ in range(calls[steps]):
                trim = TurnTrimmer(
                    max_tokens=budget, token_counter=counter, on_overflow="compact", cache_size=size
                ).trim
                trim(messages[:-last])
                primed.append(trim)
            return lambda: [trim(messages) for trim in primed]

        return prepare

    times = interleave({f"{steps} steps": arm(steps) for steps in bases}, settings.repeats)
    per_step = {
        steps: [t / (steps * calls[steps]) for t in times[f"{steps} steps"]] for steps in bases
    }
    ratio = median_ratio(per_step[large], per_step[small])
    row = Row(
        f"compaction scaling, {small:,} to {large:,} steps",
        f"time per step: {large:,}-step turn / {small:,}-step turn",
        Target("<=", 2.0),
        ratio,
        details=seconds_summary(times),
    )
    row.details.update(budget=budget, calls_per_sample=calls)
    return row
