"""A message as compaction sees it: its pieces, what may change in each, and
the new message object they make.

A message's content is read into pieces, in order:

* ``text``: a string content, a ``text`` block or a bare string block, which
  truncation may shorten (around a note saying how much was removed);
* ``result``: a tool's output, which clearing replaces by a note and
  truncation may shorten: a tool (or function) message's whole content, or
  one ``tool_result`` block of a user message (Anthropic's format: each
  block is cleared and truncated on its own, with its own note);
* ``data``: an image, a file, audio or video, dropped (with a note) when the
  message is truncated;
* ``keep``: everything else, never changed: reasoning (``thinking`` with its
  signature, ``redacted_thinking``, ``reasoning``), tool uses and function
  calls (a provider rejects a call cut in half, and Anthropic rejects a tool
  use whose thinking block is gone), and any block this module does not know.

New message objects only: the caller's messages are never changed; a new one
has the caller's class, ``id``, ``tool_call_id`` and ``tool_calls``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._graphemes import cut_end, cut_start

__all__ = [
    "DATA_BLOCKS",
    "REASONING_BLOCKS",
    "THINKING_BLOCKS",
    "Piece",
    "attribute",
    "pieces",
    "rebuild",
    "result_text",
    "tool_names",
    "truncate",
]

#: Blocks of reasoning a provider needs back as they were (never changed).
REASONING_BLOCKS: Final = frozenset(("thinking", "redacted_thinking", "reasoning"))
#: Anthropic's reasoning blocks: an assistant message holding one starts with it.
THINKING_BLOCKS: Final = frozenset(("thinking", "redacted_thinking"))
#: Blocks of data a truncated message gives up (an image can be thousands of tokens).
DATA_BLOCKS: Final = frozenset(
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
TEXT: Final = "text"
RESULT: Final = "result"
DATA: Final = "data"
KEEP: Final = "keep"
_MISSING: Final = object()


@dataclass
class Piece:
    """One piece of a message's content, and what compaction made of it."""

    kind: str
    #: The block as read (None for a string content, or a tool message's whole content).
    block: Any
    #: Its text as read (text and result pieces; "" for the others).
    original: str
    #: The call a result answers ("" when unknown).
    tool_id: str = ""
    #: Its text now, and how it was changed: "", "cleared" or "truncated".
    text: str = ""
    change: str = ""
    #: Shortened as far as it goes (or a note already).
    at_floor: bool = False

    def __post_init__(self) -> None:
        self.text = self.original

    @property
    def editable(self) -> bool:
        return self.kind in (TEXT, RESULT)

    def restore(self) -> None:
        self.text, self.change, self.at_floor = self.original, "", False


def pieces(message: BaseMessage, *, result: bool) -> list[Piece]:
    """The pieces of ``message``; ``result``: it is a tool's (or function's)
    result message, whose whole content is one result."""
    content = message.content
    if result:
        tool_id = str(attribute(message, "tool_call_id") or "")
        return [Piece(RESULT, None, result_text(content), tool_id)]
    if isinstance(content, str):
        return [Piece(TEXT, None, content)]
    return [_piece(block) for block in content]


def _piece(block: object) -> Piece:
    if isinstance(block, str):
        return Piece(TEXT, block, block)
    if not isinstance(block, dict):
        return Piece(KEEP, block, "")
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return Piece(TEXT, block, block["text"])
    if kind == "tool_result":
        return Piece(
            RESULT, block, result_text(block.get("content")), str(block.get("tool_use_id", ""))
        )
    if kind in DATA_BLOCKS:
        return Piece(DATA, block, "")
    return Piece(KEEP, block, "")


def result_text(content: object) -> str:
    """The text of a tool's output: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") if isinstance(b, dict) else str(b)
            for b in content
            if isinstance(b, (dict, str))
        )
    return ""


def rebuild(message: BaseMessage, parts: Sequence[Piece], *, drop_data: bool) -> BaseMessage:
    """``message`` with the pieces as they are now: a new object (or
    ``message`` itself when nothing changed). ``drop_data``: the data pieces
    go, and a note says how many."""
    dropped = sum(1 for p in parts if p.kind == DATA) if drop_data else 0
    if not dropped and not any(p.change for p in parts):
        return message
    content = message.content
    if len(parts) == 1 and parts[0].block is None:  # a string content, or a tool's whole output
        text = parts[0].text
        lost = _data_blocks(content)
        if lost:  # a tool's output of blocks, now its text alone
            text += f"\n[{lost} non-text part(s) removed to fit the context]"
        return message.model_copy(update={"content": text})
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
        blocks.append(
            {"type": "text", "text": f"[{dropped} non-text part(s) removed to fit the context]"}
        )
    assert isinstance(content, list)  # noqa: S101 - a string content has one piece
    return message.model_copy(update={"content": blocks})


def _data_blocks(content: object) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") in DATA_BLOCKS)


def tool_names(messages: Iterable[BaseMessage]) -> dict[str, str]:
    """Tool call id -> tool name: from the calls of assistant messages (their
    ``tool_calls`` and ``tool_use`` blocks) and the names results carry."""
    names: dict[str, str] = {}
    for message in messages:
        for call in attribute(message, "tool_calls") or ():
            if isinstance(call, dict) and call.get("id") and call.get("name"):
                names[str(call["id"])] = str(call["name"])
        content = message.content
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "tool_use":
                    continue
                if block.get("id") and block.get("name"):
                    names[str(block["id"])] = str(block["name"])
        tool_id = attribute(message, "tool_call_id")
        name = attribute(message, "name")
        if tool_id and isinstance(name, str) and name and str(tool_id) not in names:
            names[str(tool_id)] = name
    return names


def attribute(message: BaseMessage, name: str) -> Any:
    """``getattr(message, name, None)``, without pydantic's costly miss (an
    exception raised and caught) when the message's class has no such field:
    its fields, then its class's attributes, then its extra fields."""
    value = vars(message).get(name, _MISSING)
    if value is not _MISSING:
        return value
    if hasattr(type(message), name):
        return getattr(message, name, None)
    extra = message.__pydantic_extra__
    return extra.get(name) if extra else None


def truncate(text: str, keep: int) -> str:
    """``text`` truncated to at most ``keep`` characters around a note: about
    two thirds head, one third tail (the note's wording is what the model
    reads). Both cuts fall on grapheme cluster boundaries (``_graphemes``):
    a flag, an emoji sequence or a letter with its marks is kept or cut whole."""
    if keep >= len(text):
        return text
    head = cut_end(text, keep - keep // 3)
    tail = cut_start(text, len(text) - keep // 3)
    removed = tail - head
    note = f"\n[... {removed:,} characters cut to fit the context ...]\n"
    return text[:head] + note + text[tail:]
