"""The tables of ``turntrim report`` and ``demo``, drawn with ``rich`` (the ``cli``
extra, imported by these commands alone): coloured on a terminal, plain when
piped, every text from the transcript ``neutral``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from langchain_turntrim._anatomy import check
from langchain_turntrim._cli.transcript import Conversation, neutral
from langchain_turntrim._core import PINNED, ROLE_KINDS, group
from langchain_turntrim._report import TrimReport

__all__ = ["render", "render_messages"]

LABEL_WIDTH: Final = 30
BAR_WIDTH: Final = 10
_EIGHTHS: Final = " ▏▎▍▌▋▊▉"
_COLOURS: Final = {"kept": "green", "dropped": "red", "compacted": "yellow"}
_ROLES: Final = {"system": "magenta", "user": "bold cyan", "assistant": "green", "tool": "yellow"}


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich would exit: the command has its own way with a closed pipe."""
        self.quiet = True
        raise BrokenPipeError


def _text(item: dict[str, Any]) -> str:
    """The text of a message dict's ``content``, whitespace collapsed."""
    content = item.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return " ".join(content.split()) if isinstance(content, str) else ""


def _label(item: dict[str, Any]) -> str:
    """The first words of a message (else its id)."""
    text = _text(item) or str(item.get("id") or "")
    short = text if len(text) <= LABEL_WIDTH else text[: LABEL_WIDTH - 1].rstrip() + "…"
    return short or "(no text)"


def render(
    title: str,
    conversation: Conversation,
    messages: list[Any],
    counter: Any,
    report: TrimReport[Any],
    file: TextIO,
) -> None:
    """The per-turn table and the totals: each message's kind by the library's
    turn rule (``check``), its tokens by the counter (``None``: the records')."""
    if counter is None:
        kinds, costs = [ROLE_KINDS[m["role"]] for m in messages], [m["tokens"] for m in messages]
    else:
        kinds, costs = [check(i, m) for i, m in enumerate(messages)], counter.count_each(messages)
    console = _Console(file=file, highlight=False)
    console.print(Text(neutral(title), style="bold"), soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("turn (first words)", max_width=LABEL_WIDTH)
    for header in ("msgs", "tools", "tokens"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("share", no_wrap=True, width=BAR_WIDTH)
    table.add_column("status", no_wrap=True)
    items, turns, plan = conversation.items, group(kinds), report.plan
    first = turns.starts[0] if turns.starts else len(kinds)
    orphans: Sequence[int] = [i for i in range(first) if kinds[i] != PINNED]  # before any turn
    rows = [(0, "(before first user message)", orphans, "dropped")] if orphans else []
    for turn, start in enumerate(turns.starts):  # the library's turn rule
        newest = report.compaction is not None and turn == len(turns.starts) - 1
        status = "compacted" if newest else "kept" if start >= plan.keep_from else "dropped"
        rows.append((turn + 1, _label(items[start]), turns.members(turn), status))
    largest = max((sum(costs[i] for i in row[2]) for row in rows), default=0) or 1
    for number, label, members, status in rows:
        tokens = sum(costs[i] for i in members)
        calls = sum(len(items[i].get("tool_calls") or ()) for i in members)
        eighths = round(tokens * BAR_WIDTH * 8 / largest)
        bar = "█" * (eighths // 8) + _EIGHTHS[eighths % 8].strip() or "▏" * (tokens > 0)
        colour = _COLOURS[status]
        table.add_row(
            str(number or ""),
            Text(neutral(label), no_wrap=True, overflow="ellipsis"),
            f"{len(members):,}",
            f"{calls:,}" if calls else "",
            f"{tokens:,}",
            Text(bar, style=colour),
            Text(status, style=f"bold {colour}"),
            style="dim" if status == "dropped" else None,
        )
    console.print(table)
    console.print(_totals(report, sum(costs), len(conversation.tools)))
    done = report.compaction
    if done is not None:
        console.print(
            f"compact: the newest turn is kept in {report.tokens_after:,} tokens: "
            f"{done.cleared_results} results cleared ({done.cleared_tokens:,} tokens), "
            f"{done.dropped_steps} steps dropped ({done.dropped_step_tokens:,} tokens), "
            f"{done.truncated_messages} messages truncated ({done.truncated_tokens:,} tokens)"
        )


def _totals(report: TrimReport[Any], message_tokens: int, tools: int) -> Table:
    plan, tool_tokens = report.plan, report.tool_tokens or 0
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(justify="right")
    grid.add_column()
    add = grid.add_row
    add("system", f"{plan.system_tokens:,}", f"tokens ({_many(len(plan.pinned), 'message')})")
    if tools:
        add("tools", f"{tool_tokens:,}", f"tokens ({_many(tools, 'tool schema')})")
    if plan.overhead_tokens > tool_tokens:
        add("overhead", f"{plan.overhead_tokens - tool_tokens:,}", "tokens (once per request)")
    before = f"{plan.overhead_tokens + message_tokens:,}"
    add("before", before, f"tokens ({_many(plan.turns, 'turn')}, {_many(plan.size, 'message')})")
    written = len(report.kept_indices if report.compaction else plan.kept)  # what trim writes
    kept = f"{_many(report.kept_turns, 'turn')}, {_many(written, 'message')}"
    dropped = f"{_many(report.dropped_turns, 'turn')} dropped"
    dropped += "; the newest compacted" if report.compaction else ""
    style = "bold green" if report.budget_met else "bold red"
    add("after", Text(f"{report.tokens_after:,}", style=style), f"tokens ({kept}; {dropped})")
    budget, after = plan.max_tokens, report.tokens_after
    used = f"{after / budget:.0%} used" if budget else "exceeded" if after else "0% used"
    add("budget", f"{budget:,}", f"tokens, {used}")
    if not report.budget_met:
        add("", "", Text("the system messages alone exceed the budget", style="red"))
    return grid


def _many(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def render_messages(kept: Sequence[dict[str, Any]], total: int, file: TextIO) -> None:
    """The kept messages (dicts LangChain read), one line each: text, calls made
    (→) and answered (←)."""
    console = _Console(file=file, highlight=False)
    console.print(Text(f"\nKept {len(kept)} of {total} messages:", style="bold"))
    for item in kept:
        role, text = str(item.get("role", "?")), _text(item)
        said = [text] if text else []
        for call in item.get("tool_calls") or ():
            f = call.get("function") if isinstance(call, dict) else None
            if isinstance(f, dict):
                said.append(f"→ {f.get('name')}({' '.join(str(f.get('arguments') or '').split())})")
        answered = item.get("tool_call_id")
        line = Text("  ")
        line.append(f"{neutral(role):<10}", style=_ROLES.get(role, "magenta"))
        line.append(
            " " + neutral(f"← {answered}: {text}" if answered is not None else "  ".join(said))
        )
        console.print(line, no_wrap=True, overflow="ellipsis")
