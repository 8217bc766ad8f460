"""TurnTrimmer as a LangChain Runnable, and trim_turns as a drop-in for trim_messages.

Every way of running a Runnable gives the same kept list; PromptValues and
message-likes are inputs; it pipes between a prompt and a model, runs inside
RunnableWithMessageHistory, and is a run of its own exactly when a callback
handler would see it.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.tracers.context import collect_runs

from langchain_turntrim import (
    TurnTrimmer,
    TurnTrimOverflowError,
    per_list,
    per_message,
    trim_turns,
)
from tests.strategies import conversations


def length(message: BaseMessage) -> int:
    """A message costs its content's length (trim_messages needs the annotation itself)."""
    return len(message.content)


length.__annotations__["message"] = BaseMessage

#: Additive per message, and the same counts as one whole-list (blocking) counter.
COUNTERS: dict[str, Callable[[], Any]] = {
    "per_message": lambda: per_message(length),
    "per_list": lambda: per_list(lambda ms: sum(map(length, ms))),
}

HISTORY = [
    SystemMessage("s" * 20, id="s0"),
    HumanMessage("u" * 30, id="u1"),
    AIMessage("a" * 30, id="a1"),
    HumanMessage("u" * 25, id="u2"),
    AIMessage("a" * 25, id="a2"),
]

PROMPT = ChatPromptTemplate.from_messages(
    [("system", "be brief"), MessagesPlaceholder("history"), ("human", "{question}")]
)


def ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


async def _collect(iterator: Any) -> list[Any]:
    return [chunk async for chunk in iterator]


def _single(chunks: list[Any]) -> Any:
    assert len(chunks) == 1, chunks
    return chunks[0]


#: Every way to run a Runnable on one input; each returns the output.
CALLS: dict[str, Callable[[Runnable[Any, Any], Any], Any]] = {
    "invoke": lambda r, x: r.invoke(x),
    "ainvoke": lambda r, x: asyncio.run(r.ainvoke(x)),
    "batch": lambda r, x: r.batch([x, x])[1],
    "abatch": lambda r, x: asyncio.run(r.abatch([x, x]))[1],
    "stream": lambda r, x: _single(list(r.stream(x))),
    "astream": lambda r, x: _single(asyncio.run(_collect(r.astream(x)))),
}


@pytest.fixture(params=sorted(CALLS))
def call(request: pytest.FixtureRequest) -> Callable[[Runnable[Any, Any], Any], Any]:
    return CALLS[request.param]


@pytest.fixture(params=sorted(COUNTERS))
def counter(request: pytest.FixtureRequest) -> Any:
    return COUNTERS[request.param]()


# -- every way of running gives the same kept list ------------------------------------


def test_the_spec_s_sample_every_way(call: Any, counter: Any) -> None:
    kept = call(TurnTrimmer(100, token_counter=counter), HISTORY)
    assert ids(kept) == ["s0", "u2", "a2"]
    assert all(k is HISTORY[i] for k, i in zip(kept, (0, 3, 4), strict=True))


@settings(max_examples=30)
@given(history=conversations(max_turns=4), share=st.floats(0, 1.1))
def test_every_way_of_running_keeps_the_same_list(history: list[BaseMessage], share: float) -> None:
    budget = int(share * count_tokens_approximately(history))
    trimmer = TurnTrimmer(budget)
    expected = trimmer.report(history).kept
    for name, run in CALLS.items():
        assert run(trimmer, history) == expected, name
    assert trim_turns(history, max_tokens=budget) == expected


def test_overflow_raises_through_every_way(call: Any) -> None:
    trimmer = TurnTrimmer(60, token_counter=per_message(length), on_overflow="raise")
    with pytest.raises(TurnTrimOverflowError) as info:
        call(trimmer, [*HISTORY, HumanMessage("u" * 41, id="u3")])
    error = info.value
    assert isinstance(error, ContextOverflowError)
    assert (error.max_tokens, error.system_tokens, error.newest_turn_tokens) == (60, 20, 41)
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert (copy.max_tokens, copy.system_tokens, copy.newest_turn_tokens) == (60, 20, 41)
    assert str(copy) == str(error)


# -- inputs: a PromptValue and message-likes ---------------------------------------------


def test_a_prompt_value_is_its_messages(call: Any) -> None:
    value = PROMPT.invoke({"history": [("human", "a" * 5), ("ai", "b" * 5)], "question": "c" * 5})
    kept = call(TurnTrimmer(15, token_counter=per_message(length)), value)
    assert [m.content for m in kept] == ["be brief", "c" * 5]


def test_message_likes_are_converted_and_messages_come_back_as_themselves(call: Any) -> None:
    human, chunk = HumanMessage("hi", id="h"), AIMessageChunk(content="partial", id="chunk")
    calls = [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]
    history = [
        ("system", "rules"),
        human,
        {"role": "assistant", "content": "", "tool_calls": calls},
    ]
    history += [{"role": "tool", "content": "sunny", "tool_call_id": "c1"}, ("ai", "sunny")]
    history += ["and tomorrow?", chunk]
    kept = call(TurnTrimmer(10_000), history)
    names = "SystemMessage HumanMessage AIMessage ToolMessage AIMessage HumanMessage AIMessageChunk"
    assert [type(m).__name__ for m in kept] == names.split()
    assert kept[1] is human
    assert kept[6] is chunk
    assert kept[2].tool_calls[0]["id"] == "c1"
    assert [m.content for m in kept[4:6]] == ["sunny", "and tomorrow?"]


# -- composition -----------------------------------------------------------------------


class Recorder(BaseCallbackHandler):
    """What a handler sees: chain runs started and ended, and what models are sent."""

    def __init__(self) -> None:
        self.started: list[str | None] = []
        self.ended: list[Any] = []
        self.sent: list[list[BaseMessage]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.started.append(kwargs.get("name"))

    def on_chain_end(self, outputs: Any, **kwargs: Any) -> None:
        self.ended.append(outputs)

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.sent.append(messages[0])


def _model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage("ok", id=f"r{i}") for i in range(10)]))


def test_a_prompt_piped_through_the_trimmer_into_a_model(call: Any) -> None:
    recorder = Recorder()
    chain = PROMPT | TurnTrimmer(20, token_counter=per_message(length)) | _model()
    history = [("human", "a" * 10), ("ai", "b" * 10), ("human", "c" * 5), ("ai", "d" * 5)]
    configured = chain.with_config(callbacks=[recorder])
    reply = call(configured, {"history": history, "question": "e" * 5})
    assert reply.content == "ok"
    assert [m.content for m in recorder.sent[-1]] == ["be brief", "e" * 5]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # LangChain deprecates the class
def test_inside_runnable_with_message_history() -> None:
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.runnables.history import RunnableWithMessageHistory

    store: dict[str, InMemoryChatMessageHistory] = {}
    recorder = Recorder()
    chain = PROMPT | TurnTrimmer(8 + 45, token_counter=per_message(length)) | _model()
    with_history = RunnableWithMessageHistory(
        chain,
        lambda session: store.setdefault(session, InMemoryChatMessageHistory()),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "s"}, "callbacks": [recorder]}
    questions = ["a" * 40, "b" * 40, "c" * 40]
    for question in questions:
        assert with_history.invoke({"question": question}, config=config).content == "ok"
    # The store keeps every message; each call is sent the newest turns that fit.
    stored = [m.content for m in store["s"].messages]
    assert stored == ["a" * 40, "ok", "b" * 40, "ok", "c" * 40, "ok"]
    assert [[m.content for m in sent] for sent in recorder.sent] == [
        ["be brief", question] for question in questions
    ]


# -- callbacks: a run of its own when a handler would see it -----------------------------


def _run(trimmer: TurnTrimmer, history: Any, config: Any, mode: str) -> Any:
    """``invoke``/``ainvoke`` with ``config``; ``nested``: from inside a
    RunnableLambda run with ``config``, which the trimmer's run inherits."""
    if mode == "sync":
        return trimmer.invoke(history, config)
    if mode == "async":
        return asyncio.run(trimmer.ainvoke(history, config))

    async def ainner(x: Any) -> Any:
        return await trimmer.ainvoke(x)

    outer = RunnableLambda(trimmer.invoke, afunc=ainner, name="outer")
    if mode == "nested":
        return outer.invoke(history, config)
    return asyncio.run(outer.ainvoke(history, config))


MODES = ["sync", "async", "nested", "nested-async"]


@pytest.mark.parametrize("mode", MODES)
def test_a_handler_sees_the_trimmer_s_run_and_nothing_else_changes(mode: str, counter: Any) -> None:
    trimmer = TurnTrimmer(100, token_counter=counter)
    recorder = Recorder()
    kept = _run(trimmer, HISTORY, {"callbacks": [recorder]}, mode)
    assert kept == _run(trimmer, HISTORY, None, mode)
    assert ids(kept) == ["s0", "u2", "a2"]
    assert recorder.started[-1] == "TurnTrimmer"
    assert kept in recorder.ended
    with collect_runs() as runs:
        assert _run(trimmer, HISTORY, None, mode) == kept
    runs_made = [*runs.traced_runs, *(c for r in runs.traced_runs for c in r.child_runs)]
    assert "TurnTrimmer" in [r.name for r in runs_made]


def test_a_run_takes_its_name_and_config() -> None:
    trimmer = TurnTrimmer(100, token_counter=per_message(length), name="history_trim")
    assert trimmer.get_name() == "history_trim"
    assert TurnTrimmer(100).get_name() == "TurnTrimmer"
    with collect_runs() as runs:
        trimmer.invoke(HISTORY, {"tags": ["t"], "metadata": {"k": 1}})
    (run,) = runs.traced_runs
    assert run.name == "history_trim"
    assert run.tags == ["t"]
    assert run.extra is not None
    assert run.extra["metadata"]["k"] == 1
    assert ids(run.outputs["output"]) == ["s0", "u2", "a2"]  # type: ignore[index]


def test_without_a_handler_no_run_is_made(call: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def unexpected(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run was made that nobody watches")

    monkeypatch.setattr(TurnTrimmer, "_call_with_config", unexpected)
    monkeypatch.setattr(TurnTrimmer, "_acall_with_config", unexpected)
    trimmer = TurnTrimmer(100, token_counter=per_message(length))
    assert ids(call(trimmer, HISTORY)) == ["s0", "u2", "a2"]
    config: Any = {"tags": ["t"], "metadata": {"k": 1}, "run_name": "r", "callbacks": []}
    assert ids(trimmer.invoke(HISTORY, config)) == ["s0", "u2", "a2"]
    assert ids(asyncio.run(trimmer.ainvoke(HISTORY, config))) == ["s0", "u2", "a2"]


def test_schemas() -> None:
    trimmer = TurnTrimmer(10)
    assert trimmer.OutputType == list[BaseMessage]
    assert trimmer.get_output_jsonschema()["type"] == "array"
    assert "anyOf" in trimmer.get_input_jsonschema()


# -- trim_turns: trim_messages' calling convention ------------------------------------------


def test_trim_turns_returns_a_list_given_messages_else_a_runnable() -> None:
    history = [SystemMessage("s"), HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    kept = trim_turns(history, max_tokens=3, token_counter=len)
    assert kept == [history[0], history[3]]
    assert all(a is b for a, b in zip(kept, [history[0], history[3]], strict=True))
    trimmer = trim_turns(max_tokens=3, token_counter=len)
    assert isinstance(trimmer, TurnTrimmer)
    assert trimmer.invoke(history) == kept
    assert (PROMPT | trimmer).invoke({"history": [], "question": "q"})[1].content == "q"


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"strategy": "first"}, "strategy='first'"),
    ({"allow_partial": True}, "allow_partial=True"),
    ({"include_system": False}, "include_system=False"),
    ({"start_on": "ai"}, "start_on=str 'ai'"),
    ({"start_on": [HumanMessage, AIMessage]}, "start_on=list"),
    ({"end_on": "human"}, "end_on=str 'human'"),
    ({"text_splitter": str.split}, "text_splitter"),
    ({"strategy": "first", "end_on": "ai"}, "strategy='first' (only 'last' keeps the newest"),
    ({"strategy": "first", "end_on": "ai"}, "; end_on=str 'ai'"),
]


@pytest.mark.parametrize(("kwargs", "fragment"), REFUSED, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("given_messages", [True, False])
def test_trim_turns_refuses_what_would_split_a_turn(
    kwargs: dict[str, Any], fragment: str, given_messages: bool
) -> None:
    messages = [HumanMessage("x")] if given_messages else None
    with pytest.raises(ValueError, match="trim_turns does not support") as info:
        trim_turns(messages, max_tokens=10, token_counter=len, **kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize("start_on", [None, "human", HumanMessage, ["human"], (HumanMessage,)])
def test_trim_turns_takes_every_spelling_of_human(start_on: Any) -> None:
    history = [AIMessage("x"), HumanMessage("y")]
    assert trim_turns(history, max_tokens=10, token_counter=len, start_on=start_on) == history[1:]


@st.composite
def agreeing_histories(draw: st.DrawFn) -> tuple[list[BaseMessage], int]:
    """Where the spec and ``trim_messages`` agree: at most one system message,
    first; turns of a user message, tool steps whose every call is answered, and
    a final assistant reply; and a budget."""
    size = st.integers(0, 30)
    history: list[BaseMessage] = []
    if draw(st.booleans()):
        history.append(SystemMessage("s" * draw(size), id="sys"))
    for turn in range(draw(st.integers(0, 5))):
        history.append(HumanMessage("u" * draw(size), id=f"u{turn}"))
        for step in range(draw(st.integers(0, 2))):
            calls = [f"c{turn}.{step}.{k}" for k in range(draw(st.integers(1, 2)))]
            requested = [{"name": "f", "args": {}, "id": c} for c in calls]
            history.append(AIMessage("t" * draw(size), id=f"s{turn}.{step}", tool_calls=requested))
            history += [ToolMessage("r" * draw(size), tool_call_id=c, id=c) for c in calls]
        history.append(AIMessage("a" * draw(size), id=f"a{turn}"))
    return history, draw(st.integers(0, 300))


#: The trim_messages call trim_turns replaces.
LIKE_TURNS: dict[str, Any] = {"strategy": "last", "start_on": "human", "include_system": True}
LANGCHAIN_COUNTERS: dict[str, Any] = {
    "len": len,
    "count_tokens_approximately": count_tokens_approximately,
    "per-message": length,
    "approximate": "approximate",
}


@pytest.mark.parametrize("name", sorted(LANGCHAIN_COUNTERS))
@settings(max_examples=150)
@given(case=agreeing_histories())
def test_trim_turns_agrees_with_trim_messages(name: str, case: Any) -> None:
    history, budget = case
    counter = LANGCHAIN_COUNTERS[name]
    theirs = trim_messages(history, max_tokens=budget, token_counter=counter, **LIKE_TURNS)
    ours = trim_turns(history, max_tokens=budget, token_counter=counter)
    system = [m for m in history if isinstance(m, SystemMessage)]
    if TurnTrimmer(budget, token_counter=counter).report(system).tokens_after <= budget:
        assert ids(ours) == ids(theirs)
        assert all(a is b for a, b in zip(ours, theirs, strict=True))


def test_where_trim_turns_and_trim_messages_differ() -> None:
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
    # trim_messages keeps a result without its call and a turn's tail; the
    # turn trim keeps every system message and whole turns only.
    assert ids(theirs) == ["res", "late", "a1", "q2"]
    assert ids(trim_turns(history, max_tokens=4, token_counter=len)) == ["late", "q2"]
    everything = trim_turns(history, max_tokens=100, token_counter=len)
    assert ids(everything) == ["q1", "call", "res", "late", "a1", "q2"]
