"""``WholeListCounter``: a counter that only counts whole requests."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import check_count
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.keys import fields_keys, frozen_copy, message_fields
from langchain_turntrim._counting.lru import SizedLRU
from langchain_turntrim._counting.tools import tools_key
from langchain_turntrim._options import DEFAULT_CACHE_SIZE
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["DEFAULT_CACHE_BYTES", "WholeListCounter"]

#: The most bytes a ``WholeListCounter``'s cache holds by default (32 MiB).
DEFAULT_CACHE_BYTES: Final = 32 * 2**20

_ESTIMATE: Final = ApproximateCounter()
#: A message's part of a key: its ``(class, digest)`` pair and the digest.
_MESSAGE_KEY_BYTES: Final = sys.getsizeof((object, bytes(32))) + sys.getsizeof(bytes(32))
#: An entry's own: the dict slot, the key's outer tuple, the count.
_ENTRY_BYTES: Final = 64 + sys.getsizeof((0, 0)) + sys.getsizeof(2**40)


class WholeListCounter:
    """Counts whole requests with a ``list -> int`` function.

    Used for chat models (``get_num_tokens_from_messages``, which may be a
    provider's count endpoint that rejects invalid conversations) and for
    ``list[BaseMessage] -> int`` functions (``per_list``). A planner only ever
    gives it valid conversations: the system messages, then a user message
    and whole turns in order.

    Tools: a function that takes them (``takes_tools``: a model whose own
    ``get_num_tokens_from_messages`` counts tools, or ``per_list(...,
    takes_tools=True)``) is given them as ``tools=``, with the tools it was
    bound with (``bound_tools``) first; for any other function they are priced
    as LangChain's approximate estimate of them, scaled by the function's
    count of the same messages over their approximate count.

    Counts are cached (LRU, ``cache_size`` requests) by the messages' keys
    (``message_key``) and the tools' (``tools_key``); the function is given
    frozen copies of the messages (``frozen_copy``), so a count is always of
    the very fields it is filed under. ``cache_size=None`` (what ``per_list``
    gives) leaves the size to the trimmer it is given to. A key holds about
    130 bytes a message, so the cache is bounded in bytes too: at most
    ``cache_bytes`` (``DEFAULT_CACHE_BYTES``, 32 MiB, by default) of keys
    and counts, the least recently used requests leaving first (a request
    whose key alone is larger is not cached).
    """

    #: The function may be a provider's HTTP endpoint: async callers use a thread.
    blocking = True

    def __init__(
        self,
        function: Callable[..., int],
        cache_size: int | None = DEFAULT_CACHE_SIZE,
        *,
        takes_tools: bool = False,
        bound_tools: Sequence[Any] = (),
        label: str | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        if not callable(function):
            msg = f"WholeListCounter needs a callable, got {type(function).__name__}"
            raise TypeError(msg)
        self.function = function
        self.takes_tools = takes_tools
        self.bound_tools = list(bound_tools)
        self.label = label or safe_repr(function)
        self.sized = cache_size is not None
        self._cache: SizedLRU[int] = SizedLRU(
            DEFAULT_CACHE_SIZE if cache_size is None else cache_size,
            cache_bytes,
            "cache_size",
            "cache_bytes",
        )

    @property
    def cache_size(self) -> int:
        return self._cache.maxsize

    @property
    def cache_bytes(self) -> int:
        """The most bytes the cache holds."""
        return self._cache.maxbytes

    @property
    def cached_bytes(self) -> int:
        """The bytes the cache holds now (its keys and counts, as ``sys.getsizeof`` sizes them)."""
        return self._cache.nbytes

    def resized(self, cache_size: int) -> WholeListCounter:
        """The same counter with a cache of ``cache_size`` requests (and a size of its own)."""
        return WholeListCounter(
            self.function,
            cache_size,
            takes_tools=self.takes_tools,
            bound_tools=self.bound_tools,
            label=self.label,
            cache_bytes=self.cache_bytes,
        )

    def __len__(self) -> int:
        return len(self._cache)

    def clear(self) -> None:
        self._cache.clear()

    def count(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
        """The function's count of ``messages`` sent with ``tools``, cached."""
        every_tool = [*self.bound_tools, *tools]
        fields = [message_fields(m) for m in messages]
        key = self._key(messages, fields, every_tool)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        copies = [frozen_copy(m, f) for m, f in zip(messages, fields, strict=True)]
        if every_tool and self.takes_tools:
            value = self._checked(self.function(copies, tools=every_tool))
        else:
            value = self._checked(self.function(copies))
            if every_tool:
                value += self._tools_estimate(copies, every_tool, value)
        if key is not None:
            self._cache.put(key, value, _entry_bytes(key))
        return value

    def remembered(self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int | None:
        """The cached count of ``messages`` with ``tools``, if there is one
        (the function is not called)."""
        fields = [message_fields(m) for m in messages]
        return self._cache.get(self._key(messages, fields, [*self.bound_tools, *tools]))

    @staticmethod
    def _key(
        messages: Sequence[BaseMessage], fields: list[Any], tools: list[Any]
    ) -> tuple[Any, ...] | None:
        """What a count is cached under: the messages' keys and the tools' (None: not cached)."""
        keys = fields_keys(list(map(type, messages)), fields)
        tool_keys = tools_key(tools) if tools else ()
        return None if None in keys or tool_keys is None else (tuple(keys), tool_keys)

    def _checked(self, value: object) -> int:
        return check_count(value, f"the count of {self.label}")

    @staticmethod
    def _tools_estimate(messages: Sequence[BaseMessage], tools: Sequence[Any], counted: int) -> int:
        """The tools' approximate price in this function's units: scaled by its
        count of ``messages`` over their approximate count."""
        approximate = _ESTIMATE.count(messages)
        scale = counted / approximate if approximate else 1.0
        return math.ceil(_ESTIMATE.count_tools(tools) * scale)

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """An estimate per message (the approximate counter's): a whole-list
        function cannot price one message alone."""
        return _ESTIMATE.count_each(messages)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start with an empty cache (a lock cannot be copied)."""
        cache_size = self.cache_size if self.sized else None
        return (
            _restore,
            (
                self.function,
                cache_size,
                self.takes_tools,
                self.bound_tools,
                self.label,
                self.cache_bytes,
            ),
        )

    def __repr__(self) -> str:
        return f"WholeListCounter({self.label})"


def _restore(
    function: Callable[..., int],
    cache_size: int | None,
    takes_tools: bool,  # noqa: FBT001 - positional, from __reduce__
    bound_tools: list[Any],
    label: str,
    cache_bytes: int,
) -> WholeListCounter:
    return WholeListCounter(
        function,
        cache_size,
        takes_tools=takes_tools,
        bound_tools=bound_tools,
        label=label,
        cache_bytes=cache_bytes,
    )


def _entry_bytes(key: tuple[Any, ...]) -> int:
    """What a cached count of the request keyed ``key`` holds: the entry,
    the tuple of message keys and each message's key, the tools' key."""
    messages, tools = key
    return (
        _ENTRY_BYTES
        + sys.getsizeof(messages)
        + len(messages) * _MESSAGE_KEY_BYTES
        + sys.getsizeof(tools)
        + len(tools) * _MESSAGE_KEY_BYTES
    )
