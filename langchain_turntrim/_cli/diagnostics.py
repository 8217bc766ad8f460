"""Why LangChain rejected a transcript's message dict, in words that name the field."""

from __future__ import annotations

import json
from typing import Any, Final

from langchain_turntrim._core import CHAT_ROLE_KINDS

__all__ = ["a_json_type", "json_type", "problem"]

#: The roles a transcript may use: the core's and LangChain's spellings.
_ROLES: Final = tuple(CHAT_ROLE_KINDS)
_ACCEPTED: Final = ", ".join(repr(role) for role in _ROLES if role not in ("human", "ai"))
_JSON_TYPES: Final = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def json_type(value: object) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ...)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def a_json_type(value: object) -> str:
    """``json_type`` with its article.

    >>> a_json_type({}), a_json_type([1]), a_json_type("x"), a_json_type(None)
    ('an object', 'an array', 'a string', 'null')
    """
    name = json_type(value)
    if name == "null":
        return name
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def problem(message: dict[str, Any]) -> str | None:
    """The first wrong field of a message dict, in words, or None if none is found."""
    for check in (_role_problem, _content_problem, _tool_calls_problem, _name_problem):
        problem = check(message)
        if problem is not None:
            return problem
    return None


def _role_problem(message: dict[str, Any]) -> str | None:
    if "role" not in message:
        return None if "type" in message else "no 'role' field"
    role = message["role"]
    if not isinstance(role, str):
        return f"'role' must be a string, got {a_json_type(role)}"
    if role not in _ROLES:
        return f"unknown 'role' {role!r}; expected one of {_ACCEPTED}"
    if role == "tool" and "tool_call_id" not in message:
        return "no 'tool_call_id' field (a 'tool' message answers a tool call)"
    return None


def _content_problem(message: dict[str, Any]) -> str | None:
    if "content" not in message:
        hint = " (records with 'tokens' need --counter field)" if "tokens" in message else ""
        return f"no 'content' field{hint}"
    content = message["content"]
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"'content' must be a string, an array of parts or null, got {a_json_type(content)}"
    for i, part in enumerate(content):
        if not isinstance(part, (str, dict)):
            return f"'content[{i}]' must be a string or an object, got {a_json_type(part)}"
    return None


def _tool_calls_problem(message: dict[str, Any]) -> str | None:
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return f"'tool_calls' must be an array, got {a_json_type(calls)}"
    for i, call in enumerate(calls):
        problem = _tool_call_problem(f"tool_calls[{i}]", call)
        if problem is not None:
            return problem
    return None


def _tool_call_problem(where: str, call: object) -> str | None:
    """What is wrong with one OpenAI-format tool call."""
    if not isinstance(call, dict):
        return f"'{where}' must be an object, got {a_json_type(call)}"
    if "function" not in call:
        return None  # LangChain's own tool call format
    function = call["function"]
    if not isinstance(function, dict):
        return f"'{where}.function' must be an object, got {a_json_type(function)}"
    missing = [f"{where}.{key}" for key in ("id",) if key not in call]
    missing += [f"{where}.function.{key}" for key in ("name", "arguments") if key not in function]
    if missing:
        return f"no '{missing[0]}' field"
    arguments = function["arguments"]
    if isinstance(arguments, str):
        try:
            json.loads(arguments, strict=False)
        except json.JSONDecodeError as error:
            return f"'{where}.function.arguments' is not valid JSON: {error}"
    return None


def _name_problem(message: dict[str, Any]) -> str | None:
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        return f"'name' must be a string, got {a_json_type(name)}"
    return None
