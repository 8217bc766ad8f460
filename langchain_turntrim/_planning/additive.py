"""``AdditivePlanner``: plans from per-message counts, for additive counters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction.copies import Copies
from langchain_turntrim._compaction.fit import fit_additive
from langchain_turntrim._compaction.ladder import Compaction
from langchain_turntrim._core import TrimPlan, check_kinds
from langchain_turntrim._core.depth import Cut
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._planning.base import CountingPlanner
from langchain_turntrim._planning.memo import HistoryMemo, cold_plan

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
    again as the same objects (``Copies``).
    """

    __slots__ = ("_priced", "cache_size", "copies", "memo")

    counter: AdditiveCounter

    def __init__(self, counter: AdditiveCounter, cache_size: int) -> None:
        self.counter = counter
        self.cache_size = cache_size
        self.memo = HistoryMemo(cache_size) if cache_size and counter.stable else None
        #: The tools the newest plan was made with (the very object), and their price:
        #: the report asks for it right after (``tool_tokens``).
        self._priced: tuple[Sequence[Any], int] = ((), 0)
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
        again: bool = False,
    ) -> TrimPlan:
        """The plan of ``messages`` (of turn kinds ``kinds``, when known) sent
        with ``tools``, whose price is part of ``overhead_tokens``; ``again``:
        see ``_pipeline.Planner``."""
        if kinds is not None:
            kinds = check_kinds(kinds, len(messages))
        counter = self.counter
        overhead = counter.checked_overhead()
        if tools:
            # Planned again: the tools priced moments ago (``tool_tokens``).
            price = self.tool_tokens(tools) if again else counter.count_tools(tools)
            self._priced = (tools, price)
            overhead += price
        if self.memo is not None:
            return self.memo.plan(
                messages, kinds, counter, max_tokens, overhead, trim_to, again=again
            )
        kinds = message_kinds(messages) if kinds is None else kinds
        return cold_plan(messages, kinds, counter, max_tokens, overhead, trim_to)

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
        if self.memo is not None:
            self.memo.file_all(self.counter)  # compaction counts through the cache
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
        if not tools:
            return 0
        priced, price = self._priced
        return price if priced is tools else self.counter.count_tools(tools)

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
