"""Offline, exact OpenAI chat token counts with tiktoken.

``TiktokenCounter`` counts each message the way
``langchain_openai.ChatOpenAI.get_num_tokens_from_messages`` does, without
importing ``langchain_openai``, without building OpenAI request dicts and
without ever touching the network once its encoding is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

import tiktoken
import tiktoken.model
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.keys import Fields, message_fields
from langchain_turntrim._counting.openai.chat import (
    DROPPED_BLOCKS,
    REPLY_PRIMING,
    ROLES,
    TOOL_CALL_ID_TOKENS,
    TOOL_CALL_KEYS,
    chat_rules,
    dump_args,
)
from langchain_turntrim._counting.openai.encodings import EncodingUnavailableError
from langchain_turntrim._counting.openai.images import image_pricing, image_size, image_source
from langchain_turntrim._counting.openai.tools import tool_framing, tools_tokens
from langchain_turntrim._counting.tools import check_tools
from langchain_turntrim._messages import check_messages, explain_bad_fields
from langchain_turntrim._safe_repr import deep_repr, safe_repr

__all__ = ["EncodingUnavailableError", "TiktokenCounter"]

# What a message is sent as, by its class (subclasses found by issubclass once).
_CHAT, _USER, _AI, _SYSTEM, _FUNCTION, _TOOL, _OTHER = range(7)
_KINDS: Final = (
    (ChatMessage, _CHAT),
    (HumanMessage, _USER),
    (AIMessage, _AI),
    (SystemMessage, _SYSTEM),
    (FunctionMessage, _FUNCTION),
    (ToolMessage, _TOOL),
)
_kinds: dict[type, int] = {}
_dump_block: Final = json.JSONEncoder(ensure_ascii=False, default=str, sort_keys=True).encode


def _dumped_len(encode: Callable[[str], list[int]], obj: object, dump: Callable[[Any], str]) -> int:
    try:
        text = dump(obj)
    except (TypeError, ValueError, RecursionError):  # odd keys, cycles, deep nesting
        text = deep_repr(obj)
    return len(encode(text))


class TiktokenCounter(AdditiveCounter):
    """Count OpenAI chat tokens per message, exactly as ``ChatOpenAI`` does, offline.

    ``sum(counter.count_each(messages)) + counter.overhead`` equals
    ``ChatOpenAI(model=model).get_num_tokens_from_messages(messages)`` for every
    message list on which ChatOpenAI succeeds and which holds no image other than
    ``"detail": "low"`` ones of a model priced 85 per low-detail image (see
    below). ``count_tools`` prices tool schemas (ChatOpenAI does not). Text is
    encoded with ``encode_ordinary``: the same tokens as ChatOpenAI's ``encode``.

    Args:
        model: An OpenAI model name (default ``"gpt-4o"``). Picks the encoding
            like ``ChatOpenAI``: ``tiktoken.encoding_for_model``, else
            ``o200k_base`` for ``gpt-4o``/``gpt-4.1``/``gpt-5``/``gpt-6``
            prefixes (any case), else the encoding of a fine-tune's base model
            (``"ft:BASE:..."``). Any other name raises ``ValueError`` naming
            the closest known names (ChatOpenAI guesses ``cl100k_base``, which
            miscounts a model of another tokenizer): pass ``encoding=``
            for it. Picks the per-message constants like ``ChatOpenAI``:
            ``gpt-3.5-turbo-0301`` costs 4 tokens per message and -1 per
            name; every other model 3 and 1 (ChatOpenAI
            raises ``NotImplementedError`` for names it does not know, e.g.
            ``"ft:..."`` or non-OpenAI models; we use 3 and 1).
        encoding: Instead of ``model``: a tiktoken encoding name, or a
            ``tiktoken.Encoding`` (e.g. built from a local BPE file on an
            air-gapped machine). Costs 3 tokens per message and 1 per name;
            images are priced like gpt-4o's, tools with the cookbook's gpt-4o
            constants for ``o200k*`` encodings, else its gpt-4 ones.
        url_image_tokens: What an image costs whose size is not in the request
            (a URL, a file id, data whose header cannot be read). Default: the
            most the model's formula charges for one image, so a URL image is
            never under-counted.

    The encoding is loaded when the counter is built, from tiktoken's cache;
    a missing BPE file is downloaded within ``TURNTRIM_DOWNLOAD_TIMEOUT``
    seconds (30 by default), never with ``TURNTRIM_OFFLINE=1``. When it cannot
    be loaded, ``EncodingUnavailableError`` (a ``ValueError``) says how to
    provide the file offline.

    Where ChatOpenAI fails or guesses, this counter is deterministic, never
    raises on content, never warns and never fetches anything:

    * Text that spells a special token (``"<|endoftext|>"``) is ordinary text.
    * **Images** cost what OpenAI's vision guide documents for the model
      (``image_tokens``): by tiles for gpt-4o (85 and 170 per 512-px tile),
      gpt-4o-mini (2833 and 5667) and every other model (85 and 170), by
      32-px patches for gpt-4.1-mini, gpt-4.1-nano and o4-mini. The size is
      read from the header of base64 data (PNG, JPEG, GIF, WebP); a URL is
      never fetched and costs ``url_image_tokens`` (a ``"low"``-detail
      tile-priced image costs its base whatever its size). ``"auto"`` is
      priced as ``"high"``. Anthropic-style ``image`` blocks with an unusable
      ``source`` are dropped by ChatOpenAI, and cost 0. ChatOpenAI counts 85
      for any low-detail image, and for others fetches or decodes the image
      with pillow (``allow_fetching_images=True``) or counts 0.
    * ``file`` blocks cost 0, as in ChatOpenAI (which warns, and rejects file URLs).
    * Blocks ChatOpenAI rejects (unknown types, audio, video, ``text-plain``,
      malformed blocks) cost the tokens of
      ``json.dumps(block, sort_keys=True, ensure_ascii=False, default=str)``
      (a ``repr``-like text of any depth if even that fails).
    * A ``None`` tool-call name or arguments costs 0; tool-call ``args`` that
      ``json.dumps`` rejects are dumped with ``default=str``.
    * Messages of an unknown class count like a ``ChatMessage`` whose role is
      ``message.type``.

    Counters are immutable and thread-safe; they compare equal (and hash
    alike) when model, encoding name and per-message constants match.
    """

    __slots__ = (
        "_encode",
        "_encoding",
        "_images",
        "_model",
        "_per_message",
        "_per_name",
        "_roles",
        "_tools",
        "_url_image_tokens",
    )

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | tiktoken.Encoding | None = None,
        url_image_tokens: int | None = None,
    ) -> None:
        model, enc, encoding_name, per_message, per_name = chat_rules(model, encoding)
        self._model = model
        self._encoding = enc
        self._encode = enc.encode_ordinary
        self._per_message = per_message
        self._per_name = per_name
        self._roles = {role: len(enc.encode_ordinary(role)) for role in ROLES}
        self._images = image_pricing(model)
        self._tools = tool_framing(encoding_name)
        if url_image_tokens is None:
            self._url_image_tokens = self._images.most()
        elif not isinstance(url_image_tokens, int) or isinstance(url_image_tokens, bool):
            msg = f"url_image_tokens must be an int, got {type(url_image_tokens).__name__}"
            raise TypeError(msg)
        elif url_image_tokens < 0:
            msg = f"url_image_tokens must be >= 0, got {url_image_tokens}"
            raise ValueError(msg)
        else:
            self._url_image_tokens = url_image_tokens

    @property
    def model(self) -> str | None:
        """The model name, or ``None`` when built from an ``encoding``."""
        return self._model

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding."""
        return self._encoding

    @property
    def tokens_per_message(self) -> int:
        """Tokens every message costs on top of its fields."""
        return self._per_message

    @property
    def tokens_per_name(self) -> int:
        """Tokens a ``name`` costs on top of its text."""
        return self._per_name

    @property
    def url_image_tokens(self) -> int:
        """What an image costs whose size is not in the request (a URL, a file id)."""
        return self._url_image_tokens

    def image_tokens(self, width: int, height: int, detail: str = "auto") -> int:
        """What this model charges for a ``width`` x ``height`` image at ``detail``."""
        for name, value in (("width", width), ("height", height)):
            if not isinstance(value, int) or isinstance(value, bool):
                msg = f"{name} must be an int, got {type(value).__name__}"
                raise TypeError(msg)
            if value < 1:
                msg = f"{name} must be >= 1, got {value}"
                raise ValueError(msg)
        if detail not in ("low", "high", "auto"):
            msg = f"detail must be 'low', 'high' or 'auto', got {safe_repr(detail, 80)}"
            raise ValueError(msg)
        return self._images.tokens(width, height, detail)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """What ``tools`` (LangChain tools, OpenAI tool dicts, pydantic models,
        functions) add to a request's ``prompt_tokens``: the OpenAI cookbook's
        rendering, extended to nested schemas (see the counting guide); 0 for none."""
        return tools_tokens(check_tools(tools), self._encode, self._tools)

    @property
    def overhead(self) -> int:
        """Tokens counted once per request: OpenAI's 3 reply-priming tokens."""
        return REPLY_PRIMING

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """The tokens of each message, in order (one int per message)."""
        check_messages(messages)
        count = self._fields
        with explain_bad_fields(messages):
            return [count(type(m), message_fields(m)) for m in messages]

    def _fields_counter(self) -> Callable[[Sequence[type], Sequence[Fields]], list[int]] | None:
        """How ``CachedCounter`` counts without copying messages: from each one's
        class and the ``message_fields`` it read (so the count is of exactly the
        values its key is made of). None when a subclass overrides ``count_each``."""
        if type(self).count_each is not TiktokenCounter.count_each:
            return None
        return self._count_fields

    def _count_fields(self, classes: Sequence[type], fields: Sequence[Fields]) -> list[int]:
        return list(map(self._fields, classes, fields))

    # Counting mirrors _convert_message_to_dict + get_num_tokens_from_messages, from
    # message_fields: content, name, additional_kwargs, type, then the class's own.

    def _fields(self, cls: type, f: Fields) -> int:
        n = self._per_message + self._value(f[0])
        kind = _kinds.get(cls)
        if kind is None:
            kind = _kinds[cls] = next((k for c, k in _KINDS if issubclass(cls, c)), _OTHER)
        extra = f[2]
        if kind == _USER:
            n += self._roles["user"]
        elif kind == _AI:
            n += self._roles["assistant"] + self._ai_extras(f[0], extra, f[4], f[5])
        elif kind == _TOOL:  # only content, role and tool_call_id are sent
            return n + self._roles["tool"] + TOOL_CALL_ID_TOKENS
        elif kind == _CHAT:
            n += self._role(f[4])
        elif kind == _SYSTEM:
            n += self._role(extra.get("__openai_role__", "system"))
        elif kind == _FUNCTION:
            n += self._roles["function"]
        else:
            n += self._role(f[3])
        name = f[1] or extra.get("name")
        if name or isinstance(name, list):  # falsy values are skipped
            n += self._value(name) + self._per_name
        return n

    def _value(self, v: object) -> int:
        """A message field: lists are content blocks, falsy values skipped, else str(v)."""
        if isinstance(v, str):
            return len(self._encode(v))
        if isinstance(v, list):
            return sum(map(self._block, v))
        return len(self._encode(str(v))) if v else 0

    def _role(self, role: object) -> int:
        if isinstance(role, str):
            role = str.__str__(role)  # a str subclass as the text it holds
            known = self._roles.get(role)
            if known is not None:
                return known
        return self._value(role)

    def _block(self, b: object) -> int:
        if isinstance(b, str):
            return len(self._encode(b))
        if isinstance(b, dict):
            known = self._dict_block(b)
            if known is not None:
                return known
        return _dumped_len(self._encode, b, _dump_block)

    def _dict_block(self, b: dict[str, Any]) -> int | None:
        """A content block's tokens, or None where ChatOpenAI would raise."""
        kind = b.get("type")
        if kind == "text":
            text = b.get("text")
            return len(self._encode(text)) if isinstance(text, str) else None
        if kind in ("image_url", "image"):
            return self._image(b)
        if kind == "file" or kind in DROPPED_BLOCKS:
            return 0
        fn = b.get("function") if kind == "function" else None
        if isinstance(fn, dict):
            args, name = fn.get("arguments"), fn.get("name")
            if isinstance(args, str) and isinstance(name, str):
                return len(self._encode(args)) + len(self._encode(name))
        return None

    def _image(self, block: dict[str, Any]) -> int:
        found = image_source(block)
        if found is None:
            return 0
        data, detail = found
        size = image_size(data) if isinstance(data, str) else None
        if size is not None:
            return self._images.tokens(*size, detail)
        low = self._images.low()
        return low if detail == "low" and low is not None else self._url_image_tokens

    def _optional(self, s: object) -> int:
        """A tool call's name or args: None (ChatOpenAI raises) costs 0."""
        if isinstance(s, str):
            return len(self._encode(s))
        return 0 if s is None else _dumped_len(self._encode, s, dump_args)

    def _ai_extras(
        self,
        content: object,
        extra: dict[str, Any],
        tool_calls: list[ToolCall],
        invalid_tool_calls: list[InvalidToolCall],
    ) -> int:
        n = 0
        if tool_calls or invalid_tool_calls:
            for call in tool_calls:
                n += _dumped_len(self._encode, call["args"], dump_args)
                n += self._optional(call["name"])
            for bad in invalid_tool_calls:
                n += self._optional(bad["args"]) + self._optional(bad["name"])
        elif "tool_calls" in extra:
            calls = extra["tool_calls"]
            if isinstance(calls, (list, tuple)):
                for c in calls:  # ChatOpenAI keeps only id, type and function
                    kept = {k: c[k] for k in TOOL_CALL_KEYS if k in c} if isinstance(c, dict) else c
                    n += self._block(kept)
            elif calls is not None:
                n += _dumped_len(self._encode, calls, _dump_block)
        elif "function_call" in extra:
            n += self._value(extra["function_call"])
        audio: object = None
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "audio" and (id_ := b.get("id")):
                    audio = {"id": id_}
        if not audio and "audio" in extra:
            raw = extra["audio"]
            audio = {"id": raw["id"]} if isinstance(raw, dict) and "id" in raw else raw
        return n + self._value(audio) if audio else n

    def _key(self) -> tuple[str | None, str, int, int, int]:
        return (
            self._model,
            self._encoding.name,
            self._per_message,
            self._per_name,
            self._url_image_tokens,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TiktokenCounter):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        what = f"encoding={self._encoding.name!r}"
        if self._model is not None:
            what = f"model={self._model!r}, {what}"
        if self._url_image_tokens != self._images.most():
            what = f"{what}, url_image_tokens={self._url_image_tokens}"
        return (
            f"TiktokenCounter({what}, tokens_per_message={self._per_message}, "
            f"tokens_per_name={self._per_name})"
        )
