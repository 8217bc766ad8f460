"""The plan for a counter that counts only whole requests (a chat model's
``get_num_tokens_from_messages``, ``per_list``): the same rule, found by counting
a bounded number of candidate requests, each a valid conversation (the system
messages first, then whole turns). The approximate estimate, scaled by the
counter's last measured ratio to it, guesses the cut; the search gallops from
the guess and bisects. The report says the kept request's own count (the system
messages alone, which no provider would count, are estimated)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import BaseMessage

from langchain_turntrim._compaction import Compacted
from langchain_turntrim._core import PINNED, Count, Cut, TrimPlan, Turns, plan, scaled
from langchain_turntrim._counting import ListCounter

__all__ = ["Found", "compact_whole", "request", "search"]

#: The most counts one compaction makes.
_COMPACT_COUNTS: Final = 6


@dataclass(frozen=True)
class Found:
    """A whole-list plan, and the ratio of the counter's counts to the
    estimate's, for the next guess."""

    plan: TrimPlan
    ratio: float


def request(
    messages: Sequence[BaseMessage], kinds: Sequence[int], indices: Sequence[int]
) -> list[BaseMessage]:
    """The messages at ``indices`` as a request sends them: system messages first."""
    pinned = [messages[i] for i in indices if kinds[i] == PINNED]
    return pinned + [messages[i] for i in indices if kinds[i] != PINNED]


def _scaled(count: Count, ratio: float) -> Count:
    return lambda indices: [scaled(c, ratio) for c in count(indices)]


def _ratio(counted: int, estimated: int, fallback: float) -> float:
    if not estimated or counted > estimated * 1e6:
        return fallback
    return counted / estimated


def search(
    counter: ListCounter,
    messages: Sequence[BaseMessage],
    turns: Turns,
    count: Count,
    budget: int,
    tools: Sequence[Any],
    trim_to: int | Cut | None,
    ratio: float = 1.0,
    counted: dict[int, int] | None = None,
) -> Found:
    """The smallest suffix of whole turns whose request the counter counts within
    ``budget`` (``count``: the estimate of each message; ``counted``: the counts
    of the requests after each first dropped turn, shared by a decision's searches)."""
    counted = {} if counted is None else counted
    n, starts, kinds = len(turns.starts), turns.starts, turns.kinds

    def kept(k: int) -> list[int]:
        start = starts[k] if k < n else turns.size
        return [*(i for i in turns.pinned if i < start), *range(start, turns.size)]

    def exact(k: int) -> int:
        if k == n:  # no request of system messages alone is counted: a provider refuses one
            return scaled(sum(count(kept(k))), ratio)
        if k not in counted:
            counted[k] = counter.count(request(messages, kinds, kept(k)), tools)
        return counted[k]

    def guess(scale: float) -> int:
        return min(plan(turns, _scaled(count, scale), budget, previous=False).dropped_turns, n)

    k = guess(ratio)
    if k < n:
        ratio = _ratio(exact(k), sum(count(kept(k))), ratio)
        k = guess(ratio)

    def fits(k: int) -> bool:
        return k == n or exact(k) <= budget

    # The smallest k that fits lies in (low, high]: gallop from the guess, then bisect.
    low, high, step = -1, n, 1
    if fits(k):
        high = k
        while high > 0 and fits(probe := max(high - step, 0)):
            high, step = probe, step * 2
        low = probe if high > 0 else -1
    else:
        low = k
        while not fits(probe := min(low + step, n)):
            low, step = probe, step * 2
        high = probe
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle
    estimate = plan(turns, _scaled(count, ratio), budget, trim_to=trim_to)
    first = max(high, estimate.dropped_turns) if trim_to is not None else high
    if first == n and n:  # the system messages alone: estimated at the newest request's ratio
        ratio = _ratio(exact(n - 1), sum(count(kept(n - 1))), ratio)
    system = scaled(sum(count(turns.pinned)), ratio)
    newest = max(0, exact(n - 1) - system) if first == n and n else estimate.newest_turn_tokens
    found = dataclasses.replace(
        estimate,
        keep_from=starts[first] if first < n else turns.size,
        dropped_turns=first,
        system_tokens=system,
        overhead_tokens=0,
        tokens_after=exact(first),
        newest_turn_tokens=newest,
    )
    return Found(found, ratio)


def compact_whole(
    counter: ListCounter,
    sent: Callable[[Compacted], tuple[list[BaseMessage], list[int]]],
    kinds: Sequence[int],
    compact_room: Callable[[int], Compacted | None],
    the_plan: TrimPlan,
    tools: Sequence[Any],
    ratio: float,
) -> tuple[Compacted, int] | None:
    """The newest turn compacted on the estimate (``compact_room``), the room
    corrected by the counter's count of each compacted request (``sent``
    assembles it), at most ``_COMPACT_COUNTS`` counts."""
    budget = the_plan.max_tokens
    room = budget - the_plan.system_tokens
    if room <= 0:
        return None
    room = math.floor(room / max(ratio, 1e-9))
    for _ in range(_COMPACT_COUNTS):
        done = compact_room(room)
        if done is None:
            return None
        kept, indices = sent(done)
        total = counter.count(request(kept, [kinds[i] for i in indices], range(len(kept))), tools)
        if total <= budget:
            return done, total
        room -= scaled(total - budget, 1 / max(ratio, 1e-9)) + 1
    return None
