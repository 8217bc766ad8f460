"""``trim_update`` and ``removals``: a trim as the state update that deletes the
dropped turns, on real ``StateGraph``s whose messages use ``add_messages``."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import cycle
from typing import Any, cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    MessageLikeRepresentation,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import Messages, add_messages

from langchain_turntrim import (
    TurnTrimmer,
    TurnTrimOverflowError,
    per_message,
    removals,
    trim_update,
)
from tests.strategies import conversations

BUDGET = 120
SYSTEM = SystemMessage("You answer questions about the weather.", id="sys")


def build(shape: str, trimmer: TurnTrimmer, seen: list[list[BaseMessage]]) -> Any:
    """A chatbot graph; ``shape`` is where the trim happens: ``"node"``, a node
    before the model's returns ``trim_update``; ``"inline"``, the model's node
    trims and returns the removals with its reply."""
    # Cycled strings: each reply is a new AIMessage, given its own id.
    model = GenericFakeChatModel(messages=cycle(["Sunny, 21C, a light wind from the west."]))

    def reply(messages: Sequence[BaseMessage]) -> BaseMessage:
        seen.append(list(messages))
        return model.invoke(messages)

    def trim(state: MessagesState) -> dict[str, Any]:
        return trim_update(state["messages"], trimmer)

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [reply(state["messages"])]}

    def trim_and_answer(state: MessagesState) -> dict[str, Any]:
        report = trimmer.trim_with_report(state["messages"])
        return {"messages": [*removals(report), reply(report.kept)]}

    graph = StateGraph(MessagesState)
    if shape == "node":
        graph.add_node("trim", trim)
        graph.add_node("model", answer)
        graph.add_edge(START, "trim")
        graph.add_edge("trim", "model")
    else:
        graph.add_node("model", trim_and_answer)
        graph.add_edge(START, "model")
    return graph.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("shape", ["node", "inline"])
def test_the_state_stops_growing_and_the_model_sees_the_newest_turns(shape: str) -> None:
    seen: list[list[BaseMessage]] = []
    app = build(shape, TurnTrimmer(max_tokens=BUDGET), seen)
    config = {"configurable": {"thread_id": shape}}
    sizes, ever = [], []
    for i in range(12):
        first = [SYSTEM] if i == 0 else []
        question = HumanMessage(f"What is the weather in city number {i}?", id=f"h{i}")
        state = app.invoke({"messages": [*first, question]}, config)
        sizes.append(len(state["messages"]))
        ever += [m.id for m in state["messages"] if m.id not in ever]

    for i, messages in enumerate(seen):
        assert messages[0] == SYSTEM
        assert isinstance(messages[1], HumanMessage)
        assert messages[-1].id == f"h{i}"  # the newest question, last
        assert count_tokens_approximately(messages) <= BUDGET
    assert len(seen[-1]) < 2 * len(seen)  # really trimmed
    assert len(ever) == 1 + 2 * 12  # every reply kept its own id
    assert sizes[-1] == sizes[-2] == sizes[-3] < 2 * len(sizes)  # a steady size

    # The removed messages are gone from the checkpoint, not only from the view.
    stored = app.get_state(config).values["messages"]
    checkpoint = app.checkpointer.get_tuple(config).checkpoint
    assert [m.id for m in checkpoint["channel_values"]["messages"]] == [m.id for m in stored]
    assert stored[0] == SYSTEM  # pinned, never removed
    assert [m.id for m in stored[1:]] == ever[len(ever) - len(stored) + 1 :]


def _with_ids(history: list[BaseMessage]) -> list[BaseMessage]:
    return [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(history)]


@settings(max_examples=80)
@given(
    history=conversations(max_turns=6),
    share=st.floats(0, 1.2),
    level=st.none() | st.floats(0, 1),
)
def test_the_update_removes_exactly_what_the_state_loses(
    history: list[BaseMessage], share: float, level: float | None
) -> None:
    """``add_messages`` applies the update: exactly ``report.removed`` leaves
    the state (never a pinned message, never the newest turn), and what is
    left is trimmed to what the whole history is."""
    history = _with_ids(history)
    budget = int(share * count_tokens_approximately(history))
    trim_to = None if level is None else int(level * budget)
    trimmer = TurnTrimmer(max_tokens=budget, trim_to=trim_to)
    report = trimmer.report(history)
    update = trim_update(history, trimmer)
    assert [m.id for m in update["messages"]] == [m.id for m in report.removed]
    # chunks become messages
    state = cast("list[BaseMessage]", add_messages(cast("Messages", history), update["messages"]))
    ids = [m.id for m in state]
    assert ids == [m.id for i, m in enumerate(history) if i not in report.plan.removed]
    assert all(m.id in ids for m in history[report.plan.newest_turn_start :])
    assert all(history[i].id in ids for i in report.plan.pinned)
    assert _sent(trimmer, state) == _sent(trimmer, history)


def _sent(trimmer: TurnTrimmer, history: list[BaseMessage]) -> list[tuple[Any, Any]]:
    return [(m.id, m.content) for m in trimmer.report(history).kept]


def _length(message: BaseMessage) -> int:
    return len(str(message.content))


_length.__annotations__["message"] = BaseMessage


@settings(max_examples=80)
@example(sizes=[(40, 0), (20, 0), (10, 0), (30, 0)], budget=50, level=0.4)  # the cut moved
@example(sizes=[(30, 5), (30, 5), (30, 5), (30, 5), (30, 5)], budget=100, level=0.5)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), min_size=1, max_size=12),
    budget=st.integers(0, 150),
    level=st.none(),
)
def test_a_thread_trimmed_in_its_state_sends_what_the_whole_thread_would(
    sizes: list[tuple[int, int]], budget: int, level: float | None
) -> None:
    """A thread whose every trim deletes what it dropped sends, turn after
    turn, what the thread that keeps everything sends: the deletions never
    move a later cut. Under ``trim_to`` this holds while each cut is one of
    its stable points (the examples); a cut the budget forces elsewhere
    (no stable point fits) may make later cuts differ (the guide says so)."""
    trim_to = None if level is None else int(level * budget)
    trimmer = TurnTrimmer(max_tokens=budget, trim_to=trim_to, token_counter=per_message(_length))
    full: list[BaseMessage] = []
    state: list[BaseMessage] = []
    for i, (asked, answered) in enumerate(sizes):
        turn = [HumanMessage("q" * asked, id=f"h{i}"), AIMessage("a" * answered, id=f"a{i}")]
        full, state = [*full, *turn], [*state, *turn]
        assert _sent(trimmer, state) == _sent(trimmer, full), f"turn {i}"
        update = trim_update(state, trimmer)["messages"]
        state = cast("list[BaseMessage]", add_messages(cast("Messages", state), update))


def test_nothing_is_removed_while_every_turn_fits() -> None:
    history: list[MessageLikeRepresentation] = [
        HumanMessage("hi", id="h1"),
        AIMessage("hello", id="a1"),
    ]
    assert trim_update(history, TurnTrimmer(max_tokens=1_000)) == {"messages": []}
    assert add_messages(history, []) == history  # an empty update is a valid one


def test_trim_update_under_another_key() -> None:
    history = [HumanMessage("a" * 80, id="h1"), AIMessage("b" * 80, id="a1"), HumanMessage("ok")]
    update = trim_update(history, TurnTrimmer(max_tokens=10), key="chat")
    assert list(update) == ["chat"]
    assert [(type(m), m.id) for m in update["chat"]] == [
        (RemoveMessage, "h1"),
        (RemoveMessage, "a1"),
    ]


@pytest.mark.parametrize(
    ("history", "where"),
    [
        ([("user", "a" * 80), ("assistant", "b" * 80), ("user", "ok")], r"messages\[0\]"),
        (
            [HumanMessage("a" * 80, id="h1"), AIMessage("b" * 80), HumanMessage("ok", id="h2")],
            r"messages\[1\]",
        ),
    ],
)
def test_a_removed_message_without_an_id_is_named(history: Any, where: str) -> None:
    """Tuples and dicts become messages without ids: no RemoveMessage can name them."""
    with pytest.raises(ValueError, match=where + " is dropped but has no id"):
        trim_update(history, TurnTrimmer(max_tokens=10))
    report = TurnTrimmer(max_tokens=10).report(history)
    with pytest.raises(ValueError, match=where + " is dropped but has no id"):
        removals(report)


def test_removals_delete_exactly_what_the_state_loses() -> None:
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
    assert add_messages(history, cast("Messages", list(update))) == report.kept


@pytest.mark.parametrize("on_overflow", ["drop", "compact"])
def test_the_newest_turn_is_never_removed(on_overflow: str) -> None:
    history = [
        SystemMessage("sys", id="s"),
        HumanMessage("old", id="h0"),
        AIMessage("answer", id="a0"),
        HumanMessage("x" * 4_000, id="h1"),
    ]
    trimmer = TurnTrimmer(max_tokens=200, on_overflow=on_overflow)
    # The model may be sent the system message alone, or a compacted turn, but
    # the state keeps the task: only the older turn leaves.
    assert [m.id for m in trim_update(history, trimmer)["messages"]] == ["h0", "a0"]
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
def test_a_greeting_leaves_the_state_only_with_the_first_dropped_turn(trim_to: int | None) -> None:
    """What the model is not sent is not always what the state loses: a greeting
    is never sent, but it stays in the state until a turn is dropped too."""
    total = count_tokens_approximately(GREETING)
    for budget in (total, 100_000):
        trimmer = TurnTrimmer(max_tokens=budget, trim_to=min(trim_to or budget, budget))
        report = trimmer.trim_with_report(GREETING)
        assert [m.id for m in report.kept] == ["s", "u1", "a1", "u2", "a2", "u3"]
        assert [m.id for m in report.dropped] == ["greet"]
        assert trim_update(GREETING, trimmer) == {"messages": []}
    budget = count_tokens_approximately([GREETING[0], *GREETING[4:]])
    trimmer = TurnTrimmer(max_tokens=budget, trim_to=trim_to and min(trim_to, budget))
    assert [m.id for m in trim_update(GREETING, trimmer)["messages"]] == ["greet", "u1", "a1"]
