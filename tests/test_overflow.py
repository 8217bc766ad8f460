"""When the provider still answers that the context is too long: the middlewares
and ``TurnTrimmer.with_overflow_retry`` trim tighter and call again, with no
LLM call of their own, and say what they tried when they give up."""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Callable, Iterator
from itertools import cycle
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableLambda
from pydantic import Field

from langchain_turntrim import (
    CalibratedCounter,
    OverflowRetry,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    TurnTrimStateMiddleware,
)
from tests.conftest import NO_ASYNC_RUN_CONTEXT
from tests.providers import check_request
from tests.test_middleware import (
    Events,
    FakeModel,
    _ainvoke,
    _invoke,
    converse,
    make_agent,
    question,
    researcher,
)


class ProviderError(Exception):
    """An SDK's error: a message and, like openai's, a ``body``."""

    def __init__(self, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = body


def long_history(turns: int, words: int = 60) -> list[BaseMessage]:
    history: list[BaseMessage] = []
    for i in range(turns):
        history += [
            HumanMessage(f"q{i} " + "word " * words, id=f"h{i}"),
            AIMessage(f"a{i} " + "word " * words, id=f"a{i}"),
        ]
    return [*history, HumanMessage("and now?", id="now")]


def request_of(history: list[BaseMessage]) -> ModelRequest:
    return ModelRequest(
        model=researcher(),
        messages=history,  # type: ignore[arg-type]
        system_message=SystemMessage("Be brief."),
        tools=[],
    )


def counted(request: ModelRequest) -> int:
    """What the approximate counter counts of a request."""
    assert request.system_message is not None
    return count_tokens_approximately([request.system_message, *request.messages])


Handler = Callable[[ModelRequest], ModelResponse]


def wrap_sync(middleware: TurnTrimMiddleware, request: ModelRequest, handler: Handler) -> Any:
    return middleware.wrap_model_call(request, handler)


def wrap_async(middleware: TurnTrimMiddleware, request: ModelRequest, handler: Handler) -> Any:
    async def ahandler(sent: ModelRequest) -> ModelResponse:
        return handler(sent)

    return asyncio.run(middleware.awrap_model_call(request, ahandler))


Wrap = Callable[[TurnTrimMiddleware, ModelRequest, Handler], Any]


@pytest.fixture(params=[wrap_sync, wrap_async], ids=["wrap_model_call", "awrap_model_call"])
def wrap(request: pytest.FixtureRequest) -> Wrap:
    return request.param  # type: ignore[no-any-return]


# -- what counts as an overflow, and the figures read from it ----------------------------

_OPENAI = "This model's maximum context length is 8,192 tokens. However, your messages"
#: The providers' wordings: (figures given: tokens sent, the limit; the error).
WORDINGS = {
    "langchain": (None, None, ContextOverflowError("too long")),
    "openai": (
        9_000,
        8_192,
        ProviderError(
            f"Error code: 400 - {_OPENAI} resulted in 9,000 tokens. Please reduce it.",
            {"code": "context_length_exceeded"},
        ),
    ),
    "openai-completion": (  # the limit is the room the completion leaves
        7_000,
        6_192,
        ProviderError(
            "This model's maximum context length is 8192 tokens. However, you "
            "requested 9000 tokens (7000 in the messages, 2000 in the completion)."
        ),
    ),
    "openai-responses": (
        283_748,
        272_000,
        ProviderError(
            "Input tokens exceed the configured limit of 272000 tokens. Your "
            "messages resulted in 283748 tokens."
        ),
    ),
    "anthropic": (
        210_343,
        200_000,
        ProviderError(
            "Error code: 400 - {'type': 'error', 'error': {'type': "
            "'invalid_request_error', 'message': 'prompt is too long: 210343 "
            "tokens > 200000 maximum'}}"
        ),
    ),
    "gemini": (
        1_048_577,
        1_048_576,
        ProviderError(
            "400 The input token count (1048577) exceeds the maximum number of "
            "tokens allowed (1048576)."
        ),
    ),
    "no-figures": (
        None,
        None,
        ProviderError(
            "Your input exceeds the context window of this model.",
            {"error": {"code": "context_length_exceeded"}},
        ),
    ),
}


@pytest.mark.parametrize("wording", list(WORDINGS))
def test_an_overflow_is_recognised_with_its_figures(wrap: Wrap, wording: str) -> None:
    sent, limit, error = WORDINGS[wording]
    calls: list[int] = []

    def too_long(request: ModelRequest) -> ModelResponse:
        calls.append(counted(request))
        raise error

    middleware = TurnTrimMiddleware(max_tokens=1_500, overflow_retries=0)
    with pytest.raises(type(error)) as raised:
        wrap(middleware, request_of(long_history(10)), too_long)
    assert raised.value is error  # the provider's own error, with what was tried
    assert len(calls) == 1
    assert error.turntrim == {  # type: ignore[attr-defined]
        "overflow_retries": 0,
        "budget": 1_500,
        "overflows": [{"provider_tokens": sent, "provider_limit": limit}],
    }
    if sys.version_info >= (3, 11):
        assert any(note.startswith("langchain-turntrim") for note in error.__notes__)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad request: invalid tool schema"),
        ProviderError("rate limit reached for requests", {"code": "rate_limit_exceeded"}),
        TimeoutError("read timed out"),
    ],
)
def test_any_other_error_passes_through_untouched(wrap: Wrap, error: BaseException) -> None:
    calls: list[int] = []

    def broken(request: ModelRequest) -> ModelResponse:
        calls.append(1)
        raise error

    with pytest.raises(type(error)) as raised:
        wrap(TurnTrimMiddleware(max_tokens=1_500), request_of(long_history(10)), broken)
    assert raised.value is error
    assert calls == [1]
    assert not hasattr(error, "turntrim")


# -- how much tighter, how often -----------------------------------------------------------


@pytest.mark.parametrize("middleware_class", [TurnTrimMiddleware, TurnTrimStateMiddleware])
def test_the_retry_fits_the_provider_s_limit_in_the_counter_s_units(
    wrap: Wrap, middleware_class: type[TurnTrimMiddleware]
) -> None:
    """The provider counts twice what the counter counts, up to 1,000: the retry
    is trimmed to 1,000 less 2%, halved, and the next call starts there."""
    sizes: list[int] = []

    def twice_over_1000(request: ModelRequest) -> ModelResponse:
        sizes.append(counted(request))
        if 2 * sizes[-1] > 1_000:
            raise ProviderError(f"prompt is too long: {2 * sizes[-1]} tokens > 1000 maximum")
        return ModelResponse(result=[AIMessage("ok")])

    middleware = middleware_class(max_tokens=1_500)
    wrap(middleware, request_of(long_history(12)), twice_over_1000)
    assert len(sizes) == 2
    assert sizes[0] <= 1_500
    assert sizes[1] <= math.floor(1_000 * 0.98 * sizes[0] / (2 * sizes[0])) == 490
    # The tighter budget is kept: the next call does not overflow again.
    wrap(middleware, request_of(long_history(13)), twice_over_1000)
    assert len(sizes) == 3
    assert sizes[2] <= 490


def test_without_figures_the_retry_keeps_80_percent_of_what_was_sent(wrap: Wrap) -> None:
    sizes: list[int] = []

    def once_too_long(request: ModelRequest) -> ModelResponse:
        sizes.append(counted(request))
        if len(sizes) == 1:
            raise ContextOverflowError("context window exceeded")
        return ModelResponse(result=[AIMessage("ok")])

    wrap(TurnTrimMiddleware(max_tokens=1_500), request_of(long_history(12)), once_too_long)
    assert sizes[1] <= math.floor(0.8 * sizes[0]) < sizes[0] <= 1_500


def test_when_the_retries_run_out_the_provider_s_error_says_what_was_tried(wrap: Wrap) -> None:
    sizes: list[int] = []

    def always_too_long(request: ModelRequest) -> ModelResponse:
        sizes.append(counted(request))
        raise ProviderError(f"prompt is too long: {3 * sizes[-1]} tokens > 100 maximum")

    middleware = TurnTrimMiddleware(max_tokens=1_500, overflow_retries=2)
    with pytest.raises(ProviderError) as raised:
        wrap(middleware, request_of(long_history(10)), always_too_long)
    assert len(sizes) == 3
    assert sizes[0] > sizes[1] >= sizes[2]  # down to the newest turn
    figures = raised.value.turntrim  # type: ignore[attr-defined]
    assert figures["overflow_retries"] == 2
    assert figures["budget"] < 1_500
    assert figures["overflows"] == [
        {"provider_tokens": 3 * size, "provider_limit": 100} for size in sizes
    ]
    if sys.version_info >= (3, 11):
        (note,) = raised.value.__notes__
        assert note.startswith("langchain-turntrim: the context overflowed")


def test_a_retry_that_cannot_hold_the_newest_turn_raises_the_provider_s_error(
    wrap: Wrap,
) -> None:
    def too_long(request: ModelRequest) -> ModelResponse:
        raise ProviderError("prompt is too long: 90000 tokens > 10 maximum")

    middleware = TurnTrimMiddleware(max_tokens=1_500, on_overflow="raise")
    with pytest.raises(ProviderError) as raised:
        wrap(middleware, request_of(long_history(10)), too_long)
    assert "retry_refused" in raised.value.turntrim  # type: ignore[attr-defined]
    assert isinstance(raised.value.__cause__, TurnTrimOverflowError)


def test_overflow_retries_0_turns_recovery_off(wrap: Wrap) -> None:
    calls: list[int] = []

    def too_long(request: ModelRequest) -> ModelResponse:
        calls.append(1)
        raise ContextOverflowError("too long")

    middleware = TurnTrimMiddleware(max_tokens=1_500, overflow_retries=0)
    for _ in range(2):
        with pytest.raises(ContextOverflowError):
            wrap(middleware, request_of(long_history(10)), too_long)
    assert calls == [1, 1]


def test_a_calibrated_counter_learns_the_provider_s_count_instead(wrap: Wrap) -> None:
    """The provider's figure is fed to the calibration, and the budget itself
    stays: the counter now counts in the provider's units."""
    counter = CalibratedCounter(margin=0)
    sizes: list[int] = []

    def provider(request: ModelRequest) -> ModelResponse:
        sizes.append(counted(request))
        if 2 * sizes[-1] > 1_500:
            raise ProviderError(f"prompt is too long: {2 * sizes[-1]} tokens > 1500 maximum")
        return ModelResponse(result=[AIMessage("ok")])

    middleware = TurnTrimMiddleware(max_tokens=1_500, token_counter=counter)
    wrap(middleware, request_of(long_history(12)), provider)
    assert counter.observations == 1
    assert counter.ratio == pytest.approx(2, rel=0.05)
    assert middleware.trimmer.max_tokens == 1_500
    wrap(middleware, request_of(long_history(13)), provider)
    assert len(sizes) == 3  # the next call fits at once
    assert 2 * sizes[2] <= 1_500


# -- an agent on a provider that counts more ------------------------------------------------


class WindowedModel(FakeModel):
    """A model whose provider counts 30% more than LangChain's estimate (the
    tools it is bound to included), refuses a request over ``window`` of its
    tokens, with LangChain's error or Anthropic's wording (``style``), and
    reports each call's input tokens."""

    window: int = 2_000
    style: str = "langchain"
    overflows: int = 0
    accepted: list[int] = Field(default_factory=list)
    bound: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> WindowedModel:
        self.bound = list(tools)
        return self

    def provider(self, messages: list[BaseMessage]) -> int:
        return round(1.3 * count_tokens_approximately(messages, tools=self.bound))

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        tokens = self.provider(messages)
        if tokens > self.window:
            self.overflows += 1
            if self.style == "anthropic":
                text = f"prompt is too long: {tokens} tokens > {self.window} maximum"
                raise ProviderError(text, {"type": "invalid_request_error"})
            raise ContextOverflowError(f"{tokens} tokens > {self.window}")
        check_request(messages, messages)
        self.accepted.append(tokens)
        return super()._generate(messages, *args, **kwargs)


def windowed(**fields: Any) -> WindowedModel:
    call = {"name": "lookup", "args": {}, "id": "call", "type": "tool_call"}
    replies = [AIMessage("", tool_calls=[call]), AIMessage("It is settled. " * 10)]
    model = WindowedModel(messages=cycle(replies), **fields)
    model.usage = model.provider
    return model


@pytest.mark.parametrize("style", ["langchain", "anthropic"])
@pytest.mark.parametrize("middleware_class", [TurnTrimMiddleware, TurnTrimStateMiddleware])
@pytest.mark.parametrize(
    "run", [_invoke, pytest.param(_ainvoke, marks=NO_ASYNC_RUN_CONTEXT)], ids=["invoke", "ainvoke"]
)
def test_an_agent_on_a_provider_counting_30_percent_more_completes(
    run: Any, middleware_class: type[TurnTrimMiddleware], style: str
) -> None:
    model = windowed(style=style)
    agent = make_agent(middleware_class(max_tokens=model.window), model)
    events = Events()
    config = {"configurable": {"thread_id": "t"}, "callbacks": [events]}
    overflows = []
    for i in range(12):
        before = model.overflows
        run(agent, {"messages": [question(i, 40)]}, config)
        overflows.append(model.overflows - before)
    first = next(i for i, n in enumerate(overflows) if n)
    assert overflows[first] == 1  # recovered on the first retry
    assert sum(overflows[first + 1 :]) <= 1  # and at most once more
    assert all(tokens <= model.window for tokens in model.accepted)
    retries = [e for e in events.trims() if "overflow_retry" in e]
    assert len(retries) == sum(overflows)
    assert all(e["overflow_retry"] == 1 for e in retries)
    if style == "anthropic":
        assert all(e["provider_limit"] == model.window for e in retries)
        assert all(e["provider_tokens"] > model.window for e in retries)


@pytest.mark.parametrize("run", [_invoke, _ainvoke], ids=["invoke", "ainvoke"])
def test_an_agent_s_calibrated_counter_learns_the_provider_s_count(run: Any) -> None:
    model = windowed()
    counter = CalibratedCounter()
    agent = make_agent(TurnTrimMiddleware(model.window, token_counter=counter), model)
    converse(agent, run, [question(i, 80) for i in range(8)])
    assert model.overflows <= 1
    assert counter.observations == len(model.accepted) == 16
    assert counter.ratio == pytest.approx(1.3, rel=0.02)


# -- the Runnable ------------------------------------------------------------------------------


#: Every way to call a Runnable once.
CALLS = {
    "invoke": lambda chain, value: chain.invoke(value),
    "ainvoke": lambda chain, value: asyncio.run(chain.ainvoke(value)),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=list(CALLS))
def test_with_overflow_retry_recovers_and_remembers(call: Any) -> None:
    model = windowed(style="anthropic")
    chain = TurnTrimmer(max_tokens=model.window).with_overflow_retry(model)
    assert isinstance(chain, OverflowRetry)
    history = [SystemMessage("Be brief."), *long_history(20, words=80)]
    assert isinstance(call(chain, history), AIMessage)
    assert model.overflows == 1
    for turns in range(20, 30):
        call(chain, [SystemMessage("Be brief."), *long_history(turns, words=80)])
    assert model.overflows == 1  # what the first overflow taught is kept
    assert all(tokens <= model.window for tokens in model.accepted)


def test_with_overflow_retry_pipes_and_feeds_a_calibrated_counter() -> None:
    model = windowed()
    counter = CalibratedCounter()
    chain = RunnableLambda(long_history) | TurnTrimmer(
        max_tokens=model.window, token_counter=counter
    ).with_overflow_retry(model)
    assert isinstance(chain.invoke(25), AIMessage)
    assert all(isinstance(reply, AIMessage) for reply in chain.batch([5, 25]))
    assert counter.observations == len(model.accepted) == 3
    assert counter.ratio == pytest.approx(1.3, rel=0.02)


def test_with_overflow_retry_without_figures_keeps_80_percent() -> None:
    sizes: list[int] = []
    replies: Iterator[Exception | AIMessage] = iter(
        [ContextOverflowError("context window exceeded"), AIMessage("ok")]
    )

    def blind(messages: list[BaseMessage]) -> AIMessage:
        sizes.append(count_tokens_approximately(messages))
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    chain = TurnTrimmer(max_tokens=1_000).with_overflow_retry(RunnableLambda(blind))
    assert chain.invoke(long_history(30)).text == "ok"
    assert sizes[0] <= 1_000
    assert sizes[1] <= 800


def test_with_overflow_retry_gives_up_like_the_middleware() -> None:
    def too_long(messages: list[BaseMessage]) -> AIMessage:
        raise ProviderError("prompt is too long: 5000 tokens > 100 maximum")

    chain = TurnTrimmer(max_tokens=1_000, overflow_retries=0).with_overflow_retry(
        RunnableLambda(too_long)
    )
    with pytest.raises(ProviderError) as raised:
        chain.invoke(long_history(30))
    assert raised.value.turntrim["overflows"] == [  # type: ignore[attr-defined]
        {"provider_tokens": 5_000, "provider_limit": 100}
    ]
