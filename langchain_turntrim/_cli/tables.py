"""The tables of ``turntrim report`` and ``turntrim demo``.

The summary is plain Python; only the rendering imports ``rich`` (the optional
``cli`` extra), and only when called. ``rich`` colours the output on a terminal
and writes plain text when piped. Everything shown from a transcript goes
through ``neutral``: no control character reaches the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TextIO

from langchain_turntrim._cli.terminal import neutral
from langchain_turntrim._core import ANCHOR, PINNED, START
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

__all__ = [
    "ORPHANS",
    "FoldedRows",
    "Summary",
    "TurnRow",
    "fold",
    "render",
    "render_messages",
    "summarize",
]

#: The label of the messages before the first user message (always dropped).
ORPHANS: Final = "(before first user message)"
LABEL_WIDTH: Final = 30
BAR_WIDTH: Final = 10
#: Longer tables show the oldest ``HEAD_ROWS`` rows, one row for the middle, and the newest.
MAX_ROWS: Final = 40
HEAD_ROWS: Final = 5
_EIGHTHS: Final = " ▏▎▍▌▋▊▉"
#: The colour of each turn status.
_COLOURS: Final = {"kept": "green", "dropped": "red", "compacted": "yellow"}
_ROLE_STYLES: Final = {
    "system": "magenta",
    "developer": "magenta",
    "user": "bold cyan",
    "assistant": "green",
    "tool": "yellow",
    "function": "yellow",
}


@dataclass(frozen=True)
class TurnRow:
    """One turn, or the orphans before the first user message (``number`` None).

    ``tokens`` are the turn's in the transcript; ``status`` says what the
    trim did with it: ``"kept"``, ``"dropped"`` or ``"compacted"``."""

    number: int | None
    label: str
    messages: int
    tool_calls: int
    tokens: int
    status: str

    @property
    def kept(self) -> bool:
        return self.status != "dropped"


@dataclass(frozen=True)
class FoldedRows:
    """Consecutive turns shown as one row (long histories)."""

    turns: int
    messages: int
    tool_calls: int
    tokens: int
    kept: int


@dataclass(frozen=True)
class Summary:
    """The rows of the report and the decision behind them."""

    rows: tuple[TurnRow, ...]
    report: TrimReport[Any]
    #: The request's tool schemas: how many, and their tokens (part of the plan's overhead).
    tools: int = 0
    tool_tokens: int = 0


def summarize(
    items: Sequence[Any],
    kinds: Sequence[int],
    costs: Sequence[int],
    report: TrimReport[Any],
    *,
    tools: int = 0,
    tool_tokens: int = 0,
) -> Summary:
    """One row per turn, in order; pinned (system) messages belong to no row.

    ``items`` are the input's message dicts, ``kinds`` and ``costs`` each
    message's turn kind and tokens, ``report`` the decision on them.
    """
    plan = report.plan
    compacted_from = plan.newest_turn_start if report.compaction is not None else plan.size
    rows: list[TurnRow] = []
    number: int | None = None
    label, count, calls, tokens, status = ORPHANS, 0, 0, 0, "dropped"
    for index, (item, kind, cost) in enumerate(zip(items, kinds, costs, strict=True)):
        if kind == PINNED:
            continue
        if kind in (START, ANCHOR):  # a summary (ANCHOR) heads a row; its tokens are pinned
            if count:
                rows.append(TurnRow(number, label, count, calls, tokens, status))
            number = 1 if number is None else number + 1
            label, count, calls, tokens = first_words(item), 0, 0, 0
            status = "kept" if index >= plan.keep_from else "dropped"
            if index >= compacted_from:
                status = "compacted"
        count += 1
        calls += tool_call_count(item)
        tokens += 0 if kind == ANCHOR else cost
    if count:
        rows.append(TurnRow(number, label, count, calls, tokens, status))
    return Summary(tuple(rows), report, tools, tool_tokens)


def message_text(item: object) -> str:
    """The text of a message dict's ``content``, whitespace collapsed."""
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, list):
        parts = (p.get("text") if isinstance(p, dict) else p for p in content)
        content = " ".join(p for p in parts if isinstance(p, str))
    return " ".join(content.split()) if isinstance(content, str) else ""


def first_words(item: object, width: int = LABEL_WIDTH) -> str:
    """The start of a message's text (else its id), at most ``width`` characters."""
    text = message_text(item)
    if not text and isinstance(item, dict) and item.get("id") is not None:
        text = str(item["id"])
    return _shorten(text, width) if text else "(no text)"


def tool_call_count(item: object) -> int:
    if not isinstance(item, dict):
        return 0
    calls = item.get("tool_calls")
    return (len(calls) if isinstance(calls, list) else 0) + bool(item.get("function_call"))


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


# -- rendering (rich) -----------------------------------------------------------------------


def _console(file: TextIO) -> Console:
    from rich.console import Console  # noqa: PLC0415

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """rich exits (``SystemExit(1)``); the command has its own way with a closed pipe."""
            self.quiet = True
            raise BrokenPipeError

    return _Console(file=file, highlight=False)


def render(summary: Summary, title: str, file: TextIO) -> None:
    """The per-turn table and the totals."""
    from rich.text import Text  # noqa: PLC0415

    console = _console(file)
    console.print(Text(neutral(title), style="bold"), soft_wrap=True)  # a long path stays whole
    console.print(_turn_table(summary, unicode=console.encoding.startswith("utf")))
    console.print(_totals(summary))


def _turn_table(summary: Summary, *, unicode: bool) -> Table:
    from rich import box  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    # The only column that gives way on a narrow console (its cells end in "…").
    table.add_column("turn (first words)", max_width=LABEL_WIDTH)
    for header in ("msgs", "tools", "tokens"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("share", no_wrap=True, width=BAR_WIDTH)
    table.add_column("status", no_wrap=True)
    largest = max((row.tokens for row in summary.rows), default=0)
    for row in fold(summary.rows):
        if isinstance(row, FoldedRows):
            table.add_row(*_folded_cells(row), style="dim")
            continue
        colour = _COLOURS[row.status]
        table.add_row(
            "" if row.number is None else str(row.number),
            _label(row.label),
            str(row.messages),
            str(row.tool_calls) if row.tool_calls else "",
            f"{row.tokens:,}",
            Text(_bar(row.tokens, largest, unicode=unicode), style=colour),
            Text(row.status, style=f"bold {colour}"),
            style=None if row.kept else "dim",
        )
    return table


def fold(rows: Sequence[TurnRow]) -> list[TurnRow | FoldedRows]:
    """At most ``MAX_ROWS`` rows: the oldest and newest turns, the middle folded into one."""
    if len(rows) <= MAX_ROWS:
        return list(rows)
    newest = MAX_ROWS - HEAD_ROWS - 1
    middle = rows[HEAD_ROWS:-newest]
    folded = FoldedRows(
        turns=len(middle),
        messages=sum(row.messages for row in middle),
        tool_calls=sum(row.tool_calls for row in middle),
        tokens=sum(row.tokens for row in middle),
        kept=sum(row.kept for row in middle),
    )
    return [*rows[:HEAD_ROWS], folded, *rows[-newest:]]


def _folded_cells(rows: FoldedRows) -> tuple[Text | str, ...]:
    from rich.text import Text  # noqa: PLC0415

    if rows.kept in (0, rows.turns):
        status = Text(
            "kept" if rows.kept else "dropped", style="bold " + ("green" if rows.kept else "red")
        )
    else:
        status = Text(f"{rows.kept:,} kept", style="bold yellow")
    return (
        "…",
        _label(f"{rows.turns:,} more turns"),
        f"{rows.messages:,}",
        f"{rows.tool_calls:,}" if rows.tool_calls else "",
        f"{rows.tokens:,}",
        "",
        status,
    )


def _label(text: str) -> Text:
    from rich.text import Text  # noqa: PLC0415

    return Text(neutral(text), no_wrap=True, overflow="ellipsis")


def _bar(tokens: int, largest: int, *, unicode: bool) -> str:
    """A bar of up to ``BAR_WIDTH`` cells, proportional to ``tokens / largest``."""
    if not largest:
        return ""
    eighths = round(tokens * BAR_WIDTH * 8 / largest)
    if not unicode:
        return "#" * max(eighths // 8, 1 if tokens else 0)
    bar = "█" * (eighths // 8) + _EIGHTHS[eighths % 8].strip()
    return bar or ("▏" if tokens else "")


def _totals(summary: Summary) -> Table:
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    report = summary.report
    plan = report.plan
    pinned = len(plan.pinned)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(justify="right")
    grid.add_column()
    grid.add_row(
        "system", f"{plan.system_tokens:,}", f"tokens ({pinned} {_plural('message', pinned)})"
    )
    if summary.tools:
        described = f"tokens ({summary.tools:,} tool {_plural('schema', summary.tools)})"
        grid.add_row("tools", f"{summary.tool_tokens:,}", described)
    overhead = plan.overhead_tokens - summary.tool_tokens
    if overhead:
        grid.add_row("overhead", f"{overhead:,}", "tokens (once per request)")
    grid.add_row("before", f"{plan.tokens_before:,}", f"tokens ({_count(plan.turns, plan.size)})")
    compacted = "; the newest compacted" if report.compaction is not None else ""
    grid.add_row(
        "after",
        Text(f"{report.tokens_after:,}", style="bold green" if report.budget_met else "bold red"),
        f"tokens ({_count(report.kept_turns, len(report.kept_indices))}; "
        f"{report.dropped_turns:,} {_plural('turn', report.dropped_turns)} dropped{compacted})",
    )
    used = _usage(report.tokens_after, plan.max_tokens)
    grid.add_row("budget", f"{plan.max_tokens:,}", f"tokens, {used}")
    if not report.budget_met:
        grid.add_row("", "", Text("the system messages alone exceed the budget", style="red"))
    return grid


def _count(turns: int, messages: int) -> str:
    return f"{turns:,} {_plural('turn', turns)}, {messages:,} {_plural('message', messages)}"


def _plural(word: str, count: int) -> str:
    return word if count == 1 else word + "s"


def _usage(used: int, budget: int) -> str:
    if not budget:
        return "0% used" if not used else "exceeded"
    return f"{100 * used / budget:.0f}% used"


def render_messages(kept: Sequence[Any], total: int, file: TextIO) -> None:
    """The kept messages, one line each."""
    from rich.text import Text  # noqa: PLC0415

    console = _console(file)
    console.print()
    console.print(Text(f"Kept {len(kept)} of {total} messages:", style="bold"))
    for item in kept:
        role = str(item.get("role", "?")) if isinstance(item, dict) else "?"
        line = Text("  ")
        line.append(f"{neutral(role):<10}", style=_ROLE_STYLES.get(role, ""))
        line.append(" " + neutral(one_line(item)))
        console.print(line, no_wrap=True, overflow="ellipsis")


def one_line(item: object) -> str:
    """A message in one line: its text, its tool calls, or the call a tool result answers."""
    text = message_text(item)
    if not isinstance(item, dict):
        return text
    if item.get("role") == "tool" and item.get("tool_call_id") is not None:
        return f"← {item['tool_call_id']}: {text}"
    calls = item.get("tool_calls")
    if isinstance(calls, list) and calls:
        described = "  ".join(_call(call) for call in calls)
        return f"{text}  {described}" if text else described
    return text


def _call(call: object) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return "→ (tool call)"
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else str(arguments)
    return f"→ {function.get('name')}({' '.join(arguments.split())})"
