"""Long agent turns: what each trimmer sends the model when one turn outgrows the budget.

Not a timing: for every model call of the recorded long-turn runs (the history
up to each assistant message), and budgets of the system prompt plus 10% to
90% of the turn so far, each
trimmer builds the request, and the request counts as **usable** when it is a
valid conversation, within budget (approximate counts), and still holds the
user's message and the newest step (the last assistant message and its
results). Compared side by side on the same requests:

* ``TurnTrimmer(on_overflow="compact")``, with the approximate counter and
  with the same counts given as a whole-list counter
  (``per_list(count_tokens_approximately)``: the ladder then searches for its
  room in counts of whole requests);
* ``trim_messages(strategy="last", start_on="human", include_system=True)``;
* ``ContextEditingMiddleware``'s ``ClearToolUsesEdit(trigger=budget)`` (its
  defaults otherwise: the 3 newest results kept), applied to a copy.

Also: the share of the budget our compacted requests use (median, minimum),
and, for the whole-list counter, its compacted requests' tokens against the
approximate counter's and how many whole-list counts each trim makes.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from typing import Any, Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from benchmarks.encoding import DATA
from benchmarks.report import Row, Target
from benchmarks.speed import TRIM_MESSAGES_OPTIONS
from benchmarks.timing import Settings
from langchain_turntrim import TurnTrimmer, TurnTrimOverflowError, per_list

__all__ = ["FILES", "long_turns"]

#: The recorded long-turn runs (one user message, then many tool steps).
FILES: Final = ("tau2-telecom-solo-gpt-4.1.json", "swe-agent-demos.json")
FRACTIONS: Final = (0.1, 0.3, 0.5, 0.7, 0.9)

Arm = Callable[[list[BaseMessage], int], list[BaseMessage]]


def _ours(messages: list[BaseMessage], budget: int) -> list[BaseMessage]:
    try:
        return TurnTrimmer(max_tokens=budget, on_overflow="compact").trim(messages)
    except TurnTrimOverflowError:  # not even the skeleton fits: no request is sent
        return []


class _Counted:
    """``count_tokens_approximately`` as a whole-list count, its calls counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[BaseMessage]) -> int:
        self.calls += 1
        return count_tokens_approximately(messages)


#: The whole-list arm's counts: one fresh counter per trim (no counts remembered).
COUNTED = _Counted()


def _ours_whole_list(messages: list[BaseMessage], budget: int) -> list[BaseMessage]:
    trimmer = TurnTrimmer(budget, token_counter=per_list(COUNTED), on_overflow="compact")
    try:
        return trimmer.trim(messages)
    except TurnTrimOverflowError:
        return []


def _trim_messages(messages: list[BaseMessage], budget: int) -> list[BaseMessage]:
    return trim_messages(
        messages,
        max_tokens=budget,
        token_counter=count_tokens_approximately,
        **TRIM_MESSAGES_OPTIONS,
    )


def _clear_tool_uses(messages: list[BaseMessage], budget: int) -> list[BaseMessage]:
    from langchain.agents.middleware.context_editing import ClearToolUsesEdit  # noqa: PLC0415

    copied: list[Any] = [m.model_copy(deep=True) for m in messages]  # apply() takes AnyMessage
    ClearToolUsesEdit(trigger=budget).apply(copied, count_tokens=count_tokens_approximately)
    return copied


ARMS: Final[dict[str, Arm]] = {
    "compact": _ours,
    "compact, whole-list": _ours_whole_list,
    "trim_messages": _trim_messages,
    "ClearToolUses": _clear_tool_uses,
}


def _runs() -> list[list[BaseMessage]]:
    """Each recorded run, from its first user message on, with ids."""
    runs = []
    for name in FILES:
        for conversation in json.loads((DATA / name).read_text(encoding="utf-8")):
            items = conversation["traj"] if isinstance(conversation, dict) else conversation
            messages = convert_to_messages(
                [{**m, "content": m.get("content") or ""} for m in items]
            )
            for i, message in enumerate(messages):
                message.id = f"m{i}"
            system = [m for m in messages if isinstance(m, SystemMessage)][:1]
            first = next(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
            runs.append(system + [m for m in messages[first:] if not isinstance(m, SystemMessage)])
    return runs


def _calls(run: list[BaseMessage]) -> list[list[BaseMessage]]:
    """The history before each assistant message after the user's: one model call each."""
    return [run[:i] for i, m in enumerate(run) if isinstance(m, AIMessage) and i > 2]


def usable(sent: Sequence[BaseMessage], history: Sequence[BaseMessage], budget: int) -> bool:
    """Valid, within budget, with the user's message and the newest step."""
    if not sent or count_tokens_approximately(sent) > budget or not _valid(sent):
        return False
    ids = {m.id for m in sent}
    user = next(m for m in history if isinstance(m, HumanMessage))
    newest = max(i for i, m in enumerate(history) if isinstance(m, AIMessage))
    return user.id in ids and all(m.id in ids for m in history[newest:])


def _valid(messages: Sequence[BaseMessage]) -> bool:
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    if not rest or not isinstance(rest[0], HumanMessage):
        return False
    pending: set[str] = set()
    for message in rest:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                return False
            pending.discard(message.tool_call_id)
        elif pending:
            return False
        if isinstance(message, AIMessage):
            pending = {c["id"] for c in message.tool_calls if c["id"]}
    return not pending


def _budget(history: list[BaseMessage], fraction: float) -> int:
    """The system prompt, plus ``fraction`` of the turn."""
    system = count_tokens_approximately(history[:1])
    return system + int(fraction * count_tokens_approximately(history[1:]))


def long_turns(settings: Settings) -> list[Row]:
    """One row per budget fraction: the share of usable requests, ours and the baselines'."""
    if not all((DATA / name).exists() for name in FILES):
        reason = f"the long-turn data ({', '.join(FILES)}) is not beside the repository"
        return [Row("long-turns", "skipped: no data", None, skipped=reason)]
    calls = [call for run in _runs() for call in _calls(run)]
    if settings.quick:
        calls = calls[::7]
    rows: list[Row] = []
    used: list[float] = []
    ratios: list[float] = []  # whole-list compacted tokens / the approximate counter's
    counts: list[int] = []  # whole-list counts per trim
    for fraction in FRACTIONS:
        shares: dict[str, float] = {}
        sent_usable = raised = 0
        for history in calls:
            budget = _budget(history, fraction)
            ours = _ours(history, budget)
            COUNTED.calls = 0
            whole = _ours_whole_list(history, budget)
            counts.append(COUNTED.calls)
            if ours and whole and len(ours) < len(history):
                ratios.append(count_tokens_approximately(whole) / count_tokens_approximately(ours))
        for name, arm in ARMS.items():
            good = 0
            for history in calls:
                budget = _budget(history, fraction)
                sent = arm(history, budget)
                ok = usable(sent, history, budget)
                good += ok
                if name == "compact":
                    raised += not sent
                    sent_usable += ok
                    if sent:
                        used.append(count_tokens_approximately(sent) / budget)
            shares[name] = good / len(calls)
        sent_count = len(calls) - raised
        rows.append(
            Row(
                "long-turns",
                f"system + {fraction:.0%} of the turn: compact requests sent that are usable",
                Target(">=", 1.0, percent=True),
                sent_usable / sent_count if sent_count else 1.0,
                notes=[
                    (
                        f"budget system + {fraction:.0%} of the turn, {len(calls)} model calls: "
                        f"usable requests: compact {shares['compact']:.1%} "
                        f"(raised for the other {raised / len(calls):.1%}: "
                        "not even the skeleton fits), "
                        f"compact with a whole-list counter {shares['compact, whole-list']:.1%}, "
                        f"trim_messages {shares['trim_messages']:.1%}, "
                        f"ClearToolUses {shares['ClearToolUses']:.1%}"
                    )
                ],
                details={"shares": shares, "calls": len(calls), "raised": raised},
            )
        )
    rows.append(
        Row(
            "long-turns",
            "share of the budget the compacted requests use (median)",
            Target(">=", 0.8, percent=True),
            statistics.median(used),
            notes=[f"budget used: median {statistics.median(used):.1%}, minimum {min(used):.1%}"],
            details={"minimum": min(used)},
        )
    )
    rows.append(
        Row(
            "long-turns",
            "whole-list counter: its compacted tokens / the approximate counter's (median)",
            Target(">=", 0.95, percent=True),
            statistics.median(ratios),
            notes=[
                (
                    f"whole-list compaction, {len(ratios)} compacted requests: tokens against "
                    f"the approximate counter's compaction, median "
                    f"{statistics.median(ratios):.1%}, minimum {min(ratios):.1%}; whole-list "
                    f"counts per trim (plan and compaction, nothing remembered): median "
                    f"{statistics.median(counts):.0f}, at most {max(counts)}"
                )
            ],
            details={"minimum": min(ratios), "counts": max(counts)},
        )
    )
    return rows
