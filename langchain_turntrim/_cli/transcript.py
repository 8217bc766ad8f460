"""Transcripts: reading a JSON array, an object with ``"messages"`` or JSONL, and
writing kept messages back in the same shape, each one the very text it was read as."""

from __future__ import annotations

import errno
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_turntrim._cli.diagnostics import json_type

__all__ = [
    "InputError",
    "Shape",
    "Transcript",
    "dump",
    "parse",
    "read_transcript",
    "where",
    "write",
]

Shape = Literal["array", "object", "jsonl"]


class InputError(ValueError):
    """The transcript or an option is wrong; the message says where and how."""


@dataclass(frozen=True)
class Transcript:
    """Messages as read, and what is needed to write a subset back in the same shape.

    ``parts`` holds each message's text as read, with the whitespace before
    and after it (between the separators); ``head`` and ``tail`` are the
    document around them (up to and including the messages array's ``[``,
    and from its ``]`` on). Writing every part back gives the input again.
    """

    source: str
    shape: Shape
    messages: list[Any]
    envelope: dict[str, Any] | None = None
    lines: list[int] | None = None  # JSONL: the line of each message
    parts: list[tuple[str, str, str]] = field(default_factory=list)
    head: str = ""
    tail: str = ""


def read_transcript(path: str) -> Transcript:
    source = "<stdin>" if path == "-" else path
    if path == "-" and sys.stdin is None:
        msg = "cannot read <stdin>: stdin is closed"
        raise InputError(msg)
    try:
        data = _read_stdin() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        msg = f"cannot read {source}: {error.strerror or error}"
        raise InputError(msg) from error
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        msg = f"{source} is not UTF-8 text (byte {error.start}: {error.reason})"
        raise InputError(msg) from error
    return parse(text, source)


def _read_stdin() -> bytes:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        data: bytes = buffer.read()
        return data
    return sys.stdin.read().encode("utf-8")


def parse(text: str, source: str) -> Transcript:
    """A JSON array, an object with a ``"messages"`` array, or JSONL."""
    if not text.strip():
        msg = f"{source} is empty; expected a JSON array of messages, an object or JSONL"
        raise InputError(msg)
    try:
        data = json.loads(text)
    except RecursionError as error:
        raise _too_deep(source) from error
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and _is_json_object(text.lstrip().split("\n", 1)[0]):
            return _parse_jsonl(text, source)
        raise _json_error(source, error.msg, error.lineno, error.colno) from error
    if isinstance(data, list):
        start = _skip(text, 0)
        messages, parts, end = _scan_array(text, start)
        return Transcript(
            source, "array", messages, parts=parts, head=text[: start + 1], tail=text[end:]
        )
    if isinstance(data, dict):
        return _from_object(data, text, source)
    msg = (
        f"{source}: expected a JSON array of messages, an object with a 'messages' array "
        f"or JSONL, got a {json_type(data)}"
    )
    raise InputError(msg)


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def _from_object(data: dict[str, Any], text: str, source: str) -> Transcript:
    if "messages" not in data:
        if "role" in data or "type" in data:  # JSONL holding a single message
            return Transcript(source, "jsonl", [data], lines=[1], parts=[("", text.strip(), "")])
        keys = ", ".join(repr(key) for key in list(data)[:5]) or "none"
        msg = f"{source}: a JSON object needs a 'messages' array (its keys: {keys})"
        raise InputError(msg)
    messages = data["messages"]
    if not isinstance(messages, list):
        msg = f"{source}: 'messages' must be an array, got a {json_type(messages)}"
        raise InputError(msg)
    tools = data.get("tools")
    if tools is not None and not isinstance(tools, list):
        msg = f"{source}: 'tools' must be an array, got a {json_type(tools)}"
        raise InputError(msg)
    start = _messages_value(text)
    messages, parts, end = _scan_array(text, start)
    return Transcript(
        source,
        "object",
        messages,
        envelope=data,
        parts=parts,
        head=text[: start + 1],
        tail=text[end:],
    )


def _parse_jsonl(text: str, source: str) -> Transcript:
    messages: list[Any] = []
    lines: list[int] = []
    parts: list[tuple[str, str, str]] = []
    decode = json.loads
    # Not splitlines(): JSON strings may hold U+2028 and friends unescaped.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            messages.append(decode(line))
        except RecursionError as error:
            place = f"{source} line {number}"
            raise _too_deep(place) from error
        except json.JSONDecodeError as error:
            raise _json_error(source, error.msg, number, error.colno) from error
        lines.append(number)
        parts.append(("", line, ""))
    return Transcript(source, "jsonl", messages, lines=lines, parts=parts)


# The document is valid JSON (json.loads read it) when these scan it again for
# where each message's text starts and ends.
_decoder = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, index: int) -> int:
    """The index of the first non-whitespace character from ``index``."""
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def _scan_array(text: str, start: int) -> tuple[list[Any], list[tuple[str, str, str]], int]:
    """The values of the array at ``text[start]`` (a ``[``), each one's
    (whitespace before, text, whitespace after), and the index of its ``]``."""
    values: list[Any] = []
    parts: list[tuple[str, str, str]] = []
    after_separator = start + 1
    index = _skip(text, after_separator)
    if text[index] == "]":
        return values, parts, index
    while True:
        value, end = _decoder.raw_decode(text, index)
        separator = _skip(text, end)
        values.append(value)
        parts.append((text[after_separator:index], text[index:end], text[end:separator]))
        if text[separator] == "]":
            return values, parts, separator
        after_separator = separator + 1
        index = _skip(text, after_separator)


def _messages_value(text: str) -> int:
    """Where the value of the top-level object's last ``"messages"`` member starts
    (the one ``json.loads`` keeps)."""
    span = _member_value(text, _skip(text, 0), "messages")
    if span is None:
        msg = "the document has no 'messages' member"
        raise InputError(msg)
    return span[0]


def _member_value(text: str, start: int, name: str) -> tuple[int, int] | None:
    """The span of the value of the last member ``name`` of the object at
    ``text[start]`` (a ``{``), or None when it has no such member."""
    index = _skip(text, start + 1)
    found = None
    while text[index] != "}":
        key, end = _decoder.raw_decode(text, index)
        value_start = _skip(text, _skip(text, end) + 1)  # past the ':'
        _, value_end = _decoder.raw_decode(text, value_start)
        if key == name:
            found = (value_start, value_end)
        index = _skip(text, value_end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return found


def _too_deep(where: str) -> InputError:
    msg = f"{where}: JSON nested too deeply to read"
    return InputError(msg)


def _json_error(source: str, reason: str, line: int, column: int) -> InputError:
    msg = f"{source}: invalid JSON at line {line}, column {column}: {reason}"
    return InputError(msg)


def where(transcript: Transcript, index: int) -> str:
    """``messages[3] (id 'm3', line 4)``."""
    item = transcript.messages[index]
    details = []
    if isinstance(item, dict) and isinstance(item.get("id"), (str, int)):
        details.append(f"id {item['id']!r}")
    if transcript.lines is not None:
        details.append(f"line {transcript.lines[index]}")
    return f"messages[{index}]" + (f" ({', '.join(details)})" if details else "")


def dump(
    transcript: Transcript, kept: Sequence[int], contents: Mapping[int, Any] | None = None
) -> str:
    """The messages at the ``kept`` indices in the input's shape, each the text it
    was read as (numbers, escapes, duplicate keys and all), ending in a newline.

    A JSON document keeps everything around its messages as it was; JSONL
    keeps one message per line. ``contents`` maps an index to a new
    ``content`` (compaction): only that member's value is rewritten.
    """
    contents = contents or {}
    parts = transcript.parts
    texts = [_replace_content(parts[i], contents[i]) if i in contents else parts[i] for i in kept]
    if transcript.shape == "jsonl":
        return "".join(text + "\n" for _, text, _ in texts)
    inside = ",".join("".join(part) for part in texts)
    document = transcript.head + inside + transcript.tail
    return document if document.endswith("\n") else document + "\n"


def _replace_content(part: tuple[str, str, str], content: Any) -> tuple[str, str, str]:
    """A message's text with its ``content`` member's value replaced (added if absent)."""
    before, text, after = part
    value = json.dumps(content, ensure_ascii=False)
    span = _member_value(text, 0, "content")
    if span is None:  # OpenAI may omit content beside tool calls
        close = text.rindex("}")
        separator = ", " if text[1:close].strip() else ""
        text = f'{text[:close].rstrip()}{separator}"content": {value}{text[close:]}'
    else:
        start, end = span
        text = text[:start] + value + text[end:]
    return before, text, after


def write(text: str) -> None:
    """UTF-8 to stdout whatever the locale: JSON is UTF-8 (RFC 8259)."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    data = memoryview(text.encode("utf-8"))
    try:
        while data:  # a pipe may take part of it, then fail on the rest: never lose the error
            written = buffer.write(data)
            if not written:
                raise OSError(errno.EIO, "nothing written")  # noqa: TRY301 - worded below
            data = data[written:]
        buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        msg = f"cannot write to stdout: {error.strerror or error}"
        raise OSError(msg) from error
