"""Recovery from a provider's context-overflow error: trim tighter, call again, no LLM call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from langchain_turntrim import (
    CalibratedCounter,
    OverflowRetry,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimStateMiddleware,
)
from langchain_turntrim._overflow import overflow_of
from tests.providers import check_request

# -- recognising an overflow -------------------------------------------------------------


class ProviderError(Exception):
    """An SDK error: a message and, like openai's, a ``body``."""

    def __init__(self, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = body


@pytest.mark.parametrize(
    ("error", "sent", "limit"),
    [
        (ContextOverflowError("too long"), None, None),
        (
            ProviderError(
                "Error code: 400 - This model's maximum context length is 8,192 tokens. "
                "However, your messages resulted in 9,000 tokens. Please reduce the length.",
                {"code": "context_length_exceeded"},
            ),
            9000,
            8192,
        ),
        (
            ProviderError(
                "This model's maximum context length is 8192 tokens. However, you requested "
                "9000 tokens (7000 in the messages, 2000 in the completion)."
            ),
            7000,
            6192,
        ),
        (
            ProviderError(
                "Error code: 400 - {'type': 'error', 'error': {'type': "
                "'invalid_request_error', 'message': 'prompt is too long: "
                "210343 tokens > 200000 maximum'}}"
            ),
            210343,
            200000,
        ),
        (
            ProviderError(
                "400 The input token count (1048577) exceeds the maximum number of tokens "
                "allowed (1048576)."
            ),
            1048577,
            1048576,
        ),
        (
            ProviderError(
                "Your input exceeds the context window of this model.",
                {"error": {"code": "context_length_exceeded"}},
            ),
            None,
            None,
        ),
        (
            ProviderError(
                "Input tokens exceed the configured limit of 272000 tokens. Your messages "
                "resulted in 283748 tokens."
            ),
            283748,
            272000,
        ),
    ],
)
def test_overflows_are_recognised_with_their_figures(
    error: BaseException, sent: int | None, limit: int | None
) -> None:
    found = overflow_of(error)
    assert found is not None
    assert (found.sent, found.limit) == (sent, limit)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad request: invalid tool schema"),
        ProviderError("rate limit reached for requests", {"code": "rate_limit_exceeded"}),
        TimeoutError("read timed out"),
    ],
)
def test_other_errors_are_not_overflows(error: BaseException) -> None:
    assert overflow_of(error) is None


# -- a provider that counts more than the estimate ---------------------------------------


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return f"{query}: " + "the archive holds many long records on it. " * 12


def provider_count(messages: Sequence[BaseMessage]) -> int:
    """The provider's own tokenizer: 30% more than LangChain's estimate."""
    return round(count_tokens_approximately(messages) * 1.3)


class WindowedFake(BaseChatModel):
    """A tool-calling model with a context window of ``window`` of its own tokens.

    Over the window it raises like ``style``: LangChain's ``ContextOverflowError``,
    or an Anthropic-style error with the figures. Each call reports its input
    tokens (as providers do in ``usage_metadata``).
    """

    window: int
    style: str = "langchain"
    calls: list[int] = Field(default_factory=list)
    overflows: int = 0

    @property
    def _llm_type(self) -> str:
        return "windowed-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> WindowedFake:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        tokens = provider_count(messages)
        if tokens > self.window:
            self.overflows += 1
            if self.style == "anthropic":
                text = f"prompt is too long: {tokens} tokens > {self.window} maximum"
                raise ProviderError(text, {"type": "invalid_request_error"})
            raise ContextOverflowError(f"{tokens} tokens > {self.window}")
        check_request(messages, messages)
        self.calls.append(tokens)
        last = messages[-1]
        n = len(self.calls)
        usage = {"input_tokens": tokens, "output_tokens": 5, "total_tokens": tokens + 5}
        if isinstance(last, HumanMessage):
            call = {"name": "lookup", "args": {"query": f"q{n}"}, "id": f"c{n}"}
            reply = AIMessage("", tool_calls=[call], usage_metadata=usage)
        elif isinstance(last, ToolMessage) and n % 3:
            call = {"name": "lookup", "args": {"query": f"more {n}"}, "id": f"c{n}"}
            reply = AIMessage("Looking further.", tool_calls=[call], usage_metadata=usage)
        else:
            reply = AIMessage(f"Answer {n}: " + "it is settled. " * 10, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run_agent(agent: Any, inputs: Any, config: Any, mode: str) -> Any:
    if mode == "sync":
        return agent.invoke(inputs, config)
    return asyncio.run(agent.ainvoke(inputs, config))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


WINDOW = 2_000


@pytest.mark.parametrize("style", ["langchain", "anthropic"])
@pytest.mark.parametrize("middleware_class", [TurnTrimMiddleware, TurnTrimStateMiddleware])
def test_an_agent_on_a_provider_counting_30_percent_more_completes(
    mode: str, style: str, middleware_class: type[TurnTrimMiddleware]
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = WindowedFake(window=WINDOW, style=style)
    middleware = middleware_class(max_tokens=WINDOW)  # the estimate's units: 30% short
    agent = create_agent(
        model,
        tools=[lookup],
        system_prompt="Be brief.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"{mode}-{style}"}}
    overflows_per_run = []
    for i in range(12):
        before = model.overflows
        question = f"Question {i}: tell me about topic {i} " + "in detail " * 20
        run_agent(agent, {"messages": [HumanMessage(question)]}, config, mode)
        overflows_per_run.append(model.overflows - before)
    first = next(i for i, n in enumerate(overflows_per_run) if n)
    assert overflows_per_run[first] == 1  # recovered on the first retry
    assert sum(overflows_per_run[first + 1 :]) <= 1  # at most one more after it
    assert all(tokens <= WINDOW for tokens in model.calls)


def test_a_calibrated_counter_learns_the_providers_count(mode: str) -> None:
    model = WindowedFake(window=WINDOW)
    counter = CalibratedCounter("approximate")
    middleware = TurnTrimMiddleware(max_tokens=WINDOW, token_counter=counter)
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    history: list[BaseMessage] = []
    for i in range(8):
        history.append(HumanMessage(f"Question {i} " + "in detail " * 40))
        history = run_agent(agent, {"messages": history}, {}, mode)["messages"]
    assert model.overflows <= 2
    assert counter.observations >= 8
    assert 1.15 < counter.ratio < 1.45


def request_over(model: BaseChatModel) -> ModelRequest[Any]:
    history: list[BaseMessage] = []
    for i in range(10):
        history += [HumanMessage(f"q{i} " + "word " * 60), AIMessage(f"a{i} " + "word " * 60)]
    history.append(HumanMessage("now"))
    return ModelRequest(
        model=model,
        messages=cast("list[AnyMessage]", history),
        system_message=SystemMessage("sys"),
        tools=[],
    )


def test_retries_run_out_and_the_providers_error_carries_the_figures() -> None:
    calls: list[int] = []

    def always_too_long(request: ModelRequest[Any]) -> ModelResponse[Any]:
        calls.append(count_tokens_approximately([*request.messages]) + 2)
        msg = f"prompt is too long: {calls[-1] * 3} tokens > 100 maximum"
        raise ProviderError(msg)

    middleware = TurnTrimMiddleware(max_tokens=1_500, overflow_retries=2)
    with pytest.raises(ProviderError) as raised:
        middleware.wrap_model_call(request_over(WindowedFake(window=1)), always_too_long)
    figures = raised.value.turntrim  # type: ignore[attr-defined]
    assert figures["overflow_retries"] == 2
    assert len(calls) == 3
    assert calls[0] > calls[1] >= calls[2]  # down to the newest turn
    assert [o["provider_limit"] for o in figures["overflows"]] == [100, 100, 100]
    notes = getattr(raised.value, "__notes__", ["langchain-turntrim"])  # Python 3.11+
    assert any("langchain-turntrim" in note for note in notes)


def test_no_retry_when_overflow_retries_is_0_and_other_errors_pass_through() -> None:
    calls: list[int] = []

    def too_long(request: ModelRequest[Any]) -> ModelResponse[Any]:
        calls.append(1)
        raise ContextOverflowError("too long")

    with pytest.raises(ContextOverflowError) as raised:
        TurnTrimMiddleware(max_tokens=1_500, overflow_retries=0).wrap_model_call(
            request_over(WindowedFake(window=1)), too_long
        )
    assert calls == [1]
    assert raised.value.turntrim["overflow_retries"] == 0  # type: ignore[attr-defined]

    def broken(request: ModelRequest[Any]) -> ModelResponse[Any]:
        calls.append(2)
        raise ValueError("schema")

    with pytest.raises(ValueError, match="schema") as other:
        TurnTrimMiddleware(max_tokens=1_500).wrap_model_call(
            request_over(WindowedFake(window=1)), broken
        )
    assert calls == [1, 2]
    assert not hasattr(other.value, "turntrim")


def test_a_retry_that_cannot_hold_the_skeleton_raises_the_providers_error() -> None:
    def too_long(request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise ProviderError("prompt is too long: 90000 tokens > 10 maximum")

    middleware = TurnTrimMiddleware(max_tokens=1_500, on_overflow="raise")
    with pytest.raises(ProviderError) as raised:
        middleware.wrap_model_call(request_over(WindowedFake(window=1)), too_long)
    assert "retry_refused" in raised.value.turntrim  # type: ignore[attr-defined]
    assert type(raised.value.__cause__).__name__ == "TurnTrimOverflowError"


def test_the_retry_shows_in_the_trace(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []

    def once_too_long(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(len(request.messages))
        if len(seen) == 1:
            raise ProviderError("prompt is too long: 3000 tokens > 1000 maximum")
        return ModelResponse(result=[AIMessage("ok")])

    middleware = TurnTrimMiddleware(max_tokens=1_500)
    with caplog.at_level(logging.DEBUG, logger="langchain_turntrim"):
        middleware.wrap_model_call(request_over(WindowedFake(window=1)), once_too_long)
    assert seen[0] > seen[1]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("trimmed")]
    assert len(lines) == 2
    assert "overflow_retry" not in lines[0]
    assert "overflow_retry=1, provider_tokens=3000, provider_limit=1000" in lines[1]


@pytest.mark.parametrize("value", [-1, 1.5, True, "1"])
def test_bad_overflow_retries_are_refused_at_construction(value: object) -> None:
    with pytest.raises((TypeError, ValueError), match="overflow_retries"):
        TurnTrimMiddleware(max_tokens=100, overflow_retries=value)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match="overflow_retries"):
        TurnTrimmer(max_tokens=100).with_overflow_retry(WindowedFake(window=1), retries=value)  # type: ignore[arg-type]


# -- the Runnable -----------------------------------------------------------------------


def long_history(turns: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("Be brief.")]
    for i in range(turns):
        history += [HumanMessage(f"q{i} " + "word " * 80), AIMessage(f"a{i} " + "word " * 80)]
    history.append(HumanMessage("and now?"))
    return history


@pytest.mark.parametrize("call", ["invoke", "ainvoke"])
def test_with_overflow_retry_recovers_and_remembers(call: str) -> None:
    model = WindowedFake(window=WINDOW, style="anthropic")
    chain = TurnTrimmer(max_tokens=WINDOW).with_overflow_retry(model)
    assert isinstance(chain, OverflowRetry)

    def run(history: list[BaseMessage]) -> Any:
        if call == "invoke":
            return chain.invoke(history)
        return asyncio.run(chain.ainvoke(history))

    first = run(long_history(20))
    assert isinstance(first, AIMessage)
    assert model.overflows == 1
    for turns in range(20, 30):
        run(long_history(turns))
    assert model.overflows == 1  # what the first overflow taught is kept
    assert all(tokens <= WINDOW for tokens in model.calls)


def test_with_overflow_retry_pipes_like_any_runnable() -> None:
    from langchain_core.runnables import RunnableLambda

    model = WindowedFake(window=WINDOW)
    chain = RunnableLambda(long_history) | TurnTrimmer(max_tokens=WINDOW).with_overflow_retry(model)
    assert isinstance(chain.invoke(25), AIMessage)
    assert chain.batch([5, 25]) != []


def test_without_figures_the_budget_shrinks_to_80_percent() -> None:
    budgets: list[int] = []

    class Blind(WindowedFake):
        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            budgets.append(count_tokens_approximately(messages))
            if len(budgets) == 1:
                raise ContextOverflowError("context window exceeded")
            return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])

    TurnTrimmer(max_tokens=1_000).with_overflow_retry(Blind(window=0)).invoke(long_history(30))
    assert budgets[0] <= 1_000
    assert budgets[1] <= 800
