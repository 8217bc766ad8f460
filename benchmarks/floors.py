"""The floors the timed rows stand against: the least work the correctness rule allows.

A trimmer must count every message it has not seen (exact: tokenize its
texts; approximate: measure its characters) and, on a warm call, notice any
reassigned field of a message it remembers (check that each counted field is
still the same object). Nothing else is necessary, so each floor here is a
bare Python loop doing only that, with no cache, no plan and no report:

* ``full_count``: the cold exact floor. Read each message's texts, dump its
  tool calls' arguments to JSON, tokenize each text once with
  ``encode_ordinary``, and sum.
* ``Remembered``: the warm floor. Each remembered message's counted fields
  (content, name, additional_kwargs, type, and tool_calls/invalid_tool_calls
  for an AI message or tool_call_id for a tool message, read with
  ``operator.itemgetter`` over ``message.__dict__``) are still the remembered
  objects (``is``), checked in one C-level pass per message class.
* ``approximate_count``: ``count_tokens_approximately``'s arithmetic for the
  common messages, inlined (characters of content, role, name, tool call id
  and tool calls' ``repr``, a quarter rounded up, plus 3).
* ``counted_loop``: an agent loop's floor. Before each step, check every
  remembered message, then count the messages new since the previous step
  (each message is counted once, when it is the newest) and remember them.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

__all__ = ["Remembered", "approximate_count", "counted_loop", "full_count"]

Encode = Callable[[str], list[int]]
#: Counts a list of new messages (``full_count`` bound to an encoding, or ``approximate_count``).
Count = Callable[[Sequence[BaseMessage]], int]
Getter = Callable[[dict[str, Any]], tuple[Any, ...]]

_COMMON: Final = ("content", "name", "additional_kwargs", "type")
_GETTERS: Final[dict[type, Getter]] = {
    AIMessage: operator.itemgetter(*_COMMON, "tool_calls", "invalid_tool_calls"),
    ToolMessage: operator.itemgetter(*_COMMON, "tool_call_id"),
}
_PLAIN: Final[Getter] = operator.itemgetter(*_COMMON)
_dump_args: Final = json.JSONEncoder(ensure_ascii=False).encode


def _is_text(block: object) -> bool:
    return isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")


def encoded_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """The texts an exact count of ``messages`` tokenizes: each string content (or
    each text of a list content), each tool call's name and JSON arguments, and
    each ``name`` (a tool message sends none). Roles and per-message constants
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


def full_count(encode: Encode, messages: Sequence[BaseMessage]) -> int:
    """The cold exact floor: read the fields, dump the arguments, encode each text, sum."""
    total = 0
    for text in encoded_texts(messages):
        total += len(encode(text))
    return total


class Remembered:
    """The messages a warm check remembers, grouped by their fields getter (one
    per message class): each group's messages and their fields, in order."""

    __slots__ = ("groups",)

    def __init__(self) -> None:
        self.groups: dict[Getter, tuple[list[BaseMessage], list[Any]]] = {}

    def add(self, messages: Sequence[BaseMessage]) -> None:
        groups = self.groups
        for message in messages:
            getter = _GETTERS.get(type(message), _PLAIN)
            group = groups.get(getter)
            if group is None:
                group = groups[getter] = ([], [])
            group[0].append(message)
            group[1].extend(getter(message.__dict__))

    def unchanged(self) -> bool:
        """Whether every remembered message's fields are still the remembered objects."""
        is_, flat = operator.is_, chain.from_iterable
        return all(
            all(map(is_, flat(map(getter, map(vars, group))), fields))
            for getter, (group, fields) in self.groups.items()
        )


#: The characters ``count_tokens_approximately`` adds for each role.
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
    """An agent loop's floor: before each step, check every remembered message,
    then ``count`` the new ones and remember them."""
    remembered = Remembered()
    seen = total = 0
    for k in steps:
        remembered.unchanged()
        new = messages[seen:k]
        total += count(new)
        remembered.add(new)
        seen = k
    return total
