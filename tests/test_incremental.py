"""A calibrated trimmer's memory: a remembered history's grouping recosted
under a new calibration equals a fresh grouping, and what is remembered is
never counted again."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_turntrim import CalibratedCounter, TurnTrimmer
from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START, Grouping, TrimPlan
from langchain_turntrim._counting import approximate
from langchain_turntrim._counting.calibrated import Calibration
from langchain_turntrim._planning.calibrated import CalibratedPlanner
from langchain_turntrim._planning.recost import Rate, plan_recosted

KINDS = st.sampled_from([PINNED, START, CONTINUE, ANCHOR, REPLY])


def state_of(grouping: Grouping) -> dict[str, Any]:
    return {name: getattr(grouping, name) for name in Grouping.__slots__}


# -- Grouping.recosted -------------------------------------------------------------------


@given(data=st.data(), kinds=st.lists(KINDS, max_size=150))
def test_a_recosted_grouping_is_a_fresh_grouping_of_the_new_costs(
    data: st.DataObject, kinds: list[int]
) -> None:
    costs = st.lists(st.integers(0, 10_000), min_size=len(kinds), max_size=len(kinds))
    first, second = data.draw(costs), data.draw(costs)
    grouped = Grouping()
    split = data.draw(st.integers(0, len(kinds)))
    grouped.extend(kinds[:split], first[:split])  # grouped in two calls, as a memo does
    grouped.extend(kinds[split:], first[split:])
    before = copy.deepcopy(state_of(grouped))
    fresh = Grouping()
    fresh.extend(kinds, second)
    recosted = grouped.recosted(second)
    assert state_of(recosted) == state_of(fresh)
    assert state_of(grouped) == before  # the original is left as it was
    more = data.draw(st.lists(st.tuples(KINDS, st.integers(0, 100)), max_size=10))
    recosted.extend([k for k, _ in more], [c for _, c in more])
    fresh.extend([k for k, _ in more], [c for _, c in more])
    assert state_of(recosted) == state_of(fresh)  # and it groups on like one
    assert recosted.plan(5_000, 7) == fresh.plan(5_000, 7)


def test_recosted_needs_one_cost_per_message() -> None:
    grouping = Grouping()
    grouping.extend([START, REPLY], [1, 2])
    with pytest.raises(ValueError, match="got 1 costs for 2 messages"):
        grouping.recosted([1])


# -- the calibrated planner ---------------------------------------------------------------


def turns(count: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("rules")]
    for t in range(count):
        messages += [HumanMessage(f"question {t} " * (t % 7 + 1)), AIMessage(f"answer {t} " * 9)]
    return messages


def test_a_calibrated_trimmer_counts_a_remembered_history_only_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=300, token_counter=counter)
    assert isinstance(trimmer.planner, CalibratedPlanner)
    messages = turns(30)
    trimmer.trim(messages[:-1])
    trimmer.trim(messages)  # planned twice: remembered
    counted: list[int] = []
    real = approximate._approximate_each

    def spy(given: Sequence[BaseMessage]) -> list[int]:
        counted.append(len(given))
        return real(given)

    monkeypatch.setattr(approximate, "_approximate_each", spy)
    for extra in range(5):
        counted.clear()
        kept = trimmer.trim(messages)
        assert counted == []  # under a new calibration too: nothing is counted again
        counter.observe(kept, 2 * sum(real(kept)) + extra)
        assert counted == []  # what the plan kept: its base counts are the plan's
        fresh = TurnTrimmer(max_tokens=300, token_counter=copy.deepcopy(counter))
        assert trimmer.report(messages).plan == fresh.report(messages).plan
    counted.clear()
    trimmer.trim([*messages, HumanMessage("next")])
    assert counted == [1]


def test_cache_size_zero_plans_a_calibrated_counter_from_scratch() -> None:
    trimmer = TurnTrimmer(max_tokens=300, token_counter=CalibratedCounter(), cache_size=0)
    assert trimmer.planner.memo is None  # type: ignore[union-attr]
    messages = turns(10)
    assert trimmer.trim(messages) == TurnTrimmer(
        max_tokens=300, token_counter=CalibratedCounter()
    ).trim(messages)


# -- a new calibration, planned newest-first ------------------------------------------------

STATES = st.builds(
    Calibration,
    ratio=st.floats(0.2, 4.0),
    per_message=st.floats(-5.0, 20.0),
    per_request=st.floats(0.0, 50.0),
    margin=st.floats(0.0, 0.15),
    observations=st.just(9),
)


#: Mostly turns: the plan reads the newest few of many.
TURN_KINDS = st.sampled_from([START, REPLY, CONTINUE, START, REPLY, CONTINUE, PINNED, ANCHOR])


def every_figure(plan: TrimPlan) -> dict[str, Any]:
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}


@settings(max_examples=300)
@given(
    data=st.data(),
    kinds=st.one_of(st.lists(KINDS, max_size=20), st.lists(TURN_KINDS, min_size=30, max_size=150)),
    state=STATES,
    max_tokens=st.integers(0, 4_000),
    overhead=st.integers(0, 40),
)
def test_a_new_calibration_planned_newest_first_is_the_full_regroup(
    data: st.DataObject, kinds: list[int], state: Calibration, max_tokens: int, overhead: int
) -> None:
    base = data.draw(st.lists(st.integers(0, 300), min_size=len(kinds), max_size=len(kinds)))
    grouping = Grouping()
    grouping.extend(kinds, base)
    counter = CalibratedCounter()
    calibrated = counter.calibrated(state, base)
    want = grouping.recosted(calibrated).plan(max_tokens, overhead)
    scale = 1 + state.margin
    # The calibration's own rate; one so low every turn is mapped; one so high
    # the plan reads turns not mapped up front.
    exact = Rate(state.ratio * scale, state.per_message * scale)
    rate = data.draw(st.sampled_from([exact, Rate(0.01, 0.0), Rate(50.0, 50.0)]))
    got = plan_recosted(
        grouping, base, partial(counter.calibrated, state), rate, max_tokens, overhead
    )
    more = data.draw(st.lists(st.tuples(KINDS, st.integers(0, 100)), max_size=5))
    grouping.extend([k for k, _ in more], [c for _, c in more])  # the entry grows on
    base.extend(c for _, c in more)
    assert every_figure(got) == every_figure(want)  # the figures computed late included


def test_a_trimmer_plans_each_new_calibration_as_a_fresh_one_would() -> None:
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=400, token_counter=counter)
    messages = turns(40)
    for step in range(12):
        history = messages[: 40 + step * 3]
        kept = trimmer.trim(history)
        fresh = TurnTrimmer(max_tokens=400, token_counter=copy.deepcopy(counter), cache_size=0)
        for _ in range(2):  # the first plan under this state, then the full regroup
            plan = trimmer.report(history).plan
            assert every_figure(plan) == every_figure(fresh.report(history).plan)
        counter.observe(kept, 3 * sum(approximate._approximate_each(kept)) + step * 40)


# -- observe() of what the trim kept ----------------------------------------------------------


def observed_alike(
    monkeypatch: pytest.MonkeyPatch, edit: Callable[[list[BaseMessage]], list[BaseMessage]]
) -> list[int]:
    """Trim, ``edit`` what was kept, observe it: estimates and state are what
    a counter counting every message afresh gets. Returns what was counted."""
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=300, token_counter=counter)
    messages = turns(30)
    trimmer.trim(messages[:-1])
    kept = trimmer.trim(messages)
    fresh = copy.deepcopy(counter)  # notes no priced request: it counts
    kept = edit(kept)
    real = approximate._approximate_each
    counted: list[int] = []

    def spy(given: Sequence[BaseMessage]) -> list[int]:
        counted.append(len(given))
        return real(given)

    monkeypatch.setattr(approximate, "_approximate_each", spy)
    reports = (900, 950, 1000, 1040)
    estimates = [counter.observe(kept, reported) for reported in reports]
    monkeypatch.setattr(approximate, "_approximate_each", real)
    assert estimates == [fresh.observe(kept, reported) for reported in reports]
    assert counter.calibration == fresh.calibration
    return counted


def test_observe_of_what_the_trim_kept_counts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert observed_alike(monkeypatch, list) == []


def test_observe_counts_a_kept_message_whose_field_was_reassigned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reassign(kept: list[BaseMessage]) -> list[BaseMessage]:
        kept[-1].content = "a much longer answer than the one the trim counted " * 20
        return kept

    def rename(kept: list[BaseMessage]) -> list[BaseMessage]:
        kept[1].name = "someone"
        return kept

    for edit in (reassign, rename):
        counted = observed_alike(monkeypatch, edit)
        assert counted
        assert all(n == counted[0] for n in counted)


@pytest.mark.parametrize(
    "edit",
    [
        lambda kept: [*kept, HumanMessage("not kept by the trim")],
        lambda kept: kept[:-1],
        lambda kept: [kept[0], HumanMessage("a stand-in"), *kept[2:]],
        lambda kept: [kept[0], *reversed(kept[1:])],
        lambda kept: [copy.copy(m) for m in kept],
    ],
    ids=["one more", "one less", "one replaced", "reordered", "copies"],
)
def test_observe_counts_what_the_trim_did_not_keep(
    monkeypatch: pytest.MonkeyPatch, edit: Callable[[list[BaseMessage]], list[BaseMessage]]
) -> None:
    assert observed_alike(monkeypatch, edit)
