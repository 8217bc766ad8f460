"""Trims priced by the prompt cache: the rules table, ``trim_to="auto"``, the
middleware's per-thread cache clock and what each thread's cache did."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_turntrim import TrimOptions, TurnTrimmer, TurnTrimMiddleware, per_message, trim_turns
from langchain_turntrim.cache_pricing import (
    CACHE_RULES,
    CACHE_RULES_DATE,
    DEFAULT_CACHE_PRICE,
    CachePrice,
    CacheRule,
    CacheTotals,
    cache_price_for,
)
from tests.conftest import NO_ASYNC_RUN_CONTEXT


def length(message: BaseMessage) -> int:
    return len(str(message.content))


#: A token is a character: the provider below counts the same way.
LENGTH = per_message(length)
SYSTEM = "You are terse. " * 10  # 150 tokens
ONE_HOUR = {"cache_control": {"type": "ephemeral", "ttl": "1h"}}

# -- the rules table ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "read", "write", "ttl", "least", "name"),
    [
        ("claude-sonnet-4-5-20250929", 0.1, 1.25, 300, 1024, "anthropic claude (5m)"),
        ("anthropic:claude-opus-4-5", 0.1, 1.25, 300, 4096, "anthropic claude-opus-4-5 (5m)"),
        ("claude-opus-4-6", 0.1, 1.25, 300, 4096, "anthropic claude-opus-4-5 (5m)"),
        ("Claude-Haiku-4-5", 0.1, 1.25, 300, 4096, "anthropic claude-haiku-4-5 (5m)"),
        ("claude-sonnet-4-6", 0.1, 1.25, 300, 2048, "anthropic claude-sonnet-4-6 (5m)"),
        ("claude-3-5-haiku-latest", 0.1, 1.25, 300, 2048, "anthropic claude-3-5-haiku (5m)"),
        ("claude-opus-5", 0.1, 1.25, 300, 1024, "anthropic claude (5m)"),  # newer: "claude"
        ("gpt-4.1-mini", 0.25, 1.0, 300, 1024, "openai gpt-4.1 (in_memory)"),
        ("openai/gpt-4o-2024-08-06", 0.5, 1.0, 300, 1024, "openai gpt-4o (in_memory)"),
        ("openai:o3-mini", 0.25, 1.0, 300, 1024, "openai gpt-4.1 (in_memory)"),
        ("gpt-5-mini", 0.1, 1.0, 300, 1024, "openai gpt-5 (in_memory)"),
        ("gpt-5.6", 0.1, 1.25, 300, 1024, "openai gpt-5.6 (in_memory)"),
        ("gpt-6-pro", 0.1, 1.25, 300, 1024, "openai gpt-5.6 (in_memory)"),
        ("anthropic/claude-sonnet-4-5:beta", 0.1, 1.25, 300, 1024, "anthropic claude (5m)"),
    ],
)
def test_a_model_gets_the_row_of_its_longest_prefix(
    model: str, read: float, write: float, ttl: float, least: int, name: str
) -> None:
    assert cache_price_for(model) == CachePrice(read, write, ttl, least, name)


class Named:
    def __init__(self, **names: Any) -> None:
        self.__dict__.update(names)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("llama-3-70b", "default (no rule matches 'llama-3-70b')"),
        ("anthropic.claude-v2", "default (no rule matches 'anthropic.claude-v2')"),  # Bedrock
        (None, "default (no model name)"),
        (Named(), "default (no model name)"),
        (Named(model_id="mistral-large"), "default (no rule matches 'mistral-large')"),
    ],
)
def test_a_model_no_row_matches_gets_the_default_named_for_it(model: object, name: str) -> None:
    price = cache_price_for(model)
    assert price.name == name
    assert (price.read, price.write, price.ttl, price.min_prefix) == (0.1, 1.25, 300, 1024)
    assert CachePrice(0.1, 1.25, 300, 1024, "default") == DEFAULT_CACHE_PRICE


def test_chat_models_ttls_and_your_own_rules() -> None:
    assert cache_price_for(Named(model_name="gpt-4o")).read == 0.5
    assert cache_price_for(Named(model="claude-sonnet-4-5")).min_prefix == 1024
    hour = cache_price_for("claude-sonnet-4-5", ttl="1h")
    assert (hour.write, hour.ttl, hour.name) == (2.0, 3600, "anthropic claude (1h)")
    assert cache_price_for("gpt-4.1", ttl="24h").ttl == 86_400
    assert cache_price_for("claude-sonnet-4-5", ttl="7d").ttl == 300  # unknown: the default
    mine = CacheRule("acme", ("acme-",), 0.2, {"10m": (600.0, 1.5)}, 256)
    assert cache_price_for("acme-9", rules=[mine]) == CachePrice(0.2, 1.5, 600, 256, "acme acme-")
    options = TrimOptions(max_tokens=8_000, trim_to="auto", cache_price=[mine])
    assert options.price_for("acme-large").ttl == 600
    assert options.price_for("claude-sonnet-4-5").name.startswith("default")
    fixed = CachePrice(0.3, 1.1, 60, 10)
    assert TrimOptions(max_tokens=8_000, cache_price=fixed).price_for("gpt-4o") is fixed
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", CACHE_RULES_DATE)
    for rule in CACHE_RULES:  # every row is reached by each of its own prefixes
        assert all(cache_price_for(p).name == rule.price().name for p in rule.models)


FIVE = {"5m": (300.0, 1.25)}
RULE: dict[str, Any] = {"provider": "x", "models": ("a",), "read": 0.1, "writes": FIVE}


@pytest.mark.parametrize(
    ("build", "fields", "error", "says"),
    [
        (CachePrice, {"read": -0.1}, ValueError, "CachePrice.read must be finite and >= 0"),
        (CachePrice, {"ttl": 0}, ValueError, "CachePrice.ttl must be finite and > 0, got 0"),
        (CachePrice, {"read": True}, TypeError, "CachePrice.read must be a number, got bool"),
        (CachePrice, {"min_prefix": -1}, ValueError, "CachePrice.min_prefix must be >= 0, got -1"),
        (CachePrice, {"min_prefix": 1.5}, TypeError, "CachePrice.min_prefix must be an int"),
        (CachePrice, {"name": 3}, TypeError, "CachePrice.name must be a str, got int 3"),
        (CacheRule, {"provider": 3}, TypeError, "CacheRule.provider must be a str"),
        (CacheRule, {"models": "claude"}, TypeError, "CacheRule.models must be a tuple"),
        (CacheRule, {"models": ()}, TypeError, "CacheRule.models must be a tuple"),
        (CacheRule, {"writes": {"5m": 1.25}}, TypeError, "must be (seconds, price)"),
        (CacheRule, {"writes": {}}, ValueError, "writes must map at least one TTL"),
        (CacheRule, {"read": -1}, ValueError, "read must be finite and >= 0"),
        (CacheRule, {"writes": {"5m": (0.0, 1.25)}}, ValueError, "ttl must be finite and > 0"),
        (TurnTrimmer, {"cache_price": 0.1}, TypeError, "cache_price must be a CachePrice"),
        (TurnTrimmer, {"cache_price": []}, ValueError, "at least one CacheRule"),
        (TurnTrimmer, {"cache_price": [DEFAULT_CACHE_PRICE]}, TypeError, "cache_price[0] must"),
        (TurnTrimmer, {"context_value": -1}, ValueError, "context_value must be finite and >= 0"),
        (TurnTrimMiddleware, {"context_value": "1"}, TypeError, "context_value must be a number"),
    ],
)  # fmt: skip
def test_bad_rules_and_prices_are_refused_naming_the_field(
    build: Callable[..., object], fields: dict[str, Any], error: type[Exception], says: str
) -> None:
    if build is CacheRule:
        fields = {**RULE, **fields}
    arguments = () if build in (CacheRule, CachePrice) else (8_000,)
    with pytest.raises(error) as raised:
        build(*arguments, **fields)
    assert says in str(raised.value)


# -- trim_to="auto", priced ---------------------------------------------------------------------


def chat(turns: int, size: int = 150, system: int = 100) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("s" * system, id="s")]
    for i in range(turns):
        history += [HumanMessage("u" * size, id=f"h{i}"), AIMessage("a" * size, id=f"a{i}")]
    return history


def auto(history: list[BaseMessage], budget: int, price: CachePrice, value: float = 1.0) -> Any:
    """How "auto" chose its level (``trim_to`` None: the greedy trim)."""
    trimmer = TurnTrimmer(
        budget, trim_to="auto", token_counter=LENGTH, cache_price=price, context_value=value
    )
    return trimmer.report(history).auto


def level(history: list[BaseMessage], budget: int, price: CachePrice, value: float = 1.0) -> int:
    """The level "auto" cuts to (the budget: the greedy trim)."""
    return auto(history, budget, price, value)["trim_to"] or budget


def pair(values: list[float]) -> st.SearchStrategy[list[float]]:
    return st.lists(st.sampled_from(values), min_size=2, max_size=2, unique=True).map(sorted)


@settings(max_examples=60)
@given(
    shape=st.tuples(st.integers(1_000, 60_000), st.integers(0, 8_000), st.integers(1, 1_500)),
    turns=st.integers(1, 40),
    prices=st.tuples(pair([0, 0.1, 0.25, 0.5, 0.9]), pair([1, 1.25, 2, 3]), pair([0.5, 1, 3])),
)
def test_the_level_is_priced_by_the_rules(
    shape: tuple[int, int, int], turns: int, prices: tuple[list[float], ...]
) -> None:
    """Dearer writes cut deeper (or as deep), dearer context shallower; cheaper
    reads cut shallower when a write costs more than the context it saves and
    deeper when less. Levels are halvings of the budget that leave the
    cacheable minimum and the pinned tokens, never finer than the growth."""
    (budget, system, size), ((r1, r2), (w1, w2), (v1, v2)) = shape, prices
    history = chat(turns, size, system)
    chosen = auto(history, budget, CachePrice(r1, w1), v1)
    base = chosen["trim_to"] or budget
    assert level(history, budget, CachePrice(r1, w2), v1) <= base
    assert level(history, budget, CachePrice(r1, w1), v2) >= base
    cheap, dear = (level(history, budget, CachePrice(r, w2), v1) for r in (r1, r2))
    assert cheap >= dear if w2 >= v1 else cheap <= dear
    step = budget - base
    if step:
        assert step in {budget >> k for k in range(1, budget.bit_length())}
        assert base >= 1024
        assert step <= budget - system
        assert step >= chosen["growth_per_call"] - 0.05


def test_dearer_writes_cut_deeper_as_the_guide_says() -> None:
    """32k, 100 pinned, about 300 tokens a call: 5-minute writes cut to 28k,
    1-hour writes to 24k."""
    history = chat(80)
    assert level(history, 32_000, cache_price_for("claude-sonnet-4-5")) == 28_000
    assert level(history, 32_000, cache_price_for("claude-sonnet-4-5", ttl="1h")) == 24_000
    # Context worth far more than input: the finest halving at or above the
    # growth per call (32,000 / 64 = 500 >= 298).
    assert level(history, 32_000, cache_price_for("claude-sonnet-4-5"), value=1e6) == 31_500


@pytest.mark.parametrize(
    ("price", "budget"),
    [(CachePrice(min_prefix=40_000), 32_000), (cache_price_for("claude-opus-4-5"), 4_000)],
)
def test_a_budget_below_the_cacheable_minimum_gets_the_greedy_trim(
    price: CachePrice, budget: int
) -> None:
    trimmer = TurnTrimmer(budget, trim_to="auto", token_counter=LENGTH, cache_price=price)
    report = trimmer.report(chat(80))
    assert report.auto is not None
    assert report.auto["trim_to"] is None
    assert (
        report.kept_indices
        == TurnTrimmer(budget, token_counter=LENGTH).report(chat(80)).kept_indices
    )


def test_auto_says_how_it_chose_and_is_stateless() -> None:
    history = chat(110)
    trimmer = TurnTrimmer(16_000, trim_to="auto", token_counter=LENGTH)
    report = trimmer.report(history)
    greedy = TurnTrimmer(16_000, token_counter=LENGTH).report(history)
    assert report.auto == {
        "trim_to": 12_000,
        "cache_rule": "default (no model name)",
        "cold": False,
        "growth_per_call": round((150 + 63 * 300) / 64, 1),
        "greedy_tokens_after": greedy.tokens_after,
        "greedy_keep_from": greedy.plan.keep_from,
    }
    assert report.summary()["auto"] == report.auto
    assert report.tokens_after <= 16_000
    assert report.dropped_turns > greedy.dropped_turns  # cut down to about 12,000
    assert report.plan.trim_to == 12_000
    again = TurnTrimmer(16_000, trim_to="auto", token_counter=LENGTH).report(list(history))
    assert again.kept_indices == report.kept_indices == trimmer.report(history).kept_indices
    kept = trim_turns(history, max_tokens=16_000, trim_to="auto", token_counter=LENGTH)
    assert kept == report.kept
    assert TurnTrimmer(16_000, trim_to=12_000, token_counter=LENGTH).report(history).auto is None
    model = Named(model_name="claude-opus-4-5", profile={"max_input_tokens": 200_000})
    sized = TurnTrimmer.for_model(model, trim_to="auto").report(history).auto
    assert sized is not None
    assert sized["cache_rule"] == "anthropic claude-opus-4-5 (5m)"


# -- the middleware in agent runs ----------------------------------------------------------------


@pytest.fixture
def idle(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Idle time passing: ``time.monotonic`` (the middlewares' cache clock,
    ``langchain_turntrim.cache_pricing._clock``) moved on by some seconds."""
    real, offset = time.monotonic, [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: real() + offset[0])

    def wait(seconds: float) -> None:
        offset[0] += seconds

    return wait


class Provider(BaseChatModel):
    """A chat model whose provider caches the previous request for ``ttl``
    seconds (a hit is the common prefix of one at least ``min_prefix`` long)
    and reports it in ``style``: LangChain's usage details, Anthropic's or
    OpenAI's raw figures, or not at all."""

    model_name: str = "claude-sonnet-4-5"
    style: str = "usage"
    ttl: float = 300.0
    min_prefix: int = 1024
    log: list[tuple[list[BaseMessage], int, int, int]] = Field(default_factory=list)
    previous: tuple[float, list[BaseMessage]] | None = None

    @property
    def _llm_type(self) -> str:
        return "caching-fake"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        now, size, hit = time.monotonic(), sum(map(length, messages)), 0
        if self.previous and now - self.previous[0] <= self.ttl:
            before = self.previous[1]
            if sum(map(length, before)) >= self.min_prefix:
                for a, b in zip(messages, before, strict=False):
                    if (a.id, a.content) != (b.id, b.content):
                        break
                    hit += length(a)
        written = size - hit if size >= self.min_prefix else 0
        self.previous = (now, list(messages))
        self.log.append((list(messages), size, hit, written))
        usage: Any = {"input_tokens": size, "output_tokens": 1, "total_tokens": size + 1}
        anthropic = {"cache_read_input_tokens": hit, "cache_creation_input_tokens": written}
        raw: dict[str, Any] = {
            "anthropic": {"usage": anthropic},
            "openai": {"token_usage": {"prompt_tokens_details": {"cached_tokens": hit}}},
        }
        if self.style == "usage":
            usage["input_token_details"] = {"cache_read": hit, "cache_creation": written}
        usage = None if self.style == "none" else usage
        reply = AIMessage("ok", usage_metadata=usage, response_metadata=raw.get(self.style, {}))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def cost(self, price: CachePrice) -> float:
        """What the calls made cost by this provider's figures, at ``price``."""
        return sum(h * price.read + w * price.write + s - h - w for _, s, h, w in self.log)


class Settings(AgentMiddleware):
    """Puts model settings in each request, as a caching middleware would (and
    routes it to ``model``, as a routing middleware would)."""

    def __init__(self, model: Any = None, **settings: Any) -> None:
        super().__init__()
        self.model, self.settings = model, settings

    def _override(self, request: ModelRequest) -> ModelRequest:
        settings = {**request.model_settings, **self.settings}
        return request.override(model=self.model or request.model, model_settings=settings)

    def wrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return handler(self._override(request))

    async def awrap_model_call(self, request: ModelRequest, handler: Any) -> Any:
        return await handler(self._override(request))


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "turntrim":
            self.seen.append(data)


class Agent:
    """A ``create_agent`` run with ``middleware``, called sync or async; each
    ``say`` is one model call on thread ``thread``, and returns its trim."""

    def __init__(
        self,
        middleware: TurnTrimMiddleware,
        how: str,
        model: Provider | None = None,
        settings: dict[str, Any] | None = None,
        routed: Provider | None = None,
    ) -> None:
        self.model, self.how, self.events = routed or model or Provider(), how, Events()
        stack = [Settings(routed, **settings or {}), middleware]
        saver = InMemorySaver()
        self.agent = create_agent(
            model or self.model, middleware=stack, checkpointer=saver, system_prompt=SYSTEM
        )
        self.state: list[BaseMessage] = []

    def say(self, *messages: BaseMessage, thread: str = "t") -> dict[str, Any]:
        config: Any = {"configurable": {"thread_id": thread}, "callbacks": [self.events]}
        run: Any = {"messages": list(messages)}
        if self.how == "sync":
            result = self.agent.invoke(run, config)
        else:
            result = asyncio.run(self.agent.ainvoke(run, config))
        self.state = result["messages"][:-1]  # what the call was asked to send
        return self.events.seen[-1]


def turns(n: int, size: int = 200) -> list[BaseMessage]:
    pairs = (
        (HumanMessage(f"h{i} " + "x" * size), AIMessage(f"a{i} " + "y" * size)) for i in range(n)
    )
    return [m for pair in pairs for m in pair]


def question(i: int, size: int = 400) -> HumanMessage:
    return HumanMessage(f"q{i} " + "z" * size)


@pytest.mark.parametrize("how", ["sync", pytest.param("async", marks=NO_ASYNC_RUN_CONTEXT)])
def test_a_cold_call_cuts_at_once_and_warm_calls_keep_its_cut(
    how: str, idle: Callable[[float], None]
) -> None:
    middleware = TurnTrimMiddleware(12_000, token_counter=LENGTH, trim_to="auto")
    agent = Agent(middleware, how)
    first = agent.say(*turns(26), question(0, 200))  # 10,941 tokens: fits
    assert first["auto"]["cold"] is False  # a thread never seen: its cache may be warm
    assert first["dropped_turns"] == 0
    idle(301)  # past the 5 minutes: the cache is gone, a cut costs nothing extra
    cold = agent.say(question(1, 200))
    assert cold["auto"]["cold"] is True
    assert cold["auto"]["greedy_tokens_after"] <= 12_000  # it still fit...
    assert cold["dropped_turns"] > 0  # ...and was cut all the same
    kept, moves = agent.model.log[-1][0][1], 0
    for i in range(2, 24):  # warm calls, the history growing
        idle(30)
        warm = agent.say(question(i))
        assert warm["auto"]["cold"] is False
        assert warm["tokens_after"] <= 12_000
        start = next(k for k, m in enumerate(agent.state) if m.id == kept.id)
        rest = len(SYSTEM) + sum(map(length, agent.state[start:]))
        now = agent.model.log[-1][0][1]
        if rest <= 12_000:  # the previous cut still fits: it stays
            assert now.id == kept.id
        else:  # forced
            moves += 1
            assert agent.state.index(now) > start
        kept = now
    assert moves >= 1
    idle(301)
    assert agent.say(question(99))["auto"]["cold"] is True


def test_threads_are_timed_apart(idle: Callable[[float], None]) -> None:
    middleware = TurnTrimMiddleware(12_000, token_counter=LENGTH, trim_to="auto")
    agent = Agent(middleware, "sync")
    agent.say(*turns(26), question(0, 200), thread="a")
    idle(301)
    assert agent.say(question(1), thread="a")["auto"]["cold"] is True
    other = agent.say(*turns(26), question(0, 200), thread="b")  # idle, but never seen
    assert other["auto"]["cold"] is False
    assert other["dropped_turns"] == 0
    idle(200)  # "a" called 200 s ago, "b" a moment later: both warm
    assert agent.say(question(2), thread="b")["auto"]["cold"] is False
    assert agent.say(question(2), thread="a")["auto"]["cold"] is False
    assert middleware.cache_totals("a").calls == 3
    assert middleware.cache_totals("b").calls == 2
    assert middleware.cache_totals("c") == CacheTotals()


@pytest.mark.parametrize(
    ("model", "settings", "wait", "rule", "cold"),
    [
        ("claude-sonnet-4-5", {}, 301, "anthropic claude (5m)", True),
        ("claude-sonnet-4-5", {"cache_control": {}}, 301, "anthropic claude (5m)", True),
        ("claude-sonnet-4-5", ONE_HOUR, 301, "anthropic claude (1h)", False),
        ("claude-sonnet-4-5", ONE_HOUR, 3_601, "anthropic claude (1h)", True),
        ("gpt-4.1", {}, 301, "openai gpt-4.1 (in_memory)", True),
        ("gpt-4.1", {"prompt_cache_retention": "24h"}, 3 * 3_600, "openai gpt-4.1 (24h)", False),
        ("llama-3", {}, 301, "default (no rule matches 'llama-3')", True),
        ("acme-large", {}, 400, "acme acme-", False),
    ],
)  # fmt: skip
def test_each_call_is_priced_by_its_model_and_the_ttl_its_request_asks_for(
    model: str,
    settings: dict[str, Any],
    wait: float,
    rule: str,
    cold: bool,
    idle: Callable[[float], None],
) -> None:
    rules = [*CACHE_RULES, CacheRule("acme", ("acme-",), 0.2, {"10m": (600.0, 1.5)}, 256)]
    middleware = TurnTrimMiddleware(12_000, token_counter=LENGTH, trim_to="auto", cache_price=rules)
    agent = Agent(middleware, "sync", Provider(model_name=model), settings)
    assert agent.say(*turns(10), question(0))["auto"]["cache_rule"] == rule
    idle(wait)
    second = agent.say(question(1))["auto"]
    assert (second["cache_rule"], second["cold"]) == (rule, cold)


def conversation(agent: Agent, idle: Callable[[float], None]) -> None:
    """Twelve calls growing past a 8,000 budget, one after the cache expired."""
    agent.say(*turns(12), question(0))
    for i, wait in enumerate([20, 40, 400, 10, 30, 60, 5, 20, 90, 30, 15], start=1):
        idle(wait)
        agent.say(question(i, 300 + 40 * i))


@pytest.mark.parametrize("style", ["usage", "anthropic", "openai"])
@pytest.mark.parametrize("how", ["sync", pytest.param("async", marks=NO_ASYNC_RUN_CONTEXT)])
def test_cache_totals_add_up_what_the_provider_reports(
    style: str, how: str, idle: Callable[[float], None]
) -> None:
    middleware = TurnTrimMiddleware(8_000, token_counter=LENGTH, trim_to="auto")
    agent = Agent(middleware, how, Provider(style=style))
    conversation(agent, idle)
    log, price = agent.model.log, cache_price_for("claude-sonnet-4-5")
    totals = middleware.cache_totals("t")
    assert (totals.calls, totals.reported_calls) == (12, 12)
    assert totals.input_tokens == sum(s for _, s, _, _ in log)
    assert totals.hit_tokens == sum(h for _, _, h, _ in log) > 0
    if style == "openai":  # no write figure: every token not read is written
        assert totals.written_tokens == sum(s - h for _, s, h, _ in log)
        assert totals.cost == pytest.approx(sum(h * 0.1 + (s - h) * 1.25 for _, s, h, _ in log))
    else:
        assert totals.written_tokens == sum(w for _, _, _, w in log)
        assert totals.cost == pytest.approx(agent.model.cost(price))


def test_cache_totals_are_estimated_when_not_reported(idle: Callable[[float], None]) -> None:
    """The estimate takes a warm thread's unchanged prefix as read: what the
    provider above reports."""
    totals = []
    for style in ("none", "usage"):
        middleware = TurnTrimMiddleware(8_000, token_counter=LENGTH, trim_to="auto")
        conversation(Agent(middleware, "sync", Provider(style=style)), idle)
        totals.append(middleware.cache_totals("t"))
    estimated, reported = totals
    assert (estimated.calls, estimated.reported_calls, reported.reported_calls) == (12, 0, 12)
    assert estimated.input_tokens == reported.input_tokens
    assert estimated.hit_tokens == reported.hit_tokens
    assert estimated.written_tokens == reported.written_tokens
    assert estimated.cost == pytest.approx(reported.cost)
    assert estimated.greedy_cost == pytest.approx(reported.greedy_cost)


def test_greedy_cost_is_what_the_greedy_trim_would_have_cost(idle: Callable[[float], None]) -> None:
    """The same conversation, timed the same, sent trimmed greedily: its cost is
    the ``greedy_cost`` the cache-priced thread estimated."""
    auto = TurnTrimMiddleware(8_000, token_counter=LENGTH, trim_to="auto")
    conversation(Agent(auto, "sync"), idle)
    greedy = Agent(TurnTrimMiddleware(8_000, token_counter=LENGTH), "sync")
    conversation(greedy, idle)
    price = cache_price_for("claude-sonnet-4-5")
    assert auto.cache_totals("t").greedy_cost == pytest.approx(greedy.model.cost(price), rel=0.01)
    assert auto.cache_totals("t").cost < greedy.model.cost(price)


@pytest.mark.parametrize("trim_to", [None, 6_000])
def test_every_middleware_keeps_cache_totals(
    trim_to: int | None, idle: Callable[[float], None]
) -> None:
    middleware = TurnTrimMiddleware(8_000, token_counter=LENGTH, trim_to=trim_to)
    agent = Agent(middleware, "sync")
    conversation(agent, idle)
    totals = middleware.cache_totals("t")
    price = cache_price_for("claude-sonnet-4-5")
    assert (totals.calls, totals.reported_calls) == (12, 12)
    assert totals.cost == pytest.approx(agent.model.cost(price))
    if trim_to is None:
        assert totals.greedy_cost == pytest.approx(totals.cost)


def test_calls_without_a_thread_share_one_entry() -> None:
    middleware = TurnTrimMiddleware(8_000, token_counter=LENGTH, trim_to="auto")
    agent = create_agent(Provider(), middleware=[middleware], system_prompt=SYSTEM)
    for n in (3, 2):
        agent.invoke({"messages": turns(n)})
    assert middleware.cache_totals().reported_calls == middleware.cache_totals(None).calls == 2


def request(model: Any, settings: dict[str, Any]) -> ModelRequest:
    fields: dict[str, Any] = {"messages": turns(40), "system_message": SystemMessage(SYSTEM)}
    return ModelRequest(model=model, tools=[], model_settings=settings, **fields)


def test_trim_request_prices_by_the_requests_model_and_ttl() -> None:
    """``trim_request`` is the decision a call would make (without the clock):
    priced like the call, by the request's model and TTL."""
    middleware = TurnTrimMiddleware(12_000, token_counter=LENGTH, trim_to="auto")
    _, report = middleware.trim_request(request(Provider(), ONE_HOUR))
    assert report.auto is not None
    assert report.auto["cache_rule"] == "anthropic claude (1h)"


@pytest.mark.parametrize(
    ("settings", "routed", "rule"),
    [(ONE_HOUR, None, "anthropic claude (1h)"), ({}, "gpt-4o", "openai gpt-4o (in_memory)")],
)
def test_a_middleware_sized_for_a_model_prices_each_call_by_its_request(
    settings: dict[str, Any], routed: str | None, rule: str, idle: Callable[[float], None]
) -> None:
    """``for_model`` sizes for a model; the call is still priced by the TTL its
    request asks for, and by the model another middleware routes it to."""
    sized, other = Provider(), Provider(model_name=routed or "")
    for model in (sized, other):
        model.profile = {"max_input_tokens": 16_000, "max_output_tokens": 4_000}
    middleware = TurnTrimMiddleware.for_model(sized, token_counter=LENGTH, trim_to="auto")
    agent = Agent(middleware, "sync", sized, settings, other if routed else None)
    assert agent.say(*turns(10), question(0))["auto"]["cache_rule"] == rule
    idle(600)  # past 5 minutes: within the hour, past OpenAI's in-memory cache
    assert agent.say(question(1))["auto"]["cold"] is (not settings)
