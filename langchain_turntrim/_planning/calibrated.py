"""``CalibratedPlanner``: an additive planner for ``CalibratedCounter``, whose
counts change as it learns.

A calibrated count is an O(1) mapping of the base counter's count under one
calibration state (``Calibration``). So the planner remembers the base
counts of the histories it planned (``CalibratedMemo``, a ``HistoryMemo``
whose entries keep them, message by message, beside their ``Grouping``) and
applies the calibration when it plans: under the state the history was last
planned with, only the new messages are mapped and grouped; under a newer
one (``observe`` changed it), the spec's cut maps only the newest turns it
reads (``recost.plan_recosted``), and the next plan under that state maps
every remembered base count again and regroups them from the turns already
found (``Grouping.recosted``), for the plans after it: nothing is counted again.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._calls import unanswered_calls, with_unanswered
from langchain_turntrim._core import Grouping, TrimPlan, check_kinds, plan_costs
from langchain_turntrim._core.depth import Cut
from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.calibrated import CalibratedCounter, Calibration
from langchain_turntrim._counting.keys import Fields
from langchain_turntrim._counting.priced import Priced
from langchain_turntrim._messages import check_messages, message_kinds
from langchain_turntrim._planning.additive import AdditivePlanner
from langchain_turntrim._planning.memo import Count, HistoryMemo, _dead, _Entry
from langchain_turntrim._planning.recost import Rate, plan_recosted

__all__ = ["CalibratedMemo", "CalibratedPlanner"]


class _BaseEntry(_Entry):
    """A remembered history with its base counts (``grouping`` groups them),
    and its grouping under the calibration it was last planned with."""

    __slots__ = ("base", "calibrated", "fields", "glimpsed", "state")

    def __init__(self) -> None:
        super().__init__()
        self.base: list[int] = []
        #: The fields each base count was made from (``message_fields``).
        self.fields: list[Fields] = []
        self.state: Calibration | None = None
        #: The state of the last plan that mapped only the turns it read.
        self.glimpsed: Calibration | None = None
        self.calibrated = Grouping()

    def extend(
        self, messages: Sequence[BaseMessage], kinds: list[int] | None, count: Count
    ) -> None:
        def counted(new: Sequence[BaseMessage], fields: Sequence[Fields]) -> list[int]:
            costs = count(new, fields)
            self.base.extend(costs)
            self.fields.extend(fields)
            return costs

        super().extend(messages, kinds, counted)

    def plan(
        self,
        counter: CalibratedCounter,
        state: Calibration,
        max_tokens: int,
        overhead: int,
        trim_to: int | Cut | None,
    ) -> TrimPlan:
        """This history's plan under ``state``. The first plan under a new
        state, with the spec's cut, maps only the turns it reads; the next
        one under that state maps and groups them all, for the plans after."""
        if state not in (self.state, self.glimpsed) and trim_to is None:
            self.glimpsed = state
            scale = 1 + state.margin
            rate = Rate(state.ratio * scale, state.per_message * scale)
            calibrate = partial(counter.calibrated, state)
            return plan_recosted(self.grouping, self.base, calibrate, rate, max_tokens, overhead)
        return self.under(counter, state).plan(max_tokens, overhead, trim_to)

    def kept(self, plan: TrimPlan) -> Priced:
        """What ``plan`` keeps of this history, with the fields and base
        counts its messages were counted from (``observe`` may reuse them)."""
        keep_from = plan.keep_from
        pinned = tuple(i for i in plan.pinned if i < keep_from)
        return Priced(self.messages, self.fields, self.base, pinned, keep_from, plan.size)

    def under(self, counter: CalibratedCounter, state: Calibration) -> Grouping:
        """The grouping of this history's calibrated counts under ``state``."""
        calibrated = self.calibrated
        if self.state != state:
            calibrated = self.grouping.recosted(counter.calibrated(state, self.base))
        elif calibrated.size < self.grouping.size:
            new = self.base[calibrated.size :]
            calibrated.extend(
                self.grouping.kinds[calibrated.size :], counter.calibrated(state, new)
            )
        self.calibrated, self.state = calibrated, state
        return calibrated


class CalibratedMemo(HistoryMemo):
    """``HistoryMemo`` of base counts, planned under a calibration state."""

    __slots__ = ()

    def plan_under(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        counter: CalibratedCounter,
        max_tokens: int,
        tools: Sequence[Any],
        trim_to: int | Cut | None,
        *,
        again: bool = False,
    ) -> TrimPlan:
        """The plan of ``messages`` under ``counter``'s current calibration
        (one state for every count and the request's constant): the base
        counter counts only what the remembered history they start with lacks.
        ``again``: as for ``HistoryMemo.plan``."""
        state = counter.calibration
        overhead = counter.constant(state, tools)
        base = counter.base
        listed = None if kinds is None else check_kinds(kinds, len(messages))
        entry = self._take_checked(messages) if again else None
        if not isinstance(entry, _BaseEntry):  # a calibrated memo holds no other
            self._local.entry = _dead
            entry = self._grown_base(messages, listed, base)
            if entry is None:  # not planned before: noted, and counted afresh
                listed = message_kinds(messages) if listed is None else listed
                costs = counter.calibrated(state, base.costs(messages))
                self._sight(messages)
                plan = plan_costs(listed, costs, max_tokens, overhead, trim_to)
                return unanswered_calls(plan, messages, listed)
        plan = entry.plan(counter, state, max_tokens, overhead, trim_to)
        counter.priced(entry.kept(plan))
        # Read before the entry is back in the memo, where another thread may take and grow it.
        plan = with_unanswered(plan, entry.calls.of_request())
        self._put(entry, base)
        self._local.entry = weakref.ref(entry)
        return plan

    def _grown_base(
        self, messages: Sequence[BaseMessage], kinds: list[int] | None, base: AdditiveCounter
    ) -> _BaseEntry | None:
        """``HistoryMemo._grown`` for base counts: the remembered history
        ``messages`` start with, extended; None when they were not planned before."""
        entry = self._take(messages)
        if not isinstance(entry, _BaseEntry) or not entry.matches(messages, kinds):
            entry = None
        if entry is None:
            if not self._sighted(messages):
                return None
            check_messages(messages)
            entry = _BaseEntry()
        return self.extended(entry, messages, kinds, base.costs_of)

    def planned(self, messages: Sequence[BaseMessage]) -> None:  # noqa: ARG002
        """None: a compaction is of calibrated counts, which change as the
        counter learns, so none is given again."""
        return

    @staticmethod
    def extended(
        entry: _BaseEntry,
        messages: Sequence[BaseMessage],
        kinds: list[int] | None,
        count: Count,
    ) -> _BaseEntry:
        """``entry`` extended with the messages after the ones it remembers."""
        start = len(entry.messages)
        try:
            entry.extend(messages[start:], None if kinds is None else kinds[start:], count)
        except (TypeError, ValueError):
            if not start:
                raise
            # Errors name messages by index: go through the whole list for the right one.
            entry = _BaseEntry()
            entry.extend(messages, kinds, count)
        return entry


class CalibratedPlanner(AdditivePlanner):
    """``AdditivePlanner`` for a ``CalibratedCounter``: with a ``cache_size``,
    it remembers the base counts of the last histories it planned
    (``CalibratedMemo``) and plans them under the current calibration."""

    __slots__ = ()

    counter: CalibratedCounter

    def __init__(self, counter: CalibratedCounter, cache_size: int) -> None:
        super().__init__(counter, cache_size)
        self.memo = CalibratedMemo(cache_size) if cache_size else None

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        tools: Sequence[Any] = (),
        trim_to: int | Cut | None = None,
        pinned_alone: bool = True,
        again: bool = False,
    ) -> TrimPlan:
        memo = self.memo
        if not isinstance(memo, CalibratedMemo):
            return super().plan(
                messages, kinds, max_tokens, tools=tools, trim_to=trim_to, pinned_alone=pinned_alone
            )
        return memo.plan_under(
            messages, kinds, self.counter, max_tokens, tools, trim_to, again=again
        )
