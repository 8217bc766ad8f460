"""TurnTrimmer: the spec through LangChain messages, the Runnable protocol, configuration."""

from __future__ import annotations

import pickle
import warnings
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
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableField, RunnableLambda
from langchain_core.runnables.configurable import RunnableConfigurableFields
from langchain_core.tracers.context import collect_runs
from pydantic import SecretStr

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TiktokenCounter,
    TrimReport,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    trim_turns,
)
from langchain_turntrim._core import PINNED, START
from langchain_turntrim._counting import CachedCounter
from langchain_turntrim._messages import CHAT_ROLE_KINDS, TrimInput, message_kinds
from tests import strategies
from tests.helpers import arun, snapshot
from tests.lc import CALLS, LENGTH, message_histories
from tests.reference import reference_trim

HISTORY = [
    SystemMessage("s" * 20, id="s0"),
    HumanMessage("u" * 30, id="u1"),
    AIMessage("a" * 30, id="a1"),
    HumanMessage("u" * 25, id="u2"),
    AIMessage("a" * 25, id="a2"),
]


def ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


@pytest.fixture(params=sorted(CALLS))
def call(request: pytest.FixtureRequest) -> Any:
    """Each Runnable entry point, sync and async: tests share one body."""
    return CALLS[request.param]


# --- the spec, through every entry point ---------------------------------------


def test_spec_sample(call: Any) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=LENGTH)
    kept = call(trimmer, HISTORY)
    assert ids(kept) == ["s0", "u2", "a2"]
    assert all(k is HISTORY[i] for k, i in zip(kept, (0, 3, 4), strict=True))


@settings(max_examples=500)
@given(message_histories())
def test_equals_naive_reference(case: Any) -> None:
    records, messages, budget = case
    before = snapshot(messages)
    kept = TurnTrimmer(max_tokens=budget, token_counter=LENGTH).invoke(messages)
    assert ids(kept) == [r["id"] for r in reference_trim(records, budget)]
    assert all(any(k is m for m in messages) for k in kept)
    assert snapshot(messages) == before


def test_prompt_template_pipeline(call: Any) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "be brief"), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | TurnTrimmer(max_tokens=15, token_counter=LENGTH)
    out = call(chain, {"history": [("human", "a" * 5), ("ai", "b" * 5)], "question": "c" * 5})
    assert [m.content for m in out] == ["be brief", "c" * 5]


def test_chain_into_a_model(call: Any) -> None:
    seen: list[list[BaseMessage]] = []

    def spy(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(messages)
        return messages

    model = GenericFakeChatModel(messages=iter([AIMessage("ok")] * 4))
    chain = TurnTrimmer(max_tokens=70, token_counter=LENGTH) | spy | model
    reply = call(chain, HISTORY)
    assert reply.content == "ok"
    assert ids(seen[-1]) == ["s0", "u2", "a2"]


def test_accepts_every_message_like() -> None:
    history: TrimInput = [
        ("system", "rules"),
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        "and tomorrow?",
    ]
    kept = TurnTrimmer(max_tokens=10_000).invoke(history)
    assert [type(m).__name__ for m in kept] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert isinstance(kept[2], AIMessage)
    assert kept[2].tool_calls[0]["id"] == "c1"


def test_returns_original_objects_and_never_mutates(call: Any) -> None:
    history = [*HISTORY, AIMessageChunk(content="chunk", id="c")]
    before = snapshot(history)
    kept = call(TurnTrimmer(max_tokens=10_000, token_counter=LENGTH), history)
    assert len(kept) == len(history)
    assert all(a is b for a, b in zip(kept, history, strict=True))
    assert snapshot(history) == before


# --- roles ---------------------------------------------------------------------------


def test_roles() -> None:
    history = [
        AIMessage("orphan", id="x0"),
        ChatMessage(content="dev rules", role="developer", id="d0"),
        ChatMessage(content="hi", role="human", id="u1"),
        SystemMessage("mid", id="s1"),
        ChatMessage(content="hello", role="ai", id="a1"),
        ToolMessage("t", tool_call_id="c", id="t1"),
        ChatMessage(content="hi again", role="user", id="u2"),
        AIMessageChunk(content="partial", id="a2"),
        SystemMessage("dev", id="d1", additional_kwargs={"__openai_role__": "developer"}),
    ]
    trimmer = TurnTrimmer(max_tokens=10_000, token_counter=LENGTH)
    assert ids(trimmer.invoke(history)) == ["d0", "u1", "s1", "a1", "t1", "u2", "a2", "d1"]
    budget = len("dev rules") + len("mid") + len("dev") + len("hi again") + len("partial")
    small = TurnTrimmer(max_tokens=budget, token_counter=LENGTH)
    assert ids(small.invoke(history)) == ["d0", "s1", "u2", "a2", "d1"]


@pytest.mark.parametrize(
    ("history", "error", "fragment"),
    [
        ([HumanMessage("hi"), {"content": "no role"}], TypeError, "messages[1] is not a message"),
        ([None], TypeError, "messages[0] is not a message (NoneType"),
        ("just a string", TypeError, "expected a sequence of messages or a PromptValue, got str"),
        (HumanMessage("hi"), TypeError, "got HumanMessage"),
        (None, TypeError, "got NoneType"),
    ],
)
def test_bad_input(call: Any, history: Any, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as info:
        call(TurnTrimmer(max_tokens=100), history)
    assert fragment in str(info.value)


def test_error_messages_in_full() -> None:
    class Custom(BaseMessage):
        type: str = "custom"

    trimmer = TurnTrimmer(max_tokens=100)
    cases: list[tuple[list[BaseMessage], str]] = [
        (
            [HumanMessage("hi"), RemoveMessage(id="r1")],
            (
                "messages[1] (id 'r1') is a RemoveMessage: it is a state update for "
                "LangGraph's add_messages, not part of a conversation to trim"
            ),
        ),
        (
            [Custom(content="x", id="c0")],
            "messages[0] (id 'c0'): unsupported message type Custom",
        ),
        (
            [HumanMessage("hi"), ChatMessage(content="x", role="robot")],
            (
                "messages[1]: unknown ChatMessage role 'robot'; accepted roles are 'system', "
                "'developer', 'user', 'human', 'assistant', 'ai', 'tool', 'function'"
            ),
        ),
    ]
    for history, message in cases:
        with pytest.raises((TypeError, ValueError)) as info:
            trimmer.invoke(history)
        assert str(info.value) == message

    # A subclass is recognised by its base class, then remembered by type.
    class Shout(HumanMessage):
        pass

    for _ in range(2):
        assert ids(trimmer.invoke([AIMessage("x", id="o"), Shout(content="hey", id="s")])) == ["s"]


def test_orphans_count_in_tokens_before() -> None:
    history = [AIMessage("o" * 7, id="o1"), AIMessage("o" * 5, id="o2"), *HISTORY]
    report = TurnTrimmer(max_tokens=100, token_counter=LENGTH).trim_with_report(history)
    assert report.tokens_before == 130 + 12
    assert ids(report.dropped) == ["o1", "o2", "u1", "a1"]


# --- configuration --------------------------------------------------------------------


def test_a_none_token_counter_raises_at_construction() -> None:
    with pytest.raises(TypeError) as info:
        TurnTrimmer(max_tokens=10, token_counter=None)
    assert "got NoneType" in str(info.value)


def test_counter_is_resolved_once_and_cached() -> None:
    trimmer = TurnTrimmer(max_tokens=10, token_counter=LENGTH)
    assert isinstance(trimmer.counter, CachedCounter)
    # The field holds the planner the counter resolved to (with its cache).
    assert trimmer.token_counter is trimmer.planner
    assert trimmer.counter is trimmer.planner.counter
    no_cache = TurnTrimmer(max_tokens=10, token_counter=LENGTH, cache_size=0)
    assert not isinstance(no_cache.counter, CachedCounter)
    # Counting approximately is cheaper than a cache lookup: never cached.
    assert isinstance(TurnTrimmer(max_tokens=10).counter, ApproximateCounter)


def test_max_tokens_configurable_per_call_and_cache_shared() -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=LENGTH)
    configurable = trimmer.configurable_fields(
        max_tokens=ConfigurableField(id="max_tokens", name="Token budget")
    )
    assert ids(configurable.invoke(HISTORY)) == ["s0", "u2", "a2"]
    big = configurable.invoke(HISTORY, config={"configurable": {"max_tokens": 130}})
    assert ids(big) == ids(HISTORY)
    small = configurable.invoke(HISTORY, config={"configurable": {"max_tokens": 0}})
    assert ids(small) == ["s0"]
    assert isinstance(configurable, RunnableConfigurableFields)
    configured, _ = configurable._prepare({"configurable": {"max_tokens": 5}})
    assert isinstance(configured, TurnTrimmer)
    assert configured.counter is trimmer.counter


def test_configured_bad_budget_fails_clearly() -> None:
    configurable = TurnTrimmer(max_tokens=100).configurable_fields(
        max_tokens=ConfigurableField(id="max_tokens")
    )
    with pytest.raises(ValueError, match="max_tokens must be >= 0"):
        configurable.invoke(HISTORY, config={"configurable": {"max_tokens": -5}})


def test_name_and_schemas() -> None:
    trimmer = TurnTrimmer(max_tokens=10)
    assert trimmer.get_name() == "TurnTrimmer"
    with collect_runs() as runs:
        trimmer.invoke(HISTORY)
    assert [run.name for run in runs.traced_runs] == ["TurnTrimmer"]
    output = trimmer.get_output_jsonschema()
    assert output["type"] == "array"
    input_schema = trimmer.get_input_jsonschema()
    assert "anyOf" in input_schema
    assert trimmer.OutputType == list[BaseMessage]


class Starts(BaseCallbackHandler):
    """The name of every chain run that starts."""

    def __init__(self) -> None:
        self.names: list[str | None] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.names.append(kwargs.get("name"))


def _invoke(trimmer: TurnTrimmer, history: Any, config: Any, mode: str) -> Any:
    """``invoke`` or ``ainvoke`` with ``config``; ``"nested"``: from inside a
    RunnableLambda run with ``config``, which the trimmer's run inherits."""
    if mode == "sync":
        return trimmer.invoke(history, config)
    if mode == "async":
        return arun(trimmer.ainvoke(history, config))

    # Called without a config: the trimmer's run finds the enclosing one on its own.
    def inner(x: Any) -> Any:
        return trimmer.invoke(x)

    async def ainner(x: Any) -> Any:
        return await trimmer.ainvoke(x)

    outer = RunnableLambda(inner, afunc=ainner, name="outer")
    if mode == "nested":
        return outer.invoke(history, config)
    return arun(outer.ainvoke(history, config))


@pytest.mark.parametrize("mode", ["sync", "async", "nested", "nested-async"])
def test_every_watching_handler_sees_the_trimmer_run(mode: str) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=LENGTH)
    starts = Starts()
    kept = _invoke(trimmer, HISTORY, {"callbacks": [starts]}, mode)
    assert ids(kept) == ["s0", "u2", "a2"]
    assert starts.names[-1] == "TurnTrimmer"
    with collect_runs() as runs:
        assert _invoke(trimmer, HISTORY, None, mode) == kept
    assert runs.traced_runs[0].name == ("TurnTrimmer" if mode in ("sync", "async") else "outer")
    assert "TurnTrimmer" in [r.name for r in [*runs.traced_runs, *runs.traced_runs[0].child_runs]]


def test_a_call_no_handler_watches_runs_without_the_run_machinery(
    call: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unexpected(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run was made that nobody watches")

    monkeypatch.setattr(TurnTrimmer, "_call_with_config", unexpected)
    monkeypatch.setattr(TurnTrimmer, "_acall_with_config", unexpected)
    trimmer = TurnTrimmer(max_tokens=100, token_counter=LENGTH)
    assert ids(call(trimmer, HISTORY)) == ["s0", "u2", "a2"]
    config: Any = {"tags": ["t"], "metadata": {"k": 1}, "run_name": "r", "callbacks": []}
    assert ids(trimmer.invoke(HISTORY, config)) == ["s0", "u2", "a2"]
    assert ids(arun(trimmer.ainvoke(HISTORY, config))) == ["s0", "u2", "a2"]


# --- overflow -----------------------------------------------------------------------------


def test_overflow_drop_returns_only_systems(call: Any) -> None:
    trimmer = TurnTrimmer(max_tokens=60, token_counter=LENGTH)
    history = [*HISTORY, HumanMessage("u" * 41, id="u3")]
    assert ids(call(trimmer, history)) == ["s0"]


def test_overflow_raise(call: Any) -> None:
    trimmer = TurnTrimmer(max_tokens=60, token_counter=LENGTH, on_overflow="raise")
    history = [*HISTORY, HumanMessage("u" * 41, id="u3")]
    with pytest.raises(TurnTrimOverflowError) as info:
        call(trimmer, history)
    error = info.value
    assert isinstance(error, ContextOverflowError)
    assert (error.max_tokens, error.system_tokens, error.newest_turn_tokens) == (60, 20, 41)
    assert "newest turn (41 tokens)" in str(error)
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own error, just pickled
    assert (copy.max_tokens, copy.system_tokens, copy.newest_turn_tokens) == (60, 20, 41)


def test_overflow_raise_when_systems_alone_exceed() -> None:
    trimmer = TurnTrimmer(max_tokens=10, token_counter=LENGTH, on_overflow="raise")
    with pytest.raises(TurnTrimOverflowError) as info:
        trimmer.invoke([SystemMessage("s" * 11)])
    assert info.value.newest_turn_tokens == 0


def test_overflow_raise_not_raised_when_it_fits() -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=LENGTH, on_overflow="raise")
    assert ids(trimmer.invoke(HISTORY)) == ["s0", "u2", "a2"]
    assert trimmer.invoke([]) == []


# --- report --------------------------------------------------------------------------------


def test_trim_with_report() -> None:
    report = TurnTrimmer(max_tokens=100, token_counter=LENGTH).trim_with_report(HISTORY)
    assert isinstance(report, TrimReport)
    assert ids(report.kept) == ["s0", "u2", "a2"]
    assert report.dropped == HISTORY[1:3]
    assert report.dropped[0] is HISTORY[1]
    assert (report.dropped_turns, report.tokens_before, report.tokens_after) == (1, 130, 70)
    assert (report.max_tokens, report.system_tokens, report.budget_met) == (100, 20, True)


# --- for_model -----------------------------------------------------------------------------


class CountingFake(GenericFakeChatModel):
    """A fake chat model with a context window and an additive counter."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return 3 + sum(len(m.content) for m in messages)


def test_for_model_calibrates_a_model_without_a_local_tokenizer() -> None:
    model = CountingFake(messages=iter([]), profile={"max_input_tokens": 103})
    trimmer = TurnTrimmer.for_model(model, reserve_tokens=3)
    assert trimmer.max_tokens == 100
    assert isinstance(trimmer.counter, CalibratedCounter)
    assert trimmer.counter.observations == 0


def test_a_model_passed_as_token_counter_keeps_its_own_counting() -> None:
    model = CountingFake(messages=iter([]), profile={"max_input_tokens": 103})
    trimmer = TurnTrimmer(max_tokens=100, token_counter=model)
    kept = trimmer.invoke(HISTORY)
    assert ids(kept) == ["s0", "u2", "a2"]
    assert model.get_num_tokens_from_messages(kept) <= 100


@pytest.mark.parametrize(
    ("profile", "reserve", "budget"),
    [
        ({"max_input_tokens": 1000, "max_output_tokens": 100}, None, 900),
        ({"max_input_tokens": 1000, "max_output_tokens": 600}, None, 750),
        ({"max_input_tokens": 1000}, None, 750),
        ({"max_input_tokens": 1000, "max_output_tokens": 600}, 0, 1000),
        ({"max_input_tokens": 1000, "max_output_tokens": 100}, 10, 990),
    ],
)
def test_for_model_reserves_room_for_the_reply(profile: Any, reserve: Any, budget: int) -> None:
    model = CountingFake(messages=iter([]), profile=profile)
    assert TurnTrimmer.for_model(model, reserve_tokens=reserve).max_tokens == budget


def test_for_model_openai_uses_tiktoken(tiktoken_cache: Any) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4", api_key=SecretStr("sk-test"))
    trimmer = TurnTrimmer.for_model(model, reserve_tokens=1000)
    assert model.profile is not None
    assert trimmer.max_tokens == model.profile["max_input_tokens"] - 1000
    assert isinstance(trimmer.counter, CachedCounter)
    assert isinstance(trimmer.counter.counter, TiktokenCounter)


def test_openai_compatible_model_of_another_tokenizer_is_refused_at_construction(
    tiktoken_cache: Any,
) -> None:
    """An unknown model name on ChatOpenAI is not counted with a guessed
    cl100k_base, and langchain-openai cannot count it: refused when the
    trimmer is built (it used to fail at every trim), saying what to use."""
    from langchain_openai import ChatOpenAI

    from langchain_turntrim._counting import resolve_counter
    from langchain_turntrim._sizing import model_counter

    model = ChatOpenAI(model="deepseek-chat", base_url="http://localhost:9", api_key=SecretStr("k"))
    for build in (
        lambda: TurnTrimmer(max_tokens=100, token_counter=model),
        lambda: trim_turns([], max_tokens=100, token_counter=model),
        lambda: TurnTrimMiddleware(max_tokens=100, token_counter=model),
    ):
        with pytest.raises(ValueError, match="deepseek-chat") as info:
            build()
        assert "CalibratedCounter()" in str(info.value)
    assert isinstance(model_counter(model), CalibratedCounter)  # what for_model chooses
    known = resolve_counter(ChatOpenAI(model="gpt-4", api_key=SecretStr("sk-test")))
    assert isinstance(known, CachedCounter)
    assert known.counter == TiktokenCounter("gpt-4")


def test_a_model_left_with_langchains_default_counting_is_refused() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(ValueError, match="needs the transformers package"):
        TurnTrimmer(max_tokens=100, token_counter=model)
    counted = GenericFakeChatModel(
        messages=iter([]), custom_get_token_ids=lambda t: [len(w) for w in t.split()]
    )
    assert TurnTrimmer(max_tokens=100, token_counter=counted).trim([HumanMessage("a b")])


@pytest.mark.parametrize(
    ("profile", "reserve", "error", "fragment"),
    [
        ({}, 0, ValueError, "has no profile['max_input_tokens']"),
    ],
)
def test_for_model_errors(
    profile: Any, reserve: int, error: type[Exception], fragment: str
) -> None:
    model = CountingFake(messages=iter([]), profile=profile)
    with pytest.raises(error) as info:
        TurnTrimmer.for_model(model, reserve_tokens=reserve)
    assert fragment in str(info.value)


# --- exact budgets -----------------------------------------------------------------------


def _trimmable(message: BaseMessage) -> bool:
    return not isinstance(message, ChatMessage) or message.role in CHAT_ROLE_KINDS


@pytest.mark.slow
@settings(max_examples=200)
@given(
    messages=st.lists(strategies.messages().filter(_trimmable), max_size=12),
    budget=st.integers(0, 600),
)
def test_exact_budget_holds_by_chatopenai_count(
    tiktoken_cache: Any, messages: list[BaseMessage], budget: int
) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4", api_key=SecretStr("sk-test"))

    def exact_count(kept: list[BaseMessage]) -> int:
        with warnings.catch_warnings():  # ChatOpenAI warns about file blocks
            warnings.simplefilter("ignore")
            return model.get_num_tokens_from_messages(kept, allow_fetching_images=False)

    trimmer = TurnTrimmer(max_tokens=budget, token_counter=TiktokenCounter("gpt-4"))
    report = trimmer.trim_with_report(messages)
    exact = exact_count(report.kept)
    assert report.tokens_after == exact
    # The budget holds by ChatOpenAI's own count, unless only systems are left.
    assert exact <= budget or set(message_kinds(report.kept)) <= {PINNED}
    # Maximal: with the next older turn, the exact count would exceed the budget
    # (the cut is chosen on the history's messages, calls without results
    # included: leaving those out of what is sent only makes it smaller).
    if report.plan.kept_turns < report.plan.turns and report.budget_met:
        bigger = TurnTrimmer(max_tokens=10**9, token_counter=TiktokenCounter("gpt-4"))
        starts = [i for i, kind in enumerate(message_kinds(messages)) if kind == START]
        older = starts[report.plan.dropped_turns - 1]
        pinned = [messages[i] for i in report.plan.pinned if i < older]
        wider = pinned + messages[older:]
        with_older = bigger.trim_with_report(wider).plan.select(wider)
        assert exact_count(with_older) > budget
