"""What a trim decided: ``TrimReport``, ``Compaction``, ``TurnTrimOverflowError``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from langchain_core.exceptions import ContextOverflowError

from langchain_turntrim._core import TrimPlan

__all__ = ["Compaction", "TrimReport", "TurnTrimOverflowError"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Compaction:
    """What ``on_overflow="compact"`` did to the newest turn. Each rung's
    savings are in the per-message counts it ran on: the counter's own, or
    the approximate estimate for a counter of whole lists."""

    cleared_results: int
    """Tool results replaced by a note naming the tool."""
    cleared_tokens: int
    dropped_steps: int
    """Whole steps (an assistant message and its results) left out."""
    dropped_step_tokens: int
    truncated_messages: int
    """Messages cut around a note saying how much was removed."""
    truncated_tokens: int
    changed: tuple[int, ...] = ()
    """The input indices of the messages it rewrote (each sent as a new object)."""

    def figures(self) -> dict[str, int]:
        figures = dict(vars(self))
        figures["compacted_messages"] = len(figures.pop("changed"))
        return figures


@dataclass(frozen=True)
class TrimReport(Generic[_T]):
    """A trim's decision: what is sent, what is left out, and its figures.

    ``kept`` is what the trim returns (or sends): the caller's objects, except
    where compaction or a call left without its result made a new one.
    ``dropped`` and ``removed`` hold the caller's own objects, in order.
    """

    kept: list[Any]
    #: The input index of each kept message.
    kept_indices: tuple[int, ...]
    #: The caller's messages that are not sent.
    dropped: list[_T]
    #: What a state trim deletes (``TrimPlan.removed``).
    removed: list[_T]
    plan: TrimPlan
    #: The counter's count of exactly ``kept``, sent with the request's tools.
    tokens_after: int
    #: The tools' share of ``tokens_after`` (None: inside every whole-list count).
    tool_tokens: int | None = 0
    compaction: Compaction | None = None
    #: Tool calls left out of what is sent because no result answers them.
    unanswered_calls: int = 0
    #: Tool results left out because they answer no call before them.
    orphan_results: int = 0
    #: How ``trim_to="auto"`` chose its cut (None for any other ``trim_to``).
    auto: dict[str, Any] | None = None

    @property
    def max_tokens(self) -> int:
        return self.plan.max_tokens

    @property
    def turns(self) -> int:
        return self.plan.turns

    @property
    def dropped_turns(self) -> int:
        """Whole turns left out (all but the newest one when it was compacted)."""
        return self.plan.turns - 1 if self.compaction else self.plan.dropped_turns

    @property
    def kept_turns(self) -> int:
        return self.plan.turns - self.dropped_turns

    @property
    def system_tokens(self) -> int:
        return self.plan.system_tokens

    @property
    def start_moved(self) -> bool:
        return self.plan.start_moved

    @property
    def budget_met(self) -> bool:
        return self.tokens_after <= self.plan.max_tokens

    @property
    def changed(self) -> bool:
        """What is sent differs from the input."""
        rewritten = self.compaction or self.unanswered_calls or self.orphan_results
        return len(self.kept_indices) != self.plan.size or bool(rewritten)

    def summary(self) -> dict[str, Any]:
        """The figures the log line, the trace and the event carry, JSON-ready."""
        plan = self.plan
        summary: dict[str, Any] = {
            "max_tokens": plan.max_tokens,
            "tokens_after": self.tokens_after,
            "messages_before": plan.size,
            "messages_after": len(self.kept),
            "turns": plan.turns,
            "dropped_turns": self.dropped_turns,
            "system_tokens": plan.system_tokens,
            "budget_met": self.budget_met,
            "start_moved": plan.start_moved,
        }
        if self.compaction is not None:
            summary.update(self.compaction.figures())
        if self.unanswered_calls or self.orphan_results:
            summary["unanswered_calls"] = self.unanswered_calls
            summary["orphan_results"] = self.orphan_results
        if self.auto is not None:
            summary["auto"] = self.auto
        return summary


class TurnTrimOverflowError(ContextOverflowError):
    """Not even the newest turn fits beside the system messages.

    Raised by ``on_overflow="raise"``, and by ``"compact"`` when not even the
    newest turn compacted to its skeleton (the user message and the newest
    step) fits. A ``ContextOverflowError``, as a provider's would be.
    """

    def __init__(self, max_tokens: int, system_tokens: int, newest_turn_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.system_tokens = system_tokens
        self.newest_turn_tokens = newest_turn_tokens
        super().__init__(
            f"the newest turn ({newest_turn_tokens} tokens) does not fit beside the "
            f"system messages ({system_tokens} tokens) in a budget of {max_tokens} tokens"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.max_tokens, self.system_tokens, self.newest_turn_tokens))
