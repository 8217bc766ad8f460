"""The conversations a file holds (see ``EXPECTED``; or JSONL), written back with
only their kept messages, each the very text it was read as: the messages of a
conversation fill a region of the text (the inside of its array, or the JSONL
lines), and writing it back replaces that region alone."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

__all__ = ["MAX_INPUT_BYTES", "Conversation", "Document", "InputError", "neutral", "read_document"]

MAX_INPUT_BYTES: Final = 256 * 1024 * 1024
MEMBERS: Final = ("messages", "traj")
EXPECTED: Final = (
    "expected a list of messages, an object with 'messages' or 'traj', or a list of them"
)
#: Never written raw: controls (they start terminal escape sequences), lone
#: surrogates (they cannot be encoded) and bidirectional overrides.
UNSAFE: Final = re.compile(
    "[\0-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_SPACE: Final = re.compile(r"[ \t\n\r]*")
_decoder: Final = json.JSONDecoder()


class InputError(ValueError):
    """The input or an option is wrong; the message says where and how."""


def neutral(text: str) -> str:
    """``text`` with ``UNSAFE`` characters as escapes (``\\x1b``, ``\\u202e``): a
    transcript must not drive the terminal that shows it."""
    return UNSAFE.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if m[0] <= "\xff" else f"\\u{ord(m[0]):04x}", text
    )


def a_json_type(value: object) -> str:
    """How an error names a value it did not expect."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), "a number")


@dataclass(frozen=True)
class Conversation:
    """Messages as read: their texts (``bounds``, with the whitespace around each),
    joined by ``sep``, are the text of ``region``; ``span`` is the conversation's."""

    place: str
    items: list[Any]
    bounds: list[tuple[int, int]]
    region: tuple[int, int]
    span: tuple[int, int]
    sep: str = ","
    tools: Any = ()
    lines: list[int] | None = None  # JSONL: each message's line

    def where(self, index: int | None) -> str:
        """The place of message ``index``, with its JSONL line."""
        if index is None or self.lines is None or not 0 <= index < len(self.lines):
            return self.place
        return f"{self.place} line {self.lines[index]}"


@dataclass(frozen=True)
class Document:
    """The conversations in ``text[span[0]:span[1]]`` (None: all of it)."""

    source: str
    text: str
    conversations: list[Conversation]
    span: tuple[int, int] | None = None

    def select(self, index: int | None) -> Document:
        """Only conversation ``index``, in its own shape (None: all of them)."""
        count = len(self.conversations)
        if index is not None and index >= count:
            held = (
                f"{count} conversations (0 to {count - 1})" if count > 1 else "1 conversation (0)"
            )
            msg = f"--conversation {index}: {self.source} holds {held}"
            raise InputError(msg)
        if index is None or count == 1:
            return self
        chosen = self.conversations[index]
        return Document(self.source, self.text, [chosen], chosen.span)

    def render(self, decisions: Sequence[tuple[Sequence[int], Mapping[int, Any]]]) -> str:
        """The text with only the kept messages, each with its new content if any."""
        (at, end), out = self.span or (0, len(self.text)), []
        for conversation, (kept, contents) in zip(self.conversations, decisions, strict=True):
            texts = {i: self.text[slice(*conversation.bounds[i])] for i in kept}
            texts.update({i: _with_content(texts[i], new) for i, new in contents.items()})
            out += [self.text[at : conversation.region[0]], conversation.sep.join(texts.values())]
            at = conversation.region[1]
        text = "".join(out) + self.text[at:end]
        return text if text.endswith("\n") else text + "\n"


def read_document(path: str, max_bytes: int) -> Document:
    """The conversations in ``path`` (``-``: stdin), reading at most ``max_bytes``."""
    source = "<stdin>" if path == "-" else path
    if max_bytes < 1:
        msg = f"--max-input-bytes must be >= 1, got {max_bytes}"
        raise InputError(msg)
    if path == "-" and sys.stdin is None:
        msg = "cannot read <stdin>: stdin is closed"
        raise InputError(msg)
    try:
        with nullcontext(sys.stdin.buffer) if path == "-" else Path(path).open("rb") as file:
            data = _bounded(file, max_bytes)
    except OSError as error:
        msg = f"cannot read {source}: {error.strerror or error}"
        raise InputError(msg) from error
    if data is None:
        msg = f"{source} is larger than {max_bytes:,} bytes (--max-input-bytes N reads more)"
        raise InputError(msg)
    try:
        return parse(data.decode("utf-8-sig"), source)
    except UnicodeDecodeError as error:
        msg = f"{source} is not UTF-8 text (byte {error.start}: {error.reason})"
        raise InputError(msg) from error
    except RecursionError as error:
        msg = f"{source}: JSON nested too deeply to read"
        raise InputError(msg) from error


def _bounded(stream: BinaryIO, max_bytes: int) -> bytes | None:
    """All of ``stream``, or None past ``max_bytes`` (``/dev/zero`` never ends)."""
    chunks, total = [], 0
    while chunk := stream.read(min(1 << 20, max_bytes + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            return None
    return b"".join(chunks)


def parse(text: str, source: str) -> Document:
    """One conversation, or several (a JSON array or JSONL of conversations)."""
    whole, start, lines = (0, len(text)), _skip(text, 0), None
    try:
        data = json.loads(text)
        jsonl = isinstance(data, dict) and "role" in data and "\n" not in text.strip()  # one line
    except json.JSONDecodeError as error:
        if error.msg != "Extra data" or "\n" in text[start : error.pos].rstrip():
            where = f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
            msg = f"{source} is empty; {EXPECTED}" if start == len(text) else f"{source}: {where}"
            raise InputError(msg) from error
        jsonl = True
    if jsonl:
        data, bounds, lines = _jsonl(text, source)
        region, sep = whole, "\n"
    elif isinstance(data, list):
        data, bounds, close = _scan(text, start)
        region, sep = (start + 1, close), ","
    else:
        return Document(source, text, [_read(data, whole, source, text)])
    found = [Conversation(source, data, bounds, region, whole, sep, lines=lines)]
    if data and _is_conversation(data[0]):
        at = [f" (line {n})" for n in lines] if lines else [""] * len(data)
        names = [f"{source} conversation {i}{line}" for i, line in enumerate(at)]
        found = [_read(*each, text) for each in zip(data, bounds, names, strict=True)]
    return Document(source, text, found)


def _is_conversation(value: object) -> bool:
    """A list of messages, or an object holding one that is not a message itself."""
    if isinstance(value, dict):
        return "role" not in value and any(m in value for m in MEMBERS)
    return isinstance(value, list)


def _read(value: object, around: tuple[int, int], place: str, text: str) -> Conversation:
    """The conversation ``value``, read from ``text[begin:end]``."""
    begin, end = around
    member = next((m for m in MEMBERS if m in value), None) if isinstance(value, dict) else None
    if isinstance(value, dict) and member is not None and not isinstance(value[member], list):
        found = f"{member!r} must be an array, got {a_json_type(value[member])}"
    elif isinstance(value, dict) and member is None:
        found = f"{EXPECTED}; got an object with keys {', '.join(map(repr, value)) or '(none)'}"
    elif not isinstance(value, (list, dict)):
        found = f"{EXPECTED}; got {a_json_type(value)}"
    else:
        start = _skip(text, begin)
        opens = (_member(text, start, member) or (start, 0))[0] if member else start
        items, bounds, close = _scan(text, opens)
        tools = value.get("tools") if isinstance(value, dict) else None
        span = (start, begin + len(text[begin:end].rstrip()))
        return Conversation(place, items, bounds, (opens + 1, close), span, tools=tools or ())
    msg = f"{place}: {found}"
    raise InputError(msg)


def _jsonl(text: str, source: str) -> tuple[list[Any], list[tuple[int, int]], list[int]]:
    """The value, bounds and number of each line that is not blank."""
    values, bounds, lines, at = [], [], [], 0
    for number, line in enumerate(text.split("\n"), 1):  # JSON may hold U+2028 unescaped
        begin, at = at, at + len(line) + 1
        if line.strip():
            try:
                values.append(json.loads(line))
            except json.JSONDecodeError as error:
                msg = f"{source}: invalid JSON at line {number}, column {error.colno}: {error.msg}"
                raise InputError(msg) from error
            bounds.append((begin, begin + len(line)))
            lines.append(number)
    return values, bounds, lines


def _skip(text: str, index: int) -> int:
    """The index of the first non-whitespace character from ``index``."""
    match = _SPACE.match(text, index)
    return match.end() if match else index


def _scan(text: str, opens: int) -> tuple[list[Any], list[tuple[int, int]], int]:
    """The values of the valid JSON array at ``text[opens]``, the bounds of each
    one's text between its separators, and the index of the array's ``]``."""
    values: list[Any] = []
    bounds: list[tuple[int, int]] = []
    begin = opens + 1
    index = _skip(text, begin)
    while text[index] != "]":
        value, end = _decoder.raw_decode(text, index)
        separator = _skip(text, end)
        values.append(value)
        bounds.append((begin, separator))
        begin = separator + 1
        index = _skip(text, begin) if text[separator] == "," else separator
    return values, bounds, index


def _member(text: str, start: int, name: str) -> tuple[int, int] | None:
    """The span of the value of the valid JSON object's last member ``name``
    (the one ``json`` keeps), if it has one."""
    index, found = _skip(text, start + 1), None
    while text[index] != "}":
        key, end = _decoder.raw_decode(text, index)
        value_start = _skip(text, _skip(text, end) + 1)  # past the ':'
        value_end = _decoder.raw_decode(text, value_start)[1]
        found = (value_start, value_end) if key == name else found
        index = _skip(text, value_end)
        index = _skip(text, index + 1) if text[index] == "," else index
    return found


def _with_content(chunk: str, content: Any) -> str:
    """A message's text with its ``content`` value replaced (added if absent),
    unsafe characters escaped as a transcript holds them."""
    value = UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", json.dumps(content, ensure_ascii=False))
    start = _skip(chunk, 0)
    span = _member(chunk, start, "content")
    if span is not None:
        return chunk[: span[0]] + value + chunk[span[1] :]
    close = chunk.rindex("}")  # OpenAI may leave content out beside tool calls
    separator = ", " if chunk[start + 1 : close].strip() else ""
    return f'{chunk[:close].rstrip()}{separator}"content": {value}{chunk[close:]}'
