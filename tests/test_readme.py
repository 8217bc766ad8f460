"""The README's examples run, pasted in order, and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def promised(block: str) -> list[str]:
    """What each ``print(...)  # output`` line of a block says it prints."""
    return [line.split("# ", 1)[1] for line in block.splitlines() if line.startswith("print(")]


def run(block: str, namespace: dict[str, Any]) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README's own examples
    return out.getvalue().splitlines()


def test_core_example_prints_what_it_says() -> None:
    core = next(b for b in blocks("python") if "trim_history(history" in b)
    assert run(core, {}) == promised(core)


@pytest.mark.usefixtures("tiktoken_cache")
def test_every_python_example_runs_pasted_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")  # nothing calls the API
    namespace: dict[str, Any] = {}
    python = blocks("python")
    assert len(python) >= 5
    for block in python:
        assert run(block, namespace) == promised(block)
    # The LangGraph nodes do what they say on a state.
    state = {"messages": [HumanMessage("q" * 40_000, id="h1"), AIMessage("a", id="a1")]}
    state["messages"].append(HumanMessage("now", id="h2"))
    assert [m.id for m in namespace["trim"](state)["messages"]] == ["h1", "a1"]


@pytest.mark.usefixtures("tiktoken_cache")
def test_the_command_line_examples_run(tmp_path: Path) -> None:
    chat = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Mild."},
    ]
    (tmp_path / "chat.json").write_text(json.dumps(chat))
    (tmp_path / "request.json").write_text(json.dumps({"model": "gpt-4", "messages": chat}))
    records = [
        {"id": "u1", "role": "user", "tokens": 30},
        {"id": "a1", "role": "assistant", "tokens": 5},
    ]
    (tmp_path / "records.json").write_text(json.dumps(records))
    runs = [{"task_id": i, "traj": chat} for i in range(4)]  # a τ-bench export
    (tmp_path / "tau-bench-runs.json").write_text(json.dumps(runs))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    (commands,) = [b for b in blocks("sh") if "turntrim trim chat.json" in b]
    for line in commands.splitlines():
        done = subprocess.run(
            ["sh", "-c", line],  # noqa: S607 - the shell on PATH, as a user's
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, ""), line
    assert json.loads((tmp_path / "trimmed.json").read_text()) == chat
    assert json.loads((tmp_path / "runs.json").read_text()) == runs
