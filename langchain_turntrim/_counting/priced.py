"""What a ``CalibratedCounter`` remembers of the request a plan priced last.

``observe`` is told what was sent, and that is usually what the trim just
kept: the planner counted those messages with the base counter moments ago.
A count is taken again only by the memo's identity rule: each message the
very object the plan priced, each of its counted fields the very object its
count was made from, so a count taken is the count counting would give.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import chain
from typing import NamedTuple

from langchain_core.messages import BaseMessage

from langchain_turntrim._counting.keys import Fields, read_fields

__all__ = ["Priced", "reused"]


class Priced(NamedTuple):
    """What a plan kept of a remembered history: its pinned messages before
    ``keep_from``, then every message from ``keep_from`` to ``size``. The
    history's messages, the fields each was counted from
    (``message_fields``) and their base counts are its lists, which only
    grow: nothing is copied until ``observe`` asks (most trims are not
    observed before the next one)."""

    messages: Sequence[BaseMessage]
    fields: Sequence[Fields]
    base: Sequence[int]
    pinned: tuple[int, ...]
    keep_from: int
    size: int


def reused(priced: Priced | None, messages: Sequence[BaseMessage]) -> list[int] | None:
    """The base counts of ``messages`` noted in ``priced``, if they are what it
    kept (the same objects, in order) and each counted field is still the
    object it was counted from; else None (they are to be counted)."""
    if priced is None:
        return None
    kept = [*priced.pinned, *range(priced.keep_from, priced.size)]
    if len(kept) != len(messages):
        return None
    is_ = operator.is_
    if not all(map(is_, map(priced.messages.__getitem__, kept), messages)):
        return None
    fields = read_fields(messages, range(len(messages)))[1]
    fields_of = chain.from_iterable
    then = fields_of(map(priced.fields.__getitem__, kept))
    if not all(map(is_, fields_of(fields), then)):
        return None
    return list(map(priced.base.__getitem__, kept))
