"""``WholeListCounter``: planning with a counter that only counts whole conversations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import ANCHOR, PINNED, START, TrimPlan, check_count, plan_costs
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.cache import DEFAULT_CACHE_SIZE, LRU
from langchain_turntrim._counting.keys import message_key
from langchain_turntrim._counting.tools import tool_messages

__all__ = ["WholeListCounter"]

_ESTIMATE = ApproximateCounter()


class WholeListCounter:
    """Counts only whole, valid conversations with a ``list -> int`` function.

    Used for chat models (``get_num_tokens_from_messages``, which may be a
    provider's count endpoint that rejects invalid conversations) and for
    ``list[BaseMessage] -> int`` functions. It is only ever called with the
    system messages followed by whole turns in chronological order, and the
    kept list is counted once more at the end so the budget holds exactly
    even when the function is not additive. Whole-list counts are cached (LRU).
    """

    #: The function may be a provider's HTTP endpoint: async callers use a thread.
    blocking = True

    def __init__(
        self,
        function: Callable[[list[BaseMessage]], int],
        maxsize: int = DEFAULT_CACHE_SIZE,
        *,
        label: str | None = None,
    ) -> None:
        if not callable(function):
            msg = f"WholeListCounter needs a callable, got {type(function).__name__}"
            raise TypeError(msg)
        self.function = function
        self.label = label or repr(function)
        self._cache = LRU(maxsize)

    @property
    def maxsize(self) -> int:
        return self._cache.maxsize

    def __len__(self) -> int:
        return len(self._cache)

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """The function's count of ``messages``, cached by the messages' keys."""
        key = tuple(message_key(m) for m in messages)
        (cached,) = self._cache.get_many((key,))
        if cached is not None:
            return cached
        value = check_count(self.function(list(messages)), f"the count of {self.label}")
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
        kinds: Sequence[int],
        max_tokens: int,
        *,
        reserved: int = 0,
        trim_to: int | None = None,
    ) -> TrimPlan:
        """Plan with a counter that only sees whole, valid conversations.

        Each turn is counted alone (it starts with a user message); the system
        messages are priced as ``count(systems + newest turn) - count(newest
        turn)``; a per-request constant is estimated from the two newest turns
        counted together. Messages before the first user message belong to no
        turn, are never sent and count 0. The kept list (systems first, then the
        kept turns) is then counted once: while it exceeds the budget, the oldest
        kept turn is dropped, so the budget holds even for a non-additive counter
        (``trim_to``'s stable cut is chosen on the estimate, before that check).
        Messages sent per plan: about three times the history, never quadratic
        for an additive counter.
        """
        # A summary (ANCHOR) is estimated as the start of its turn, then sent
        # as the pinned message it is: every list counted starts with a human
        # message, and the exact count of the kept list below decides.
        estimated_kinds = [START if kind == ANCHOR else kind for kind in kinds]
        systems: list[BaseMessage] = []
        turns: list[list[BaseMessage]] = []
        starts: list[int] = []
        first_pinned = -1
        for i, (message, kind) in enumerate(zip(messages, estimated_kinds, strict=True)):
            if kind == PINNED:
                if first_pinned < 0:
                    first_pinned = i
                systems.append(message)
            elif kind == START:
                turns.append([message])
                starts.append(i)
            elif turns:
                turns[-1].append(message)
        costs = [0] * len(messages)
        if not turns:
            if systems:
                costs[first_pinned] = self.count(systems)
            return plan_costs(kinds, costs, max_tokens, reserved)
        turn_counts = [self.count(turn) for turn in turns]
        newest = turns[-1]
        system = 0
        if systems:
            system = max(0, self.count(systems + newest) - turn_counts[-1])
            costs[first_pinned] = system
        overhead = 0
        if len(turns) > 1:
            pair = self.count(turns[-2] + newest)
            overhead = max(0, min(turn_counts[-2] + turn_counts[-1] - pair, *turn_counts[-2:]))
        for start, count in zip(starts, turn_counts, strict=True):
            costs[start] = count - overhead
        estimate = plan_costs(estimated_kinds, costs, max_tokens, overhead + reserved, trim_to)
        shape = plan_costs(kinds, costs, max_tokens, overhead + reserved)
        pinned = [messages[i] for i in shape.pinned]
        always = set(shape.pinned)
        first = estimate.dropped_turns
        while first < len(turns):
            rest = range(starts[first], len(messages))
            kept = pinned + [messages[i] for i in rest if i not in always]
            actual = self.count(kept) + reserved
            if actual <= max_tokens:
                break
            first += 1
        else:
            pinned_only = self.count(pinned) if len(pinned) > len(systems) else system + overhead
            actual = pinned_only + reserved
        return dataclasses.replace(
            estimate,
            keep_from=starts[first] if first < len(starts) else len(messages),
            pinned=shape.pinned,
            dropped_turns=first,
            tokens_after=actual,
        )

    def __repr__(self) -> str:
        return f"WholeListCounter({self.label})"
