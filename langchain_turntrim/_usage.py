"""What a model's reply says about its input: ``usage_metadata``'s input
tokens and prompt-cache figures (with the providers' raw equivalents).

One reader for the calibration, the overflow retry and the middlewares'
cache figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage

__all__ = ["cache_usage", "reported_input_tokens"]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def cache_usage(messages: Sequence[Any]) -> tuple[int, int, int | None] | None:
    """``(input tokens, cache hits, cache writes)`` of the last AI message that
    reports its input: LangChain's ``usage_metadata`` (``input_token_details``
    ``cache_read`` and ``cache_creation``), else the providers' raw figures
    (Anthropic's ``cache_read_input_tokens``/``cache_creation_input_tokens``,
    OpenAI's ``prompt_tokens_details.cached_tokens``). Writes are None when
    the provider does not report them (OpenAI: every uncached token is)."""
    for message in reversed(messages):
        if not isinstance(message, AIMessage) or not message.usage_metadata:
            continue
        usage = message.usage_metadata
        total = _int(usage.get("input_tokens"))
        if total is None:
            continue
        details: Mapping[str, Any] = usage.get("input_token_details") or {}
        read, written = _int(details.get("cache_read")), _int(details.get("cache_creation"))
        raw = message.response_metadata.get("usage") or message.response_metadata.get("token_usage")
        if isinstance(raw, Mapping):
            if read is None:
                prompt = raw.get("prompt_tokens_details")
                read = _int(raw.get("cache_read_input_tokens")) or (
                    _int(prompt.get("cached_tokens")) if isinstance(prompt, Mapping) else None
                )
            if written is None:
                written = _int(raw.get("cache_creation_input_tokens"))
        read = min(read or 0, total)
        return total, read, None if written is None else min(written, total - read)
    return None


def reported_input_tokens(messages: Sequence[Any]) -> int | None:
    """The ``usage_metadata["input_tokens"]`` of the last AI message that has one."""
    usage = cache_usage(messages)
    return None if usage is None else usage[0]
