"""Tool schemas as messages: how a counter without a rule of its own prices tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_turntrim._counting.tool_cache import memo, tool_key

__all__ = ["tool_json", "tool_messages"]


def tool_json(tool: Any) -> str:
    """A tool's schema as the JSON an OpenAI-style request carries (remembered
    for tools ``tool_key`` knows: see ``tool_cache``)."""
    return memo("json", tool_key(tool), lambda: _tool_json(tool))


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
