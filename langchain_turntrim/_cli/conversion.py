"""A transcript's message dicts as LangChain messages, naming the first wrong one.

The one part of reading a transcript that needs LangChain: plain transcripts
counted with tiktoken never import it (see ``planning``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from pydantic import ValidationError

from langchain_turntrim._cli.diagnostics import a_json_type
from langchain_turntrim._cli.diagnostics import problem as diagnosed
from langchain_turntrim._cli.transcript import InputError, Transcript, where

__all__ = ["to_messages"]


def to_messages(transcript: Transcript) -> list[BaseMessage]:
    """Convert each message dict with LangChain, naming the first one that is wrong."""
    messages: list[BaseMessage] = []
    append = messages.append
    for index, item in enumerate(transcript.messages):
        if type(item) is not dict:
            msg = f"{where(transcript, index)} must be a JSON object, got {a_json_type(item)}"
            raise InputError(msg)
        message = _with_content(item)
        try:
            append(convert_to_messages([message])[0])
        except (TypeError, ValueError, KeyError, AttributeError, NotImplementedError) as error:
            problem = diagnosed(message) or _first_line(error)
            msg = f"{where(transcript, index)}: {problem}"
            raise InputError(msg) from error
    return messages


def _with_content(message: dict[str, Any]) -> dict[str, Any]:
    """OpenAI may omit ``content`` beside tool calls; LangChain requires the key."""
    if "content" in message or not (message.get("tool_calls") or message.get("function_call")):
        return message
    return {**message, "content": None}


def _first_line(error: BaseException) -> str:
    """LangChain's reason, in one line (pydantic's: the field and the reason)."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return f"{field!r}: {first['msg']}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
