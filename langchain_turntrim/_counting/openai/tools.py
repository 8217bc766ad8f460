"""What tool schemas add to an OpenAI chat request's ``prompt_tokens``.

The rendering of OpenAI's cookbook "How to count tokens with tiktoken"
(function calling): per function ``func_init`` and the tokens of
``"name:description"``; if it has properties, ``prop_init`` and per property
``prop_key`` and the tokens of ``"key:type:description"`` (an enum adds
``enum_init`` and per item ``enum_item`` and its tokens); ``func_end`` once.
Trailing periods of descriptions are dropped. The cookbook stops at flat
properties; nested objects, arrays, ``anyOf``/``oneOf``, type lists and
defaults are priced by the same rule applied to what they hold (an estimate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import tiktoken

from langchain_turntrim._counting.tools import openai_schema, remembered, tool_json

__all__ = ["dump", "tools_tokens"]


#: The cookbook's constants, the same for every model family but ``func_init``:
#: its gpt-4o and gpt-4o-mini one for every o200k encoding, else its gpt-4 one.
_FUNC_INIT_O200K: Final = 7
_FUNC_INIT: Final = 10
_PROP_INIT: Final = 3
_PROP_KEY: Final = 3
_ENUM_INIT: Final = -3
_ENUM_ITEM: Final = 3
_FUNC_END: Final = 12


def tools_tokens(tools: Sequence[Any], encoding: tiktoken.Encoding) -> int:
    """The tokens ``tools`` add to a request (0 for none); each tool's price is
    remembered per encoding (see ``remembered``)."""
    if not tools:
        return 0
    pricer = _Pricer(encoding)
    return sum(map(pricer.remembered, tools)) + _FUNC_END


def _line(head: str, description: object) -> str:
    if not isinstance(description, str) or not description:
        return head
    return f"{head}:{description.removesuffix('.')}"


def dump(value: object, *, sort_keys: bool = False) -> str:
    """``value`` as JSON (``str`` of what JSON cannot hold), or its ``repr`` where
    even that fails (odd keys, cycles, deep nesting): counting never raises."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str, sort_keys=sort_keys)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _type(spec: dict[str, Any]) -> str:
    """A property's type as rendered: its name, its variants' joined by ``|``, a ref's name."""
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


class _Pricer:
    """One request's pricing of tools: the encoding, and its family's ``func_init``."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding
        self.func_init = _FUNC_INIT_O200K if encoding.name.startswith("o200k") else _FUNC_INIT

    def tokens(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def remembered(self, tool: Any) -> int:
        return remembered(("openai", self.encoding), [tool], lambda: self.price(tool))

    def price(self, tool: Any) -> int:
        schema = openai_schema(tool)
        function = schema.get("function") if isinstance(schema, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return self.tokens(tool_json(tool))  # a provider's own tool: its JSON, an estimate
        n = self.func_init + self.tokens(_line(function["name"], function.get("description")))
        return n + self.properties(function.get("parameters"))

    def properties(self, schema: object) -> int:
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict) or not props:
            return 0
        n = _PROP_INIT
        for key, prop in props.items():
            spec = prop if isinstance(prop, dict) else {}
            n += _PROP_KEY + self.tokens(_line(f"{key}:{_type(spec)}", spec.get("description")))
            n += self.inner(spec)
            if "default" in spec:
                n += self.tokens(f"default:{dump(spec['default'])}")
        return n

    def inner(self, spec: dict[str, Any]) -> int:
        """An enum's items, a nested object's properties, an array's items, each variant."""
        n = 0
        enum = spec.get("enum")
        if isinstance(enum, list):
            n += _ENUM_INIT
            for item in enum:
                n += _ENUM_ITEM + self.tokens(item if isinstance(item, str) else dump(item))
        n += self.properties(spec)
        items = spec.get("items")
        if isinstance(items, dict):
            n += self.tokens(_type(items)) + self.inner(items)
        for key in ("anyOf", "oneOf"):
            variants = spec.get(key)
            if isinstance(variants, list):
                n += sum(self.inner(v) for v in variants if isinstance(v, dict))
        return n
