"""Trims priced by the prompt cache: the rules table, ``trim_to="auto"``, cuts
timed to the cache and what each call's cache did."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableLambda

from langchain_turntrim import (
    CACHE_RULES,
    DEFAULT_CACHE_PRICE,
    CachePrice,
    CacheRule,
    CalibratedCounter,
    TrimOptions,
    TurnTrimmer,
    cache_price_for,
    per_list,
    trim_turns,
)
from langchain_turntrim._cache_rules import request_ttl
from langchain_turntrim._cache_timing import CacheFigures
from langchain_turntrim._core import CONTINUE, REPLY, START, plan_costs
from langchain_turntrim._core.depth import GROWTH_CALLS, Cut, auto_cut, auto_level, call_cost
from langchain_turntrim._core.grouping import Grouping
from langchain_turntrim._middleware import TurnTrimMiddleware
from langchain_turntrim._pipeline import CacheCall
from langchain_turntrim._planning.memo import _Entry
from langchain_turntrim._state_middleware import TurnTrimStateMiddleware
from langchain_turntrim._usage import cache_usage

FIVE = CachePrice(0.1, 1.25, 300, 1024)
HOUR = CachePrice(0.1, 2.0, 3600, 1024)

# -- the rules table ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "read", "write", "ttl", "least"),
    [
        ("claude-sonnet-4-5-20250929", 0.1, 1.25, 300, 1024),
        ("anthropic:claude-opus-4-5", 0.1, 1.25, 300, 4096),
        ("claude-haiku-4-5", 0.1, 1.25, 300, 4096),
        ("claude-3-5-haiku-latest", 0.1, 1.25, 300, 2048),
        ("gpt-4.1-mini", 0.25, 1.0, 300, 1024),
        ("openai/gpt-4o-2024-08-06", 0.5, 1.0, 300, 1024),
        ("gpt-5-mini", 0.1, 1.0, 300, 1024),
        ("gpt-5.6", 0.1, 1.25, 300, 1024),
    ],
)
def test_models_are_matched_by_their_longest_prefix(
    model: str, read: float, write: float, ttl: float, least: int
):
    price = cache_price_for(model)
    assert (price.read, price.write, price.ttl, price.min_prefix) == (read, write, ttl, least)


def test_a_ttl_named_by_the_request_picks_its_write_price():
    hour = cache_price_for("claude-sonnet-4-5", ttl="1h")
    assert (hour.write, hour.ttl) == (2.0, 3600)
    assert hour.name == "anthropic claude (1h)"
    assert cache_price_for("gpt-4.1", ttl="24h").ttl == 86400
    assert cache_price_for("claude-sonnet-4-5", ttl="7d").ttl == 300  # unknown: the default
    assert request_ttl({"cache_control": {"type": "ephemeral", "ttl": "1h"}}) == "1h"
    assert request_ttl({"cache_control": {"type": "ephemeral"}}) == "5m"
    assert request_ttl({"prompt_cache_retention": "24h"}) == "24h"
    assert request_ttl({}) is None
    assert request_ttl(None) is None


class Named:
    def __init__(self, **names: Any) -> None:
        self.__dict__.update(names)


def test_unknown_models_get_the_stated_default_and_say_so():
    price = cache_price_for("llama-3-70b")
    assert (price.read, price.write, price.ttl, price.min_prefix) == (
        DEFAULT_CACHE_PRICE.read,
        DEFAULT_CACHE_PRICE.write,
        DEFAULT_CACHE_PRICE.ttl,
        DEFAULT_CACHE_PRICE.min_prefix,
    )
    assert price.name == "default (no rule matches 'llama-3-70b')"
    assert cache_price_for(None).name == "default (no model name)"
    assert cache_price_for(Named(model_name="gpt-4o")).read == 0.5
    assert cache_price_for(Named(model="claude-sonnet-4-5")).write == 1.25


def test_your_own_rules_replace_the_table():
    mine = CacheRule("acme", ("acme-",), 0.2, {"10m": (600.0, 1.5)}, 256)
    options = TrimOptions(8_000, trim_to="auto", cache_price=[mine])
    price = options.price_for("acme-large")
    assert (price.read, price.write, price.ttl, price.min_prefix) == (0.2, 1.5, 600, 256)
    assert options.price_for("claude-sonnet-4-5").name.startswith("default")
    fixed = TrimOptions(8_000, trim_to="auto", cache_price=FIVE)
    assert fixed.price_for("gpt-4o") is FIVE
    assert all(isinstance(rule, CacheRule) for rule in CACHE_RULES)


@pytest.mark.parametrize(
    ("keywords", "error", "says"),
    [
        ({"trim_to": "deep"}, ValueError, "trim_to must be an int, None or 'auto', got 'deep'"),
        ({"cache_price": 0.1}, TypeError, "cache_price must be a CachePrice"),
        ({"cache_price": [FIVE]}, TypeError, "cache_price[0] must be a CacheRule, got CachePrice"),
        ({"context_value": -1}, ValueError, "context_value must be finite and >= 0, got -1"),
        ({"context_value": math.nan}, ValueError, "context_value must be finite"),
        ({"context_value": "1"}, TypeError, "context_value must be a number, got str"),
    ],
)
def test_bad_pricing_options_are_refused_at_construction(
    keywords: dict[str, Any], error: type[Exception], says: str
):
    with pytest.raises(error) as raised:
        TurnTrimmer(8_000, **keywords)
    assert says in str(raised.value)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"read": -0.1}, "CachePrice.read must be finite and >= 0, got -0.1"),
        ({"write": math.inf}, "CachePrice.write must be finite and >= 0, got inf"),
        ({"ttl": 0}, "CachePrice.ttl must be finite and > 0, got 0"),
        ({"read": True}, "CachePrice.read must be a number, got bool"),
        ({"min_prefix": -1}, "CachePrice.min_prefix must be >= 0, got -1"),
    ],
)
def test_bad_cache_prices_name_the_field(fields: dict[str, Any], says: str):
    with pytest.raises((TypeError, ValueError)) as raised:
        CachePrice(**fields)
    assert says in str(raised.value)


# -- the depth, priced -------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    budget=st.integers(1, 200_000),
    pinned=st.integers(0, 20_000),
    growth=st.floats(0, 5_000),
    value=st.floats(0.11, 10),
)
def test_dearer_writes_cut_deeper_and_dearer_context_shallower(
    budget: int, pinned: int, growth: float, value: float
):
    five = auto_level(budget, pinned, growth, FIVE, value)
    hour = auto_level(budget, pinned, growth, HOUR, value)
    assert (five is None) == (hour is None)
    if five is None or hour is None:
        return
    assert price_levels_are_sane(five, budget, pinned)
    assert price_levels_are_sane(hour, budget, pinned)
    assert hour <= five
    dearer = auto_level(budget, pinned, growth, FIVE, value * 2)
    assert dearer is not None
    assert dearer >= five


def price_levels_are_sane(level: int, budget: int, pinned: int) -> bool:
    """A step of the grid (halvings of the budget), leaving the pinned messages
    room and at least the cacheable minimum."""
    step = budget - level
    on_grid = step in {budget >> k for k in range(1, budget.bit_length() + 1)}
    return on_grid and step <= budget - pinned and level >= FIVE.min_prefix


def test_nothing_is_cut_for_a_cache_below_its_minimum():
    assert auto_level(1_000, 100, 50, FIVE, 1.0) is None  # the whole budget is below 1,024
    assert auto_level(8_000, 8_000, 50, FIVE, 1.0) is None  # no room for turns
    assert auto_cut(1_000, 100, 50, FIVE, 1.0) is None
    # Context worth no more than a cached read: the deepest cut the grid allows.
    assert auto_level(8_000, 0, 100, FIVE, 0.1) == 4_000


def test_a_call_costs_what_its_cache_did():
    assert call_cost(2_000, 1_500, FIVE) == pytest.approx(1_500 * 0.1 + 500 * 1.25)
    assert call_cost(2_000, 1_500, FIVE, written=100) == pytest.approx(150 + 125 + 400)
    assert call_cost(1_000, 0, FIVE) == 1_000  # below the minimum: nothing cached or written


def records(turns: list[int], steps: int = 3) -> tuple[list[int], list[int]]:
    """Kinds and costs of turns of a user message and ``steps`` replies each."""
    kinds: list[int] = []
    costs: list[int] = []
    for cost in turns:
        share = max(1, cost // (steps + 1))
        kinds += [START] + [REPLY] * steps
        costs += [cost - share * steps] + [share] * steps
    return kinds, costs


@settings(max_examples=300)
@given(
    turns=st.lists(st.integers(0, 3_000), min_size=1, max_size=40),
    budget=st.integers(0, 30_000),
    level=st.integers(0, 30_000),
    cold=st.booleans(),
    floor=st.integers(0, 200),
    hold=st.floats(0, 1e6),
)
def test_a_priced_cut_fits_and_only_ever_cuts_deeper_than_greedy(
    turns: list[int], budget: int, level: int, cold: bool, floor: int, hold: float
):
    kinds, costs = records(turns)
    greedy = plan_costs(kinds, costs, budget)
    cut = plan_costs(kinds, costs, budget, 0, Cut(min(level, budget), cold, floor, hold))
    assert cut.tokens_after <= max(budget, greedy.tokens_after)
    if greedy.kept_turns:
        assert cut.kept_turns >= 1  # the newest turn is always kept
        assert cut.dropped_turns >= greedy.dropped_turns
        assert cut.keep_from in range(greedy.keep_from, len(kinds))
        assert kinds[cut.keep_from] == START or cut.keep_from == greedy.keep_from


def test_a_floor_holds_while_what_follows_it_fits():
    kinds, costs = records([1_000] * 10)
    start = 4 * 4  # the fifth turn's user message
    plan = plan_costs(kinds, costs, 9_000, 0, Cut(6_000, floor=start))
    assert plan.keep_from == start
    # Once it no longer fits, the budget moves the cut on.
    plan = plan_costs(kinds, costs, 5_000, 0, Cut(3_000, floor=start))
    assert plan.keep_from > start
    # Not a turn's first message: no floor.
    assert plan_costs(kinds, costs, 20_000, 0, Cut(15_000, floor=start + 1)).keep_from == 0


def test_a_cold_call_cuts_now_to_the_priced_depth_even_when_the_history_fits():
    kinds, costs = records([1_000] * 12)  # 12,000 tokens: the budget is about to force a cut
    warm = plan_costs(kinds, costs, 12_000, 0, Cut(9_000))
    assert warm.dropped_turns == 0
    cold = plan_costs(kinds, costs, 12_000, 0, Cut(9_000, cold=True, hold=0))
    assert cold.dropped_turns == 3  # down to the level: what a forced cut would keep
    # Early in the cycle, a cut now would give up more context than it saves.
    kinds, costs = records([1_000] * 10)
    assert plan_costs(kinds, costs, 12_000, 0, Cut(9_000, cold=True, hold=0)).dropped_turns == 0
    # A bust that costs far more than context: a cold call cuts as deep as it can.
    deepest = plan_costs(kinds, costs, 12_000, 0, Cut(9_000, cold=True, hold=1e9))
    assert deepest.dropped_turns == 9  # the newest candidate: every later cut stays there


def test_growth_is_the_tokens_added_per_model_call():
    grouping = Grouping()
    # A task, then steps of a 60-token reply and a 40-token result: 100 per call.
    grouping.extend([START] + [REPLY, CONTINUE] * 10, [500] + [60, 40] * 10)
    assert grouping.growth == pytest.approx(100)
    # Over the newest GROWTH_CALLS calls only.
    grouping.extend([REPLY, CONTINUE] * GROWTH_CALLS, [300, 200] * GROWTH_CALLS)
    assert grouping.growth == pytest.approx(500)
    empty = Grouping()
    empty.extend([START], [70])
    assert empty.growth == 70  # no model call yet: all of it


# -- the entry points ----------------------------------------------------------------------------


def chat(turns: int, size: int = 400, *, ids: bool = True) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("You are terse. " * 20, id="s" if ids else None)]
    for i in range(turns):
        history.append(HumanMessage(f"question {i} " + "x" * size, id=f"h{i}" if ids else None))
        history.append(AIMessage(f"answer {i} " + "y" * size, id=f"a{i}" if ids else None))
    return history


def test_auto_is_stateless_like_trim_to_and_never_over_budget():
    history = chat(80)
    trimmer = TurnTrimmer(max_tokens=8_000, trim_to="auto")
    report = trimmer.report(history)
    assert report.depth is not None
    assert report.depth.level is not None
    assert report.tokens_after <= 8_000
    again = TurnTrimmer(max_tokens=8_000, trim_to="auto").report(list(history))
    assert [m.id for m in again.kept] == [m.id for m in report.kept]
    assert trim_turns(history, max_tokens=8_000, trim_to="auto") == report.kept
    auto = report.summary()["auto"]
    assert auto["trim_to"] == report.depth.level
    assert auto["cache_rule"] == "default (no model name)"
    assert auto["greedy_tokens_after"] >= report.tokens_after


def test_auto_follows_the_rules_it_is_given():
    # 32k, growing 300 tokens a call: 5-minute writes cut to 28k, 1-hour ones to 24k.
    assert auto_level(32_000, 100, 300, FIVE, 1.0) == 28_000
    assert auto_level(32_000, 100, 300, HOUR, 1.0) == 24_000
    history = chat(200)
    hour = TurnTrimmer(max_tokens=16_000, trim_to="auto", cache_price=HOUR).report(history)
    assert hour.depth is not None
    assert hour.depth.price is HOUR
    small = CachePrice(0.1, 1.25, 300, min_prefix=32_000)
    below = TurnTrimmer(max_tokens=16_000, trim_to="auto", cache_price=small).report(history)
    greedy = TurnTrimmer(max_tokens=16_000).report(history)
    assert below.kept == greedy.kept  # nothing is cached: auto is the greedy trim


# -- timed to the cache (the middleware) ---------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def request(history: list[BaseMessage], model: Any = None, **settings: Any) -> ModelRequest[Any]:
    return ModelRequest(
        model=model,
        messages=history[1:],  # type: ignore[arg-type]
        system_message=history[0],  # type: ignore[arg-type]
        tools=[],
        model_settings=settings,
    )


class Provider:
    """A fake model whose provider caches the previous request for ``ttl`` seconds."""

    def __init__(self, clock: Clock, ttl: float = 300, *, raw: bool = False) -> None:
        self.clock = clock
        self.ttl = ttl
        self.raw = raw
        self.sent: list[list[BaseMessage]] = []
        self.at = -math.inf

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent: list[BaseMessage] = [request.system_message, *request.messages]  # type: ignore[list-item]
        size = sum(len(str(m.content)) // 4 for m in sent)
        hit = 0
        if self.sent and self.clock.now - self.at <= self.ttl:
            for a, b in zip(sent, self.sent[-1], strict=False):
                if a is not b:
                    break
                hit += len(str(a.content)) // 4
        self.sent.append(sent)
        self.at = self.clock.now
        if self.raw:  # the provider's own figures only (Anthropic's names)
            usage = {"cache_read_input_tokens": hit, "cache_creation_input_tokens": size - hit}
            reply = AIMessage(
                "ok",
                usage_metadata={"input_tokens": size, "output_tokens": 1, "total_tokens": size + 1},
                response_metadata={"usage": usage},
            )
        else:
            details = {"cache_read": hit, "cache_creation": size - hit}
            reply = AIMessage(
                "ok",
                usage_metadata={
                    "input_tokens": size,
                    "output_tokens": 1,
                    "total_tokens": size + 1,
                    "input_token_details": details,
                },
            )
        return ModelResponse(result=[reply])

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self(request)


def call(middleware: TurnTrimMiddleware, req: ModelRequest[Any], provider: Provider, how: str):
    if how == "sync":
        return middleware.wrap_model_call(req, provider)
    return asyncio.run(middleware.awrap_model_call(req, provider.acall))


HOW = ["sync", "async"]


@pytest.mark.parametrize("ids", [True, False], ids=["ids", "no-ids"])
@pytest.mark.parametrize("how", HOW)
def test_a_cold_call_cuts_and_warm_calls_keep_its_cut(how: str, ids: bool):
    clock = Clock()
    middleware = TurnTrimMiddleware(12_000, trim_to="auto", clock=clock)
    provider = Provider(clock)
    history = chat(52, ids=ids)  # fits, close to the budget
    assert TurnTrimmer(12_000).report(history).dropped_turns == 0
    call(middleware, request(history), provider, how)
    # A thread this middleware has not seen: its provider's cache may be warm.
    assert provider.sent[-1][1] is history[1]
    clock.now += 301  # idle past the TTL: the cache is gone, a cut is free
    call(middleware, request(history), provider, how)
    first = provider.sent[-1][1]
    assert first is not history[1]  # cut to the cheapest depth at once
    for i in range(52, 68):  # warm calls, the history growing and still fitting
        clock.now += 30
        history += [HumanMessage(f"more {i} " + "x" * 400), AIMessage("y")]
        call(middleware, request(history), provider, how)
        assert provider.sent[-1][1] is first  # the cut stays
    totals = middleware.cache_totals()
    assert totals.calls == 18
    assert totals.reported_calls == 18
    assert totals.hit_tokens > 0
    assert totals.cost < totals.untrimmed_cost
    assert totals.greedy_cost is not None
    assert totals.cost < totals.greedy_cost
    clock.now += 301  # idle past the TTL: cold again (a cut would be free)
    report = middleware.trim_request(request(history))[1]
    assert report.depth is not None
    assert report.depth.cold


@pytest.mark.parametrize("token_counter", ["approximate", "calibrated"])
def test_a_cache_priced_call_checks_the_history_once(
    token_counter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The priced cut is a second plan of the same request: the history the
    greedy plan just checked is not checked again, and the cut is the one a
    trimmer that remembers nothing plans."""
    checks: list[int] = []
    matches = _Entry.matches

    def counted(entry: _Entry, *args: Any) -> bool:
        checks.append(1)
        return matches(entry, *args)

    monkeypatch.setattr(_Entry, "matches", counted)
    history = chat(52)

    def cold_call(cache_size: int) -> tuple[list[Any], Any]:
        counter = CalibratedCounter() if token_counter == "calibrated" else token_counter
        clock = Clock()
        middleware = TurnTrimMiddleware(
            12_000, trim_to="auto", clock=clock, token_counter=counter, cache_size=cache_size
        )
        provider = Provider(clock)
        for _ in range(2):  # the history is remembered from its second plan on
            call(middleware, request(history), provider, "sync")
        clock.now += 301  # cold: the greedy plan, then the priced cut
        checks.clear()
        trimmed, report = middleware.trim_request(request(history))
        assert report.depth is not None
        assert report.depth.cold
        assert report.dropped_turns > report.depth.greedy.dropped_turns  # cut deeper than greedy
        return trimmed.messages, report.plan

    remembered = cold_call(16_384)
    assert len(checks) == 1
    assert cold_call(0) == remembered
    assert not checks  # nothing remembered, nothing checked


def test_untimed_auto_does_not_cut_a_history_that_fits():
    clock = Clock()
    middleware = TurnTrimMiddleware(12_000, trim_to="auto", clock=clock, time_to_cache=False)
    provider = Provider(clock)
    history = chat(24)
    middleware.wrap_model_call(request(history), provider)
    assert provider.sent[-1][1] is history[1]


def test_the_ttl_comes_from_the_request_and_the_rules_from_its_model():
    clock = Clock()
    middleware = TurnTrimMiddleware(12_000, trim_to="auto", clock=clock)
    provider = Provider(clock, ttl=3600)
    history = chat(52)
    model = Named(model_name="claude-sonnet-4-5")
    hour = {"cache_control": {"type": "ephemeral", "ttl": "1h"}}
    middleware.wrap_model_call(request(history, model, **hour), provider)
    clock.now += 4_000  # past the hour: cold, the cut is made now
    middleware.wrap_model_call(request(history, model, **hour), provider)
    first = provider.sent[-1][1]
    assert first is not history[1]
    clock.now += 1_800  # past 5 minutes, within the hour: warm
    history += [HumanMessage("more", id="hx"), AIMessage("y", id="ax")]
    report = middleware.trim_request(request(history, model, **hour))[1]
    assert report.depth is not None
    assert report.depth.price.name == "anthropic claude (1h)"
    middleware.wrap_model_call(request(history, model, **hour), provider)
    assert provider.sent[-1][1] is first


def test_threads_are_timed_apart_and_remembered_in_bounded_memory():
    clock = Clock()
    middleware = TurnTrimMiddleware(12_000, trim_to="auto", clock=clock)
    provider = Provider(clock)

    def in_thread(thread: str, history: list[BaseMessage]) -> None:
        run: RunnableLambda[None, Any] = RunnableLambda(
            lambda _: middleware.wrap_model_call(request(history), provider)
        )
        run.invoke(None, {"configurable": {"thread_id": thread}})

    in_thread("a", chat(24))
    in_thread("b", chat(24))
    assert middleware.cache_totals("a").calls == middleware.cache_totals("b").calls == 1
    assert middleware.cache_totals("c").calls == 0
    for i in range(1_100):
        in_thread(f"t{i}", chat(1))
    assert middleware.cache_totals("a").calls == 0  # forgotten: least recently used
    assert len(middleware._clock._threads) == 1_024  # the bound itself


@pytest.mark.parametrize("raw", [False, True])
def test_cache_figures_are_read_from_usage_and_the_providers_raw_figures(raw: bool):
    clock = Clock()
    provider = Provider(clock, raw=raw)
    middleware = TurnTrimMiddleware(100_000)
    history = chat(30)
    middleware.wrap_model_call(request(history), provider)
    clock.now += 10
    history += [HumanMessage("more " + "x" * 400, id="hx"), AIMessage("y", id="ax")]
    middleware.wrap_model_call(request(history), provider)
    totals = middleware.cache_totals()
    assert totals.reported_calls == 2
    sent = [sum(len(str(m.content)) // 4 for m in s) for s in provider.sent]
    assert totals.input_tokens == sum(sent)
    assert totals.hit_tokens == sent[0]  # the second call read the whole first request
    assert totals.written_tokens == sent[0] + sent[1] - sent[0]
    # Untrimmed, nothing was dropped: the same cost, and greedy is what was sent.
    # Estimated from the counter's counts, scaled to the provider's.
    assert totals.cost == pytest.approx(totals.untrimmed_cost, rel=0.01)
    assert totals.greedy_cost == pytest.approx(totals.cost, rel=0.01)


def test_openai_style_usage_has_hits_and_no_writes():
    message = AIMessage(
        "ok",
        usage_metadata={
            "input_tokens": 2_000,
            "output_tokens": 1,
            "total_tokens": 2_001,
            "input_token_details": {"cache_read": 1_536},
        },
    )
    assert cache_usage([message]) == (2_000, 1_536, None)
    raw = AIMessage(
        "ok",
        usage_metadata={"input_tokens": 2_000, "output_tokens": 1, "total_tokens": 2_001},
        response_metadata={"token_usage": {"prompt_tokens_details": {"cached_tokens": 1_024}}},
    )
    assert cache_usage([raw]) == (2_000, 1_024, None)
    assert cache_usage([AIMessage("no usage")]) is None


def test_a_fixed_trim_to_has_no_greedy_estimate():
    clock = Clock()
    middleware = TurnTrimMiddleware(8_000, trim_to=6_000, clock=clock)
    middleware.wrap_model_call(request(chat(60)), Provider(clock))
    assert middleware.cache_totals().greedy_cost is None


def test_cache_figures_are_built_only_when_someone_reads_them(monkeypatch: pytest.MonkeyPatch):
    built: list[int] = []
    original = CacheFigures.summary

    def summary(self: CacheFigures) -> dict[str, Any]:
        built.append(1)
        return original(self)

    monkeypatch.setattr(CacheFigures, "summary", summary)
    clock = Clock()
    middleware = TurnTrimMiddleware(8_000)
    middleware.wrap_model_call(request(chat(4)), Provider(clock))
    assert built == []  # no DEBUG log, no run: nothing built
    assert middleware.cache_totals().calls == 1  # the totals are kept all the same


def test_the_previous_cut_holds_when_nothing_would_be_cached():
    """No priced level (the budget is below the cacheable minimum): a warm
    call still keeps the previous call's cut while what follows it fits."""
    history = chat(60)
    trimmer = TurnTrimmer(max_tokens=8_000, trim_to="auto")
    greedy = trimmer.report(history).depth
    assert greedy is not None
    start = greedy.greedy.keep_from + 4  # a later turn's user message
    assert isinstance(history[start], HumanMessage)
    small = CachePrice(min_prefix=100_000)
    for counter in ("approximate", per_list(count_tokens_approximately)):
        cut = TurnTrimmer(max_tokens=8_000, trim_to="auto", token_counter=counter)
        report = cut.decide(history, cache=CacheCall(small, floor=start))
        assert report.depth is not None
        assert report.depth.level is None
        assert report.kept[1] is history[start]


def test_whole_list_counters_keep_the_floor_too():
    history = chat(60)
    greedy = TurnTrimmer(max_tokens=8_000).report(history)
    start = greedy.plan.keep_from + 2
    counter = per_list(count_tokens_approximately)
    cut = TurnTrimmer(max_tokens=8_000, trim_to="auto", token_counter=counter)
    report = cut.decide(history, cache=CacheCall(FIVE, floor=start))
    assert report.kept[1] is history[start]
    assert report.tokens_after <= 8_000


def test_the_state_middleware_never_deletes_what_the_previous_cut_keeps():
    """The state's deletions are decided without the system prompt, so at
    another level: they still keep the request's previous cut."""
    clock = Clock()
    middleware = TurnTrimStateMiddleware(8_000, trim_to="auto", clock=clock)
    provider = Provider(clock)
    history = [SystemMessage("You are terse. " * 200, id="s"), *chat(19, 800)[1:]]
    middleware.wrap_model_call(request(history), provider)
    clock.now += 301
    middleware.wrap_model_call(request(history), provider)  # cold: cut now
    first = provider.sent[-1][1]
    clock.now += 20
    history += [HumanMessage("more " + "x" * 800, id="m"), AIMessage("y" * 800, id="n")]
    update = middleware.state_update(history[1:])
    removed = {m.id for m in update["messages"]} if update else set()
    assert first.id not in removed


#: Values of the wrong type, as a user might pass them (typed Any for mypy).
BAD: Any = "claude"
NOT_A_CLOCK: Any = 3.0
NOT_A_BOOL: Any = 1


@pytest.mark.parametrize(
    ("build", "error", "says"),
    [
        (lambda: CacheRule("x", BAD, 0.1, {"5m": (300.0, 1.25)}), TypeError, "models must"),
        (lambda: CacheRule("x", (), 0.1, {"5m": (300.0, 1.25)}), ValueError, "at least one prefix"),
        (lambda: CacheRule("x", ("a",), 0.1, {"5m": BAD}), TypeError, "(seconds, write price)"),
        (lambda: CacheRule("x", ("a",), 0.1, {}), ValueError, "at least one TTL"),
        (lambda: TurnTrimmer(8_000, cache_price=[]), ValueError, "at least one CacheRule"),
        (lambda: TurnTrimMiddleware(8_000, clock=lambda: BAD), TypeError, "got str"),
        (lambda: TurnTrimMiddleware(8_000, clock=NOT_A_CLOCK), TypeError, "got a float"),
        (lambda: TurnTrimMiddleware(8_000, time_to_cache=NOT_A_BOOL), TypeError, "time_to_cache"),
    ],
)
def test_bad_rules_and_clocks_are_refused_when_built(build: Any, error: type, says: str):
    with pytest.raises(error) as raised:
        build()
    assert says in str(raised.value)


def test_for_model_prices_auto_by_the_model():
    model = Named(model_name="claude-opus-4-5", profile={"max_input_tokens": 200_000})
    trimmer = TurnTrimmer.for_model(model, trim_to="auto")
    assert trimmer.options.price_for().min_prefix == 4_096
