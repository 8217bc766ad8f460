"""``WholeListPlanner``: plans with a counter that only counts whole requests.

Every list it counts is a valid conversation: the pinned messages first (a
provider's count endpoint refuses a system message inside the conversation),
then the non-pinned messages from a turn boundary on, that is, what a trim
from that boundary keeps; or the pinned messages before a one-word user
message (``PROBE``). The kept list is the oldest boundary whose count fits,
found by search: the approximate counter guesses it, the error measured on
that first count corrects the guess (and is kept for the next trim), then
the search gallops outward and bisects. Counts are remembered by the counter
(its LRU), so a re-trim after an append mostly reuses counts already made.

``start_moved`` compares this call's cut with the previous model call's,
exactly when this planner planned that call (the same last message, size,
budget, ``trim_to`` and tools: an agent loop's previous trim); otherwise, on a
history trimmed for the first time, it compares the two calls' cuts on the
scaled approximate counts. No count is made for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.messages import BaseMessage, HumanMessage

from langchain_turntrim._calls import unanswered_calls
from langchain_turntrim._compaction.ladder import PINNED_KINDS
from langchain_turntrim._core import (
    ANCHOR,
    REPLY,
    START,
    TrimPlan,
    check_kinds,
    plan_costs,
    request_order,
)
from langchain_turntrim._core.depth import Cut, floor_turn
from langchain_turntrim._core.stable import candidates
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.tools import tools_key
from langchain_turntrim._counting.whole_list import WholeListCounter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._planning.base import CountingPlanner

__all__ = ["PROBE", "WholeListPlanner"]

#: The one-word user message the pinned messages' count is measured beside,
#: when no turn is kept (a provider may refuse a request without one).
PROBE: Final = HumanMessage(".")
_ESTIMATE: Final = ApproximateCounter()
_STARTS: Final = (START, ANCHOR)


class WholeListPlanner(CountingPlanner):
    """Plans with a ``WholeListCounter`` (see the module).

    The budget is exact (the kept request's own count) for any counter whose
    counts do not grow when a turn is dropped. ``system_tokens``,
    ``newest_turn_tokens`` and the ``tokens_before`` of a trimmed history are
    estimates (the approximate counts, scaled by the measured error), except
    when no turn fits: then the pinned messages' tokens are measured beside
    ``PROBE`` (``count(pinned + probe) + count(probe) - count(probe, probe)``,
    exact for a counter that is additive up to a per-request constant) and
    the newest turn's tokens are what its request adds to them.
    """

    __slots__ = ("cuts", "ratio")

    counter: WholeListCounter

    def __init__(self, counter: WholeListCounter) -> None:
        self.counter = counter
        # The last measured ratio of its counts to the approximate counter's:
        # where the next search starts (it changes how many counts a plan
        # makes, never which turns it keeps).
        self.ratio = 1.0
        #: The cuts of the histories planned last (see ``_Cuts``).
        self.cuts = _Cuts()

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        tools: Sequence[Any] = (),
        trim_to: int | Cut | None = None,
        pinned_alone: bool = True,
        again: bool = False,  # noqa: ARG002 - counts of whole requests: searched again
    ) -> TrimPlan:
        kinds = message_kinds(messages) if kinds is None else check_kinds(kinds, len(messages))
        approximate = _ESTIMATE.count_each(messages)
        search = _Search(self.counter, messages, kinds, approximate, tools, self.ratio)
        n = len(search.starts)
        greedy = search.smallest_fitting(max_tokens) if n else 0
        self.ratio = search.ratio
        level = trim_to.level if isinstance(trim_to, Cut) else trim_to
        first = search.stable(greedy, max_tokens, level)
        scaled = [round(c * search.ratio) for c in approximate]
        estimate = plan_costs(kinds, scaled, max_tokens, 0, trim_to)
        if isinstance(trim_to, Cut):
            first = _cut(trim_to, search.starts, greedy, first, estimate.dropped_turns)
        if first < n:
            after = search.count(first)
            older = range(search.starts[first])
            dropped = sum(scaled[i] for i in older if kinds[i] not in PINNED_KINDS)
            before = after if first == 0 else after + dropped
            system, newest = estimate.system_tokens, estimate.newest_turn_tokens
        else:
            # The pinned messages' tokens: measured when they may be kept alone,
            # else estimated (the request the overflow rule reports is exact).
            after = system = search.pinned_only() if pinned_alone else estimate.system_tokens
            newest = max(0, search.count(n - 1) - system) if n else 0
            before = max(estimate.tokens_before, after)
        keep_from = search.starts[first] if first < n else len(messages)
        settings = (max_tokens, level, tools_key(tools) if tools else ())
        self.cuts.note(messages, settings, keep_from if first < n else None)
        reply = _newest_reply(kinds)
        planned, previous_cut = self.cuts.find(messages, reply, settings)
        if planned:  # this planner planned the previous call: its cut
            moved = previous_cut is not None and previous_cut != keep_from
        else:  # both calls' cuts on the scaled approximate counts
            moved = estimate.start_moved
        plan = dataclasses.replace(
            estimate,
            keep_from=keep_from,
            dropped_turns=first,
            system_tokens=system,
            overhead_tokens=0,
            tokens_before=max(before, after),
            tokens_after=after,
            newest_turn_tokens=newest,
            start_moved=moved,
        )
        return unanswered_calls(plan, messages, kinds)

    def tool_tokens(self, tools: Sequence[Any]) -> None:  # noqa: ARG002 - the planner interface
        """None: the tools are priced inside each whole-list count."""
        return

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.counter,))


#: What a history was planned with: the budget, ``trim_to`` and the tools' key.
Settings = tuple[int, int | None, object]


class _Cuts:
    """Where the last ``KEPT`` histories planned were cut, by their last
    message (held weakly) and size, and the settings they were planned with."""

    KEPT: Final = 8

    def __init__(self) -> None:
        self._cuts: deque[tuple[weakref.ref[BaseMessage], int, Settings, int | None]] = deque(
            maxlen=self.KEPT
        )

    def note(self, messages: Sequence[BaseMessage], settings: Settings, cut: int | None) -> None:
        """``messages`` were planned with ``settings`` and kept from ``cut``
        (``None``: no turn); not noted when the tools cannot be keyed."""
        if messages and settings[2] is not None:
            with contextlib.suppress(TypeError):  # not weakly referenceable
                self._cuts.append((weakref.ref(messages[-1]), len(messages), settings, cut))

    def find(
        self, messages: Sequence[BaseMessage], size: int, settings: Settings
    ) -> tuple[bool, int | None]:
        """Whether the first ``size`` messages were planned with ``settings``,
        and where they were cut."""
        if size:
            last = messages[size - 1]
            for ref, planned, planned_with, cut in reversed(list(self._cuts)):
                if planned == size and planned_with == settings and ref() is last:
                    return True, cut
        return False, None

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), ())


def _newest_reply(kinds: Sequence[int]) -> int:
    """The index of the newest reply (0 when there is none)."""
    return next((i for i in range(len(kinds) - 1, -1, -1) if kinds[i] == REPLY), 0)


def _cut(cut: Cut, starts: Sequence[int], greedy: int, first: int, estimated: int) -> int:
    """The stable cut ``first`` moved by ``cut``: back to its floor (on the
    exact search) while it is at or after the exact greedy cut ``greedy``;
    deeper, when cold, to the cut placed on the estimate (``estimated``)."""
    n = len(starts)
    floor = floor_turn(starts, cut.floor) if cut.floor else 0
    if floor and floor >= greedy:
        first = floor
    if cut.cold and first < n and estimated < n:
        first = max(first, estimated)
    return first


class _Search:
    """The counts of a history's suffixes, memoised: the pinned messages before
    turn k, then every message from turn k on."""

    def __init__(
        self,
        counter: WholeListCounter,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int],
        approximate: list[int],
        tools: Sequence[Any],
        ratio: float,
    ) -> None:
        self.counter = counter
        self.messages = messages
        self.kinds = kinds
        self.tools = tools
        self.ratio = ratio
        self.pinned = [i for i, kind in enumerate(kinds) if kind in PINNED_KINDS]
        self.starts = [i for i, kind in enumerate(kinds) if kind in _STARTS]
        self.counts: dict[int, int] = {}
        # The approximate tokens of each suffix (every pinned message and the
        # turns from k on), to guess the cut with; and of each turn.
        n = len(self.starts)
        self.turn_costs = [0] * n
        for k in range(n):
            end = self.starts[k + 1] if k + 1 < n else len(messages)
            self.turn_costs[k] = sum(
                approximate[i] for i in range(self.starts[k], end) if kinds[i] not in PINNED_KINDS
            )
        self.approx_suffix = [0] * (n + 1)
        total = sum(approximate[i] for i in self.pinned)
        self.approx_suffix[n] = total
        for k in range(n - 1, -1, -1):
            total += self.turn_costs[k]
            self.approx_suffix[k] = total

    def suffix(self, k: int) -> list[BaseMessage]:
        """What a trim from turn k keeps, in a request's order (``request_order``)."""
        start = self.starts[k]
        kept = [*(i for i in self.pinned if i < start), *range(start, len(self.messages))]
        return [self.messages[i] for i in request_order(kept, self.kinds)]

    def count(self, k: int) -> int:
        """The counter's count of ``suffix(k)`` with the tools."""
        counted = self.counts.get(k)
        if counted is None:
            counted = self.counts[k] = self.counter.count(self.suffix(k), self.tools)
            if self.approx_suffix[k]:
                self.ratio = counted / self.approx_suffix[k]
        return counted

    def guess(self, max_tokens: int) -> int:
        """The smallest k whose scaled approximate count fits."""
        room = max_tokens / self.ratio if self.ratio > 0 else float("inf")
        n = len(self.starts)
        return next((k for k in range(n) if self.approx_suffix[k] <= room), n - 1)

    def smallest_fitting(self, max_tokens: int) -> int:
        """The smallest k whose count fits ``max_tokens`` (``n`` when none
        does), searched from a guess, corrected once."""
        n = len(self.starts)
        k = self.guess(max_tokens)
        self.count(k)
        k = self.guess(max_tokens)  # the guess, with the error just measured
        fits = self.count(k) <= max_tokens
        low, high = (-1, k) if fits else (k, n)  # count(low) > max_tokens >= count(high)
        step = 1
        while fits and high > 0:  # gallop towards older turns while they fit
            probe = max(high - step, 0)
            if self.count(probe) > max_tokens:
                low = probe
                break
            high, step = probe, step * 2
        while not fits and low < n - 1:  # gallop towards newer turns until one fits
            probe = min(low + step, n - 1)
            if self.count(probe) <= max_tokens:
                high = probe
                break
            low, step = probe, step * 2
        while high - low > 1:
            middle = (low + high) // 2
            if self.count(middle) <= max_tokens:
                high = middle
            else:
                low = middle
        return high

    def stable(self, first: int, max_tokens: int, trim_to: int | None) -> int:
        """``first`` moved to the next stable cut at or after it, the
        candidates placed on the approximate counts (prefix-stable)."""
        n = len(self.starts)
        if trim_to is None or not 0 < first < n or trim_to >= max_tokens:
            return first
        step = max_tokens - trim_to
        return next((k for k, _ in candidates(self.turn_costs, step) if k >= first), first)

    def pinned_only(self) -> int:
        """The pinned messages' tokens (with the tools), measured beside ``PROBE``;
        0 when there are none (nothing is sent)."""
        if not self.pinned:
            return 0
        pinned = [self.messages[i] for i in request_order(self.pinned, self.kinds)]
        count, tools = self.counter.count, self.tools
        together = count([*pinned, PROBE], tools)
        return max(0, together + count([PROBE], tools) - count([PROBE, PROBE], tools))
