"""The ladder that makes a newest turn too large for the budget fit.

Each rung is used only as far as needed to reach the room:

1. **clear** the oldest tool results: each becomes a note naming the tool and
   the tokens it held; the newest ``keep_tool_results`` stay intact;
2. **drop** the oldest whole steps (an assistant message and the results of
   its calls) while at least half a step is needed; never the newest step, nor
   a first step that opens with reasoning (Anthropic, thinking on, refuses a
   turn in progress whose first assistant message lost it);
3. **truncate** the largest message (the user message last of all) around a
   note saying how much was cut; steps are dropped again if that is not enough.

Steps are atomic, the user message stays first, and the results cleared on
the way are given back, newest first, when dropping freed the room for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._anatomy import dicts
from langchain_turntrim._calls import opens_with_reasoning
from langchain_turntrim._compaction.edits import RESULT, Piece, pieces, truncate
from langchain_turntrim._core import CONTINUE, REPLY, START
from langchain_turntrim._report import Compaction

__all__ = ["Compacted", "compact"]

#: Counts per truncated message while searching for its length.
_SEARCH_STEPS: Final = 8
#: The types (and ``ChatMessage`` roles) of the messages whose whole content is a tool's output.
_RESULTS: Final = ("tool", "function")
#: A message rebuilt from its pieces, and its count: ``Rebuilds`` for one decision.
Rebuilt = Callable[[BaseMessage, list[Piece], bool], tuple[BaseMessage, int]]


@dataclass(frozen=True)
class Compacted:
    """The turn compacted: its kept messages (new objects where changed), their
    positions in the turn, what each rung did, and their tokens."""

    messages: list[BaseMessage]
    kept: list[int]
    compaction: Compaction
    tokens: int


class _Slot:
    """One message of the turn, as compaction changes it."""

    def __init__(self, position: int, message: BaseMessage, tokens: int, *, result: bool) -> None:
        self.position, self.original, self.message = position, message, message
        self.start = self.tokens = tokens
        self.parts = pieces(message, result=result)
        self.data_dropped = False
        self.kept = True

    def change(self) -> str:
        changes = {p.change for p in self.parts}
        if "truncated" in changes or self.data_dropped:
            return "truncated"
        return "cleared" if "cleared" in changes else ""


def compact(
    turn: Sequence[BaseMessage],
    kinds: Sequence[int],
    costs: Sequence[int],
    rebuilt: Rebuilt,
    room: int,
    keep_tool_results: int,
) -> Compacted | None:
    """The messages of ``turn`` (its non-pinned ones, costing ``costs``) made to
    fit ``room`` by the ladder, new copies made and counted by ``rebuilt``; None when
    not even its skeleton (the user message and the newest step) fits."""
    ladder = _Ladder(turn, kinds, costs, rebuilt, keep_tool_results)
    if not ladder.run(room):
        return None
    slots = [s for s in ladder.slots if s.kept]
    changed = [s for s in slots if s.message is not s.original]
    dropped = [s for s in ladder.slots if not s.kept]
    figures = Compaction(
        cleared_results=sum(p.change == "cleared" for s in slots for p in s.parts),
        cleared_tokens=sum(s.start - s.tokens for s in changed if s.change() == "cleared"),
        dropped_steps=sum(kinds[s.position] == REPLY for s in dropped),
        dropped_step_tokens=sum(s.start for s in dropped),
        truncated_messages=sum(s.change() == "truncated" for s in changed),
        truncated_tokens=sum(s.start - s.tokens for s in changed if s.change() == "truncated"),
    )
    tokens = sum(s.tokens for s in slots)
    return Compacted([s.message for s in slots], [s.position for s in slots], figures, tokens)


class _Ladder:
    def __init__(
        self,
        turn: Sequence[BaseMessage],
        kinds: Sequence[int],
        costs: Sequence[int],
        rebuilt: Rebuilt,
        keep_tool_results: int,
    ) -> None:
        self.rebuilt = rebuilt
        self.slots = [
            _Slot(i, m, c, result=kinds[i] == CONTINUE and _is_result(m))
            for i, (m, c) in enumerate(zip(turn, costs, strict=True))
        ]
        self.steps: list[list[_Slot]] = []
        head: list[_Slot] = []
        for slot in self.slots:
            if kinds[slot.position] == REPLY:
                self.steps.append([slot])
            else:
                (self.steps[-1] if self.steps else head).append(slot)
        self.user = head[0] if head and kinds[head[0].position] == START else None
        #: The first step stays when it opens with reasoning; the oldest droppable otherwise.
        self.next = 1 if self.steps and opens_with_reasoning(self.steps[0][0].original) else 0
        self.names = _tool_names(turn)
        results = [(s, p) for step in self.steps for s in step for p in s.parts if p.kind == RESULT]
        self.clearable = results[: max(0, len(results) - keep_tool_results)]
        self.cleared: list[tuple[_Slot, Piece, str]] = []

    def run(self, room: int) -> bool:
        total = sum(s.tokens for s in self.slots)
        for slot, piece in self.clearable:
            if total <= room:
                return True
            total -= self._clear(slot, piece)
        while total > room:
            excess = total - room
            droppable = self.next < len(self.steps) - 1
            step = self.steps[self.next] if droppable else []
            # A step goes when it is at most twice the excess, or nothing is left
            # to cut (the largest message is only looked for then: once a step).
            small = droppable and sum(s.tokens for s in step) <= 2 * excess
            largest = None if small else self._largest()
            if droppable and largest is None:
                total -= self._drop(step)
            elif largest is not None:
                total -= self._truncate(largest, largest.tokens - excess)
            else:
                return False
        if any(not s.kept for s in self.slots):
            for slot, piece, note in reversed(self.cleared):
                if slot.kept and piece.change == "cleared":
                    piece.restore()
                    restored, tokens = self._rebuilt(slot)
                    if total - slot.tokens + tokens <= room:
                        total += tokens - slot.tokens
                        slot.message, slot.tokens = restored, tokens
                    else:
                        piece.text, piece.change, piece.at_floor = note, "cleared", True
        return True

    def _drop(self, step: list[_Slot]) -> int:
        for slot in step:
            slot.kept = False
        self.next += 1
        return sum(s.tokens for s in step)

    def _largest(self) -> _Slot | None:
        """The largest message that can still be cut (the earliest of equals);
        the user message last of all."""
        others = [s for s in self.slots if s.kept and s is not self.user and _editable(s)]
        user = self.user if self.user is not None and _editable(self.user) else None
        return max(others, key=lambda s: (s.tokens, -s.position), default=user)

    def _rebuilt(self, slot: _Slot) -> tuple[BaseMessage, int]:
        """The message its pieces make now, and its tokens."""
        return self.rebuilt(slot.original, slot.parts, slot.data_dropped)

    def _clear(self, slot: _Slot, piece: Piece) -> int:
        """Replace one result by a note naming its tool and the tokens it held."""
        if len(slot.parts) == 1:
            held = slot.tokens
        else:  # one result among other pieces: what its output adds to the message
            piece.text, piece.change = "", "cleared"
            held = max(0, slot.tokens - self._rebuilt(slot)[1])
        tool = self.names.get(piece.tool_id, "tool")
        note = f"[result of {tool} cleared to fit the context: {held} tokens]"
        piece.text, piece.change, piece.at_floor = note, "cleared", True
        cleared, tokens = self._rebuilt(slot)
        if tokens >= slot.tokens:
            piece.restore()
            return 0
        saved = slot.tokens - tokens
        slot.message, slot.tokens = cleared, tokens
        self.cleared.append((slot, piece, note))
        return saved

    def _truncate(self, slot: _Slot, target: int) -> int:
        """Cut the longest text of ``slot`` so that it holds at most ``target``
        tokens, or as far as that text goes."""
        piece = max((p for p in slot.parts if p.editable), key=lambda p: len(p.text))
        text, before = piece.text, (piece.text, piece.change, slot.data_dropped)
        slot.data_dropped = True
        piece.text, piece.change = truncate(text, 0), "truncated"
        floor, floor_tokens = self._rebuilt(slot)
        if floor_tokens >= slot.tokens:
            piece.text, piece.change, slot.data_dropped = before
            piece.at_floor = True
            return 0
        message, tokens, kept = floor, floor_tokens, piece.text
        if target > floor_tokens:
            per_char = (slot.tokens - floor_tokens) / max(len(text), 1)
            keep = int((target - floor_tokens) / per_char)
            for _ in range(_SEARCH_STEPS):
                piece.text = truncate(text, max(0, min(keep, len(text) - 1)))
                candidate, counted = self._rebuilt(slot)
                if counted <= target:
                    message, tokens, kept = candidate, counted, piece.text
                    break
                per_char = max(counted - floor_tokens, 1) / max(keep, 1)
                keep = min(keep - 1, int((target - floor_tokens) / per_char))
        piece.text, piece.at_floor = kept, message is floor
        saved = slot.tokens - tokens
        slot.message, slot.tokens = message, tokens
        return saved


def _is_result(message: BaseMessage) -> bool:
    """A tool's (or function's) message, whose whole content is its output."""
    return message.type in _RESULTS or vars(message).get("role") in _RESULTS


def _editable(slot: _Slot) -> bool:
    return any(p.editable for p in slot.parts)


def _tool_names(messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Tool call id -> tool name, from the turn's calls and the names results carry."""
    names: dict[str, str] = {}
    for message in messages:
        fields = vars(message)  # not getattr: a field a class lacks is slow to miss
        for call in fields.get("tool_calls") or ():
            if call.get("id") and call.get("name"):
                names[call["id"]] = call["name"]
        for block in dicts(message.content):
            if block.get("type") in ("tool_use", "tool_call") and block.get("name"):
                names[str(block.get("id"))] = str(block["name"])
        tool_id, name = fields.get("tool_call_id"), message.name
        if tool_id and name and tool_id not in names:
            names[tool_id] = name
    return names
