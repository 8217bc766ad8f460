"""trim_turns: trim_messages' calling convention, and the same results where the spec agrees."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langchain_core.runnables import Runnable

from langchain_turntrim import TurnTrimmer, trim_turns
from tests.lc import content_length, to_message

COUNTERS: dict[str, Any] = {
    "len": len,
    "count_tokens_approximately": count_tokens_approximately,
    "per-message": content_length,
    "approximate": "approximate",
}


@st.composite
def agreeing_histories(draw: st.DrawFn) -> tuple[list[BaseMessage], int]:
    """Where the spec and trim_messages agree: at most one system message, at
    index 0; no messages before the first user message; a budget the system
    message fits in."""
    roles = st.sampled_from(["user", "assistant", "assistant", "tool", "function"])
    body = draw(st.lists(st.tuples(roles, st.integers(0, 40)), max_size=25))
    records = [{"id": f"m{i}", "role": r, "tokens": t} for i, (r, t) in enumerate(body, 1)]
    first_user = next((i for i, r in enumerate(records) if r["role"] == "user"), len(records))
    records = records[first_user:]
    if draw(st.booleans()):
        records.insert(0, {"id": "m0", "role": "system", "tokens": draw(st.integers(0, 40))})
    messages = [to_message(r) for r in records]
    return messages, draw(st.integers(0, 400))


@pytest.mark.parametrize("name", sorted(COUNTERS))
@settings(max_examples=300)
@given(case=agreeing_histories())
def test_same_result_as_trim_messages(name: str, case: Any) -> None:
    messages, budget = case
    counter = COUNTERS[name]
    theirs = trim_messages(
        messages,
        max_tokens=budget,
        token_counter=counter,
        strategy="last",
        start_on="human",
        include_system=True,
    )
    ours = trim_turns(messages, max_tokens=budget, token_counter=counter)
    has_system = bool(messages) and isinstance(messages[0], SystemMessage)
    system_cost = TurnTrimmer(max_tokens=0, token_counter=counter).trim_with_report(
        messages[:1] if has_system else []
    )
    if system_cost.tokens_after <= budget:
        assert [m.id for m in ours] == [m.id for m in theirs]
        assert all(a is b for a, b in zip(ours, theirs, strict=True))


def test_without_messages_returns_a_runnable() -> None:
    trimmer = trim_turns(max_tokens=3, token_counter=len)
    assert isinstance(trimmer, Runnable)
    assert isinstance(trimmer, TurnTrimmer)
    history = [SystemMessage("s"), HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    assert trimmer.invoke(history) == [history[0], history[3]]


def test_where_the_results_differ() -> None:
    history = [
        AIMessage("greeting before any question", id="g"),
        HumanMessage("q1", id="q1"),
        AIMessage("", id="call", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1", id="res"),
        SystemMessage("late instructions", id="late"),
        AIMessage("a1", id="a1"),
        HumanMessage("q2", id="q2"),
    ]
    theirs = trim_messages(
        history, max_tokens=4, token_counter=len, strategy="last", include_system=True
    )
    ours = trim_turns(history, max_tokens=4, token_counter=len)
    # trim_messages without start_on keeps the orphan tool result and the
    # call-less tail of the first turn; ours keeps the late system message
    # and starts on a human message.
    assert [m.id for m in theirs] == ["res", "late", "a1", "q2"]
    assert [m.id for m in ours] == ["late", "q2"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"end_on": "human"}, "end_on='human'"),
        ({"text_splitter": str.split}, "text_splitter"),
    ],
)
def test_unsupported_options(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match="trim_turns does not support") as info:
        trim_turns([HumanMessage("x")], max_tokens=10, token_counter=len, **kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize("start_on", [None, "human", HumanMessage, ["human"], (HumanMessage,)])
def test_start_on_spellings_of_human(start_on: Any) -> None:
    history = [AIMessage("x"), HumanMessage("y")]
    assert trim_turns(history, max_tokens=10, token_counter=len, start_on=start_on) == history[1:]
