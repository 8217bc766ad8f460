"""The ladder that compacts the newest turn, and ``Compaction``, what it did.

When the newest turn alone does not fit beside the pinned messages, every
older turn is dropped and the newest turn is made smaller by a deterministic
ladder, each rung used only as far as needed to reach a room (in the units
of the per-message counts it is given; ``fit`` chooses the room):

1. **clear** the oldest tool results: their content becomes a short note
   naming the tool and the tokens it held; the newest ``keep_tool_results``
   results stay intact;
2. **drop** the oldest whole steps (an assistant message and the results of
   its calls), never the newest step, while at least half of a step is needed
   (a first step that opens with a thinking block stays: Anthropic refuses a
   turn in progress whose first assistant message lost it);
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

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction import edits
from langchain_turntrim._compaction.copies import Copies
from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START

__all__ = ["PINNED_KINDS", "Compaction", "Ladder", "Slot"]

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


class Slot:
    """One message of the turn as compaction changes it, piece by piece."""

    __slots__ = (
        "data_dropped",
        "index",
        "kept",
        "message",
        "original",
        "original_tokens",
        "parts",
        "tokens",
    )

    def __init__(self, index: int, original: BaseMessage, tokens: int, *, result: bool) -> None:
        self.index = index
        self.original = original
        self.original_tokens = tokens
        self.parts = edits.pieces(original, result=result)
        self.message = original
        self.tokens = tokens
        self.data_dropped = False
        #: False once its step is dropped.
        self.kept = True

    @property
    def change(self) -> str:
        """ "truncated" or "cleared" once changed (truncated wins), else ""."""
        changes = {p.change for p in self.parts}
        if "truncated" in changes or self.data_dropped:
            return "truncated"
        return "cleared" if "cleared" in changes else ""

    @property
    def at_floor(self) -> bool:
        return all(p.at_floor or not p.editable for p in self.parts)


class Ladder:
    """The three rungs over one turn's messages (pinned ones stay out of it);
    ``copies``: the copies made by earlier compactions, made again as the same objects."""

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        turn: list[int],
        kinds: Sequence[int],
        count_each: CountEach,
        keep_tool_results: int,
        copies: Copies | None = None,
    ) -> None:
        self.count_each = count_each
        self.copies = copies
        costs = count_each([messages[i] for i in turn])
        slots = [
            Slot(i, messages[i], c, result=is_result_message(messages[i], kinds[i]))
            for i, c in zip(turn, costs, strict=True)
        ]
        # The head: the user message (absent when a summary, pinned, opens the
        # turn) and any result before the first assistant message. Then one
        # step per assistant message, with the results that follow it. Steps
        # go oldest first: the kept ones are the held first step, if any, and
        # ``steps[self.next:]``.
        self.head: list[Slot] = []
        self.steps: list[list[Slot]] = []
        self.next = 0
        #: The first step, kept when the oldest kept step opens with a thinking block.
        self.held: list[Slot] = []
        #: The slots ``_largest`` chooses from (built when first needed): the
        #: largest first, then the earliest; entries of slots since dropped,
        #: at their floor or changed are skipped when met.
        self.candidates: list[tuple[int, int, Slot]] | None = None
        for slot in slots:
            if kinds[slot.index] == REPLY:
                self.steps.append([slot])
            elif self.steps:
                self.steps[-1].append(slot)
            else:
                self.head.append(slot)
        first = self.head[0] if self.head else None
        self.user = first if first is not None and kinds[first.index] == START else None
        self.dropped: list[Slot] = []
        self.names = edits.tool_names(messages[i] for i in turn)
        #: Every tool result of the steps, oldest first: a result message, or
        #: one tool_result block of a user message.
        results = [
            (slot, piece)
            for step in self.steps
            for slot in step
            for piece in slot.parts
            if piece.kind == edits.RESULT
        ]
        self.clearable = results[: max(0, len(results) - keep_tool_results)]
        #: The results cleared, in order, with their notes.
        self.cleared: list[tuple[Slot, edits.Piece, str]] = []
        self.step_starts = {step[0].index for step in self.steps}

    def total(self) -> int:
        return sum(s.tokens for s in self.kept_slots())

    def kept_slots(self) -> list[Slot]:
        steps = self.steps
        later = (s for i in range(self.next, len(steps)) for s in steps[i])
        return [*self.head, *self.held, *later]

    def run(self, room: int) -> bool:
        """Apply the rungs until the turn fits ``room``; False if it cannot
        (the turn is then at its skeleton)."""
        total = self.total()
        for slot, piece in self.clearable:
            if total <= room:
                return True
            total -= self._clear(slot, piece)
        while total > room:
            excess = total - room
            droppable = self._droppable()
            oldest = 0 if droppable is None else sum(s.tokens for s in self.steps[droppable])
            # A step goes when at least half of it is needed; a smaller excess
            # is truncated from the largest message instead of wasting the rest.
            if droppable is not None and oldest <= 2 * excess:
                total -= self._drop(droppable)
                continue
            largest = self._largest()
            if largest is not None:
                total -= self._truncate(largest, largest.tokens - excess)
                self._requeue(largest)
            elif droppable is not None:
                total -= self._drop(droppable)
            else:
                return False
        if self.dropped:  # room freed by dropping: give back the newest cleared results
            for slot, piece, note in reversed(self.cleared):
                if not slot.kept or piece.change != "cleared":
                    continue
                piece.restore()
                restored = self._rebuilt(slot)
                tokens = self._count(restored)
                if total - slot.tokens + tokens <= room:
                    total += tokens - slot.tokens
                    slot.message, slot.tokens = restored, tokens
                else:
                    piece.text, piece.change, piece.at_floor = note, "cleared", True
        return True

    def _droppable(self) -> int | None:
        """The oldest step that may go: never the newest, nor a first step that
        opens with a thinking block (Anthropic, thinking on, refuses a turn in
        progress whose first assistant message lost it): that one is held."""
        steps = self.steps
        if not self.held and self.next < len(steps):
            first = steps[self.next]
            if _opens_with_thinking(first[0].original):
                self.held = first
                self.next += 1
        return self.next if self.next < len(steps) - 1 else None

    def _drop(self, index: int) -> int:
        """Drop the step at ``index`` (the oldest that may go); the tokens it held."""
        step = self.steps[index]
        for slot in step:
            slot.kept = False
        self.dropped.extend(step)
        self.next = index + 1
        return sum(s.tokens for s in step)

    def _largest(self) -> Slot | None:
        """The largest message that can still be truncated (the earliest of
        equals); the user message last of all."""
        if self.candidates is None:
            user = self.user
            self.candidates = [(-s.tokens, s.index, s) for s in self.kept_slots() if s is not user]
            heapq.heapify(self.candidates)
        candidates = self.candidates
        while candidates:
            tokens, _, slot = candidates[0]
            if slot.kept and -tokens == slot.tokens and not slot.at_floor:
                return slot
            heapq.heappop(candidates)
        user = self.user
        return user if user is not None and not user.at_floor else None

    def _requeue(self, slot: Slot) -> None:
        """Give a truncated slot its new place among the candidates."""
        if self.candidates is not None and slot is not self.user and not slot.at_floor:
            heapq.heappush(self.candidates, (-slot.tokens, slot.index, slot))

    def _rebuilt(self, slot: Slot) -> BaseMessage:
        """The message of ``slot`` as its pieces are now (the same copy as
        before, when ``copies`` remembers one)."""
        rebuild = edits.rebuild if self.copies is None else self.copies.rebuild
        return rebuild(slot.original, slot.parts, drop_data=slot.data_dropped)

    def _count(self, message: BaseMessage) -> int:
        return self.count_each([message])[0]

    def _clear(self, slot: Slot, piece: edits.Piece) -> int:
        """Replace one result by a note naming its tool and the tokens it held."""
        name = self.names.get(piece.tool_id, "tool")
        if len(slot.parts) == 1:
            held = slot.tokens
        else:  # one result among other pieces: what its output adds to the message
            piece.text, piece.change = "", "cleared"
            held = max(0, slot.tokens - self._count(self._rebuilt(slot)))
        note = f"[result of {name} cleared to fit the context: {held} tokens]"
        piece.text, piece.change, piece.at_floor = note, "cleared", True
        cleared = self._rebuilt(slot)
        tokens = self._count(cleared)
        if tokens >= slot.tokens:
            piece.restore()
            return 0
        saved = slot.tokens - tokens
        slot.message, slot.tokens = cleared, tokens
        self.cleared.append((slot, piece, note))
        return saved

    def _truncate(self, slot: Slot, target: int) -> int:
        """Cut the largest piece of ``slot`` so that it holds at most ``target``
        tokens, or as far as that piece goes."""
        editable = [p for p in slot.parts if p.editable and not p.at_floor]
        if not editable:
            return 0
        piece = max(editable, key=lambda p: len(p.text))
        text = piece.text
        before, previous = slot.data_dropped, (piece.text, piece.change)
        slot.data_dropped = True
        piece.text, piece.change = edits.truncate(text, 0), "truncated"
        floor = self._rebuilt(slot)
        floor_tokens = self._count(floor)
        if floor_tokens >= slot.tokens:
            slot.data_dropped = before
            piece.text, piece.change = previous
            piece.at_floor = True
            return 0
        message, tokens, kept = floor, floor_tokens, edits.truncate(text, 0)
        if target > floor_tokens:
            # Characters per token of this very piece, refined on each miss.
            per_char = (slot.tokens - floor_tokens) / max(len(text), 1)
            keep = int((target - floor_tokens) / per_char)
            for _ in range(_SEARCH_STEPS):
                keep = max(0, min(keep, len(text) - 1))
                piece.text = edits.truncate(text, keep)
                candidate = self._rebuilt(slot)
                counted = self._count(candidate)
                if counted <= target:
                    message, tokens, kept = candidate, counted, piece.text
                    break
                per_char = max(counted - floor_tokens, 1) / max(keep, 1)
                keep = min(keep - 1, int((target - floor_tokens) / per_char))
        piece.text = kept
        piece.at_floor = message is floor
        saved = slot.tokens - tokens
        slot.message, slot.tokens = message, tokens
        return saved

    def kept_indices(self, kinds: Sequence[int], before: list[int], start: int) -> list[int]:
        """Pinned messages before the turn, then the turn in order (its pinned in place)."""
        inside = {s.index for s in self.kept_slots()}
        rest = (i for i in range(start, len(kinds)) if kinds[i] in PINNED_KINDS or i in inside)
        return [*before, *rest]

    def result(self, messages: Sequence[BaseMessage], indices: list[int]) -> list[BaseMessage]:
        """The messages at ``indices``, compacted where the ladder changed them."""
        changed = {s.index: s.message for s in self.kept_slots() if s.message is not s.original}
        return [changed.get(i, messages[i]) for i in indices]

    def outcome(self, kept: list[BaseMessage], indices: list[int], total: int) -> Compaction:
        slots = self.kept_slots()
        results = sum(1 for s in slots for p in s.parts if p.change == "cleared")
        cleared = [s for s in slots if s.change == "cleared"]
        truncated = [s for s in slots if s.change == "truncated"]
        return Compaction(
            messages=kept,
            kept=tuple(indices),
            compacted=[s.message for s in slots if s.message is not s.original],
            dropped=[s.original for s in self.dropped],
            cleared_results=results,
            cleared_tokens=sum(s.original_tokens - s.tokens for s in cleared),
            dropped_steps=sum(1 for s in self.dropped if s.index in self.step_starts),
            dropped_step_tokens=sum(s.original_tokens for s in self.dropped),
            truncated_messages=len(truncated),
            truncated_tokens=sum(s.original_tokens - s.tokens for s in truncated),
            tokens_after=total,
        )


def _opens_with_thinking(message: BaseMessage) -> bool:
    content = message.content
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, dict) and first.get("type") in edits.THINKING_BLOCKS


def is_result_message(message: BaseMessage, kind: int) -> bool:
    """A tool's (or function's) result message, its whole content one result:
    a ``ToolMessage``, a ``FunctionMessage``, a ``ChatMessage`` with the tool or
    function role. (A user message of ``tool_result`` blocks has its results
    in its blocks.)"""
    if kind != CONTINUE:
        return False
    return message.type in ("tool", "function") or edits.attribute(message, "role") in (
        "tool",
        "function",
    )
