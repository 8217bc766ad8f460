"""The token counter protocol every counter implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

__all__ = ["TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """An additive token counter.

    The tokens of a list of messages are ``overhead`` plus the sum of
    ``count_each(messages)``: each message costs the same wherever it stands,
    and a per-request constant (OpenAI's 3 reply-priming tokens, say) is
    counted once. Implementations must be pure (same message, same count) and
    thread-safe; ``TurnTrimmer`` caches their per-message counts.
    """

    @property
    def overhead(self) -> int:
        """Tokens counted once per request, whatever the messages."""
        ...

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """The tokens of each message, in order (one int per message)."""
        ...
