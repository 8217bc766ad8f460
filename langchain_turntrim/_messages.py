"""LangChain messages in, turn kinds out: the adapter between LangChain and the core."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import attrgetter
from typing import Any, Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    MessageLikeRepresentation,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue

from langchain_turntrim._core import (
    ANCHOR,
    CHAT_ROLE_KINDS,
    CONTINUE,
    PINNED,
    REPLY,
    START,
    describe,
)
from langchain_turntrim._core.kinds import positions
from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "CHAT_ROLE_KINDS",
    "SUMMARY_SOURCE",
    "TrimInput",
    "bad_field",
    "check_message_errors",
    "check_messages",
    "describe",
    "explain_bad_fields",
    "human_kind",
    "malformed_call",
    "message_kinds",
    "missing_field",
    "to_messages",
]

#: ``additional_kwargs["lc_source"]`` of the summary ``SummarizationMiddleware`` writes.
SUMMARY_SOURCE: Final = "summarization"

#: What every entry point accepts as a history.
TrimInput = PromptValue | Sequence[MessageLikeRepresentation]

_CHAT_ROLES: Final = ", ".join(repr(role) for role in CHAT_ROLE_KINDS)

# Subclasses (chunks included) are found by isinstance once, then by type.
_CLASS_KINDS: Final = (
    (SystemMessage, PINNED),
    (HumanMessage, START),
    (AIMessage, REPLY),
    (ToolMessage, CONTINUE),
    (FunctionMessage, CONTINUE),
)
_KIND_BY_TYPE: dict[type[BaseMessage], int] = dict(_CLASS_KINDS)
#: ``frozenset.__contains__`` scans a list in C faster than ``int.__eq__`` does.
_IS_START: Final = frozenset((START,)).__contains__
#: Up to this many messages, a history's kinds are scanned without ``positions``' bytes.
_SHORT: Final = 256
_CONTENT_AND_EXTRA: Final = attrgetter("content", "additional_kwargs")


def to_messages(value: object) -> list[BaseMessage]:
    """The messages of a prompt value or a sequence of message-likes.

    ``BaseMessage`` objects are returned as they are (never copied); tuples,
    dicts and strings are converted with LangChain's ``convert_to_messages``.
    Raises ``TypeError`` naming the index of anything that is not a message.
    """
    if isinstance(value, PromptValue):
        return value.to_messages()
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes, bytearray)):
        msg = f"expected a sequence of messages or a PromptValue, got {type(value).__name__}"
        raise TypeError(msg)
    if _all_messages(value):
        return list(value)  # the common case, in C-level passes
    return [m if isinstance(m, BaseMessage) else _convert_one(i, m) for i, m in enumerate(value)]


def _convert_one(index: int, item: Any) -> BaseMessage:
    try:
        return convert_to_messages([item])[0]
    except (TypeError, ValueError, NotImplementedError, KeyError) as error:
        what = f"{type(item).__name__} {safe_repr(item, 80)}"
        msg = f"{describe(index, item)} is not a message ({what}): {_reason(error)}"
        raise TypeError(msg) from error


def _reason(error: BaseException) -> str:
    """``str(error)``, never raising (LangChain's messages may repr the input)."""
    try:
        return str(error)
    except Exception:  # noqa: BLE001 - a message built from the input's own broken __repr__
        return type(error).__name__


#: The ``BaseMessage`` classes seen so far (a set only grows: classes are few).
_message_classes: set[type] = set()


def _all_messages(items: Sequence[object]) -> bool:
    """Whether every item is a ``BaseMessage``: its classes, one C-level pass,
    against the message classes seen before."""
    classes = set(map(type, items))
    if classes <= _message_classes:
        return True
    if all(issubclass(c, BaseMessage) for c in classes):
        _message_classes.update(classes)
        return True
    return False


def check_messages(messages: Sequence[object]) -> None:
    """Raise ``TypeError`` naming the first item that is not a ``BaseMessage``."""
    if _all_messages(messages):
        return
    for i, item in enumerate(messages):
        if not isinstance(item, BaseMessage):
            what = f"{type(item).__name__} {safe_repr(item, 80)}"
            msg = f"{describe(i, item)} is not a BaseMessage: {what}"
            raise TypeError(msg)


def check_message_errors(messages: Sequence[BaseMessage]) -> None:
    """Raise the error a message of ``messages`` gives (its kind's, a missing
    field's or a malformed tool call's), naming it by its index in
    ``messages``: for a caller that planned them behind another message (a
    request's system message)."""
    try:
        message_kinds(messages)
    except (TypeError, ValueError) as error:
        raise error from None
    explained = bad_field(messages)
    if explained is not None:
        raise explained from None


def missing_field(messages: Sequence[object]) -> ValueError | None:
    """The error naming the first message whose ``__dict__`` lacks a field its
    class declares (``del vars(message)["name"]``), or None.

    Counting reads fields straight from ``__dict__``; such a message fails
    there with a bare ``KeyError`` or ``AttributeError``, which this turns
    into one line naming the message, the field and what was expected.
    """
    for i, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            continue
        try:
            present = vars(message)
            missing = [name for name in type(message).model_fields if name not in present]
        except Exception:  # noqa: BLE001, S112 - an odd object: nothing to say about its fields
            continue
        if missing:
            names = ", ".join(repr(name) for name in missing)
            msg = (
                f"{describe(i, message)} has no {names} field{'s' if len(missing) > 1 else ''}: "
                f"expected every field {type(message).__name__} declares "
                "(one was deleted from the message's __dict__)"
            )
            return ValueError(msg)
    return None


#: The keys of a tool call (LangChain's ``ToolCall``) that counters read.
_CALL_KEYS: Final = ("name", "args")


def malformed_call(messages: Sequence[object]) -> TypeError | ValueError | None:
    """The error naming the first assistant message whose ``tool_calls`` or
    ``invalid_tool_calls`` was reassigned to something other than a list of
    tool call dicts with a ``name`` and ``args`` (LangChain validates them
    only when the message is made), or None."""
    for i, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        fields = vars(message)
        for field in ("tool_calls", "invalid_tool_calls"):
            calls = fields.get(field)
            if calls is None:
                continue
            where = f"{describe(i, message)}: {field}"
            if not isinstance(calls, (list, tuple)):
                what = f"{type(calls).__name__} {safe_repr(calls, 80)}"
                return TypeError(f"{where} must be a list of tool call dicts, got {what}")
            for k, call in enumerate(calls):
                if not isinstance(call, dict):
                    what = f"{type(call).__name__} {safe_repr(call, 80)}"
                    return TypeError(f"{where}[{k}] must be a tool call dict, got {what}")
                missing = [key for key in _CALL_KEYS if key not in call]
                if missing:
                    names = " and ".join(repr(key) for key in missing)
                    return ValueError(
                        f"{where}[{k}] has no {names}: a tool call holds 'name', 'args' and 'id'"
                    )
    return None


def bad_field(messages: Sequence[object]) -> TypeError | ValueError | None:
    """``missing_field``'s error, else ``malformed_call``'s, or None."""
    return missing_field(messages) or malformed_call(messages)


class explain_bad_fields:  # noqa: N801 - used as a function: `with explain_bad_fields(...)`
    """Re-raise a bare ``KeyError``/``AttributeError``/``TypeError`` from
    counting or planning ``messages`` as the error naming the message behind
    it (``bad_field``: a field deleted, or tool calls reassigned to something
    else); any other such error is raised as it is. A class rather than
    ``@contextmanager``: entered at every trim, it costs a fraction of a
    generator's setup."""

    __slots__ = ("messages",)

    def __init__(self, messages: Sequence[object]) -> None:
        self.messages = messages

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _tb: object
    ) -> None:
        if kind is None or not issubclass(kind, (KeyError, AttributeError, TypeError)):
            return
        explained = bad_field(self.messages)
        if explained is not None:
            raise explained from error


def message_kinds(messages: Sequence[BaseMessage]) -> list[int]:
    """The turn kind of each message (``PINNED``, ``START``, ``REPLY``, ``CONTINUE`` or ``ANCHOR``).

    Two kinds of human message do not start a turn:

    * tool results sent as a user message (Anthropic's native format: any
      ``tool_result`` block in the content) continue the open turn;
    * the summary LangChain's ``SummarizationMiddleware`` writes
      (``additional_kwargs["lc_source"] == "summarization"``) is an ``ANCHOR``:
      pinned, and opening a turn for the messages it precedes.
    """
    try:
        kinds: list[int] = list(map(_KIND_BY_TYPE.__getitem__, map(type, messages)))
    except KeyError:  # a class not seen yet, a chat role to read, or not a message
        kinds = list(map(_KIND_BY_TYPE.get, map(type, messages)))  # type: ignore[arg-type]
        for i, kind in enumerate(kinds):
            if kind is None:
                kinds[i] = _classify(i, messages[i])
    starts = (  # C-level scans
        positions(bytes(kinds), START)
        if len(kinds) > _SHORT
        else list(compress(range(len(kinds)), map(_IS_START, kinds)))
    )
    humans = list(map(messages.__getitem__, starts))
    for i, (content, extra) in zip(starts, map(_CONTENT_AND_EXTRA, humans), strict=True):
        if extra or type(content) is list:
            kinds[i] = human_kind(messages[i])
    return kinds


def human_kind(message: BaseMessage) -> int:
    """``START``, or what a tool-result or summary human message is instead."""
    if message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE:
        return ANCHOR
    content = message.content
    if isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    ):
        return CONTINUE
    return START


def _classify(index: int, message: object) -> int:
    if isinstance(message, ChatMessage):
        role: object = message.role  # may have been reassigned to anything
        if not isinstance(role, str):
            what = f"{type(role).__name__} {safe_repr(role, 80)}"
            msg = f"{describe(index, message)}: ChatMessage role must be a str, got {what}"
            raise TypeError(msg)
        role = str.__str__(role)  # a str subclass as the text it holds
        kind = CHAT_ROLE_KINDS.get(role)
        if kind is None:
            msg = (
                f"{describe(index, message)}: unknown ChatMessage role {role!r}; "
                f"accepted roles are {_CHAT_ROLES}"
            )
            raise ValueError(msg)
        return kind
    if isinstance(message, RemoveMessage):
        msg = (
            f"{describe(index, message)} is a RemoveMessage: it is a state update "
            "for LangGraph's add_messages, not part of a conversation to trim"
        )
        raise TypeError(msg)
    for cls, kind in _CLASS_KINDS:
        if isinstance(message, cls):
            _KIND_BY_TYPE[type(message)] = kind
            return kind
    msg = f"{describe(index, message)}: unsupported message type {type(message).__name__}"
    raise TypeError(msg)
