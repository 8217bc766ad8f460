"""A message as compaction sees it: its pieces, what may change in each, and
the new message object they make.

Content is read into pieces, in order: ``text`` (a string content, a text
block, a string block), which truncation may shorten; ``result`` (a tool
message's whole output, or one Anthropic ``tool_result`` block), which
clearing replaces by a note and truncation may shorten; ``data`` (images,
files, audio), dropped with a note when the message is truncated; and
``keep``: everything else, never changed (reasoning with its signature, tool
calls, unknown blocks: a provider refuses them edited). The caller's messages
are never changed: a new one has the caller's class, ``id`` and tool calls.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import is_
from typing import Any, Final

import regex  # type: ignore[import-untyped]
from langchain_core.messages import BaseMessage

from langchain_turntrim._anatomy import dicts, fields_of
from langchain_turntrim._counting import LRU

__all__ = [
    "DATA",
    "KEEP",
    "RESULT",
    "TEXT",
    "Piece",
    "Rebuilds",
    "pieces",
    "rebuild",
    "truncate",
]

TEXT: Final = "text"
RESULT: Final = "result"
DATA: Final = "data"
KEEP: Final = "keep"
_DATA_BLOCKS: Final = frozenset(
    (
        "image",
        "image_url",
        "input_image",
        "file",
        "input_file",
        "document",
        "audio",
        "input_audio",
        "video",
    )
)
#: Grapheme clusters (UAX #29): a cut never splits a flag, an emoji or a letter's marks.
_GRAPHEME: Final = regex.compile(r"\X")


@dataclass
class Piece:
    """One piece of a message's content, and what compaction made of it."""

    kind: str
    #: The block as read (None for a string content or a tool message's output).
    block: Any
    #: Its text as read ("" for data and kept pieces).
    original: str
    #: The call a result answers.
    tool_id: str = ""
    text: str = field(init=False)
    #: "", "cleared" or "truncated".
    change: str = ""
    #: Shortened as far as it goes (or a note already).
    at_floor: bool = False

    def __post_init__(self) -> None:
        self.text = self.original

    @property
    def editable(self) -> bool:
        return self.kind in (TEXT, RESULT) and not self.at_floor

    def restore(self) -> None:
        self.text, self.change, self.at_floor = self.original, "", False


def pieces(message: BaseMessage, *, result: bool) -> list[Piece]:
    """The pieces of ``message``; ``result``: its whole content is one tool output."""
    content = message.content
    if result:
        tool_id = str(vars(message).get("tool_call_id", ""))
        return [Piece(RESULT, None, result_text(content), tool_id)]
    if isinstance(content, str):
        return [Piece(TEXT, None, content)]
    return [_piece(block) for block in content]


def _piece(block: str | dict[str, Any]) -> Piece:
    if isinstance(block, str):
        return Piece(TEXT, block, block)
    kind = block.get("type")
    if kind == "text":
        return Piece(TEXT, block, block["text"])
    if kind == "tool_result":
        output = result_text(block.get("content"))
        return Piece(RESULT, block, output, str(block.get("tool_use_id", "")))
    return Piece(DATA if kind in _DATA_BLOCKS else KEEP, block, "")


def result_text(content: object) -> str:
    """A tool's output as text: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = (
        b if isinstance(b, str) else b.get("text", "")
        for b in content
        if isinstance(b, (str, dict))
    )
    return "\n".join(t for t in texts if isinstance(t, str))


def rebuild(message: BaseMessage, parts: list[Piece], *, drop_data: bool) -> BaseMessage:
    """``message`` with its pieces as they are now, a new object (``message``
    itself when nothing changed); ``drop_data``: data pieces go, with a note."""
    dropped = sum(p.kind == DATA for p in parts) if drop_data else 0
    if not dropped and not any(p.change for p in parts):
        return message
    if parts[0].block is None:  # a string content, or a tool's whole output: one piece
        lost = any(b.get("type") in _DATA_BLOCKS for b in dicts(message.content))
        note = "\n[some non-text part(s) removed to fit the context]" if lost else ""
        return message.model_copy(update={"content": parts[0].text + note})
    note = f"[{dropped} non-text part(s) removed to fit the context]"
    blocks: list[Any] = []
    for piece in parts:
        if piece.kind == DATA and drop_data:
            continue
        if not piece.change:
            blocks.append(piece.block)
        elif piece.kind == TEXT:
            blocks.append(
                piece.text if isinstance(piece.block, str) else {**piece.block, "text": piece.text}
            )
        else:
            blocks.append({**piece.block, "content": piece.text})
    if dropped:
        blocks.append({"type": "text", "text": note})
    return message.model_copy(update={"content": blocks})


def truncate(text: str, keep: int) -> str:
    """``text`` cut to at most about ``keep`` characters around a note: two
    thirds from its head, one third from its tail, on grapheme boundaries."""
    if keep >= len(text):
        return text
    head = _boundary(text, keep - keep // 3, before=True)
    tail = _boundary(text, len(text) - keep // 3, before=False)
    note = f"\n[... {tail - head:,} characters cut to fit the context ...]\n"
    return text[:head] + note + text[tail:]


def _boundary(text: str, at: int, *, before: bool) -> int:
    """The grapheme boundary at or before (``before``) or after ``at``: clusters
    are found from the line's start, since a break always follows a newline."""
    position = text.rfind("\n", 0, at) + 1
    for match in _GRAPHEME.finditer(text, position):
        end = match.end()
        if end > at:
            return position if before or position == at else end
        position = end
    return position


class Rebuilds:
    """The messages compaction made, with their counts (by ``count_new``),
    remembered by what they were made from: an agent compacts the same turn,
    grown by a step, call after call (at most ``size`` kept; each holds its
    original's fields while it is kept)."""

    def __init__(self, count_new: Callable[[list[BaseMessage]], list[int]], size: int) -> None:
        self.count_new = count_new
        self._made: LRU[tuple[Any, ...]] = LRU(size)
        #: The last compaction: the turn's cache entries, its room and options, the result.
        self.last: tuple[list[Any], tuple[Any, ...], Any] | None = None

    def __call__(
        self,
        original: BaseMessage,
        parts: list[Piece],
        drop_data: bool,  # noqa: FBT001 - the ladder's call
        context: object,
    ) -> tuple[BaseMessage, int]:
        """``rebuild``'s message and its count (``context``: what else the count depends on)."""
        key = (id(original), drop_data, context, *((p.text, p.change) for p in parts))
        fields = fields_of(original)
        found = self._made.get(key)
        if found is not None and found[0]() is original and all(map(is_, fields, found[1])):
            return found[2], found[3]
        message = rebuild(original, parts, drop_data=drop_data)
        tokens = self.count_new([message])[0]
        self._made.put_many([(key, (weakref.ref(original), fields, message, tokens))])
        return message, tokens
