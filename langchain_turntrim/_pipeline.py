"""The one decision every entry point makes: a history and its options in, a
``TrimReport`` out.

``TurnTrimmer`` (``invoke``, ``trim``, ``trim_with_report``, ``plan``,
``report``), ``trim_turns``, both middlewares, ``trim_update`` and the
``turntrim`` command are adapters of ``decide``:

1. the planner (chosen by what the counter can do) plans the spec's trim;
2. the overflow rule: when not even the newest turn fits beside the pinned
   messages, ``on_overflow`` keeps only them (``"drop"``), raises
   (``"raise"``: ``_errors.overflow_error`` is the one error builder) or has
   the planner compact the newest turn (``"compact"``);
3. the report: kept, dropped and removed messages, and the figures;
4. what is sent: a kept assistant message whose tool calls have no result
   is sent without them (``_calls``), and ``tokens_after`` counted again.

Imports nothing from LangChain: the planners bring what they need (the
command plans a plain transcript without it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langchain_turntrim._core import TrimPlan
from langchain_turntrim._options import TrimOptions
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from langchain_turntrim._compaction.ladder import Compaction

__all__ = ["Planner", "decide"]

_T_contra = TypeVar("_T_contra", contravariant=True)
_T = TypeVar("_T")


class Planner(Protocol[_T_contra]):
    """What the pipeline asks of a planner."""

    @property
    def blocking(self) -> bool:
        """True when planning may block (a provider's count endpoint)."""
        ...

    def plan(
        self,
        messages: Sequence[_T_contra],
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        tools: Sequence[Any] = (),
        trim_to: int | None = None,
        pinned_alone: bool = True,
    ) -> TrimPlan:
        """The spec's plan of ``messages`` (of turn kinds ``kinds``, when
        known), sent with ``tools``, with ``trim_to``'s stable cut.
        ``pinned_alone=False``: when no turn fits, the pinned messages will
        not be kept alone (the overflow rule raises or compacts), so their
        tokens need not be measured exactly."""
        ...

    def compact(
        self,
        messages: Sequence[_T_contra],
        plan: TrimPlan,
        *,
        keep_tool_results: int,
        tools: Sequence[Any] = (),
    ) -> Compaction:
        """The newest turn compacted into the budget (``plan`` overflowed);
        raises ``TurnTrimOverflowError`` when not even its skeleton fits."""
        ...

    def tool_tokens(self, tools: Sequence[Any]) -> int | None:
        """The tools' price in the plan's ``overhead_tokens`` (None: inside each count)."""
        ...

    def answered(self, report: TrimReport[Any], tools: Sequence[Any] = ()) -> TrimReport[Any]:
        """``report`` with the unanswered calls of the kept messages left out
        of what is sent, and ``tokens_after`` counted again."""
        ...


def decide(
    messages: Sequence[_T],
    options: TrimOptions,
    planner: Planner[_T],
    *,
    tools: Sequence[Any] = (),
    kinds: Sequence[int] | None = None,
    sent: bool = True,
) -> TrimReport[_T]:
    """Plan ``messages`` with ``options``, apply the overflow rule, compact if
    it says so; ``sent``: the kept messages are a request, so calls without
    their results are left out of it (a provider refuses them)."""
    plan = planner.plan(
        messages,
        kinds,
        options.max_tokens,
        tools=tools,
        trim_to=options.trim_to,
        pinned_alone=options.on_overflow == "drop",
    )
    compaction = None
    if plan.overflowed:
        if options.on_overflow == "raise":
            # Imported when raised: it is a LangChain exception.
            from langchain_turntrim._errors import overflow_error  # noqa: PLC0415

            raise overflow_error(plan)
        if options.on_overflow == "compact":
            compaction = planner.compact(
                messages, plan, keep_tool_results=options.keep_tool_results, tools=tools
            )
    report = TrimReport(messages, plan, compaction, planner.tool_tokens(tools) if tools else 0)
    if sent and plan.unanswered:
        return planner.answered(report, tools)
    return report
