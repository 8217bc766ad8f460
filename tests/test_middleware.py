"""TurnTrimMiddleware in real create_agent runs, and what every trim records."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest
from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.langchain import LangChainTracer
from langchain_core.tracers.schemas import Run
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_turntrim import (
    TiktokenCounter,
    TrimReport,
    TurnTrimmer,
    TurnTrimOverflowError,
    per_list,
    per_message,
)
from langchain_turntrim._core import plan_trim
from langchain_turntrim._counting import AdditiveCounter, CachedCounter, resolve_counter
from langchain_turntrim._middleware import TurnTrimMiddleware
from langchain_turntrim._state_middleware import TurnTrimStateMiddleware
from langchain_turntrim._tracing import (
    CACHE_EVENT_NAME,
    EVENT_NAME,
    METADATA_KEY,
    areport_trim,
    report_trim,
    trim_summary,
)
from langchain_turntrim._tracing import SUMMARY_KEYS as DOCUMENTED_KEYS

#: The middleware class of each mode.
MIDDLEWARE = {"request": TurnTrimMiddleware, "state": TurnTrimStateMiddleware}
SYSTEM = "You are a terse research assistant. Answer in one sentence."
BUDGET = 330
TURNS = 25


@tool
def lookup(query: str) -> str:
    """Look a query up in the knowledge base."""
    return f"found 3 documents about {query}"


class ToolCallingFake(BaseChatModel):
    """Answers a user message with a tool call and a tool result with text.

    Records every list of messages it is given; ``bind_tools`` keeps it itself.
    """

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "tool-calling-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        n = len(self.calls)
        last = messages[-1] if messages else None
        if isinstance(last, HumanMessage):
            call = {"name": "lookup", "args": {"query": last.text[:30]}, "id": f"call_{n}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"Answer {n}: the documents agree on the main point.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def question(i: int) -> HumanMessage:
    return HumanMessage(f"Question {i}: what do we know about topic {i}?" + " more" * (i % 4))


def lookup_agent(middleware: Any, model: BaseChatModel | None = None, **kwargs: Any) -> Any:
    """An agent with the ``lookup`` tool, SYSTEM as its prompt and ``middleware``."""
    return create_agent(
        model or ToolCallingFake(),
        tools=[lookup],
        system_prompt=SYSTEM,
        middleware=[middleware],
        **kwargs,
    )


# -- one test body, sync or async --------------------------------------------


def _invoke(agent: Any, inputs: Any, config: Any) -> Any:
    return agent.invoke(inputs, config)


def _ainvoke(agent: Any, inputs: Any, config: Any) -> Any:
    return asyncio.run(agent.ainvoke(inputs, config))


@pytest.fixture(params=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Callable[[Any, Any, Any], Any]:
    return {"invoke": _invoke, "ainvoke": _ainvoke}[request.param]


#: Before Python 3.11 an asyncio task cannot be given a context, so LangGraph
#: runs an async hook outside the run's context: the middleware finds no run
#: to send its custom events to (LangChain documents the same for
#: adispatch_custom_event without an explicit config). Strict: it fails once
#: that changes.
NO_ASYNC_RUN_CONTEXT = pytest.mark.xfail(
    sys.version_info < (3, 11),
    reason="async hooks run outside the run's context before Python 3.11",
    strict=True,
)


@pytest.fixture(params=["invoke", pytest.param("ainvoke", marks=NO_ASYNC_RUN_CONTEXT)])
def traced_run(request: pytest.FixtureRequest) -> Callable[[Any, Any, Any], Any]:
    """``run``, where the async path's custom events need the run's context."""
    return {"invoke": _invoke, "ainvoke": _ainvoke}[request.param]


# -- what a well-formed model input is ---------------------------------------


def check_model_input(
    messages: list[BaseMessage], count: Callable[[list[BaseMessage]], int], budget: int = BUDGET
) -> None:
    """The history the model is given: never corrupt, never over budget."""
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].text == SYSTEM
    assert isinstance(messages[1], HumanMessage), [m.type for m in messages]
    called: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            called.update(c["id"] for c in m.tool_calls if c["id"])
        elif isinstance(m, ToolMessage):
            assert m.tool_call_id in called, f"orphan ToolMessage {m.tool_call_id}"
            answered.add(m.tool_call_id)
    assert called == answered, f"tool calls without results: {called - answered}"
    assert count(messages) <= budget


def approximate_with_tools(messages: list[BaseMessage]) -> int:
    return count_tokens_approximately(messages, tools=[lookup])


def _length(messages: list[BaseMessage]) -> int:
    """A whole-list counter: text length, plus 4 per tool call."""
    return sum(len(m.text) + 4 * len(getattr(m, "tool_calls", ())) for m in messages)


def length_with_tools(messages: list[BaseMessage]) -> int:
    # A list counter that cannot count tools prices them as the approximate
    # estimate, scaled by its count of the messages over theirs.
    counted = _length(messages)
    scale = counted / count_tokens_approximately(messages)
    return counted + math.ceil(count_tokens_approximately([], tools=[lookup]) * scale)


#: token_counter, the same count of a whole model input (tools included), budget.
COUNTERS = {
    "approximate": ("approximate", approximate_with_tools, BUDGET),
    "whole-list": (per_list(_length), length_with_tools, 4 * BUDGET),
}


# -- the 25-turn agent -------------------------------------------------------


@pytest.mark.parametrize("counter_name", list(COUNTERS))
@pytest.mark.parametrize("mode", ["request", "state"])
def test_25_turn_agent_never_sees_a_broken_or_oversized_history(
    mode: str, counter_name: str, run: Callable[[Any, Any, Any], Any]
):
    token_counter, count, budget = COUNTERS[counter_name]
    model = ToolCallingFake()
    middleware = MIDDLEWARE[mode](budget, token_counter=token_counter)
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": f"{mode}-{counter_name}"}}
    sizes = []
    seen_ids: list[str] = []
    for i in range(TURNS):
        state = run(agent, {"messages": [question(i)]}, config)
        sizes.append(len(state["messages"]))
        seen_ids.extend(m.id for m in state["messages"] if m.id not in seen_ids)

    assert len(model.calls) == 2 * TURNS  # a tool call and an answer per turn
    for i, messages in enumerate(model.calls):
        check_model_input(messages, count, budget)
        # The newest question is always there, last or before its tool call.
        newest = [m for m in messages if isinstance(m, HumanMessage)][-1]
        assert newest.text == question(i // 2).text
    # Old turns were really dropped, and every call kept at least the newest turn.
    assert not any(m.text == question(0).text for m in model.calls[-1])
    assert max(len(c) for c in model.calls) < 4 * TURNS

    stored = agent.get_state(config).values["messages"]
    if mode == "request":
        assert sizes == [4 * (i + 1) for i in range(TURNS)]  # the state keeps everything
        assert stored[0].text == question(0).text
    else:
        assert sizes[-1] < 4 * TURNS // 3  # the state stopped growing
        assert max(sizes[TURNS // 2 :]) <= max(sizes[: TURNS // 2])
        stored_ids = {m.id for m in stored}
        removed = [i for i in seen_ids if i not in stored_ids]
        assert removed, "state mode removed nothing"
        assert stored[-1].id == seen_ids[-1]
        # The checkpoint itself no longer holds the removed messages.
        checkpoint = agent.checkpointer.get_tuple(config).checkpoint  # type: ignore[union-attr]
        ids = {m.id for m in checkpoint["channel_values"]["messages"]}
        assert ids == stored_ids
        assert ids.isdisjoint(removed)


# -- the request trim, unit by unit --------------------------------------------


def make_request(
    messages: list[BaseMessage], system: str | None = SYSTEM, tools: list[Any] | None = None
) -> ModelRequest[Any]:
    return ModelRequest(
        model=ToolCallingFake(),
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage(system) if system is not None else None,
        tools=tools or [],
    )


def history(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages.append(question(i))
        call = {"name": "lookup", "args": {"query": str(i)}, "id": f"c{i}", "type": "tool_call"}
        messages.append(AIMessage("", tool_calls=[call]))
        messages.append(ToolMessage(f"result {i}", tool_call_id=f"c{i}"))
        messages.append(AIMessage(f"Answer {i}."))
    return messages


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("system", [SYSTEM, None])
def test_a_bad_message_is_named_by_its_index_in_request_messages(
    warm: bool, system: str | None
) -> None:
    middleware = TurnTrimMiddleware(max_tokens=10_000)
    messages = history(2)
    if warm:  # planned twice: remembered, so only the new message is classified
        middleware.trim_request(make_request(messages, system))
        middleware.trim_request(make_request(messages, system))
    bad = [*messages, ChatMessage(content="hi", role="robot")]
    with pytest.raises(ValueError, match=r"^messages\[8\]: unknown ChatMessage role 'robot'"):
        middleware.trim_request(make_request(bad, system))


def test_trim_request_counts_the_system_message_and_the_tools_as_pinned():
    messages = history(6)
    request = make_request(messages, tools=[lookup])
    middleware = TurnTrimMiddleware(max_tokens=200)
    assert request.system_message is not None
    trimmed, report = middleware.trim_request(request)
    plan = report.plan
    assert trimmed is not request
    assert request.messages == messages  # the request is never mutated
    assert trimmed.system_message is request.system_message
    assert trimmed.tools == request.tools
    kept = trimmed.messages
    assert isinstance(kept[0], HumanMessage)
    assert kept == messages[-4 * plan.kept_turns :]
    assert report.kept == [request.system_message, *kept]
    assert report.dropped == messages[: -4 * plan.kept_turns]
    # The plan reads as the whole request, exactly as LangChain counts it.
    full = [request.system_message, *kept]
    assert plan.tokens_after == count_tokens_approximately(full, tools=[lookup]) <= 200
    everything = [request.system_message, *messages]
    assert plan.tokens_before == count_tokens_approximately(everything, tools=[lookup])
    assert plan.overhead_tokens == count_tokens_approximately([], tools=[lookup])
    assert plan.system_tokens == count_tokens_approximately([request.system_message])
    # One more turn would not have fit.
    older = messages[-4 * (plan.kept_turns + 1) :]
    assert count_tokens_approximately([request.system_message, *older], tools=[lookup]) > 200


def test_trim_request_returns_the_same_request_when_everything_fits():
    request = make_request(history(2), tools=[lookup])
    trimmed, report = TurnTrimMiddleware(max_tokens=10_000).trim_request(request)
    assert trimmed is request
    assert report.dropped == []
    assert report.plan.dropped_turns == 0


def test_trim_request_without_a_system_message():
    messages = [AIMessage("stray reply before any user message"), *history(3)]
    request = make_request(messages, system=None)
    trimmed, report = TurnTrimMiddleware(max_tokens=10_000).trim_request(request)
    # Messages before the first user message are discarded, as the spec says.
    assert trimmed.messages == messages[1:]
    assert report.dropped == messages[:1]
    assert trimmed.system_message is None


def test_langchain_1_0_requests_have_only_a_system_prompt():
    from types import SimpleNamespace

    from langchain_turntrim._middleware import _system_message

    assert _system_message(SimpleNamespace(system_prompt="Be brief.")).text == "Be brief."  # type: ignore[arg-type, union-attr]
    assert _system_message(SimpleNamespace(system_prompt=None)) is None  # type: ignore[arg-type]
    assert _system_message(make_request([], system=None)) is None


def test_overflow_drop_sends_only_the_system_message():
    request = make_request([question(1), AIMessage("x" * 4000)], tools=[lookup])
    middleware = TurnTrimMiddleware(max_tokens=100, on_overflow="drop")
    trimmed, report = middleware.trim_request(request)
    assert trimmed.messages == []
    assert report.plan.kept_turns == 0


def test_overflow_raise_names_the_pinned_cost_including_tools():
    request = make_request([question(1), AIMessage("x" * 4000)], tools=[lookup])
    middleware = TurnTrimMiddleware(max_tokens=100, on_overflow="raise")
    with pytest.raises(TurnTrimOverflowError) as caught:
        middleware.trim_request(request)
    pinned = count_tokens_approximately([SystemMessage(SYSTEM)], tools=[lookup])
    assert caught.value.system_tokens == pinned
    assert caught.value.max_tokens == 100


def test_tools_alone_over_budget_leave_only_the_system_message():
    request = make_request(history(1), tools=[lookup])
    middleware = TurnTrimMiddleware(max_tokens=5, on_overflow="drop")
    trimmed, report = middleware.trim_request(request)
    assert trimmed.messages == []
    assert not report.plan.budget_met
    assert report.plan.max_tokens == 5


def test_agent_with_on_overflow_raise_raises_a_context_overflow_error(run):
    agent = create_agent(
        ToolCallingFake(),
        tools=[lookup],
        system_prompt=SYSTEM,
        middleware=[TurnTrimMiddleware(max_tokens=60, on_overflow="raise")],
    )
    with pytest.raises(ContextOverflowError) as caught:
        run(agent, {"messages": [HumanMessage("why? " * 100)]}, None)
    assert isinstance(caught.value, TurnTrimOverflowError)


# -- count_tools -----------------------------------------------------------------


def test_count_tools_approximate_is_langchains_own_estimate():
    counter = resolve_counter("approximate")
    assert isinstance(counter, AdditiveCounter)
    assert counter.count_tools([]) == 0
    assert counter.count_tools([lookup]) == count_tokens_approximately([], tools=[lookup])
    provider_tool = {"type": "web_search_preview"}
    both = count_tokens_approximately([], tools=[lookup, provider_tool])
    assert counter.count_tools([lookup, provider_tool]) == both


def test_count_tools_tiktoken_uses_openais_rendering_through_the_cache(tiktoken_cache):
    counter = TiktokenCounter("gpt-4")
    # func_init 10, "lookup:Look a query up in the knowledge base", prop_init 3,
    # prop_key 3, "query:string", func_end 12 (the OpenAI cookbook's rendering).
    enc = counter.encoding
    one = 10 + len(enc.encode("lookup:Look a query up in the knowledge base")) + 3
    one += 3 + len(enc.encode("query:string"))
    assert counter.count_tools([lookup]) == one + 12
    cached = resolve_counter(counter)
    assert isinstance(cached, AdditiveCounter)
    assert cached.count_tools([lookup, lookup]) == 2 * one + 12


def test_middleware_reserves_tiktokens_tool_price_for_each_call(tiktoken_cache):
    counter = TiktokenCounter("gpt-4")
    request = make_request(history(3), tools=[lookup])
    middleware = TurnTrimMiddleware(max_tokens=10_000, token_counter=counter)
    _, report = middleware.trim_request(request)
    tools = counter.count_tools([lookup])
    assert report.plan.overhead_tokens == counter.overhead + tools
    assert request.system_message is not None
    full = [request.system_message, *request.messages]
    assert report.plan.tokens_after == counter.count(full) + tools


def test_count_tools_token_counter_counts_each_schema_as_a_system_message():
    counter = resolve_counter(per_message(lambda m: len(str(m.content))))
    assert isinstance(counter, AdditiveCounter)
    schema = json.dumps(convert_to_openai_tool(lookup), ensure_ascii=False)
    assert counter.count_tools([lookup, lookup]) == 2 * len(schema)


def test_a_list_counter_is_sent_the_tools_as_tools_never_as_messages():
    seen: list[tuple[list[BaseMessage], Any]] = []
    request = [SystemMessage("rules"), HumanMessage("hi")]

    def count(messages: list[BaseMessage], tools: Any = None) -> int:
        seen.append((messages, tools))
        return 7 * len(messages) + 10 * len(tools or ())

    # Without takes_tools, the tools are priced in the function's units.
    plain = per_list(count)
    scale = 14 / count_tokens_approximately(request)
    estimate = math.ceil(count_tokens_approximately([], tools=[lookup, lookup]) * scale)
    assert plain.count(request, [lookup, lookup]) == 14 + estimate
    assert seen == [(request, None)]
    # With takes_tools, they are passed as the request's tools.
    seen.clear()
    assert per_list(count, takes_tools=True).count(request, [lookup, lookup]) == 14 + 20
    assert seen == [(request, [lookup, lookup])]


# -- construction --------------------------------------------------------------


def test_modes_name_and_hooks():
    request_mode = TurnTrimMiddleware(100)
    state_mode = TurnTrimStateMiddleware(100, token_counter="approximate", on_overflow="drop")
    assert type(request_mode) is TurnTrimMiddleware
    assert type(state_mode) is TurnTrimStateMiddleware
    assert request_mode.mode == "request"
    assert state_mode.mode == "state"
    assert isinstance(state_mode, TurnTrimMiddleware)
    assert request_mode.name == "TurnTrimMiddleware"
    assert state_mode.name == "TurnTrimStateMiddleware"
    # Only the state mode adds a before_model node to the agent's graph.
    nodes = set(create_agent(ToolCallingFake(), middleware=[request_mode]).get_graph().nodes)
    assert not any(node.endswith(".before_model") for node in nodes)
    nodes = set(create_agent(ToolCallingFake(), middleware=[state_mode]).get_graph().nodes)
    assert "TurnTrimStateMiddleware.before_model" in nodes
    assert isinstance(state_mode.trimmer, TurnTrimmer)
    assert state_mode.max_tokens == 100
    assert repr(state_mode).startswith("TurnTrimStateMiddleware(max_tokens=100,")


def test_subclasses_keep_their_overrides_in_both_modes():
    class NamedTrim(TurnTrimStateMiddleware):
        calls = 0

        def wrap_model_call(self, request, handler):
            NamedTrim.calls += 1
            return super().wrap_model_call(request, handler)

    state_mode = NamedTrim(1_000)
    assert type(state_mode) is NamedTrim
    assert state_mode.name == "NamedTrim"
    agent = create_agent(ToolCallingFake(), tools=[lookup], middleware=[state_mode])
    assert "NamedTrim.before_model" in agent.get_graph().nodes
    agent.invoke({"messages": [question(1)]})
    assert NamedTrim.calls == 2

    class RequestTrim(TurnTrimMiddleware):
        pass

    assert RequestTrim(1_000).name == "RequestTrim"
    assert (
        "RequestTrim.before_model"
        not in create_agent(ToolCallingFake(), middleware=[RequestTrim(1_000)]).get_graph().nodes
    )


def test_for_model_sizes_the_budget_from_the_profile(tiktoken_cache):
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4", api_key="sk-placeholder")  # type: ignore[arg-type]
    middleware = TurnTrimStateMiddleware.for_model(model, reserve_tokens=1000)
    assert type(middleware) is TurnTrimStateMiddleware
    assert middleware.max_tokens == 8192 - 1000
    assert middleware.mode == "state"
    assert isinstance(middleware.trimmer.counter, CachedCounter)
    assert middleware.trimmer.counter.counter == TiktokenCounter("gpt-4")


def test_importing_without_langchain_says_how_to_install(monkeypatch: pytest.MonkeyPatch):
    for name in list(sys.modules):
        if name == "langchain" or name.startswith(("langchain.", "langchain_turntrim._middleware")):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "langchain_turntrim._middleware")
    with pytest.raises(ImportError, match=r"pip install 'langchain-turntrim\[agents\]'") as info:
        importlib.import_module("langchain_turntrim._middleware")
    # From a checkout or a built wheel, the name alone would not find the extra.
    assert "from a checkout: pip install -e '.[agents]'" in str(info.value)
    assert "from a wheel: pip install 'FILE.whl[agents]'" in str(info.value)


# -- the state mode ------------------------------------------------------------


def test_state_update_removes_dropped_turns_but_never_the_newest():
    messages = history(5)
    for i, m in enumerate(messages):
        m.id = f"m{i}"
    middleware = TurnTrimStateMiddleware(max_tokens=120)
    update = middleware.state_update(messages)
    assert update is not None
    removed = [m.id for m in update["messages"]]
    kept_from = len(removed)
    assert removed == [f"m{i}" for i in range(kept_from)]
    assert isinstance(messages[kept_from], HumanMessage)
    assert count_tokens_approximately(messages[kept_from:]) <= 120
    # Nothing to remove: None, not an empty update.
    assert middleware.state_update(messages[kept_from:]) is None
    # The newest turn stays in the state even when it alone is over budget.
    huge = [*messages, HumanMessage("big " * 500, id="new")]
    update = TurnTrimStateMiddleware(max_tokens=50).state_update(huge)
    assert update is not None
    assert [m.id for m in update["messages"]] == [m.id for m in messages]


def test_state_mode_keeps_the_newest_turn_when_it_does_not_fit(run):
    model = ToolCallingFake()
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt=SYSTEM,
        middleware=[TurnTrimStateMiddleware(max_tokens=60, on_overflow="drop")],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "huge"}}
    big = HumanMessage("why? " * 100)
    state = run(agent, {"messages": [big]}, config)
    assert state["messages"][0].text == big.text  # still in the state
    assert [m.type for m in model.calls[0]] == ["system"]  # on_overflow="drop"


# -- observability -------------------------------------------------------------


class Recorder(BaseTracer):
    """Keeps every traced run (as a tree) and every custom event."""

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[Run] = []
        self.events: list[tuple[str, Any, UUID]] = []

    def _persist_run(self, run: Run) -> None:
        self.roots.append(run)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data, run_id))


def walk(runs: list[Run]) -> list[Run]:
    found: list[Run] = []
    for r in runs:
        found.append(r)
        found.extend(walk(r.child_runs))
    return found


SUMMARY_KEYS = {
    "max_tokens",
    "tokens_before",
    "tokens_after",
    "messages_before",
    "messages_after",
    "dropped_messages",
    "turns",
    "dropped_turns",
    "system_tokens",
    "budget_met",
    "start_moved",
}


@pytest.mark.parametrize("mode", ["request", "state"])
def test_middleware_trims_show_in_the_trace_and_as_events(mode: str, traced_run):
    run = traced_run
    model = ToolCallingFake()
    agent = lookup_agent(MIDDLEWARE[mode](max_tokens=BUDGET), model, checkpointer=InMemorySaver())
    recorder = Recorder()
    config = {"configurable": {"thread_id": "t"}, "callbacks": [recorder]}
    for i in range(8):
        run(agent, {"messages": [question(i)]}, config)

    trims = [(name, data, rid) for name, data, rid in recorder.events if name == "turntrim"]
    requests = [data for _, data, _ in trims if data["mode"] == "request"]
    caches = [(data, rid) for name, data, rid in recorder.events if name == CACHE_EVENT_NAME]
    assert {name for name, _, _ in recorder.events} == {"turntrim", CACHE_EVENT_NAME}
    assert len(requests) == len(caches) == len(model.calls) == 16
    for data, messages in zip(requests, model.calls, strict=True):
        assert data.keys() >= SUMMARY_KEYS
        # The numbers are the model input's, as LangChain counts it.
        assert data["tokens_after"] == approximate_with_tools(messages) <= data["max_tokens"]
        assert data["messages_after"] == len(messages) - 1  # the system message aside
        assert data["tool_tokens"] == count_tokens_approximately([], tools=[lookup])
    assert any(data["dropped_turns"] for data in requests)
    # Without LangSmith, the trim is in the metadata of the agent's model node run.
    runs = walk(recorder.roots)
    traced = [r for r in runs if "turntrim" in r.metadata]
    model_runs = [r for r in traced if r.name == "model"]
    assert [r.metadata["turntrim"] for r in model_runs] == requests
    events_by_run = {rid: data for _, data, rid in trims}
    assert all(events_by_run[r.id] == r.metadata["turntrim"] for r in traced)
    # What each call's cache did, after it, on the same model run.
    assert [r.metadata[CACHE_EVENT_NAME] for r in model_runs] == [data for data, _ in caches]
    assert [rid for _, rid in caches] == [r.id for r in model_runs]
    assert caches[0][0]["cold"] is True
    assert not any(data["cold"] for data, _ in caches[1:])  # calls within the TTL
    if mode == "state":
        hook_runs = [r for r in traced if r.name == "TurnTrimStateMiddleware.before_model"]
        assert len(hook_runs) == 16
        assert any(r.metadata["turntrim"]["removed_from_state"] for r in hook_runs)
    # Metadata is set per run, never on a dict other runs share.
    assert not any("turntrim" in r.metadata for r in runs if r.name in ("tools", "lookup"))


@NO_ASYNC_RUN_CONTEXT
def test_middleware_trims_stream_as_custom_events():
    agent = lookup_agent(TurnTrimMiddleware(max_tokens=BUDGET))

    async def collect() -> list[Any]:
        # Plain dicts, as users write them (LangGraph types inputs as AnyMessage lists).
        inputs: Any = {"messages": [*history(6), question(6)]}
        return [e async for e in agent.astream_events(inputs, version="v2")]

    events = [e for e in asyncio.run(collect()) if e["event"] == "on_custom_event"]
    # One trim before each model call, and what its cache did after it.
    assert [e["name"] for e in events] == ["turntrim", CACHE_EVENT_NAME] * 2
    assert events[0]["data"]["dropped_turns"] > 0
    assert events[0]["metadata"]["langgraph_node"] == "model"


@pytest.mark.parametrize("mode", ["request", "state"])
def test_middleware_builds_no_event_nobody_would_receive(
    mode: str, traced_run, monkeypatch: pytest.MonkeyPatch
):
    """Inside a run no handler watches, no event is dispatched (not even to nobody);
    one handler then gets every event, once per trim."""
    run = traced_run
    dispatched: list[str] = []
    for cls in (CallbackManager, AsyncCallbackManager):
        original = cls.on_custom_event

        def record(self: Any, name: str, *args: Any, _original: Any = original, **kw: Any) -> Any:
            dispatched.append(name)
            return _original(self, name, *args, **kw)

        monkeypatch.setattr(cls, "on_custom_event", record)
    model = ToolCallingFake()
    agent = lookup_agent(MIDDLEWARE[mode](max_tokens=BUDGET), model)
    inputs: Any = {"messages": [*history(6), question(6)]}
    run(agent, inputs, None)
    assert len(model.calls) == 2
    assert dispatched == []
    recorder = Recorder()
    run(agent, inputs, {"callbacks": [recorder]})
    # The state hook reports its deletions too; after each call, its cache figures.
    per_call = ["turntrim"] * (2 if mode == "state" else 1) + [CACHE_EVENT_NAME]
    assert [name for name, _, _ in recorder.events] == per_call * 2
    assert dispatched == per_call * 2


def test_middleware_trims_show_in_langsmith(monkeypatch: pytest.MonkeyPatch):
    """With LangChainTracer, the summary is in the metadata LangSmith receives."""
    from langsmith import Client

    for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)

    class OfflineClient(Client):
        def __init__(self) -> None:
            super().__init__(api_url="http://127.0.0.1:9", api_key="test", auto_batch_tracing=False)
            self.updates: list[dict[str, Any]] = []

        def create_run(self, *args: Any, **kwargs: Any) -> None:
            pass

        def update_run(self, run_id: Any, **kwargs: Any) -> None:
            self.updates.append(kwargs)

    client = OfflineClient()
    tracer = LangChainTracer(client=client, project_name="test")
    agent = lookup_agent(TurnTrimMiddleware(max_tokens=BUDGET))
    agent.invoke({"messages": [*history(6), question(6)]}, {"callbacks": [tracer]})
    tracer.wait_for_futures()
    sent = {
        u["name"]: (u.get("extra") or {}).get("metadata", {}).get("turntrim")
        for u in client.updates
    }
    # The middleware's own span in LangSmith carries the numbers.
    summary = sent["TurnTrimMiddleware.wrap_model_call"]
    assert summary is not None
    assert summary.keys() >= SUMMARY_KEYS
    assert summary["dropped_turns"] > 0


def test_summary_keys_are_the_documented_ones():
    assert set(DOCUMENTED_KEYS) == SUMMARY_KEYS
    assert EVENT_NAME == METADATA_KEY == "turntrim"


def test_report_trim_outside_a_run_only_logs(caplog: pytest.LogCaptureFixture):
    records = [
        {"role": "system", "tokens": 5},
        {"role": "user", "tokens": 50},
        {"role": "user", "tokens": 10},
    ]
    report = TrimReport(records, plan_trim(records, 30))
    with caplog.at_level(logging.DEBUG, logger="langchain_turntrim"):
        summary = report_trim(report, extra={"mode": "request"})
        assert asyncio.run(areport_trim(report)) == trim_summary(report)
    assert summary == {**trim_summary(report), "mode": "request"}
    assert summary["dropped_turns"] == 1
    assert summary["dropped_messages"] == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "langchain_turntrim"]
    assert lines == [
        "trimmed 3 -> 2 messages: dropped 1 of 2 turns, tokens 65 -> 15, budget 30 (mode=request)",
        "trimmed 3 -> 2 messages: dropped 1 of 2 turns, tokens 65 -> 15, budget 30",
    ]


# -- TurnTrimmer through report_trim: needs the proposed _runnable.py change ----


@pytest.mark.parametrize("call", ["invoke", "ainvoke"])
def test_turntrimmer_records_the_trim_on_its_own_run(call: str):
    trimmer = TurnTrimmer(max_tokens=40)
    messages = history(4)
    recorder = Recorder()
    config = {"callbacks": [recorder]}
    if call == "invoke":
        kept = trimmer.invoke(messages, config)  # type: ignore[arg-type]
    else:
        kept = asyncio.run(trimmer.ainvoke(messages, config))  # type: ignore[arg-type]
    (root,) = recorder.roots
    assert root.name == "TurnTrimmer"
    expected = trim_summary(trimmer.report(messages))
    assert root.metadata["turntrim"] == expected
    assert expected["messages_after"] == len(kept)
    assert recorder.events == [("turntrim", expected, root.id)]


def test_turntrimmer_trim_logs_one_line(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.DEBUG, logger="langchain_turntrim"):
        TurnTrimmer(max_tokens=40).trim(history(4))
    assert len([r for r in caplog.records if r.name == "langchain_turntrim"]) == 1


def test_the_package_exports_the_middleware_lazily(monkeypatch: pytest.MonkeyPatch):
    import langchain_turntrim

    assert langchain_turntrim.TurnTrimMiddleware is TurnTrimMiddleware
    assert "TurnTrimMiddleware" in dir(langchain_turntrim)
    # Public where LangChain's agents are installed.
    assert {"TurnTrimMiddleware", "TurnTrimStateMiddleware"} <= set(langchain_turntrim.__all__)
    assert langchain_turntrim.trim_update is not None
    # Without langchain the package still imports; the middleware says how to install it.
    for name in list(sys.modules):
        if name == "langchain" or name.startswith("langchain."):
            monkeypatch.setitem(sys.modules, name, None)
        elif name == "langchain_turntrim" or name.startswith("langchain_turntrim."):
            monkeypatch.delitem(sys.modules, name)
    fresh = importlib.import_module("langchain_turntrim")
    with pytest.raises(ImportError, match=r"pip install 'langchain-turntrim\[agents\]'"):
        _ = fresh.TurnTrimMiddleware
    # ... and `import *` needs no extra: the middleware is not in __all__ then.
    assert "TurnTrimMiddleware" not in fresh.__all__
    namespace: dict[str, Any] = {}
    exec("from langchain_turntrim import *", namespace)  # noqa: S102 - a fixed statement
    assert "TurnTrimmer" in namespace


def test_the_state_keeps_a_greeting_while_every_turn_fits():
    greeting = AIMessage("Hello! How can I help?", id="greet")
    history = [greeting, HumanMessage("hi", id="u1"), AIMessage("hello", id="a1")]
    middleware = TurnTrimStateMiddleware(100_000)
    assert middleware.state_update(history) is None
    # It is never sent to the model (it belongs to no turn) ...
    _, report = middleware.trim_request(make_request(history))
    assert greeting not in report.kept
    # ... and it leaves the state with the first dropped turn.
    longer = [*history, HumanMessage("x" * 400, id="u2")]
    update = TurnTrimStateMiddleware(count_tokens_approximately(longer[-1:])).state_update(longer)
    assert update is not None
    assert [m.id for m in update["messages"]] == ["greet", "u1", "a1"]
