"""The contract every entry point keeps with every counter: the spec's cut (by
the counter's own counts), ``tokens_after`` the counter's count of exactly
what is sent, and a request every provider accepts. One suite over entry
points x counters is the guard that they all agree."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TiktokenCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimStateMiddleware,
    per_list,
    per_message,
    trim_turns,
    trim_update,
)
from langchain_turntrim._anatomy import check
from langchain_turntrim._core import PINNED, group
from tests.providers import check_request
from tests.reference import reference_trim
from tests.strategies import conversations


def _length(message: BaseMessage) -> int:
    return len(str(message.content))


_length.__annotations__["message"] = BaseMessage

#: Every kind of counter: additive (approximate, exact, a function, calibrated)
#: and whole-list (a function counting a whole list, and one counting 1.3x more).
COUNTERS: dict[str, Callable[[], Any]] = {
    "approximate": lambda: "approximate",
    "tiktoken": lambda: TiktokenCounter("gpt-4"),
    "per_message": lambda: per_message(_length),
    "calibrated": CalibratedCounter,
    "per_list": lambda: per_list(count_tokens_approximately),
    "per_list_1.3x": lambda: per_list(lambda ms: math.ceil(1.3 * count_tokens_approximately(ms))),
}


def _request(middleware: TurnTrimMiddleware, messages: list[BaseMessage]) -> list[BaseMessage]:
    system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    rest = messages[1:] if system is not None else messages
    request = ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=rest,  # type: ignore[arg-type]
        system_message=system,
        tools=[],
        state={},  # type: ignore[arg-type]
        runtime=None,
    )
    trimmed, _ = middleware.trim_request(request)
    return [*([trimmed.system_message] if trimmed.system_message else []), *trimmed.messages]


#: Every entry point, as ``(counter, budget, messages) -> what it returns or sends``.
ENTRY_POINTS: dict[str, Callable[[Any, int, list[BaseMessage]], list[BaseMessage]]] = {
    "TurnTrimmer.invoke": lambda c, b, m: TurnTrimmer(max_tokens=b, token_counter=c).invoke(m),
    "TurnTrimmer.trim": lambda c, b, m: TurnTrimmer(max_tokens=b, token_counter=c).trim(m),
    "TurnTrimmer.batch": lambda c, b, m: TurnTrimmer(max_tokens=b, token_counter=c).batch([m, m])[
        1
    ],
    "trim_turns": lambda c, b, m: trim_turns(m, max_tokens=b, token_counter=c),
    "trim_turns()": lambda c, b, m: trim_turns(max_tokens=b, token_counter=c).invoke(m),
    "TurnTrimMiddleware": lambda c, b, m: _request(
        TurnTrimMiddleware(max_tokens=b, token_counter=c, on_overflow="drop"), m
    ),
    "TurnTrimStateMiddleware": lambda c, b, m: _request(
        TurnTrimStateMiddleware(max_tokens=b, token_counter=c, on_overflow="drop"), m
    ),
}


def _resolved(counter: Any) -> Any:
    return TurnTrimmer(max_tokens=0, token_counter=counter).counter


def _oracle(counter: Any, messages: list[BaseMessage], budget: int) -> list[int]:
    """The spec's cut by the counter's own counts: the naive reference on
    records costing each message's count (the per-request constant a pinned
    record), or, for a whole-list counter, the smallest suffix of whole turns
    whose request it counts within the budget."""
    kinds = [check(i, m) for i, m in enumerate(messages)]
    counter = _resolved(counter)
    if hasattr(counter, "count_each"):
        costs = counter.count_each(messages)
        roles = {0: "system", 1: "user", 2: "tool", 3: "assistant", 4: "system"}
        records = [{"id": -1, "role": "system", "tokens": counter.overhead}]
        records += [
            {"id": i, "role": roles[k], "tokens": c}
            for i, (k, c) in enumerate(zip(kinds, costs, strict=True))
        ]
        return [r["id"] for r in reference_trim(records, budget) if r["id"] != -1]
    turns = group(kinds)
    for start in [*turns.starts, len(messages)]:
        kept = [*(i for i in turns.pinned if i < start), *range(start, len(messages))]
        ordered = [messages[i] for i in kept if kinds[i] == PINNED] + [
            messages[i] for i in kept if kinds[i] != PINNED
        ]
        if start == len(messages) or counter.count(ordered) <= budget:
            return kept
    raise AssertionError


def _sent_count(counter: Any, sent: Sequence[BaseMessage]) -> int:
    counter = _resolved(counter)
    kinds = [check(i, m) for i, m in enumerate(sent)]
    ordered = [m for m, k in zip(sent, kinds, strict=True) if k == PINNED] + [
        m for m, k in zip(sent, kinds, strict=True) if k != PINNED
    ]
    count: int = counter.count(ordered)
    return count


@pytest.fixture(params=sorted(COUNTERS))
def counter(request: pytest.FixtureRequest) -> Any:
    if request.param == "tiktoken":
        request.getfixturevalue("tiktoken_cache")
    return COUNTERS[request.param]()


@settings(
    max_examples=25,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=conversations(max_turns=5), share=st.floats(0, 1.2))
def test_every_entry_point_keeps_the_spec_s_cut(
    counter: Any, history: list[BaseMessage], share: float
) -> None:
    budget = int(share * _sent_count(counter, history))
    expected = _oracle(counter, history, budget)
    report = TurnTrimmer(max_tokens=budget, token_counter=counter).report(history)
    assert list(report.plan.kept) == expected
    # A whole-list counter is never sent system messages alone: they are estimated.
    estimated = report.plan.kept_turns == 0 and not hasattr(_resolved(counter), "count_each")
    assert estimated or report.tokens_after == _sent_count(counter, report.kept)
    if report.kept:
        check_request(report.kept, history)
    for name, entry in ENTRY_POINTS.items():
        assert entry(counter, budget, history) == report.kept, name


@settings(
    max_examples=15,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=conversations(max_turns=5), share=st.floats(0, 1.2))
def test_the_state_update_removes_what_the_request_left_out(
    counter: Any, history: list[BaseMessage], share: float
) -> None:
    history = [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(history)]
    trimmer = TurnTrimmer(
        max_tokens=int(share * _sent_count(counter, history)), token_counter=counter
    )
    report = trimmer.report(history)
    removed = [m.id for m in trim_update(history, trimmer)["messages"]]
    assert removed == [history[i].id for i in report.plan.removed]
    assert set(removed).isdisjoint(m.id for m in report.kept)
    newest = report.plan.newest_turn_start
    assert all(i < newest for i in report.plan.removed)


def test_a_system_message_between_a_call_and_its_result_keeps_them_together(counter: Any) -> None:
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    history = [
        HumanMessage("find x", id="h"),
        AIMessage("", tool_calls=[call], id="a"),
        SystemMessage("reminder: be brief", id="s"),
        ToolMessage("found", tool_call_id="c1", id="t"),
    ]
    for name, entry in ENTRY_POINTS.items():
        sent = entry(counter, 100_000, history)
        assert sent == history, name


def test_the_approximate_counter_is_langchain_s_estimate() -> None:
    counter = ApproximateCounter()
    history = [
        SystemMessage("hi"),
        HumanMessage("hello there"),
        AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": "x"}]),
    ]
    assert counter.count(history) == count_tokens_approximately(history)
    assert counter.count_each(history) == [count_tokens_approximately([m]) for m in history]
