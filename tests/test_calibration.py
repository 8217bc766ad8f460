"""CalibratedCounter: estimates fitted to the usage a provider reports.

The fake provider's tokenizer is hidden from the counter: a character rule
with its own scale (3 characters a token, where the approximate counter
assumes 4), its own framing (7 tokens a message, 20 a request) and its own
tool pricing. It reports ``usage_metadata`` like a real provider.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from langchain_turntrim import ApproximateCounter, CalibratedCounter, TurnTrimmer
from langchain_turntrim._counting import CachedCounter, resolve_counter
from langchain_turntrim._counting.callback import CalibrationCallback
from langchain_turntrim._middleware import TurnTrimMiddleware


def hidden_count(messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
    """The provider's own count, which no counter here can see."""
    total = 20
    for m in messages:
        text = m.text + (json.dumps(m.tool_calls) if isinstance(m, AIMessage) else "")
        total += math.ceil(len(text) / 3) + 7
    for t in tools:
        total += math.ceil(len(json.dumps(convert_to_openai_tool(t))) / 3)
    return total


def text(rng: random.Random, low: int, high: int) -> str:
    words = ("alpha", "beta", "gamma", "delta", "order", "refund", "flight", "seat")
    out: list[str] = []
    size = rng.randint(low, high)
    while sum(len(w) for w in out) + len(out) < size:
        out.append(rng.choice(words))
    return " ".join(out)


def request(rng: random.Random) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage(text(rng, 50, 200))]
    for _ in range(rng.randint(1, 15)):
        messages += [HumanMessage(text(rng, 5, 400)), AIMessage(text(rng, 5, 800))]
    return messages


def seeded(seed: object) -> random.Random:
    """A seeded generator of test data (not for secrets)."""
    return random.Random(str(seed))  # noqa: S311 - reproducible test data


def relative_error(estimate: int, truth: int) -> float:
    return abs(estimate - truth) / truth


def test_estimates_converge_on_short_and_long_requests() -> None:
    rng = seeded(1)
    counter = CalibratedCounter()
    for _ in range(30):
        sent = request(rng)
        counter.observe(sent, hidden_count(sent))
    assert counter.observations == 30
    assert counter.ratio == pytest.approx(4 / 3, rel=0.05)
    short = [HumanMessage("hi")]
    long = request(seeded(2)) * 3
    assert abs(counter.count(short) - hidden_count(short)) <= 2  # rounding up, per message
    assert relative_error(counter.count(long), hidden_count(long)) <= 0.03
    uncalibrated = ApproximateCounter()
    assert relative_error(uncalibrated.count(long), hidden_count(long)) > 0.15


def test_until_warm_up_estimates_carry_the_margin() -> None:
    counter = CalibratedCounter(warmup=3, margin=0.1)
    messages = [HumanMessage("x" * 400)]
    base = ApproximateCounter().count(messages)
    assert counter.count(messages) == math.ceil(base * 1.1)
    for _ in range(2):
        counter.observe(messages, 2 * base)
    assert counter.margin == 0.1
    assert counter.count(messages) == math.ceil(2 * base * 1.1)
    counter.observe(messages, 2 * base)
    assert counter.margin == 0.0
    assert counter.count(messages) == 2 * base


class Lengths:
    """A user's TokenCounter: each message costs its content's length."""

    overhead = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return [len(m.text) for m in messages]


def test_a_count_after_observe_reflects_the_new_calibration() -> None:
    """Resolved for a trimmer, it is not cached; a cached base keeps its own counts only."""
    counter = CalibratedCounter(Lengths(), warmup=0, margin=0.0)
    assert isinstance(counter.base, CachedCounter)
    assert resolve_counter(counter) is counter
    trimmer = TurnTrimmer(max_tokens=1_000, token_counter=counter)
    assert trimmer.counter is counter
    messages = [HumanMessage("x" * 100), AIMessage("y" * 100)]
    assert trimmer.counter.count(messages) == 200
    for _ in range(3):
        counter.observe(messages, 600)
    assert trimmer.counter.count(messages) == pytest.approx(600, abs=2)
    assert trimmer.counter.count_each(messages[:1])[0] == pytest.approx(300, abs=2)


def test_one_odd_report_does_not_move_the_fit() -> None:
    rng = seeded(3)
    counter = CalibratedCounter()
    for _ in range(20):
        sent = request(rng)
        counter.observe(sent, hidden_count(sent))
    before = counter.ratio
    sent = request(rng)
    counter.observe(sent, 10 * hidden_count(sent))
    assert counter.ratio == pytest.approx(before, rel=0.02)


def test_observations_from_many_threads_are_all_kept() -> None:
    counter = CalibratedCounter()
    requests = [request(seeded(seed)) for seed in range(96)]
    errors: list[BaseException] = []

    def work(chunk: list[list[BaseMessage]]) -> None:
        try:
            for sent in chunk:
                counter.observe(sent, hidden_count(sent))
                counter.count(sent)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=work, args=(requests[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert counter.observations == 96
    probe = request(seeded(500))
    assert relative_error(counter.count(probe), hidden_count(probe)) <= 0.03


def test_state_survives_pickling() -> None:
    import pickle

    counter = CalibratedCounter()
    sent = request(seeded(4))
    counter.observe(sent, hidden_count(sent))
    copy = pickle.loads(pickle.dumps(counter))  # noqa: S301 - our own bytes
    assert copy.calibration == counter.calibration
    copy.observe(sent, hidden_count(sent))
    assert copy.observations == 2


@pytest.mark.parametrize(
    ("build", "error", "fragment"),
    [
        (lambda: CalibratedCounter(len), TypeError, "needs an additive base counter"),
        (lambda: CalibratedCounter(CalibratedCounter()), TypeError, "another CalibratedCounter"),
        (
            lambda: CalibratedCounter(margin="0.1"),  # type: ignore[arg-type]
            TypeError,
            "margin must be a number",
        ),
        (
            lambda: CalibrationCallback(ApproximateCounter()),  # type: ignore[arg-type]
            TypeError,
            "CalibrationCallback needs a CalibratedCounter",
        ),
        (lambda: CalibratedCounter(margin=2), ValueError, "margin must be between 0 and 1"),
        (lambda: CalibratedCounter(warmup=-1), ValueError, "warmup must be >= 0"),
        (
            lambda: CalibratedCounter().observe([HumanMessage("a")], "3"),  # type: ignore[arg-type]
            TypeError,
            "input_tokens must be a number, got str",
        ),
        (
            lambda: CalibratedCounter().observe([HumanMessage("a")], True),
            TypeError,
            "input_tokens must be a number, got bool",
        ),
        (
            lambda: CalibratedCounter().observe(["a"], 3),  # type: ignore[list-item]
            TypeError,
            "messages[0] is not a BaseMessage",
        ),
    ],
)
def test_bad_input_raises(build: Callable[[], Any], error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=None) as info:
        build()
    assert fragment in str(info.value)


# -- a fake provider -------------------------------------------------------------------


@tool
def lookup(query: str) -> str:
    """Look a query up in the knowledge base."""
    rng = seeded(query)
    return text(rng, 200, 1_200)


class HiddenTokenizerModel(BaseChatModel):
    """Counts with ``hidden_count`` and reports it as ``usage_metadata``.

    A user message gets a tool call, a tool result a text answer. ``reported``
    is shared by the copies ``bind_tools`` makes.
    """

    reported: list[int] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "hidden-tokenizer-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> HiddenTokenizerModel:
        return self.model_copy(update={"tools": list(tools)})

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        tokens = hidden_count(messages, self.tools)
        self.reported.append(tokens)
        n = len(self.reported)
        usage = {"input_tokens": tokens, "output_tokens": 9, "total_tokens": tokens + 9}
        if isinstance(messages[-1], HumanMessage):
            call = {"name": "lookup", "args": {"query": messages[-1].text[:40]}, "id": f"c{n}"}
            reply = AIMessage("", tool_calls=[call], usage_metadata=usage)
        else:
            reply = AIMessage(f"Answer {n}: the documents agree.", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _invoke(runnable: Any, inputs: Any) -> Any:
    return runnable.invoke(inputs)


def _ainvoke(runnable: Any, inputs: Any) -> Any:
    return asyncio.run(runnable.ainvoke(inputs))


@pytest.fixture(params=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Callable[[Any, Any], Any]:
    return {"invoke": _invoke, "ainvoke": _ainvoke}[request.param]


@pytest.fixture
def estimates(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every estimate a CalibratedCounter made of a request before learning from it."""
    seen: list[int] = []
    observe = CalibratedCounter.observe

    def recording(self: CalibratedCounter, *args: Any, **kwargs: Any) -> int:
        estimate = observe(self, *args, **kwargs)
        seen.append(estimate)
        return estimate

    monkeypatch.setattr(CalibratedCounter, "observe", recording)
    return seen


def questions(i: int) -> str:
    return f"Question {i}: " + text(seeded(i), 20, 300)


def test_the_middleware_calibrates_an_agent_loop(
    run: Callable[[Any, Any], Any], estimates: list[int]
) -> None:
    model = HiddenTokenizerModel(profile={"max_input_tokens": 2_400, "max_output_tokens": 400})
    middleware = TurnTrimMiddleware.for_model(model)
    assert middleware.max_tokens == 2_000
    assert isinstance(middleware.trimmer.counter, CalibratedCounter)
    agent = create_agent(model, tools=[lookup], system_prompt="Be terse.", middleware=[middleware])
    messages: list[Any] = []
    for i in range(30):
        state = run(agent, {"messages": [*messages, HumanMessage(questions(i))]})
        messages = state["messages"]
    assert len(model.reported) == 60
    assert len(estimates) == 60
    assert middleware.trimmer.counter.observations == 60
    warm = list(zip(estimates[10:], model.reported[10:], strict=True))
    assert max(relative_error(e, r) for e, r in warm) <= 0.05
    assert sum(r > middleware.max_tokens for r in model.reported) == 0
    assert max(model.reported) > 0.9 * middleware.max_tokens  # the budget was reached


def test_the_callback_calibrates_a_chain(
    run: Callable[[Any, Any], Any], estimates: list[int]
) -> None:
    model = HiddenTokenizerModel()
    counter = CalibratedCounter()
    prompt = ChatPromptTemplate.from_messages([("system", "Be terse."), MessagesPlaceholder("h")])
    chain = (prompt | model).with_config(callbacks=[counter.callback()])
    history: list[BaseMessage] = []
    for i in range(12):
        history.append(HumanMessage(questions(i)))
        history.append(run(chain, {"h": history}))
    assert counter.observations == 12
    assert len(estimates) == 12
    assert relative_error(estimates[-1], model.reported[-1]) <= 0.03


# -- the model actually called ----------------------------------------------------------


class Fallback(AgentMiddleware):
    """Routes every other call to a smaller model."""

    def __init__(self, small: BaseChatModel) -> None:
        super().__init__()
        self.small = small
        self.calls = 0

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> Any:
        self.calls += 1
        return handler(request.override(model=self.small) if self.calls % 2 else request)


def test_the_budget_follows_the_model_actually_called() -> None:
    big = HiddenTokenizerModel(profile={"max_input_tokens": 8_000, "max_output_tokens": 400})
    small = HiddenTokenizerModel(profile={"max_input_tokens": 1_600, "max_output_tokens": 100})
    middleware = TurnTrimMiddleware.for_model(big)
    fixed = TurnTrimMiddleware(max_tokens=3_000, token_counter=CalibratedCounter())
    agent = create_agent(
        big, tools=[lookup], system_prompt="Be terse.", middleware=[Fallback(small), middleware]
    )
    messages: list[Any] = []
    for i in range(20):
        messages = agent.invoke({"messages": [*messages, HumanMessage(questions(i))]})["messages"]
    small_trimmer = middleware.trimmer_for(small)
    assert small_trimmer.max_tokens == 1_500
    assert middleware.trimmer_for(small) is small_trimmer
    assert middleware.trimmer_for(big) is middleware.trimmer
    assert small_trimmer.counter is not middleware.trimmer.counter
    assert isinstance(small_trimmer.counter, CalibratedCounter)
    assert small_trimmer.counter.observations == len(small.reported) == 20
    big_counter = middleware.trimmer.counter
    assert isinstance(big_counter, CalibratedCounter)
    assert big_counter.observations == len(big.reported) == 20
    assert max(small.reported) <= 1_500 < max(big.reported)
    assert fixed.trimmer_for(small) is fixed.trimmer


# -- reports that cannot be right, and shifts that are ---------------------------------


@pytest.mark.parametrize(
    "report",
    [0, -5, float("inf"), float("nan"), 1e309, 10**400, 200_000_000, "ratio"],
    ids=["zero", "negative", "inf", "nan", "overflowing-float", "huge-int", "absurd", "ratio"],
)
def test_a_report_no_provider_makes_is_ignored(
    report: object, caplog: pytest.LogCaptureFixture
) -> None:
    rng = seeded(3)
    counter = CalibratedCounter()
    for _ in range(10):
        sent = request(rng)
        counter.observe(sent, hidden_count(sent))
    before = counter.calibration
    sent = request(rng)
    value = 60 * ApproximateCounter().count(sent) if report == "ratio" else report
    with caplog.at_level("DEBUG", logger="langchain_turntrim"):
        counter.observe(sent, value)  # type: ignore[arg-type]
    assert counter.calibration == before  # the fit is untouched
    assert "CalibratedCounter ignored a report" in caplog.text
    for _ in range(70):  # and every later call still learns (nothing left poisoned)
        sent = request(rng)
        counter.observe(sent, hidden_count(sent))
    assert counter.observations == 80
    sent = request(rng)
    assert counter.count(sent) == pytest.approx(hidden_count(sent), rel=0.05)


def test_zero_is_a_valid_report_for_an_empty_request() -> None:
    counter = CalibratedCounter()
    counter.observe([], 0)
    assert counter.observations == 1


CJK = "东京的天气今天很好我们去公园散步吧然后吃午饭"


def provider_after_shift(messages: Sequence[BaseMessage], shifted: bool) -> int:
    """Before the shift ``hidden_count``; after it, one token per character
    (a CJK text on a tokenizer that splits it finely) plus the same framing."""
    if not shifted:
        return hidden_count(messages)
    return 20 + sum(len(m.text) + 7 for m in messages)


def shift_run(calls: int, shift_at: int, budget: int) -> list[float]:
    """An agent-like loop: each call appends a turn, is trimmed to ``budget``
    by a CalibratedCounter and observed; from ``shift_at`` on the content is
    CJK. Returns each call's reported tokens / budget."""
    rng = seeded(11)
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=counter)
    history: list[BaseMessage] = [SystemMessage("Be brief.")]
    used: list[float] = []
    for call in range(calls):
        shifted = call >= shift_at
        if shifted:
            words = (CJK * 20)[: rng.randint(30, 300)]
            history += [HumanMessage(words), AIMessage((CJK * 40)[: rng.randint(50, 600)])]
        else:
            history += [HumanMessage(text(rng, 20, 400)), AIMessage(text(rng, 50, 800))]
        sent = trimmer.trim(history)
        reported = provider_after_shift(sent, shifted)
        counter.observe(sent, reported)
        used.append(reported / budget)
    return used


@pytest.mark.parametrize("budget", [4_000, 8_000])
def test_a_shift_in_the_providers_count_is_followed_within_3_calls(budget: int) -> None:
    used = shift_run(calls=200, shift_at=40, budget=budget)
    assert max(used[8:40]) <= 1.0  # calibrated on the first content
    over = [i - 40 for i, u in enumerate(used[40:], 40) if u > 1.0]
    assert over == [0, 1, 2]  # the three calls that reveal the shift
    assert max(used[43:]) <= 1.0  # and within budget from then on


def test_one_odd_report_is_not_a_shift() -> None:
    rng = seeded(5)
    counter = CalibratedCounter()
    for _ in range(20):
        sent = request(rng)
        counter.observe(sent, hidden_count(sent))
    ratio = counter.ratio
    sent = request(rng)
    counter.observe(sent, 3 * hidden_count(sent))
    sent = request(rng)
    counter.observe(sent, hidden_count(sent))
    assert counter.ratio == pytest.approx(ratio, rel=0.05)


# -- the callback's memory -----------------------------------------------------------------


def test_runs_that_never_end_are_bounded() -> None:
    from uuid import uuid4

    from langchain_turntrim._counting.callback import MAX_PENDING

    callback = CalibratedCounter().callback()
    for _ in range(MAX_PENDING + 100):
        callback.on_chat_model_start({}, [[HumanMessage("hi")]], run_id=uuid4())
    assert len(callback._pending) == MAX_PENDING


def test_a_cancelled_call_is_forgotten() -> None:
    class Slow(HiddenTokenizerModel):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
            await asyncio.sleep(10)
            raise AssertionError("not reached")

    counter = CalibratedCounter()
    callback = counter.callback()
    chain = TurnTrimmer(max_tokens=1_000, token_counter=counter) | Slow()

    async def timed_out() -> None:
        for _ in range(20):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(
                    chain.ainvoke([HumanMessage("hi")], config={"callbacks": [callback]}), 0.01
                )

    asyncio.run(timed_out())
    assert callback._pending == {}
