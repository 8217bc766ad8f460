"""Compaction of a long newest turn: what a call costs once that turn alone overflows.

An agent working on one task may take hundreds of tool steps in one turn, and
with ``on_overflow="compact"`` every model call then compacts it. The turn is
built from the input: its system prompt, its first user message, then tool
steps (an assistant message with calls, and their results) taken in order
from it, replayed with a tag when more are needed. Exact counting (gpt-4o).

* ``warm``: a 500-message turn the trimmer compacted before, compacted again,
  vs the same history through ``on_overflow="drop"`` (the same plan, then the
  pinned messages alone), side by side, budget 25% of the history's total.
* ``scaling``: the time per message of compacting a 4,000-message turn vs a
  1,000-message one at one budget (25% of the smaller history's total), each
  call an agent loop's: the turn's earlier steps the same objects as at the
  trimmer's previous call, the newest step new. Linear work keeps it near 1x.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from langchain_core.messages import BaseMessage

from benchmarks.conversations import OpenAIMessage, Source, fresh_messages, mark
from benchmarks.encoding import exact_counter
from benchmarks.report import Row, Target
from benchmarks.timing import (
    BUDGET_FRACTION,
    Prepare,
    Settings,
    interleave,
    median_ratio,
    ratio_row,
)
from langchain_turntrim import TurnTrimmer

__all__ = ["compaction", "long_turn"]

#: Messages in the warm row's turn, and warm calls per sample.
WARM_MESSAGES: Final = 500
WARM_CALLS: Final = 40
#: Messages in the scaling row's turns, smaller then larger.
SCALING_MESSAGES: Final = (1_000, 4_000)
#: Each scaling sample covers at least this many messages (several calls on the smaller turn).
SAMPLE_MESSAGES: Final = 8_000
#: Messages of the input read for its tool steps.
SOURCE_MESSAGES: Final = 2_000


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


def long_turn(source: Source, size: int) -> list[OpenAIMessage]:
    """The source's pinned messages, then a turn of at least ``size`` messages: its
    first user message and its tool steps, whole, in order."""
    messages = source.conversation(SOURCE_MESSAGES)
    found = _steps(messages)
    if not found:
        msg = f"{source.label} has no tool steps"
        raise ValueError(msg)
    head = [m for m in messages if m["role"] in ("system", "developer")]
    user = next(m for m in messages if m["role"] == "user")

    def replayed() -> Iterator[list[OpenAIMessage]]:
        yield from found
        cycle = 1
        while True:
            yield from ([mark(m, f"s{cycle}") for m in step] for step in found)
            cycle += 1

    turn = [user]
    steps = replayed()
    while len(turn) < size:
        turn.extend(next(steps))
    return [*head, *turn]


def _budget(base: list[OpenAIMessage]) -> int:
    return int(exact_counter().count(fresh_messages(base, "budget")) * BUDGET_FRACTION)


def compaction(settings: Settings) -> list[Row]:
    return [_warm(settings), _scaling(settings)]


def _warm(settings: Settings) -> Row:
    base = long_turn(settings.source, WARM_MESSAGES)
    budget = _budget(base)

    def trimmer(on_overflow: str) -> TurnTrimmer:
        return TurnTrimmer(budget, token_counter=exact_counter(), on_overflow=on_overflow)

    def same(on_overflow: str) -> Prepare:
        def prepare(tag: str) -> Callable[[], object]:
            trim, messages = trimmer(on_overflow).trim, fresh_messages(base, tag)
            trim(messages)
            return lambda: [trim(messages) for _ in range(WARM_CALLS)]

        return prepare

    report = trimmer("compact").report(fresh_messages(base, "check"))
    if report.compaction is None:
        msg = f"the {WARM_MESSAGES}-message turn was not compacted at {budget} tokens"
        raise RuntimeError(msg)
    times = interleave({"compact": same("compact"), "drop": same("drop")}, settings.repeats)
    return ratio_row(
        f"warm compaction, {WARM_MESSAGES}-message turn",
        'the same over-budget history again: on_overflow="compact" / "drop"',
        Target("<=", 3),
        times,
        "compact",
        "drop",
        messages=len(base),
        budget=budget,
        calls_per_sample=WARM_CALLS,
        compaction=report.compaction.figures(),
    )


def _scaling(settings: Settings) -> Row:
    bases = [long_turn(settings.source, size) for size in SCALING_MESSAGES]
    budget = _budget(bases[0])
    sizes = [len(base) for base in bases]
    calls = [max(1, SAMPLE_MESSAGES // size) for size in sizes]

    def arm(base: list[OpenAIMessage], calls: int) -> Prepare:
        """One trimmer per size, kept across repeats, which trimmed the turn before
        its newest step; each call sends that turn with a new newest step."""
        last = len(base) - max(i for i, m in enumerate(base) if m["role"] == "assistant")
        head = fresh_messages(base[:-last], f"scaling-{len(base)}")
        trim = TurnTrimmer(
            budget,
            token_counter=exact_counter(),
            on_overflow="compact",
            cache_size=4 * len(base),
        ).trim
        trim(head)

        def prepare(tag: str) -> Callable[[], object]:
            histories: list[list[BaseMessage]] = [
                head + fresh_messages(base[-last:], f"{tag}.{i}") for i in range(calls)
            ]
            return lambda: [trim(messages) for messages in histories]

        return prepare

    names = [f"{size} messages" for size in sizes]
    arms = {name: arm(base, n) for name, base, n in zip(names, bases, calls, strict=True)}
    times = interleave(arms, settings.repeats)
    per_message = [
        [t / (size * n) for t in times[name]]
        for name, size, n in zip(names, sizes, calls, strict=True)
    ]
    small, large = SCALING_MESSAGES
    row = Row(
        f"compaction scaling, {small:,} to {large:,}-message turn",
        f"time per message: {large:,}-message turn / {small:,}-message turn (one new step a call)",
        Target("<=", 1.5),
        median_ratio(per_message[1], per_message[0]),
    )
    row.details.update(
        budget=budget,
        messages=sizes,
        calls_per_sample=calls,
        per_message_seconds=dict(zip(names, per_message, strict=True)),
    )
    return row
