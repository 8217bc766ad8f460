"""Every code block of the README and of the documentation pages runs, offline.

A page's Python blocks run pasted in order, in one namespace of their own, and
print what their ``print(...)  # output`` comments say; the command-line
blocks run in a folder holding the files they name.
"""

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

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


def promised(block: str) -> list[str]:
    """What each ``print(...)  # output`` line of a block says it prints."""
    return [line.split("  # ", 1)[1] for line in block.splitlines() if line.startswith("print(")]


def run(block: str, namespace: dict[str, Any], page: Path) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(page), "exec"), namespace)  # noqa: S102 - the docs' own examples
    return out.getvalue().splitlines()


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_hold_the_examples() -> None:
    python = {name(p): len(blocks(p, "python")) for p in PAGES}
    assert python["README.md"] >= 4
    assert sum(python.values()) >= 15
    assert sum(bool(promised(b)) for p in PAGES for b in blocks(p, "python")) >= 12


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, "python")], ids=name)
def test_every_python_block_runs_pasted_in_order(page: Path) -> None:
    namespace: dict[str, Any] = {}
    for block in blocks(page, "python"):
        assert run(block, namespace, page) == promised(block), block


def commands() -> list[tuple[Path, str]]:
    """Each ``turntrim`` (or piped) line of the pages' shell blocks."""
    return [
        (page, line)
        for page in PAGES
        for block in blocks(page, "sh")
        for line in block.splitlines()
        if line.startswith(("turntrim ", "cat "))
    ]


def test_the_command_line_examples_are_found() -> None:
    assert {name(p) for p, _ in commands()} == {"README.md", "docs/guides/cli.md"}


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
    for page, line in commands():
        done = subprocess.run(
            ["sh", "-c", line],  # noqa: S607 - the shell on PATH, as a user's
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, ""), (name(page), line)
    assert json.loads((tmp_path / "trimmed.json").read_text()) == chat
    assert json.loads((tmp_path / "runs.json").read_text()) == runs


def setup_lines() -> list[tuple[Path, str]]:
    """The shell lines that are not run: installs, make targets, environment."""
    return [
        (page, line.split("  #", 1)[0].strip())
        for page in PAGES
        for block in blocks(page, "sh")
        for line in block.splitlines()
        if line and not line.startswith(("turntrim ", "cat "))
    ]


def test_the_setup_lines_name_what_exists() -> None:
    """Each install names extras pyproject.toml declares, each make line a target
    of the Makefile; nothing else is left unrun."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = pyproject.split("[project.optional-dependencies]")[1]
    extras = set(re.findall(r"^(\w+) = \[", declared, re.MULTILINE))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))
    seen = set()
    for page, line in setup_lines():
        if line.startswith("pip install -e "):
            named = re.fullmatch(r"pip install -e '?\.(?:\[([\w,]+)\])?'?", line)
            assert named, (name(page), line)
            assert set(filter(None, (named[1] or "").split(","))) <= extras, (name(page), line)
            seen.add("pip")
        elif line.startswith("make "):
            assert line.split()[1] in targets, (name(page), line)
            seen.add("make")
        else:
            assert line.startswith("export TIKTOKEN_CACHE_DIR="), (name(page), line)
    assert seen == {"pip", "make"}
