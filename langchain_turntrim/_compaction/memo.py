"""The compactions of a remembered history, given again while nothing they
were made from has changed.

A trimmer called again on a history it compacted (an agent's retry, a second
hook on the same state, a re-run) would run the ladder again for the same
answer. ``HistoryMemo`` keeps, beside each remembered history, the last
``COMPACTIONS`` compactions made of it (``Compactions``), each with what it
was made from beyond the counted fields the memo itself checks on every plan:

* the plan's figures the ladder reads (the history's length, where the newest
  turn starts, the budget, the pinned messages' and the request's tokens)
  and ``keep_tool_results``;
* every field value of each message compaction copied, and of each copy
  (``fields_of``): a copy carries all its message's fields, and the caller
  may reassign one of a copy it was given;
* that no message of the history has extra fields.

So a compaction is given again (in new lists) only to a call whose plan
found the history unchanged, for a counter whose counts never change
(``counter.stable``). As in the count cache, a value edited in place
(appending to a content list) is not seen.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction.ladder import Compaction
from langchain_turntrim._core import TrimPlan

__all__ = ["COMPACTIONS", "Compactions"]

#: How many compactions of one history are remembered (the most recent ones).
COMPACTIONS: Final = 4
_EXTRA: Final = operator.attrgetter("__pydantic_extra__")
_CONTENT: Final = operator.itemgetter("content")


class _Remembered:
    """A compaction, and its copies with the messages they were made from."""

    __slots__ = ("compaction", "contents", "copies", "dicts", "key", "originals", "size")

    def __init__(
        self,
        key: tuple[int, ...],
        compaction: Compaction,
        originals: list[BaseMessage],
        copies: list[BaseMessage],
    ) -> None:
        self.key = key
        self.compaction = compaction
        self.originals, self.copies = originals, copies
        #: The field dicts of both (pydantic keeps one per object), the
        #: copies' contents, and how many fields each list holds in all.
        self.dicts = (list(map(vars, originals)), list(map(vars, copies)))
        self.contents = list(map(_CONTENT, self.dicts[1]))
        self.size = sum(map(len, self.dicts[1]))

    def faithful(self) -> bool:
        """Whether each copy still holds its content and, in every other field,
        what its message holds now (as when it was made), and neither has
        extra fields: then it is what the message (its counted fields
        unchanged) would be copied to again.

        One comparison a field: a message and its copy differ in their
        content alone, so the fields of both lists differ at one place a copy.
        """
        originals, copies = self.dicts
        is_ = operator.is_
        return (
            all(map(is_, map(vars, self.copies), copies))
            and all(map(is_, map(vars, self.originals), originals))
            and not any(map(_EXTRA, self.copies))
            and sum(map(len, copies)) == self.size == sum(map(len, originals))
            and all(map(is_, map(_CONTENT, copies), self.contents))
            and sum(map(operator.is_not, _values(copies), _values(originals))) == len(copies)
        )


def _values(dicts: list[dict[str, Any]]) -> Iterator[Any]:
    return chain.from_iterable(map(dict.values, dicts))


def _key(
    messages: Sequence[BaseMessage], plan: TrimPlan, keep_tool_results: int
) -> tuple[int, ...]:
    """What the ladder reads of the plan and the options (the tools are in the overhead)."""
    return (
        len(messages),
        plan.newest_turn_start,
        plan.max_tokens,
        plan.system_tokens,
        plan.overhead_tokens,
        keep_tool_results,
    )


def _fresh(compaction: Compaction) -> Compaction:
    """``compaction`` in new lists, so that no caller's change to one reaches the memo."""
    return dataclasses.replace(
        compaction,
        messages=list(compaction.messages),
        compacted=list(compaction.compacted),
        dropped=list(compaction.dropped),
    )


class Compactions:
    """The last ``COMPACTIONS`` compactions of one history (see the module).

    Its list is replaced, never changed in place, so a call reading it while
    another remembers one sees the old list or the new one.
    """

    __slots__ = ("_remembered",)

    def __init__(self) -> None:
        self._remembered: list[_Remembered] = []  # the most recent first

    def __len__(self) -> int:
        return len(self._remembered)

    def find(
        self, messages: Sequence[BaseMessage], plan: TrimPlan, keep_tool_results: int
    ) -> Compaction | None:
        """The compaction remembered for ``messages`` (whose counted fields the
        caller found unchanged) planned as ``plan``, if nothing else it was
        made from changed."""
        key = _key(messages, plan, keep_tool_results)
        for remembered in self._remembered:
            if remembered.key == key and not any(map(_EXTRA, messages)) and remembered.faithful():
                return _fresh(remembered.compaction)
        return None

    def remember(
        self,
        messages: Sequence[BaseMessage],
        plan: TrimPlan,
        keep_tool_results: int,
        compaction: Compaction,
    ) -> None:
        """Remember ``compaction``, made of ``messages`` planned as ``plan``."""
        if any(map(_EXTRA, messages)):
            return
        changed = compaction.changed
        originals, copies = [messages[i] for i in changed], list(changed.values())
        remembered = _Remembered(
            _key(messages, plan, keep_tool_results), _fresh(compaction), originals, copies
        )
        if remembered.faithful():  # a copy differs from its message in its content alone
            self._remembered = [remembered, *self._remembered[: COMPACTIONS - 1]]
