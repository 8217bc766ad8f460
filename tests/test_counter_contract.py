"""The counter contract: what every counter promises, checked on every counter.

In the spirit of cachetools' ``CacheTestMixin``: ``TestEveryCounter`` holds
the promises of a ``TokenCounter`` and runs them on each built-in counter,
its cached form and a chat model's counter; ``TestEveryResolvedCounter``
runs the same promises on what ``resolve_counter`` makes of each of them,
and adds those of the ``ResolvedCounter`` interface the planner calls. A new
counter gets a row in ``COUNTERS`` or ``RESOLVED`` and is then held to all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TiktokenCounter,
    TokenCounter,
    TrimPlan,
    per_list,
    per_message,
)
from langchain_turntrim._counting import CachedCounter, ResolvedCounter, resolve_counter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._planning import planner_for
from tests import strategies
from tests.lc import check_conversation


class CountingChatModel(GenericFakeChatModel):
    """A chat model that counts like a provider: 3 per request, each message's
    text length and 10 per tool, and only for conversations a provider accepts."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        check_conversation(messages)
        return 3 + sum(len(m.text) for m in messages) + 10 * len(tools or [])


def text_length(message: BaseMessage) -> int:
    return len(message.text)


def texts_length(messages: list[BaseMessage]) -> int:
    return sum(len(m.text) for m in messages)


def model() -> CountingChatModel:
    return CountingChatModel(messages=iter([]))


def calibrated() -> CalibratedCounter:
    """A CalibratedCounter past its warm-up, counting a third more than its base."""
    counter = CalibratedCounter(warmup=2)
    for size in (100, 400, 1_600):
        sent = [HumanMessage("x" * size), AIMessage("y" * size)]
        counter.observe(sent, 4 * ApproximateCounter().count(sent) // 3)
    return counter


@dataclass(frozen=True)
class Case:
    """A counter to hold to the contract.

    ``additive``: a ``TokenCounter``, whose count of a list is ``overhead``
    plus the sum of its messages' counts; otherwise a whole-list counter,
    whose ``count_each`` is an estimate. ``blocking``: what ``blocking``
    says, for resolved counters (whole-list functions may be a provider's
    endpoint).
    """

    make: Callable[[], Any]
    additive: bool = True
    blocking: bool = False


#: Counters as a user builds them.
COUNTERS = {
    "approximate": Case(ApproximateCounter),
    "tiktoken-model": Case(lambda: TiktokenCounter("gpt-4")),
    "tiktoken-encoding": Case(lambda: TiktokenCounter(encoding="cl100k_base")),
    "per_message": Case(lambda: per_message(text_length)),
    "per_list": Case(lambda: per_list(texts_length), additive=False, blocking=True),
    "cached-approximate": Case(lambda: CachedCounter(ApproximateCounter())),
    "cached-tiktoken": Case(lambda: CachedCounter(TiktokenCounter("gpt-4"))),
    "cached-per_message": Case(lambda: CachedCounter(per_message(text_length), cache_size=4)),
    "model": Case(lambda: resolve_counter(model()), additive=False, blocking=True),
    "calibrated": Case(calibrated),
}

#: What ``resolve_counter`` makes of everything ``token_counter=`` accepts.
RESOLVED = {
    "approximate": Case(lambda: resolve_counter("approximate")),
    "count_tokens_approximately": Case(lambda: resolve_counter(count_tokens_approximately)),
    "ApproximateCounter": Case(lambda: resolve_counter(ApproximateCounter())),
    "tiktoken:MODEL": Case(lambda: resolve_counter("tiktoken:gpt-4")),
    "tiktoken:ENCODING": Case(lambda: resolve_counter("tiktoken:cl100k_base")),
    "TiktokenCounter": Case(lambda: resolve_counter(TiktokenCounter("gpt-4"))),
    "TiktokenCounter-uncached": Case(lambda: resolve_counter(TiktokenCounter("gpt-4"), 0)),
    "per_message": Case(lambda: resolve_counter(per_message(text_length))),
    "per_message-uncached": Case(lambda: resolve_counter(per_message(text_length), 0)),
    "message-function": Case(lambda: resolve_counter(text_length)),
    "CachedCounter": Case(lambda: resolve_counter(CachedCounter(per_message(text_length)))),
    "per_list": Case(
        lambda: resolve_counter(per_list(texts_length)), additive=False, blocking=True
    ),
    "list-function": Case(lambda: resolve_counter(texts_length), additive=False, blocking=True),
    "len": Case(lambda: resolve_counter(len), additive=False, blocking=True),
    "model": Case(lambda: resolve_counter(model()), additive=False, blocking=True),
    "CalibratedCounter": Case(lambda: resolve_counter(calibrated())),
}


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return query


#: Every kind of message, in no particular order (not a conversation).
MESSAGES: list[BaseMessage] = [
    SystemMessage("You are terse."),
    SystemMessage("dev note", additional_kwargs={"__openai_role__": "developer"}),
    HumanMessage("What's 2+2? 🤔", name="alice", id="h1"),
    HumanMessage([{"type": "text", "text": "and this?"}, "plain block"]),
    AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": "ü"}, "id": "c1"}]),
    ToolMessage("4", tool_call_id="c1"),
    AIMessage("It's 4."),
    FunctionMessage(content="result", name="f"),
    ChatMessage(content="hm", role="critic"),
    HumanMessage(""),
]

#: A valid conversation: what the planner hands a counter's ``plan`` and ``count``.
CONVERSATION: list[BaseMessage] = [
    SystemMessage("Answer in one line."),
    HumanMessage("Weather in Paris?", id="u1"),
    AIMessage("", tool_calls=[{"name": "lookup", "args": {"query": "Paris"}, "id": "c1"}]),
    ToolMessage("14 C, rain", tool_call_id="c1"),
    AIMessage("14 C and rain: take an umbrella."),
    HumanMessage("And Zurich?", id="u2"),
    AIMessage("11 C, dry."),
    HumanMessage("Thanks!", id="u3"),
    AIMessage("You're welcome."),
]


def additive_only(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` on the additive counters only (the promises of a ``TokenCounter``)."""
    test.additive_only = True  # type: ignore[attr-defined]
    return test


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test of a contract class runs once per counter of its ``CASES``."""
    if "case" not in metafunc.fixturenames or metafunc.cls is None:
        return
    cases: dict[str, Case] = metafunc.cls.CASES
    if getattr(metafunc.function, "additive_only", False):
        cases = {name: case for name, case in cases.items() if case.additive}
    metafunc.parametrize("case", list(cases.values()), ids=list(cases))


# Each case runs the property on its own instance of the contract class (and
# its own counter from the function-scoped fixture); with the database off,
# no example is replayed across cases.
HYPOTHESIS = settings(
    max_examples=25,
    database=None,
    suppress_health_check=[
        HealthCheck.differing_executors,
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
    ],
)


class TestEveryCounter:
    """The promises of every counter: ``count_each`` and ``overhead``."""

    CASES = COUNTERS

    @pytest.fixture
    def counter(self, case: Case, tiktoken_cache: Any) -> Any:
        return case.make()

    def test_one_int_at_least_zero_per_message(self, counter: Any) -> None:
        counts = counter.count_each(MESSAGES)
        assert type(counts) is list
        assert len(counts) == len(MESSAGES)
        assert all(type(count) is int and count >= 0 for count in counts), counts

    @HYPOTHESIS
    @given(messages=strategies.message_lists())
    def test_one_int_at_least_zero_per_generated_message(
        self, counter: Any, messages: list[BaseMessage]
    ) -> None:
        counts = counter.count_each(messages)
        assert len(counts) == len(messages)
        assert all(type(count) is int and count >= 0 for count in counts), counts

    def test_no_messages_no_counts(self, counter: Any) -> None:
        assert counter.count_each([]) == []

    def test_deterministic(self, case: Case, counter: Any) -> None:
        first = counter.count_each(MESSAGES)
        assert counter.count_each(MESSAGES) == first  # again (from the cache, if any)
        assert counter.count_each([m.model_copy(deep=True) for m in MESSAGES]) == first
        assert case.make().count_each(MESSAGES) == first  # a new counter agrees
        assert counter.count_each(tuple(MESSAGES)) == first

    def test_additive_is_declared_by_the_protocol(self, case: Case, counter: Any) -> None:
        assert isinstance(counter, TokenCounter) is case.additive

    @additive_only
    def test_an_additive_counter_counts_a_message_the_same_alone_and_in_a_list(
        self, counter: Any
    ) -> None:
        together = counter.count_each(MESSAGES)
        assert together == [counter.count_each([m])[0] for m in MESSAGES]
        assert counter.count_each(MESSAGES[::-1]) == together[::-1]

    @additive_only
    def test_overhead_is_an_int_at_least_zero(self, counter: Any) -> None:
        assert type(counter.overhead) is int
        assert counter.overhead >= 0

    @pytest.mark.parametrize(
        ("items", "error"),
        [
            (
                [HumanMessage("ok"), {"id": "d1", "role": "user"}],
                "messages[1] (id 'd1') is not a BaseMessage: dict {'id': 'd1', 'role': 'user'}",
            ),
            ([42, HumanMessage("ok")], "messages[0] is not a BaseMessage: int 42"),
            ([HumanMessage("ok"), "hi"], "messages[1] is not a BaseMessage: str 'hi'"),
        ],
        ids=["dict", "int", "str"],
    )
    def test_a_non_message_raises_the_exact_error(
        self, counter: Any, items: list[Any], error: str
    ) -> None:
        with pytest.raises(TypeError) as info:
            counter.count_each(items)
        assert str(info.value) == error


class TestEveryResolvedCounter(TestEveryCounter):
    """What ``resolve_counter`` returns: the promises above, and the planner's interface."""

    CASES = RESOLVED

    def test_is_a_resolved_counter(self, case: Case, counter: Any) -> None:
        assert isinstance(counter, ResolvedCounter)
        assert type(counter.blocking) is bool
        assert counter.blocking is case.blocking

    def test_count_of_a_conversation(self, case: Case, counter: Any) -> None:
        total = counter.count(CONVERSATION)
        assert type(total) is int
        assert total > 0
        assert counter.count(CONVERSATION) == total
        if case.additive:
            assert total == counter.overhead + sum(counter.count_each(CONVERSATION))

    def test_no_tools_cost_nothing(self, case: Case, counter: Any) -> None:
        assert counter.count(CONVERSATION, []) == counter.count(CONVERSATION)
        if case.additive:
            assert counter.count_tools([]) == 0

    def test_a_tool_costs_an_int_above_zero(self, case: Case, counter: Any) -> None:
        alone = counter.count(CONVERSATION)
        cost = counter.count(CONVERSATION, [lookup]) - alone
        assert type(cost) is int
        assert cost > 0
        assert counter.count(CONVERSATION, [lookup, lookup]) - alone >= cost
        if case.additive:
            assert counter.count_tools([lookup]) == cost

    @pytest.mark.parametrize("tools", [[], [lookup]])
    def test_plan_agrees_with_count(self, case: Case, counter: Any, tools: list[Any]) -> None:
        kinds = message_kinds(CONVERSATION)
        planner = planner_for(counter, 0)
        everything = counter.count(CONVERSATION, tools)
        for budget in [0, 5, everything // 3, everything // 2, everything - 1, everything, 10**9]:
            plan = planner.plan(CONVERSATION, kinds, budget, tools=tools)
            assert isinstance(plan, TrimPlan)
            assert (plan.size, plan.max_tokens, plan.turns) == (len(CONVERSATION), budget, 3)
            assert sorted(plan.kept + plan.dropped) == list(range(len(CONVERSATION)))
            assert plan.budget_met == (plan.tokens_after <= budget)
            kept = plan.select(CONVERSATION)
            if plan.kept_turns:
                assert plan.tokens_after == counter.count(kept, tools), budget
                assert plan.budget_met
            if case.additive:
                assert plan.overhead_tokens == counter.overhead + counter.count_tools(tools)
                assert plan.tokens_before == everything
            if budget >= everything:
                assert plan.dropped == ()
                assert plan.tokens_after == everything
