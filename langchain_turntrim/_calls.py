"""The tool calls a message makes or answers, and its reasoning, in every
format they come in (see ``_anatomy``); what a request must leave out; and
the usage a reply reports."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_turntrim._anatomy import dicts
from langchain_turntrim._core import CONTINUE, PINNED, REPLY

__all__ = [
    "REASONING",
    "answered",
    "answers",
    "calls",
    "links",
    "links_of",
    "opens_with_reasoning",
    "reported_usage",
    "unmatched",
    "without",
]

#: Reasoning blocks: sent back unchanged, and never last in a message.
REASONING: Final = frozenset(("thinking", "redacted_thinking", "reasoning"))
#: Content blocks that call a tool, and the key holding the call's id.
_CALL_BLOCKS: Final = {"tool_use": "id", "tool_call": "id", "function_call": "call_id"}


def _type(block: object) -> object:
    return block.get("type") if isinstance(block, dict) else None


def calls(message: BaseMessage) -> set[str]:
    """The ids of the tool calls an assistant message makes, in any format."""
    found = {c["id"] for c in getattr(message, "tool_calls", ()) if c.get("id")}
    found.update(c["id"] for c in getattr(message, "invalid_tool_calls", ()) if c.get("id"))
    raw = message.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        found.update(str(c["id"]) for c in raw if isinstance(c, dict) and c.get("id"))
    for block in dicts(message.content):
        key = _CALL_BLOCKS.get(block.get("type"))  # type: ignore[arg-type]
        if key is not None and block.get(key):
            found.add(str(block[key]))
    return found


def answers(message: BaseMessage) -> list[str]:
    """The ids of the calls a result message answers."""
    tool_id = getattr(message, "tool_call_id", None)
    if tool_id:
        return [tool_id]
    return [
        str(b.get("tool_use_id")) for b in dicts(message.content) if b.get("type") == "tool_result"
    ]


def opens_with_reasoning(message: BaseMessage) -> bool:
    """Its content starts with a reasoning block (Anthropic refuses a turn in
    progress whose first assistant message lost its thinking)."""
    content = message.content
    return isinstance(content, list) and bool(content) and _type(content[0]) in REASONING


def links(message: BaseMessage, kind: int) -> tuple[str, ...]:
    """The ids of the calls a message of ``kind`` makes (a reply) or answers (a result)."""
    if kind == REPLY:
        return tuple(calls(message))
    return tuple(answers(message)) if kind == CONTINUE else ()


def links_of(
    messages: Sequence[BaseMessage], seen: Sequence[Any], i: int, sent: BaseMessage
) -> Any:
    """``links`` of ``sent`` (the message at ``i``, or a copy the trim made),
    remembered in its ``seen`` entry."""
    entry = seen[i]
    if sent is not messages[i]:
        return links(sent, entry.kind)
    if entry.links is None:
        entry.links = links(sent, entry.kind)
    return entry.links


def unmatched(kinds: Sequence[int], ids: Sequence[tuple[str, ...]]) -> dict[int, set[str]]:
    """What a request must leave out, by index, given each message's kind and
    ``links``: an assistant's calls that no result answers before the next user
    or assistant message, and results that answer no open call (pinned messages
    between them are moved first in a request, so they interrupt nothing)."""
    found: dict[int, set[str]] = {}
    reply, open_calls = -1, set[str]()
    for i, (kind, linked) in enumerate(zip(kinds, ids, strict=True)):
        if kind == PINNED:
            continue
        if kind == CONTINUE:
            for call in linked:
                if call in open_calls:
                    open_calls.discard(call)
                else:
                    found.setdefault(i, set()).add(call)
            continue
        if open_calls:
            found[reply] = open_calls
        reply, open_calls = i, set(linked)
    if open_calls:
        found[reply] = open_calls
    return found


def without(message: BaseMessage, ids: Iterable[str]) -> BaseMessage | None:
    """``message`` without the calls (or results) ``ids``: a new object of its
    class; None when nothing but reasoning would be left of it. A reasoning
    block is never left last: it goes with the call that followed it."""
    ids = set(ids)
    if isinstance(message, ToolMessage) or message.type == "function":
        return None  # its one result answers nothing
    update: dict[str, Any] = {}
    for field in ("tool_calls", "invalid_tool_calls"):
        listed = getattr(message, field, None)
        if listed:
            update[field] = [c for c in listed if c.get("id") not in ids]
    raw = message.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        kept = [c for c in raw if not (isinstance(c, dict) and str(c.get("id")) in ids)]
        extra = {k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"}
        update["additional_kwargs"] = {**extra, "tool_calls": kept} if kept else extra
    content: Any = message.content
    if isinstance(content, list):
        content = [b for b in content if not _made_or_answered(b, ids)]
        while content and _type(content[-1]) in REASONING:
            content.pop()
        update["content"] = content
    if _meaningful(content) or update.get("tool_calls") or update.get("invalid_tool_calls"):
        return message.model_copy(update=update)
    return None


def _meaningful(content: object) -> bool:
    """Whether ``content`` says anything beside reasoning and empty text."""
    if not isinstance(content, list):
        return bool(content)
    return any(isinstance(b, str) and b for b in content) or any(
        b.get("type") not in REASONING and b.get("text", True) for b in dicts(content)
    )


def _made_or_answered(block: object, ids: set[str]) -> bool:
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    key = "tool_use_id" if kind == "tool_result" else _CALL_BLOCKS.get(kind)  # type: ignore[arg-type]
    return key is not None and str(block.get(key)) in ids


def reported_usage(messages: Sequence[object]) -> tuple[int, int, int | None] | None:
    """``(input tokens, cache hits, cache writes)`` of the last assistant message
    that reports its input (``usage_metadata``, else the providers' raw figures:
    Anthropic's ``cache_*_input_tokens``, OpenAI's ``cached_tokens``); writes
    are None where the provider does not say (OpenAI: every uncached token)."""
    for message in reversed(messages):
        usage = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
        total = _natural(usage.get("input_tokens")) if usage else None
        if total is None:
            continue
        details = usage.get("input_token_details") or {}  # type: ignore[union-attr]
        read, written = _natural(details.get("cache_read")), _natural(details.get("cache_creation"))
        raw = message.response_metadata.get("usage") or message.response_metadata.get("token_usage")  # type: ignore[attr-defined]
        if isinstance(raw, dict):
            prompt = raw.get("prompt_tokens_details")
            if read is None:
                read = _natural(raw.get("cache_read_input_tokens")) or (
                    _natural(prompt.get("cached_tokens")) if isinstance(prompt, dict) else None
                )
            if written is None:
                written = _natural(raw.get("cache_creation_input_tokens"))
        read = min(read or 0, total)
        return total, read, None if written is None else min(written, total - read)
    return None


def _natural(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def answered(
    indices: list[int],
    kept: list[BaseMessage],
    kinds: list[int],
    ids: Sequence[tuple[str, ...]],
) -> tuple[list[int], list[BaseMessage], int, int]:
    """What is sent: the kept messages without the calls no result answers and
    the results that answer no call (a provider refuses either)."""
    found = unmatched([kinds[i] for i in indices], ids)
    if not found:
        return indices, kept, 0, 0
    calls = sum(len(ids) for p, ids in found.items() if kinds[indices[p]] == REPLY)
    results = sum(len(ids) for p, ids in found.items() if kinds[indices[p]] != REPLY)
    sent = [without(m, found[p]) if p in found else m for p, m in enumerate(kept)]
    pairs = [(i, m) for i, m in zip(indices, sent, strict=True) if m is not None]
    return [i for i, _ in pairs], [m for _, m in pairs], calls, results
