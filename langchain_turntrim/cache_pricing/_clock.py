"""``CacheClock``: what the agent middlewares remember of each thread's prompt
cache (by the run's ``thread_id``): when its previous model call ended, where
that call's cut was and what it sent. From them, whether a call finds the cache
cold (idle longer than its TTL) and where a warm call's cut stays; after the
call, its cost from the provider's cache figures against the greedy trim's."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_turntrim._counting import LRU
from langchain_turntrim._report import TrimReport
from langchain_turntrim.cache_pricing import CachePrice
from langchain_turntrim.cache_pricing._depth import CacheCall, call_cost

__all__ = ["CacheClock", "CacheTotals"]

#: Threads whose previous call is remembered (the least recently used go first).
THREADS = 1024


@dataclass
class CacheTotals:
    """A thread's running totals, in the provider's tokens (where it reported
    them) and in base input prices (an uncached input token costs 1)."""

    calls: int = 0
    """Model calls made."""
    reported_calls: int = 0
    """Calls whose cache figures the provider reported (the others are estimated)."""
    input_tokens: int = 0
    hit_tokens: int = 0
    """Tokens read from the cache."""
    written_tokens: int = 0
    """Tokens written to the cache."""
    cost: float = 0.0
    """The input cost of the calls made."""
    greedy_cost: float = 0.0
    """What they would have cost trimmed greedily (``trim_to=None``)."""


@dataclass(slots=True, eq=False)
class _Thread:
    """One thread's previous call."""

    last: float | None = None
    #: (index, id) of the first message the previous auto cut kept.
    floor: tuple[int, object] | None = None
    #: What the previous call and its greedy trim kept first.
    first: object = None
    greedy_first: object = None
    sent: int = 0
    greedy: int = 0
    totals: CacheTotals = field(default_factory=CacheTotals)
    lock: threading.Lock = field(default_factory=threading.Lock)


class CacheClock:
    """The per-thread memory behind timing cuts to the cache (see the module)."""

    def __init__(self) -> None:
        self._threads: LRU[_Thread] = LRU(THREADS)
        self._lock = threading.Lock()

    def thread(self, key: Hashable) -> _Thread:
        with self._lock:
            found = self._threads.get((key,))
            if found is None:
                found = _Thread()
                self._threads.put_many([((key,), found)])
        return found

    def totals(self, key: Hashable) -> CacheTotals:
        """A copy of thread ``key``'s totals (zeros when unknown)."""
        found = self._threads.get((key,))
        if found is None:
            return CacheTotals()
        with found.lock:  # not halfway through a call's additions
            return replace(found.totals)

    def call(self, thread: _Thread, price: CachePrice, planned: Sequence[Any]) -> CacheCall:
        """What this call knows of its cache: cold when the thread's previous call
        ended longer ago than the TTL (a thread never seen may be warm: not cold);
        a warm call's cut stays at or after the previous call's."""
        cold = thread.last is not None and time.monotonic() - thread.last > price.ttl
        floor = 0 if thread.floor is None else _find(planned, *thread.floor)
        return CacheCall(price, cold, floor)

    def observe(
        self,
        thread: _Thread,
        call: CacheCall,
        report: TrimReport[Any],
        planned: Sequence[Any],
        usage: tuple[int, int, int | None] | None,
    ) -> None:
        """After the call (``usage``: what its reply reported): what its cache
        did, added to the thread's totals; the thread remembers this call."""
        price, plan, sent = call.price, report.plan, report.tokens_after
        first = _identity(planned, plan.keep_from)
        auto = report.auto or {}
        greedy_kept = auto.get("greedy_tokens_after", plan.tokens_after)
        greedy_first = _identity(planned, auto.get("greedy_keep_from", plan.keep_from))
        pinned = plan.system_tokens + plan.overhead_tokens
        with thread.lock:
            warm = thread.last is not None and not call.cold
            held = min(thread.sent, sent) if first == thread.first else min(pinned, sent)
            cached = held if warm and thread.sent >= price.min_prefix else 0
            if usage is not None and sent:
                total, hit, written = usage
                fresh = total - hit
                wrote = fresh if written is None else written
                cost = hit * price.read + wrote * price.write + (fresh - wrote)
                scale = total / sent
            else:
                total, hit, scale = sent, cached, 1.0
                wrote = sent - cached if sent >= price.min_prefix else 0
                cost = call_cost(sent, cached, price)
            same_start = greedy_first == thread.greedy_first
            kept_before = min(thread.greedy if same_start else pinned, greedy_kept)
            held_greedy = kept_before if warm and thread.greedy >= price.min_prefix else 0
            greedy = call_cost(round(greedy_kept * scale), round(held_greedy * scale), price)
            totals = thread.totals
            totals.calls += 1
            totals.reported_calls += usage is not None
            totals.input_tokens += total
            totals.hit_tokens += hit
            totals.written_tokens += wrote
            totals.cost += cost
            totals.greedy_cost += greedy
            thread.sent, thread.greedy, thread.first = sent, greedy_kept, first
            thread.greedy_first = greedy_first
            if report.auto is not None and plan.keep_from < plan.size:
                thread.floor = (plan.keep_from, first)
            thread.last = time.monotonic()


def _identity(planned: Sequence[Any], index: int) -> object:
    """What names the message at ``index``: its id, else the object itself."""
    if index >= len(planned):
        return None
    message = planned[index]
    return getattr(message, "id", None) or message


def _find(planned: Sequence[Any], index: int, ident: object) -> int:
    """Where the message ``ident`` (at ``index`` last time) is now; 0 when gone."""

    def same(i: int) -> bool:
        found = _identity(planned, i)
        return found == ident if isinstance(ident, str) else found is ident

    if index < len(planned) and same(index):
        return index
    return next((i for i in range(len(planned)) if same(i)), 0)
