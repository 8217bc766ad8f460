"""A calibrated trimmer's memory: a remembered history's grouping recosted
under a new calibration equals a fresh grouping, and what is remembered is
never counted again."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_turntrim import CalibratedCounter, TurnTrimmer
from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START, Grouping
from langchain_turntrim._counting import approximate
from langchain_turntrim._planning.calibrated import CalibratedPlanner

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
        assert counted == [len(kept)]
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
