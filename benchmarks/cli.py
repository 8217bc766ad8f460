"""``python -m benchmarks``: run the scenarios, print the report, write the JSON file."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from benchmarks import calibration, compaction, long_turns, memory, middleware, prompt_cache, speed
from benchmarks.conversations import make_source
from benchmarks.encoding import REPO_ROOT, exact_problem
from benchmarks.report import Row, markdown_table, write_json
from benchmarks.timing import Settings

__all__ = ["QUALITY", "SCENARIOS", "main"]

Scenario = Callable[[Settings], list[Row]]

#: Every scenario by name, in run order, and whether it needs the exact encoding.
SCENARIOS: Final[dict[str, tuple[Scenario, bool]]] = {
    "exact-loop": (speed.exact_loop, True),
    "approximate-loop": (speed.approximate_loop, False),
    "invoke": (speed.invoke, True),
    "cold-exact": (speed.cold_exact, True),
    "cold-approximate": (speed.cold_approximate, False),
    "reloaded": (speed.reloaded, True),
    "middleware": (middleware.middleware, False),
    "held": (memory.held, True),
    "compaction": (compaction.compaction, True),
    "long-turns": (long_turns.long_turns, False),
    "stable-prefix": (prompt_cache.stable_prefix, False),
    "cache-cost": (prompt_cache.cache_cost, False),
    "calibration": (calibration.calibration, False),
}
#: Scenarios measuring quality, not speed, on their own recorded data (whatever the input).
QUALITY: Final = ("long-turns", "stable-prefix", "cache-cost", "calibration")
TIMING: Final = tuple(name for name in SCENARIOS if name not in QUALITY)
MIN_REPEATS: Final = 5
DEFAULT_REPEATS: Final = 7
QUICK_REPEATS: Final = 3
RESULTS: Final = REPO_ROOT / "benchmarks" / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="TurnTrimmer against its floors and baselines, measured side by side.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {QUICK_REPEATS} repeats, fewer recorded conversations",
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        help="OpenAI-format conversations (a JSON array of conversations, or of objects "
        "whose 'traj' holds one) instead of the seeded generator",
    )
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    parser.add_argument(
        "--repeats",
        type=int,
        help=f"timed repeats per arm; figures are medians (default {DEFAULT_REPEATS}, "
        f"{QUICK_REPEATS} with --quick)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(SCENARIOS),
        metavar="NAME",
        help=f"run only this scenario (repeatable): {', '.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help=f"every scenario but the quality ones ({', '.join(QUALITY)})",
    )
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return args


def run(selected: list[str], settings: Settings) -> list[Row]:
    problem = exact_problem() if any(SCENARIOS[name][1] for name in selected) else None
    if problem:
        print(f"Skipping the exact scenarios: {problem}\n", flush=True)
    rows: list[Row] = []
    for name in selected:
        scenario, needs_exact = SCENARIOS[name]
        if needs_exact and problem:
            rows.append(Row(name, "skipped: no exact encoding", None, skipped=problem))
            continue
        started = time.perf_counter()
        print(f"running {name} ...", flush=True)
        found = scenario(settings)
        for row in found:
            target = f" (target {row.target})" if row.target else ""
            print(f"  {row.status} {row.comparison}: {row.shown}{target}", flush=True)
        print(f"  [{time.perf_counter() - started:.0f} s]", flush=True)
        rows.extend(found)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeats < MIN_REPEATS and not args.quick:
        print(f"warning: --repeats {args.repeats} < {MIN_REPEATS}: figures are not robust\n")
    source = make_source(args.seed, args.transcripts)
    settings = Settings(source=source, repeats=args.repeats, quick=args.quick)
    selected = args.only or list(TIMING if args.timing_only else SCENARIOS)
    print(f"input: {source.label}; repeats: {args.repeats}; quick: {args.quick}\n", flush=True)
    rows = run(selected, settings)
    print("\n" + markdown_table(rows))
    notes = [f"- {row.scenario}: {note}" for row in rows for note in row.notes]
    if notes:
        print("\nNotes:\n" + "\n".join(notes))
    missed = [row for row in rows if row.met is False]
    print(f"\n{len(rows) - len(missed)} of {len(rows)} rows met or without a target; missed:")
    print("\n".join(f"  ✗ {row.scenario}: {row.comparison}" for row in missed) or "  none")
    options = {
        "input": source.label,
        "repeats": args.repeats,
        "quick": args.quick,
        "only": selected,
        "timing": set(TIMING) <= set(selected),
        "quality": set(QUALITY) <= set(selected),
    }
    print(f"\nwrote {write_json(rows, options, RESULTS).relative_to(REPO_ROOT)}")
    return 0
