"""The two counter interfaces: what a user implements, and what the planner calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

if TYPE_CHECKING:
    from langchain_turntrim._core import TrimPlan

__all__ = ["ResolvedCounter", "TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """An additive token counter: the interface to implement for your own counting.

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


@runtime_checkable
class ResolvedCounter(Protocol):
    """A counter ready for planning: what ``resolve_counter`` returns and
    ``TurnTrimmer.counter`` holds.

    The planner, ``TurnTrimmer`` and the middleware call counters only
    through this interface. Two families implement it: additive counters
    (``ApproximateCounter``, ``CachedCounter`` and every ``TokenCounter``
    once resolved) and ``WholeListCounter`` (chat models and ``list -> int``
    functions, which only ever see valid conversations).
    """

    @property
    def blocking(self) -> bool:
        """True when counting may block (a provider's HTTP endpoint): async
        callers then run it in a thread."""
        ...

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        reserved: int = 0,
        trim_to: int | None = None,
    ) -> TrimPlan:
        """The spec's plan of ``messages`` for ``max_tokens``.

        ``kinds`` are the messages' turn kinds (None: the counter works them
        out with ``message_kinds``, only for the new messages of a history it
        remembers); ``reserved`` tokens (e.g. tool schemas) are paid once per
        request beside the messages, as part of ``overhead_tokens``; with
        ``trim_to``, the cut is at a stable boundary down to about ``trim_to``.
        """
        ...

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """The tokens of ``messages`` sent as one request, per-request
        constants included. ``messages`` must be a valid conversation (the
        system messages, then whole turns): a provider may reject others."""
        ...

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Each message's tokens: exact for additive counters, an estimate
        that sums to about ``count(messages)`` for whole-list ones."""
        ...

    def count_tools(self, tools: Sequence[Any]) -> int:
        """What the tool schemas bound to a model call cost (0 for none)."""
        ...
