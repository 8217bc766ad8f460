"""Fuzzing: a valid conversation stays valid, whatever the budget and counter."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langchain_turntrim import TiktokenCounter, TurnTrimmer
from tests import strategies
from tests.helpers import snapshot
from tests.lc import LENGTH, check_conversation

pytestmark = pytest.mark.slow


@settings(max_examples=200)
@given(
    conversation=strategies.conversations(),
    budget=st.integers(0, 2_000),
    counter=st.sampled_from(["approximate", "tiktoken", "length"]),
)
def test_valid_conversations_stay_valid(
    tiktoken_cache: Any, conversation: list[BaseMessage], budget: int, counter: str
) -> None:
    check_conversation(conversation)  # the strategy's own promise
    chosen: Any = {"tiktoken": TiktokenCounter("gpt-4"), "length": LENGTH}.get(counter, counter)
    before = snapshot(conversation)
    report = TurnTrimmer(max_tokens=budget, token_counter=chosen).trim_with_report(conversation)
    kept = report.kept
    if report.plan.kept_turns:
        check_conversation(kept)
    else:  # the spec's overflow result: the system messages alone
        assert report.plan.newest_turn_tokens + report.plan.system_tokens > budget - 3
        assert len(kept) == len(report.plan.pinned)
    assert snapshot(conversation) == before
    assert all(any(k is m for m in conversation) for k in kept)
