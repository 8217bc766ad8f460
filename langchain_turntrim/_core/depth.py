"""How deep ``trim_to="auto"`` cuts: the level with the lowest expected cost
per call, priced by a prompt cache's rules (plain arithmetic, no LangChain).

A stable cut (``stable``) keeps about ``level`` tokens after it moves, and
holds while the history grows by ``g`` tokens a call, until the budget forces
the next move: a cycle of ``D / g`` calls, where ``D = max_tokens - level``.
Per call, in base input prices (one uncached token costs 1):

* the cut's own cache write, spread over the cycle: the kept turns written
  again instead of read, ``(write - read) * (R - D) * g / D``;
* the cached prefix read, ``read`` times the mean request (``P + R - D / 2``);
* what each call adds, written: ``write * g``;
* the context given up against the greedy trim (which keeps about ``R``
  turn tokens every call): ``D / 2`` tokens, worth ``context_value`` each.

``R`` is the room for turns (the budget less the pinned tokens ``P``). The
deeper the cut, the cheaper the input and the more context is given up; the
level chosen minimises the sum. Steps come from a fixed grid, halvings of
``max_tokens / 2``: a small change in the estimated growth leaves the step
where it is, and since the candidate cuts of a step are among those of its
half, a change of step often leaves the cut where it is too.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from langchain_turntrim._core.kinds import check_count
from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "CachePrice",
    "Cut",
    "auto_cut",
    "auto_level",
    "call_cost",
    "check_rate",
    "cold_keep",
    "floor_turn",
]

#: How many recent model calls the growth per call is measured over.
GROWTH_CALLS = 64


def check_rate(value: object, name: str, *, positive: bool = False) -> float:
    """``value`` as a float if it is a finite number >= 0 (> 0 when
    ``positive``), not a bool; else a ``TypeError``/``ValueError`` naming it."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        msg = f"{name} must be a number, got {type(value).__name__} {safe_repr(value, 80)}"
        raise TypeError(msg)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        msg = f"{name} must be finite and {bound}, got {safe_repr(value, 80)}"
        raise ValueError(msg)
    return float(value)


@dataclass(frozen=True)
class CachePrice:
    """A prompt cache's rules for one model and TTL, in base input prices.

    Attributes:
        read: What a token read from the cache costs (a hit), relative to an
            uncached input token (e.g. 0.1).
        write: What a token written to the cache costs (a miss that is cached
            for the next call), relative to an uncached input token (1.25 for
            Anthropic's 5-minute cache; 1.0 where writes cost nothing extra).
        ttl: Seconds idle after which the cache is gone.
        min_prefix: The shortest prompt (in tokens) that is cached at all.
        name: Where these rules come from (a table row, or your own).
    """

    read: float = 0.1
    write: float = 1.25
    ttl: float = 300.0
    min_prefix: int = 1024
    name: str = "custom"

    def __post_init__(self) -> None:
        for field in ("read", "write", "ttl"):
            check_rate(getattr(self, field), f"CachePrice.{field}", positive=field == "ttl")
        check_count(self.min_prefix, "CachePrice.min_prefix")
        if not isinstance(self.name, str):
            msg = f"CachePrice.name must be a str, got {type(self.name).__name__}"
            raise TypeError(msg)


class Cut(NamedTuple):
    """The cut a plan is asked for: ``trim_to``'s stable cut at ``level``.

    ``floor``: the index of the first message the previous call's cut kept
    (0: none): while what follows it fits, the cut stays there. ``cold``:
    the cache is gone, so a cut now costs nothing extra: the cut moves to
    the deepest candidate whose calls, until the budget forces the next
    cut, cost less than the cycle's mean (``cold_keep``), ``hold`` being
    what a bust adds to that mean, in tokens of context (see ``auto_cut``).
    """

    level: int
    cold: bool = False
    floor: int = 0
    hold: float = 0.0


def auto_cut(
    max_tokens: int,
    pinned: int,
    growth: float,
    price: CachePrice,
    context_value: float,
    *,
    cold: bool = False,
    floor: int = 0,
) -> Cut | None:
    """``auto_level``'s cut, with what a cold call needs to cut now (None:
    the greedy trim)."""
    level = auto_level(max_tokens, pinned, growth, price, context_value)
    if level is None:
        return None
    step = max_tokens - level
    gain = context_value - price.read
    rewrite = (price.write - price.read) * (level - pinned) * max(growth, 1.0) / step
    hold = rewrite / gain if gain > 0 else math.inf
    return Cut(level, cold, floor, hold)


def cold_keep(kept: int, level_room: int, room: int, hold: float) -> float:
    """The fewest turn tokens a cold call's cut keeps, when ``kept`` are kept
    now: a cut to ``K'`` spends the calls until the budget forces the next
    cut at a mean of ``(kept + K') / 2`` tokens, which must be worth more
    than the cycle's mean, ``(level_room + room) / 2``, less what a bust
    adds per call (``hold``): ``K' >= level_room + room - 2 * hold - kept``.

    Per call, a kept token saves ``context_value - read`` against the greedy
    trim, and a bust costs ``(write - read)`` for each token kept after it,
    once per ``step / growth`` calls.
    """
    return level_room + room - 2 * hold - kept


def auto_level(
    max_tokens: int, pinned: int, growth: float, price: CachePrice, context_value: float
) -> int | None:
    """The ``trim_to`` level with the lowest expected cost per call (see the
    module docs), or None (the greedy trim) when nothing would be cached:
    the budget is below the cacheable minimum, or there is no room for turns."""
    room = max_tokens - pinned
    if room <= 0 or max_tokens < price.min_prefix:
        return None
    g = max(growth, 1.0)
    costs: list[tuple[float, int]] = []
    step = max_tokens // 2
    while step >= g and step >= 1:
        level = max_tokens - step
        if step <= room and level >= price.min_prefix:
            costs.append((_per_call(room, pinned, step, g, price, context_value), level))
        step //= 2
    return min(costs)[1] if costs else None


def _per_call(
    room: int, pinned: int, step: int, g: float, price: CachePrice, context_value: float
) -> float:
    rewrite = (price.write - price.read) * (room - step) * g / step
    read = price.read * (pinned + room - step / 2)
    return rewrite + read + price.write * g + context_value * step / 2


def call_cost(sent: int, cached: int, price: CachePrice, written: int | None = None) -> float:
    """The input cost of a call of ``sent`` tokens of which ``cached`` were read
    from the cache, in base input prices: ``written`` tokens (default: every
    other one, when the prompt is long enough to be cached) cost ``write``,
    the rest 1."""
    if sent < price.min_prefix:
        return float(sent)
    fresh = sent - cached
    written = fresh if written is None else min(written, fresh)
    return cached * price.read + written * price.write + (fresh - written)


def floor_turn(starts: Sequence[int], floor: int) -> int:
    """The turn starting at message ``floor`` (``starts``: each turn's first
    message), or 0 when no turn starts there."""
    turn = bisect_left(starts, floor)
    return turn if turn < len(starts) and starts[turn] == floor else 0
