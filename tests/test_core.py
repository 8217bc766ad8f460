"""The turn-atomic core: properties against the naive reference, and every edge case."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_turntrim import TrimPlan, plan_trim, trim_history
from langchain_turntrim._core.kinds import positions
from tests.helpers import rec, snapshot
from tests.records import histories_and_budgets
from tests.reference import PINNED_ROLES, reference_start_moved, reference_trim

PROPERTY = settings(max_examples=2000)


def ids(messages: list[Any]) -> list[str]:
    return [m["id"] for m in messages]


def turns_of(messages: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """Index lists of each turn (pinned messages excluded)."""
    turns: list[list[int]] = []
    for i, m in enumerate(messages):
        if m["role"] == "user":
            turns.append([i])
        elif m["role"] not in PINNED_ROLES and turns:
            turns[-1].append(i)
    return turns


# --- properties ---------------------------------------------------------------


@pytest.mark.slow
@PROPERTY
@given(histories_and_budgets())
def test_equals_naive_reference(case: tuple[list[dict[str, Any]], int]) -> None:
    messages, budget = case
    before = snapshot(messages)
    got = trim_history(messages, budget)
    want = reference_trim(messages, budget)
    assert len(got) == len(want)
    assert all(a is b for a, b in zip(got, want, strict=True))
    assert snapshot(messages) == before


@pytest.mark.slow
@PROPERTY
@given(histories_and_budgets())
def test_invariants(case: tuple[list[dict[str, Any]], int]) -> None:
    messages, budget = case
    got = trim_history(messages, budget)
    positions = [next(i for i, m in enumerate(messages) if m is k) for k in got]
    # A subsequence of the input, in order.
    assert positions == sorted(set(positions))
    # Every pinned message is kept.
    pinned = [i for i, m in enumerate(messages) if m["role"] in PINNED_ROLES]
    assert set(pinned) <= set(positions)
    # After the pinned messages, the conversation starts on a user message.
    rest = [m for m in got if m["role"] not in PINNED_ROLES]
    assert not rest or rest[0]["role"] == "user"
    # Whole turns only: each turn is either fully kept or fully dropped.
    turns = turns_of(messages)
    kept_turns = [t for t in turns if t[0] in positions]
    for turn in turns:
        assert all(i in positions for i in turn) == (turn[0] in positions)
        assert any(i in positions for i in turn) == (turn[0] in positions)
    # Kept turns are the newest ones.
    assert kept_turns == turns[len(turns) - len(kept_turns) :]
    # Budget met unless the systems alone exceed it.
    system = sum(messages[i]["tokens"] for i in pinned)
    total = sum(m["tokens"] for m in got)
    if system <= budget:
        assert total <= budget
    else:
        assert rest == []
    # Maximal: the next older turn would not have fit.
    if len(kept_turns) < len(turns):
        older = turns[len(turns) - len(kept_turns) - 1]
        assert total + sum(messages[i]["tokens"] for i in older) > budget


@pytest.mark.slow
@PROPERTY
@given(histories_and_budgets())
def test_start_moved_compares_with_the_previous_model_call(
    case: tuple[list[dict[str, Any]], int],
) -> None:
    messages, budget = case
    assert plan_trim(messages, budget).start_moved == reference_start_moved(messages, budget)


@pytest.mark.slow
@PROPERTY
@given(histories_and_budgets())
def test_idempotent(case: tuple[list[dict[str, Any]], int]) -> None:
    messages, budget = case
    once = trim_history(messages, budget)
    twice = trim_history(once, budget)
    assert len(once) == len(twice)
    assert all(a is b for a, b in zip(once, twice, strict=True))


@pytest.mark.slow
@PROPERTY
@given(histories_and_budgets(), st.integers(min_value=0, max_value=200))
def test_monotone_in_budget(case: tuple[list[dict[str, Any]], int], extra: int) -> None:
    messages, budget = case
    smaller = {id(m) for m in trim_history(messages, budget)}
    larger = {id(m) for m in trim_history(messages, budget + extra)}
    assert smaller <= larger


@pytest.mark.slow
@PROPERTY
@given(histories_and_budgets())
def test_plan_is_consistent(case: tuple[list[dict[str, Any]], int]) -> None:
    messages, budget = case
    plan = plan_trim(messages, budget)
    kept = [messages[i] for i in plan.kept]
    assert all(a is b for a, b in zip(kept, trim_history(messages, budget), strict=True))
    assert sorted(plan.kept + plan.dropped) == list(range(len(messages)))
    assert plan.size == len(messages)
    assert plan.tokens_before == sum(m["tokens"] for m in messages)
    assert plan.tokens_after == sum(m["tokens"] for m in kept)
    assert plan.system_tokens == sum(m["tokens"] for m in messages if m["role"] in PINNED_ROLES)
    assert plan.overhead_tokens == 0
    assert plan.turns == len(turns_of(messages))
    assert plan.kept_turns == len([m for m in kept if m["role"] == "user"])
    assert plan.dropped_turns == plan.turns - plan.kept_turns
    assert plan.budget_met == (plan.tokens_after <= budget)
    assert plan.budget_met == (plan.system_tokens <= budget)
    assert plan.max_tokens == budget


# --- examples -----------------------------------------------------------------


SAMPLE = [
    rec("s0", "system", 20),
    rec("u1", "user", 30),
    rec("a1", "assistant", 30),
    rec("u2", "user", 25),
    rec("a2", "assistant", 25),
]


def test_spec_sample() -> None:
    assert ids(trim_history(SAMPLE, 100)) == ["s0", "u2", "a2"]


def test_spec_sample_plan() -> None:
    plan = plan_trim(SAMPLE, 100)
    assert plan == TrimPlan(
        size=5,
        keep_from=3,
        pinned=(0,),
        turns=2,
        dropped_turns=1,
        system_tokens=20,
        overhead_tokens=0,
        tokens_before=130,
        tokens_after=70,
        max_tokens=100,
        newest_turn_tokens=50,
        newest_turn_start=3,
        # The previous model call was sent [s0, u1, a1, u2] (105 tokens): it
        # kept u2 onwards too, so this call's start is where that one's was.
        start_moved=False,
    )
    # Before u2 was asked, [s0, u1] was sent; [s0, u1, a1, u2] keeps u2 alone.
    assert plan_trim(SAMPLE[:4], 100).start_moved
    assert plan.kept == (0, 3, 4)
    assert plan.dropped == (1, 2)
    assert plan.budget_met


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (130, ["s0", "u1", "a1", "u2", "a2"]),
        (129, ["s0", "u2", "a2"]),
        (70, ["s0", "u2", "a2"]),
        (69, ["s0"]),
        (20, ["s0"]),
        (19, ["s0"]),
        (0, ["s0"]),
    ],
)
def test_sample_at_each_boundary(budget: int, expected: list[str]) -> None:
    assert ids(trim_history(SAMPLE, budget)) == expected


def test_empty_history() -> None:
    assert trim_history([], 10) == []
    plan = plan_trim([], 0)
    assert (plan.kept, plan.dropped, plan.turns, plan.tokens_before) == ((), (), 0, 0)


def test_only_system_messages_over_budget_returned_anyway() -> None:
    msgs = [rec("s0", "system", 50), rec("d1", "developer", 50)]
    plan = plan_trim(msgs, 10)
    assert ids(trim_history(msgs, 10)) == ["s0", "d1"]
    assert not plan.budget_met
    assert plan.tokens_after == 100


def test_systems_over_budget_drop_every_turn() -> None:
    msgs = [rec("s0", "system", 50), rec("u1", "user", 0), rec("a1", "assistant", 0)]
    assert ids(trim_history(msgs, 49)) == ["s0"]


def test_leading_non_user_messages_are_discarded_even_when_they_fit() -> None:
    msgs = [
        rec("s0", "system", 1),
        rec("a0", "assistant", 1),
        rec("t0", "tool", 1),
        rec("u1", "user", 1),
        rec("a1", "assistant", 1),
    ]
    assert ids(trim_history(msgs, 1000)) == ["s0", "u1", "a1"]
    plan = plan_trim(msgs, 1000)
    assert plan.dropped == (1, 2)
    assert plan.dropped_turns == 0
    assert plan.tokens_before == 5
    assert plan.tokens_after == 3


def test_no_user_message_keeps_only_systems() -> None:
    msgs = [rec("a0", "assistant", 1), rec("s1", "system", 1), rec("t2", "tool", 1)]
    assert ids(trim_history(msgs, 1000)) == ["s1"]
    assert plan_trim(msgs, 1000).turns == 0


def test_system_inside_a_turn_is_pinned_and_does_not_split_it() -> None:
    msgs = [
        rec("u1", "user", 10),
        rec("s1", "system", 5),
        rec("a1", "assistant", 10),
        rec("u2", "user", 10),
        rec("a2", "assistant", 10),
    ]
    # The system message inside turn 1 stays when turn 1 is dropped, in place.
    assert ids(trim_history(msgs, 25)) == ["s1", "u2", "a2"]
    # Its tokens are pinned cost, not turn cost: turn 1 costs 20, not 25.
    assert ids(trim_history(msgs, 45)) == ["u1", "s1", "a1", "u2", "a2"]
    assert ids(trim_history(msgs, 44)) == ["s1", "u2", "a2"]


def test_developer_role_is_pinned() -> None:
    msgs = [rec("u1", "user", 10), rec("d1", "developer", 5), rec("u2", "user", 10)]
    assert ids(trim_history(msgs, 15)) == ["d1", "u2"]


def test_tool_and_function_messages_continue_the_turn() -> None:
    msgs = [
        rec("u1", "user", 1),
        rec("a1", "assistant", 1),
        rec("t1", "tool", 1),
        rec("f1", "function", 1),
        rec("a2", "assistant", 1),
        rec("u2", "user", 1),
    ]
    assert ids(trim_history(msgs, 5)) == ["u2"]
    assert ids(trim_history(msgs, 6)) == ids(msgs)


def test_newest_turn_too_big_keeps_only_systems() -> None:
    msgs = [rec("s0", "system", 1), rec("u1", "user", 1), rec("u2", "user", 100)]
    # Dropping oldest-first never skips a turn: u1 alone would fit but is older.
    assert ids(trim_history(msgs, 50)) == ["s0"]


def test_zero_token_messages_and_zero_budget() -> None:
    msgs = [rec("u1", "user", 0), rec("a1", "assistant", 0), rec("u2", "user", 0)]
    assert ids(trim_history(msgs, 0)) == ["u1", "a1", "u2"]


def test_returns_original_objects_and_a_new_list() -> None:
    msgs = [rec("u1", "user", 1)]
    kept = trim_history(msgs, 1)
    assert kept is not msgs
    assert kept[0] is msgs[0]
    kept.append(rec("x", "user", 1))
    assert len(msgs) == 1


def test_extra_keys_are_ignored_and_kept() -> None:
    msgs = [{"id": "u1", "role": "user", "tokens": 1, "content": "hi", "meta": {"x": 1}}]
    assert trim_history(msgs, 1) == msgs


def test_accepts_any_sequence_of_mappings() -> None:
    msgs = (
        MappingProxyType({"role": "user", "tokens": 1}),
        OrderedDict(role="assistant", tokens=1),
    )
    kept = trim_history(msgs, 5)
    assert kept[0] is msgs[0]
    assert kept[1] is msgs[1]


def test_id_is_optional() -> None:
    assert trim_history([{"role": "user", "tokens": 1}], 1) == [{"role": "user", "tokens": 1}]


def test_int_subclass_tokens_are_accepted() -> None:
    class Tokens(int):
        pass

    msgs = [rec("u1", "user", Tokens(3)), rec("a1", "assistant", Tokens(0))]
    assert plan_trim(msgs, 3).tokens_after == 3


def test_plan_select_checks_length() -> None:
    plan = plan_trim(SAMPLE, 100)
    with pytest.raises(ValueError, match="plan is for 5 messages, got 4"):
        plan.select(SAMPLE[:4])


def test_plan_is_frozen() -> None:
    plan = plan_trim(SAMPLE, 100)
    with pytest.raises(AttributeError):
        plan.max_tokens = 5  # type: ignore[misc]


def test_linear_scale() -> None:
    # 200,000 turns: a quadratic implementation would not finish.
    msgs = [rec("s", "system", 1)]
    for i in range(200_000):
        msgs += [rec(f"u{i}", "user", 1), rec(f"a{i}", "assistant", 1)]
    kept = trim_history(msgs, 101)
    assert ids(kept) == ["s"] + [f"{p}{i}" for i in range(199_950, 200_000) for p in "ua"]


# --- bad input (the rest is in test_bad_input.py's table) ----------------------


@pytest.mark.parametrize(
    ("messages", "error", "fragment"),
    [
        (iter([]), TypeError, "got list_iterator"),
        ([rec("u", "user", 1), "hi"], TypeError, "messages[1] must be a mapping, got str"),
        ([{"role": "user"}], ValueError, "messages[0] has no 'tokens' field"),
        ([rec("x", "human", 1)], ValueError, "accepted roles are 'system', 'developer', 'user'"),
    ],
)
def test_bad_messages(messages: Any, error: type[Exception], fragment: str) -> None:
    before = snapshot(messages)
    with pytest.raises(error) as info:
        trim_history(messages, 10)
    assert fragment in str(info.value)
    assert snapshot(messages) == before


def test_bad_budget_is_reported_before_bad_messages() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        trim_history([rec("x", "User", 1)], -1)


@given(
    st.lists(st.integers(0, 4), max_size=600)
    | st.lists(st.sampled_from([1, 2, 4]), max_size=600).map(lambda k: [0, *k]),
    st.sets(st.integers(0, 4), min_size=1),
)
def test_positions_finds_every_index_of_the_kinds_wanted(
    kinds: list[int], wanted: set[int]
) -> None:
    # Dense and sparse matches (one pinned message among hundreds) take different paths.
    assert positions(bytes(kinds), *sorted(wanted)) == [
        i for i, kind in enumerate(kinds) if kind in wanted
    ]
