"""``trim_to``: cuts that stay put while a history grows (prompt-cache friendly)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_turntrim import TurnTrimmer, TurnTrimStateMiddleware, plan_trim, trim_turns
from langchain_turntrim._cli import main
from langchain_turntrim._core.stable import candidates
from tests.lc import LENGTH


def records(system: int, turns: list[list[int]]) -> list[dict[str, Any]]:
    """A system record, then each turn: a user record and assistant records."""
    out = [{"id": "s", "role": "system", "tokens": system}]
    for t, costs in enumerate(turns):
        for k, cost in enumerate(costs):
            out.append(
                {"id": f"t{t}.{k}", "role": "user" if k == 0 else "assistant", "tokens": cost}
            )
    return out


def moved_since_the_previous_call(
    history: list[dict[str, Any]], plan: Any, max_tokens: int, trim_to: int | None
) -> bool:
    """What ``start_moved`` means: the previous model call was sent the history
    up to its newest assistant message; its first kept turn differs from this
    call's (and it kept one)."""
    replies = [i for i, r in enumerate(history) if r["role"] == "assistant"]
    if not replies:
        return False
    before = plan_trim(history[: replies[-1]], max_tokens, trim_to=trim_to)
    return before.kept_turns > 0 and before.keep_from != plan.keep_from


@st.composite
def growing(draw: st.DrawFn) -> tuple[int, list[list[int]], int, int]:
    """A system cost, turns (each no larger than ``trim_to`` leaves room for),
    ``max_tokens`` and ``trim_to``."""
    system = draw(st.integers(0, 40))
    largest = draw(st.integers(1, 120))
    trim_to = draw(st.integers(system + largest, system + largest + 400))
    max_tokens = draw(st.integers(trim_to, trim_to + 600))
    turn = st.lists(st.integers(0, largest), min_size=1, max_size=4).filter(
        lambda costs: sum(costs) <= largest
    )
    turns = draw(st.lists(turn, min_size=1, max_size=60))
    return system, turns, max_tokens, trim_to


@settings(max_examples=400)
@given(growing())
def test_a_growing_history_moves_its_start_rarely_and_never_overspends(
    case: tuple[int, list[list[int]], int, int],
) -> None:
    system, turns, max_tokens, trim_to = case
    step = max_tokens - trim_to
    largest = max(sum(t) for t in turns)
    moves = 0
    previous = None
    for n in range(1, len(turns) + 1):
        history = records(system, turns[:n])
        plan = plan_trim(history, max_tokens, trim_to=trim_to)
        greedy = plan_trim(history, max_tokens)
        assert plan.tokens_after <= max_tokens  # the budget always holds
        assert plan.kept_turns >= 1  # every turn fits beside the system: one is kept
        assert plan.kept_turns <= greedy.kept_turns  # never more than fits
        if plan.keep_from == greedy.keep_from == 1:
            assert plan.dropped_turns == 0  # nothing is cut while everything fits
        first = plan.dropped_turns
        if previous is not None and first != previous:
            moves += 1
            # Each cut leaves at most trim_to, plus the newest turn and the turn
            # the cut point had to round up to.
            assert plan.tokens_after <= trim_to + sum(turns[n - 1]) + largest
        assert plan.start_moved == moved_since_the_previous_call(history, plan, max_tokens, trim_to)
        previous = first
    total = sum(map(sum, turns))
    assert moves <= total // step + 1 if step else True


@settings(max_examples=300)
@given(growing())
def test_without_trim_to_or_at_the_budget_it_is_the_spec(
    case: tuple[int, list[list[int]], int, int],
) -> None:
    system, turns, max_tokens, _ = case
    history = records(system, turns)
    spec = plan_trim(history, max_tokens)
    assert plan_trim(history, max_tokens, trim_to=None) == spec
    at_budget = plan_trim(history, max_tokens, trim_to=max_tokens)
    assert at_budget.keep_from == spec.keep_from


@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 200))
def test_candidates_depend_only_on_the_prefix(costs: list[int], step: int) -> None:
    found = candidates(costs, step)
    for n in range(1, len(costs) + 1):
        prefix = candidates(costs[:n], step)
        assert prefix == [c for c in found if c[0] <= n - 1]
    assert found[0] == (0, 0)
    assert all(before == sum(costs[:k]) for k, before in found)


def test_the_start_stays_put_between_cuts() -> None:
    turns = [[50, 50]] * 20
    starts = [plan_trim(records(10, turns[:n]), 500, trim_to=300).keep_from for n in range(1, 21)]
    greedy = [plan_trim(records(10, turns[:n]), 500).keep_from for n in range(1, 21)]
    assert len(set(starts)) == 9  # moved 8 times: every other turn
    assert len(set(greedy)) == 17  # moved at every turn once over budget


def test_bad_trim_to_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"trim_to \(600\) must be <= max_tokens \(500\)"):
        TurnTrimmer(max_tokens=500, trim_to=600)
    with pytest.raises(ValueError, match="trim_to must be >= 0, got -1"):
        plan_trim([], 10, trim_to=-1)
    with pytest.raises(TypeError, match="trim_to must be an int, got bool True"):
        trim_turns(max_tokens=10, trim_to=True)


def messages(turns: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("s" * 10, id="s")]
    for t in range(turns):
        history += [HumanMessage("u" * 50, id=f"u{t}"), AIMessage("a" * 50, id=f"a{t}")]
    return history


def test_the_runnable_and_the_report_say_when_the_start_moved() -> None:
    trimmer = TurnTrimmer(max_tokens=500, token_counter=LENGTH, trim_to=300)
    moved = [trimmer.trim_with_report(messages(n)).start_moved for n in range(1, 21)]
    assert moved.count(True) == 8
    kept = trimmer.invoke(messages(20))
    expected = plan_trim(records(10, [[50, 50]] * 20), 500, trim_to=300)
    assert [m.id for m in kept][1] == f"u{expected.dropped_turns}"
    assert trim_turns(messages(20), max_tokens=500, token_counter=LENGTH, trim_to=300) == kept


def test_the_state_mode_deletes_down_to_trim_to() -> None:
    middleware = TurnTrimStateMiddleware(max_tokens=500, token_counter=LENGTH, trim_to=300)
    # 5 turns of 100 and a system message of 10: over budget (510), cut at the
    # candidate where the running total reaches 200, leaving 310 (about trim_to).
    update = middleware.state_update(messages(5))
    assert update is not None
    assert [m.id for m in update["messages"]] == ["u0", "a0", "u1", "a1"]
    # One turn later the cut stays where it was (410 kept), so the state
    # shrinks in steps instead of at every call.
    update = middleware.state_update(messages(6))
    assert update is not None
    assert [m.id for m in update["messages"]] == ["u0", "a0", "u1", "a1"]


def test_the_cli_cuts_to_trim_to(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records(10, [[50, 50]] * 5)))
    args = ["trim", str(path), "--max-tokens", "500", "--token-counter", "field"]
    assert main([*args, "--trim-to", "300"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert sum(r["tokens"] for r in kept) == 310
    assert main(args) == 0
    assert sum(r["tokens"] for r in json.loads(capsys.readouterr().out)) == 410
    assert main([*args, "--trim-to", "900"]) == 2
    assert "--trim-to must be from 0 to --max-tokens (500), got 900" in capsys.readouterr().err
