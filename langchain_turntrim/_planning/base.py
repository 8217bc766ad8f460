"""``CountingPlanner``: what both planners share (compaction, unanswered calls, clearing)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._calls import without
from langchain_turntrim._compaction.fit import fit
from langchain_turntrim._compaction.ladder import Compaction
from langchain_turntrim._core import TrimPlan, request_order
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.whole_list import WholeListCounter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._report import TrimReport

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

    def answered(
        self, report: TrimReport[BaseMessage], tools: Sequence[Any] = ()
    ) -> TrimReport[BaseMessage]:
        """``report`` with the kept messages' unanswered calls left out of the
        request (``_calls.without``), and ``tokens_after`` the counter's count
        of what is then sent."""
        kept = report.position
        before = {i: report.kept[kept[i]] for i, _ in report.plan.unanswered if i in kept}
        if not before:
            return report
        ids = dict(report.plan.unanswered)
        repairs = {i: without(message, ids[i]) for i, message in before.items()}
        answered = report.with_answers(repairs, 0)
        counter = self.counter
        if isinstance(counter, AdditiveCounter):
            after = [m for m in repairs.values() if m is not None]
            change = sum(counter.costs(after)) - sum(counter.costs(list(before.values())))
            tokens = report.tokens_after + change
        else:
            sent = answered.kept
            order = request_order(range(len(sent)), message_kinds(sent))
            tokens = counter.count([sent[i] for i in order], tools) if sent else 0
        answered.set_tokens_after(tokens)
        return answered

    def clear(self) -> None:
        """Forget the counter's cached counts (and what the planner remembers)."""
        clear = getattr(self.counter, "clear", None)
        if callable(clear):
            clear()

    def __repr__(self) -> str:
        return repr(self.counter)
