"""One trimmer shared by threads and by concurrent coroutines."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import tool_call

from langchain_turntrim import ApproximateCounter, CalibratedCounter, TurnTrimmer
from langchain_turntrim._counting import CachedCounter
from langchain_turntrim._messages import TrimInput
from langchain_turntrim._planning import AdditivePlanner


def histories(count: int) -> list[list[BaseMessage]]:
    """Distinct histories sharing a prefix, so threads race on the same cache keys."""
    shared: list[BaseMessage] = [SystemMessage("rules")]
    for t in range(40):
        shared += [HumanMessage(f"question {t} " * (t % 7 + 1)), AIMessage(f"answer {t}")]
    return [[*shared[: 3 + k * 7 % len(shared)], HumanMessage(f"own {k}")] for k in range(count)]


def sequential(items: Sequence[list[BaseMessage]]) -> list[list[BaseMessage]]:
    fresh = TurnTrimmer(max_tokens=150, cache_size=0)
    return [fresh.invoke(h) for h in items]


def test_batch_across_eight_threads_matches_sequential() -> None:
    items = histories(64)
    inputs: list[TrimInput] = list(items)  # batch takes a list of the Runnable's input type
    trimmer = TurnTrimmer(max_tokens=150, cache_size=40)  # small: constant eviction
    for _ in range(3):
        assert trimmer.batch(inputs, config={"max_concurrency": 8}) == sequential(items)


def test_hundred_concurrent_ainvoke_match_sequential() -> None:
    items = histories(100)
    trimmer = TurnTrimmer(max_tokens=150, cache_size=40)

    async def run() -> list[list[BaseMessage]]:
        return list(await asyncio.gather(*(trimmer.ainvoke(h) for h in items)))

    assert asyncio.run(run()) == sequential(items)


def test_cache_is_never_corrupted() -> None:
    items = histories(64)
    cached = CachedCounter(ApproximateCounter(), cache_size=500)
    trimmer = TurnTrimmer(max_tokens=150, token_counter=cached)
    inputs: list[TrimInput] = list(items * 4)
    trimmer.batch(inputs, config={"max_concurrency": 8})
    assert len(cached) <= 500
    every = [m for h in items for m in h]
    assert cached.count_each(every) == ApproximateCounter().count_each(every)


class Rendezvous:
    """A counter whose count_each waits until two threads are inside it at once.

    Had the cache held its lock while tokenizing, the second thread could
    never enter and the barrier would time out.
    """

    overhead = 0

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=10)

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        self.barrier.wait()
        return [1] * len(messages)


def test_no_lock_is_held_while_tokenizing() -> None:
    trimmer = TurnTrimmer(max_tokens=10, token_counter=Rendezvous())
    results = trimmer.batch(
        [[HumanMessage("a")], [HumanMessage("b")]], config={"max_concurrency": 2}
    )
    assert [[m.content for m in r] for r in results] == [["a"], ["b"]]


def _asks(k: int) -> AIMessage:
    return AIMessage("", id=f"a{k}", tool_calls=[tool_call(name="f", args={}, id=f"c{k}")])


@pytest.mark.parametrize("make", [ApproximateCounter, CalibratedCounter])
def test_a_history_grown_the_moment_its_plan_is_remembered_keeps_that_plan(
    make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another thread may take a remembered history and grow it as soon as a
    plan puts it back: the plan already made is of the history it was given."""
    history: list[BaseMessage] = [HumanMessage("task", id="u")]
    for k in range(3):
        history += [_asks(k), ToolMessage("ok", tool_call_id=f"c{k}", id=f"t{k}")]
    history.append(_asks(9))  # its call is not answered yet: left out of the request
    longer = [*history, ToolMessage("ok", tool_call_id="c9", id="t9"), AIMessage("done")]
    expected = TurnTrimmer(max_tokens=100_000, token_counter=make(), cache_size=0).trim(history)
    assert [m.id for m in expected] == ["u", "a0", "t0", "a1", "t1", "a2", "t2"]
    trimmer = TurnTrimmer(max_tokens=100_000, token_counter=make())
    for _ in range(2):  # remembered from its second plan on
        assert trimmer.trim(history) == expected
    planner = trimmer.planner
    assert isinstance(planner, AdditivePlanner)
    assert planner.memo is not None
    memo = type(planner.memo)
    put = memo._put

    def put_then_grow(self: Any, entry: Any, counter: Any) -> None:
        put(self, entry, counter)
        monkeypatch.setattr(memo, "_put", put)
        trimmer.trim(longer)  # the other thread, right then

    monkeypatch.setattr(memo, "_put", put_then_grow)
    assert trimmer.trim(history) == expected
