"""A message's text as compaction sees it: cleared to a note, or truncated around one.

New message objects only: the caller's messages are never changed.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    ToolMessage,
)

__all__ = ["is_result", "text", "tool_names", "truncate", "with_result_text", "with_text"]


def is_result(message: BaseMessage) -> bool:
    """A tool (or legacy function) result, or a human message of ``tool_result`` blocks."""
    return isinstance(message, (ToolMessage, FunctionMessage)) or (
        isinstance(message, HumanMessage) and tool_result_blocks(message.content) > 0
    )


def tool_result_blocks(content: object) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")


def tool_names(messages: Any) -> dict[str, str]:
    """Tool call id -> tool name, from the assistant messages' calls."""
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") and call.get("name"):
                    names[str(call["id"])] = str(call["name"])
    return names


def text(message: BaseMessage) -> str:
    """The text compaction may truncate: the content, or its text (and tool result) parts."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            inner = block.get("text") if block.get("type") == "text" else None
            if block.get("type") == "tool_result":
                inner = result_text(block.get("content"))
            if isinstance(inner, str):
                parts.append(inner)
    return "\n".join(parts)


def result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") if isinstance(b, dict) else str(b)
            for b in content
            if isinstance(b, (dict, str))
        )
    return ""


def with_text(message: BaseMessage, text: str) -> BaseMessage:
    """``message`` with its text replaced by ``text``: a new object, same id and calls.

    List content keeps its blocks that carry no text (tool uses, say) only
    where they are needed for the conversation to stay valid; images and
    other data are part of what is truncated.
    """
    content = message.content
    if isinstance(content, str):
        return message.model_copy(update={"content": text})
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    if results:
        return with_result_text(message, text)
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    other = len(content) - len(uses) - sum(1 for b in content if is_text_block(b))
    if other:
        text += f"\n[{other} non-text part(s) removed to fit the context]"
    kept: list[str | dict[str, Any]] = [{"type": "text", "text": text}, *uses]
    return message.model_copy(update={"content": kept})


def is_text_block(block: object) -> bool:
    return isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")


def with_result_text(message: BaseMessage, text: str) -> BaseMessage:
    """A tool result whose output is ``text`` (every ``tool_result`` block's, for a human one)."""
    content = message.content
    if isinstance(message, HumanMessage) and isinstance(content, list):
        blocks: list[str | dict[str, Any]] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                blocks.append({**block, "content": text})
            elif not (isinstance(block, dict) and block.get("type") == "text"):
                blocks.append(block)
        return message.model_copy(update={"content": blocks})
    return message.model_copy(update={"content": text})


def truncate(text: str, keep: int) -> str:
    """``text`` truncated to ``keep`` characters around a note: two thirds head,
    one third tail (the note's wording is what the model reads)."""
    if keep >= len(text):
        return text
    head = keep - keep // 3
    tail = keep - head
    removed = len(text) - keep
    note = f"\n[... {removed:,} characters cut to fit the context ...]\n"
    return text[:head] + note + (text[len(text) - tail :] if tail else "")
