"""The one decision every entry point makes: messages and options in, a
``TrimReport`` out.

messages -> kinds (checked once per message object) -> turns (``group``) ->
plan (newest first, counting only what it reads; ``trim_to="auto"`` priced by
the cache; searched with exact counts for a whole-list counter) -> the
overflow rule (drop, raise, compact) -> what is sent (calls without results,
and results without calls, left out) -> the report, whose ``tokens_after`` is
the counter's count of exactly what is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import compress
from operator import attrgetter, is_, not_
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._anatomy import frozen
from langchain_turntrim._calls import answered, links_of
from langchain_turntrim._compaction import Compacted, Rebuilds, compact
from langchain_turntrim._core import (
    Count,
    Cut,
    TrimPlan,
    Turns,
    check_count,
    group,
    plan,
)
from langchain_turntrim._counting import (
    ApproximateCounter,
    CalibratedCounter,
    CountCache,
    ListCounter,
    checked_counts,
)
from langchain_turntrim._counting.tools import check_tools, tool_price
from langchain_turntrim._options import TrimOptions
from langchain_turntrim._report import TrimReport, TurnTrimOverflowError
from langchain_turntrim._whole_list import compact_whole, request, search
from langchain_turntrim.cache_pricing._depth import CacheCall, auto_plan

__all__ = ["Pipeline"]

_KIND, _COUNT = attrgetter("kind"), attrgetter("count")
#: The most messages compaction made that are remembered (with their counts).
_REBUILDS = 4096


class Pipeline:
    """The decisions of one set of options: the counter they name, and the
    cache of the kinds and counts of the messages it has seen. Thread-safe."""

    def __init__(self, options: TrimOptions) -> None:
        self.options = options
        self.counter: Any = options.token_counter
        self.whole = isinstance(self.counter, ListCounter)
        #: What counts each message: the counter, its base (calibrated), or the estimate.
        self.base: Any = self.counter
        if self.whole:
            self.base = ApproximateCounter()
        elif isinstance(self.counter, CalibratedCounter):
            self.base = self.counter.base
        self.cache = CountCache(
            options.cache_size, by_content=getattr(self.base, "by_content", True)
        )
        #: A whole-list counter's tokens per estimated token, as last measured.
        self.ratio = 1.0
        self.rebuilds = Rebuilds(self.count_new, min(options.cache_size, _REBUILDS))

    def decide(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[Any] = (),
        max_tokens: int | None = None,
        cache: CacheCall | None = None,
    ) -> TrimReport[BaseMessage]:
        """The trim of ``messages`` sent with ``tools``. ``max_tokens``: a budget
        other than the options' (a retry's); ``cache``: what the model call knows
        of its prompt cache (``trim_to="auto"``)."""
        options = self.options
        budget = options.max_tokens if max_tokens is None else check_count(max_tokens)
        tools = check_tools(tools)
        seen = self.cache.scan(messages)
        kinds = list(map(_KIND, seen))
        turns = group(kinds)
        count = self.counts(messages, seen)
        trim_to = (
            min(options.trim_to, budget) if isinstance(options.trim_to, int) else options.trim_to
        )
        tool_tokens: int | None = None
        if self.whole:
            counted: dict[int, int] = {}  # trim_to="auto" plans twice: each request counted once

            def planner(cut: int | Cut | None) -> TrimPlan:
                found = search(
                    self.counter, messages, turns, count, budget, tools, cut, self.ratio, counted
                )
                self.ratio = found.ratio
                return found.plan

        else:
            tool_tokens = tool_price(self.counter, tools)
            overhead = check_count(self.counter.overhead, f"{self.counter!r}.overhead")

            def planner(cut: int | Cut | None) -> TrimPlan:
                return plan(turns, count, budget, overhead=overhead + tool_tokens, trim_to=cut)

        auto = None
        if trim_to == "auto":
            call = cache or CacheCall(options.price_for())
            chosen, auto = auto_plan(planner, turns, count, call, options.context_value)
        else:
            chosen = planner(trim_to)
        exact = chosen.tokens_after
        indices = list(chosen.kept)
        kept = [messages[i] for i in indices]
        compaction = None
        if chosen.overflowed and options.on_overflow != "drop":
            if options.on_overflow == "raise" or not chosen.budget_met:
                raise _overflow(chosen)
            indices, kept, compaction, exact = self._compact(
                messages, kinds, turns, chosen, count, tools, seen
            )
        indices, kept, calls, results = answered(
            indices,
            kept,
            kinds,
            [links_of(messages, seen, i, m) for i, m in zip(indices, kept, strict=True)],
        )
        if calls or results:
            exact = self._tokens(
                messages, kinds, indices, kept, count, tools, chosen.overhead_tokens
            )
        kept_set = set(indices)
        return TrimReport(
            kept=kept,
            kept_indices=tuple(indices),
            dropped=list(
                compress(messages, map(not_, map(kept_set.__contains__, range(len(messages)))))
            ),
            removed=[messages[i] for i in chosen.removed],
            plan=chosen,
            tokens_after=exact,
            tool_tokens=tool_tokens,
            compaction=None if compaction is None else compaction.compaction,
            unanswered_calls=calls,
            orphan_results=results,
            auto=auto,
        )

    def counts(self, messages: Sequence[BaseMessage], seen: Sequence[Any]) -> Count:
        """Each message's count by index, remembered for one decision: the
        counter's own, under one calibration (an estimate for a whole-list one)."""
        base, counter = self.base, self.counter
        state = counter.state if isinstance(counter, CalibratedCounter) else None
        known: list[int | None] = list(map(_COUNT, seen))  # None: not counted yet
        if state is not None:
            known = [None if c is None else counter.scale(state, [c])[0] for c in known]

        by_fields = getattr(base, "count_fields", None)

        def count_each(where: list[int], fields: list[tuple[Any, ...]]) -> list[int]:
            batch = [messages[i] for i in where]
            if by_fields is not None:  # a built-in counter reads the fields themselves
                counts = by_fields(batch, fields)
            else:  # others count copies holding them, whatever is reassigned meanwhile
                counts = base.count_each(list(map(frozen, batch, fields)))
            return checked_counts(counts, batch, base, where)

        def count(indices: Sequence[int]) -> list[int]:
            if type(indices) is range:  # a turn's messages: one slice
                found = known[indices.start : indices.stop]
            else:
                found = [known[i] for i in indices]
            if None in found:
                todo = [i for i, c in zip(indices, found, strict=True) if c is None]
                counted = self.cache.counts(count_each, seen, todo)
                if state is not None:
                    counted = counter.scale(state, counted)
                for i, c in zip(todo, counted, strict=True):
                    known[i] = c
                found = [known[i] for i in indices]
            return found  # type: ignore[return-value]

        return count

    def count_new(self, batch: list[BaseMessage]) -> list[int]:
        """Counts of messages the trim made (copies), as every message is counted."""
        return list(self.counts(batch, self.cache.scan(batch))(range(len(batch))))

    def _compact(
        self,
        messages: Sequence[BaseMessage],
        kinds: list[int],
        turns: Turns,
        chosen: TrimPlan,
        count: Count,
        tools: list[Any],
        seen: Sequence[Any],
    ) -> tuple[list[int], list[BaseMessage], Compacted, int]:
        """Every older turn dropped, and the newest one compacted into the budget."""
        members = turns.members(len(turns.starts) - 1)
        turn, turn_kinds = [messages[i] for i in members], [kinds[i] for i in members]
        keep = self.options.keep_tool_results

        def sent(done: Compacted) -> tuple[list[BaseMessage], list[int]]:
            copies = {members[p]: m for p, m in zip(done.kept, done.messages, strict=True)}
            indices = sorted({*chosen.pinned, *copies})  # every older turn dropped
            return [copies.get(i, messages[i]) for i in indices], indices

        state = getattr(self.counter, "state", None)  # a calibration: the counts' units

        def rebuilt(message: BaseMessage, parts: Any, drop_data: bool) -> tuple[BaseMessage, int]:  # noqa: FBT001
            return self.rebuilds(message, parts, drop_data, state)

        entries = [seen[i] for i in members]  # the same entries: the same turn, unchanged

        def at(room: int) -> Compacted | None:
            last, key = self.rebuilds.last, (room, keep, state)
            same = last and last[1] == key and len(last[0]) == len(entries)
            if same and all(map(is_, last[0], entries)):  # type: ignore[index]
                return last[2]  # type: ignore[index,no-any-return]
            done = compact(turn, turn_kinds, count(members), rebuilt, room, keep)
            self.rebuilds.last = (entries, key, done)
            return done

        if self.whole:
            found = compact_whole(self.counter, sent, kinds, at, chosen, tools, self.ratio)
            if found is None:
                raise _overflow(chosen)
            done, exact = found
        else:
            paid = chosen.system_tokens + chosen.overhead_tokens
            compacted = at(chosen.max_tokens - paid)  # the ladder's total fits the room
            if compacted is None:
                raise _overflow(chosen)
            done, exact = compacted, paid + compacted.tokens
        kept, indices = sent(done)
        changed = tuple(i for i, m in zip(indices, kept, strict=True) if m is not messages[i])
        done = dataclasses.replace(
            done, compaction=dataclasses.replace(done.compaction, changed=changed)
        )
        return indices, kept, done, exact

    def _tokens(
        self,
        messages: Sequence[BaseMessage],
        kinds: list[int],
        indices: list[int],
        kept: list[BaseMessage],
        count: Count,
        tools: list[Any],
        overhead: int,
    ) -> int:
        """The counter's count of exactly what is sent: the known counts of its
        own messages, and the copies the trim made counted as new ones."""
        if self.whole:
            counted: int = self.counter.count(
                request(kept, [kinds[i] for i in indices], range(len(kept))), tools
            )
            return counted
        own = [i for i, m in zip(indices, kept, strict=True) if m is messages[i]]
        copies = [m for i, m in zip(indices, kept, strict=True) if m is not messages[i]]
        return overhead + sum(count(own)) + sum(self.count_new(copies))


def _overflow(chosen: TrimPlan) -> TurnTrimOverflowError:
    return TurnTrimOverflowError(
        chosen.max_tokens, chosen.system_tokens + chosen.overhead_tokens, chosen.newest_turn_tokens
    )
