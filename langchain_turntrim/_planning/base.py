"""``CountingPlanner``: what both planners share (compaction, clearing, naming)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction.fit import fit
from langchain_turntrim._compaction.ladder import Compaction
from langchain_turntrim._core import TrimPlan
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.whole_list import WholeListCounter

__all__ = ["CountingPlanner"]


class CountingPlanner:
    """The base of the planners of LangChain messages: ``counter`` counts."""

    __slots__ = ("counter",)

    counter: AdditiveCounter | WholeListCounter

    @property
    def blocking(self) -> bool:
        """Whether planning may block (the counter may be a provider's endpoint)."""
        return self.counter.blocking

    def compact(
        self,
        messages: Sequence[BaseMessage],
        plan: TrimPlan,
        *,
        keep_tool_results: int,
        tools: Sequence[Any] = (),
    ) -> Compaction:
        """The newest turn compacted into the budget (see ``_compaction.fit``)."""
        return fit(messages, plan, self.counter, keep_tool_results=keep_tool_results, tools=tools)

    def clear(self) -> None:
        """Forget the counter's cached counts (and what the planner remembers)."""
        clear = getattr(self.counter, "clear", None)
        if callable(clear):
            clear()

    def __repr__(self) -> str:
        return repr(self.counter)
