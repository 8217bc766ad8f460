"""Grouping messages into turns, from their kinds and costs: resumable, O(n).

A turn runs from a ``START`` (or ``ANCHOR``) message up to, not including,
the next one. Messages before the first turn belong to no turn and are always
discarded. ``Grouping`` keeps what a plan needs (the pinned tokens, each
turn's tokens) and what the history before its newest reply was (the
previous model call's), so that call's plan needs no grouping again.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from itertools import accumulate, compress, repeat

from langchain_turntrim._core.depth import GROWTH_CALLS, Cut
from langchain_turntrim._core.kinds import ANCHOR, PINNED, REPLY, START
from langchain_turntrim._core.plan import Previous, TrimPlan, plan_turns

__all__ = ["Grouping", "plan_costs", "previous_call", "regroup"]

_PINNED = (PINNED, ANCHOR)


class Grouping:
    """The grouping pass over a history's messages, resumable.

    ``extend`` feeds it more messages (their kinds and costs, already
    validated), in place; ``plan`` decides what fits a budget. A history
    planned once and then appended to is grouped again only for what was
    appended: this is what the planner keeps of each history it remembers.
    """

    __slots__ = (
        "current",
        "kinds",
        "orphan",
        "pinned",
        "previous",
        "replies",
        "size",
        "starts",
        "system",
        "total",
        "turn_costs",
    )

    def __init__(self) -> None:
        self.size = 0
        self.system = 0  # the pinned messages' tokens
        self.orphan = 0  # the tokens before the first turn
        self.current = 0  # the open (newest) turn's tokens so far
        #: The history before the newest reply, as ``plan_turns`` takes it (its
        #: pinned tokens without the overhead); None before any reply.
        self.previous: Previous | None = None
        self.starts: list[int] = []
        self.turn_costs: list[int] = []  # the closed turns'
        self.pinned: list[int] = []
        self.kinds: list[int] = []
        self.total = 0  # every turn's tokens, the open one's included
        #: The turns' tokens before each of the newest replies (what each of
        #: those model calls was sent): how fast the history grows per call.
        self.replies: deque[int] = deque(maxlen=GROWTH_CALLS)

    def extend(self, kinds: Sequence[int], costs: Sequence[int]) -> None:
        """Group ``len(kinds)`` more messages: one pass, O(len(kinds))."""
        system, orphan, current, previous = self.system, self.orphan, self.current, self.previous
        starts, turn_costs, pinned = self.starts, self.turn_costs, self.pinned
        replies, total = self.replies, self.total
        for i, kind, cost in zip(
            range(self.size, self.size + len(kinds)), kinds, costs, strict=True
        ):
            if kind == START:
                if starts:
                    turn_costs.append(current)
                starts.append(i)
                current = cost
                total += cost
            elif kind == PINNED:
                system += cost
                pinned.append(i)
            elif kind == ANCHOR:  # pinned, and the start of a turn that costs nothing itself
                system += cost
                pinned.append(i)
                if starts:
                    turn_costs.append(current)
                starts.append(i)
                current = 0
            else:
                if kind == REPLY:  # the history before it: what that model call was sent
                    previous = (len(starts), current, system)
                    if starts:
                        replies.append(total)
                if starts:
                    current += cost
                    total += cost
                else:
                    orphan += cost
        self.kinds.extend(kinds)
        self.size += len(kinds)
        self.system, self.orphan, self.current, self.previous = system, orphan, current, previous
        self.total = total

    @property
    def growth(self) -> float:
        """Tokens added per model call over the newest ``GROWTH_CALLS`` calls
        (every turn's tokens when no model call was made yet)."""
        replies = self.replies
        if not replies:
            return float(self.total)
        return (self.total - replies[0]) / len(replies)

    def plan(
        self, max_tokens: int, overhead: int = 0, trim_to: int | Cut | None = None
    ) -> TrimPlan:
        """The plan of the messages grouped so far; O(turns), and nothing is changed."""
        turn_costs = [*self.turn_costs, self.current] if self.starts else []
        previous = self.previous
        if previous is not None and overhead:
            previous = (previous[0], previous[1], previous[2] + overhead)
        return plan_turns(
            self.size,
            self.starts,
            turn_costs,
            self.pinned,
            self.system + overhead,
            overhead,
            self.orphan,
            max_tokens,
            trim_to,
            previous,
            self.growth,
        )

    def recosted(self, costs: Sequence[int]) -> Grouping:
        """The grouping of the same messages costing ``costs`` instead (one
        per message, validated): what ``extend`` of a fresh ``Grouping`` with
        these kinds and ``costs`` makes, from the turns already found (see
        ``regroup``): for a counter whose costs change as it learns
        (``CalibratedCounter``) over the same remembered history."""
        size = self.size
        if len(costs) != size:
            msg = f"got {len(costs)} costs for {size} messages"
            raise ValueError(msg)
        return regroup(self.kinds, self.starts, self.pinned, costs)


def regroup(
    kinds: Sequence[int], starts: Sequence[int], pinned: Sequence[int], costs: Sequence[int]
) -> Grouping:
    """The grouping of messages of turn kinds ``kinds`` costing ``costs``,
    whose turns start at ``starts`` and pinned messages are at ``pinned``
    (a grouping of these kinds found them): what ``extend`` makes, without
    grouping again. Its passes are prefix sums and slices in C, the turns'
    and the newest replies' sums looked up. The lists are copied, so a
    grouping that later grows may give its own."""
    size = len(costs)
    turned = list(costs)
    for i in pinned:
        turned[i] = 0  # a pinned message's tokens are the system's, not a turn's
    prefix = [0, *accumulate(turned)]
    at = prefix.__getitem__
    other = Grouping()
    other.size = size
    other.kinds = list(kinds)
    other.pinned = list(pinned)
    other.starts = list(starts)
    other.system = sum(map(costs.__getitem__, pinned))
    if starts:
        first = starts[0]
        ends = [*starts[1:], size]
        turns = list(map(operator.sub, map(at, ends), map(at, starts)))
        other.current = turns.pop()
        other.turn_costs = turns
        other.orphan = prefix[first]
        other.total = prefix[size] - prefix[first]
    else:
        other.orphan = prefix[size]
    replies = list(compress(range(size), map(operator.eq, kinds, repeat(REPLY))))
    if replies:
        reply = replies[-1]
        turns_before = bisect_left(starts, reply)
        current = prefix[reply] - prefix[starts[turns_before - 1]] if turns_before else 0
        system = sum(map(costs.__getitem__, pinned[: bisect_right(pinned, reply)]))
        other.previous = (turns_before, current, system)
        if starts:
            after = replies[bisect_right(replies, starts[0]) :][-GROWTH_CALLS:]
            other.replies.extend(map(operator.sub, map(at, after), repeat(prefix[starts[0]])))
    return other


def previous_call(
    starts: Sequence[int],
    turn_costs: Sequence[int],
    system: int,
    size: int,
    reply: int,
    tail_kinds: Sequence[int],
    tail_costs: Sequence[int],
) -> Previous:
    """The history before index ``reply`` (the previous model call's), from this
    history's turns (``turn_costs``, the newest one's included), its pinned
    tokens and the kinds and costs of its messages from ``reply`` on."""
    turns = bisect_left(starts, reply)
    for kind, cost in zip(tail_kinds, tail_costs, strict=True):
        if kind in _PINNED:
            system -= cost
    if not turns:
        return (0, 0, system)
    end = starts[turns] if turns < len(starts) else size
    last = turn_costs[turns - 1]
    for kind, cost in zip(tail_kinds[: end - reply], tail_costs[: end - reply], strict=True):
        if kind not in _PINNED:
            last -= cost
    return (turns, last, system)


def plan_costs(
    kinds: Sequence[int],
    costs: Sequence[int],
    max_tokens: int,
    overhead: int = 0,
    trim_to: int | Cut | None = None,
) -> TrimPlan:
    """Plan a trim from each message's kind and cost (already validated).

    One grouping pass and one backward pass over the turns: O(n).
    """
    grouping = Grouping()
    grouping.extend(kinds, costs)
    return grouping.plan(max_tokens, overhead, trim_to)
