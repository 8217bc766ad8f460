"""``TrimReport``: the kept messages, the dropped ones, and the plan's figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction import Compaction
from langchain_turntrim._core import TrimPlan

__all__ = ["TrimReport", "trace_extra"]


@dataclass(frozen=True)
class TrimReport:
    """The kept messages and what the trim dropped.

    ``kept`` and ``dropped`` hold the caller's message objects, in order;
    every figure of the plan is forwarded (``report.tokens_after`` is
    ``report.plan.tokens_after``). Under ``on_overflow="compact"``, when the
    newest turn was compacted, ``compaction`` says how, ``kept`` holds the
    compacted messages (listed again in ``compacted``) and the figures are
    those of what is kept: ``plan`` stays the spec's plan, which kept no turn.
    """

    kept: list[BaseMessage]
    dropped: list[BaseMessage]
    plan: TrimPlan
    compaction: Compaction | None = None

    @property
    def compacted(self) -> list[BaseMessage]:
        """The new, compacted message objects in ``kept`` (empty unless compacted)."""
        return self.compaction.compacted if self.compaction else []

    @property
    def turns(self) -> int:
        return self.plan.turns

    @property
    def kept_turns(self) -> int:
        return 1 if self.compaction else self.plan.kept_turns

    @property
    def dropped_turns(self) -> int:
        return self.plan.turns - 1 if self.compaction else self.plan.dropped_turns

    @property
    def tokens_before(self) -> int:
        return self.plan.tokens_before

    @property
    def tokens_after(self) -> int:
        return self.compaction.tokens_after if self.compaction else self.plan.tokens_after

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
    def trim_to(self) -> int | None:
        return self.plan.trim_to

    @property
    def start_moved(self) -> bool:
        """The first kept turn differs from the one the history without its
        newest turn would keep: this call misses a provider's prompt cache."""
        return self.plan.start_moved

    @property
    def budget_met(self) -> bool:
        return self.compaction is not None or self.plan.budget_met


def trace_extra(report: TrimReport) -> dict[str, Any] | None:
    """What a compacted trim adds to (and corrects in) the trace summary."""
    return report.compaction.summary(report.plan) if report.compaction else None
