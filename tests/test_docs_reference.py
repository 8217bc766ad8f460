"""docs/reference.md renders every public name, and only those."""

from __future__ import annotations

import re
from pathlib import Path

import langchain_turntrim

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"
#: Public wherever the ``agents`` extra is installed (``__all__`` names them
#: only then); the reference documents them either way.
AGENTS_ONLY = {"TurnTrimMiddleware", "TurnTrimStateMiddleware"}


def _rendered() -> list[str]:
    """The names the page's ``::: langchain_turntrim.NAME`` lines render, in order."""
    text = REFERENCE.read_text(encoding="utf-8")
    return re.findall(r"^:::\s+langchain_turntrim\.(\S+)\s*$", text, re.MULTILINE)


def test_every_public_name_is_in_the_reference() -> None:
    public = set(langchain_turntrim.__all__) | AGENTS_ONLY
    assert sorted(public - set(_rendered())) == []


def test_the_reference_renders_only_public_names_once_each() -> None:
    public = set(langchain_turntrim.__all__) | AGENTS_ONLY
    rendered = _rendered()
    assert sorted(set(rendered) - public) == []
    assert sorted({n for n in rendered if rendered.count(n) > 1}) == []


def test_every_directive_names_the_package() -> None:
    """A ``:::`` line for another module (or a typo in the prefix) would slip
    past the two tests above."""
    text = REFERENCE.read_text(encoding="utf-8")
    directives = re.findall(r"^:::.*$", text, re.MULTILINE)
    assert len(directives) == len(_rendered())
