"""Where values start and end in a JSON text ``json.loads`` has read: the
command writes each kept message as the very text it was read as."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["member_value", "scan_array", "skip"]

# The document is valid JSON (json.loads read it) when these scan it again for
# where each message's text starts and ends.
_decoder = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def skip(text: str, index: int) -> int:
    """The index of the first non-whitespace character from ``index``."""
    match = _WHITESPACE.match(text, index)
    return match.end() if match else index


def scan_array(text: str, start: int) -> tuple[list[Any], list[tuple[str, str, str]], int]:
    """The values of the array at ``text[start]`` (a ``[``), each one's
    (whitespace before, text, whitespace after), and the index of its ``]``."""
    values: list[Any] = []
    parts: list[tuple[str, str, str]] = []
    after_separator = start + 1
    index = skip(text, after_separator)
    if text[index] == "]":
        return values, parts, index
    while True:
        value, end = _decoder.raw_decode(text, index)
        separator = skip(text, end)
        values.append(value)
        parts.append((text[after_separator:index], text[index:end], text[end:separator]))
        if text[separator] == "]":
            return values, parts, separator
        after_separator = separator + 1
        index = skip(text, after_separator)


def member_value(text: str, start: int, name: str) -> tuple[int, int] | None:
    """The span of the value of the last member ``name`` of the object at
    ``text[start]`` (a ``{``), or None when it has no such member."""
    index = skip(text, start + 1)
    found = None
    while text[index] != "}":
        key, end = _decoder.raw_decode(text, index)
        value_start = skip(text, skip(text, end) + 1)  # past the ':'
        _, value_end = _decoder.raw_decode(text, value_start)
        if key == name:
            found = (value_start, value_end)
        index = skip(text, value_end)
        if text[index] == ",":
            index = skip(text, index + 1)
    return found
