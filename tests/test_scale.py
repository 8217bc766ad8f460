"""Scale and pathological inputs: huge histories, huge messages, deep nesting."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pytest_socket import SocketBlockedError

from langchain_turntrim import TiktokenCounter, TurnTrimmer, per_message
from langchain_turntrim._safe_repr import deep_repr, safe_repr


def nested(depth: int) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": "leaf"}
    for _ in range(depth):
        block = {"type": "nest", "child": [block]}
    return block


def test_sockets_are_disabled_for_the_whole_suite() -> None:
    with (
        pytest.raises(SocketBlockedError),
        pytest.warns(UserWarning, match="tried to use socket"),
    ):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


@pytest.mark.slow
def test_million_message_history() -> None:
    # The same few objects repeated: the trim works by position.
    system, human, ai = SystemMessage("s"), HumanMessage("q"), AIMessage("a")
    history: list[BaseMessage] = [system] + [human, ai] * 500_000
    trimmer = TurnTrimmer(max_tokens=1 + 2 * 1000, token_counter=per_message(lambda m: 1))
    report = trimmer.trim_with_report(history)
    assert len(report.kept) == 1 + 2 * 1000
    assert report.dropped_turns == 499_000
    assert report.kept[0] is system


@pytest.mark.slow
@pytest.mark.parametrize("counter", ["approximate", "tiktoken"])
def test_ten_megabyte_message(counter: str, tiktoken_cache: Any) -> None:
    big = HumanMessage("lorem ipsum dolor sit amet " * 400_000)  # ~10.8 MB
    chosen: Any = TiktokenCounter("gpt-4") if counter == "tiktoken" else counter
    trimmer = TurnTrimmer(max_tokens=1000, token_counter=chosen)
    history = [SystemMessage("s"), big, AIMessage("ok"), HumanMessage("small")]
    report = trimmer.trim_with_report(history)
    assert report.kept == [history[0], history[3]]
    assert report.tokens_before > 1_000_000


@pytest.mark.slow
@pytest.mark.parametrize("counter", ["approximate", "tiktoken"])
def test_content_nested_deeper_than_the_recursion_limit(counter: str, tiktoken_cache: Any) -> None:
    deep = nested(5000)
    history = [
        HumanMessage([deep]),
        AIMessage("", tool_calls=[{"name": "f", "args": {"x": deep}, "id": "1"}]),
        HumanMessage("next"),
    ]
    chosen: Any = TiktokenCounter("gpt-4") if counter == "tiktoken" else counter
    trimmer = TurnTrimmer(max_tokens=100, token_counter=chosen)
    first = trimmer.trim_with_report(history)
    assert first.kept == history[2:]
    assert first.tokens_before > 5000 * 3  # every level counted, none lost
    again = TurnTrimmer(max_tokens=100, token_counter=chosen).trim_with_report(history)
    assert again.tokens_before == first.tokens_before


def test_deep_repr_matches_repr_where_repr_works() -> None:
    value = {"a": [1, {"b": None, "c": "t"}, [True, 2.5], (), (1,), (1, "x")], "d": {}, 3: []}
    assert deep_repr(value) == repr(value)
    assert safe_repr(value) == repr(value)
    cycle: list[Any] = [1]
    cycle.append(cycle)
    loop: dict[str, Any] = {}
    loop["self"] = [loop]
    assert deep_repr(cycle) == repr(cycle)
    assert deep_repr(loop) == repr(loop)
    assert len(safe_repr(nested(10_000))) > 10_000
