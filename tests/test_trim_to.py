"""``trim_to``: a cut that stays put while a history grows, so a provider's
prompt cache of the request's start survives until the budget forces a move."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_turntrim import (
    TrimOptions,
    TurnTrimmer,
    TurnTrimMiddleware,
    per_message,
    plan_trim,
    trim_history,
    trim_turns,
)
from tests.reference import reference_start_moved, reference_trim

Record = dict[str, Any]


def records(system: int, turns: list[list[int]]) -> list[Record]:
    """A system record, then each turn: a user record and its assistant records."""
    out: list[Record] = [{"id": "s", "role": "system", "tokens": system}]
    for t, costs in enumerate(turns):
        out += [
            {"id": f"t{t}.{k}", "role": "assistant" if k else "user", "tokens": cost}
            for k, cost in enumerate(costs)
        ]
    return out


def length(message: BaseMessage) -> int:
    return len(str(message.content))


#: Counts a message as its content's length: a record's tokens, as a message.
LENGTH = per_message(length)
MESSAGE_TYPES: dict[str, Callable[[str], BaseMessage]] = {
    "system": SystemMessage,
    "user": HumanMessage,
    "assistant": AIMessage,
    "tool": lambda text: ToolMessage(text, tool_call_id="call_1"),
}


def as_messages(history: Sequence[Mapping[str, Any]]) -> list[BaseMessage]:
    """The records as LangChain messages that ``LENGTH`` counts the same."""
    return [
        MESSAGE_TYPES[r["role"]]("x" * r["tokens"]).model_copy(update={"id": f"m{i}"})
        for i, r in enumerate(history)
    ]


@st.composite
def growing(draw: st.DrawFn) -> tuple[int, list[list[int]], int, int]:
    """A system cost, turns that each fit in ``trim_to`` beside it, then
    ``max_tokens`` and ``trim_to``."""
    system = draw(st.integers(0, 40))
    largest = draw(st.integers(1, 150))
    trim_to = draw(st.integers(system + largest, system + largest + 400))
    max_tokens = draw(st.integers(trim_to, trim_to + 600))
    turn = st.lists(st.integers(0, largest), min_size=1, max_size=4).filter(
        lambda costs: sum(costs) <= largest
    )
    return system, draw(st.lists(turn, min_size=1, max_size=50)), max_tokens, trim_to


@settings(max_examples=300)
@given(growing())
def test_a_growing_history_keeps_its_cut_until_the_budget_forces_a_move(
    case: tuple[int, list[list[int]], int, int],
) -> None:
    """Over a growing history the first kept message changes only when what
    follows it no longer fits; each move leaves about ``trim_to`` (at most
    ``trim_to`` + the newest turn + the largest turn: cuts fall on turn
    boundaries); so moves come once per ``max_tokens - trim_to`` of growth."""
    system, turns, max_tokens, trim_to = case
    largest = max(map(sum, turns))
    moves, previous = 0, None
    for n in range(1, len(turns) + 1):
        history = records(system, turns[:n])
        plan = plan_trim(history, max_tokens, trim_to=trim_to)
        greedy = plan_trim(history, max_tokens)
        assert plan.tokens_after <= max_tokens
        assert 1 <= plan.kept_turns <= greedy.kept_turns
        assert plan.tokens_after == system + sum(r["tokens"] for r in history[plan.keep_from :])
        if previous is not None:
            rest = system + sum(r["tokens"] for r in history[previous.keep_from :])
            if rest <= max_tokens:  # the previous cut still fits: it stays
                assert plan.keep_from == previous.keep_from
            else:  # forced: the cut moves on, down to about trim_to
                moves += 1
                assert plan.keep_from > previous.keep_from
                assert plan.tokens_after <= trim_to + sum(turns[n - 1]) + largest
        # The previous model call was sent the history up to its newest reply.
        replies = [i for i, r in enumerate(history) if r["role"] == "assistant"]
        before = plan_trim(history[: replies[-1]], max_tokens, trim_to=trim_to) if replies else None
        assert plan.start_moved == (
            before is not None and before.kept_turns > 0 and before.keep_from != plan.keep_from
        )
        previous = plan
    assert moves <= sum(map(sum, turns)) // max(max_tokens - trim_to, 1) + 1


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
            st.integers(0, 60),
        ),
        max_size=30,
    ),
    st.integers(0, 600),
    st.integers(0, 600),
)
def test_any_history_is_cut_by_whole_turns_within_the_budget(
    roles: list[tuple[str, int]], a: int, b: int
) -> None:
    """Whatever the turns' sizes: the kept list fits ``max_tokens`` (unless the
    pinned messages alone do not), keeps the pinned ones, starts on a turn and
    keeps no more than the greedy trim, and at least the newest turn when that
    one fits."""
    trim_to, max_tokens = sorted((a, b))
    history = [{"id": str(i), "role": r, "tokens": t} for i, (r, t) in enumerate(roles)]
    plan = plan_trim(history, max_tokens, trim_to=trim_to)
    greedy = plan_trim(history, max_tokens)
    kept = trim_history(history, max_tokens, trim_to=trim_to)
    assert kept == plan.select(history)
    pinned = [m for m in history if m["role"] in ("system", "developer")]
    assert all(any(m is k for k in kept) for m in pinned)
    assert plan.tokens_after == sum(m["tokens"] for m in kept)
    assert plan.tokens_after <= max_tokens or kept == pinned
    assert plan.dropped_turns >= greedy.dropped_turns
    assert plan.keep_from == plan.size or history[plan.keep_from]["role"] == "user"
    assert (plan.kept_turns > 0) == (greedy.kept_turns > 0)


@settings(max_examples=300)
@given(growing())
def test_no_trim_to_is_the_spec_and_so_is_trim_to_at_the_budget(
    case: tuple[int, list[list[int]], int, int],
) -> None:
    system, turns, max_tokens, _ = case
    history = records(system, turns)
    spec = reference_trim(history, max_tokens)
    assert trim_history(history, max_tokens) == spec
    assert trim_history(history, max_tokens, trim_to=None) == spec
    assert trim_history(history, max_tokens, trim_to=max_tokens) == spec
    assert plan_trim(history, max_tokens, trim_to=max_tokens).keep_from == (
        plan_trim(history, max_tokens).keep_from
    )


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(st.sampled_from(["system", "user", "assistant", "tool"]), st.integers(0, 40)),
        max_size=24,
    ),
    st.integers(0, 300),
)
def test_start_moved_is_the_references(roles: list[tuple[str, int]], max_tokens: int) -> None:
    """Without ``trim_to``: the previous model call (sent the history up to its
    newest reply) kept another first message than this call does."""
    history = [{"id": str(i), "role": r, "tokens": t} for i, (r, t) in enumerate(roles)]
    moved = reference_start_moved(history, max_tokens)
    assert plan_trim(history, max_tokens).start_moved == moved
    report = TurnTrimmer(max_tokens, token_counter=LENGTH).report(as_messages(history))
    assert report.plan.start_moved == moved
    assert report.start_moved == moved


def test_the_start_stays_put_between_cuts() -> None:
    """20 turns of 100 tokens beside a system of 10, a budget of 500: the greedy
    trim moves the start at every turn once over budget, trim_to=300 at every
    other one (a cut to 310 leaves room for two more turns)."""
    starts = [
        plan_trim(records(10, [[50, 50]] * n), 500, trim_to=300).keep_from for n in range(1, 21)
    ]
    greedy = [plan_trim(records(10, [[50, 50]] * n), 500).keep_from for n in range(1, 21)]
    assert len(set(starts)) == 9
    assert len(set(greedy)) == 17
    assert plan_trim(records(10, [[50, 50]] * 5), 500, trim_to=300).tokens_after == 310
    assert plan_trim(records(10, [[50, 50]] * 6), 500, trim_to=300).tokens_after == 410
    assert plan_trim(records(10, [[50, 50]] * 5), 500).tokens_after == 410


def chat(turns: int) -> list[BaseMessage]:
    """A system message of 10 tokens (by ``LENGTH``), then turns of 50 + 50."""
    return as_messages(records(10, [[50, 50]] * turns))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_every_entry_point_cuts_to_trim_to(how: str) -> None:
    trimmer = TurnTrimmer(max_tokens=500, token_counter=LENGTH, trim_to=300)

    def run(history: list[BaseMessage]) -> list[BaseMessage]:
        if how == "sync":
            return trimmer.invoke(history)
        return asyncio.run(trimmer.ainvoke(history))

    moved = [trimmer.trim_with_report(chat(n)).start_moved for n in range(1, 21)]
    assert moved.count(True) == 8
    expected = plan_trim(records(10, [[50, 50]] * 20), 500, trim_to=300)
    kept = run(chat(20))
    assert [m.id for m in kept] == [f"m{i}" for i in expected.kept]
    assert trim_turns(chat(20), max_tokens=500, token_counter=LENGTH, trim_to=300) == kept
    report = trimmer.report(chat(20))
    assert (report.plan.trim_to, report.auto) == (300, None)
    assert report.tokens_after == expected.tokens_after
    history = chat(20)
    fields: dict[str, Any] = {"model": None, "messages": history[1:], "system_message": history[0]}
    middleware = TurnTrimMiddleware(500, token_counter=LENGTH, trim_to=300)
    trimmed, sent = middleware.trim_request(ModelRequest(tools=[], **fields))
    assert [m.id for m in trimmed.messages] == [m.id for m in kept[1:]]
    assert sent.plan == report.plan


@pytest.mark.parametrize("budget", [0, 100, 250, 299])
def test_a_per_call_budget_below_trim_to_clamps_it(budget: int) -> None:
    """A call's own budget (a retry's) lower than ``trim_to``: the cut is the
    greedy one for that budget, never over it."""
    history = chat(8)
    report = TurnTrimmer(max_tokens=500, token_counter=LENGTH, trim_to=300).report(
        history, max_tokens=budget
    )
    greedy = TurnTrimmer(max_tokens=budget, token_counter=LENGTH).report(history)
    assert report.plan.trim_to == budget
    assert report.kept_indices == greedy.kept_indices
    assert report.tokens_after <= max(budget, 10)
    options = TrimOptions(max_tokens=500, token_counter=LENGTH, trim_to=300)
    assert options.replace(max_tokens=budget).trim_to == budget
    assert options.replace(max_tokens=400).trim_to == 300


BUILDERS: dict[str, Callable[..., object]] = {
    "TurnTrimmer": lambda **kw: TurnTrimmer(500, **kw),
    "trim_turns": lambda **kw: trim_turns(max_tokens=500, **kw),
    "TurnTrimMiddleware": lambda **kw: TurnTrimMiddleware(500, **kw),
    "TrimOptions": lambda **kw: TrimOptions(max_tokens=500, **kw),
    "trim_history": lambda **kw: trim_history([], 500, **kw),
    "plan_trim": lambda **kw: plan_trim([], 500, **kw),
}


@pytest.mark.parametrize("entry", BUILDERS)
@pytest.mark.parametrize(
    ("trim_to", "error", "says"),
    [
        (501, ValueError, "trim_to (501) must be <= max_tokens (500)"),
        (-1, ValueError, "trim_to must be >= 0, got -1"),
        (True, TypeError, "trim_to must be an int, got bool True"),
        (2.5, TypeError, "trim_to must be an int, got float 2.5"),
    ],
)
def test_a_bad_trim_to_is_refused_by_every_entry_point(
    entry: str, trim_to: object, error: type[Exception], says: str
) -> None:
    with pytest.raises(error) as raised:
        BUILDERS[entry](trim_to=trim_to)
    assert says in str(raised.value)


@pytest.mark.parametrize("entry", BUILDERS)
def test_the_one_string_trim_to_is_auto(entry: str) -> None:
    """``"auto"``, for messages (plain records carry no prices and no model)."""
    if entry in ("trim_history", "plan_trim"):
        with pytest.raises(TypeError, match="trim_to must be an int, got str 'auto'"):
            BUILDERS[entry](trim_to="auto")
        return
    assert BUILDERS[entry](trim_to="auto") is not None
    with pytest.raises(ValueError, match="trim_to must be an int, None or 'auto', got str 'deep'"):
        BUILDERS[entry](trim_to="deep")
