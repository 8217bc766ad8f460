"""Plan the trim of LangChain messages with a resolved counter."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import PINNED, START, TrimPlan, plan_costs
from langchain_turntrim._counters import CachedCounter, Counter, WholeListCounter
from langchain_turntrim._messages import describe

__all__ = ["plan_messages"]


def plan_messages(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int],
    counter: Counter,
    max_tokens: int,
    reserved: int = 0,
) -> TrimPlan:
    """The spec's plan, with every count taken from ``counter``.

    ``reserved`` tokens (e.g. the tool schemas of a model call) are paid once
    per request beside the messages: they are part of ``overhead_tokens``.
    """
    if isinstance(counter, WholeListCounter):
        return _plan_whole_lists(messages, kinds, counter, max_tokens, reserved)
    costs = _checked(counter.count_each(messages), messages, counter)
    return plan_costs(kinds, costs, max_tokens, counter.overhead + reserved)


def _checked(counts: list[int], messages: Sequence[BaseMessage], counter: object) -> list[int]:
    """``counts`` if it holds one non-negative int per message; else raise naming the message."""
    inner = counter.counter if isinstance(counter, CachedCounter) else counter
    if len(counts) != len(messages):
        msg = f"{inner!r} returned {len(counts)} counts for {len(messages)} messages"
        raise ValueError(msg)
    if not counts or (set(map(type, counts)) == {int} and min(counts) >= 0):
        return counts
    for i, count in enumerate(counts):
        where = describe(i, messages[i])
        if not isinstance(count, int) or isinstance(count, bool):
            msg = f"{inner!r} counted {where} as {type(count).__name__} {count!r}, expected an int"
            raise TypeError(msg)
        if count < 0:
            msg = f"{inner!r} counted {where} as {count}, expected a count >= 0"
            raise ValueError(msg)
    return counts


def _plan_whole_lists(
    messages: Sequence[BaseMessage],
    kinds: Sequence[int],
    counter: WholeListCounter,
    max_tokens: int,
    reserved: int,
) -> TrimPlan:
    """Plan with a counter that only sees whole, valid conversations.

    Each turn is counted alone (it starts with a user message); the system
    messages are priced as ``count(systems + newest turn) - count(newest
    turn)``; a per-request constant is estimated from the two newest turns
    counted together. Messages before the first user message belong to no
    turn, are never sent and count 0. The kept list (systems first, then the
    kept turns) is then counted once: while it exceeds the budget, the oldest
    kept turn is dropped, so the budget holds even for a non-additive counter.
    Messages sent per plan: about three times the history, never quadratic
    for an additive counter.
    """
    systems: list[BaseMessage] = []
    turns: list[list[BaseMessage]] = []
    starts: list[int] = []
    first_pinned = -1
    for i, (message, kind) in enumerate(zip(messages, kinds, strict=True)):
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
            costs[first_pinned] = counter.count(systems)
        return plan_costs(kinds, costs, max_tokens, reserved)
    turn_counts = [counter.count(turn) for turn in turns]
    newest = turns[-1]
    system = 0
    if systems:
        system = max(0, counter.count(systems + newest) - turn_counts[-1])
        costs[first_pinned] = system
    overhead = 0
    if len(turns) > 1:
        pair = counter.count(turns[-2] + newest)
        overhead = max(0, min(turn_counts[-2] + turn_counts[-1] - pair, *turn_counts[-2:]))
    for start, count in zip(starts, turn_counts, strict=True):
        costs[start] = count - overhead
    plan = plan_costs(kinds, costs, max_tokens, overhead + reserved)
    first = plan.dropped_turns
    while first < len(turns):
        kept = systems + [m for turn in turns[first:] for m in turn]
        actual = counter.count(kept) + reserved
        if actual <= max_tokens:
            break
        first += 1
    else:
        actual = system + overhead + reserved
    return dataclasses.replace(
        plan,
        keep_from=starts[first] if first < len(starts) else len(messages),
        dropped_turns=first,
        tokens_after=actual,
    )
