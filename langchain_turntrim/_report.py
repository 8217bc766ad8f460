"""``TrimReport``: the decision a trim made, and every figure of it.

Imports nothing from LangChain: the ``turntrim`` command builds one for a
plain transcript without loading it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar, cast

from langchain_turntrim._core import TrimPlan
from langchain_turntrim._core.depth import CachePrice

if TYPE_CHECKING:
    from langchain_turntrim._compaction.ladder import Compaction

__all__ = ["Depth", "TrimReport"]

_T = TypeVar("_T")


class Depth(NamedTuple):
    """How ``trim_to="auto"`` chose its cut: the level (None: the greedy trim),
    the cache rules it was priced by, whether the cache was cold, and the
    greedy plan it was measured against."""

    level: int | None
    price: CachePrice
    cold: bool
    greedy: TrimPlan

    def figures(self) -> dict[str, Any]:
        """The summary's ``auto`` entry, JSON-ready."""
        return {
            "trim_to": self.level,
            "cache_rule": self.price.name,
            "cold": self.cold,
            "growth_per_call": round(self.greedy.growth, 1),
            "greedy_tokens_after": self.greedy.tokens_after,
        }


class TrimReport(Generic[_T]):
    """What a trim decided: the messages kept (and sent), those left out, the
    state removals, and every figure.

    ``kept``, ``dropped`` and ``removed`` hold the caller's message objects,
    in order (``kept`` holds compaction's new objects where it made them).
    Each figure is forwarded from ``plan`` (``report.tokens_before`` is
    ``report.plan.tokens_before``), except under ``on_overflow="compact"``,
    when the newest turn was compacted: ``compaction`` says how, and the
    figures are those of what is kept (``plan`` stays the spec's plan, which
    kept no turn). ``tokens_after`` is always the counter's count of exactly
    ``kept`` sent with the request's tools.
    """

    __slots__ = (
        "_dropped",
        "_kept",
        "_messages",
        "_removed",
        "_tokens_after",
        "answers",
        "compaction",
        "depth",
        "plan",
        "tool_tokens",
    )

    def __init__(
        self,
        messages: Sequence[_T],
        plan: TrimPlan,
        compaction: Compaction | None = None,
        tool_tokens: int | None = 0,
        depth: Depth | None = None,
    ) -> None:
        self._messages = messages
        self.plan = plan
        #: How ``trim_to="auto"`` chose the cut (None for a fixed ``trim_to``).
        self.depth = depth
        self.compaction = compaction
        #: The tools' price, part of ``overhead_tokens`` (None when the
        #: counter prices them inside each whole-list count).
        self.tool_tokens = tool_tokens
        #: Kept messages sent without their unanswered calls, by input index:
        #: the copy sent, or None when nothing was left of the message.
        self.answers: dict[int, Any] = {}
        self._tokens_after: int | None = None
        self._kept: list[Any] | None = None
        self._dropped: list[_T] | None = None
        self._removed: list[_T] | None = None

    def with_answers(self, answers: dict[int, Any], tokens_after: int) -> TrimReport[_T]:
        """This report with kept messages replaced (or left out) by ``answers``,
        and ``tokens_after`` the count of what is then sent."""
        report: TrimReport[_T] = TrimReport(
            self._messages, self.plan, self.compaction, self.tool_tokens, self.depth
        )
        report.answers = answers
        report.set_tokens_after(tokens_after)
        return report

    def set_tokens_after(self, tokens: int) -> None:
        """Set the count of what is sent (after ``with_answers``)."""
        self._tokens_after = tokens

    # -- what is kept, dropped and removed ---------------------------------------------------

    @property
    def kept(self) -> list[Any]:
        """The kept messages, in order: what the trim returns (or sends)."""
        if self._kept is None:
            compaction = self.compaction
            kept: list[Any] = (
                compaction.messages if compaction else self.plan.select(self._messages)
            )
            if self.answers:
                kept = list(kept)
                position = self.position
                for i, message in self.answers.items():
                    kept[position[i]] = message
                if None in self.answers.values():
                    kept = [m for m in kept if m is not None]
            self._kept = kept
        return self._kept

    @property
    def kept_indices(self) -> tuple[int, ...]:
        """The input index of each kept message."""
        indices = self.compaction.kept if self.compaction else self.plan.kept
        gone = {i for i, m in self.answers.items() if m is None}
        return tuple(i for i in indices if i not in gone) if gone else indices

    @property
    def position(self) -> Mapping[int, int] | _Positions:
        """Input index -> position in the kept messages before ``answers``
        (``in`` tells whether a message is kept)."""
        compaction = self.compaction
        if compaction is not None:
            return {i: p for p, i in enumerate(compaction.kept)}
        return _Positions(self.plan)

    @property
    def unanswered_calls(self) -> int:
        """How many tool calls without a result were left out of what is sent
        (the history, and any state, keep them)."""
        found = dict(self.plan.unanswered)
        return sum(len(found[i]) for i in self.answers)

    @property
    def changed(self) -> bool:
        """Whether what is sent differs from the input: messages dropped,
        compacted, or sent without their unanswered calls."""
        return bool(self.compaction or self.answers or self.plan.dropped_count)

    @property
    def dropped(self) -> list[_T]:
        """The caller's messages left out, in order: whole turns (and the
        messages before the first user message), then, under compaction, the
        steps it dropped from the newest turn."""
        if self._dropped is None:
            plan = self.plan
            if self.compaction is not None:
                older = plan.select_dropped(self._messages, plan.newest_turn_start)
                self._dropped = [*older, *cast("list[_T]", self.compaction.dropped)]
            else:
                self._dropped = plan.select_dropped(self._messages) if plan.dropped_count else []
        return self._dropped

    @property
    def removed(self) -> list[_T]:
        """What a state trim deletes: the dropped messages before the newest
        turn, once a turn is dropped (see ``TrimPlan.removed_until``)."""
        if self._removed is None:
            end = self.plan.removed_until
            self._removed = self.plan.select_dropped(self._messages, end) if end else []
        return self._removed

    @property
    def removed_indices(self) -> tuple[int, ...]:
        """The input index of each of ``removed``."""
        return self.plan.removed

    @property
    def compacted(self) -> list[Any]:
        """The new, compacted message objects in ``kept`` (empty unless compacted)."""
        return self.compaction.compacted if self.compaction else []

    # -- the figures ---------------------------------------------------------------------------

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
        if self._tokens_after is not None:
            return self._tokens_after
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
        """The first kept turn differs from the one the previous model call
        kept (see ``TrimPlan.start_moved``): its prompt prefix is lost."""
        return self.plan.start_moved

    @property
    def budget_met(self) -> bool:
        return self.tokens_after <= self.plan.max_tokens

    def summary(self) -> dict[str, Any]:
        """The figures the log line, the trace metadata and the event carry, JSON-ready."""
        plan = self.plan
        compaction = self.compaction
        if self.answers:
            kept = len(self.kept_indices)
        else:
            kept = len(compaction.kept) if compaction else plan.size - plan.dropped_count
        summary: dict[str, Any] = {
            "max_tokens": plan.max_tokens,
            "tokens_before": plan.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": plan.size,
            "messages_after": kept,
            "dropped_messages": plan.size - kept,
            "turns": plan.turns,
            "dropped_turns": self.dropped_turns,
            "system_tokens": plan.system_tokens,
            "budget_met": self.budget_met,
            "start_moved": plan.start_moved,
        }
        if compaction is not None:
            summary.update(compaction.figures())
        if self.answers:
            summary["unanswered_calls"] = self.unanswered_calls
        if self.depth is not None:
            summary["auto"] = self.depth.figures()
        return summary


class _Positions:
    """Input index -> position among a plan's kept messages, without building them."""

    __slots__ = ("_before", "_keep_from", "_pinned")

    def __init__(self, plan: TrimPlan) -> None:
        self._keep_from = plan.keep_from
        self._pinned = plan.pinned
        self._before = bisect_left(plan.pinned, plan.keep_from)

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, int):
            return False
        return index >= self._keep_from or index in self._pinned

    def __getitem__(self, index: int) -> int:
        if index >= self._keep_from:
            return self._before + index - self._keep_from
        return self._pinned.index(index)
