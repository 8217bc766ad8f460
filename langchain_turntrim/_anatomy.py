"""What a LangChain message holds, in every format it comes in: its turn kind
and the fields its count depends on (its calls and reasoning: ``_calls``).

Tool calls appear as ``tool_calls`` (every integration), raw OpenAI calls in
``additional_kwargs``, Anthropic ``tool_use`` blocks, OpenAI Responses
``function_call`` blocks and LangChain v1 ``tool_call`` blocks; results as
``ToolMessage`` or a user message's Anthropic ``tool_result`` blocks; reasoning
as Anthropic ``thinking``/``redacted_thinking`` blocks and Responses or v1
``reasoning`` blocks. ``check`` refuses, naming the message, any field a
counter or this module could not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue

from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START, describe, shown
from langchain_turntrim._core.records import ROLE_KINDS

__all__ = ["GETTERS", "check", "dicts", "fields_of", "frozen", "to_messages"]

#: How a ``ChatMessage`` counts, by its role: a record's roles, and LangChain's names.
CHAT_ROLES: Final = {**ROLE_KINDS, "human": START, "ai": REPLY}
#: ``additional_kwargs["lc_source"]`` of the summary ``SummarizationMiddleware`` writes.
SUMMARY_SOURCE: Final = "summarization"
#: Each message class's turn kind (a ``ChatMessage``'s is its role's); the
#: first four are the common ones, which ``check`` reads fast.
_CLASSES: Final = (
    (SystemMessage, PINNED),
    (HumanMessage, START),
    (AIMessage, REPLY),
    (ToolMessage, CONTINUE),
    (FunctionMessage, CONTINUE),
    (ChatMessage, -1),
)
_COMMON: Final = ("content", "name", "additional_kwargs", "type")
_OWN: Final = {AIMessage: ("tool_calls", "invalid_tool_calls"), ToolMessage: ("tool_call_id",)}
#: The getter of each message class's counted fields, over its ``__dict__``.
GETTERS: dict[type, itemgetter[Any]] = {}
_NAMES: dict[type, tuple[str, ...]] = {}


def to_messages(value: object) -> list[BaseMessage]:
    """The messages of a ``PromptValue`` or a sequence of message-likes (what
    ``convert_to_messages`` takes); ``BaseMessage`` items are never copied."""
    if isinstance(value, PromptValue):
        return value.to_messages()
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        msg = f"expected a sequence of messages or a PromptValue, got {type(value).__name__}"
        raise TypeError(msg)
    if all(issubclass(cls, BaseMessage) for cls in set(map(type, value))):
        return list(value)  # the usual case, in C-level passes
    return [m if isinstance(m, BaseMessage) else _converted(i, m) for i, m in enumerate(value)]


def _converted(index: int, item: object) -> BaseMessage:
    try:
        return convert_to_messages([item])[0]  # type: ignore[list-item]
    except (TypeError, ValueError, KeyError, AttributeError, NotImplementedError) as error:
        msg = f"{describe(index, item)} is not a message ({shown(item)}): {error}"
        raise TypeError(msg) from error


def fields_of(message: BaseMessage) -> tuple[Any, ...]:
    """The fields a count depends on: content, name, ``additional_kwargs``,
    type, and the class's own (tool calls, the call a result answers, a role)."""
    cls = type(message)
    get = GETTERS.get(cls)
    if get is None:
        own = next((own for base, own in _OWN.items() if issubclass(cls, base)), ())
        if issubclass(cls, ChatMessage):
            own = ("role",)
        _NAMES[cls] = (*_COMMON, *own)
        get = GETTERS[cls] = itemgetter(*_NAMES[cls])
    return get(message.__dict__)  # type: ignore[no-any-return]


def frozen(message: BaseMessage, fields: tuple[Any, ...]) -> BaseMessage:
    """A shallow copy of ``message`` holding ``fields`` (read by ``fields_of``):
    a counter given it counts exactly them, whatever another thread assigns
    to ``message`` meanwhile."""
    copy = message.__copy__()
    copy.__dict__.update(zip(_NAMES[type(message)], fields, strict=True))
    return copy


def check(index: int, message: object, *, roles: bool = True) -> int:
    """The turn kind of ``message``, after checking every field a count reads;
    ``TypeError``/``ValueError`` naming it and the field otherwise (``roles``:
    a ``ChatMessage`` role no turn kind is known for among them)."""
    kind = _PLAIN.get(type(message))
    if kind is not None:  # the common messages, checked in a few C-level tests
        try:
            read = fields_of(message)  # type: ignore[arg-type]
        except KeyError:  # a field deleted: the full check names it
            read = ()
        if (
            read
            and type(read[0]) is str
            and type(read[1]) in _NAMES_OK
            and type(read[2]) is dict
            and (
                kind == PINNED
                or (kind == START and "lc_source" not in read[2])
                or (kind == CONTINUE and type(read[4]) is str)
                or (kind == REPLY and not read[5] and _plain_calls(read[4]))
            )
        ):
            return kind
    try:
        return _kind(message, roles)
    except _BadField as bad:
        msg = f"{describe(index, message)}{bad.text}"
        raise bad.kind(msg) from None


_PLAIN: Final[dict[type, int]] = dict(_CLASSES[:4])
_NAMES_OK: Final = (str, type(None))


def _plain_calls(calls: object) -> bool:
    """A list of dicts, each with a str name, dict args and a str or no id."""
    return type(calls) is list and all(
        type(c) is dict
        and type(c.get("name")) is str
        and type(c.get("args")) is dict
        and type(c.get("id")) in _NAMES_OK
        for c in calls
    )


class _BadField(Exception):  # noqa: N818 - not an error until check names the message
    """What is wrong with a message, before ``check`` says which message it is."""

    def __init__(self, kind: type[Exception], text: str) -> None:
        self.kind, self.text = kind, text


def _kind(message: object, roles: bool) -> int:  # noqa: FBT001 - private
    kind = next((k for cls, k in _CLASSES if isinstance(message, cls)), None)
    if kind is None or not isinstance(message, BaseMessage):
        if isinstance(message, RemoveMessage):
            raise _BadField(TypeError, " is a RemoveMessage: a state update, not a message to trim")
        raise _BadField(TypeError, f" is not a supported message: {shown(message)}")
    try:
        fields = fields_of(message)
    except KeyError as error:
        raise _BadField(
            ValueError, f" has no {error} field (it was deleted from the message)"
        ) from None
    content, name, extra = fields[0], fields[1], fields[2]
    _check_content(content)
    _expect("name", name, (str, type(None)))
    _expect("additional_kwargs", extra, dict)
    if isinstance(message, AIMessage):
        _check_calls("tool_calls", fields[4], strict=True)
        _check_calls("invalid_tool_calls", fields[5], strict=False)
    elif isinstance(message, ToolMessage):
        _expect("tool_call_id", fields[4], str)
    elif isinstance(message, ChatMessage):
        _expect("role", fields[4], str)
        kind = CHAT_ROLES.get(fields[4], -1)
        if kind < 0 and roles:
            accepted = ", ".join(CHAT_ROLES)
            raise _BadField(
                ValueError, f": unknown ChatMessage role {fields[4]!r}; accepted: {accepted}"
            )
    if kind == START:
        if extra.get("lc_source") == SUMMARY_SOURCE:
            return ANCHOR
        if any(b.get("type") == "tool_result" for b in dicts(content)):
            return CONTINUE
    return kind


def _expect(name: str, value: object, types: type | tuple[type, ...]) -> None:
    if not isinstance(value, types):
        listed = types if isinstance(types, tuple) else (types,)
        wanted = " or ".join("None" if t is type(None) else f"a {t.__name__}" for t in listed)
        raise _BadField(TypeError, f": {name} must be {wanted}, got {shown(value)}")


def _check_content(content: object) -> None:
    _expect("content", content, (str, list))
    for k, block in enumerate(content if isinstance(content, list) else ()):
        _expect(f"content[{k}]", block, (str, dict))
        if isinstance(block, dict) and block.get("type") == "text":
            _expect(f"content[{k}]['text']", block.get("text"), str)


def _check_calls(field: str, calls: object, *, strict: bool) -> None:
    _expect(field, calls, list)
    for k, call in enumerate(cast("list[dict[str, Any]]", calls)):
        _expect(f"{field}[{k}]", call, dict)
        for key, types in (("name", str), ("args", dict), ("id", (str, type(None)))):
            if strict and key != "id" and key not in call:
                text = f": {field}[{k}] has no {key!r}: a tool call has a name, args and id"
                raise _BadField(ValueError, text)
            allowed = types if strict else (str, type(None))
            if key in call:
                _expect(f"{field}[{k}][{key!r}]", call[key], allowed)


def dicts(content: object) -> list[dict[str, Any]]:
    """The dict blocks of a list content."""
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
