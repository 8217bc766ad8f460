"""Fitting the compacted newest turn to the budget, in the counter's own units.

* an additive counter: the ladder runs on the counter's own per-message
  counts, with the room the budget leaves beside the pinned messages and the
  request's constant; the result is counted once more (exactly);
* a whole-list counter: the ladder can only run on per-message estimates,
  so the room is searched for instead, each candidate counted whole: first
  the skeleton (if even it does not fit, nothing can), then rooms
  interpolated between the largest candidate that fits and the smallest that
  does not, at most ``WHOLE_LIST_COUNTS`` counts in all.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction.copies import Copies
from langchain_turntrim._compaction.ladder import PINNED_KINDS, Compaction, CountEach, Ladder
from langchain_turntrim._core import TrimPlan, request_order
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.whole_list import WholeListCounter
from langchain_turntrim._errors import overflow_error
from langchain_turntrim._messages import message_kinds

__all__ = ["WHOLE_LIST_COUNTS", "fit", "fit_additive", "fit_whole_list"]

#: Exact recounts of the compacted list before giving up: an additive counter
#: needs one (a ``TokenCounter`` that is not quite additive may need more).
_ATTEMPTS: Final = 4
#: The most whole-list counts one compaction makes (the skeleton's included).
WHOLE_LIST_COUNTS: Final = 6
#: The most rooms tried (ladder runs are local; only new requests are counted).
_SEARCH_STEPS: Final = 16


class _Turn:
    """The newest turn of ``messages``: its messages in the ladder, and the
    pinned messages before it."""

    def __init__(self, messages: Sequence[BaseMessage], kinds: Sequence[int], start: int) -> None:
        self.messages = messages
        self.kinds = kinds
        self.start = start
        pinned = list(map(PINNED_KINDS.__contains__, kinds))
        self.before = list(compress(range(start), pinned[:start]))
        self.indices = list(compress(range(start, len(kinds)), map(operator.not_, pinned[start:])))

    def request(self, attempt: _Attempt) -> list[BaseMessage]:
        """What a whole-list counter counts of an attempt: its messages in a
        request's order (``request_order``), as the planner counts every request."""
        kept = dict(zip(attempt.indices, attempt.kept, strict=True))
        return [kept[i] for i in request_order(attempt.indices, self.kinds)]

    def ladder(
        self,
        count_each: CountEach,
        keep_tool_results: int,
        room: int,
        copies: Copies | None = None,
    ) -> _Attempt:
        ladder = Ladder(
            self.messages, self.indices, self.kinds, count_each, keep_tool_results, copies
        )
        fits = ladder.run(room)
        indices = ladder.kept_indices(self.kinds, self.before, self.start)
        return _Attempt(ladder, indices, ladder.result(self.messages, indices), fits=fits)


class _Attempt:
    __slots__ = ("fits", "indices", "kept", "ladder", "total")

    def __init__(
        self, ladder: Ladder, indices: list[int], kept: list[BaseMessage], *, fits: bool
    ) -> None:
        self.ladder = ladder
        self.indices = indices
        self.kept = kept
        self.fits = fits
        self.total = 0

    def outcome(self) -> Compaction:
        return self.ladder.outcome(self.kept, self.indices, self.total)


def fit(
    messages: Sequence[BaseMessage],
    plan: TrimPlan,
    counter: AdditiveCounter | WholeListCounter,
    *,
    keep_tool_results: int,
    tools: Sequence[Any] = (),
) -> Compaction:
    """Compact the newest turn of ``messages`` (planned as ``plan``, which
    overflowed) into the budget, the way the counter's family allows."""
    kinds = message_kinds(messages)
    if isinstance(counter, AdditiveCounter):
        return fit_additive(
            messages, kinds, plan, counter, keep_tool_results=keep_tool_results, tools=tools
        )
    return fit_whole_list(
        messages, kinds, plan, counter, keep_tool_results=keep_tool_results, tools=tools
    )


def fit_additive(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int],
    plan: TrimPlan,
    counter: AdditiveCounter,
    *,
    keep_tool_results: int,
    tools: Sequence[Any] = (),
    copies: Copies | None = None,
) -> Compaction:
    """Compact the newest turn of ``messages`` (planned as ``plan``) into the
    budget with an additive counter; raise when not even its skeleton fits.
    ``copies``: the copies earlier compactions made, given again."""
    if not plan.budget_met:
        raise overflow_error(plan)
    turn = _Turn(messages, kinds, plan.newest_turn_start)
    room = plan.max_tokens - plan.system_tokens - plan.overhead_tokens
    for _ in range(_ATTEMPTS):
        attempt = turn.ladder(counter.costs, keep_tool_results, room, copies)
        if not attempt.fits:
            raise overflow_error(plan)
        attempt.total = counter.count(attempt.kept, tools)
        if attempt.total <= plan.max_tokens:
            return attempt.outcome()
        room -= attempt.total - plan.max_tokens
    raise overflow_error(plan)


def fit_whole_list(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int],
    plan: TrimPlan,
    counter: WholeListCounter,
    *,
    keep_tool_results: int,
    tools: Sequence[Any] = (),
) -> Compaction:
    """Compact the newest turn with a whole-list counter: the largest room (in
    the estimate's units) whose compacted request the counter counts within
    the budget, searched in at most ``WHOLE_LIST_COUNTS`` counts."""
    if not plan.budget_met:
        raise overflow_error(plan)
    budget = plan.max_tokens
    turn = _Turn(messages, kinds, plan.newest_turn_start)

    calls = 0

    def attempt(room: int) -> _Attempt:
        # Every candidate spends one of the counts, remembered or not: the
        # search, and so what is kept, must not depend on what the cache holds.
        nonlocal calls
        calls += 1
        tried = turn.ladder(counter.count_each, keep_tool_results, room)
        tried.total = counter.count(turn.request(tried), tools)
        return tried

    best = attempt(0)  # the skeleton
    if best.total > budget:
        raise overflow_error(plan)
    whole = turn.ladder(counter.count_each, keep_tool_results, 1 << 62)  # nothing compacted
    # Rooms in the estimate's units, bracketing the answer: ``low`` fits (the
    # skeleton's), ``high`` does not (the whole turn's: the plan counted it).
    low, high = best.ladder.total(), whole.ladder.total()
    high_total = counter.count(turn.request(whole), tools)
    # The counter's tokens per estimated token, over the turn: each step goes
    # from the last room tried to where this slope says the budget is.
    slope = max(high_total - best.total, 1) / max(high - low, 1)
    room = low + (budget - best.total) / slope
    for _ in range(_SEARCH_STEPS):
        tried_room = int(room)
        if not low < tried_room < high:
            tried_room = (low + high) // 2
        if high - low <= 1 or calls >= WHOLE_LIST_COUNTS:
            break
        tried = attempt(tried_room)
        if tried.total <= budget:
            low = tried_room
            if tried.total > best.total:
                best = tried
            gain = (budget - tried.total) / slope
            if gain < 1:  # nothing more fits
                break
            # On a plateau (the same request again), step to the middle instead.
            room = tried_room + gain if tried.total == best.total else (low + high) / 2
        else:
            high = tried_room
            room = tried_room - (tried.total - budget) / slope - 1
    return best.outcome()
