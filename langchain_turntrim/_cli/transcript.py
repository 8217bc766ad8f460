"""Transcripts: reading the conversations a file holds, and writing kept messages
back in the same shape, each one the very text it was read as.

A file holds one conversation (a JSON array of messages, an object with a
``"messages"`` or ``"traj"`` array, or JSONL of messages) or several (a JSON
array or JSONL of conversations, each a list of messages or such an object).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from langchain_turntrim._cli.diagnostics import a_json_type, json_type
from langchain_turntrim._cli.jsontext import member_value, scan_array, skip
from langchain_turntrim._cli.streams import MAX_INPUT_BYTES, read_file, read_stdin
from langchain_turntrim._cli.terminal import json_escaped

__all__ = [
    "MESSAGE_MEMBERS",
    "Decision",
    "Document",
    "InputError",
    "Shape",
    "Transcript",
    "dump",
    "parse",
    "read_document",
    "render",
    "where",
]

Shape = Literal["array", "object", "jsonl"]
#: What is kept of a conversation: the indices of its kept messages, and the new
#: ``content`` of those compaction changed.
Decision = tuple[Sequence[int], Mapping[int, Any]]
#: The members of a conversation object that may hold its messages, in the order looked for
#: (``"traj"``: a tau-bench trajectory).
MESSAGE_MEMBERS: Final = ("messages", "traj")
_EXPECTED: Final = (
    "expected a list of messages, a conversation object with 'messages' or 'traj', "
    "or a list of conversations"
)


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
    #: In a file of several conversations, which one: ``conversation 3`` (JSONL: ``(line 4)``).
    name: str = ""

    @property
    def title(self) -> str:
        """The file, and which of its conversations this is."""
        return _at(self.source, self.name)


@dataclass(frozen=True)
class Document:
    """The conversations a file holds: one (``shape`` ``"single"``) or several,
    as a JSON array (``"array"``) or JSONL (``"jsonl"``) of them.

    For an array, ``parts``, ``head`` and ``tail`` are each conversation's text
    and the document around them, as ``Transcript`` has them for messages; each
    conversation's own ``parts``, ``head`` and ``tail`` are within its text.
    """

    source: str
    conversations: list[Transcript]
    shape: Literal["single", "array", "jsonl"] = "single"
    parts: list[tuple[str, str, str]] = field(default_factory=list)
    head: str = ""
    tail: str = ""

    def select(self, index: int | None) -> Document:
        """Only conversation ``index`` (all of them for None), or an ``InputError``
        saying how many there are."""
        if index is None:
            return self
        count = len(self.conversations)
        if not 0 <= index < count:
            held = (
                f"{count} conversations (0 to {count - 1})" if count > 1 else "1 conversation (0)"
            )
            msg = f"--conversation {index}: {self.source} holds {held}"
            raise InputError(msg)
        if self.shape == "single":
            return self
        return Document(self.source, [self.conversations[index]])


def read_document(path: str, max_bytes: int = MAX_INPUT_BYTES) -> Document:
    """The conversations in the file ``path`` ("-": stdin), of at most ``max_bytes`` bytes."""
    source = "<stdin>" if path == "-" else path
    if max_bytes < 1:
        msg = f"--max-input-bytes must be >= 1, got {max_bytes}"
        raise InputError(msg)
    if path == "-" and sys.stdin is None:
        msg = "cannot read <stdin>: stdin is closed"
        raise InputError(msg)
    try:
        data = read_stdin(max_bytes) if path == "-" else read_file(path, max_bytes)
    except OSError as error:
        msg = f"cannot read {source}: {error.strerror or error}"
        raise InputError(msg) from error
    if data is None:
        msg = (
            f"{source} is larger than {max_bytes:,} bytes, the most turntrim reads "
            "(--max-input-bytes N reads more)"
        )
        raise InputError(msg)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        msg = f"{source} is not UTF-8 text (byte {error.start}: {error.reason})"
        raise InputError(msg) from error
    return parse(text, source)


def parse(text: str, source: str) -> Document:
    """One conversation or several: see the module's docstring."""
    if not text.strip():
        msg = f"{source} is empty; {_EXPECTED} (JSON or JSONL)"
        raise InputError(msg)
    try:
        data = json.loads(text)
    except RecursionError as error:
        raise _too_deep(source) from error
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and _is_json_container(text.lstrip().split("\n", 1)[0]):
            return _parse_jsonl(text, source)
        raise _json_error(source, error.msg, error.lineno, error.colno) from error
    if isinstance(data, dict):
        return Document(source, [_from_object(data, text, source)])
    if not isinstance(data, list):
        raise _unknown_shape(source, f"a JSON {json_type(data)}")
    start = skip(text, 0)
    values, parts, end = scan_array(text, start)
    head, tail = text[: start + 1], text[end:]
    if values and _is_conversation(values[0]):
        conversations = [
            _conversation(value, item, source, f"conversation {i}")
            for i, (value, (_, item, _)) in enumerate(zip(values, parts, strict=True))
        ]
        return Document(source, conversations, "array", parts, head, tail)
    if values and not isinstance(values[0], dict):
        raise _unknown_shape(source, _described_array(values))
    return Document(
        source, [Transcript(source, "array", values, parts=parts, head=head, tail=tail)]
    )


def _is_json_container(line: str) -> bool:
    try:
        return isinstance(json.loads(line), (dict, list))
    except (json.JSONDecodeError, RecursionError):
        return False


def _is_conversation(value: object) -> bool:
    """A list (of messages), or an object holding one that is not a message itself."""
    if isinstance(value, list):
        return True
    return (
        isinstance(value, dict)
        and "role" not in value
        and any(member in value for member in MESSAGE_MEMBERS)
    )


def _conversation(value: object, text: str, source: str, name: str) -> Transcript:
    """One of several conversations: ``value``, read from ``text``."""
    if isinstance(value, dict) and _is_conversation(value):
        return _from_object(value, text, source, name)
    if not isinstance(value, list):
        found = _described_object(value) if isinstance(value, dict) else a_json_type(value)
        msg = (
            f"{_at(source, name)}: expected a list of messages or an object with "
            f"'messages' or 'traj', got {found}"
        )
        raise InputError(msg)
    start = skip(text, 0)
    messages, parts, end = scan_array(text, start)
    return Transcript(
        source, "array", messages, parts=parts, head=text[: start + 1], tail=text[end:], name=name
    )


def _unknown_shape(source: str, found: str) -> InputError:
    return InputError(f"{source}: {_EXPECTED}; got {found}")


def _described_array(values: list[Any]) -> str:
    """``a JSON array of numbers``, or ``... starting with a number`` when mixed."""
    kinds = {json_type(value) for value in values}
    if len(kinds) == 1:
        return f"a JSON array of {kinds.pop()}s"
    return f"a JSON array starting with {a_json_type(values[0])}"


def _described_object(data: dict[str, Any]) -> str:
    keys = ", ".join(repr(key) for key in list(data)[:5])
    more = ", ..." if len(data) > 5 else ""  # noqa: PLR2004 - the keys shown
    return f"a JSON object with keys {keys}{more}" if keys else "an empty JSON object"


def _at(source: str, name: str) -> str:
    return f"{source} {name}" if name else source


def _from_object(data: dict[str, Any], text: str, source: str, name: str = "") -> Transcript:
    """A conversation object (``name``: which of several, if it is one of several)."""
    place = _at(source, name)
    member = next((m for m in MESSAGE_MEMBERS if m in data), None)
    if member is None:
        if not name and ("role" in data or "type" in data):  # JSONL holding a single message
            return Transcript(source, "jsonl", [data], lines=[1], parts=[("", text.strip(), "")])
        raise _unknown_shape(place, _described_object(data))
    messages = data[member]
    if not isinstance(messages, list):
        msg = f"{place}: '{member}' must be an array, got {a_json_type(messages)}"
        raise InputError(msg)
    tools = data.get("tools")
    if tools is not None and not isinstance(tools, list):
        msg = f"{place}: 'tools' must be an array, got {a_json_type(tools)}"
        raise InputError(msg)
    for i, tool in enumerate(tools or ()):
        if not isinstance(tool, dict):
            msg = (
                f"{place}: 'tools[{i}]' must be an object (a tool schema), got {a_json_type(tool)}"
            )
            raise InputError(msg)
    start = _messages_value(text, member)
    messages, parts, end = scan_array(text, start)
    return Transcript(
        source,
        "object",
        messages,
        envelope=data,
        parts=parts,
        head=text[: start + 1],
        tail=text[end:],
        name=name,
    )


def _parse_jsonl(text: str, source: str) -> Document:
    """JSONL of messages (one conversation) or of conversations, as its first line is."""
    values: list[Any] = []
    lines: list[int] = []
    parts: list[tuple[str, str, str]] = []
    decode = json.loads
    # Not splitlines(): JSON strings may hold U+2028 and friends unescaped.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            values.append(decode(line))
        except RecursionError as error:
            place = f"{source} line {number}"
            raise _too_deep(place) from error
        except json.JSONDecodeError as error:
            raise _json_error(source, error.msg, number, error.colno) from error
        lines.append(number)
        parts.append(("", line, ""))
    if _is_conversation(values[0]):
        conversations = [
            _conversation(value, part[1], source, f"conversation {i} (line {number})")
            for i, (value, part, number) in enumerate(zip(values, parts, lines, strict=True))
        ]
        return Document(source, conversations, "jsonl", parts)
    return Document(source, [Transcript(source, "jsonl", values, lines=lines, parts=parts)])


def _messages_value(text: str, member: str) -> int:
    """Where the value of the object's last ``member`` starts (the one ``json.loads`` keeps)."""
    span = member_value(text, skip(text, 0), member)
    if span is None:
        msg = f"the document has no {member!r} member"
        raise InputError(msg)
    return span[0]


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


def dump(document: Document, decisions: Sequence[Decision]) -> str:
    """Each conversation of ``document`` with only its kept messages (one
    ``(kept indices, new contents)`` decision each, see ``render``), in the
    document's shape, ending in a newline."""
    texts = [
        render(transcript, kept, contents)
        for transcript, (kept, contents) in zip(document.conversations, decisions, strict=True)
    ]
    if document.shape == "jsonl":
        return "".join(text + "\n" for text in texts)
    if document.shape == "single":
        text = texts[0]
    else:
        inside = (
            before + text + after
            for (before, _, after), text in zip(document.parts, texts, strict=True)
        )
        text = document.head + ",".join(inside) + document.tail
    return text if text.endswith("\n") else text + "\n"


def render(
    transcript: Transcript, kept: Sequence[int], contents: Mapping[int, Any] | None = None
) -> str:
    """The messages at the ``kept`` indices in the transcript's shape, each the text
    it was read as (numbers, escapes, duplicate keys and all).

    A JSON document keeps everything around its messages as it was; JSONL
    keeps one message per line. ``contents`` maps an index to a new
    ``content`` (compaction): only that member's value is rewritten.
    """
    contents = contents or {}
    parts = transcript.parts
    texts = [_replace_content(parts[i], contents[i]) if i in contents else parts[i] for i in kept]
    if transcript.shape == "jsonl":
        return "".join(text + "\n" for _, text, _ in texts)
    return transcript.head + ",".join("".join(part) for part in texts) + transcript.tail


def _replace_content(part: tuple[str, str, str], content: Any) -> tuple[str, str, str]:
    """A message's text with its ``content`` member's value replaced (added if absent)."""
    before, text, after = part
    # Non-ASCII as UTF-8; controls, lone surrogates and bidi formatting as escapes.
    value = json_escaped(json.dumps(content, ensure_ascii=False))
    span = member_value(text, 0, "content")
    if span is None:  # OpenAI may omit content beside tool calls
        close = text.rindex("}")
        separator = ", " if text[1:close].strip() else ""
        text = f'{text[:close].rstrip()}{separator}"content": {value}{text[close:]}'
    else:
        start, end = span
        text = text[:start] + value + text[end:]
    return before, text, after
