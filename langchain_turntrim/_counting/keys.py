"""What a message's count depends on: the cache's keys and the fields it watches."""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, ToolMessage

from langchain_turntrim._safe_repr import safe_repr

__all__ = ["fields_getter", "message_fields", "message_key"]


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


_COMMON_FIELDS: Final = ("content", "name", "additional_kwargs")
_FIELDS_BY_CLASS: Final = (
    (AIMessage, (*_COMMON_FIELDS, "tool_calls", "invalid_tool_calls")),
    (ToolMessage, (*_COMMON_FIELDS, "tool_call_id")),
    (ChatMessage, (*_COMMON_FIELDS, "role")),
)
_field_getters: dict[type, Callable[[dict[str, Any]], tuple[Any, ...]]] = {}


def fields_getter(message: BaseMessage) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
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
    return fields_getter(message)(vars(message))
