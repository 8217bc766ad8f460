"""Compaction inside the newest turn, for ``on_overflow="compact"``.

When the newest turn alone does not fit beside the pinned messages, every
older turn is dropped and the newest turn is made smaller by a deterministic
ladder, each rung used only as far as needed:

1. **clear** the oldest tool results: their content becomes a short note
   naming the tool and the tokens it held; the newest ``keep_tool_results``
   results stay intact;
2. **drop** the oldest whole steps (an assistant message and the results of
   its calls), never the newest step, while at least half of a step is needed;
3. **truncate** the largest remaining message of the turn (the user message
   only when nothing else can be cut): its head and tail are kept around a
   note saying how many characters were cut; repeated on the next largest
   until the budget holds. Steps are dropped again if that is not enough.

Steps are atomic (a call never travels without its results), the user
message stays first, and every compacted message is a new object of the
caller's class with the same ``id``, ``tool_call_id`` and ``tool_calls``.
If not even the pinned messages, the user message and the newest step cut to
their notes fit, ``TurnTrimOverflowError`` is raised: a request without a
user message is never built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
)

from langchain_turntrim import _cutting as cutting
from langchain_turntrim._core import ANCHOR, PINNED, TrimPlan
from langchain_turntrim._counting import ResolvedCounter
from langchain_turntrim._errors import TurnTrimOverflowError, check_overflow
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._options import DEFAULT_KEEP_TOOL_RESULTS, OnOverflow

__all__ = ["DEFAULT_KEEP_TOOL_RESULTS", "Compaction", "compact", "decide"]

#: Exact recounts of the compacted list before giving up (whole-list counters
#: only estimate per message; additive counters need one).
_ATTEMPTS: Final = 4
#: Counts per truncated message while searching for its length.
_SEARCH_STEPS: Final = 8
#: Kinds that stay where they are, outside the ladder.
_PINNED: Final = (PINNED, ANCHOR)


@dataclass(frozen=True)
class Compaction:
    """What ``"compact"`` did to the newest turn.

    ``messages`` is the result (pinned messages, then the compacted turn) and
    ``kept`` the input index of each of its messages; ``compacted`` the new
    message objects in it, in order; ``dropped`` the
    caller's messages of the turn that were left out (whole steps). Each
    rung's saving is in tokens, as the counter counts them.
    """

    messages: list[BaseMessage]
    kept: tuple[int, ...]
    compacted: list[BaseMessage]
    dropped: list[BaseMessage]
    cleared_results: int
    cleared_tokens: int
    dropped_steps: int
    dropped_step_tokens: int
    truncated_messages: int
    truncated_tokens: int
    tokens_after: int

    @property
    def changed(self) -> dict[int, BaseMessage]:
        """Input index -> compacted message, for the messages compaction changed."""
        new = {id(m) for m in self.compacted}
        return {i: m for i, m in zip(self.kept, self.messages, strict=True) if id(m) in new}

    def summary(self, plan: TrimPlan) -> dict[str, int | bool]:
        """The trace metadata's figures: the plan's, corrected for what was
        kept, and each rung's."""
        return {
            "tokens_after": self.tokens_after,
            "messages_after": len(self.messages),
            "dropped_messages": plan.size - len(self.messages),
            "dropped_turns": plan.turns - 1,
            "budget_met": True,
            "compacted_messages": len(self.compacted),
            "cleared_results": self.cleared_results,
            "cleared_tokens": self.cleared_tokens,
            "dropped_steps": self.dropped_steps,
            "dropped_step_tokens": self.dropped_step_tokens,
            "truncated_messages": self.truncated_messages,
            "truncated_tokens": self.truncated_tokens,
        }


@dataclass
class _Slot:
    """One message of the turn as compaction changes it."""

    index: int
    original: BaseMessage
    original_tokens: int
    message: BaseMessage = field(init=False)
    tokens: int = field(init=False)
    change: str = ""  # "cleared" or "truncated" once changed
    at_floor: bool = False  # cut as far as it goes

    def __post_init__(self) -> None:
        self.restore()

    def restore(self) -> None:
        self.message, self.tokens, self.change = self.original, self.original_tokens, ""


def decide(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int] | None,
    counter: ResolvedCounter,
    max_tokens: int,
    *,
    on_overflow: OnOverflow,
    keep_tool_results: int,
    trim_to: int | None,
    reserved: int = 0,
) -> tuple[TrimPlan, Compaction | None]:
    """The whole decision every entry point makes: the spec's plan, then, when
    not even the newest turn fits, the overflow rule (``"compact"`` compacts
    it, ``"raise"`` raises, ``"drop"`` keeps the plan)."""
    plan = counter.plan(messages, kinds, max_tokens, reserved=reserved, trim_to=trim_to)
    if on_overflow == "compact" and plan.overflowed:
        kinds = message_kinds(messages) if kinds is None else kinds
        compaction = compact(
            messages, kinds, plan, counter, keep_tool_results=keep_tool_results, reserved=reserved
        )
        return plan, compaction
    check_overflow(plan, on_overflow)
    return plan, None


def compact(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int],
    plan: TrimPlan,
    counter: ResolvedCounter,
    *,
    keep_tool_results: int,
    reserved: int = 0,
) -> Compaction:
    """Compact the newest turn of ``messages`` (planned as ``plan``) into the budget.

    ``reserved`` tokens (tool schemas) are part of ``plan.overhead_tokens``
    and are added to the exact count of the result.
    """
    overflow = TurnTrimOverflowError(
        plan.max_tokens, plan.system_tokens + plan.overhead_tokens, plan.newest_turn_tokens
    )
    if not plan.budget_met:
        raise overflow
    start = plan.newest_turn_start
    before = [i for i in range(start) if kinds[i] in _PINNED]
    turn = [i for i in range(start, len(messages)) if kinds[i] not in _PINNED]
    room = plan.max_tokens - plan.system_tokens - plan.overhead_tokens
    for _ in range(_ATTEMPTS):
        ladder = _Ladder(messages, turn, counter, keep_tool_results)
        if not ladder.run(room):
            raise overflow
        indices = ladder.kept_indices(kinds, before, start)
        kept = ladder.result(messages, indices)
        total = counter.count(kept) + reserved
        if total <= plan.max_tokens:
            return ladder.outcome(kept, indices, total)
        room -= total - plan.max_tokens
    raise overflow


class _Ladder:
    """The three rungs over one turn's messages (pinned ones stay out of it)."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        turn: list[int],
        counter: ResolvedCounter,
        keep_tool_results: int,
    ) -> None:
        self.counter = counter
        costs = counter.count_each([messages[i] for i in turn])
        slots = [_Slot(i, messages[i], c) for i, c in zip(turn, costs, strict=True)]
        # The head: the user message (absent when a summary, pinned, opens the
        # turn) and any result before the first assistant message. Then one
        # step per assistant message, with the results that follow it.
        self.head: list[_Slot] = []
        self.steps: list[list[_Slot]] = []
        for slot in slots:
            if isinstance(slot.message, AIMessage):
                self.steps.append([slot])
            elif self.steps:
                self.steps[-1].append(slot)
            else:
                self.head.append(slot)
        first = self.head[0] if self.head else None
        is_user = first is not None and isinstance(first.original, HumanMessage)
        self.user = first if is_user else None
        self.dropped: list[_Slot] = []
        self.names = cutting.tool_names(messages[i] for i in turn)
        results = [s for step in self.steps for s in step if cutting.is_result(s.message)]
        keep = max(0, keep_tool_results)
        self.clearable = results[: len(results) - keep] if keep else results

    def total(self) -> int:
        return sum(s.tokens for s in self.kept_slots())

    def kept_slots(self) -> list[_Slot]:
        return [*self.head, *(s for step in self.steps for s in step)]

    def run(self, room: int) -> bool:
        """Apply the rungs until the turn fits ``room``; False if it cannot."""
        total = self.total()
        for slot in self.clearable:
            if total <= room:
                return True
            total -= self._clear(slot)
        while total > room:
            excess = total - room
            largest = self._largest()
            oldest = sum(s.tokens for s in self.steps[0]) if len(self.steps) > 1 else None
            # A step goes when at least half of it is needed; a smaller excess
            # is cut from the largest message instead of wasting the rest.
            if oldest is not None and (largest is None or oldest <= 2 * excess):
                step = self.steps.pop(0)
                self.dropped.extend(step)
                total -= oldest
            elif largest is None:
                return False
            else:
                total -= self._truncate(largest, largest.tokens - excess)
        if self.dropped:  # room freed by dropping: give back the newest cleared results
            for slot in reversed([s for s in self.kept_slots() if s.change == "cleared"]):
                if total - slot.tokens + slot.original_tokens <= room:
                    total += slot.original_tokens - slot.tokens
                    slot.restore()
        return True

    def _largest(self) -> _Slot | None:
        """The largest message that can still be cut; the user message last of all."""
        slots = [s for s in self.kept_slots() if not s.at_floor]
        others = [s for s in slots if s is not self.user]
        return max(others or slots, key=lambda s: s.tokens, default=None)

    def _count(self, message: BaseMessage) -> int:
        return self.counter.count_each([message])[0]

    def _clear(self, slot: _Slot) -> int:
        name = self.names.get(getattr(slot.message, "tool_call_id", None) or "", "tool")
        note = f"[result of {name} cleared to fit the context: {slot.tokens} tokens]"
        cleared = cutting.with_result_text(slot.message, note)
        tokens = self._count(cleared)
        if tokens >= slot.tokens:
            return 0
        saved = slot.tokens - tokens
        slot.message, slot.tokens, slot.change = cleared, tokens, "cleared"
        return saved

    def _truncate(self, slot: _Slot, target: int) -> int:
        """Cut ``slot``'s text to at most ``target`` tokens, or as far as it goes."""
        original = slot.message
        text = cutting.text(original)
        floor = cutting.with_text(original, cutting.cut(text, 0))
        floor_tokens = self._count(floor)
        if floor_tokens >= slot.tokens:
            slot.at_floor = True
            return 0
        message, tokens = floor, floor_tokens
        if target > floor_tokens:
            # Characters per token of this very message, refined on each miss.
            per_char = (slot.tokens - floor_tokens) / max(len(text), 1)
            keep = int((target - floor_tokens) / per_char)
            for _ in range(_SEARCH_STEPS):
                keep = max(0, min(keep, len(text) - 1))
                candidate = cutting.with_text(original, cutting.cut(text, keep))
                counted = self._count(candidate)
                if counted <= target:
                    message, tokens = candidate, counted
                    break
                per_char = max(counted - floor_tokens, 1) / max(keep, 1)
                keep = min(keep - 1, int((target - floor_tokens) / per_char))
        saved = slot.tokens - tokens
        slot.message, slot.tokens, slot.change = message, tokens, "truncated"
        slot.at_floor = message is floor
        return saved

    def kept_indices(self, kinds: Sequence[int], before: list[int], start: int) -> list[int]:
        """Pinned messages before the turn, then the turn in order (its pinned in place)."""
        inside = {s.index for s in self.kept_slots()}
        rest = (i for i in range(start, len(kinds)) if kinds[i] in _PINNED or i in inside)
        return [*before, *rest]

    def result(self, messages: Sequence[BaseMessage], indices: list[int]) -> list[BaseMessage]:
        """The messages at ``indices``, compacted where the ladder changed them."""
        changed = {s.index: s.message for s in self.kept_slots() if s.change}
        return [changed.get(i, messages[i]) for i in indices]

    def outcome(self, kept: list[BaseMessage], indices: list[int], total: int) -> Compaction:
        slots = self.kept_slots()
        cleared = [s for s in slots if s.change == "cleared"]
        truncated = [s for s in slots if s.change == "truncated"]
        return Compaction(
            messages=kept,
            kept=tuple(indices),
            compacted=[s.message for s in slots if s.change],
            dropped=[s.original for s in self.dropped],
            cleared_results=len(cleared),
            cleared_tokens=sum(s.original_tokens - s.tokens for s in cleared),
            dropped_steps=sum(1 for s in self.dropped if isinstance(s.message, AIMessage)),
            dropped_step_tokens=sum(s.original_tokens for s in self.dropped),
            truncated_messages=len(truncated),
            truncated_tokens=sum(s.original_tokens - s.tokens for s in truncated),
            tokens_after=total,
        )
