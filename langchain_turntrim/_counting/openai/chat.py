"""OpenAI chat counting without LangChain: the constants ``TiktokenCounter``
shares, and ``PlainCounter``, which counts plain OpenAI message dicts.

A plain message is a dict of ``role`` (``system``, ``developer``, ``user``,
``assistant``, ``tool``), string ``content`` (``None`` or absent beside tool
calls), a string ``name`` and ``id``, an assistant's ``tool_calls`` (each
``{"id", "type", "function": {"name", "arguments"}}`` whose ``arguments``
parse as a JSON object) and a tool's string ``tool_call_id``, and nothing else.
For those, ``PlainCounter`` gives what ``TiktokenCounter`` counts for the
message ``convert_to_messages`` makes of the dict (a property test holds the
two to each other), without importing LangChain; for any other message it
gives ``None`` and the caller converts. The ``turntrim`` command plans plain
transcripts this way, and so never pays for importing LangChain's messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import tiktoken

from langchain_turntrim._counting.openai.encodings import load_encoding
from langchain_turntrim._counting.openai.models import encoding_name_for_model

__all__ = [
    "DEFAULT_MODEL",
    "DROPPED_BLOCKS",
    "REPLY_PRIMING",
    "ROLES",
    "TOOL_CALL_ID_TOKENS",
    "TOOL_CALL_KEYS",
    "PlainCounter",
    "chat_rules",
    "dump_args",
    "message_constants",
]

#: The model ``TiktokenCounter`` counts for when neither a model nor an encoding is given.
DEFAULT_MODEL: Final = "gpt-4o"

#: Reply priming (``<|im_start|>assistant``), counted once per request.
REPLY_PRIMING: Final = 3
#: What ChatOpenAI adds for a tool message's ``tool_call_id``, whatever it is.
TOOL_CALL_ID_TOKENS: Final = 3
#: Content blocks ChatOpenAI drops from Chat Completions requests.
DROPPED_BLOCKS: Final = (
    "tool_use",
    "thinking",
    "reasoning_content",
    "function_call",
    "code_interpreter_call",
)
#: What ChatOpenAI keeps of a raw tool call in ``additional_kwargs``.
TOOL_CALL_KEYS: Final = ("id", "type", "function")
#: The roles a message can be sent with.
ROLES: Final = ("user", "assistant", "system", "developer", "function", "tool")
#: ``json.dumps(args, ensure_ascii=False)``, as ChatOpenAI dumps tool-call
#: arguments, but never failing.
dump_args: Final = json.JSONEncoder(ensure_ascii=False, default=str).encode

# What each role's dict may hold, beside "role", for the message to be plain.
_COMMON: Final = frozenset(("content", "name", "id"))
_KEYS: Final = {
    "system": _COMMON,
    "developer": _COMMON,
    "user": _COMMON,
    "assistant": _COMMON | {"tool_calls"},
    "tool": _COMMON | {"tool_call_id"},
}
_CALL_KEYS: Final = frozenset(("id", "type", "function"))
_FUNCTION_KEYS: Final = frozenset(("name", "arguments"))


def message_constants(model: str) -> tuple[int, int]:
    """ChatOpenAI's tokens per message and per name for ``model``."""
    return (4, -1) if model.startswith("gpt-3.5-turbo-0301") else (3, 1)


def chat_rules(
    model: object, encoding: object
) -> tuple[str | None, tiktoken.Encoding, str, int, int]:
    """What ``TiktokenCounter(model, encoding=encoding)`` counts with: the model
    (``DEFAULT_MODEL`` when neither is given), the encoding, its name, and the
    tokens per message and per name; raises ``TypeError``/``ValueError``."""
    if model is not None and encoding is not None:
        msg = "pass either model or encoding to TiktokenCounter, not both"
        raise ValueError(msg)
    if model is not None and not isinstance(model, str):
        msg = f"model must be a str, got {type(model).__name__}"
        raise TypeError(msg)
    if encoding is None:
        model = DEFAULT_MODEL if model is None else model
        if not model.strip():
            msg = "model must be a non-empty model name"
            raise ValueError(msg)
        name = encoding_name_for_model(model)
        return (model, load_encoding(name), name, *message_constants(model))
    if isinstance(encoding, tiktoken.Encoding):
        return (None, encoding, encoding.name, 3, 1)
    if isinstance(encoding, str):
        return (None, load_encoding(encoding), encoding, 3, 1)
    msg = f"encoding must be a str or a tiktoken.Encoding, got {type(encoding).__name__}"
    raise TypeError(msg)


class PlainCounter:
    """``TiktokenCounter``'s count of plain message dicts (see the module).

    ``PlainCounter.of(name)`` is the counter ``"tiktoken:NAME"`` names (an
    encoding name, else a model name), or ``None`` where ``TiktokenCounter``
    would raise: the caller then builds one for the error.
    """

    __slots__ = ("_encode", "_per_message", "_per_name", "_roles")

    def __init__(self, encoding: tiktoken.Encoding, per_message: int, per_name: int) -> None:
        self._encode = encoding.encode_ordinary
        self._per_message = per_message
        self._per_name = per_name
        self._roles = {role: len(self._encode(role)) for role in ROLES}

    @classmethod
    def of(cls, name: str) -> PlainCounter | None:
        name = name.strip()
        if not name:
            return None
        if name in tiktoken.list_encoding_names():
            return cls(load_encoding(name), 3, 1)
        try:
            encoding_name_for_model(name)
        except ValueError:
            return None
        _, encoding, _, per_message, per_name = chat_rules(name, None)
        return cls(encoding, per_message, per_name)

    def count(self, messages: Sequence[object]) -> list[int] | None:
        """Each message's tokens, or ``None`` when one of them is not plain."""
        counts = []
        for message in messages:
            n = self._message(message) if type(message) is dict else None
            if n is None:
                return None
            counts.append(n)
        return counts

    def _message(self, message: dict[str, Any]) -> int | None:
        role = message.get("role")
        if type(role) is not str:
            return None
        allowed = _KEYS.get(role)
        if allowed is None or not allowed.issuperset(message.keys() - {"role"}):
            return None
        content = message.get("content")
        calls = message.get("tool_calls")
        name = message.get("name")
        if (
            ("content" not in message and not calls)
            or not (content is None or type(content) is str)
            or not (name is None or type(name) is str)
            or not (message.get("id") is None or type(message.get("id")) is str)
        ):
            return None
        n = self._per_message + (len(self._encode(content)) if content else 0)
        if role == "tool":  # only content, role and tool_call_id are sent
            if type(message.get("tool_call_id")) is not str:
                return None
            return n + self._roles["tool"] + TOOL_CALL_ID_TOKENS
        n += self._roles[role]
        if calls is not None:
            extra = self._calls(calls)
            if extra is None:
                return None
            n += extra
        if name:
            n += len(self._encode(name)) + self._per_name
        return n

    def _calls(self, calls: object) -> int | None:
        """The tokens of an assistant's tool calls (their names and JSON arguments)."""
        if type(calls) is not list:
            return None
        n = 0
        for call in calls:
            if type(call) is not dict or not _CALL_KEYS.issuperset(call):
                return None
            function = call.get("function")
            if type(function) is not dict or not _FUNCTION_KEYS.issuperset(function):
                return None
            name, arguments = function.get("name"), function.get("arguments")
            if type(call.get("id")) is not str or type(name) is not str:
                return None
            if type(arguments) is not str:
                return None
            try:
                args = json.loads(arguments)
            except ValueError:
                return None
            if type(args) is not dict:
                return None
            n += len(self._encode(dump_args(args))) + len(self._encode(name))
        return n
