"""The README and the documentation pages: every Python block compiles, each
page's blocks run pasted in order (offline) and print what their
``print(...)  # output`` comments say, and the README's table of names is
``__all__``, in order."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

import langchain_turntrim

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


def promised(block: str) -> list[str]:
    """What each ``print(...)  # output`` line of a block says it prints."""
    return [line.split("  # ", 1)[1] for line in block.splitlines() if line.startswith("print(")]


CODE = [(page, i) for page in PAGES for i in range(len(blocks(page)))]


@pytest.mark.parametrize(("page", "index"), CODE, ids=[f"{name(p)}:{i}" for p, i in CODE])
def test_every_python_block_compiles(page: Path, index: int) -> None:
    compile(blocks(page)[index], name(page), "exec")


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=name)
def test_every_page_runs_pasted_in_order(page: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    for block in blocks(page):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, name(page), "exec"), namespace)  # noqa: S102 - our own examples
        assert out.getvalue().splitlines() == promised(block), block


def test_the_readme_opens_with_every_public_name_in_order() -> None:
    table = README.read_text(encoding="utf-8").split("\n\n|", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)
    assert names == langchain_turntrim.__all__
