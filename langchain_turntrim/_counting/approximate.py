"""``ApproximateCounter``: LangChain's ``count_tokens_approximately``, per message."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim._anatomy import fields_of, frozen
from langchain_turntrim._counting.base import Counter
from langchain_turntrim._counting.tools import check_tools, remembered, tool_json

__all__ = ["ApproximateCounter"]

_ROLE_CHARS: Final = {
    HumanMessage: len("user"),
    AIMessage: len("assistant"),
    ToolMessage: len("tool"),
}
#: ``ceil(chars / 4) + 3``, the function's rule with its defaults, is ``(chars + 15) // 4``.
_ROUNDING: Final = 15


@dataclass(frozen=True)  # no state: all are equal, and the repr is ApproximateCounter()
class ApproximateCounter(Counter):
    """``count_tokens_approximately`` one message at a time: it rounds up and adds 3
    per message, so the messages' counts sum to its count of the list. Counting
    costs less than a digest, so its counts are remembered by message object only."""

    by_content = False

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return self.count_fields(messages, list(map(fields_of, messages)))

    def count_fields(
        self, messages: Sequence[BaseMessage], fields: Sequence[tuple[Any, ...]]
    ) -> list[int]:
        """``count_each`` of ``messages`` holding ``fields`` (as ``fields_of`` reads
        them). The common messages are counted inline: the function's own checks
        and conversions cost several times the count (a test holds both equal)."""
        counts = []
        for message, read in zip(messages, fields, strict=True):
            cls, content = type(message), read[0]
            role = _ROLE_CHARS.get(cls)
            if role is None or type(content) is not str:
                counts.append(count_tokens_approximately([frozen(message, read)]))
                continue
            chars = len(content) + role + len(read[1] or "")
            if cls is ToolMessage:  # its tool_call_id
                chars += len(read[4])
            elif cls is AIMessage and read[4]:  # its tool_calls
                chars += len(repr(read[4]))
            counts.append((chars + _ROUNDING) // 4)
        return counts

    def count_tools(self, tools: Sequence[Any]) -> int:
        """``count_tokens_approximately([], tools=...)``, LangChain's estimate."""
        listed = check_tools(tools)
        return remembered("approximate", listed, lambda: _tools(listed))


def _tools(tools: list[Any]) -> int:
    from langchain_core.tools import BaseTool  # noqa: PLC0415 - costly to import

    given = [t if isinstance(t, (dict, BaseTool)) else json.loads(tool_json(t)) for t in tools]
    return count_tokens_approximately([], tools=given)
