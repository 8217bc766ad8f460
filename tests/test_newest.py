"""Planning newest-first (``plan_newest``): the same plan as counting everything,
counting only what the plan reads until a figure needing the rest is read."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from langchain_turntrim import TurnTrimmer, per_message
from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START, plan_costs
from langchain_turntrim._core.newest import plan_newest
from tests.test_warm import history

KINDS = st.sampled_from([PINNED, START, CONTINUE, ANCHOR, REPLY])


class Counted:
    """Counts from a list of costs, recording which indices were asked for."""

    def __init__(self, costs: Sequence[int]) -> None:
        self.costs = costs
        self.asked: list[int] = []

    def __call__(self, indices: Sequence[int]) -> list[int]:
        self.asked.extend(indices)
        return [self.costs[i] for i in indices]


@given(
    st.lists(st.tuples(KINDS, st.integers(0, 60)), max_size=300),
    st.integers(0, 3_000),
    st.integers(0, 5),
)
def test_newest_first_plans_as_counting_everything(
    messages: list[tuple[int, int]], budget: int, overhead: int
) -> None:
    kinds = [k for k, _ in messages]
    costs = [c for _, c in messages]
    expected = plan_costs(kinds, costs, budget, overhead)
    counted = Counted(costs)
    plan = plan_newest(kinds, counted, budget, overhead)
    assert len(counted.asked) == len(set(counted.asked))  # each message counted once
    for field in dataclasses.fields(plan):
        assert getattr(plan, field.name) == getattr(expected, field.name), field.name
    assert plan == expected
    assert sorted(counted.asked) == list(range(len(kinds)))  # every figure read: all counted


def test_only_the_newest_turns_are_counted_until_a_figure_needs_the_rest() -> None:
    kinds = [PINNED] + [START, REPLY] * 5_000
    costs = [7] + [10] * 10_000
    counted = Counted(costs)
    plan = plan_newest(kinds, counted, 1_000)
    assert plan.keep_from == 10_001 - 98
    assert len(counted.asked) < 300  # the system message and a chunk from the end
    assert plan.tokens_before == 7 + 100_000
    assert len(counted.asked) == 10_001


def test_a_plan_made_newest_first_copies_and_pickles_with_every_figure() -> None:
    kinds, costs = [START, REPLY] * 100, [5] * 200
    plan = plan_newest(kinds, Counted(costs), 100)
    assert pickle.loads(pickle.dumps(plan)) == plan_costs(kinds, costs, 100)  # noqa: S301 - ours
    assert copy.deepcopy(plan).tokens_before == 1_000
    replaced = plan.replaced(unanswered=((1, frozenset({"x"})),))
    assert replaced.tokens_before == 1_000
    assert replaced.unanswered == ((1, frozenset({"x"})),)


def test_a_cold_trim_counts_only_the_newest_turns() -> None:
    seen: list[int] = []

    def length(message: object) -> int:
        seen.append(1)
        return len(str(getattr(message, "content", "")))

    messages = history(500)  # 2,001 messages
    trimmer = TurnTrimmer(max_tokens=500, token_counter=per_message(length))
    report = trimmer.report(messages)
    assert 0 < len(seen) < 400
    assert report.tokens_before == sum(len(str(m.content)) for m in messages)
    assert len(seen) == len(messages)
