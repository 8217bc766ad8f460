"""What the agent middlewares remember of each thread's prompt cache, and what
each model call's cache did.

``CacheClock`` keeps, per thread (the run's ``thread_id``; one shared entry
without a checkpointer), the time of its previous model call, the message
that call's cut kept first and the sizes it was sent, in a bounded LRU. From
them it says whether a call finds the cache cold (older than its TTL) and
where a warm call's cut stays (``CacheCall``), and, after the call, reads the
provider's cache figures (``usage_metadata``) and estimates the call's cost
against an untrimmed and a greedy request (``CacheFigures``), adding them to
the thread's running totals (``CacheTotals``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, NamedTuple

from langchain_core.runnables.config import var_child_runnable_config

from langchain_turntrim._core.depth import CachePrice, call_cost
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._pipeline import CacheCall
from langchain_turntrim._report import TrimReport

__all__ = [
    "DEFAULT_THREADS",
    "CacheClock",
    "CacheFigures",
    "CacheTotals",
    "Call",
    "check_clock",
    "thread_id",
]

#: Threads whose previous call is remembered (least recently used go first).
DEFAULT_THREADS: Final = 1024


@dataclass
class CacheTotals:
    """A thread's running totals, in the provider's tokens (where it reported
    them) and in base input prices (one uncached input token costs 1).

    Attributes:
        calls: Model calls made.
        reported_calls: Calls whose cache figures the provider reported
            (the others are estimated from the counts).
        input_tokens: Input tokens sent.
        hit_tokens: Tokens read from the cache.
        written_tokens: Tokens written to the cache.
        cost: The input cost of the calls made.
        untrimmed_cost: What the same calls would have cost untrimmed.
        greedy_cost: What they would have cost trimmed greedily
            (``trim_to=None``); None when not known (a fixed ``trim_to``).
    """

    calls: int = 0
    reported_calls: int = 0
    input_tokens: int = 0
    hit_tokens: int = 0
    written_tokens: int = 0
    cost: float = 0.0
    untrimmed_cost: float = 0.0
    greedy_cost: float | None = 0.0

    def add(self, figures: CacheFigures) -> None:
        self.calls += 1
        self.reported_calls += figures.reported
        self.input_tokens += figures.input_tokens
        self.hit_tokens += figures.hit_tokens
        self.written_tokens += figures.written_tokens
        self.cost += figures.cost
        self.untrimmed_cost += figures.untrimmed_cost
        if self.greedy_cost is not None:
            greedy = figures.greedy_cost
            self.greedy_cost = None if greedy is None else self.greedy_cost + greedy


class CacheFigures(NamedTuple):
    """What one model call's cache did (see ``CacheTotals`` for the units)."""

    cache_rule: str
    cold: bool
    reported: bool
    input_tokens: int
    hit_tokens: int
    written_tokens: int
    cost: float
    untrimmed_cost: float
    greedy_cost: float | None

    def summary(self) -> dict[str, Any]:
        """JSON-ready, costs rounded."""
        greedy = self.greedy_cost
        return {
            "cache_rule": self.cache_rule,
            "cold": self.cold,
            "reported": self.reported,
            "input_tokens": self.input_tokens,
            "hit_tokens": self.hit_tokens,
            "written_tokens": self.written_tokens,
            "cost": round(self.cost, 1),
            "untrimmed_cost": round(self.untrimmed_cost, 1),
            "greedy_cost": None if greedy is None else round(greedy, 1),
        }


class _Thread:
    """One thread's previous call."""

    __slots__ = ("first", "floor", "greedy", "last", "price", "sent", "totals", "untrimmed")

    def __init__(self) -> None:
        self.last: float | None = None  # when its previous model call ended
        #: (index, id) of the first message its previous cut kept (the message
        #: itself when it has no id).
        self.floor: tuple[int, object] | None = None
        self.price: CachePrice | None = None  # the rules its previous call was priced by
        self.first: object = None  # the id of the first non-pinned message sent
        self.sent = self.untrimmed = self.greedy = 0
        self.totals = CacheTotals()


class CacheClock:
    """The per-thread memory behind timing cuts to the cache (see the module docs)."""

    def __init__(self, clock: Callable[[], float], threads: int = DEFAULT_THREADS) -> None:
        self.clock = clock
        self._threads: LRU[_Thread] = LRU(threads, "threads")
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles start with no thread remembered.
        return (type(self), (self.clock, self._threads.maxsize))

    def thread(self, key: Hashable) -> _Thread:
        """The memory of thread ``key`` (None: calls made without a thread id)."""
        with self._lock:
            thread = self._threads.get((key,))  # in a tuple: the LRU never stores None
            if thread is None:
                thread = _Thread()
                self._threads.put_many((((key,), thread),))
        return thread

    def totals(self, key: Hashable) -> CacheTotals:
        """A copy of the running totals of thread ``key`` (zeros when unknown)."""
        with self._lock:
            thread = self._threads.get((key,))
        return CacheTotals() if thread is None else CacheTotals(**asdict(thread.totals))

    def call(
        self, thread: _Thread, price: CachePrice, planned: Sequence[Any], *, timed: bool
    ) -> tuple[CacheCall, bool]:
        """What this call of ``thread`` knows of its cache, and whether its
        figures should take the cache as cold; ``timed``: a call whose
        thread's previous call is older than the TTL cuts now, a warm one
        stays at or after the previous call's cut. A thread this clock has
        not seen (a restart, another worker, forgotten) is not cut now: its
        provider's cache may be warm."""
        last = thread.last
        expired = last is not None and self.clock() - last > price.ttl
        return CacheCall(price, expired and timed, self.floor(thread, planned) if timed else 0), (
            last is None or expired
        )

    def floor(self, thread: _Thread, messages: Sequence[Any]) -> int:
        """Where the previous call's first kept message is in ``messages`` (0: gone)."""
        return 0 if thread.floor is None else _find(messages, *thread.floor)

    def observe(
        self,
        thread: _Thread,
        call: CacheCall,
        report: TrimReport[Any],
        planned: Sequence[Any],
        usage: tuple[int, int, int | None] | None,
        *,
        cold: bool,
    ) -> CacheFigures:
        """After the call (``usage``: what its reply reported, ``cache_usage``):
        the figures of what its cache did, added to the thread's totals; the
        thread remembers this call."""
        price, plan = call.price, report.plan
        sent, untrimmed = report.tokens_after, plan.tokens_before
        depth = report.depth
        greedy = depth.greedy if depth is not None else (plan if plan.trim_to is None else None)
        pinned = plan.system_tokens + plan.overhead_tokens
        first = _first_id(planned, plan.keep_from)
        warm = not cold
        least = price.min_prefix  # a previous request shorter than this was not cached
        cached = 0
        if warm and thread.sent >= least:
            cached = min(thread.sent, sent) if first == thread.first else min(pinned, sent)
        if usage is not None and sent:
            total, hit, written = usage
            scale = total / sent
            fresh = total - hit
            wrote = fresh if written is None else written  # OpenAI: every uncached token
            cost = hit * price.read + wrote * price.write + (fresh - wrote)
        else:
            total, scale = sent, 1.0
            cost = call_cost(sent, cached, price)
            hit, wrote = cached, (sent - cached if sent >= price.min_prefix else 0)
        held_untrimmed = (
            min(thread.untrimmed, untrimmed) if warm and thread.untrimmed >= least else 0
        )
        untrimmed_cost = call_cost(round(untrimmed * scale), round(held_untrimmed * scale), price)
        greedy_cost = None
        if greedy is not None:
            kept = greedy.tokens_after
            held = min(thread.greedy, kept) if not greedy.start_moved else min(pinned, kept)
            held = held if warm and thread.greedy >= least else 0
            greedy_cost = call_cost(round(kept * scale), round(held * scale), price)
            thread.greedy = kept
        figures = CacheFigures(
            price.name,
            cold,
            usage is not None,
            total,
            hit,
            wrote,
            cost,
            untrimmed_cost,
            greedy_cost,
        )
        thread.totals.add(figures)
        thread.sent, thread.untrimmed, thread.first = sent, untrimmed, first
        thread.price = price
        if depth is not None and plan.keep_from < plan.size:
            thread.floor = (plan.keep_from, _first_id(planned, plan.keep_from))
        thread.last = self.clock()
        return figures


def _message_id(message: object) -> object:
    return getattr(message, "id", None)


def _first_id(planned: Sequence[Any], keep_from: int) -> object:
    """What identifies the first non-pinned message sent: its id, else the object."""
    if keep_from >= len(planned):
        return None
    message = planned[keep_from]
    ident = _message_id(message)
    return message if ident is None else ident


def _find(planned: Sequence[Any], index: int, ident: object) -> int:
    """Where the message ``ident`` (its id, or the message itself when it has
    none; at ``index`` last time) is now; 0 when gone."""
    if ident is None:
        return 0

    def same(message: object) -> bool:
        return _message_id(message) == ident if isinstance(ident, str) else message is ident

    if index < len(planned) and same(planned[index]):
        return index
    return next((i for i, m in enumerate(planned) if same(m)), 0)


def check_clock(clock: object) -> None:
    """Raise unless ``clock()`` returns a finite number of seconds (it is called once)."""
    now = clock() if callable(clock) else None
    if not isinstance(now, (int, float)) or isinstance(now, bool) or not math.isfinite(now):
        shown = type(now).__name__ if callable(clock) else f"a {type(clock).__name__}"
        msg = f"clock must be a function returning seconds (a float), got {shown}"
        raise TypeError(msg)


class Call:
    """One model call's cache context (its attempts share it)."""

    __slots__ = ("cold", "planned", "price", "thread")

    def __init__(self, thread: Any, price: CachePrice) -> None:
        self.thread = thread
        self.price = price
        self.cold = True
        self.planned: Sequence[Any] = ()


def thread_id() -> Hashable:
    """The ``thread_id`` of the agent run this executes in (None outside one):
    what LangGraph's ``get_config()`` reads, without its error outside a run."""
    config = var_child_runnable_config.get()
    if not config:
        return None
    configurable = config.get("configurable")
    return configurable.get("thread_id") if configurable else None
