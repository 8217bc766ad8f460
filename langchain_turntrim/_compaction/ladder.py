"""The ladder that compacts the newest turn, and ``Compaction``, what it did.

When the newest turn alone does not fit beside the pinned messages, every
older turn is dropped and the newest turn is made smaller by a deterministic
ladder, each rung used only as far as needed to reach a room (in the units
of the per-message counts it is given; ``fit`` chooses the room):

1. **clear** the oldest tool results: their content becomes a short note
   naming the tool and the tokens it held; the newest ``keep_tool_results``
   results stay intact;
2. **drop** the oldest whole steps (an assistant message and the results of
   its calls), never the newest step, while at least half of a step is needed;
3. **truncate** the largest remaining message of the turn (the user message
   only when nothing else can be truncated): its head and tail are kept
   around a note saying how many characters were removed; repeated on the next largest
   until the budget holds. Steps are dropped again if that is not enough.

Steps are atomic (a call never travels without its results), the user
message stays first, and every compacted message is a new object of the
caller's class with the same ``id``, ``tool_call_id`` and ``tool_calls``.
A room the ladder cannot reach leaves the turn at its skeleton: the user
message and the newest step, truncated as far as they go.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_turntrim._compaction import edits
from langchain_turntrim._core import ANCHOR, PINNED

__all__ = ["PINNED_KINDS", "Compaction", "Ladder"]

#: Counts per truncated message while searching for its length.
_SEARCH_STEPS: Final = 8
#: Kinds that stay where they are, outside the ladder.
PINNED_KINDS: Final = (PINNED, ANCHOR)
#: Each message's count, in the units of the room the ladder reaches for.
CountEach = Callable[[Sequence[BaseMessage]], list[int]]


@dataclass(frozen=True)
class Compaction:
    """What ``"compact"`` did to the newest turn.

    ``messages`` is the result (pinned messages, then the compacted turn) and
    ``kept`` the input index of each of its messages; ``compacted`` the new
    message objects in it, in order; ``dropped`` the
    caller's messages of the turn that were left out (whole steps);
    ``tokens_after`` the counter's count of ``messages`` (and the request's
    tools). Each rung's saving is in the per-message counts the ladder ran on:
    the counter's own for additive counters, the approximate estimate for
    whole-list ones.
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

    def figures(self) -> dict[str, int]:
        """Each rung's figures, as the trace metadata carries them."""
        return {
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
    at_floor: bool = False  # truncated as far as it goes

    def __post_init__(self) -> None:
        self.restore()

    def restore(self) -> None:
        self.message, self.tokens, self.change = self.original, self.original_tokens, ""


class Ladder:
    """The three rungs over one turn's messages (pinned ones stay out of it)."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        turn: list[int],
        count_each: CountEach,
        keep_tool_results: int,
    ) -> None:
        self.count_each = count_each
        costs = count_each([messages[i] for i in turn])
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
        self.names = edits.tool_names(messages[i] for i in turn)
        results = [s for step in self.steps for s in step if edits.is_result(s.message)]
        keep = max(0, keep_tool_results)
        self.clearable = results[: len(results) - keep] if keep else results

    def total(self) -> int:
        return sum(s.tokens for s in self.kept_slots())

    def kept_slots(self) -> list[_Slot]:
        return [*self.head, *(s for step in self.steps for s in step)]

    def run(self, room: int) -> bool:
        """Apply the rungs until the turn fits ``room``; False if it cannot
        (the turn is then at its skeleton)."""
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
            # is truncated from the largest message instead of wasting the rest.
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
        """The largest message that can still be truncated; the user message last of all."""
        slots = [s for s in self.kept_slots() if not s.at_floor]
        others = [s for s in slots if s is not self.user]
        return max(others or slots, key=lambda s: s.tokens, default=None)

    def _count(self, message: BaseMessage) -> int:
        return self.count_each([message])[0]

    def _clear(self, slot: _Slot) -> int:
        name = self.names.get(getattr(slot.message, "tool_call_id", None) or "", "tool")
        note = f"[result of {name} cleared to fit the context: {slot.tokens} tokens]"
        cleared = edits.with_result_text(slot.message, note)
        tokens = self._count(cleared)
        if tokens >= slot.tokens:
            return 0
        saved = slot.tokens - tokens
        slot.message, slot.tokens, slot.change = cleared, tokens, "cleared"
        return saved

    def _truncate(self, slot: _Slot, target: int) -> int:
        """Cut ``slot``'s text to at most ``target`` tokens, or as far as it goes."""
        original = slot.message
        text = edits.text(original)
        floor = edits.with_text(original, edits.truncate(text, 0))
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
                candidate = edits.with_text(original, edits.truncate(text, keep))
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
        rest = (i for i in range(start, len(kinds)) if kinds[i] in PINNED_KINDS or i in inside)
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
