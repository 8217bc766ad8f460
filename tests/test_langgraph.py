"""trim_update / removals on a real StateGraph with an in-memory checkpointer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    MessageLikeRepresentation,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages

from langchain_turntrim import TurnTrimmer, TurnTrimOverflowError
from langchain_turntrim._langgraph import removals, remove_messages, trim_update

BUDGET = 120
SYSTEM = SystemMessage("You answer questions about the weather.")


def build(shape: str, trimmer: TurnTrimmer, seen: list[list[BaseMessage]]) -> Any:
    """A chatbot graph; ``shape`` is where the trim happens.

    ``"node"``: a trim node before the model node returns ``trim_update``.
    ``"inline"``: the model node trims and returns removals plus its reply.
    """

    def reply(messages: list[AnyMessage]) -> AIMessage:
        seen.append(list(messages))
        return AIMessage(f"Reply {len(seen)}: sunny, 21C, light wind.")

    def trim(state: MessagesState) -> dict[str, Any]:
        return trim_update(state["messages"], trimmer)

    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [reply(state["messages"])]}

    def trim_and_model(state: MessagesState) -> dict[str, Any]:
        report = trimmer.trim_with_report(state["messages"])
        return {"messages": [*removals(report), reply(report.kept)]}

    graph = StateGraph(MessagesState)
    if shape == "node":
        graph.add_node("trim", trim)
        graph.add_node("model", model)
        graph.add_edge(START, "trim")
        graph.add_edge("trim", "model")
    else:
        graph.add_node("model", trim_and_model)
        graph.add_edge(START, "model")
    return graph.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("shape", ["node", "inline"])
def test_state_stops_growing_and_the_model_sees_trimmed_history(shape: str):
    seen: list[list[BaseMessage]] = []
    trimmer = TurnTrimmer(max_tokens=BUDGET)
    app = build(shape, trimmer, seen)
    config = {"configurable": {"thread_id": shape}}
    sizes = []
    ever: list[str] = []
    for i in range(12):
        first = [SYSTEM] if i == 0 else []
        question = HumanMessage(f"What is the weather in city number {i}?")
        state = app.invoke({"messages": [*first, question]}, config)
        sizes.append(len(state["messages"]))
        ever.extend(m.id for m in state["messages"] if m.id not in ever)

    # The model node sees system + whole turns within budget, newest question last.
    for i, messages in enumerate(seen):
        assert messages[0].text == SYSTEM.text
        assert isinstance(messages[1], HumanMessage)
        assert messages[-1].text == f"What is the weather in city number {i}?"
        assert count_tokens_approximately(messages) <= BUDGET
    assert len(seen[-1]) < len(seen) * 2  # really trimmed

    # The state stops growing: a steady size once the budget is reached.
    assert sizes[-1] == sizes[-2] == sizes[-3] < 2 * len(sizes)

    # The removed ids are gone from the checkpoint, not only from the view.
    stored = app.get_state(config).values["messages"]
    checkpoint = app.checkpointer.get_tuple(config).checkpoint
    in_checkpoint = [m.id for m in checkpoint["channel_values"]["messages"]]
    assert in_checkpoint == [m.id for m in stored]
    removed = set(ever) - set(in_checkpoint)
    assert len(removed) == len(ever) - len(in_checkpoint) > 0
    assert stored[0].id == ever[0]  # the system message is pinned, never removed


def test_trim_update_is_empty_when_everything_fits():
    history: list[MessageLikeRepresentation] = [
        HumanMessage("hi", id="h1"),
        AIMessage("hello", id="a1"),
    ]
    assert trim_update(history, TurnTrimmer(max_tokens=1_000)) == {"messages": []}
    # An empty update is a valid add_messages update.
    assert add_messages(history, []) == history


def test_trim_update_other_key_and_message_likes():
    history = [HumanMessage("a" * 80, id="h1"), AIMessage("b" * 80, id="a1"), HumanMessage("ok")]
    update = trim_update(history, TurnTrimmer(max_tokens=10), key="chat")
    assert list(update) == ["chat"]
    assert [(type(m), m.id) for m in update["chat"]] == [
        (RemoveMessage, "h1"),
        (RemoveMessage, "a1"),
    ]
    # Tuples and dicts become messages without ids: they cannot be removed from a state.
    likes = [("user", "a" * 80), ("assistant", "b" * 80), ("user", "ok")]
    with pytest.raises(ValueError, match=r"messages\[0\] is dropped but has no id"):
        trim_update(likes, TurnTrimmer(max_tokens=10))


def test_removals_applied_by_add_messages_delete_exactly_the_dropped():
    history: list[MessageLikeRepresentation] = [
        SystemMessage("sys", id="s"),
        AIMessage("before any user message", id="orphan"),
        HumanMessage("a" * 200, id="h1"),
        AIMessage("b" * 200, id="a1"),
        HumanMessage("what now?", id="h2"),
        AIMessage("this.", id="a2"),
    ]
    report = TurnTrimmer(max_tokens=30).trim_with_report(history)
    update = removals(report)
    assert [m.id for m in update] == ["orphan", "h1", "a1"]
    removed: list[MessageLikeRepresentation] = list(update)
    assert add_messages(history, removed) == report.kept


def test_a_dropped_message_without_an_id_is_named_by_index():
    with pytest.raises(ValueError, match=r"messages\[7\]"):
        remove_messages([(7, AIMessage("x"))])


def test_an_oversized_newest_turn_follows_on_overflow():
    history = [SystemMessage("sys", id="s"), HumanMessage("x" * 400, id="h1")]
    # "drop": the model would see the system message alone, but the state keeps
    # the newest turn: the graph never loses the task.
    assert trim_update(history, TurnTrimmer(max_tokens=20))["messages"] == []
    with pytest.raises(TurnTrimOverflowError):
        trim_update(history, TurnTrimmer(max_tokens=20, on_overflow="raise"))


GREETING = [
    SystemMessage("rules", id="s"),
    AIMessage("Hello! How can I help you today?", id="greet"),
    HumanMessage("q1 " * 20, id="u1"),
    AIMessage("a1 " * 20, id="a1"),
    HumanMessage("q2 " * 20, id="u2"),
    AIMessage("a2 " * 20, id="a2"),
    HumanMessage("q3", id="u3"),
]


@pytest.mark.parametrize("trim_to", [None, 60])
def test_a_greeting_leaves_the_state_only_with_the_first_dropped_turn(trim_to: int | None):
    """What the model is not sent is not always what the state loses: a greeting
    (before the first user message) is never sent, but it stays in the state
    until a turn is dropped too, and then goes with it."""
    total = count_tokens_approximately(GREETING)
    for budget in (total, 100_000):
        trimmer = TurnTrimmer(max_tokens=budget, trim_to=min(trim_to or budget, budget))
        report = trimmer.trim_with_report(GREETING)
        assert [m.id for m in report.kept] == ["s", "u1", "a1", "u2", "a2", "u3"]
        assert [m.id for m in report.dropped] == ["greet"]  # not sent to the model
        assert trim_update(GREETING, trimmer) == {"messages": []}  # but kept in the state
    budget = count_tokens_approximately([GREETING[0], *GREETING[4:]])
    trimmer = TurnTrimmer(max_tokens=budget, trim_to=trim_to and min(trim_to, budget))
    removed = [m.id for m in trim_update(GREETING, trimmer)["messages"]]
    assert removed == ["greet", "u1", "a1"]
