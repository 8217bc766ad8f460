"""Tool calls without their results: finding them, and the copy sent without them.

A provider rejects a request in which an assistant's tool call is not
answered by a result right after it (before the next user or assistant
message): OpenAI and Anthropic both answer 400. Such a call is left in a
history by a run that stopped mid-step (a tool raised, the process was
interrupted). ``Calls`` finds them, in one pass that can be resumed as a
history grows; ``without`` is the copy of an assistant message without them
(its text, reasoning and other calls stay), or None when nothing is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import compress, islice
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction.edits import REASONING_BLOCKS
from langchain_turntrim._core import CONTINUE, REPLY, TrimPlan

__all__ = ["Calls", "Unanswered", "unanswered_calls", "with_unanswered", "without"]

#: The assistant messages whose calls have no result, by index, with those calls' ids.
Unanswered = tuple[tuple[int, frozenset[str]], ...]


def _ids(calls: Iterable[Any]) -> set[str]:
    """The ids of an assistant message's calls (valid or not), as str."""
    try:
        found = {c.get("id") for c in calls}
    except TypeError:  # an id that cannot be hashed
        found = {None}
    for i in found:
        if type(i) is not str or not i:  # a missing, empty or other id: made a str, or left out
            return {i if type(i) is str else str(i) for i in (c.get("id") for c in calls) if i}
    return found


def answered(message: BaseMessage) -> list[str]:
    """The calls a result message answers: a tool message's, or the
    ``tool_result`` blocks of a user message."""
    tool_id = getattr(message, "tool_call_id", None)
    if tool_id:
        return [str(tool_id)]
    content = message.content
    if isinstance(content, list):
        return [
            str(b.get("tool_use_id"))
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id")
        ]
    return []


class Calls:
    """The unanswered calls of a history, found as it is fed (resumable).

    ``unanswered`` maps the index of each assistant message with calls no
    result answered to their ids; the newest assistant message's calls not
    answered yet stay open (unanswered too if the history is sent as it is).
    Only assistant messages and the results right after them are read.
    """

    __slots__ = ("_open", "_reply", "size", "unanswered")

    def __init__(self) -> None:
        self.size = 0
        self.unanswered: dict[int, frozenset[str]] = {}
        self._open: set[str] = set()
        self._reply = -1

    def feed(self, messages: Sequence[BaseMessage], kinds: Sequence[int], start: int = 0) -> None:
        """Feed the messages after those fed so far (``kinds``: theirs), read
        from index ``start`` on (a turn's start: the calls before it are not
        looked at)."""
        base, n = self.size, len(messages)
        if not self._open and REPLY not in kinds:  # no call to look at (most of an agent's steps)
            self.size = base + n
            return
        if self._open:  # the results of the previous feed's last reply may go on
            start = _answer(self._open, messages, kinds, 0)
            if start < n:
                if self._open:
                    self.unanswered[self._reply] = frozenset(self._open)
                self._open = set()
        for i in compress(range(start, n), map(_IS_REPLY, islice(kinds, start, None))):
            message = messages[i]
            calls = getattr(message, "tool_calls", None)
            invalid = getattr(message, "invalid_tool_calls", None)
            if invalid:
                calls = [*calls, *invalid] if calls else invalid
            elif not calls:
                continue
            ids = _ids(calls)
            j = i + 1
            while ids and j < n and kinds[j] == CONTINUE:  # _answer, inlined: the hot loop
                result = messages[j]
                tool_id = getattr(result, "tool_call_id", None)
                if tool_id:
                    ids.discard(tool_id if type(tool_id) is str else str(tool_id))
                else:
                    ids.difference_update(answered(result))
                j += 1
            if ids:
                if j == n:
                    self._open, self._reply = ids, base + i
                else:
                    self.unanswered[base + i] = frozenset(ids)
        self.size = base + n

    def of_request(self) -> Unanswered:
        """Every unanswered call of the history sent as it is (the newest
        reply's open calls included), by index."""
        found = self.unanswered
        if self._open:
            found = {**found, self._reply: frozenset(self._open)}
        return tuple(sorted(found.items())) if found else ()


_IS_REPLY: Final = frozenset((REPLY,)).__contains__  # faster in C than ``REPLY.__eq__``


def _answer(ids: set[str], messages: Sequence[BaseMessage], kinds: Sequence[int], i: int) -> int:
    """Take from ``ids`` the calls the results from ``i`` on answer; the index
    where their run ends, or where nothing is left to answer."""
    n = len(messages)
    while ids and i < n and kinds[i] == CONTINUE:
        ids.difference_update(answered(messages[i]))
        i += 1
    return i


def unanswered_calls(
    plan: TrimPlan, messages: Sequence[BaseMessage], kinds: Sequence[int]
) -> TrimPlan:
    """``plan`` with the unanswered calls of what it may send: the messages
    from its first kept turn, or its newest turn, on (compaction keeps no
    other)."""
    calls = Calls()
    calls.feed(messages, kinds, min(plan.keep_from, plan.newest_turn_start))
    return with_unanswered(plan, calls.of_request())


def with_unanswered(plan: TrimPlan, unanswered: Unanswered) -> TrimPlan:
    """``plan`` with the unanswered calls found (itself when there are none)."""
    return plan.replaced(unanswered=unanswered) if unanswered else plan


def without(message: BaseMessage, ids: frozenset[str]) -> BaseMessage | None:
    """``message`` without the calls ``ids``: a new object of its class, or
    None when it would hold nothing but reasoning."""
    update: dict[str, Any] = {}
    for field in ("tool_calls", "invalid_tool_calls"):
        calls = getattr(message, field, None)
        if calls:
            update[field] = [c for c in calls if str(c.get("id")) not in ids]
    raw = message.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        kept = [c for c in raw if not (isinstance(c, dict) and str(c.get("id")) in ids)]
        update["additional_kwargs"] = {**message.additional_kwargs, "tool_calls": kept}
        if not kept:
            del update["additional_kwargs"]["tool_calls"]
    content = message.content
    if isinstance(content, list):
        blocks = [
            b
            for b in content
            if not (isinstance(b, dict) and b.get("type") == "tool_use" and str(b.get("id")) in ids)
        ]
        update["content"] = blocks
        meaningful = [
            b
            for b in blocks
            if not (isinstance(b, dict) and b.get("type") in REASONING_BLOCKS)
            and not (isinstance(b, dict) and b.get("type") == "text" and not b.get("text"))
            and b != ""
        ]
        content_left = bool(meaningful)
    else:
        content_left = bool(content)
    calls_left = bool(update.get("tool_calls") or update.get("invalid_tool_calls"))
    if not content_left and not calls_left:
        return None
    return message.model_copy(update=update)
