"""The spec on plain records: ``trim_history``/``plan_trim`` against the naive
reference, every edge case, and bad input named by index, id and field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_turntrim import plan_trim, trim_history
from tests.reference import reference_start_moved, reference_trim

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def records(draw: st.DrawFn, size: int = 14) -> list[dict[str, Any]]:
    count = draw(st.integers(0, size))
    return [
        {"id": f"m{i}", "role": draw(st.sampled_from(ROLES)), "tokens": draw(st.integers(0, 30))}
        for i in range(count)
    ]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    history = records(draw)
    total = sum(r["tokens"] for r in history)
    return history, draw(st.integers(0, total + 10))


@given(histories())
def test_the_reference_s_answer(case: tuple[list[dict[str, Any]], int]) -> None:
    history, budget = case
    kept = trim_history(history, budget)
    assert [id(m) for m in kept] == [id(m) for m in reference_trim(history, budget)]
    plan = plan_trim(history, budget)
    assert plan.start_moved == reference_start_moved(history, budget)
    assert plan.tokens_after == sum(m["tokens"] for m in kept)
    assert plan.kept == tuple(i for i, m in enumerate(history) if any(m is k for k in kept))


@given(histories(), st.integers(0, 200))
def test_a_stable_cut_keeps_what_fits_and_stays_put_as_history_grows(
    case: tuple[list[dict[str, Any]], int], extra: int
) -> None:
    history, budget = case
    trim_to = budget // 2
    plan = plan_trim(history, budget, trim_to=trim_to)
    assert plan.tokens_after <= budget or plan.dropped_turns == plan.turns
    greedy = plan_trim(history, budget)
    assert plan.dropped_turns >= greedy.dropped_turns
    grown = [*history, {"id": "new", "role": "assistant", "tokens": extra}]
    later = plan_trim(grown, budget, trim_to=trim_to)
    if later.dropped_turns and later.tokens_after <= budget and plan.dropped_turns < plan.turns:
        assert later.keep_from >= plan.keep_from


def test_the_spec_sample() -> None:
    sample = [
        {"id": "s0", "role": "system", "tokens": 20},
        {"id": "u1", "role": "user", "tokens": 30},
        {"id": "a1", "role": "assistant", "tokens": 30},
        {"id": "u2", "role": "user", "tokens": 25},
        {"id": "a2", "role": "assistant", "tokens": 25},
    ]
    assert [m["id"] for m in trim_history(sample, 100)] == ["s0", "u2", "a2"]
    plan = plan_trim(sample, 100)
    assert (plan.turns, plan.dropped_turns, plan.tokens_after, plan.kept) == (2, 1, 70, (0, 3, 4))


@pytest.mark.parametrize(
    ("roles", "budget", "kept"),
    [
        ([], 0, []),
        (["system"], 0, [0]),  # the system messages alone exceed the budget: only they
        (["assistant", "tool", "user"], 100, [2]),  # before the first user message: no turn
        (["user", "system", "assistant"], 100, [0, 1, 2]),  # pinned in place, inside a turn
        (["user", "system", "assistant", "user"], 2, [1, 3]),  # pinned kept, its turn dropped
        (["developer", "user"], 1, [0]),  # the newest turn alone does not fit
        (["user", "user", "user"], 2, [1, 2]),
    ],
)
def test_edge_cases(roles: list[str], budget: int, kept: list[int]) -> None:
    history = [{"id": str(i), "role": role, "tokens": 1} for i, role in enumerate(roles)]
    assert [int(m["id"]) for m in trim_history(history, budget)] == kept


def test_nothing_is_mutated_and_records_are_returned_as_they_are() -> None:
    history = [{"id": "u", "role": "user", "tokens": 1, "extra": [1]}]
    before = [dict(m) for m in history]
    assert trim_history(history, 5)[0] is history[0]
    assert history == before


@pytest.mark.parametrize(
    ("history", "budget", "error", "message"),
    [
        ([], -1, ValueError, "max_tokens must be >= 0, got -1"),
        ([], True, TypeError, "max_tokens must be an int, got bool True"),
        ([], "9", TypeError, "max_tokens must be an int, got str '9'"),
        ("abc", 5, TypeError, "messages must be a sequence of mappings, got str"),
        ([7], 5, TypeError, "messages[0] must be a mapping, got int"),
        ([{"id": "x", "tokens": 1}], 5, ValueError, "messages[0] (id 'x') has no 'role' field"),
        ([{"role": "user"}], 5, ValueError, "messages[0] has no 'tokens' field"),
        ([{"role": "User", "tokens": 1}], 5, ValueError, "unknown 'role' 'User'"),
        ([{"role": 3, "tokens": 1}], 5, TypeError, "'role' must be a str, got int 3"),
        ([{"role": "user", "tokens": 1.0}], 5, TypeError, "'tokens' must be an int, got float 1.0"),
        ([{"role": "user", "tokens": -2}], 5, ValueError, "'tokens' must be >= 0, got -2"),
        ([{"role": "user", "tokens": 1}], 5, ValueError, None),  # trim_to below
    ],
)
def test_bad_input_is_named(
    history: Any, budget: Any, error: type[Exception], message: str | None
) -> None:
    if message is None:
        with pytest.raises(ValueError, match=r"trim_to \(9\) must be <= max_tokens \(5\)"):
            plan_trim(history, budget, trim_to=9)
        return
    with pytest.raises(error) as raised:
        plan_trim(history, budget)
    assert message in str(raised.value)
