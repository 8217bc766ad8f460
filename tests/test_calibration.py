"""``CalibratedCounter``: estimates scaled to the input tokens a provider
reports. It follows a provider within a few calls (and a shift within three),
a few odd reports do not move it, reports no provider makes are ignored, and
it is fed by ``callback()`` in chains and by the middleware in agents,
without holding on to anything of the runs it saw."""

from __future__ import annotations

import asyncio
import gc
import math
import pickle
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import tool
from pydantic import Field

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    per_list,
)
from langchain_turntrim._counting.calibrated import PENDING

BASE = ApproximateCounter()


def base(messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
    return BASE.count(messages, tools)


def request(i: int) -> list[BaseMessage]:
    """A request of a size that varies with ``i`` (32 base tokens and more)."""
    return [
        SystemMessage("You answer questions about orders. " * 3),
        HumanMessage(f"question {i} " * (5 + i % 17)),
        AIMessage(f"answer {i} " * (3 + i % 29)),
    ]


def provider(scale: float) -> Callable[[Sequence[BaseMessage]], int]:
    """A provider counting ``scale`` times the base count."""
    return lambda messages: math.ceil(scale * base(messages))


def learned(counter: CalibratedCounter, scale: float, calls: range) -> None:
    for i in calls:
        counter.observe(request(i), provider(scale)(request(i)))


def test_it_follows_a_provider_counting_more_within_a_few_calls() -> None:
    counter = CalibratedCounter()
    probe = request(1_000)
    assert counter.count(probe) == sum(math.ceil(1.15 * c) for c in BASE.count_each(probe))
    learned(counter, 1.3, range(3))
    assert counter.ratio == pytest.approx(1.3, rel=0.01)
    learned(counter, 1.3, range(3, 8))  # the warm-up is over: the margin is the window's own
    assert counter.margin < 0.02
    truth = provider(1.3)(probe)
    assert truth <= counter.count(probe) <= 1.03 * truth


def test_a_trimmed_loop_stays_within_budget_once_calibrated() -> None:
    counter = CalibratedCounter()
    trimmer = TurnTrimmer(max_tokens=1_500, token_counter=counter)
    history: list[BaseMessage] = [SystemMessage("Be brief. " * 20)]
    used = []
    for i in range(40):
        history += [HumanMessage(f"question {i} " * (5 + i % 13)), AIMessage(f"answer {i} " * 40)]
        sent = trimmer.trim(history)
        reported = provider(1.3)(sent)
        counter.observe(sent, reported)
        used.append(reported / 1_500)
    assert max(used[1:]) <= 1.0  # the first call is estimated before any report
    assert min(used[10:]) > 0.75  # and the budget is used, not wasted


def test_a_shift_is_followed_within_three_calls() -> None:
    counter = CalibratedCounter()
    learned(counter, 1.3, range(20))
    for i in range(20, 22):  # two calls off the same way are not yet a shift
        counter.observe(request(i), provider(2.6)(request(i)))
        assert counter.ratio == pytest.approx(1.3, rel=0.01)
    counter.observe(request(22), provider(2.6)(request(22)))
    assert counter.ratio == pytest.approx(2.6, rel=0.01)
    probe = request(500)
    assert counter.count(probe) >= provider(2.6)(probe)


@pytest.mark.parametrize("outlier", [0.4, 3.0, 10.0])
def test_odd_reports_do_not_move_the_median(outlier: float) -> None:
    counter = CalibratedCounter()
    learned(counter, 1.3, range(12))
    for i in range(12, 60):
        scale = outlier if i % 4 == 0 else 1.3  # never three in a row: not a shift
        counter.observe(request(i), provider(scale)(request(i)))
        assert counter.ratio == pytest.approx(1.3, rel=0.01)


def test_the_margin_is_the_warm_up_s_then_the_window_s_worst_under_estimate_capped() -> None:
    counter = CalibratedCounter(warmup=3, margin=0.1)
    messages = [HumanMessage("x" * 396)]
    size = base(messages)
    assert counter.count(messages) == math.ceil(size * 1.1)
    for _ in range(2):
        counter.observe(messages, 2 * size)
    assert (counter.ratio, counter.margin) == (2.0, 0.1)  # still warming up
    assert counter.count(messages) == math.ceil(2 * size * 1.1)
    counter.observe(messages, 2 * size)
    assert counter.margin == 0.0  # no under-estimate in the window
    assert counter.count(messages) == 2 * size
    counter.observe(messages, 2.1 * size)
    assert counter.ratio == 2.0
    assert counter.margin == pytest.approx(0.05)  # the worst under-estimate, 2.1 / 2.0
    assert counter.count(messages) == math.ceil(2 * size * 1.05)
    counter.observe(messages, 3 * size)
    assert counter.ratio == 2.0
    assert counter.margin == 0.1  # 50% under, capped at the margin
    assert counter.observations == 5


def test_a_trimmer_s_count_follows_the_calibration_at_once() -> None:
    counter = CalibratedCounter(warmup=0, margin=0.0)
    trimmer = TurnTrimmer(max_tokens=10**6, token_counter=counter)
    history = request(3)
    assert trimmer.report(history).tokens_after == base(history)
    counter.observe(history, 2 * base(history))
    assert trimmer.report(history).tokens_after == 2 * base(history)


def calibrated_state(counter: CalibratedCounter) -> tuple[Any, ...]:
    return counter.state, counter.count(request(99)), counter.count(request(7))


@pytest.mark.parametrize(
    "report",
    [
        10**309,
        10**400,
        float("inf"),
        float("-inf"),
        float("nan"),
        -5,
        0,
        200_000_000,
        "60 times the base",
        "a 60th of the base",
    ],
)
def test_a_report_no_provider_makes_is_ignored(
    report: Any, caplog: pytest.LogCaptureFixture
) -> None:
    counter = CalibratedCounter()
    learned(counter, 1.3, range(10))
    before = calibrated_state(counter)
    sent = request(10)
    value = {"60 times the base": 60 * base(sent), "a 60th of the base": base(sent) // 60}
    with caplog.at_level("DEBUG", logger="langchain_turntrim"):
        counter.observe(sent, value.get(report, report))
    assert calibrated_state(counter) == before
    assert "CalibratedCounter ignored a report" in caplog.text
    learned(counter, 1.3, range(11, 40))  # nothing is left poisoned
    assert counter.observations == 39
    assert counter.ratio == pytest.approx(1.3, rel=0.01)


@pytest.mark.parametrize("warm", [False, True], ids=["first-report", "after-three"])
@pytest.mark.parametrize("report", [99_000_000, 1e-300, 5e-324])
def test_an_absurd_ratio_on_a_small_request_is_ignored(report: float, warm: bool) -> None:
    counter = CalibratedCounter()
    learned(counter, 1.3, range(3 if warm else 0))
    before = calibrated_state(counter)
    small = [HumanMessage("hi")]  # a few tokens: no provider reports 99 million, or none
    counter.observe(small, report)
    assert calibrated_state(counter) == before


def test_an_empty_request_reporting_nothing_is_no_error() -> None:
    counter = CalibratedCounter()
    counter.observe([], 0)
    assert counter.ratio == 1.0


REPORTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**3), 10**12),
    st.just(10**400),
    st.floats(0.5, 3.0).map(lambda r: ("ratio", r)),
)


@settings(max_examples=200)
@given(calls=st.lists(st.tuples(st.integers(0, 60), REPORTS), max_size=25))
def test_whatever_is_reported_the_counter_keeps_counting(calls: list[tuple[int, Any]]) -> None:
    counter = CalibratedCounter()
    for i, report in calls:
        sent = request(i)
        value = math.ceil(report[1] * base(sent)) if isinstance(report, tuple) else report
        counter.observe(sent, value)
        assert math.isfinite(counter.ratio)
        assert counter.ratio > 0
        assert 0 <= counter.margin <= 0.15
        count = counter.count(request(1_000))
        assert isinstance(count, int)
        assert 0 < count < 10**12


@pytest.mark.parametrize(
    ("build", "error", "fragment"),
    [
        (lambda: CalibratedCounter(len), TypeError, "needs an additive base counter"),
        (lambda: CalibratedCounter(per_list(len)), TypeError, "needs an additive base counter"),
        (lambda: CalibratedCounter(CalibratedCounter()), TypeError, "additive base counter"),
        (lambda: CalibratedCounter("exact"), ValueError, "unknown token_counter 'exact'"),
        (lambda: CalibratedCounter(margin=2), ValueError, "margin must be between 0 and 1"),
        (lambda: CalibratedCounter(margin=math.nan), ValueError, "margin must be finite"),
        (lambda: CalibratedCounter(margin="0.1"), TypeError, "margin must be a number"),  # type: ignore[arg-type]
        (lambda: CalibratedCounter(warmup=-1), ValueError, "warmup must be >= 0"),
        (lambda: CalibratedCounter().observe(request(1), "3"), TypeError, "must be a number"),  # type: ignore[arg-type]
        (lambda: CalibratedCounter().observe(request(1), True), TypeError, "got bool True"),
        (lambda: CalibratedCounter().observe(request(1), None), TypeError, "must be a number"),  # type: ignore[arg-type]
    ],
)
def test_bad_input_raises(build: Callable[[], Any], error: type[Exception], fragment: str) -> None:
    with pytest.raises(error) as raised:
        build()
    assert fragment in str(raised.value)


def test_state_survives_a_pickle_and_threads_lose_no_observation() -> None:
    counter = CalibratedCounter()
    learned(counter, 1.3, range(4))
    copy = pickle.loads(pickle.dumps(counter))  # noqa: S301 - our own bytes
    assert copy.state == counter.state
    errors: list[BaseException] = []

    def work(start: int) -> None:
        try:
            learned(copy, 1.3, range(start, start + 12))
            copy.count(request(start))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(12 * k,)) for k in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave between any two steps
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert copy.observations == 4 + 96
    assert copy.ratio == pytest.approx(1.3, rel=0.01)


# -- fed by chains and agents -------------------------------------------------------------


@tool
def lookup(query: str) -> str:
    """Look a query up in the order database, with every field of every order it finds."""
    return f"order {query}: shipped"


class Provider(BaseChatModel):
    """Reports ``scale`` times the base count of what it was sent (tools
    included) as its input tokens; calls ``lookup`` once per user message."""

    scale: float = 1.3
    tools: list[Any] = Field(default_factory=list)
    reported: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scaled-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Provider:
        return self.model_copy(update={"tools": list(tools)})

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        tokens = math.ceil(self.scale * base(messages, self.tools))
        self.reported.append(tokens)
        usage = {"input_tokens": tokens, "output_tokens": 5, "total_tokens": tokens + 5}
        if self.tools and isinstance(messages[-1], HumanMessage):
            call = {"name": "lookup", "args": {"query": "A1"}, "id": f"c{len(self.reported)}"}
            reply = AIMessage("", tool_calls=[call], usage_metadata=usage)
        else:
            reply = AIMessage("It shipped yesterday. " * 5, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run_sync(runnable: Any, value: Any, config: Any = None) -> Any:
    return runnable.invoke(value, config=config)


def run_async(runnable: Any, value: Any, config: Any = None) -> Any:
    return asyncio.run(runnable.ainvoke(value, config=config))


RUNS = pytest.mark.parametrize("run", [run_sync, run_async], ids=["invoke", "ainvoke"])


@RUNS
def test_the_callback_feeds_it_from_a_chain_s_model_runs(run: Callable[..., Any]) -> None:
    counter = CalibratedCounter()
    model = Provider()
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be terse. " * 30), MessagesPlaceholder("history")]
    )
    chain = prompt | TurnTrimmer(max_tokens=10_000, token_counter=counter) | model
    history: list[BaseMessage] = []
    for i in range(5):
        history.append(HumanMessage(f"question {i} " * 10))
        history.append(run(chain, {"history": history}, {"callbacks": [counter.callback()]}))
    assert counter.observations == 5
    assert counter.ratio == pytest.approx(1.3, rel=0.01)


@RUNS
def test_the_middleware_feeds_it_what_each_call_was_sent(run: Callable[..., Any]) -> None:
    counter = CalibratedCounter()
    model = Provider()
    middleware = TurnTrimMiddleware(max_tokens=10_000, token_counter=counter)
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt="You answer about orders. " * 30,
        middleware=[middleware],
    )
    run(agent, {"messages": [HumanMessage("Where is order A1?")]})
    assert counter.observations == 2  # the tool call, then the answer
    # The system prompt and the tools were counted: the ratio is the provider's.
    assert counter.ratio == pytest.approx(1.3, rel=0.01)


class Slow(Provider):
    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        await asyncio.sleep(30)
        raise AssertionError("cancelled before")


def test_cancelled_model_calls_leave_a_small_state_of_counts_only() -> None:
    counter = CalibratedCounter()
    callback = counter.callback()
    sent: list[weakref.ref[BaseMessage]] = []

    async def one(i: int) -> None:
        messages = [HumanMessage(f"question {i} " * 50)]
        sent.append(weakref.ref(messages[0]))
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(
                Slow().ainvoke(messages, config={"callbacks": [callback]}), 0.001
            )

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(300)))

    asyncio.run(main())
    gc.collect()
    pending = callback._pending
    assert len(pending) <= PENDING
    assert all(type(v) is int for entry in pending.values() for v in entry)
    assert not any(ref() for ref in sent)  # no message is held
    run_sync(Provider(), [HumanMessage("and this one ends")], {"callbacks": [callback]})
    assert counter.observations == 1
