"""Calibration: how close ``CalibratedCounter`` gets to a provider's hidden count.

Not a timing. Recorded conversations are joined into one long history, as in
``stable_prefix``; before each assistant message (one model call) the history
so far is trimmed to the budget and "sent" to a fake provider whose tokenizer
the counters cannot see, which reports its count; the calibrated counter then
observes the call, as ``TurnTrimMiddleware`` does. Two hidden tokenizers,
neither of the approximate counter's shape (4 characters a token, 3 a message):

* ``chars/3``: 3 characters a token, 7 tokens a message, 20 a request;
* ``words``: 1.3 tokens a word, 1 a punctuation mark, 4 a message, 12 a request.

Side by side on the same calls, each trimming with its own estimate:
``CalibratedCounter()`` and the uncalibrated approximate counter. Reported:
the median and worst relative error of each estimate of what was sent, after
the warm-up (the first 8 calls), and the share of calls whose reported count
exceeds the budget.
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

from benchmarks.long_turns import DATA
from benchmarks.report import Row, Target
from benchmarks.scenarios import Settings
from benchmarks.stable_prefix import INPUTS, _history
from langchain_turntrim import CalibratedCounter, TurnTrimmer
from langchain_turntrim._counting.calibrated import DEFAULT_WARMUP

__all__ = ["calibration"]

BUDGET: Final = 8_000
_WORD: Final = re.compile(r"\w+")
_PUNCTUATION: Final = re.compile(r"[^\w\s]")


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


PROVIDERS: Final[dict[str, Callable[[Sequence[BaseMessage]], int]]] = {
    "chars/3": chars_rule,
    "words": words_rule,
}


@dataclass(frozen=True)
class Loop:
    errors: list[float]  # (estimate - reported) / reported, per call
    over: int  # calls whose reported count exceeds the budget
    calls: int

    def after_warmup(self) -> list[float]:
        return [abs(e) for e in self.errors[DEFAULT_WARMUP:]]


def run_loop(
    history: Sequence[BaseMessage],
    provider: Callable[[Sequence[BaseMessage]], int],
    *,
    calibrated: bool,
    step: int = 1,
) -> Loop:
    counter = CalibratedCounter() if calibrated else None
    trimmer = TurnTrimmer(max_tokens=BUDGET, token_counter=counter or "approximate")
    errors: list[float] = []
    over = 0
    calls = [i for i, m in enumerate(history) if isinstance(m, AIMessage)][::step]
    for i in calls:
        sent = trimmer.trim(history[:i])
        reported = provider(sent)
        estimate = counter.observe(sent, reported) if counter else trimmer.counter.count(sent)
        errors.append((estimate - reported) / reported)
        over += reported > BUDGET
    return Loop(errors, over, len(calls))


def calibration(settings: Settings) -> list[Row]:
    """Per input and hidden tokenizer: the calibrated estimate's errors and overruns."""
    if not all((DATA / name).exists() for name, _ in INPUTS):
        reason = f"the recorded conversations ({', '.join(n for n, _ in INPUTS)}) are absent"
        return [Row("calibration", "skipped: no data", None, skipped=reason)]
    step = 5 if settings.quick else 1
    rows: list[Row] = []
    for name, count in INPUTS:
        history = _history(name, count)
        label = name.split("-gpt")[0]
        for provider_name, provider in PROVIDERS.items():
            ours = run_loop(history, provider, calibrated=True, step=step)
            plain = run_loop(history, provider, calibrated=False, step=step)
            ours_warm, plain_warm = ours.after_warmup(), plain.after_warmup()
            where = f"{label}, {provider_name}, {ours.calls} calls, budget {BUDGET:,}"
            notes = [
                (
                    f"{where}: after {DEFAULT_WARMUP} calls, relative error median "
                    f"{statistics.median(ours_warm):.2%} (approximate: "
                    f"{statistics.median(plain_warm):.2%}), worst {max(ours_warm):.2%} "
                    f"(approximate: {max(plain_warm):.2%}); calls over budget "
                    f"{ours.over / ours.calls:.1%} (approximate: {plain.over / plain.calls:.1%}); "
                    f"first calls: {', '.join(f'{e:+.1%}' for e in ours.errors[:3])}"
                )
            ]
            details = {
                "calls": ours.calls,
                "calibrated": {"errors": ours.errors, "over": ours.over},
                "approximate": {"errors": plain.errors, "over": plain.over},
            }
            rows += [
                Row(
                    "calibration",
                    f"{where}: median relative error after warm-up",
                    Target("<=", 0.05, percent=True),
                    statistics.median(ours_warm),
                    notes=notes,
                    details=details,
                ),
                Row(
                    "calibration",
                    f"{where}: worst relative error after warm-up",
                    Target("<=", 0.10, percent=True),
                    max(ours_warm),
                ),
                Row(
                    "calibration",
                    f"{where}: share of calls over budget",
                    Target("<=", 0.01, percent=True),
                    ours.over / ours.calls,
                ),
            ]
    return rows
