"""``CalibratedCounter`` in the agent loop: what learning a provider's count costs.

Three rows:

* the ``approximate-loop`` loop (a history growing to 200 messages, trimmed
  before every assistant message by one reused trimmer, budget 25% of its
  final approximate total) with ``TurnTrimmer(token_counter=CalibratedCounter())``
  vs the same loop with ``TurnTrimmer()``, whole loops side by side;
* one trim of the whole history followed by ``observe()`` of what it kept
  (the provider's count of it, ``chars/3`` of the ``calibration`` scenario,
  looked up outside the clock), by a trimmer that trimmed the history before
  and whose counter has a full window of 64 observations (the requests of
  the loop's calls, each reported by the same rule), so that every trim
  plans under a calibration it has not planned with yet; vs one warm trim
  of the same history by ``TurnTrimmer()``;
* in a subprocess: the bytes a whole-list counter's cache holds after 400
  trims of a 2,400-message history growing by a step a call (the count
  cache's keys and counts, measured with tracemalloc as what ``clear()``
  frees) vs its byte bound.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.calibration import chars_rule
from benchmarks.conversations import OpenAIMessage, Source, fresh_messages, make_source
from benchmarks.encoding import REPO_ROOT
from benchmarks.report import Row, Target, seconds_summary
from benchmarks.scenarios import (
    Settings,
    approximate_budget,
    arm,
    assistant_steps,
    dropping_steps,
    loop_over,
)
from benchmarks.timing import Prepare, interleave, median_ratio
from langchain_turntrim import CalibratedCounter, TurnTrimmer, per_list
from langchain_turntrim._counting.calibrated import WINDOW
from langchain_turntrim._counting.whole_list import DEFAULT_CACHE_BYTES

__all__ = ["calibrated_loop"]

#: Trims (each followed by ``observe``, or warm) timed together per repeat.
CALLS: Final = 50


def calibrated_loop(settings: Settings) -> list[Row]:
    base = settings.source.conversation(settings.size(200, 60))
    budget = approximate_budget(base)
    return [
        _loop_row(settings, base, budget),
        _observe_row(settings, base, budget),
        _bytes_row(settings),
    ]


def _loop_row(settings: Settings, base: list[OpenAIMessage], budget: int) -> Row:
    steps = assistant_steps(base)
    loop = loop_over(steps)
    arms: dict[str, Prepare] = {
        "calibrated": arm(
            lambda: TurnTrimmer(max_tokens=budget, token_counter=CalibratedCounter()).trim,
            base,
            loop,
        ),
        "approximate": arm(lambda: TurnTrimmer(max_tokens=budget).trim, base, loop),
    }
    times = interleave(arms, settings.repeats)
    row = Row(
        f"calibrated loop, {len(steps)} trims up to {len(base)} msgs",
        "TurnTrimmer(token_counter=CalibratedCounter()) / TurnTrimmer(), whole loop",
        Target("<=", 1.2),
        median_ratio(times["calibrated"], times["approximate"]),
        details=seconds_summary(times),
    )
    row.details.update(messages=len(base), budget=budget, steps=len(steps))
    row.notes.append(dropping_steps(TurnTrimmer(max_tokens=budget), base, steps))
    return row


def _primed(trimmer: TurnTrimmer, messages: list[BaseMessage]) -> None:
    """``trimmer`` has trimmed ``messages`` and the history before its last two messages."""
    trimmer.trim(messages[:-2])
    trimmer.trim(messages[:-1])
    trimmer.trim(messages)


def _observe_row(settings: Settings, base: list[OpenAIMessage], budget: int) -> Row:
    def observed(tag: str) -> Callable[[], object]:
        counter = CalibratedCounter()
        trimmer = TurnTrimmer(max_tokens=budget, token_counter=counter)
        messages = fresh_messages(base, tag)
        # What the provider reports for each request the trim may send (a
        # suffix of the history after the system prompt), by its length.
        pinned = [m for m in messages if m.type == "system"]
        reported = {
            len(pinned) + len(messages) - k: chars_rule([*pinned, *messages[k:]])
            for k in range(len(messages))
        }
        # A full window of varied observations: the requests of the loop's
        # calls (the history before each assistant message), as an agent's.
        steps = assistant_steps(base)
        for i in range(WINDOW):
            kept = trimmer.trim(messages[: steps[i % len(steps)]])
            counter.observe(kept, chars_rule(kept))
        _primed(trimmer, messages)

        def run() -> None:
            for _ in range(CALLS):
                kept = trimmer.trim(messages)
                counter.observe(kept, reported.get(len(kept), 0))

        return run

    def warm(tag: str) -> Callable[[], object]:
        trimmer = TurnTrimmer(max_tokens=budget)
        messages = fresh_messages(base, tag)
        _primed(trimmer, messages)
        return lambda: [trimmer.trim(messages) for _ in range(CALLS)]

    times = interleave({"observed": observed, "warm": warm}, settings.repeats)
    row = Row(
        f"trim + observe, {len(base)} msgs",
        "CalibratedCounter: trim then observe() / TurnTrimmer(): warm trim",
        Target("<=", 1.4),
        median_ratio(times["observed"], times["warm"]),
        details=seconds_summary(times),
    )
    row.details.update(messages=len(base), budget=budget, calls_per_sample=CALLS)
    return row


# -- the whole-list cache's bytes, in a subprocess ---------------------------------------------


def probe_bytes(source: Source, n: int, trims: int) -> dict[str, Any]:
    """The bytes the count cache of a whole-list counter holds after ``trims``
    trims of ``n`` messages (the history growing by one step a trim, to ``n``)."""
    counter = per_list(count_tokens_approximately)
    messages = fresh_messages(source.conversation(n), "bytes")
    budget = int(count_tokens_approximately(messages) * 0.25)
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=counter)
    cache = trimmer.counter
    ends = [max(1, n - trims + 1 + i) for i in range(trims)]
    tracemalloc.start()
    for end in ends:
        trimmer.trim(messages[:end])
    held = tracemalloc.get_traced_memory()[0]
    entries = len(cache)  # type: ignore[arg-type]
    cache.clear()  # type: ignore[union-attr]
    freed = held - tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "messages": n,
        "trims": trims,
        "entries": entries,
        "held_bytes": freed,
        "bound_bytes": DEFAULT_CACHE_BYTES,
    }


def _bytes_row(settings: Settings) -> Row:
    n, trims = settings.size(2_400, 600), settings.size(400, 100)
    command = [
        sys.executable,
        "-m",
        "benchmarks.calibrated",
        "--n",
        str(n),
        "--trims",
        str(trims),
        *settings.source.argv(),
    ]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        msg = f"whole-list cache probe failed ({done.returncode}):\n{done.stderr}"
        raise RuntimeError(msg)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    row = Row(
        f"whole-list cache, {trims} trims of {n:,} msgs",
        f"bytes cached / byte bound ({DEFAULT_CACHE_BYTES / 2**20:.0f} MiB)",
        Target("<=", 1.0),
        found["held_bytes"] / found["bound_bytes"],
    )
    row.notes.append(
        f"{found['entries']:,} counts cached, {found['held_bytes'] / 2**20:.1f} MiB "
        "(what clear() frees)"
    )
    row.details.update(found)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrated")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--trims", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--transcripts", type=Path)
    args = parser.parse_args(argv)
    print(json.dumps(probe_bytes(make_source(args.seed, args.transcripts), args.n, args.trims)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
