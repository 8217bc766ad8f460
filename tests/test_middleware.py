"""TurnTrimMiddleware and TurnTrimStateMiddleware in real ``create_agent`` runs:
what each model call is sent, what the state keeps, how a middleware is sized
for its model, what every trim records, and one middleware shared by threads
and coroutines."""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import cycle
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.callbacks import AsyncCallbackManager, BaseCallbackHandler, CallbackManager
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import GenericFakeChatModel
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
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_turntrim import (
    CalibratedCounter,
    TiktokenCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    TurnTrimStateMiddleware,
    per_list,
)
from tests.conftest import NO_ASYNC_RUN_CONTEXT

#: A system prompt and a tool of a few hundred tokens each: what a trim that
#: forgot them would get wrong.
SYSTEM = "You are a careful research assistant: cite every source you use. " * 25
MIDDLEWARES = {"request": TurnTrimMiddleware, "state": TurnTrimStateMiddleware}


@tool
def lookup(query: str) -> str:
    """Look a query up in the knowledge base. It searches every archive, ranks the
    records by relevance and recency, and returns the best passages, each with its
    source, its date and the archive it came from, so that the answer can cite them.
    Use it once per question; ask again with other words when nothing is found."""
    return f"found 3 documents about {query}: " + "the records agree. " * (len(query) % 9 + 3)


TOOLS: list[BaseTool | dict[str, Any]] = [lookup]


def approximate(messages: list[BaseMessage]) -> int:
    """LangChain's estimate of a whole request, the tools' schemas included."""
    return count_tokens_approximately(messages, tools=TOOLS)


class FakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that takes tools and records what each call is
    sent. Each reply is a fresh copy of the next cycled one, with its own id and
    tool call ids, reporting ``usage(messages)`` input tokens when given."""

    disable_streaming: bool = True
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    usage: Callable[[list[BaseMessage]], int] | None = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        n = len(self.calls)
        reply = super()._generate(messages, *args, **kwargs).generations[0].message
        assert isinstance(reply, AIMessage)
        calls = [
            {**c, "id": f"{c['id']}{n}", "args": {"query": f"topic {n}"}} for c in reply.tool_calls
        ]
        update: dict[str, Any] = {"id": f"ai{n}", "tool_calls": calls}
        if self.usage is not None:
            tokens = self.usage(messages)
            update["usage_metadata"] = {
                "input_tokens": tokens,
                "output_tokens": 5,
                "total_tokens": tokens + 5,
            }
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy(update=update))])


def researcher(**fields: Any) -> FakeModel:
    """A model that answers a question with a ``lookup`` call, then the result
    with an answer."""
    call = {"name": "lookup", "args": {}, "id": "call", "type": "tool_call"}
    replies = [AIMessage("", tool_calls=[call]), AIMessage("The records agree. " * 8)]
    return FakeModel(messages=cycle(replies), **fields)


class Spy(AgentMiddleware):
    """The outermost middleware: the messages each model call's request held
    before the trim."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[list[BaseMessage]] = []

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.requests.append(list(request.messages))
        return handler(request)

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        self.requests.append(list(request.messages))
        return await handler(request)


def make_agent(middleware: AgentMiddleware, model: FakeModel, *extra: AgentMiddleware) -> Any:
    return create_agent(
        model,
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[*extra, middleware],
        checkpointer=InMemorySaver(),
    )


def question(i: int, words: int | None = None) -> HumanMessage:
    more = " and more" * (words if words is not None else 5 + 7 * (i % 5))
    return HumanMessage(
        f"Question {i}: what do the archives say about topic {i}{more}?", id=f"h{i}"
    )


# -- one test body, sync or async --------------------------------------------------------


def _invoke(agent: Any, inputs: Any, config: Any) -> Any:
    return agent.invoke(inputs, config)


def _ainvoke(agent: Any, inputs: Any, config: Any) -> Any:
    return asyncio.run(agent.ainvoke(inputs, config))


Run = Callable[[Any, Any, Any], Any]


@pytest.fixture(params=[_invoke, _ainvoke], ids=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Run:
    return request.param  # type: ignore[no-any-return]


#: Before Python 3.11 an asyncio task cannot be given a context, so LangGraph
#: runs an async hook outside the run's context: no run to send an event to.
@pytest.fixture(params=[_invoke, pytest.param(_ainvoke, marks=NO_ASYNC_RUN_CONTEXT)])
def traced_run(request: pytest.FixtureRequest) -> Run:
    return request.param  # type: ignore[no-any-return]


def converse(agent: Any, run: Run, questions: list[HumanMessage], thread: str = "t") -> list[Any]:
    """Ask each question in turn on one thread; the state after each run."""
    config = {"configurable": {"thread_id": thread}}
    return [run(agent, {"messages": [q]}, config)["messages"] for q in questions]


# -- what every call is sent, and what the state keeps -----------------------------------


def _whole_list(messages: list[BaseMessage], tools: Any = ()) -> int:
    """A counter of whole requests only, 30% above the estimate."""
    return count_tokens_approximately(messages, tools=tools) * 13 // 10


COUNTERS: dict[str, tuple[Any, Callable[[list[BaseMessage]], int]]] = {
    "approximate": ("approximate", approximate),
    "whole-list": (per_list(_whole_list, takes_tools=True), lambda ms: _whole_list(ms, TOOLS)),
}
BUDGET = 1_800


def check_call(sent: list[BaseMessage], full: list[BaseMessage], count: Any, budget: int) -> None:
    """A call sent the system prompt and the newest whole turns of ``full`` that
    fit ``budget`` with the tools: one turn more would not have fit."""
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].text == SYSTEM
    body = sent[1:]
    assert isinstance(body[0], HumanMessage)
    assert body == full[len(full) - len(body) :]
    assert count(sent) <= budget
    cut = len(full) - len(body)
    if cut:
        previous = max(i for i in range(cut) if isinstance(full[i], HumanMessage))
        assert count([sent[0], *full[previous:]]) > budget


@pytest.mark.parametrize("counter", list(COUNTERS))
@pytest.mark.parametrize("mode", list(MIDDLEWARES))
def test_every_call_sends_the_system_prompt_tools_and_newest_turns_that_fit(
    mode: str, counter: str, run: Run
) -> None:
    token_counter, count = COUNTERS[counter]
    model, spy = researcher(), Spy()
    agent = make_agent(MIDDLEWARES[mode](BUDGET, token_counter=token_counter), model, spy)
    questions = [question(i) for i in range(20)]
    states = converse(agent, run, questions)

    assert len(model.calls) == 2 * len(questions)  # a tool call and an answer per question
    for k, (sent, full) in enumerate(zip(model.calls, spy.requests, strict=True)):
        check_call(sent, full, count, BUDGET)
        assert [m for m in sent if isinstance(m, HumanMessage)][-1] is questions[k // 2]
    assert questions[0] not in model.calls[-1]  # old turns were really left out

    stored = agent.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    if mode == "request":  # the state keeps every message
        assert [len(s) for s in states] == [4 * (i + 1) for i in range(len(questions))]
        assert stored[0] is questions[0] or stored[0].id == "h0"
        return
    # The state holds what the run's last call was sent, and its answer: the
    # dropped turns are deleted by that call's own decision.
    for k, state in enumerate(states):
        sent = model.calls[2 * k + 1][1:]
        assert [m.id for m in state] == [*(m.id for m in sent), f"ai{2 * k + 2}"]
    sizes = [len(s) for s in states]
    assert max(sizes[10:]) <= max(sizes[:10]) < 4 * 10  # it stopped growing
    checkpoint = agent.checkpointer.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint
    assert [m.id for m in checkpoint["channel_values"]["messages"]] == [m.id for m in stored]


def _key(message: BaseMessage) -> str | None:
    return message.tool_call_id if isinstance(message, ToolMessage) else message.id


#: Question lengths (in repeated words) of the conversations compared.
LENGTHS = {
    "even": [12] * 24,
    "ragged": [(i * 37) % 110 + 1 for i in range(24)],
    "growing": [i * 6 for i in range(24)],
}


@pytest.mark.parametrize("lengths", list(LENGTHS))
@pytest.mark.parametrize("trim_to", [None, 1_700, "auto"])
def test_the_state_middleware_sends_what_the_request_middleware_sends(
    trim_to: int | str | None, lengths: str, run: Run
) -> None:
    """The deletion is the request's own decision, with the system prompt and
    the tools counted: the state middleware sends every call what the request
    middleware sends, and never deletes a message a later call still sends."""
    questions = [question(i, words) for i, words in enumerate(LENGTHS[lengths])]
    models, histories = {}, {}
    for mode, middleware in MIDDLEWARES.items():
        models[mode] = researcher()
        agent = make_agent(middleware(3_400, trim_to=trim_to), models[mode])
        histories[mode] = converse(agent, run, questions)
    sent = {
        mode: [[_key(m) for m in call] for call in model.calls] for mode, model in models.items()
    }
    assert sent["state"] == sent["request"]
    assert len(histories["state"][-1]) < len(histories["request"][-1])  # it deleted
    for r, (full, kept) in enumerate(zip(histories["request"], histories["state"], strict=True)):
        existing, stored = {_key(m) for m in full}, {_key(m) for m in kept}
        for call in sent["request"][2 * r + 2 :]:
            assert existing.intersection(call) <= stored


# -- the request, call by call -----------------------------------------------------------


def history(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        call = {"name": "lookup", "args": {"query": str(i)}, "id": f"c{i}", "type": "tool_call"}
        messages += [
            question(i),
            AIMessage("", tool_calls=[call], id=f"a{i}"),
            ToolMessage(f"result {i} " * 10, tool_call_id=f"c{i}", id=f"t{i}"),
            AIMessage(f"Answer {i}.", id=f"r{i}"),
        ]
    return messages


def request_of(
    messages: list[BaseMessage], system: str | None = SYSTEM, tools: Any = TOOLS
) -> ModelRequest:
    return ModelRequest(
        model=researcher(),
        messages=messages,  # type: ignore[arg-type]
        system_message=SystemMessage(system) if system is not None else None,
        tools=list(tools),
    )


def test_trim_request_counts_the_system_prompt_and_tools_beside_the_kept_turns() -> None:
    messages = history(8)
    request = request_of(messages)
    trimmed, report = TurnTrimMiddleware(max_tokens=1_200).trim_request(request)
    assert request.messages == messages  # the request is never changed
    assert trimmed.system_message is request.system_message
    assert trimmed.tools == request.tools
    kept = trimmed.messages
    assert 0 < len(kept) < len(messages)
    assert kept == messages[-len(kept) :]
    assert report.kept == [request.system_message, *kept]
    assert report.dropped == messages[: -len(kept)]
    assert report.tokens_after == approximate(report.kept) <= 1_200
    assert report.tool_tokens == approximate([])
    assert request.system_message is not None
    assert approximate([request.system_message, *messages[-len(kept) - 4 :]]) > 1_200


def test_trim_request_returns_the_request_itself_when_everything_fits() -> None:
    request = request_of(history(2))
    trimmed, report = TurnTrimMiddleware(max_tokens=100_000).trim_request(request)
    assert trimmed is request
    assert report.dropped == []
    assert not report.changed


def test_trim_request_without_a_system_prompt_discards_what_precedes_the_first_question() -> None:
    messages = [AIMessage("Hello! How can I help?", id="greet"), *history(3)]
    trimmed, report = TurnTrimMiddleware(max_tokens=100_000).trim_request(
        request_of(messages, system=None)
    )
    assert trimmed.system_message is None
    assert trimmed.messages == messages[1:]
    assert report.dropped == messages[:1]


@pytest.mark.parametrize("system", [SYSTEM, None])
def test_a_bad_message_is_named_by_its_index_in_the_request_s_messages(system: str | None) -> None:
    middleware = TurnTrimMiddleware(max_tokens=10_000)
    messages = history(2)
    middleware.trim_request(request_of(messages, system))  # its messages remembered
    bad = [*messages, ChatMessage(content="hi", role="robot")]
    with pytest.raises(ValueError, match=r"^messages\[8\]: unknown ChatMessage role 'robot'"):
        middleware.trim_request(request_of(bad, system))


def test_what_happens_when_the_newest_turn_alone_is_over_budget() -> None:
    request = request_of([question(1), AIMessage("x" * 4_000, id="big")])
    pinned = approximate([request.system_message])  # type: ignore[list-item]
    budget = pinned + 100
    trimmed, report = TurnTrimMiddleware(budget, on_overflow="drop").trim_request(request)
    assert trimmed.messages == []
    assert report.kept_turns == 0
    with pytest.raises(TurnTrimOverflowError) as caught:
        TurnTrimMiddleware(budget, on_overflow="raise").trim_request(request)
    assert (caught.value.max_tokens, caught.value.system_tokens) == (budget, pinned)
    # The middlewares' default, "compact": the turn is kept, smaller.
    trimmed, report = TurnTrimMiddleware(budget).trim_request(request)
    assert [m.id for m in trimmed.messages] == ["h1", "big"]
    assert report.compaction is not None
    assert report.compaction.truncated_messages == 1
    assert report.tokens_after == approximate(report.kept) <= budget
    # The tools alone over the budget: only the system prompt is sent.
    trimmed, report = TurnTrimMiddleware(5, on_overflow="drop").trim_request(request_of(history(1)))
    assert trimmed.messages == []
    assert not report.budget_met


def test_an_agent_with_on_overflow_raise_raises_a_context_overflow_error(run: Run) -> None:
    agent = make_agent(TurnTrimMiddleware(max_tokens=800, on_overflow="raise"), researcher())
    with pytest.raises(ContextOverflowError) as caught:
        run(
            agent, {"messages": [HumanMessage("why? " * 500)]}, {"configurable": {"thread_id": "t"}}
        )
    assert isinstance(caught.value, TurnTrimOverflowError)


# -- the state ---------------------------------------------------------------------------


def test_the_state_keeps_the_newest_turn_even_alone_over_budget(run: Run) -> None:
    model = researcher()
    middleware = TurnTrimStateMiddleware(max_tokens=800, on_overflow="drop")
    big = HumanMessage("why? " * 500, id="big")
    (state,) = converse(make_agent(middleware, model), run, [big])
    assert state[0] is big or state[0].id == "big"  # the task stays in the state
    assert [[m.type for m in call] for call in model.calls] == [["system"], ["system"]]


def test_a_greeting_stays_in_the_state_until_the_first_turn_is_dropped(run: Run) -> None:
    model, spy = researcher(), Spy()
    agent = make_agent(TurnTrimStateMiddleware(max_tokens=1_300), model, spy)
    config = {"configurable": {"thread_id": "t"}}
    greeting = AIMessage("Hello! How can I help?", id="greet")
    state = run(agent, {"messages": [greeting, question(0)]}, config)["messages"]
    assert state[0].id == "greet"  # kept in the state ...
    assert all(m.id != "greet" for call in model.calls for m in call)  # ... never sent
    for i in range(1, 6):
        state = run(agent, {"messages": [question(i)]}, config)["messages"]
        if state[0].id != "greet":
            break
    # It left with the first dropped turn, in the call that first dropped one.
    dropped = next(k for k, call in enumerate(model.calls) if call[1].id != "h0")
    assert spy.requests[dropped][0].id == "greet"
    assert all(m.id != "greet" for request in spy.requests[dropped + 1 :] for m in request)


# -- sized for the model -----------------------------------------------------------------


def sized_model(window: int | None, output: int | None = None, **fields: Any) -> FakeModel:
    profile = {"max_input_tokens": window, "max_output_tokens": output}
    return researcher(profile={k: v for k, v in profile.items() if v is not None}, **fields)


@pytest.mark.parametrize("middleware", list(MIDDLEWARES.values()))
def test_for_model_sizes_an_openai_model_with_tiktoken(
    middleware: type[TurnTrimMiddleware], tiktoken_cache: Any
) -> None:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4", api_key="sk-placeholder")  # type: ignore[arg-type]
    sized = middleware.for_model(model, reserve_tokens=1_000)
    assert type(sized) is middleware
    assert sized.trimmer.max_tokens == 8_192 - 1_000
    counter = sized.trimmer.counter
    assert isinstance(counter, TiktokenCounter)
    messages = history(2)
    assert counter.count(messages) == TiktokenCounter("gpt-4").count(messages)
    # By default it reserves room for the reply: min(max_output_tokens, window // 4).
    assert middleware.for_model(model).trimmer.max_tokens == 8_192 - 2_048


@pytest.mark.parametrize(
    ("window", "output", "reserve", "budget"),
    [(10_000, 500, None, 9_500), (10_000, None, None, 7_500), (10_000, 9_000, 10, 9_990)],
)
def test_for_model_sizes_another_model_from_its_profile_with_a_calibrated_counter(
    window: int, output: int | None, reserve: int | None, budget: int
) -> None:
    sized = TurnTrimMiddleware.for_model(sized_model(window, output), reserve_tokens=reserve)
    assert sized.trimmer.max_tokens == budget
    assert isinstance(sized.trimmer.counter, CalibratedCounter)
    assert sized.trimmer.options.on_overflow == "compact"


def test_for_model_needs_a_window_and_room_in_it() -> None:
    with pytest.raises(ValueError, match=r"no profile\['max_input_tokens'\]"):
        TurnTrimMiddleware.for_model(researcher())
    with pytest.raises(ValueError, match="exceeds the model's max_input_tokens"):
        TurnTrimMiddleware.for_model(sized_model(1_000), reserve_tokens=1_001)


class Route(AgentMiddleware):
    """Sends every call to another model (dynamic model selection)."""

    def __init__(self, model: FakeModel) -> None:
        super().__init__()
        self.model = model

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return handler(request.override(model=self.model))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return await handler(request.override(model=self.model))


class Events(BaseCallbackHandler):
    """Every custom event a run dispatches."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))

    def trims(self) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == "turntrim"]


def test_a_routed_call_is_sized_for_the_model_it_goes_to(traced_run: Run) -> None:
    run = traced_run

    def provider(messages: list[BaseMessage]) -> int:
        return round(1.3 * approximate(messages))

    big, small = sized_model(100_000, 1_000), sized_model(4_000, usage=provider)
    middleware = TurnTrimMiddleware.for_model(big)
    agent = make_agent(middleware, big, Route(small))
    events = Events()
    config = {"configurable": {"thread_id": "t"}, "callbacks": [events]}
    for i in range(3):
        run(agent, {"messages": [question(i)]}, config)
    assert big.calls == []
    assert len(small.calls) == 6
    assert {e["max_tokens"] for e in events.trims()} == {3_000}  # 4,000 less a quarter
    own = middleware.trimmer_for(small).counter
    assert isinstance(own, CalibratedCounter)
    assert own.observations == 6  # its own calibration, fed by its calls
    assert own.ratio == pytest.approx(1.3, rel=0.05)
    assert middleware.trimmer.counter.observations == 0
    # A routed model without a profile keeps the budget, with a counter of its own.
    unsized = middleware.trimmer_for(researcher())
    assert unsized.max_tokens == middleware.trimmer.max_tokens
    assert unsized.counter is not middleware.trimmer.counter


def test_a_routed_model_gets_its_own_budget_whatever_trim_to_says() -> None:
    big, small = sized_model(100_000, 1_000), sized_model(8_000)
    middleware = TurnTrimMiddleware.for_model(big, trim_to=50_000)
    routed = middleware.trimmer_for(small).options
    assert (routed.max_tokens, routed.trim_to) == (6_000, 6_000)  # 8,000 less a quarter
    # A window smaller than the reserve leaves this budget, with the model's own counter.
    reserved = TurnTrimMiddleware.for_model(big, reserve_tokens=20_000)
    assert reserved.trimmer_for(small).max_tokens == reserved.trimmer.max_tokens == 80_000


def test_a_calibrated_counter_is_fed_each_call_s_reported_usage(run: Run) -> None:
    counter = CalibratedCounter()
    model = researcher(usage=lambda messages: round(1.3 * approximate(messages)))
    agent = make_agent(TurnTrimMiddleware(BUDGET, token_counter=counter), model)
    converse(agent, run, [question(i) for i in range(6)])
    assert counter.observations == len(model.calls) == 12
    assert counter.ratio == pytest.approx(1.3, rel=0.02)
    # Estimates are now in the provider's units: the requests fit its count.
    assert all(round(1.3 * approximate(call)) <= BUDGET for call in model.calls[8:])


# -- what every trim records -------------------------------------------------------------


def _summary_keys() -> set[str]:
    """The keys of ``TrimReport.summary``, and the middleware's own."""
    report = TurnTrimmer(max_tokens=100).report([HumanMessage("hi")])
    return {*report.summary(), "tool_tokens"}


@pytest.mark.parametrize("mode", list(MIDDLEWARES))
def test_each_call_s_trim_is_a_log_line_and_a_turntrim_event(
    mode: str, traced_run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    model, spy, events = researcher(), Spy(), Events()
    agent = make_agent(MIDDLEWARES[mode](BUDGET), model, spy)
    config = {"configurable": {"thread_id": "t"}, "callbacks": [events]}
    with caplog.at_level(logging.DEBUG, logger="langchain_turntrim"):
        for i in range(8):
            traced_run(agent, {"messages": [question(i)]}, config)
    lines = [r.getMessage() for r in caplog.records if r.name == "langchain_turntrim"]
    trims = events.trims()
    assert len(lines) == len(trims) == len(model.calls) == 16
    assert {name for name, _ in events.events} == {"turntrim"}
    for data, line, sent, full in zip(trims, lines, model.calls, spy.requests, strict=True):
        assert set(data) == _summary_keys()
        assert data["tokens_after"] == approximate(sent) <= data["max_tokens"] == BUDGET
        assert data["tool_tokens"] == approximate([])
        assert data["system_tokens"] == count_tokens_approximately(sent[:1])
        # Before and after are counted alike: what was left out is their difference.
        assert data["messages_before"] - data["messages_after"] == len(full) - len(sent[1:])
        assert line.startswith(
            f"trimmed {data['messages_before']} -> {data['messages_after']} messages: "
            f"dropped {data['dropped_turns']} of {data['turns']} turns"
        )
    assert any(data["dropped_turns"] for data in trims)


@NO_ASYNC_RUN_CONTEXT
def test_the_trims_stream_as_custom_events() -> None:
    agent = make_agent(TurnTrimMiddleware(max_tokens=BUDGET), researcher())

    async def collect() -> list[Any]:
        inputs: Any = {"messages": [*history(20), question(20)]}
        config = {"configurable": {"thread_id": "t"}}
        return [e async for e in agent.astream_events(inputs, config, version="v2")]

    events = [e for e in asyncio.run(collect()) if e["event"] == "on_custom_event"]
    assert [e["name"] for e in events] == ["turntrim", "turntrim"]
    assert events[0]["data"]["dropped_turns"] > 0
    assert events[0]["metadata"]["langgraph_node"] == "model"


def test_no_event_is_built_that_nobody_would_receive(
    traced_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatched: list[str] = []
    for manager in (CallbackManager, AsyncCallbackManager):
        original = manager.on_custom_event

        def spy(self: Any, name: str, *args: Any, _original: Any = original, **kw: Any) -> Any:
            dispatched.append(name)
            return _original(self, name, *args, **kw)

        monkeypatch.setattr(manager, "on_custom_event", spy)
    agent = make_agent(TurnTrimStateMiddleware(max_tokens=BUDGET), researcher())
    inputs: Any = {"messages": [*history(20), question(20)]}
    traced_run(agent, inputs, {"configurable": {"thread_id": "quiet"}})
    assert dispatched == []
    events = Events()
    traced_run(agent, inputs, {"configurable": {"thread_id": "watched"}, "callbacks": [events]})
    assert dispatched == [name for name, _ in events.events] == ["turntrim", "turntrim"]


def test_the_trim_is_in_the_metadata_of_its_langsmith_span(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.tracers.langchain import LangChainTracer
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
    agent = make_agent(TurnTrimMiddleware(max_tokens=BUDGET), researcher())
    agent.invoke(
        {"messages": [*history(20), question(20)]},
        {"configurable": {"thread_id": "t"}, "callbacks": [tracer]},
    )
    tracer.wait_for_futures()
    spans = [
        (u.get("extra") or {}).get("metadata", {}).get("turntrim")
        for u in client.updates
        if u["name"] == "TurnTrimMiddleware.wrap_model_call"
    ]
    assert len(spans) == 2
    assert all(set(summary) == _summary_keys() for summary in spans)
    assert spans[0]["dropped_turns"] > 0


# -- one middleware, many callers ----------------------------------------------------------


def _scripts(count: int) -> list[list[HumanMessage]]:
    return [[question(i, (i * 7 + k * 13) % 60) for i in range(10)] for k in range(count)]


@pytest.mark.parametrize("trim_to", [None, 900, "auto"])
@pytest.mark.parametrize("callers", ["threads", "coroutines"])
def test_one_middleware_shared_by_concurrent_agents_answers_each_of_them(
    callers: str, trim_to: int | str | None
) -> None:
    """Each agent is sent what it would be sent with a middleware of its own."""
    scripts = _scripts(6)

    def alone(script: list[HumanMessage]) -> list[list[BaseMessage]]:
        model = researcher()
        converse(
            make_agent(TurnTrimStateMiddleware(BUDGET, trim_to=trim_to), model), _invoke, script
        )
        return model.calls

    expected = [alone(script) for script in scripts]
    shared = TurnTrimStateMiddleware(BUDGET, trim_to=trim_to)
    models = [researcher() for _ in scripts]
    agents = [make_agent(shared, model) for model in models]
    if callers == "threads":
        with ThreadPoolExecutor(max_workers=6) as pool:
            work = [
                pool.submit(converse, a, _invoke, s, f"t{k}")
                for k, (a, s) in enumerate(zip(agents, scripts, strict=True))
            ]
            for done in work:
                done.result()
    else:

        async def ask(agent: Any, script: list[HumanMessage], thread: str) -> None:
            config = {"configurable": {"thread_id": thread}}
            for q in script:
                await agent.ainvoke({"messages": [q]}, config)

        async def everyone() -> None:
            await asyncio.gather(
                *(ask(a, s, f"t{k}") for k, (a, s) in enumerate(zip(agents, scripts, strict=True)))
            )

        asyncio.run(everyone())
    for model, calls in zip(models, expected, strict=True):
        assert [[_key(m) for m in c] for c in model.calls] == [[_key(m) for m in c] for c in calls]


def _histories(count: int) -> list[list[BaseMessage]]:
    """Distinct histories sharing a prefix, so callers race on the same messages."""
    shared: list[BaseMessage] = [SystemMessage("rules")]
    for t in range(40):
        shared += [HumanMessage(f"question {t} " * (t % 7 + 1)), AIMessage(f"answer {t}")]
    return [[*shared[: 3 + k * 7 % len(shared)], HumanMessage(f"own {k}")] for k in range(count)]


@pytest.mark.parametrize("callers", ["threads", "coroutines"])
def test_one_trimmer_shared_by_many_callers_answers_each_of_them(callers: str) -> None:
    items = _histories(64)
    alone = [TurnTrimmer(max_tokens=150, cache_size=0).invoke(h) for h in items]
    trimmer = TurnTrimmer(max_tokens=150, cache_size=40)  # small: constant eviction
    for _ in range(3):
        if callers == "threads":
            found = trimmer.batch(list(items), config={"max_concurrency": 8})
        else:

            async def everyone() -> list[list[BaseMessage]]:
                return list(await asyncio.gather(*(trimmer.ainvoke(h) for h in items)))

            found = asyncio.run(everyone())
        assert found == alone


class Rendezvous:
    """A counter that counts only once two callers are inside it at once: had
    a lock been held while counting, the second could never enter."""

    overhead = 0

    def __init__(self) -> None:
        import threading

        self.barrier = threading.Barrier(2, timeout=10)

    def count_each(self, messages: list[BaseMessage]) -> list[int]:
        self.barrier.wait()
        return [1] * len(messages)


def test_no_lock_is_held_while_counting() -> None:
    trimmer = TurnTrimmer(max_tokens=10, token_counter=Rendezvous())
    found = trimmer.batch([[HumanMessage("a")], [HumanMessage("b")]], config={"max_concurrency": 2})
    assert [[m.content for m in kept] for kept in found] == [["a"], ["b"]]


# -- construction --------------------------------------------------------------------------


@pytest.mark.parametrize("middleware", list(MIDDLEWARES.values()))
def test_a_middleware_adds_no_node_and_compacts_by_default(
    middleware: type[TurnTrimMiddleware],
) -> None:
    made = middleware(100, token_counter="approximate")
    assert made.name == middleware.__name__
    assert made.trimmer.max_tokens == 100
    assert made.trimmer.options.on_overflow == "compact"  # an agent works inside one turn
    # Neither adds a node to the agent's graph: both work around the model call.
    graph = create_agent(researcher(), tools=TOOLS, middleware=[made]).get_graph()
    assert set(graph.nodes) == {"__start__", "model", "tools", "__end__"}


def test_importing_without_langchain_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "langchain" or name.startswith("langchain."):
            monkeypatch.setitem(sys.modules, name, None)
        elif name == "langchain_turntrim" or name.startswith("langchain_turntrim."):
            monkeypatch.delitem(sys.modules, name)
    fresh = importlib.import_module("langchain_turntrim")
    with pytest.raises(ImportError, match=r"pip install 'langchain-turntrim\[agents\]'"):
        _ = fresh.TurnTrimMiddleware
    assert "TurnTrimMiddleware" not in fresh.__all__  # `import *` needs no extra
    namespace: dict[str, Any] = {}
    exec("from langchain_turntrim import *", namespace)  # noqa: S102 - a fixed statement
    assert "TurnTrimmer" in namespace
