"""The two counter interfaces: what a user implements, and what every resolved counter offers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

__all__ = ["ResolvedCounter", "TokenCounter", "refuse_class"]


@runtime_checkable
class TokenCounter(Protocol):
    """An additive token counter: the interface to implement for your own counting.

    The tokens of a list of messages are ``overhead`` plus the sum of
    ``count_each(messages)``: each message costs the same wherever it stands,
    and a per-request constant (OpenAI's 3 reply-priming tokens, say) is
    counted once. Implementations must be pure (same message, same count) and
    thread-safe; ``TurnTrimmer`` caches their per-message counts. An optional
    ``count_tools(tools) -> int`` prices tool schemas (else each schema is
    counted as a system message).
    """

    @property
    def overhead(self) -> int:
        """Tokens counted once per request, whatever the messages."""
        ...

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """The tokens of each message, in order (one int per message)."""
        ...


@runtime_checkable
class ResolvedCounter(Protocol):
    """What ``resolve_counter`` returns and ``TurnTrimmer.counter`` holds: it
    only counts (planning is the planner's, chosen by the counter's family).

    Two families implement it: additive counters (``AdditiveCounter``:
    ``ApproximateCounter``, ``TiktokenCounter``, ``CachedCounter``,
    ``CalibratedCounter`` and every ``TokenCounter`` once resolved), whose
    count of a request is the sum of its parts, and ``WholeListCounter``
    (chat models and ``list -> int`` functions), which counts only whole,
    valid requests.
    """

    @property
    def blocking(self) -> bool:
        """True when counting may block (a provider's HTTP endpoint): async
        callers then run it in a thread."""
        ...

    def count(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The tokens of ``messages`` sent as one request with ``tools``,
        per-request constants included. ``messages`` must be a valid
        conversation (the system messages, then whole turns): a provider may
        reject others."""
        ...

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Each message's tokens: exact for additive counters, an estimate
        (the approximate counter's) for whole-list ones."""
        ...


def refuse_class(value: object, argument: str) -> None:
    """Raise ``TypeError`` when ``value`` is a counter's (or a chat model's)
    class rather than one of them: ``token_counter=ApproximateCounter`` would
    pass every check at construction (a class has its methods) and fail at
    every trim instead."""
    if isinstance(value, type) and any(
        hasattr(value, name) for name in ("count_each", "get_num_tokens_from_messages")
    ):
        name = value.__name__
        msg = f"{argument} is the class {name}, not a counter: pass an instance of it, {name}(...)"
        raise TypeError(msg)
