"""The one decision every entry point makes: a history and its options in, a
``TrimReport`` out.

``TurnTrimmer`` (``invoke``, ``trim``, ``trim_with_report``, ``plan``,
``report``), ``trim_turns``, both middlewares, ``trim_update`` and the
``turntrim`` command are adapters of ``decide``:

1. the planner (chosen by what the counter can do) plans the spec's trim;
   under ``trim_to="auto"``, the greedy plan prices the cut (``_core.depth``:
   its growth per call, the cache's rules) and the planner plans that cut;
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
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from langchain_turntrim._core import TrimPlan
from langchain_turntrim._core.depth import CachePrice, Cut, auto_cut
from langchain_turntrim._options import AUTO, TrimOptions
from langchain_turntrim._report import Depth, TrimReport

if TYPE_CHECKING:
    from langchain_turntrim._compaction.ladder import Compaction

__all__ = ["CacheCall", "Planner", "decide"]

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
        trim_to: int | Cut | None = None,
        pinned_alone: bool = True,
        again: bool = False,
    ) -> TrimPlan:
        """The spec's plan of ``messages`` (of turn kinds ``kinds``, when
        known), sent with ``tools``, with ``trim_to``'s stable cut.
        ``pinned_alone=False``: when no turn fits, the pinned messages will
        not be kept alone (the overflow rule raises or compacts), so their
        tokens need not be measured exactly. ``again``: the very messages,
        kinds and tools this thread's previous plan was given, within the same
        decision, planned with another ``trim_to``: a planner that remembers
        histories need not check again what that plan just checked."""
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


class CacheCall(NamedTuple):
    """What a model call knows of its prompt cache (``trim_to="auto"``): the
    rules it is priced by; ``cold``: the cache has expired, so a cut now
    costs nothing extra; ``floor``: the index of the message the previous
    call's cut kept first (0: none), which a warm call does not cut before."""

    price: CachePrice
    cold: bool = False
    floor: int = 0


def decide(
    messages: Sequence[_T],
    options: TrimOptions,
    planner: Planner[_T],
    *,
    tools: Sequence[Any] = (),
    kinds: Sequence[int] | None = None,
    sent: bool = True,
    cache: CacheCall | None = None,
) -> TrimReport[_T]:
    """Plan ``messages`` with ``options``, apply the overflow rule, compact if
    it says so; ``sent``: the kept messages are a request, so calls without
    their results are left out of it (a provider refuses them). ``cache``:
    what the call knows of its cache (default: ``options``' rules, warm)."""
    depth = None
    if options.trim_to == AUTO:
        plan, depth = _auto(messages, options, planner, tools, kinds, cache)
    else:
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
    report = TrimReport(
        messages, plan, compaction, planner.tool_tokens(tools) if tools else 0, depth
    )
    if sent and plan.unanswered:
        return planner.answered(report, tools)
    return report


def _auto(
    messages: Sequence[_T],
    options: TrimOptions,
    planner: Planner[_T],
    tools: Sequence[Any],
    kinds: Sequence[int] | None,
    cache: CacheCall | None,
) -> tuple[TrimPlan, Depth]:
    """``trim_to="auto"``: the greedy plan, then the cut its figures price."""
    if cache is None:
        cache = CacheCall(options.price_for())
    pinned_alone = options.on_overflow == "drop"
    greedy = planner.plan(
        messages, kinds, options.max_tokens, tools=tools, pinned_alone=pinned_alone
    )
    cut = None
    if not greedy.overflowed:
        cut = auto_cut(
            options.max_tokens,
            greedy.system_tokens + greedy.overhead_tokens,
            greedy.growth,
            cache.price,
            options.context_value,
            cold=cache.cold,
            floor=cache.floor,
        )
    level = None if cut is None else cut.level
    if cut is None and cache.floor and not greedy.overflowed:
        # No priced level (nothing would be cached): the previous cut still holds.
        cut = Cut(options.max_tokens, floor=cache.floor)
    plan = greedy
    if cut is not None and (greedy.dropped_turns or cache.cold or cache.floor):
        plan = planner.plan(
            messages,
            kinds,
            options.max_tokens,
            tools=tools,
            trim_to=cut,
            pinned_alone=pinned_alone,
            again=True,
        )
    return plan, Depth(level, cache.price, cache.cold, greedy)
