"""``python -m benchmarks``: run the scenarios, print the table, write the JSON file."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from benchmarks import (
    cache_cost,
    calibrated,
    calibration,
    compaction,
    long_turns,
    memory,
    middleware,
    scenarios,
    stable_prefix,
    startup,
    warm,
)
from benchmarks.conversations import make_source
from benchmarks.encoding import REPO_ROOT, load_exact_encoding
from benchmarks.report import Row, markdown_table, write_json
from benchmarks.scenarios import Settings

__all__ = ["main"]

Scenario = Callable[[Settings], list[Row]]

#: Every scenario by name, in run order, and whether it needs the exact encoding.
#: ``core`` runs first, on a fresh heap: its floor is a memory-bound pass whose speed
#: depends on how scattered the records are, so every run measures it alike.
SCENARIOS: Final[dict[str, tuple[Scenario, bool]]] = {
    "core": (scenarios.core, False),
    "cold-exact": (scenarios.cold_exact, True),
    "agent-loop": (scenarios.agent_loop, True),
    "warm-scaling": (warm.warm_scaling, True),
    "middleware": (middleware.middleware, True),
    "compaction": (compaction.compaction, True),
    "approximate": (scenarios.approximate, False),
    "approximate-loop": (scenarios.approximate_loop, False),
    "calibrated-loop": (calibrated.calibrated_loop, False),
    "memory": (memory.memory, False),
    "cache": (memory.cache, True),
    "held": (memory.held, True),
    "long-turns": (long_turns.long_turns, False),
    "stable-prefix": (stable_prefix.stable_prefix, False),
    "cache-cost": (cache_cost.cache_cost, False),
    "calibration": (calibration.calibration, False),
    "import": (startup.import_, False),
    "cli": (startup.cli, True),
}
#: Scenarios measuring quality, not speed, on their own recorded data (whatever the input).
QUALITY: Final = ("long-turns", "stable-prefix", "cache-cost", "calibration")
TIMING: Final = tuple(name for name in SCENARIOS if name not in QUALITY)
MIN_REPEATS: Final = 5
DEFAULT_REPEATS: Final = 7
RESULTS: Final = REPO_ROOT / "benchmarks" / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="TurnTrimmer against its baselines, as ratios measured side by side.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
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
        default=DEFAULT_REPEATS,
        help=f"timed repeats per arm; figures are medians (default {DEFAULT_REPEATS})",
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
        help=f"every scenario but the quality ones ({', '.join(QUALITY)}), whose data "
        "does not depend on the input",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    return args


def skipped_rows(name: str, reason: str) -> list[Row]:
    return [Row(name, "skipped: the exact encoding is unavailable", None, skipped=reason)]


def run(selected: list[str], settings: Settings) -> list[Row]:
    exact_problem: str | None = None
    if any(SCENARIOS[name][1] for name in selected):
        exact_problem = load_exact_encoding()
        if exact_problem:
            print(f"Skipping the exact scenarios: {exact_problem}\n", flush=True)
    rows: list[Row] = []
    for name in selected:
        scenario, needs_exact = SCENARIOS[name]
        if needs_exact and exact_problem:
            rows.extend(skipped_rows(name, exact_problem))
            continue
        started = time.perf_counter()
        print(f"running {name} ...", flush=True)
        found = scenario(settings)
        for row in found:
            print(f"  {row.comparison}: {row.shown_ratio} ({row.status})", flush=True)
        print(f"  [{time.perf_counter() - started:.0f} s]", flush=True)
        rows.extend(found)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.repeats < MIN_REPEATS:
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
