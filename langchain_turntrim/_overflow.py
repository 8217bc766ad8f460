"""Recovering from a provider's context-overflow error, without an LLM call.

A count can be off: an estimate not yet calibrated, a provider that counts
differently. Then the provider refuses the request as too long. LangChain
raises ``ContextOverflowError`` for that (``ChatOpenAI`` and others do), and
the providers' own errors say the same in their words:

* OpenAI: ``context_length_exceeded``, "maximum context length is M tokens.
  However, your messages resulted in N tokens" (or "you requested N tokens
  (A in the messages, B in the completion)");
* Anthropic: "prompt is too long: N tokens > M maximum";
* Gemini: "The input token count (N) exceeds the maximum number of tokens
  allowed (M)"; others: "input is too long", "exceeds the context window".

``overflow_of`` recognises them and reads the figures where they are given
(the tokens the provider counted, its limit). ``Recovery`` learns from them
how much more the provider counts than the counter, tightens the budget by
that (for this call's retry and every later call), and feeds a
``CalibratedCounter`` the provider's count.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["DEFAULT_OVERFLOW_RETRIES", "Overflow", "Recovery", "overflow_of"]

#: How many times a model call is retried after a context-overflow error.
DEFAULT_OVERFLOW_RETRIES: Final = 1
#: The share of what was sent kept when the provider gives no figures.
_BLIND_SHRINK: Final = 0.8
#: Room left below the provider's limit, as a share of it.
_HEADROOM: Final = 0.02

_PHRASES: Final = (
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "input token count",
    "input tokens exceed",
    "contextwindowexceedederror",
)
# Each pattern gives the provider's count (``sent``) and its limit (``limit``).
_FIGURES: Final = (
    # Anthropic: prompt is too long: 210343 tokens > 200000 maximum
    re.compile(r"(?P<sent>\d[\d,]*)\s*tokens?\s*>\s*(?P<limit>\d[\d,]*)\s*maximum"),
    # OpenAI: maximum context length is 8192 tokens. However, you requested 9000 tokens
    # (7000 in the messages, 2000 in the completion)
    re.compile(
        r"maximum context length is (?P<limit>\d[\d,]*) tokens.*?"
        r"(?P<sent>\d[\d,]*) in the messages(?:, (?P<completion>\d[\d,]*) in the completion)?",
        re.DOTALL,
    ),
    # OpenAI: maximum context length is 8192 tokens. However, your messages resulted in 9000
    re.compile(
        r"maximum context length is (?P<limit>\d[\d,]*) tokens.*?"
        r"resulted in (?P<sent>\d[\d,]*) tokens",
        re.DOTALL,
    ),
    # Gemini: The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)
    re.compile(
        r"input token count \((?P<sent>\d[\d,]*)\) exceeds the maximum number of tokens "
        r"allowed \((?P<limit>\d[\d,]*)\)"
    ),
    # OpenAI Responses: Input tokens exceed the configured limit of 272000 tokens. Your
    # messages resulted in 283748 tokens.
    re.compile(
        r"limit of (?P<limit>\d[\d,]*) tokens.*?resulted in (?P<sent>\d[\d,]*) tokens", re.DOTALL
    ),
)


@dataclass(frozen=True)
class Overflow:
    """A provider's context-overflow error, and its figures where it gave them."""

    error: BaseException
    #: The tokens the provider counted for the request it refused.
    sent: int | None = None
    #: The most it takes for the messages (its window, less the completion
    #: it was asked for when it says so).
    limit: int | None = None

    def figures(self) -> dict[str, Any]:
        """What the trace and the re-raised error carry."""
        return {"provider_tokens": self.sent, "provider_limit": self.limit}


def overflow_of(error: BaseException) -> Overflow | None:
    """The overflow ``error`` reports, or None when it is another error."""
    text = _text(error)
    lowered = text.lower()
    is_overflow = _is_context_overflow(error) or any(p in lowered for p in _PHRASES)
    if not is_overflow:
        return None
    for pattern in _FIGURES:
        match = pattern.search(text)
        if match is not None:
            found = {k: int(v.replace(",", "")) for k, v in match.groupdict().items() if v}
            limit = found.get("limit")
            if limit is not None and "completion" in found:  # the room left for the messages
                limit = max(0, limit - found["completion"])
            return Overflow(error, found.get("sent"), limit)
    return Overflow(error)


def _is_context_overflow(error: BaseException) -> bool:
    try:
        from langchain_core.exceptions import ContextOverflowError  # noqa: PLC0415
    except ImportError:  # pragma: no cover - langchain-core before 1.2.10
        return False
    return isinstance(error, ContextOverflowError)


def _text(error: BaseException) -> str:
    parts = [str(error)]
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        parts.append(repr(body))
    return " ".join(parts)


class Recovery:
    """What a series of model calls learned from overflows: how many tokens the
    provider counts per token the counter counts, as the share of the budget
    to trim to (``scale``: 1 until an overflow). Thread-safe.
    """

    def __init__(self) -> None:
        self.scale = 1.0
        self._lock = threading.Lock()

    def budget(self, max_tokens: int) -> int:
        """The budget to trim to, ``max_tokens`` shrunk by what was learned."""
        scale = self.scale
        return max_tokens if scale <= 1 else math.floor(max_tokens / scale)

    def learn(
        self, overflow: Overflow, counted: int, max_tokens: int, budget: int, *, persist: bool
    ) -> int:
        """The budget to retry with, after the provider refused a request the
        counter counted ``counted`` tokens, trimmed to ``budget`` (the
        configured one being ``max_tokens``); with ``persist``, later calls
        trim to the same share.

        With the provider's count, the retry keeps its limit (its own figure,
        else ``max_tokens``) less 2%, in the counter's units; without it, 80%
        of what was sent. Always less than ``budget``.
        """
        if overflow.sent is not None and counted > 0:
            ratio = overflow.sent / counted
            window = overflow.limit if overflow.limit is not None else max_tokens
            retry = math.floor(window * (1 - _HEADROOM) / ratio)
        else:  # 80% of what was sent (which may be well under the budget)
            retry = math.floor(min(budget, max(counted, 0)) * _BLIND_SHRINK)
        retry = max(0, min(retry, budget - 1))
        if persist:
            with self._lock:
                scale = max_tokens / retry if retry else float(max(max_tokens, 1))
                self.scale = max(self.scale, scale)
        return retry
