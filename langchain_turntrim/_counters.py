"""Token counters: the approximate one, function adapters, model counters and the cache.

Two shapes of counter reach the planner:

* a ``TokenCounter`` (additive: per-message counts plus a per-request
  constant), usually wrapped in a ``CachedCounter`` so that each message is
  tokenized once however often a growing history is re-trimmed;
* a ``WholeListCounter`` for anything that can only count whole lists
  (a chat model's ``get_num_tokens_from_messages``, a ``list -> int``
  function). It is only ever given valid chronological conversations: the
  system messages, then whole turns that start with a user message.
"""

from __future__ import annotations

import inspect
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim._core import check_max_tokens
from langchain_turntrim._deep import deep_repr, safe_repr
from langchain_turntrim._messages import check_messages
from langchain_turntrim._protocol import TokenCounter

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "ApproximateCounter",
    "CachedCounter",
    "WholeListCounter",
    "message_key",
    "per_list",
    "per_message",
    "resolve_counter",
]

#: Messages whose counts a ``CachedCounter`` keeps by default (LRU).
DEFAULT_CACHE_SIZE: Final = 16_384


def message_key(message: BaseMessage) -> Hashable:
    """What a message's count depends on: class, content, name, tool calls,
    tool call id, chat role and ``additional_kwargs``.

    Two messages with equal keys get the same count from every counter this
    package ships; editing any of these fields changes the key. The fields are
    those of ``message_fields``, spelled out here because this runs for every
    message a cache has not seen: deriving the key from ``message_fields``
    measured about 0.4 us a message slower.
    """
    content: Any = message.content
    if type(content) is not str:
        content = safe_repr(content)
    extra: Any = None
    if isinstance(message, AIMessage):
        if message.tool_calls or message.invalid_tool_calls:
            extra = safe_repr((message.tool_calls, message.invalid_tool_calls))
    elif isinstance(message, ToolMessage):
        extra = message.tool_call_id
    elif isinstance(message, ChatMessage):
        extra = message.role
    kwargs = message.additional_kwargs
    return (
        message.__class__,
        content,
        message.name,
        safe_repr(kwargs) if kwargs else None,
        extra,
    )


class _LRU:
    """A thread-safe LRU map. The lock guards dict operations only; callers
    compute values outside it."""

    def __init__(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 0:
            msg = f"cache size must be an int >= 0, got {maxsize!r}"
            raise ValueError(msg)
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get_many(self, keys: Sequence[Hashable]) -> list[int | None]:
        data = self._data
        get = data.get
        touch = data.move_to_end
        with self._lock:
            found = [get(key) for key in keys]
            for key, value in zip(keys, found, strict=True):
                if value is not None:
                    touch(key)
        return found

    def put_many(self, items: Sequence[tuple[Hashable, int]]) -> None:
        if not self.maxsize:
            return
        data = self._data
        with self._lock:
            for key, value in items:
                data[key] = value
                data.move_to_end(key)
            while len(data) > self.maxsize:
                data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_COMMON_FIELDS: Final = ("content", "name", "additional_kwargs")
_FIELDS_BY_CLASS: Final = (
    (AIMessage, (*_COMMON_FIELDS, "tool_calls", "invalid_tool_calls")),
    (ToolMessage, (*_COMMON_FIELDS, "tool_call_id")),
    (ChatMessage, (*_COMMON_FIELDS, "role")),
)
_field_getters: dict[type, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}


def _fields_getter(message: BaseMessage) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """An ``itemgetter`` of the fields that matter, over a message's ``__dict__``
    (pydantic keeps every field there; a dict lookup beats an attribute's)."""
    getter = _field_getters.get(type(message))
    if getter is None:
        names = next((n for c, n in _FIELDS_BY_CLASS if isinstance(message, c)), _COMMON_FIELDS)
        getter = _field_getters[type(message)] = operator.itemgetter(*names)
    return getter


def message_fields(message: BaseMessage) -> tuple[Any, ...]:
    """The field values a message's count depends on, as they are (not copied).

    ``CachedCounter`` remembers them for each message object it has counted:
    while the object's fields are these very objects (``is``, not ``==``: a
    value mutated in place would equal its new self), its count is reused
    without building its key.
    """
    return _fields_getter(message)(vars(message))


class CachedCounter:
    """Wraps a ``TokenCounter`` with bounded, thread-safe caches of per-message counts.

    Two layers, each holding at most ``maxsize`` entries:

    * by message object: a message seen before is recognised by identity (a
      weak reference) and its count reused while its fields still are the
      same objects (``message_fields``); reassigning a field
      (``message.content = ...``, as LangChain and LangGraph do) makes it
      count again. This is the warm path of an agent loop: no key is built.
    * by content (LRU): ``message_key(message)``, so an equal message in a
      new object (e.g. restored from a checkpoint) is not tokenized again.

    Editing a nested value in place (appending to a content list, changing a
    tool call's ``args`` dict) is not seen by the first layer: assign a new
    value instead, or call ``clear()``. Counting happens outside the locks,
    so threads never wait on each other's tokenization.
    """

    def __init__(self, counter: TokenCounter, maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if not isinstance(counter, TokenCounter):
            msg = f"CachedCounter wraps a TokenCounter, got {type(counter).__name__}"
            raise TypeError(msg)
        self.counter = counter
        self._cache = _LRU(maxsize)
        # id(message) -> (weak reference, fields getter, message_fields(message), count)
        self._known: dict[int, tuple[Any, ...]] = {}
        self._known_lock = threading.Lock()

    @property
    def overhead(self) -> int:
        return self.counter.overhead

    @property
    def maxsize(self) -> int:
        return self._cache.maxsize

    def __len__(self) -> int:
        """Number of cached counts (by content)."""
        return len(self._cache)

    def clear(self) -> None:
        self._cache.clear()
        with self._known_lock:
            self._known.clear()

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        known = self._known.get
        counts: list[int | None] = []
        append = counts.append
        is_ = operator.is_
        for m in messages:
            # entry: (weak reference, fields getter, message_fields(m), count)
            entry = known(id(m))
            if entry is not None and entry[0]() is m and all(map(is_, entry[2], entry[1](vars(m)))):
                append(entry[3])
            else:
                append(None)
        unknown = [i for i, count in enumerate(counts) if count is None]
        if unknown:
            self._count_unknown(messages, unknown, counts)
        return counts  # type: ignore[return-value]

    def _count_unknown(
        self, messages: Sequence[BaseMessage], unknown: list[int], counts: list[int | None]
    ) -> None:
        keys = [message_key(messages[i]) for i in unknown]
        cached = self._cache.get_many(keys)
        missing = [j for j, count in enumerate(cached) if count is None]
        if missing:
            fresh = self.counter.count_each([messages[unknown[j]] for j in missing])
            if len(fresh) != len(missing):
                msg = (
                    f"{type(self.counter).__name__}.count_each returned {len(fresh)} counts "
                    f"for {len(missing)} messages"
                )
                raise ValueError(msg)
            for j, value in zip(missing, fresh, strict=True):
                cached[j] = value
            self._cache.put_many([(keys[j], cached[j]) for j in missing])  # type: ignore[misc]
        remembered = []
        for i, count in zip(unknown, cached, strict=True):
            counts[i] = count
            m = messages[i]
            entry = (weakref.ref(m), _fields_getter(m), message_fields(m), count)
            remembered.append((id(m), entry))
        self._remember(remembered)

    def _remember(self, entries: list[tuple[int, tuple[Any, ...]]]) -> None:
        maxsize = self.maxsize
        if not maxsize:
            return
        known = self._known
        with self._known_lock:
            known.update(entries)
            while len(known) > maxsize:  # oldest first: dicts keep insertion order
                del known[next(iter(known))]

    def __repr__(self) -> str:
        return f"CachedCounter({self.counter!r}, maxsize={self.maxsize})"


class ApproximateCounter:
    """LangChain's ``count_tokens_approximately``, one message at a time.

    That function rounds up per message and adds a fixed amount per message,
    so it is additive: the sum of per-message counts equals its count of the
    whole list. It is never wrapped in a ``CachedCounter``: counting a message
    costs less than building its cache key.
    """

    overhead: Final = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        return [_approximate(m) for m in messages]

    def __repr__(self) -> str:
        return "ApproximateCounter()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApproximateCounter)

    def __hash__(self) -> int:
        return hash(ApproximateCounter)


# count_tokens_approximately, for the common messages, without its per-call
# overhead (converting its input, checking its options), which costs several
# times the count itself. A test checks both agree on every kind of message.
_ROLE_LENGTHS: Final = {
    HumanMessage: len("user"),
    AIMessage: len("assistant"),
    ToolMessage: len("tool"),
}


def _approximate(message: BaseMessage) -> int:
    """``count_tokens_approximately([message])`` with its default options."""
    content = message.content
    role = _ROLE_LENGTHS.get(type(message))
    if role is None or type(content) is not str:
        return _approximate_any(message)
    chars = len(content) + role + (len(message.name) if message.name else 0)
    if type(message) is ToolMessage:
        chars += len(message.tool_call_id)
    elif type(message) is AIMessage and message.tool_calls:
        try:
            chars += len(repr(message.tool_calls))
        except RecursionError:
            return _approximate_any(message)
    return -(-chars // 4) + 3


def _approximate_any(message: BaseMessage) -> int:
    try:
        return count_tokens_approximately((message,))
    except RecursionError:
        # Nested deeper than repr can go: count the same characters, flattened.
        text = deep_repr(message.content)
        update: dict[str, Any] = {"content": text}
        if isinstance(message, AIMessage) and message.tool_calls:
            update = {"content": text + deep_repr(message.tool_calls), "tool_calls": []}
        return count_tokens_approximately((message.model_copy(update=update),))


class _MessageFunctionCounter:
    """A ``BaseMessage -> int`` function, summed over the messages."""

    overhead: Final = 0

    def __init__(self, function: Callable[[BaseMessage], int]) -> None:
        self.function = function

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        check_messages(messages)
        return list(map(self.function, messages))

    def __repr__(self) -> str:
        return f"per_message({self.function!r})"


class WholeListCounter:
    """Counts only whole, valid conversations with a ``list -> int`` function.

    Used for chat models (``get_num_tokens_from_messages``, which may be a
    provider's count endpoint that rejects invalid conversations) and for
    ``list[BaseMessage] -> int`` functions. It is only ever called with the
    system messages followed by whole turns in chronological order, and the
    kept list is counted once more at the end so the budget holds exactly
    even when the function is not additive. Turn counts are cached (LRU).
    """

    def __init__(
        self,
        function: Callable[[list[BaseMessage]], int],
        maxsize: int = DEFAULT_CACHE_SIZE,
        *,
        label: str | None = None,
    ) -> None:
        if not callable(function):
            msg = f"WholeListCounter needs a callable, got {type(function).__name__}"
            raise TypeError(msg)
        self.function = function
        self.label = label or repr(function)
        self._cache = _LRU(maxsize)

    @property
    def maxsize(self) -> int:
        return self._cache.maxsize

    def __len__(self) -> int:
        return len(self._cache)

    def count(self, messages: list[BaseMessage]) -> int:
        """The function's count of ``messages``, cached by the messages' keys."""
        key = tuple(message_key(m) for m in messages)
        (cached,) = self._cache.get_many((key,))
        if cached is not None:
            return cached
        value = check_max_tokens(self.function(messages), f"the count of {self.label}")
        self._cache.put_many(((key, value),))
        return value

    def __repr__(self) -> str:
        return f"WholeListCounter({self.label})"


#: What ``resolve_counter`` returns.
Counter = TokenCounter | WholeListCounter


def per_message(function: Callable[[BaseMessage], int]) -> TokenCounter:
    """Say explicitly that ``function`` counts one message (``BaseMessage -> int``).

    The list's count is the sum of the messages' counts.
    """
    if not callable(function):
        msg = f"per_message needs a callable, got {type(function).__name__}"
        raise TypeError(msg)
    return _MessageFunctionCounter(function)


def per_list(function: Callable[[list[BaseMessage]], int]) -> WholeListCounter:
    """Say explicitly that ``function`` counts a whole list (``list[BaseMessage] -> int``),
    like ``len`` or ``count_tokens_approximately``."""
    return WholeListCounter(function)


def _first_parameter_is_message(function: Callable[..., Any]) -> bool:
    """``trim_messages``' rule: a function whose first parameter is annotated
    ``BaseMessage`` counts one message; anything else counts a list. The
    string ``"BaseMessage"`` (postponed annotations) counts too."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    first = next(iter(parameters), None)
    return first is not None and first.annotation in (BaseMessage, "BaseMessage")


def resolve_counter(token_counter: object, cache_size: int = DEFAULT_CACHE_SIZE) -> Counter:
    """Turn what a user passed as ``token_counter`` into a ready counter.

    Accepted: ``"approximate"``; a ``TokenCounter`` (wrapped in a
    ``CachedCounter`` unless ``cache_size`` is 0 or it already is one); a
    ``WholeListCounter``; an OpenAI chat model (counted exactly and locally by
    ``TiktokenCounter``); any other object with ``get_num_tokens_from_messages``;
    ``count_tokens_approximately``; any other callable, by the annotation rule
    of ``trim_messages`` (use ``per_message``/``per_list`` to say it
    explicitly). Anything else raises ``TypeError``/``ValueError`` now.
    """
    counter: object = token_counter
    if isinstance(counter, str):
        if counter != "approximate":
            msg = f"unknown token_counter shortcut {counter!r}; the only shortcut is 'approximate'"
            raise ValueError(msg)
        counter = ApproximateCounter()
    elif counter is count_tokens_approximately:
        counter = ApproximateCounter()
    if isinstance(counter, (CachedCounter, WholeListCounter, ApproximateCounter)):
        return counter
    if isinstance(counter, TokenCounter):
        check_max_tokens(counter.overhead, f"{type(counter).__name__}.overhead")
        return CachedCounter(counter, cache_size) if cache_size else counter
    if hasattr(counter, "get_num_tokens_from_messages"):
        exact = _local_counter_for_model(counter)
        if exact is not None:
            return CachedCounter(exact, cache_size) if cache_size else exact
        return WholeListCounter(
            counter.get_num_tokens_from_messages,
            cache_size,
            label=f"{type(counter).__name__}.get_num_tokens_from_messages",
        )
    if callable(counter):
        if _first_parameter_is_message(counter):
            return resolve_counter(per_message(counter), cache_size)
        return WholeListCounter(counter, cache_size)
    msg = (
        "token_counter must be 'approximate', a TokenCounter, a chat model with "
        "get_num_tokens_from_messages, or a function (wrap it in per_message or "
        f"per_list to say which); got {type(token_counter).__name__} {token_counter!r:.80}"
    )
    raise TypeError(msg)


def _local_counter_for_model(model: object) -> TokenCounter | None:
    """The exact local counter for a chat model, where one exists.

    OpenAI chat models (``langchain_openai.BaseChatOpenAI`` and subclasses)
    count with tiktoken; ``TiktokenCounter`` gives the same numbers without
    a provider round trip. A model with a custom ``custom_get_token_ids``
    keeps its own counting.
    """
    if not type(model).__module__.startswith("langchain_openai"):
        return None
    from langchain_openai.chat_models.base import BaseChatOpenAI  # noqa: PLC0415

    if not isinstance(model, BaseChatOpenAI) or model.custom_get_token_ids is not None:
        return None
    from langchain_turntrim._tiktoken import TiktokenCounter  # noqa: PLC0415

    return TiktokenCounter(model.tiktoken_model_name or model.model_name)
