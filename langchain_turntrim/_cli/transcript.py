"""Transcripts: reading a JSON array, an object with ``"messages"`` or JSONL, and
writing kept messages back in the same shape."""

from __future__ import annotations

import errno
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import BaseMessage, convert_to_messages
from pydantic import ValidationError

from langchain_turntrim._cli.diagnostics import json_type
from langchain_turntrim._cli.diagnostics import problem as diagnosed

__all__ = [
    "InputError",
    "Shape",
    "Transcript",
    "dump",
    "parse",
    "read_transcript",
    "to_messages",
    "where",
    "write",
]

Shape = Literal["array", "object", "jsonl"]


class InputError(ValueError):
    """The transcript or an option is wrong; the message says where and how."""


@dataclass(frozen=True)
class Transcript:
    """Messages as read, and what is needed to write a subset back in the same shape."""

    source: str
    shape: Shape
    messages: list[Any]
    envelope: dict[str, Any] | None = None
    lines: list[int] | None = None  # JSONL: the line of each message


def read_transcript(path: str) -> Transcript:
    source = "<stdin>" if path == "-" else path
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
        return Transcript(source, "array", data)
    if isinstance(data, dict):
        return _from_object(data, source)
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


def _from_object(data: dict[str, Any], source: str) -> Transcript:
    if "messages" not in data:
        if "role" in data or "type" in data:  # JSONL holding a single message
            return Transcript(source, "jsonl", [data], lines=[1])
        keys = ", ".join(repr(key) for key in list(data)[:5]) or "none"
        msg = f"{source}: a JSON object needs a 'messages' array (its keys: {keys})"
        raise InputError(msg)
    messages = data["messages"]
    if not isinstance(messages, list):
        msg = f"{source}: 'messages' must be an array, got a {json_type(messages)}"
        raise InputError(msg)
    return Transcript(source, "object", messages, envelope=data)


def _parse_jsonl(text: str, source: str) -> Transcript:
    messages: list[Any] = []
    lines: list[int] = []
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
    return Transcript(source, "jsonl", messages, lines=lines)


def _too_deep(where: str) -> InputError:
    msg = f"{where}: JSON nested too deeply to read"
    return InputError(msg)


def _json_error(source: str, reason: str, line: int, column: int) -> InputError:
    msg = f"{source}: invalid JSON at line {line}, column {column}: {reason}"
    return InputError(msg)


def to_messages(transcript: Transcript) -> list[BaseMessage]:
    """Convert each message dict with LangChain, naming the first one that is wrong."""
    messages: list[BaseMessage] = []
    append = messages.append
    for index, item in enumerate(transcript.messages):
        if type(item) is not dict:
            msg = f"{where(transcript, index)} must be a JSON object, got a {json_type(item)}"
            raise InputError(msg)
        message = _with_content(item)
        try:
            append(convert_to_messages([message])[0])
        except (TypeError, ValueError, KeyError, AttributeError, NotImplementedError) as error:
            problem = diagnosed(message) or _first_line(error)
            msg = f"{where(transcript, index)}: {problem}"
            raise InputError(msg) from error
    return messages


def _with_content(message: dict[str, Any]) -> dict[str, Any]:
    """OpenAI may omit ``content`` beside tool calls; LangChain requires the key."""
    if "content" in message or not (message.get("tool_calls") or message.get("function_call")):
        return message
    return {**message, "content": None}


def where(transcript: Transcript, index: int) -> str:
    """``messages[3] (id 'm3', line 4)``."""
    item = transcript.messages[index]
    details = []
    if isinstance(item, dict) and isinstance(item.get("id"), (str, int)):
        details.append(f"id {item['id']!r}")
    if transcript.lines is not None:
        details.append(f"line {transcript.lines[index]}")
    return f"messages[{index}]" + (f" ({', '.join(details)})" if details else "")


def _first_line(error: BaseException) -> str:
    """LangChain's reason, in one line (pydantic's: the field and the reason)."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return f"{field!r}: {first['msg']}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def dump(transcript: Transcript, kept: list[Any]) -> str:
    """The kept messages in the input's shape."""
    if transcript.shape == "jsonl":
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in kept)
    if transcript.shape == "object" and transcript.envelope is not None:
        envelope = transcript.envelope
        document: Any = {key: kept if key == "messages" else envelope[key] for key in envelope}
    else:
        document = kept
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


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
