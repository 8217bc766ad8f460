"""The floors the timed rows stand against: the least work the correctness rule allows.

A trimmer must count every message it has not seen (exact: tokenize its
texts; approximate: measure its characters) and, on a warm call, notice any
reassigned field of a message it remembers (check that each counted field is
still the same object). Nothing else is necessary, so each floor here is a
bare Python loop doing only that, with no cache, no plan and no report:

* ``full_count``: the cold exact floor. Read each message's fields, dump its
  tool calls' arguments to JSON as ChatOpenAI sends them, tokenize each text
  once with ``encode_ordinary``, and sum.
* ``field_check``: the warm floor. For each remembered message, its counted
  fields (``message_fields``) are still the remembered objects (``is``);
  ``Remembered`` does the same in C-level passes, one per message class.
* ``approximate_count``: ``count_tokens_approximately``'s arithmetic for the
  common messages, inlined (characters of content, role, name, tool call id
  and tool calls' ``repr``, a quarter rounded up, plus 3).
* ``counted_loop``: an agent loop's floor. Before each step, check every
  remembered message, then count the messages new since the previous step
  (``full_count`` or ``approximate_count``) and remember their fields.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_turntrim._counting.keys import fields_getter

__all__ = [
    "Remembered",
    "approximate_count",
    "counted_loop",
    "encode_loop",
    "encoded_texts",
    "field_check",
    "full_count",
]

Encode = Callable[[str], list[int]]
Getter = Callable[[dict[str, Any]], tuple[Any, ...]]
#: Counts a list of new messages (``full_count`` bound to an encoding, or ``approximate_count``).
Count = Callable[[Sequence[BaseMessage]], int]

# json.dumps(args, ensure_ascii=False): the arguments text ChatOpenAI sends.
_dump_args: Final = json.JSONEncoder(ensure_ascii=False).encode


def _is_text(block: object) -> bool:
    return isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")


def encoded_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """The texts an exact count of ``messages`` tokenizes, as ChatOpenAI sends them:
    each non-empty string content (or each text of a list content's strings and
    ``text`` blocks), each tool call's name and JSON arguments, and each ``name``
    (a tool message sends none). Roles, per-message constants and tool call ids
    cost fixed numbers of tokens: nothing to encode."""
    texts: list[str] = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            texts.extend([content] if content else [])
        else:
            texts.extend(b if isinstance(b, str) else b["text"] for b in content if _is_text(b))
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                texts += (call["name"], _dump_args(call["args"]))
        if message.name and not isinstance(message, ToolMessage):
            texts.append(message.name)
    return texts


def encode_loop(encode: Encode, texts: Sequence[str]) -> int:
    """A bare loop of ``encode`` over texts gathered beforehand, summing the lengths."""
    total = 0
    for text in texts:
        total += len(encode(text))
    return total


def full_count(encode: Encode, messages: Sequence[BaseMessage]) -> int:
    """The cold exact floor: read the fields, dump the arguments, encode each text, sum."""
    return encode_loop(encode, encoded_texts(messages))


def field_check(messages: Sequence[BaseMessage], remembered: Sequence[tuple[Any, ...]]) -> bool:
    """The warm floor: each message's counted fields are still the remembered objects."""
    for message, fields in zip(messages, remembered, strict=True):
        for now, then in zip(fields_getter(message)(vars(message)), fields, strict=True):
            if now is not then:
                return False
    return True


class Remembered:
    """What a warm check needs of the messages it remembers, grouped by their
    fields getter (one per message class) so that each group is checked in one
    pass of C-level iterators: its messages and their fields, one after the other."""

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups: dict[Getter, tuple[list[BaseMessage], list[Any]]] = {}

    def add(self, messages: Sequence[BaseMessage]) -> None:
        groups = self.groups
        for message in messages:
            getter = fields_getter(message)
            group = groups.get(getter)
            if group is None:
                group = groups[getter] = ([], [])
            group[0].append(message)
            group[1].extend(getter(vars(message)))

    def unchanged(self) -> bool:
        """Whether every remembered message's fields are still the remembered objects."""
        is_, fields_of = operator.is_, chain.from_iterable
        return all(
            all(map(is_, fields_of(map(getter, map(vars, group))), fields))
            for getter, (group, fields) in self.groups.items()
        )


_ROLES: Final = {HumanMessage: 4, AIMessage: 9, ToolMessage: 4, SystemMessage: 6}


def approximate_count(messages: Sequence[BaseMessage]) -> int:
    """The approximate floor: ``count_tokens_approximately``'s sum, for string contents."""
    total = 0
    for message in messages:
        kind = type(message)
        fields = vars(message)
        chars = len(fields["content"]) + _ROLES[kind]
        if fields["name"]:
            chars += len(fields["name"])
        if kind is ToolMessage:
            chars += len(fields["tool_call_id"])
        elif kind is AIMessage and fields["tool_calls"]:
            chars += len(repr(fields["tool_calls"]))
        total += (chars + 15) // 4
    return total


def counted_loop(count: Count, messages: Sequence[BaseMessage], steps: Sequence[int]) -> int:
    """An agent loop's floor: before each step, check every remembered message
    (``Remembered.unchanged``), then ``count`` the new ones and remember them."""
    remembered = Remembered()
    seen = total = 0
    for k in steps:
        remembered.unchanged()
        new = messages[seen:k]
        total += count(new)
        remembered.add(new)
        seen = k
    return total
