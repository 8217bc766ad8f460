"""Tool schemas: checked, then converted and priced once per what conversion reads
(a dict's digest; a ``BaseTool``'s class, name, description and argument schema;
else the tool), as an agent sends the same tools every call and converting costs."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final, TypeVar, cast

from langchain_turntrim._core import check_count, shown
from langchain_turntrim._counting.cache import LRU, digest

__all__ = ["check_tools", "openai_schema", "remembered", "tool_json", "tool_price"]

_T = TypeVar("_T")
#: Prices kept over every counter and tool list of the process.
_PRICES: Final[LRU[Any]] = LRU(1024)


def check_tools(tools: object) -> list[Any]:
    """``tools`` as a list of what LangChain makes a schema of: dicts, tools, classes, functions."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        msg = f"tools must be a sequence of tools, got {type(tools).__name__}"
        raise TypeError(msg)
    for i, tool in enumerate(tools):
        if not (isinstance(tool, (dict, type)) or callable(tool) or _is_tool(tool)):
            what = "a tool schema dict, a BaseTool, a class or a function"
            msg = f"tools[{i}] must be {what}, got {shown(tool)}"
            raise TypeError(msg)
    return list(tools)


def tool_price(counter: Any, tools: Sequence[Any]) -> int:
    """``counter.count_tools(tools)``, checked; ``Counter.count_tools`` if it has none."""
    if not tools:
        return 0
    price = getattr(counter, "count_tools", None)
    if callable(price):
        return check_count(price(tools), f"{counter!r}.count_tools")
    from langchain_turntrim._counting.base import Counter  # noqa: PLC0415 - a cycle

    return Counter.count_tools(counter, tools)


def _is_tool(value: object) -> bool:
    from langchain_core.tools import BaseTool  # noqa: PLC0415 - costly to import

    return isinstance(value, BaseTool)


def _tool_key(tool: object) -> Hashable | None:
    if isinstance(tool, dict):
        fingerprint = digest(tool)
        return None if fingerprint is None else (dict, fingerprint)
    if _is_tool(tool):
        from langchain_core.tools import BaseTool  # noqa: PLC0415 - costly to import

        if type(tool).tool_call_schema is not BaseTool.tool_call_schema:  # type: ignore[attr-defined]
            return None  # its own schema: nothing short of converting it says what it is
        schema = getattr(tool, "args_schema", None)
        schema_key = schema if schema is None or isinstance(schema, type) else digest(schema)
        fields = (type(tool), getattr(tool, "name", None), getattr(tool, "description", None))
        return None if schema_key is None and schema is not None else (*fields, schema_key)
    return tool if isinstance(tool, Hashable) else None  # (a hash that raises: see below)


def remembered(kind: Hashable, tools: Sequence[Any], compute: Callable[[], _T]) -> _T:
    """``compute()``, remembered under ``kind`` and ``tools`` (if they can be keyed)."""
    keys = tuple(map(_tool_key, tools))
    key = None if None in keys else (kind, keys)
    try:
        found = _PRICES.get(key)  # a None key finds nothing, and is not kept
    except TypeError:  # a counter or a tool that cannot be hashed: priced every time
        return compute()
    if found is None:
        found = compute()
        _PRICES.put_many([(key, found)])
    return cast("_T", found)


def tool_json(tool: Any) -> str:
    """A tool's schema as the JSON an OpenAI-style request carries."""
    return remembered("json", [tool], lambda: _tool_json(tool))


def _tool_json(tool: Any) -> str:
    schema = openai_schema(tool)
    if schema is None:  # a provider's own tool
        schema = tool if isinstance(tool, dict) else {"name": getattr(tool, "name", repr(tool))}
    return json.dumps(schema, ensure_ascii=False, default=str)


def openai_schema(tool: Any) -> Any:
    """``convert_to_openai_tool(tool)``, or None for a tool it cannot convert."""
    from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: PLC0415

    try:
        return convert_to_openai_tool(tool)
    except (TypeError, ValueError, NotImplementedError, KeyError):
        return None
