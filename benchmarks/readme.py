"""``python -m benchmarks.readme``: write the documentation's benchmark tables from results.

Each input's newest full-size run in ``benchmarks/results`` (every timing
scenario ran; ``--quick`` and partial ``--only`` runs are ignored) fills the
tables between their markers in README.md and the pages of ``docs/``, so no
figure there is typed by hand. The blocks, each ``<!-- bench:NAME -->`` ...
``<!-- /bench:NAME -->`` in at most one page (a block no page holds is
skipped, with a note): ``performance`` (every timing row, per input) and one
per quality scenario (``long-turns``, ``stable-prefix``, ``cache-cost``,
``calibration``). ``make bench`` runs the inputs and then this.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks.cli import QUALITY
from benchmarks.report import MARK, show_figure

__all__ = ["INPUTS", "main", "page_of", "pages", "render", "replace_between"]

ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS: Final = Path(__file__).resolve().parent / "results"
#: Each input's column heading, and how its runs are recognised by their input label.
INPUTS: Final[tuple[tuple[str, Callable[[str], bool]], ...]] = (
    ("generator", lambda label: label.startswith("generator")),
    ("τ-bench", lambda label: "tau-bench" in label),
)

Document = dict[str, Any]
Key = tuple[str, str, str]


def newest_run(results: Path, matches: Callable[[str], bool], kind: str) -> Document | None:
    """The newest full-size run of an input in which every ``kind`` (``"timing"`` or
    ``"quality"``) scenario ran."""
    for path in sorted(results.glob("bench-*.json"), reverse=True):
        document: Document = json.loads(path.read_text(encoding="utf-8"))
        options = document["options"]
        if matches(options["input"]) and not options["quick"] and options.get(kind):
            return document
    return None


def _figure(row: dict[str, Any]) -> str:
    ratio = row["ratio"]
    if ratio is None:
        return "—"
    target = row["target"]
    shown = show_figure(ratio, target)
    return f"{shown} {MARK[row['met']]}" if row.get("met") is not None else shown


def _rows(document: Document | None) -> dict[Key, dict[str, Any]]:
    if document is None:
        return {}
    return {(r["scenario"], r["comparison"], r["target"]): r for r in document["rows"]}


def _target(text: str) -> str:
    return text.replace("<=", "≤").replace(">=", "≥") if text else "—"


def performance_table(documents: Sequence[Document | None]) -> str:
    """Scenario, comparison, target and one column per input, every timing row."""
    by_input = [_rows(d) for d in documents]
    keys: list[Key] = []
    for rows in by_input:
        keys += [k for k in rows if k not in keys]
    keys = [k for k in keys if k[0] not in QUALITY]
    head = ["scenario", "comparison", "target", *(name for name, _ in INPUTS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        cells = [key[0], key[1], _target(key[2])]
        cells += [_figure(rows[key]) if key in rows else "—" for rows in by_input]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notes(documents: Sequence[Document | None]) -> str:
    """Every timing row's notes, per input, named by their scenario; notes of
    one scenario that say different things under one label (``.trim instead
    of .invoke: 14.1x`` on one row, ``: 0.26x`` on another) by their row's
    comparison too."""
    lines = []
    for (name, _), document in zip(INPUTS, documents, strict=True):
        rows = [r for r in (document or {}).get("rows", []) if r["scenario"] not in QUALITY]
        said: dict[tuple[str, str], set[str]] = {}
        for row in rows:
            for note in row["notes"]:
                said.setdefault((row["scenario"], _label(note)), set()).add(note)
        for row in rows:
            scenario = row["scenario"]
            for note in row["notes"]:
                ambiguous = len(said[scenario, _label(note)]) > 1
                where = f"{scenario} ({row['comparison']})" if ambiguous else scenario
                lines.append(f"- {name}, {where}: {note}")
    return "\n".join(dict.fromkeys(lines))  # rows of one scenario may share a note


def _label(note: str) -> str:
    """What a note is about: its text before the figure (``label: figure``)."""
    return note.rsplit(": ", 1)[0]


def quality_block(document: Document | None, scenario: str) -> str:
    """One quality scenario's rows (figure and target) and notes."""
    rows = [r for r in (document or {"rows": []})["rows"] if r["scenario"] == scenario]
    if not rows:
        return f"(`{scenario}` did not run: its recorded conversations were absent.)"
    lines = ["| measure | result | target |", "|---|---|---|"]
    lines += [f"| {r['comparison']} | {_figure(r)} | {_target(r['target'])} |" for r in rows]
    lines += ["", *dict.fromkeys(f"- {note}" for r in rows for note in r["notes"])]
    return "\n".join(lines)


def run_line(documents: Sequence[Document | None]) -> str:
    """When, where and with what each column was measured."""
    parts = []
    for (name, _), document in zip(INPUTS, documents, strict=True):
        if document is None:
            parts.append(f"{name}: not run")
            continue
        machine, versions = document["machine"], document["versions"]
        parts.append(
            f"{name}: {document['created'][:10]}, {machine['cpus']} cores, "
            f"Python {machine['python']}, langchain-core {versions['langchain-core']}, "
            f"langchain {versions.get('langchain', '?')}, tiktoken {versions['tiktoken']}, "
            f"{document['options']['repeats']} repeats"
        )
    return "Runs: " + "; ".join(parts) + "."


def render(documents: Sequence[Document | None], quality: Document | None) -> dict[str, str]:
    """The text of each marked README block: the timing tables from each input's
    run (``documents``), the quality ones from ``quality``."""
    return {
        "performance": "\n\n".join(
            [run_line(documents), performance_table(documents), "Notes:\n\n" + notes(documents)]
        ),
        **{name: quality_block(quality, name) for name in QUALITY},
    }


def replace_between(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``<!-- bench:NAME -->`` and
    ``<!-- /bench:NAME -->`` replaced by ``body``."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    if text.count(start) != 1 or text.count(end) != 1:
        msg = f"the page needs exactly one {start} ... {end} block"
        raise ValueError(msg)
    before, rest = text.split(start)
    _, after = rest.split(end)
    return f"{before}{start}\n{body}\n{end}{after}"


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT) if page.is_relative_to(ROOT) else page)


def pages() -> list[Path]:
    """Where the marked blocks may be: the README and every documentation page."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_of(name: str, among: Sequence[Path]) -> Path | None:
    """The one page that holds block ``name``'s opening marker (None: no page does)."""
    found = [p for p in among if f"<!-- bench:{name} -->" in p.read_text(encoding="utf-8")]
    if len(found) > 1:
        shown = ", ".join(map(_shown, found))
        msg = f"<!-- bench:{name} --> must be in at most one page, found in: {shown}"
        raise ValueError(msg)
    return found[0] if found else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readme", description=__doc__)
    parser.add_argument("--dry-run", action="store_true", help="print the blocks; write no page")
    dry_run = parser.parse_args(argv).dry_run
    documents = [newest_run(RESULTS, matches, "timing") for _, matches in INPUTS]
    quality = next(
        (q for _, m in INPUTS if (q := newest_run(RESULTS, m, "quality")) is not None), None
    )
    if not any(documents):
        print("no full benchmark run in benchmarks/results: run `make bench`")
        return 1
    written: dict[Path, str] = {}
    blocks = render(documents, quality)
    among = pages()
    for name, body in blocks.items():
        page = page_of(name, among)
        if page is None:
            print(f"note: no page holds <!-- bench:{name} -->: its table is not written")
            continue
        text = written.get(page, page.read_text(encoding="utf-8"))
        written[page] = replace_between(text, name, body)
        if dry_run:
            print(f"--- <!-- bench:{name} --> in {_shown(page)}:\n{body}\n")
    for page, text in written.items():
        if not dry_run:
            page.write_text(text, encoding="utf-8")
    for page in among:
        for name in re.findall(r"<!-- bench:([\w-]+) -->", page.read_text(encoding="utf-8")):
            if name not in blocks:
                print(f"warning: {_shown(page)} holds <!-- bench:{name} -->, which no run writes")
    names = [name for name, _ in INPUTS]
    ran = [f"{n} ({'run' if d else 'not run'})" for n, d in zip(names, documents, strict=True)]
    shown = ", ".join(map(_shown, written)) or "no page"
    done = "would be rewritten (--dry-run)" if dry_run else "rewritten"
    print(f"{shown}: benchmark tables {done} from", ", ".join(ran))
    return 0


if __name__ == "__main__":
    sys.exit(main())
