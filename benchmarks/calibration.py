"""Calibration: how close ``CalibratedCounter`` gets to a provider's hidden count.

Not a timing. Recorded conversations are joined into one long history; before
each assistant message (one model call) the history so far is trimmed to the
budget and "sent" to a fake provider whose tokenizer the counters cannot see,
which reports its count; the calibrated counter then observes the call, as
``TurnTrimMiddleware`` does. Two hidden tokenizers, neither of the approximate
counter's shape (4 characters a token, 3 a message):

* ``chars/3``: 3 characters a token, 7 tokens a message, 20 a request;
* ``words``: 1.3 tokens a word, 1 a punctuation mark, 4 a message, 12 a request.

Three situations, each measured by the relative error of the counter's
estimate of what was sent against the hidden count, and by the calls whose
hidden count exceeds the budget:

* after warm-up (the first 8 calls), side by side with the uncalibrated
  approximate counter trimming the same calls;
* after a shift: halfway through, the provider counts 1.5 times as many
  tokens (another model behind the same name);
* under bad reports: one report in 10 is one no provider makes (zero,
  negative, NaN, infinite, a billion, 100 times or a 100th of the count),
  which the counter must refuse; the error is against the true count.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from langchain_core.messages import AIMessage, BaseMessage

from benchmarks.conversations import recorded
from benchmarks.prompt_cache import INPUTS, without_data
from benchmarks.report import Row, Target
from benchmarks.timing import Settings
from langchain_turntrim import CalibratedCounter, TurnTrimmer

__all__ = ["calibration"]

BUDGET: Final = 8_000
#: The calls observed before the warm-up margin is lifted (``CalibratedCounter``'s default).
WARMUP: Final = CalibratedCounter().warmup
SHIFT: Final = 1.5
#: What a bad report says, given the true count: one every ``BAD_EVERY`` calls, in turn.
BAD_EVERY: Final = 10
BAD_REPORTS: Final[tuple[Callable[[int], float], ...]] = (
    lambda _: 0,
    lambda _: -5,
    lambda _: math.nan,
    lambda _: math.inf,
    lambda _: 10**9,
    lambda n: 100 * n,
    lambda n: n / 100,
)
_WORD: Final = re.compile(r"\w+")
_PUNCTUATION: Final = re.compile(r"[^\w\s]")

Provider = Callable[[Sequence[BaseMessage]], int]


def _text(message: BaseMessage) -> str:
    calls = json.dumps(message.tool_calls) if isinstance(message, AIMessage) else ""
    return message.text + calls


def chars_rule(messages: Sequence[BaseMessage]) -> int:
    return 20 + sum(math.ceil(len(_text(m)) / 3) + 7 for m in messages)


def words_rule(messages: Sequence[BaseMessage]) -> int:
    total = 12
    for m in messages:
        text = _text(m)
        total += math.ceil(1.3 * len(_WORD.findall(text))) + len(_PUNCTUATION.findall(text)) + 4
    return total


PROVIDERS: Final[dict[str, Provider]] = {"chars/3": chars_rule, "words": words_rule}


@dataclass(frozen=True)
class Loop:
    errors: list[float]  # (estimate - true) / true, per call
    over: list[bool]  # whether the true count exceeds the budget, per call

    def share_over(self, start: int = 0) -> float:
        return sum(self.over[start:]) / len(self.over[start:])

    def median(self, start: int) -> float:
        return statistics.median(abs(e) for e in self.errors[start:])

    def worst(self, start: int) -> float:
        return max(abs(e) for e in self.errors[start:])


def run_loop(
    history: Sequence[BaseMessage],
    provider: Callable[[int, Sequence[BaseMessage]], int],
    *,
    calibrated: bool = True,
    step: int = 1,
    reports: Callable[[int, int], float] = lambda _, n: n,
) -> Loop:
    """Trim before every ``step``-th assistant message; ``provider(call, sent)`` is
    the true count, ``reports(call, true)`` what the counter is told."""
    counter = CalibratedCounter() if calibrated else None
    trimmer = TurnTrimmer(BUDGET, token_counter=counter or "approximate")
    errors: list[float] = []
    over: list[bool] = []
    calls = [i for i, m in enumerate(history) if isinstance(m, AIMessage)][::step]
    for call, i in enumerate(calls):
        sent = trimmer.trim(history[:i])
        true = provider(call, sent)
        if counter is None:
            estimate = trimmer.counter.count(sent)
        else:
            estimate = counter.observe(sent, reports(call, true))
        errors.append((estimate - true) / true)
        over.append(true > BUDGET)
    return Loop(errors, over)


def _bad(call: int, true: int) -> float:
    if call % BAD_EVERY != BAD_EVERY - 1:
        return true
    return BAD_REPORTS[call // BAD_EVERY % len(BAD_REPORTS)](true)


def calibration(settings: Settings) -> list[Row]:
    """Per input: each hidden tokenizer after warm-up; a shift; bad reports."""
    missing = without_data("calibration")
    if missing:
        return missing
    step = 5 if settings.quick else 1
    rows: list[Row] = []
    for name, count in INPUTS:
        history, _ = recorded(name, count)
        label = name.split("-gpt")[0]
        for provider_name, provider in PROVIDERS.items():
            rows += _warm_rows(history, f"{label}, {provider_name}", provider, step)
        rows += _shift_rows(history, label, step)
        rows += _bad_rows(history, label, step)
    return rows


def _warm_rows(
    history: Sequence[BaseMessage], label: str, provider: Provider, step: int
) -> list[Row]:
    def hidden(_: int, sent: Sequence[BaseMessage]) -> int:
        return provider(sent)

    ours = run_loop(history, hidden, step=step)
    plain = run_loop(history, hidden, calibrated=False, step=step)
    where = f"{label}, {len(ours.errors)} calls, budget {BUDGET:,}"
    note = (
        f"{where}: after {WARMUP} calls, relative error median {ours.median(WARMUP):.2%} "
        f"(approximate: {plain.median(WARMUP):.2%}), worst {ours.worst(WARMUP):.2%} "
        f"(approximate: {plain.worst(WARMUP):.2%}); calls over budget {ours.share_over():.1%} "
        f"(approximate: {plain.share_over():.1%}); first calls: "
        + ", ".join(f"{e:+.1%}" for e in ours.errors[:3])
    )
    details = {"calibrated": vars(ours), "approximate": vars(plain)}
    return [
        Row(
            "calibration",
            f"{where}: median relative error after warm-up",
            Target("<=", 0.05, percent=True),
            ours.median(WARMUP),
            notes=[note],
            details=details,
        ),
        Row(
            "calibration",
            f"{where}: worst relative error after warm-up",
            Target("<=", 0.10, percent=True),
            ours.worst(WARMUP),
        ),
        Row(
            "calibration",
            f"{where}: share of calls over budget",
            Target("<=", 0.01, percent=True),
            ours.share_over(),
        ),
    ]


def _shift_rows(history: Sequence[BaseMessage], label: str, step: int) -> list[Row]:
    calls = len([m for m in history if isinstance(m, AIMessage)][::step])
    at = calls // 2

    def shifted(call: int, sent: Sequence[BaseMessage]) -> int:
        return chars_rule(sent) if call < at else math.ceil(SHIFT * chars_rule(sent))

    loop = run_loop(history, shifted, step=step)
    where = f"{label}, chars/3 x{SHIFT:g} from call {at + 1} of {len(loop.errors)}"
    over = sum(loop.over[at:])
    note = f"{where}: calls over budget after the shift {over}; errors at the shift: " + ", ".join(
        f"{e:+.1%}" for e in loop.errors[at : at + 6]
    )
    return [
        Row(
            "calibration",
            f"{where}: calls over budget after the shift",
            Target("<=", 3, unit="calls"),
            over,
            notes=[note],
            details=vars(loop),
        ),
        Row(
            "calibration",
            f"{where}: median relative error from {WARMUP} calls after the shift",
            Target("<=", 0.05, percent=True),
            loop.median(at + WARMUP),
        ),
    ]


def _bad_rows(history: Sequence[BaseMessage], label: str, step: int) -> list[Row]:
    def hidden(_: int, sent: Sequence[BaseMessage]) -> int:
        return chars_rule(sent)

    loop = run_loop(history, hidden, step=step, reports=_bad)
    where = f"{label}, chars/3, 1 report in {BAD_EVERY} absurd"
    return [
        Row(
            "calibration",
            f"{where}: median relative error after warm-up",
            Target("<=", 0.05, percent=True),
            loop.median(WARMUP),
            notes=[f"{where}: worst relative error after warm-up {loop.worst(WARMUP):.2%}"],
            details=vars(loop),
        ),
        Row(
            "calibration",
            f"{where}: share of calls over budget",
            Target("<=", 0.01, percent=True),
            loop.share_over(),
        ),
    ]
