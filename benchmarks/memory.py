"""Memory scenarios. Each probe runs in its own subprocess so that peaks never mix.

``python -m benchmarks.memory PROBE --n N [--seed S | --transcripts FILE]``
prints one JSON object; the scenario functions below run the probes and turn
their output into rows.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from benchmarks.conversations import Source, fresh_messages, make_source, records
from benchmarks.encoding import EXACT_MODEL, REPO_ROOT, load_exact_encoding
from benchmarks.report import Row, Target
from benchmarks.scenarios import BUDGET_FRACTION, Settings, sum_tokens
from langchain_turntrim import TiktokenCounter, TurnTrimmer, trim_history

__all__ = ["cache", "held", "memory"]

#: The LRU size of the cache scenario, and how many messages each trim gets.
CACHE_SIZE: Final = 10_000
CHUNK: Final = 10_000
_STATUS: Final = Path("/proc/self/status")
_CLEAR_REFS: Final = Path("/proc/self/clear_refs")


def _max_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _status_kib(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    msg = f"no {field} in {_STATUS}"
    raise OSError(msg)


def _rss_kib() -> int:
    return _status_kib("VmRSS")


def _peak_kib() -> int:
    return _status_kib("VmHWM")


def _reset_peak() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS, where Linux allows it."""
    try:
        _CLEAR_REFS.write_text("5")
        _peak_kib()
    except OSError:
        return False
    return True


def probe_rss(source: Source, n: int) -> dict[str, Any]:
    """RSS after imports, holding the records, and at its peak while trimming them.

    The peak is reset before building and before trimming (Linux's
    /proc/self/clear_refs), so the imports' own transient peak cannot hide
    either; without that, ru_maxrss (the peak since start) is used.
    """
    resettable = _reset_peak()
    peak, now = (_peak_kib, _rss_kib) if resettable else (_max_rss_kib, _max_rss_kib)
    base = now()
    items = records(source, n)
    held = now()
    budget = int(sum_tokens(items) * BUDGET_FRACTION)
    _reset_peak()
    kept = trim_history(items, budget)
    return {
        "base_kib": base,
        "held_kib": held,
        "peak_kib": peak(),
        "kept": len(kept),
        "peak_reset": resettable,
    }


def probe_tracemalloc(source: Source, n: int) -> dict[str, Any]:
    """Python-level bytes held by the records, and the peak while trimming them."""
    tracemalloc.start()
    items = records(source, n)
    budget = int(sum_tokens(items) * BUDGET_FRACTION)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    kept = trim_history(items, budget)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"held_bytes": held, "peak_bytes": peak, "kept": len(kept)}


def _small_messages(start: int, count: int) -> list[BaseMessage]:
    """Distinct small messages: alternating user questions and assistant answers."""
    return [
        HumanMessage(f"question {i}: where is order {i}?")
        if i % 2 == 0
        else AIMessage(f"answer {i}: order {i} ships today.")
        for i in range(start, start + count)
    ]


def probe_cache(_source: Source, n: int) -> dict[str, Any]:
    """Trim ``n`` distinct messages, CHUNK at a time, through one exact trimmer
    (the counter the cache is for) with ``cache_size=CACHE_SIZE``."""
    problem = load_exact_encoding()
    if problem:
        raise RuntimeError(problem)
    counter = TiktokenCounter(EXACT_MODEL)
    trimmer = TurnTrimmer(max_tokens=2_000, token_counter=counter, cache_size=CACHE_SIZE)
    rss_first = 0
    for start in range(0, n, CHUNK):
        trimmer.invoke(_small_messages(start, min(CHUNK, n - start)))
        rss_first = rss_first or _max_rss_kib()
    return {
        "messages": n,
        "cache_size": CACHE_SIZE,
        "entries": len(trimmer.counter),  # type: ignore[arg-type]
        "rss_first_chunk_kib": rss_first,
        "rss_end_kib": _max_rss_kib(),
    }


def probe_held(source: Source, n: int) -> dict[str, Any]:
    """Python-level bytes an exact trimmer holds for an ``n``-message history it
    trimmed as an agent loop does (without its last two messages, without its
    last one, then whole): every cache and remembered history, not the messages."""
    problem = load_exact_encoding()
    if problem:
        raise RuntimeError(problem)
    messages = fresh_messages(source.conversation(n), "held")
    budget = int(TiktokenCounter(EXACT_MODEL).count(messages) * BUDGET_FRACTION)
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=TiktokenCounter(EXACT_MODEL))
    trimmer.trim(messages[:1])  # the encoding and the tools' caches, loaded
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for end in (n - 2, n - 1, n):
        trimmer.trim(messages[:end])
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return {"messages": n, "held_bytes": held}


PROBES: Final[dict[str, Callable[[Source, int], dict[str, Any]]]] = {
    "rss": probe_rss,
    "tracemalloc": probe_tracemalloc,
    "cache": probe_cache,
    "held": probe_held,
}


def run_probe(probe: str, source: Source, n: int) -> dict[str, Any]:
    """Run ``probe`` in a fresh interpreter and return what it printed."""
    command = [sys.executable, "-m", "benchmarks.memory", probe, "--n", str(n), *source.argv()]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        msg = f"memory probe {probe!r} failed ({done.returncode}):\n{done.stderr}"
        raise RuntimeError(msg)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def memory(settings: Settings) -> list[Row]:
    n = settings.size(1_000_000, 100_000)
    rss = run_probe("rss", settings.source, n)
    traced = run_probe("tracemalloc", settings.source, n)
    ratio = (rss["peak_kib"] - rss["base_kib"]) / (rss["held_kib"] - rss["base_kib"])
    traced_ratio = traced["peak_bytes"] / traced["held_bytes"]
    row = Row(
        f"memory, {n:,} records", "peak RSS trimming / holding them", Target("<=", 1.5), ratio
    )
    row.notes.append(
        f"RSS above the interpreter's {rss['base_kib'] / 1024:.0f} MiB: holding "
        f"{(rss['held_kib'] - rss['base_kib']) / 1024:.0f} MiB, peak while trimming "
        f"{(rss['peak_kib'] - rss['base_kib']) / 1024:.0f} MiB; tracemalloc: {traced_ratio:.3f}x"
    )
    row.details.update(records=n, rss=rss, tracemalloc=traced, tracemalloc_ratio=traced_ratio)
    return [row]


def cache(settings: Settings) -> list[Row]:
    n = settings.size(1_000_000, 100_000)
    found = run_probe("cache", settings.source, n)
    row = Row(
        f"cache, {n:,} distinct msgs",
        f"cached counts / cache_size ({CACHE_SIZE:,})",
        Target("<=", 1.0),
        found["entries"] / found["cache_size"],
    )
    growth = (found["rss_end_kib"] - found["rss_first_chunk_kib"]) / 1024
    row.notes.append(
        f"{found['entries']:,} counts cached; peak RSS grew {growth:.0f} MiB "
        f"after the first {CHUNK:,} messages"
    )
    row.details.update(found)
    return [row]


def held(settings: Settings) -> list[Row]:
    n = settings.size(10_000, 2_000)
    found = run_probe("held", settings.source, n)
    row = Row(
        f"caches, {n:,} msgs, exact",
        "bytes held per message (counts, remembered histories)",
        Target("<=", 300, unit="B"),
        found["held_bytes"] / n,
    )
    row.details.update(found)
    return [row]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory")
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--transcripts", type=Path)
    args = parser.parse_args(argv)
    source = make_source(args.seed, args.transcripts)
    print(json.dumps(PROBES[args.probe](source, args.n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
