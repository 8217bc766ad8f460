"""How deep ``trim_to="auto"`` cuts: the level with the lowest expected cost
per call under a prompt cache's rules (plain arithmetic).

A stable cut keeps about ``level`` tokens after it moves, and holds while the
history grows by ``g`` tokens a call, until the budget forces the next move: a
cycle of ``D / g`` calls, ``D = max_tokens - level``. Per call, in base input
prices: the cut's own cache write spread over the cycle,
``(write - read) * (R - D) * g / D``; the cached prefix read,
``read * (P + R - D / 2)``; what each call adds, ``write * g``; and the context
given up against the greedy trim, ``D / 2`` tokens at ``context_value`` each
(``R``: the room for turns, ``P``: the pinned tokens). Steps are halvings of
``max_tokens / 2``, so a small change in growth leaves the cut where it is."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from langchain_turntrim._core import REPLY, Count, Cut, TrimPlan, Turns
from langchain_turntrim.cache_pricing import CachePrice

__all__ = ["GROWTH_CALLS", "CacheCall", "auto_cut", "auto_plan", "call_cost", "growth"]

#: How many recent model calls the growth per call is measured over.
GROWTH_CALLS: Final = 64


def growth(turns: Turns, count: Count, start: int = 0) -> float:
    """Turn tokens added per model call, over the newest ``GROWTH_CALLS`` calls
    after ``start`` (a call ends at an assistant message; every turn's tokens
    before any). From the previous call's cut, a history whose older turns a
    state trim deleted grows alike."""
    if not turns.starts:
        return 0.0
    first = max(turns.starts[0], start)
    kinds = turns.kinds
    replies = [i for i in range(first + 1, len(kinds)) if kinds[i] == REPLY][-GROWTH_CALLS:]
    start = replies[0] if replies else first
    pinned = set(turns.pinned)
    indices = [i for i in range(start, len(kinds)) if i not in pinned]
    return min(sum(count(indices)), 2**1000) / max(len(replies), 1)  # a float, however large


def auto_cut(
    max_tokens: int,
    pinned: int,
    per_call: float,
    price: CachePrice,
    context_value: float,
    *,
    cold: bool = False,
    floor: int = 0,
) -> Cut | None:
    """The cut with the lowest expected cost per call (None: the greedy trim,
    when nothing would be cached or there is no room for turns)."""
    room = max_tokens - pinned
    if room <= 0 or max_tokens < price.min_prefix:
        return None
    g = max(per_call, 1.0)
    costs: list[tuple[float, int]] = []
    step = max_tokens // 2
    while step >= g and step >= 1:
        level = max_tokens - step
        if step <= room and level >= price.min_prefix:
            rewrite = (price.write - price.read) * (room - step) * g / step
            read = price.read * (pinned + room - step / 2)
            costs.append((rewrite + read + price.write * g + context_value * step / 2, level))
        step //= 2
    if not costs:
        return None
    level = min(costs)[1]
    gain = context_value - price.read
    rewrite = (price.write - price.read) * (level - pinned) * g / (max_tokens - level)
    return Cut(level, cold, floor, rewrite / gain if gain > 0 else math.inf)


def call_cost(sent: int, cached: int, price: CachePrice) -> float:
    """The input cost of a call of ``sent`` tokens, ``cached`` of them read from
    the cache and the others written to it (none when the prompt is too short to
    be cached), in base input prices."""
    if sent < price.min_prefix:
        return float(sent)
    return cached * price.read + (sent - cached) * price.write


class CacheCall(NamedTuple):
    """What a model call knows of its prompt cache: the rules it is priced by;
    ``cold``, the cache has expired, so cutting now costs nothing extra;
    ``floor``, the index of the message the previous call's cut kept first
    (0: none), which a warm call does not cut before."""

    price: CachePrice
    cold: bool = False
    floor: int = 0


def auto_plan(
    planner: Callable[[int | Cut | None], TrimPlan],
    turns: Turns,
    count: Count,
    call: CacheCall,
    context_value: float,
) -> tuple[TrimPlan, dict[str, Any]]:
    """``trim_to="auto"``: the plan at the cut the greedy plan's figures price,
    and those figures (``TrimReport.auto``)."""
    greedy = planner(None)
    budget, per_call, cut = greedy.max_tokens, growth(turns, count, call.floor), None
    if not greedy.overflowed:
        pinned = greedy.system_tokens + greedy.overhead_tokens
        cut = auto_cut(
            budget, pinned, per_call, call.price, context_value, cold=call.cold, floor=call.floor
        )
        if cut is None and call.floor:  # nothing would be cached: the previous cut holds
            cut = Cut(budget, floor=call.floor)
    chosen = greedy
    if cut is not None and (greedy.dropped_turns or call.cold or call.floor):
        chosen = planner(cut)
    figures = {
        "trim_to": None if cut is None or cut.level == budget else cut.level,
        "cache_rule": call.price.name,
        "cold": call.cold,
        "growth_per_call": round(per_call, 1),
        "greedy_tokens_after": greedy.tokens_after,
        "greedy_keep_from": greedy.keep_from,
    }
    return chosen, figures
