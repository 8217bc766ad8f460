"""What tool schemas add to an OpenAI chat request's ``prompt_tokens``.

The rendering is the one of OpenAI's cookbook "How to count tokens with
tiktoken" (function calling): per function ``func_init`` and the tokens of
``"name:description"``; if it has properties, ``prop_init`` and per property
``prop_key`` and the tokens of ``"key:type:description"`` (plus, for an enum,
``enum_init`` and per item ``enum_item`` and its tokens); ``func_end`` once.
Trailing periods of descriptions are dropped. The cookbook stops at flat
properties; nested objects, arrays, ``anyOf``/``oneOf``, type lists and
defaults are priced by the same per-property rule applied to what they hold
(an estimate, documented in the counting guide).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_turntrim._counting.tools import remembered, tool_json, tool_key, tools_key

__all__ = ["CHAT_TOOLS", "GPT4O_TOOLS", "ToolFraming", "tool_framing", "tools_tokens"]

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class ToolFraming:
    """The cookbook's per-function, per-property and enum constants of a model family."""

    func_init: int
    prop_init: int
    prop_key: int
    enum_init: int
    enum_item: int
    func_end: int


#: gpt-4o and gpt-4o-mini in the cookbook; used for every o200k_base model.
GPT4O_TOOLS: Final = ToolFraming(7, 3, 3, -3, 3, 12)
#: gpt-3.5-turbo and gpt-4 in the cookbook; used for every other encoding.
CHAT_TOOLS: Final = ToolFraming(10, 3, 3, -3, 3, 12)


def tool_framing(encoding_name: str) -> ToolFraming:
    """The constants for a model of ``encoding_name``."""
    return GPT4O_TOOLS if encoding_name.startswith("o200k") else CHAT_TOOLS


def tools_tokens(tools: Sequence[Any], encode: Encode, framing: ToolFraming) -> int:
    """The tokens ``tools`` add to a request (0 for none)."""
    if not tools:
        return 0
    key = tools_key(tools)
    return remembered(
        ("openai", encode, framing), key, lambda: _tools_tokens(tools, encode, framing)
    )


def _tools_tokens(tools: Sequence[Any], encode: Encode, framing: ToolFraming) -> int:
    # Imported here: LangChain's tools module costs more to import than this package.
    from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: PLC0415

    pricer = _Pricer(encode, framing, convert_to_openai_tool)
    return sum(map(pricer.tool, tools)) + framing.func_end


def _line(head: str, description: object) -> str:
    if not isinstance(description, str) or not description:
        return head
    return f"{head}:{description.removesuffix('.')}"


class _Pricer:
    def __init__(self, encode: Encode, framing: ToolFraming, convert: Callable[[Any], Any]) -> None:
        self.encode = encode
        self.f = framing
        self.convert = convert

    def tokens(self, text: str) -> int:
        return len(self.encode(text))

    def tool(self, tool: Any) -> int:
        """What ``tool`` adds, remembered per encoding and framing (see ``tools.remembered``)."""
        return remembered(
            ("openai-tool", self.encode, self.f), tool_key(tool), lambda: self._price(tool)
        )

    def _price(self, tool: Any) -> int:
        try:
            schema: Any = self.convert(tool)
        except (TypeError, ValueError, NotImplementedError, KeyError):
            schema = None
        function = schema.get("function") if isinstance(schema, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return self.tokens(tool_json(tool))  # a provider tool: its JSON, an estimate
        n = self.f.func_init + self.tokens(_line(function["name"], function.get("description")))
        return n + self.properties(function.get("parameters"))

    def properties(self, schema: object) -> int:
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or not props:
            return 0
        n = self.f.prop_init
        for key, prop in props.items():
            spec = prop if isinstance(prop, dict) else {}
            n += self.f.prop_key + self.tokens(
                _line(f"{key}:{_type(spec)}", spec.get("description"))
            )
            n += self.inner(spec)
            if "default" in spec:
                n += self.tokens(f"default:{_dump(spec['default'])}")
        return n

    def inner(self, spec: dict[str, Any]) -> int:
        """An enum's items, a nested object's properties, an array's items, each variant."""
        n = 0
        enum = spec.get("enum")
        if isinstance(enum, list):
            n += self.f.enum_init
            for item in enum:
                n += self.f.enum_item + self.tokens(item if isinstance(item, str) else _dump(item))
        n += self.properties(spec)
        items = spec.get("items")
        if isinstance(items, dict):
            n += self.tokens(_type(items)) + self.inner(items)
        for key in ("anyOf", "oneOf"):
            variants = spec.get(key)
            if isinstance(variants, list):
                n += sum(self.inner(v) for v in variants if isinstance(v, dict))
        return n


def _type(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " | ".join(map(str, kind))
    for key in ("anyOf", "oneOf"):
        variants = spec.get(key)
        if isinstance(variants, list):
            return " | ".join(_type(v) if isinstance(v, dict) else "any" for v in variants)
    ref = spec.get("$ref")
    if isinstance(ref, str):
        return ref.rpartition("/")[2]
    return "string" if "enum" in spec else "any"


def _dump(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
