"""Tool schemas priced: as messages, for counters without a rule of their own,
and remembered per tool, since an agent binds the same tools to every call.

Converting a LangChain tool to its OpenAI schema (pydantic's JSON schema,
references resolved) costs more than pricing the result. ``remembered`` keeps
what a conversion led to (a JSON text, a token count) under a key made of
everything the conversion reads, so a hit is exactly what a fresh conversion
would give:

* a plain ``dict`` (an OpenAI tool, a provider's built-in tool): a digest of
  its whole content with exact types (``keys.digest``: ``1``, ``1.0`` and
  ``True``, a list and a tuple, ``1`` and ``"1"`` as keys all differ). A dict
  mutated in place, or reassigned, has a new key; a value ``digest`` does not
  understand makes it uncacheable;
* a ``BaseTool`` whose class keeps LangChain's own ``tool_call_schema``,
  ``get_input_schema`` and ``args``: its class, ``name``, ``description``,
  ``args_schema`` (a pydantic class, by identity, as LangChain's own memo of
  ``tool_call_schema`` takes it; a dict, digested as above), and ``metadata``
  and ``extras`` (digested; values ``digest`` does not understand make the
  tool uncacheable). Reassigning
  any of them, or replacing the tool, gives a new key;
* anything else (functions, pydantic classes, other tool classes): no key,
  converted on every call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final, TypeVar, cast

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_turntrim._counting.keys import UnkeyableError, digest
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["PRICES_KEPT", "remembered", "tool_json", "tool_key", "tool_messages", "tools_key"]

#: Prices kept (LRU), over every counter and tool list of the process.
PRICES_KEPT: Final = 1_024
_SCHEMA_MEMBERS: Final = ("tool_call_schema", "get_input_schema", "args")

T = TypeVar("T")


def _content(value: object) -> bytes:
    """``digest`` of ``value``: equal only for equal values of the same exact types."""
    key = digest((value,))
    if key is None:
        raise UnkeyableError
    return key


def _optional(value: object) -> bytes | None:
    return None if value is None else _content(value)


_plain_classes: dict[type, bool] = {}


def _plain_class(cls: type) -> bool:
    """``cls`` is a ``BaseTool`` that converts like LangChain's own tools: it
    overrides none of ``_SCHEMA_MEMBERS`` beyond ``BaseTool``, ``StructuredTool`` and ``Tool``."""
    from langchain_core.tools import BaseTool, StructuredTool, Tool  # noqa: PLC0415

    own = (BaseTool, StructuredTool, Tool)
    plain = issubclass(cls, BaseTool) and all(
        next(c for c in cls.__mro__ if name in vars(c)) in own for name in _SCHEMA_MEMBERS
    )
    _plain_classes[cls] = plain
    return plain


def tool_key(tool: object) -> Hashable | None:
    """Everything ``tool``'s conversion reads, or ``None`` when that is not known."""
    cls = type(tool)
    try:
        if cls is dict:
            return (dict, _content(tool))
        plain = _plain_classes.get(cls)
        if not (_plain_class(cls) if plain is None else plain):
            return None
        fields = vars(tool)
        name, description = fields.get("name"), fields.get("description")
        if type(name) is not str or type(description) is not str:
            return None
        schema = fields.get("args_schema")
        schema_key = schema if schema is None or isinstance(schema, type) else _content(schema)
        metadata, extras = fields.get("metadata"), fields.get("extras")
        return (cls, name, description, schema_key, _optional(metadata), _optional(extras))
    except UnkeyableError:
        return None


def tools_key(tools: Sequence[Any]) -> tuple[Hashable, ...] | None:
    """The keys of every tool, in order, or ``None`` when one has none."""
    keys = []
    for tool in tools:
        key = tool_key(tool)
        if key is None:
            return None
        keys.append(key)
    return tuple(keys)


_PRICES: Final[LRU[Any]] = LRU(PRICES_KEPT)

#: What ``check_tools`` says a tool must be.
TOOL_KINDS: Final = "a tool schema dict, a BaseTool, a pydantic model class or a function"


def check_tools(tools: object) -> list[Any]:
    """``tools`` as a list, each one something LangChain converts to a tool
    schema (``convert_to_openai_tool``): a dict (OpenAI's schema, a
    provider's built-in tool), a ``BaseTool``, a class (a pydantic model, a
    ``TypedDict``) or a function. Raises ``TypeError`` naming ``tools`` or
    the index of the first item that is none of these."""
    if isinstance(tools, (str, bytes, bytearray)) or not isinstance(tools, Sequence):
        msg = f"tools must be a sequence of tools, got {type(tools).__name__}"
        raise TypeError(msg)
    listed = list(tools)
    for i, tool in enumerate(listed):
        if type(tool) in _tool_classes:  # an agent passes the same tools to every call
            continue
        if not (isinstance(tool, (dict, type)) or callable(tool) or _is_tool(tool)):
            what = f"{type(tool).__name__} {safe_repr(tool, 80)}"
            msg = f"tools[{i}] must be {TOOL_KINDS}, got {what}"
            raise TypeError(msg)
    return listed


#: The ``BaseTool`` classes seen so far (a set only grows: classes are few).
_tool_classes: set[type] = set()


def _is_tool(value: object) -> bool:
    from langchain_core.tools import BaseTool  # noqa: PLC0415 - costly to import

    if isinstance(value, BaseTool):
        _tool_classes.add(type(value))
        return True
    return False


def remembered(kind: Hashable, key: Hashable | None, compute: Callable[[], T]) -> T:
    """``compute()``, remembered under ``(kind, key)``; every call when ``key`` is ``None``.

    ``kind`` names what is computed and everything besides the tools it depends
    on (the encoding, the framing); ``key`` is ``tool_key`` or ``tools_key``.
    """
    if key is None:
        return compute()
    full = (kind, key)
    value = _PRICES.get(full)
    if value is None:  # computed outside the lock: threads never wait on each other
        value = compute()
        _PRICES.put_many(((full, value),))
    return cast("T", value)


def tool_json(tool: Any) -> str:
    """A tool's schema as the JSON an OpenAI-style request carries (remembered
    for tools ``tool_key`` knows: see ``remembered``)."""
    return remembered("json", tool_key(tool), lambda: _tool_json(tool))


def _tool_json(tool: Any) -> str:
    # Imported here: LangChain's tools module costs more to import than this package.
    from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: PLC0415

    try:
        schema: Any = convert_to_openai_tool(tool)
    except (TypeError, ValueError, NotImplementedError, KeyError):  # odd provider tools
        schema = tool if isinstance(tool, dict) else {"name": getattr(tool, "name", repr(tool))}
    return json.dumps(schema, ensure_ascii=False, default=str)


def tool_messages(tools: Sequence[Any]) -> list[BaseMessage]:
    """One system message per tool, holding its JSON schema.

    Counted like any message, a schema pays the per-message constant once
    per tool: a small over-estimate. Providers render tool schemas in their
    own formats and ChatOpenAI itself does not count them.
    """
    return [SystemMessage(content=tool_json(tool)) for tool in tools]
