"""Startup scenarios: what a fresh process pays before (and for) its first trim.

Every arm launches fresh interpreters, one after another, several per timed
sample, so that a sample is not one launch a scheduler hiccup can double; the
arms run interleaved (``benchmarks.timing.interleave``) after one untimed
warm-up round, which also writes the bytecode caches (in a temporary folder,
``PYTHONPYCACHEPREFIX``, whatever PYTHONDONTWRITEBYTECODE says: installed
packages have theirs).

* ``import``: ``python -c "import langchain_turntrim"`` vs ``python -c
  "import langchain_core.messages, langchain_core.runnables"``.
* ``cli``: the installed ``turntrim`` console script (what users run) trimming
  a 1,000-message OpenAI-format transcript with exact counting
  (``tiktoken:gpt-4o``, ``o200k_base``) to a quarter of its tokens, vs a
  process that only imports tiktoken, loads the encoding and reads the file.
  ``python -m langchain_turntrim`` is noted beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from langchain_core.messages import convert_to_messages

from benchmarks.encoding import EXACT_MODEL, REPO_ROOT
from benchmarks.report import Row, Target, seconds_summary
from benchmarks.scenarios import BUDGET_FRACTION, Settings
from benchmarks.timing import Prepare, interleave, median_ratio
from langchain_turntrim import TiktokenCounter

__all__ = ["cli", "import_"]

#: Process launches per timed sample (full run, --quick).
LAUNCHES: Final = (5, 3)
#: The encoding ``tiktoken:gpt-4o`` counts with, which the floor loads.
EXACT_ENCODING: Final = "o200k_base"
IMPORT_PACKAGE: Final = "import langchain_turntrim"
IMPORT_LANGCHAIN: Final = "import langchain_core.messages, langchain_core.runnables"
#: The floor of ``cli``: what any exact trim of the file must do at least.
CLI_FLOOR: Final = (
    "import sys, tiktoken; "
    f"tiktoken.get_encoding({EXACT_ENCODING!r}); "
    "open(sys.argv[1], 'rb').read()"
)


def _environment(pycache: str) -> dict[str, str]:
    """The benchmark's environment (TIKTOKEN_CACHE_DIR included), never downloading,
    with bytecode cached in ``pycache`` as an installed package has it (pip writes
    ``.pyc`` files; an editable checkout run with PYTHONDONTWRITEBYTECODE would
    compile this package's modules at every launch, and only this package's)."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**environment, "PYTHONPYCACHEPREFIX": pycache, "TURNTRIM_OFFLINE": "1"}


def _launches(command: Sequence[str], times: int, pycache: str) -> Prepare:
    """A timed sample: ``command`` run ``times`` times in a row, each a fresh process
    (the untimed warm-up round fills the bytecode cache)."""
    environment = _environment(pycache)

    def run() -> None:
        for _ in range(times):
            subprocess.run(
                command,
                cwd=REPO_ROOT,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=True,
            )

    def prepare(_tag: str) -> Callable[[], object]:
        return run

    return prepare


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def import_(settings: Settings) -> list[Row]:
    launches = settings.size(*LAUNCHES)
    with tempfile.TemporaryDirectory(prefix="turntrim-bench-pycache-") as pycache:
        arms = {
            "turntrim": _launches(_python(IMPORT_PACKAGE), launches, pycache),
            "langchain": _launches(_python(IMPORT_LANGCHAIN), launches, pycache),
        }
        times = interleave(arms, settings.repeats)
    row = Row(
        "import, fresh process",
        "import langchain_turntrim / import langchain_core.messages, .runnables",
        Target("<=", 1.3),
        median_ratio(times["turntrim"], times["langchain"]),
        details=seconds_summary(times),
    )
    row.details["launches_per_sample"] = launches
    return [row]


def turntrim_command() -> tuple[list[str], str]:
    """The installed console script, or ``python -m langchain_turntrim`` without one."""
    script = Path(sysconfig.get_path("scripts")) / "turntrim"
    if script.is_file():
        return [str(script)], "turntrim"
    return [sys.executable, "-m", "langchain_turntrim"], "python -m langchain_turntrim"


def cli(settings: Settings) -> list[Row]:
    n = settings.size(1_000, 200)
    launches = settings.size(*LAUNCHES)
    base = settings.source.conversation(n)
    counter = TiktokenCounter(EXACT_MODEL)
    total = counter.count(convert_to_messages(base))
    budget = int(total * BUDGET_FRACTION)
    with tempfile.TemporaryDirectory(prefix="turntrim-bench-") as folder:
        path = Path(folder) / "transcript.json"
        path.write_text(json.dumps(base, ensure_ascii=False), encoding="utf-8")
        options = ["trim", str(path), "--max-tokens", str(budget), "--token-counter"]
        options.append(f"tiktoken:{EXACT_MODEL}")
        script, shown = turntrim_command()
        pycache = str(Path(folder) / "pycache")
        kept = _kept(script + options, pycache)
        arms = {
            "turntrim": _launches(script + options, launches, pycache),
            "python -m": _launches(
                [sys.executable, "-m", "langchain_turntrim", *options], launches, pycache
            ),
            "floor": _launches(_python(CLI_FLOOR, str(path)), launches, pycache),
        }
        times = interleave(arms, settings.repeats)
    row = Row(
        f"cli, {n:,} msgs, exact",
        f"{shown} trim / import tiktoken + load {EXACT_ENCODING} + read the file",
        Target("<=", 1.3),
        median_ratio(times["turntrim"], times["floor"]),
        details=seconds_summary(times),
    )
    module = median_ratio(times["python -m"], times["floor"])
    row.notes.append(f"python -m langchain_turntrim trim / the same floor: {module:.2f}x")
    row.notes.append(f"{kept:,} of {n:,} messages kept ({budget:,} of {total:,} tokens)")
    row.details.update(
        messages=n,
        budget=budget,
        total_tokens=total,
        kept=kept,
        command=shown,
        ratio_python_m=module,
        launches_per_sample=launches,
    )
    return [row]


def _kept(command: Sequence[str], pycache: str) -> int:
    """Run the trim once, untimed, and check what it wrote: how many messages it kept."""
    environment = _environment(pycache)
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, check=False
    )
    if done.returncode:
        msg = f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}"
        raise RuntimeError(msg)
    kept = json.loads(done.stdout)
    if not isinstance(kept, list) or not kept:
        msg = f"{' '.join(command)} wrote no messages"
        raise RuntimeError(msg)
    return len(kept)
