"""Result rows, the stdout report and the JSON file ``benchmarks.readme`` reads."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "MARK",
    "Row",
    "Target",
    "markdown_table",
    "seconds_summary",
    "show_figure",
    "write_json",
]

#: How a row's result is shown: met, missed.
MARK = {True: "✓", False: "✗"}


def show_ratio(ratio: float) -> str:
    """``2.31x``, ``46.8x``, ``1,234x``: three significant digits or so."""
    digits = 2 if ratio < 10 else 1 if ratio < 100 else 0
    return f"{ratio:,.{digits}f}x"


def show_figure(ratio: float, target: str) -> str:
    """``ratio`` shown as its target (``str(Target)``, or "") is: a percentage,
    a ratio, or a whole number of the target's unit (``<= 400 B``)."""
    if target.endswith("%"):
        return f"{ratio:.1%}"
    _, _, unit = target.partition(" ")[2].partition(" ")
    return f"{ratio:,.0f} {unit}" if unit else show_ratio(ratio)


@dataclass(frozen=True)
class Target:
    """``figure <= value`` or ``figure >= value``; ``percent`` shows both as
    percentages, ``unit`` (e.g. ``"B"``) as a whole number of that unit."""

    op: Literal["<=", ">="]
    value: float
    percent: bool = False
    unit: str | None = None

    def met(self, figure: float) -> bool:
        return figure <= self.value if self.op == "<=" else figure >= self.value

    def __str__(self) -> str:
        if self.unit is not None:
            return f"{self.op} {self.value:,.0f} {self.unit}"
        value = f"{self.value:.0%}" if self.percent else f"{self.value:g}x"
        return f"{self.op} {value}"


@dataclass
class Row:
    """One figure (a ratio of two measurements taken side by side, or a
    quality measure) and its target."""

    scenario: str
    comparison: str
    target: Target | None
    ratio: float | None = None
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> bool | None:
        """Whether the target is met (None: skipped, or no target)."""
        if self.ratio is None or self.target is None:
            return None
        return self.target.met(self.ratio)

    @property
    def status(self) -> str:
        if self.ratio is None:
            return "skipped"
        return "—" if self.met is None else MARK[self.met]

    @property
    def shown(self) -> str:
        return "—" if self.ratio is None else show_figure(self.ratio, str(self.target or ""))

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(target=str(self.target or ""), met=self.met, status=self.status)
        return data


def seconds_summary(times: dict[str, list[float]]) -> dict[str, Any]:
    """Median seconds per arm, plus every raw time, for the JSON file."""
    return {
        "median_seconds": {name: statistics.median(ts) for name, ts in times.items()},
        "seconds": times,
    }


def markdown_table(rows: list[Row]) -> str:
    header = ["scenario", "comparison", "figure", "target", "result"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row.scenario, row.comparison, row.shown, str(row.target or "—"), row.status]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def write_json(rows: list[Row], options: dict[str, Any], folder: Path) -> Path:
    """Write the run to ``folder/bench-<time>.json`` and return the path."""
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    path = folder / f"bench-{now:%Y%m%d-%H%M%S}.json"
    packages = ("langchain-turntrim", "langchain-core", "langchain", "tiktoken")
    document = {
        "created": now.isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
        "versions": {name: _version(name) for name in packages},
        "options": options,
        "rows": [row.as_json() for row in rows],
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
