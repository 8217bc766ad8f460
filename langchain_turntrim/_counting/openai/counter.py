"""``TiktokenCounter``: ``ChatOpenAI.get_num_tokens_from_messages``, per message
and offline, without importing ``langchain_openai`` or building request dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import tiktoken
from langchain_core import messages as lc

from langchain_turntrim._core import check_count, shown
from langchain_turntrim._counting.base import Counter
from langchain_turntrim._counting.openai.encodings import encoding_name_for_model, load_encoding
from langchain_turntrim._counting.openai.images import image_pricing, image_size, image_source
from langchain_turntrim._counting.openai.tools import dump, tools_tokens
from langchain_turntrim._counting.tools import check_tools

__all__ = ["TiktokenCounter"]

#: Content blocks ChatOpenAI drops from Chat Completions requests.
DROPPED: Final = frozenset(
    ("tool_use", "thinking", "reasoning_content", "function_call", "code_interpreter_call")
)
ROLES: Final = ("user", "assistant", "system", "developer", "function", "tool")


class TiktokenCounter(Counter):
    """Count OpenAI chat tokens per message exactly as ``ChatOpenAI`` does, offline.

    ``counter(messages)`` equals ``ChatOpenAI(model=model).get_num_tokens_from_messages
    (messages)`` wherever ChatOpenAI succeeds, images aside; ``count_tools`` prices
    tool schemas as OpenAI's cookbook does. ``model`` (default ``"gpt-4o"``) picks
    the encoding as ChatOpenAI does (tiktoken's, else ``o200k_base`` for names
    starting with ``gpt-4o``, ``gpt-4.1``, ``gpt-5``, ``gpt-6``), a fine-tune's
    (``"ft:BASE:..."``) by its base; another name raises ``ValueError`` naming the
    closest known ones (ChatOpenAI would guess). A tiktoken encoding name, or
    ``encoding=`` (a name or a ``tiktoken.Encoding``), prices images like gpt-4o,
    tools with the cookbook's gpt-4o constants for ``o200k*`` encodings, else its
    gpt-4 ones. A message costs 4 tokens and a name -1 for ``gpt-3.5-turbo-0301``,
    else 3 and 1.
    A missing encoding file is downloaded within ``TURNTRIM_DOWNLOAD_TIMEOUT``
    seconds (30), never with ``TURNTRIM_OFFLINE=1``, else
    ``EncodingUnavailableError`` says how to provide it.

    Where ChatOpenAI fails or guesses, this counter never raises, warns or fetches:

    * Text that spells a special token (``"<|endoftext|>"``) is ordinary text.
    * An image costs what OpenAI's vision guide says for the model (``image_tokens``),
      its size read from base64 data; without one (a URL, a file id) it costs
      ``url_image_tokens`` (default: the most the model charges), or a tile-priced
      model's base at ``"low"`` detail. ``"auto"`` is ``"high"``.
    * ``file`` blocks and blocks ChatOpenAI drops cost 0, blocks it rejects the
      tokens of their ``json.dumps(sort_keys=True, default=str)``.
    * A ``None`` tool-call name or arguments costs 0.
    * A message of another class counts as a ``ChatMessage`` whose role is its ``type``.

    Counters are immutable and thread-safe, and equal when they count alike.
    """

    overhead = 3  # reply priming, <|im_start|>assistant

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | tiktoken.Encoding | None = None,
        url_image_tokens: int | None = None,
    ) -> None:
        if not isinstance(model, (str, type(None))):
            msg = f"model must be a str, got {shown(model)}"
            raise TypeError(msg)
        if encoding is None and model in tiktoken.list_encoding_names():
            model, encoding = None, model
        if model is not None and encoding is not None:
            msg = "pass either model or encoding to TiktokenCounter, not both"
            raise ValueError(msg)
        if encoding is None:
            model = "gpt-4o" if model is None else model
            if not model.strip():
                msg = "model must be a non-empty model name"
                raise ValueError(msg)
            encoding = encoding_name_for_model(model)
        if isinstance(encoding, str):
            encoding = load_encoding(encoding)
        elif not isinstance(encoding, tiktoken.Encoding):
            msg = f"encoding must be a str or a tiktoken.Encoding, got {shown(encoding)}"
            raise TypeError(msg)
        per = (4, -1) if model and model.startswith("gpt-3.5-turbo-0301") else (3, 1)
        self._model, self._encoding, (self._per_message, self._per_name) = model, encoding, per
        self._encode = encoding.encode_ordinary
        self._roles = {role: len(self._encode(role)) for role in ROLES}
        self._images = image_pricing(model)
        url = self._images.most() if url_image_tokens is None else url_image_tokens
        self._url_image_tokens = check_count(url, "url_image_tokens")
        #: What equal counters share: they count every message alike.
        self._key = (model, encoding.name, *per, self._url_image_tokens)

    @property
    def model(self) -> str | None:
        """The model name, or ``None`` when built from an encoding."""
        return self._model

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding text is counted with."""
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
        for name, side in (("width", width), ("height", height)):
            if check_count(side, name) < 1:
                msg = f"{name} must be >= 1, got {side}"
                raise ValueError(msg)
        if detail not in {"low", "high", "auto"}:
            msg = f"detail must be 'low', 'high' or 'auto', got {shown(detail)}"
            raise ValueError(msg)
        return self._images.tokens(width, height, detail)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """What ``tools`` (LangChain tools, OpenAI tool dicts, pydantic models,
        functions) add to a request, as the OpenAI cookbook renders them."""
        return tools_tokens(check_tools(tools), self._encoding)

    def count_each(self, messages: Sequence[lc.BaseMessage]) -> list[int]:
        """Each message's tokens: ``_convert_message_to_dict``, then
        ``get_num_tokens_from_messages``'s count of each key of the dict."""
        return list(map(self._message, messages))

    def _message(self, message: lc.BaseMessage) -> int:
        """The fields ``_convert_message_to_dict`` sends, counted as ChatOpenAI does."""
        extra = message.additional_kwargs
        n = self._per_message + self._value(message.content)
        role: object
        if isinstance(message, lc.ChatMessage):
            role = message.role
        elif isinstance(message, lc.HumanMessage):
            role = "user"
        elif isinstance(message, lc.AIMessage):
            role = "assistant"
            n += self._ai_extras(message)
        elif isinstance(message, lc.SystemMessage):
            role = extra.get("__openai_role__", "system")
        elif isinstance(message, lc.FunctionMessage):
            role = "function"
        elif isinstance(message, lc.ToolMessage):  # only content, role and tool_call_id are sent
            return n + self._roles["tool"] + 3  # ChatOpenAI's 3 for any tool_call_id
        else:
            role = message.type
        known = self._roles.get(role) if isinstance(role, str) else None
        n += self._value(role) if known is None else known
        name = message.name or extra.get("name")
        if name or isinstance(name, list):  # ChatOpenAI skips other falsy values
            n += self._value(name) + self._per_name
        return n

    def _value(self, value: object) -> int:
        """A message field: a list is content blocks, a falsy value is skipped, else ``str``."""
        if isinstance(value, list):
            return sum(map(self._block, value))
        return len(self._encode(str(value))) if value else 0

    def _block(self, block: object) -> int:
        """A content block as ChatOpenAI counts it; one it rejects, as its sorted JSON."""
        if isinstance(block, str):
            return len(self._encode(block))
        if isinstance(block, dict):
            kind = block.get("type")
            function = block.get("function") if kind == "function" else None
            if kind == "text" and isinstance(block.get("text"), str):
                return len(self._encode(block["text"]))
            if kind in {"image_url", "image"}:
                return self._image(block)
            if kind == "file" or kind in DROPPED:
                return 0
            if isinstance(function, dict):
                args, name = function.get("arguments"), function.get("name")
                if isinstance(args, str) and isinstance(name, str):
                    return len(self._encode(args)) + len(self._encode(name))
        return len(self._encode(dump(block, sort_keys=True)))  # ChatOpenAI raises

    def _image(self, block: dict[str, Any]) -> int:
        """An image by its size in the request, never fetched; else ``url_image_tokens``."""
        found = image_source(block)
        if found is None:  # dropped by ChatOpenAI
            return 0
        data, detail = found
        size = image_size(data) if isinstance(data, str) else None
        if size is not None:
            return self._images.tokens(*size, detail)
        if detail == "low" and not self._images.multiplier:  # a tile-priced model's base
            return self._images.base
        return self._url_image_tokens

    def _call_part(self, value: object) -> int:
        """A tool call's name or args: ``None`` (ChatOpenAI raises) costs 0."""
        if value is None:
            return 0
        return len(self._encode(value if isinstance(value, str) else dump(value)))

    def _ai_extras(self, message: lc.AIMessage) -> int:
        """An assistant's tool calls, function call and audio id."""
        n, extra = 0, message.additional_kwargs
        if message.tool_calls or message.invalid_tool_calls:
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                n += self._call_part(call["args"]) + self._call_part(call["name"])
        elif "tool_calls" in extra:  # raw OpenAI calls: a function block each
            raw = extra["tool_calls"]
            n += sum(map(self._block, raw)) if isinstance(raw, (list, tuple)) else 0
        elif "function_call" in extra:
            n += self._value(extra["function_call"])
        audio: object = None
        if isinstance(message.content, list):
            for block in message.content:
                if isinstance(block, dict) and block.get("type") == "audio" and block.get("id"):
                    audio = {"id": block["id"]}
        if not audio and "audio" in extra:
            raw = extra["audio"]
            audio = {"id": raw["id"]} if isinstance(raw, dict) and "id" in raw else raw
        return n + self._value(audio) if audio else n

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TiktokenCounter):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        model = "" if self._model is None else f"model={self._model!r}, "
        url = self._url_image_tokens
        url_shown = "" if url == self._images.most() else f", url_image_tokens={url}"
        return (
            f"TiktokenCounter({model}encoding={self._encoding.name!r}{url_shown}, "
            f"tokens_per_message={self._per_message}, tokens_per_name={self._per_name})"
        )
