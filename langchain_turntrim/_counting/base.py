"""What a counter is: ``TokenCounter`` (additive), ``ListCounter`` (whole requests
only), the ``Counter`` base of the built-in ones, and the adapters of functions."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage, SystemMessage

from langchain_turntrim._anatomy import check, to_messages
from langchain_turntrim._core import check_count, describe, shown
from langchain_turntrim._counting.tools import check_tools, remembered, tool_json, tool_price

__all__ = ["Counter", "ListCounter", "TokenCounter", "checked_counts", "per_list", "per_message"]


@runtime_checkable
class TokenCounter(Protocol):
    """An additive counter, the interface to implement for your own counting.

    A request's tokens are ``overhead`` plus each message's count: a message
    costs the same wherever it stands, and a per-request constant (OpenAI's 3
    reply-priming tokens) is counted once. It must be pure (the same message,
    the same count) and thread-safe: counts are cached by message. An optional
    ``count_tools(tools) -> int`` prices tool schemas (else each schema is
    counted as a system message).
    """

    @property
    def overhead(self) -> int:
        """Tokens counted once per request, whatever the messages."""

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """The tokens of each message, in order."""


class Counter:
    """The base of the built-in counters: ``count`` is ``overhead``, each
    message's count and the tools' price; calling one counts a list, so it is
    also a LangChain token counter (``trim_messages(token_counter=...)``)."""

    overhead: int = 0
    #: Counting may block (a provider's endpoint): async callers use a thread.
    blocking = False
    #: Counting costs more than a digest: counts are also found by content.
    by_content = True

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        raise NotImplementedError

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Each tool's JSON schema counted as a system message."""
        listed = check_tools(tools)
        schemas = [SystemMessage(tool_json(tool)) for tool in listed]
        return remembered(("schemas", self), listed, lambda: sum(self.count_each(schemas)))

    def count(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The tokens of ``messages`` sent as one request with ``tools``."""
        counts = checked_counts(self.count_each(messages), messages, self)
        return self.overhead + sum(counts) + tool_price(self, tools)

    def __call__(self, messages: Sequence[Any]) -> int:
        return self.count(_checked(messages))


class _PerMessage(Counter):
    def __init__(self, function: Callable[[BaseMessage], int]) -> None:
        self.function = function

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return list(map(self.function, messages))

    def __repr__(self) -> str:
        return f"per_message({self.function!r})"


def per_message(function: Callable[[BaseMessage], int]) -> Counter:
    """``function(message) -> int``, summed over a request's messages."""
    if not callable(function):
        msg = f"per_message needs a callable, got {shown(function)}"
        raise TypeError(msg)
    return _PerMessage(function)


class ListCounter:
    """Counts only whole requests with ``function(messages) -> int`` (a chat
    model's ``get_num_tokens_from_messages``, perhaps a provider's endpoint, or a
    ``list -> int`` function), given only valid conversations: the system
    messages, then whole turns. ``takes_tools``: it takes ``tools=`` (after the
    bound ones); else tools are priced as LangChain's estimate, scaled to it."""

    blocking = True

    def __init__(
        self,
        function: Callable[..., int],
        *,
        takes_tools: bool = False,
        bound_tools: Sequence[Any] = (),
        name: str | None = None,
    ) -> None:
        self.function = function
        self.takes_tools = takes_tools
        self.bound_tools = list(bound_tools)
        self.name = name or repr(function)

    def count(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        tools = [*self.bound_tools, *tools]
        given = {"tools": tools} if tools and self.takes_tools else {}
        counted = check_count(self.function(list(messages), **given), f"the count of {self.name}")
        if not tools or given:
            return counted
        from langchain_turntrim._counting.approximate import ApproximateCounter  # noqa: PLC0415

        estimate = ApproximateCounter()
        guessed = estimate.count(messages)
        scale = counted / guessed if guessed and counted < 2**1000 else 1.0
        return counted + math.ceil(estimate.count_tools(tools) * scale)

    def __call__(self, messages: Sequence[Any]) -> int:
        return self.count(_checked(messages))

    def __repr__(self) -> str:
        return f"ListCounter({self.name})"


def per_list(function: Callable[..., int], *, takes_tools: bool = False) -> ListCounter:
    """``function(messages) -> int`` counts a whole list (like ``len``);
    ``takes_tools``: it also takes ``tools=[...]`` and counts them."""
    if not callable(function):
        msg = f"per_list needs a callable, got {shown(function)}"
        raise TypeError(msg)
    if not isinstance(takes_tools, bool):
        msg = f"takes_tools must be a bool, got {shown(takes_tools)}"
        raise TypeError(msg)
    return ListCounter(function, takes_tools=takes_tools)


def _checked(messages: Sequence[Any]) -> list[BaseMessage]:
    """``messages`` as messages, refused as a trim refuses them (but any role)."""
    converted = to_messages(messages)
    for i, message in enumerate(converted):
        check(i, message, roles=False)
    return converted


def checked_counts(
    counts: object,
    messages: Sequence[BaseMessage],
    counter: object,
    indices: Sequence[int] | None = None,
) -> list[int]:
    """``counts`` if one int >= 0 per message, else an error naming the message (at ``indices``)."""
    if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence):
        msg = f"{counter!r}.count_each returned {shown(counts)}, expected a list of ints"
        raise TypeError(msg)
    if len(counts) != len(messages):
        msg = f"{counter!r} returned {len(counts)} counts for {len(messages)} messages"
        raise ValueError(msg)
    for i, count in enumerate(counts):
        integer = isinstance(count, int) and not isinstance(count, bool)
        if not integer or count < 0:
            kind = ValueError if integer else TypeError
            where = describe(i if indices is None else indices[i], messages[i])
            msg = f"{counter!r} counted {where} as {shown(count)}, expected an int >= 0"
            raise kind(msg)
    return list(counts)
