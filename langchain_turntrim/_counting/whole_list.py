"""``WholeListCounter``: planning with a counter that only counts whole conversations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from langchain_turntrim._core import ANCHOR, PINNED, START, TrimPlan, check_count, plan_costs
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.cache import DEFAULT_CACHE_SIZE
from langchain_turntrim._counting.keys import fields_keys, frozen_copy, message_fields
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._counting.tools import tool_messages
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._safe_repr import safe_repr
from langchain_turntrim._stable import candidates

__all__ = ["WholeListCounter"]

_ESTIMATE = ApproximateCounter(0)  # counts only: it never plans


class WholeListCounter:
    """Counts only whole, valid conversations with a ``list -> int`` function.

    Used for chat models (``get_num_tokens_from_messages``, which may be a
    provider's count endpoint that rejects invalid conversations) and for
    ``list[BaseMessage] -> int`` functions. It is only ever called with the
    system messages followed by whole turns in chronological order, and the
    kept list is counted once more at the end so the budget holds exactly
    even when the function is not additive. Whole-list counts are cached (LRU),
    by the messages' keys (``message_key``); the function is given frozen
    copies of the messages (``frozen_copy``), so a count is always of the very
    fields it is filed under.

    ``maxsize=None`` (what ``per_list`` gives) leaves the size to the trimmer
    it is given to: its ``cache_size``, else ``DEFAULT_CACHE_SIZE``.
    """

    #: The function may be a provider's HTTP endpoint: async callers use a thread.
    blocking = True

    def __init__(
        self,
        function: Callable[[list[BaseMessage]], int],
        maxsize: int | None = DEFAULT_CACHE_SIZE,
        *,
        label: str | None = None,
    ) -> None:
        if not callable(function):
            msg = f"WholeListCounter needs a callable, got {type(function).__name__}"
            raise TypeError(msg)
        self.function = function
        self.label = label or safe_repr(function)
        self.sized = maxsize is not None
        self._cache: LRU[int] = LRU(DEFAULT_CACHE_SIZE if maxsize is None else maxsize)
        # The last measured ratio of its counts to the approximate counter's:
        # where the next search starts (it changes how many calls a plan
        # makes, never which turns it keeps).
        self.ratio = 1.0

    @property
    def maxsize(self) -> int:
        return self._cache.maxsize

    def resized(self, maxsize: int) -> WholeListCounter:
        """The same counter with a cache of ``maxsize`` entries (and a size of its own)."""
        return WholeListCounter(self.function, maxsize, label=self.label)

    def __len__(self) -> int:
        return len(self._cache)

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """The function's count of ``messages``, cached by the messages' keys."""
        fields = [message_fields(m) for m in messages]
        keys = fields_keys(list(map(type, messages)), fields)
        key = None if None in keys else tuple(keys)
        (cached,) = self._cache.get_many((key,))
        if cached is not None:
            return cached
        copies = [frozen_copy(m, f) for m, f in zip(messages, fields, strict=True)]
        value = check_count(self.function(copies), f"the count of {self.label}")
        self._cache.put_many(((key, value),))
        return value

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        """An estimate per message (the approximate counter's): a whole-list
        function cannot price one message alone."""
        return _ESTIMATE.count_each(messages)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """The tools' JSON schemas, one system message each, counted as one list."""
        return self.count(tool_messages(tools)) if tools else 0

    def plan(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None,
        max_tokens: int,
        *,
        reserved: int = 0,
        trim_to: int | None = None,
    ) -> TrimPlan:
        """Plan with a counter that only sees whole, valid conversations.

        Every list counted is the pinned messages followed by whole turns k..n
        (a suffix of the history: a valid conversation), and the kept list is
        the smallest k whose count fits, found by search: the approximate
        counter guesses the cut, its error measured on that first count
        corrects the guess, then the search gallops outward from it and
        bisects. Counts are cached, and the measured error is kept for the next
        trim: a cold trim costs 2 or 3 calls and a re-trim after an append 2
        (measured on 10 to 80 turns); the messages sent stay within a few times
        the kept history. The budget is exact (the kept
        list's own count) for any counter whose counts do not grow when a turn
        is dropped. The plan's other figures (``system_tokens``,
        ``newest_turn_tokens``, ``tokens_before`` of a trimmed history,
        ``start_moved``) are estimates: the approximate counter's, scaled by
        that measured error. When no turn fits, the pinned messages' tokens
        are measured without sending them alone (see ``_Search.pinned_only``).
        Messages before the first user message belong to no turn, are never
        sent and count 0.
        """
        kinds = message_kinds(messages) if kinds is None else kinds
        # A summary (ANCHOR) is estimated as the start of its turn, and sent as
        # the pinned message it is.
        estimated_kinds = [START if kind == ANCHOR else kind for kind in kinds]
        starts = [i for i, kind in enumerate(estimated_kinds) if kind == START]
        approximate = _ESTIMATE.count_each(messages)
        if not starts:
            systems = [m for m, kind in zip(messages, kinds, strict=True) if kind == PINNED]
            costs = [0] * len(messages)
            if systems:
                costs[kinds.index(PINNED)] = self.count(systems)
            return plan_costs(kinds, costs, max_tokens, reserved)
        shape = plan_costs(kinds, approximate, max_tokens, reserved)
        search = _Search(self, messages, kinds, shape.pinned, starts, approximate, reserved)
        first = search.smallest_fitting(max_tokens)
        self.ratio = search.ratio
        if trim_to is not None and 0 < first < len(starts) and trim_to < max_tokens:
            # The stable cut, on the approximate counts (a prefix-stable estimate).
            turn_costs = [
                sum(approximate[i] for i in range(start, end) if kinds[i] not in _PINNED)
                for start, end in zip(starts, [*starts[1:], len(messages)], strict=True)
            ]
            step = max_tokens - trim_to
            first = next((k for k, _ in candidates(turn_costs, step) if k >= first), first)
        scaled = [round(c * search.ratio) for c in approximate]
        estimate = plan_costs(estimated_kinds, scaled, max_tokens, reserved, trim_to)
        if first < len(starts):
            after = search.count(first)
            dropped = (i for i in range(starts[first]) if kinds[i] not in _PINNED)
            before = search.count(0) if first == 0 else after + sum(scaled[i] for i in dropped)
        else:
            after = search.pinned_only()
            before = estimate.tokens_before
        return dataclasses.replace(
            estimate,
            keep_from=starts[first] if first < len(starts) else len(messages),
            pinned=shape.pinned,
            dropped_turns=first,
            tokens_before=max(before, after),
            tokens_after=after,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles start with an empty cache (a lock cannot be copied)."""
        maxsize = self.maxsize if self.sized else None
        return (_restore, (self.function, maxsize, self.label))

    def __repr__(self) -> str:
        return f"WholeListCounter({self.label})"


def _restore(
    function: Callable[[list[BaseMessage]], int], maxsize: int | None, label: str
) -> WholeListCounter:
    return WholeListCounter(function, maxsize, label=label)


_PINNED = (PINNED, ANCHOR)


class _Search:
    """The counts of the history's suffixes (pinned messages + turns k..n), memoised."""

    def __init__(
        self,
        counter: WholeListCounter,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int],
        pinned: Sequence[int],
        starts: list[int],
        approximate: list[int],
        reserved: int,
    ) -> None:
        self.counter = counter
        self.messages = messages
        self.kinds = kinds
        self.pinned = [messages[i] for i in pinned]
        self.starts = starts
        self.reserved = reserved
        self.counts: dict[int, int] = {}
        # The approximate tokens of each suffix, to guess the cut with.
        self.approx_suffix = [0] * (len(starts) + 1)
        pinned_approx = sum(approximate[i] for i in pinned)
        total = 0
        for k in range(len(starts) - 1, -1, -1):
            end = starts[k + 1] if k + 1 < len(starts) else len(messages)
            total += sum(approximate[i] for i in range(starts[k], end) if kinds[i] not in _PINNED)
            self.approx_suffix[k] = pinned_approx + total
        self.approx_suffix[len(starts)] = pinned_approx
        self.ratio = counter.ratio

    def count(self, k: int) -> int:
        """The counter's count of the pinned messages and turns k.., plus the reserve."""
        if k not in self.counts:
            rest = range(self.starts[k], len(self.messages))
            suffix = [self.messages[i] for i in rest if self.kinds[i] not in _PINNED]
            self.counts[k] = self.counter.count(self.pinned + suffix) + self.reserved
            if self.approx_suffix[k]:
                self.ratio = (self.counts[k] - self.reserved) / self.approx_suffix[k]
        return self.counts[k]

    def guess(self, max_tokens: int) -> int:
        """The smallest k whose scaled approximate count fits."""
        room = (max_tokens - self.reserved) / self.ratio if self.ratio > 0 else float("inf")
        n = len(self.starts)
        return next((k for k in range(n) if self.approx_suffix[k] <= room), n - 1)

    def smallest_fitting(self, max_tokens: int) -> int:
        """The smallest k whose count fits ``max_tokens`` (``n`` when none does)."""
        n = len(self.starts)
        k = self.guess(max_tokens)
        self.count(k)
        corrected = self.guess(max_tokens)  # the guess, with the error just measured
        if corrected != k:
            k = corrected
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

    def pinned_only(self) -> int:
        """The pinned messages' tokens when no turn fits, without sending them alone
        (a provider may reject a request with no user message): the newest
        turn's count with and without them, plus the per-request constant that
        difference cancels out (``constant``)."""
        newest = self.count(len(self.starts) - 1)
        alone = self.counter.count(self.turn(len(self.starts) - 1))
        return max(0, newest - alone) + self.constant(alone)  # the reserve is in ``newest``

    def turn(self, k: int) -> list[BaseMessage]:
        """Turn ``k``'s messages, without the pinned ones inside it."""
        end = self.starts[k + 1] if k + 1 < len(self.starts) else len(self.messages)
        return [
            self.messages[i] for i in range(self.starts[k], end) if self.kinds[i] not in _PINNED
        ]

    def constant(self, newest_alone: int) -> int:
        """The per-request constant (OpenAI's reply priming, say), measured on
        valid conversations only: the two newest turns counted apart and
        together, or, with a single turn, that turn once and twice over (not
        when it holds tool calls, whose ids must be unique in a request: 0)."""
        newest = self.turn(len(self.starts) - 1)
        if len(self.starts) > 1:
            older = self.turn(len(self.starts) - 2)
            apart = self.counter.count(older) + newest_alone
            together = self.counter.count(older + newest)
            return max(0, min(apart - together, newest_alone, apart - newest_alone))
        if any(isinstance(m, ToolMessage) or getattr(m, "tool_calls", None) for m in newest):
            return 0
        twice = self.counter.count(newest + newest)
        return max(0, min(2 * newest_alone - twice, newest_alone))
