"""Every script in examples/ runs to the end, offline (sockets are off) and
without an API key."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
#: What an example needs beyond the package's own dependencies.
NEEDS = {"agent_middleware": "langchain", "exact_budget_openai": "langchain_openai"}


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    needed = NEEDS.get(path.stem)
    if needed is not None and importlib.util.find_spec(needed) is None:
        pytest.skip(f"needs {needed}")
    monkeypatch.setattr(sys, "argv", [str(path)])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    status: object = 0
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as done:  # as `python example.py` would exit
        status = done.code or 0
    assert status == 0
    assert capsys.readouterr().out.strip(), "an example prints what it shows"
