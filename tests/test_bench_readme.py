"""The documentation's benchmark tables are written from results, between markers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli import QUALITY
from benchmarks.readme import INPUTS, PAGES, page_of, render, replace_between


def row(scenario: str, comparison: str, target: str, ratio: float | None, status: str) -> Any:
    return {
        "scenario": scenario,
        "comparison": comparison,
        "target": target,
        "ratio": ratio,
        "status": status,
        "notes": [f"a note on {comparison}"],
    }


def document(*rows: Any) -> Any:
    return {
        "created": "2026-12-01T12:00:00+00:00",
        "machine": {"cpus": 2, "python": "3.11.7"},
        "versions": {"langchain-core": "1", "langchain-openai": "2", "tiktoken": "3"},
        "options": {"repeats": 7},
        "rows": list(rows),
    }


def test_every_block_has_one_pair_of_markers_in_one_page() -> None:
    block = "\x00block\x00"  # in no page
    for name in ("performance", "scaling", *QUALITY):
        text = page_of(name).read_text(encoding="utf-8")
        assert replace_between(text, name, block).count(block) == 1


def test_a_block_in_two_pages_or_none_is_an_error(tmp_path: Path) -> None:
    pages = [tmp_path / "a.md", tmp_path / "b.md"]
    for page in pages:
        page.write_text("<!-- bench:scaling -->\n<!-- /bench:scaling -->\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"exactly one page, found in: .*a\.md, .*b\.md"):
        page_of("scaling", pages)
    with pytest.raises(ValueError, match="found in: none"):
        page_of("performance", pages)
    assert page_of("scaling", pages[:1]) == pages[0]
    assert PAGES[0].name == "README.md"


def test_figures_carry_their_target_and_whether_it_was_met() -> None:
    generator = document(
        row("core", "a / b", "<= 5x", 4.98, "met"),
        row("warm trim, 10 msgs", "c / d", "", 4.09, "—"),
        row("loop", "warm / cold", "<= 10%", 0.042, "met"),
        row("long-turns", "usable", ">= 100%", 1.0, "met"),
    )
    tau = document(row("core", "a / b", "<= 5x", 5.09, "MISSED"))
    blocks = render([generator, tau], generator)
    assert "| core | a / b | ≤ 5x | 4.98x ✓ | 5.09x ✗ |" in blocks["performance"]
    assert "| loop | warm / cold | ≤ 10% | 4.2% ✓ | — |" in blocks["performance"]
    assert "long-turns" not in blocks["performance"]
    assert "| warm trim, 10 msgs | c / d | — | 4.09x | — |" in blocks["scaling"]
    assert "| usable | 100.0% ✓ | ≥ 100% |" in blocks["long-turns"]
    assert f"{INPUTS[1][0]}, core: a note on a / b" in blocks["performance"]


def test_a_block_without_its_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match="exactly one <!-- bench:scaling -->"):
        replace_between("no markers", "scaling", "X")


def test_notes_of_one_scenario_that_differ_under_one_label_name_their_row() -> None:
    first, second = row("cold", "a / b", "", 2.0, "—"), row("cold", "c / d", "", 3.0, "—")
    first["notes"] = ["the same history", ".trim instead of .invoke: 14.1x", "only here: 1x"]
    second["notes"] = ["the same history", ".trim instead of .invoke: 0.26x"]
    notes = render([document(first, second), None], None)["performance"]
    name = INPUTS[0][0]
    assert notes.count(f"- {name}, cold: the same history") == 1
    assert f"- {name}, cold: only here: 1x" in notes
    assert f"- {name}, cold (a / b): .trim instead of .invoke: 14.1x" in notes
    assert f"- {name}, cold (c / d): .trim instead of .invoke: 0.26x" in notes
