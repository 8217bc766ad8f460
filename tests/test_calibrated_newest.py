"""A calibrated trimmer's first plan under a new calibration, made newest-first:
the same plan (every figure) as a fresh trimmer's, mapping only the newest
remembered base counts until a figure needs them all."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_turntrim import ApproximateCounter, CalibratedCounter, TurnTrimmer
from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START, Grouping, TrimPlan
from langchain_turntrim._counting.calibrated import Calibration
from tests import strategies as lcst

KINDS = st.sampled_from([PINNED, START, CONTINUE, ANCHOR, REPLY])


def figures(plan: TrimPlan) -> dict[str, Any]:
    """Every field of ``plan``, those computed when read included."""
    return {field.name: getattr(plan, field.name) for field in dataclasses.fields(plan)}


def fresh_plan(
    counter: CalibratedCounter, max_tokens: int, messages: list[BaseMessage]
) -> dict[str, Any]:
    """The plan of a trimmer that never saw ``messages``, under ``counter``'s calibration."""
    trimmer = TurnTrimmer(max_tokens=max_tokens, token_counter=copy.deepcopy(counter))
    return figures(trimmer.report(messages).plan)


def turns(count: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("rules")]
    for t in range(count):
        messages += [HumanMessage(f"question {t} " * (t % 7 + 1)), AIMessage(f"answer {t} " * 9)]
    return messages


class Mapped:
    """Spies on ``CalibratedCounter.calibrated``: how many base counts each call maps."""

    def __init__(self, counter: CalibratedCounter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        real = counter.calibrated

        def spy(state: Calibration, base: Sequence[int]) -> list[int]:
            self.sizes.append(len(base))
            return real(state, base)

        monkeypatch.setattr(counter, "calibrated", spy)


# -- every figure, whatever the sequence of observations, edits and reads --------------------


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    data=st.data(),
    start=lcst.conversations(max_turns=6),
    max_tokens=st.sampled_from([0, 60, 300, 2_000, 10**6]),
)
def test_a_plan_under_a_new_calibration_is_a_fresh_trimmers(
    data: st.DataObject, start: list[BaseMessage], max_tokens: int
) -> None:
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=max_tokens, token_counter=counter)
    messages = start
    trimmer.report(messages)
    trimmer.report(messages)  # remembered from here on
    held: list[tuple[TrimPlan, list[BaseMessage], dict[str, Any]]] = []
    for _ in range(data.draw(st.integers(1, 8), label="steps")):
        step = data.draw(st.sampled_from(["observe", "grow", "plan", "read"]))
        if step == "observe":
            sent = messages[data.draw(st.integers(0, len(messages))) :]
            ratio = data.draw(st.floats(0.3, 3.0))
            extra = data.draw(st.integers(0, 30))
            counter.observe(sent, round(ratio * ApproximateCounter().count(sent)) + extra)
        elif step == "grow":
            messages = messages + data.draw(lcst.conversations(max_turns=2))
        elif step == "read" and held:
            plan, _, expected = held[data.draw(st.integers(0, len(held) - 1))]
            assert figures(plan) == expected  # read late: the history as it was planned
        plan = trimmer.report(messages).plan
        expected = fresh_plan(counter, max_tokens, messages)
        if data.draw(st.booleans(), label="read now"):
            assert figures(plan) == expected
        else:
            held.append((plan, messages, expected))
    for plan, _, expected in held:
        assert figures(plan) == expected


# -- what is mapped -------------------------------------------------------------------------


def observed(count: int, monkeypatch: pytest.MonkeyPatch) -> tuple[TurnTrimmer, Any, Mapped]:
    """A trimmer that remembers a history of ``count`` turns, whose counter
    has just observed a call (its calibration is new), with a spy on it."""
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=300, token_counter=counter)
    messages = turns(count)
    trimmer.trim(messages[:-1])
    kept = trimmer.trim(messages)
    counter.observe(kept, 2 * ApproximateCounter().count(kept))
    return trimmer, messages, Mapped(counter, monkeypatch)


def grown_plan_maps_one(trimmer: TurnTrimmer, messages: list[BaseMessage], mapped: Mapped) -> None:
    """The history grown by a message is planned, mapping that message alone."""
    mapped.sizes.clear()
    grown = [*messages, HumanMessage("next")]
    read = figures(trimmer.report(grown).plan)
    assert mapped.sizes == [1]
    assert isinstance(trimmer.counter, CalibratedCounter)
    assert read == fresh_plan(trimmer.counter, 300, grown)


def test_only_the_newest_base_counts_are_mapped_until_a_figure_needs_them_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trimmer, messages, mapped = observed(500, monkeypatch)
    plan = trimmer.report(messages).plan
    assert sum(mapped.sizes) < 200  # the system message and a chunk from the end
    mapped.sizes.clear()
    read = figures(plan)
    assert mapped.sizes == [len(messages)]  # the whole history, once
    assert isinstance(trimmer.counter, CalibratedCounter)
    assert read == fresh_plan(trimmer.counter, 300, messages)
    grown_plan_maps_one(trimmer, messages, mapped)  # the next plan takes that grouping on


def test_the_second_plan_under_a_calibration_is_grouped_once_and_then_extended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trimmer, messages, mapped = observed(100, monkeypatch)
    trimmer.trim(messages)  # newest-first
    trimmer.trim(messages)  # no figure was read: every count is mapped here
    assert mapped.sizes[-1] == len(messages)
    grown_plan_maps_one(trimmer, messages, mapped)


def test_a_cut_level_under_a_new_calibration_is_planned_from_every_count() -> None:
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=300, trim_to=200, token_counter=counter)
    messages = turns(60)
    trimmer.trim(messages[:-1])
    counter.observe(trimmer.trim(messages), 700)
    plan = trimmer.report(messages).plan
    fresh = TurnTrimmer(max_tokens=300, trim_to=200, token_counter=copy.deepcopy(counter))
    assert figures(plan) == figures(fresh.report(messages).plan)


# -- Grouping.snapshot ----------------------------------------------------------------------


@given(data=st.data(), kinds=st.lists(KINDS, max_size=80))
def test_a_snapshot_stays_as_the_grouping_was(data: st.DataObject, kinds: list[int]) -> None:
    costs = data.draw(st.lists(st.integers(0, 500), min_size=len(kinds), max_size=len(kinds)))
    split = data.draw(st.integers(0, len(kinds)))
    grouping = Grouping()
    grouping.extend(kinds[:split], costs[:split])
    snapshot = grouping.snapshot()
    grouping.extend(kinds[split:], costs[split:])
    fresh = Grouping()
    fresh.extend(kinds[:split], costs[:split])
    assert {n: getattr(snapshot, n) for n in Grouping.__slots__} == {
        n: getattr(fresh, n) for n in Grouping.__slots__
    }
    assert snapshot.plan(700, 3) == fresh.plan(700, 3)
