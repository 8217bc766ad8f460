"""``AdditivePlanner``: plans from per-message counts, for additive counters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._calls import unanswered_calls
from langchain_turntrim._compaction.copies import Copies
from langchain_turntrim._compaction.fit import fit_additive
from langchain_turntrim._compaction.ladder import Compaction
from langchain_turntrim._core import TrimPlan, plan_costs
from langchain_turntrim._core.depth import Cut
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._planning.base import CountingPlanner
from langchain_turntrim._planning.memo import HistoryMemo

__all__ = ["AdditivePlanner"]


class AdditivePlanner(CountingPlanner):
    """Plans with an additive counter: each message's count, grouped into turns.

    With a ``cache_size`` and a counter whose counts never change
    (``counter.stable``), it remembers the last histories it planned
    (``HistoryMemo``, each of up to ``cache_size`` messages): a history that
    only grew since is counted and grouped for its new messages alone, and
    the compactions made of it are given again while nothing they were made
    from changed (``_compaction.memo``). With a ``cache_size``, the copies
    compaction made of the last ``cache_size`` messages it changed are made
    again as the same objects (``Copies``), which the counter's cache knows.
    """

    __slots__ = ("cache_size", "copies", "memo")

    counter: AdditiveCounter

    def __init__(self, counter: AdditiveCounter, cache_size: int) -> None:
        self.counter = counter
        self.cache_size = cache_size
        self.memo = HistoryMemo(cache_size) if cache_size and counter.stable else None
        self.copies = Copies(cache_size) if cache_size else None

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        tools: Sequence[Any] = (),
        trim_to: int | Cut | None = None,
        pinned_alone: bool = True,  # noqa: ARG002 - every count is exact here
    ) -> TrimPlan:
        """The plan of ``messages`` (of turn kinds ``kinds``, when known) sent
        with ``tools``, whose price is part of ``overhead_tokens``."""
        counter = self.counter
        memo = self.memo
        if memo is not None:
            overhead = counter.checked_overhead()
            if tools:
                overhead += counter.count_tools(tools)
            return memo.plan(messages, kinds, counter.costs, max_tokens, overhead, trim_to)
        kinds = message_kinds(messages) if kinds is None else kinds
        costs, overhead = counter.measure(messages, tools)
        plan = plan_costs(kinds, costs, max_tokens, overhead, trim_to)
        return unanswered_calls(plan, messages, kinds)

    def compact(
        self,
        messages: Sequence[BaseMessage],
        plan: TrimPlan,
        *,
        keep_tool_results: int,
        tools: Sequence[Any] = (),
    ) -> Compaction:
        """The newest turn compacted into the budget (see ``_compaction.fit``),
        with the copies earlier compactions made; the same compaction as
        before when nothing it was made from changed."""
        memo = None if self.memo is None else self.memo.planned(messages)
        found = None if memo is None else memo.find(messages, plan, keep_tool_results)
        if found is not None:
            return found
        compaction = fit_additive(
            messages,
            message_kinds(messages),
            plan,
            self.counter,
            keep_tool_results=keep_tool_results,
            tools=tools,
            copies=self.copies,
        )
        if memo is not None:
            memo.remember(messages, plan, keep_tool_results, compaction)
        return compaction

    def tool_tokens(self, tools: Sequence[Any]) -> int:
        """The tools' price: part of the plan's ``overhead_tokens``."""
        return self.counter.count_tools(tools) if tools else 0

    def clear(self) -> None:
        """Forget the remembered histories and copies, and the counter's cached counts."""
        if self.memo is not None:
            self.memo.clear()
        if self.copies is not None:
            self.copies.clear()
        super().clear()

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start with nothing remembered."""
        return (type(self), (self.counter, self.cache_size))
