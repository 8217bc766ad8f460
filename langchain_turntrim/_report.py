"""``TrimReport``: the kept messages, the dropped ones, and the plan's figures."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import TrimPlan

__all__ = ["TrimReport"]


@dataclass(frozen=True)
class TrimReport:
    """The kept messages and what the trim dropped.

    ``kept`` and ``dropped`` hold the caller's message objects, in order;
    every figure of the plan is forwarded (``report.tokens_after`` is
    ``report.plan.tokens_after``).
    """

    kept: list[BaseMessage]
    dropped: list[BaseMessage]
    plan: TrimPlan

    @property
    def turns(self) -> int:
        return self.plan.turns

    @property
    def kept_turns(self) -> int:
        return self.plan.kept_turns

    @property
    def dropped_turns(self) -> int:
        return self.plan.dropped_turns

    @property
    def tokens_before(self) -> int:
        return self.plan.tokens_before

    @property
    def tokens_after(self) -> int:
        return self.plan.tokens_after

    @property
    def max_tokens(self) -> int:
        return self.plan.max_tokens

    @property
    def system_tokens(self) -> int:
        return self.plan.system_tokens

    @property
    def overhead_tokens(self) -> int:
        return self.plan.overhead_tokens

    @property
    def newest_turn_tokens(self) -> int:
        return self.plan.newest_turn_tokens

    @property
    def budget_met(self) -> bool:
        return self.plan.budget_met
