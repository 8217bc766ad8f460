"""Counters: model counters see only valid conversations, the cache, function adapters."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from pydantic import Field

from langchain_turntrim import (
    ApproximateCounter,
    TiktokenCounter,
    TokenCounter,
    TurnTrimmer,
    TurnTrimOverflowError,
    per_list,
    per_message,
)
from langchain_turntrim._core import CONTINUE, PINNED, START, plan_costs
from langchain_turntrim._counting import CachedCounter, WholeListCounter
from langchain_turntrim._counting.keys import message_fields, message_key
from langchain_turntrim._counting.tools import tool_json
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._planning import AdditivePlanner
from tests import strategies
from tests.lc import LENGTH, check_conversation, content_length, message_histories
from tests.reference import reference_trim


class StrictModel:
    """A provider-like counter: rejects invalid conversations, counts 3 + content
    lengths, and records every list it was sent."""

    def __init__(self, additive: bool = True) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.additive = additive

    def get_num_tokens_from_messages(self, messages: list[BaseMessage]) -> int:
        check_conversation(messages)
        self.sent.append(list(messages))
        total = 3 + sum(len(m.content) for m in messages)
        if not self.additive:
            # Counts grow faster than the sum of the parts (e.g. separators).
            total += len(messages) * (len(messages) - 1) // 2
        return total


def tool_history(turns: int, system_every: int = 0) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("rules")]
    for t in range(turns):
        history.append(HumanMessage(f"question {t}", id=f"u{t}"))
        calls = [{"name": "lookup", "args": {"q": t, "k": k}, "id": f"c{t}.{k}"} for k in range(2)]
        history.append(AIMessage("", tool_calls=calls, id=f"a{t}"))
        history.extend(ToolMessage(f"result {t}.{k}", tool_call_id=f"c{t}.{k}") for k in range(2))
        if system_every and t % system_every == 0:
            history.append(SystemMessage(f"note {t}"))
        history.append(AIMessage(f"answer {t}", id=f"f{t}"))
    return history


# --- model counters --------------------------------------------------------------------


@pytest.mark.parametrize("additive", [True, False])
@pytest.mark.parametrize("system_every", [0, 3])
@pytest.mark.parametrize("budget", [0, 5, 60, 150, 400, 10_000])
def test_model_counter_sees_only_valid_conversations(
    additive: bool, system_every: int, budget: int
) -> None:
    model = StrictModel(additive=additive)
    history = [AIMessage("leading orphan"), ToolMessage("x", tool_call_id="none")]
    history += tool_history(20, system_every)
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=model)
    assert isinstance(trimmer.counter, WholeListCounter)
    kept = trimmer.invoke(history)
    check_conversation(
        [m for m in kept if isinstance(m, SystemMessage)]
        + [m for m in kept if not isinstance(m, SystemMessage)]
    )
    # The budget holds exactly, by the model's own count of what it will see.
    ordered: list[BaseMessage] = [m for m in kept if isinstance(m, SystemMessage)]
    ordered += [m for m in kept if not isinstance(m, SystemMessage)]
    if any(isinstance(m, HumanMessage) for m in kept):
        assert model.get_num_tokens_from_messages(ordered) <= budget
    # Linear: the messages sent stay within a small multiple of the history.
    assert sum(len(s) for s in model.sent) <= 4 * len(history) + 8


def test_model_counter_is_maximal_when_additive() -> None:
    model = StrictModel()
    history = tool_history(10)
    records = [
        {
            "id": str(i),
            "role": "system"
            if isinstance(m, SystemMessage)
            else "user"
            if isinstance(m, HumanMessage)
            else "assistant",
            "tokens": len(m.content),
        }
        for i, m in enumerate(history)
    ]
    for budget in range(0, 200, 7):
        kept = TurnTrimmer(max_tokens=budget, token_counter=model).invoke(history)
        # The model's constant (3) is paid once, like a pinned message.
        want = reference_trim(records, max(budget - 3, 0)) if budget >= 3 else records[:1]
        assert [history.index(m) for m in kept] == [int(r["id"]) for r in want]


def test_model_counter_reports_exact_tokens_after() -> None:
    model = StrictModel()
    report = TurnTrimmer(max_tokens=100, token_counter=model).trim_with_report(tool_history(5))
    assert report.tokens_after == model.get_num_tokens_from_messages(report.kept)
    # The per-request constant is inside every count; the other figures are
    # the approximate counter's, scaled by the error measured on the counts.
    assert report.plan.overhead_tokens == 0
    assert 0 < report.system_tokens < 10


def calls_for(turns: int, budget_share: float) -> tuple[int, int, int, int]:
    """Counter calls and messages sent: a cold trim, then a re-trim after one appended message."""
    model = StrictModel()
    history = tool_history(turns)
    budget = int(budget_share * model.get_num_tokens_from_messages(history))
    model.sent.clear()
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=model)
    trimmer.invoke(history)
    cold, cold_sent = len(model.sent), sum(map(len, model.sent))
    model.sent.clear()
    history.append(HumanMessage("one more question", id="more"))
    trimmer.invoke(history)
    return cold, cold_sent, len(model.sent), sum(map(len, model.sent))


@pytest.mark.parametrize("turns", [10, 20, 80])
@pytest.mark.parametrize("share", [0.1, 0.3, 0.6, 0.95])
def test_model_counter_calls_grow_with_the_log_of_the_turns(turns: int, share: float) -> None:
    cold, cold_sent, warm, warm_sent = calls_for(turns, share)
    history = 1 + 5 * turns
    assert cold <= 7  # a guess, its correction, a short gallop and bisection
    assert warm <= 3
    assert cold_sent <= 3 * history  # never the quadratic cost of counting every suffix
    assert warm_sent <= 2 * history


def test_model_counter_caches_turns_across_calls() -> None:
    model = StrictModel()
    trimmer = TurnTrimmer(max_tokens=10_000, token_counter=model)
    history = tool_history(30)
    trimmer.invoke(history)
    first = sum(len(s) for s in model.sent)
    model.sent.clear()
    trimmer.invoke(history)
    assert sum(len(s) for s in model.sent) == 0 < first


def test_model_counter_history_without_turns() -> None:
    model = StrictModel()
    history = [SystemMessage("s" * 10), AIMessage("orphan")]
    report = TurnTrimmer(max_tokens=5, token_counter=model).trim_with_report(history)
    assert report.kept == history[:1]
    assert report.tokens_after == 13
    assert not report.budget_met


# --- the cache -------------------------------------------------------------------------


class Tally:
    """A TokenCounter that counts how often each message is tokenized."""

    overhead = 2

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        with self.lock:
            for m in messages:
                self.calls[str(m.content)] = self.calls.get(str(m.content), 0) + 1
        return [len(str(m.content)) for m in messages]


def test_each_message_tokenized_once_across_100_growing_calls() -> None:
    tally = Tally()
    trimmer = TurnTrimmer(max_tokens=300, token_counter=tally)
    history: list[BaseMessage] = [SystemMessage("system prompt")]
    for i in range(100):
        history.append(HumanMessage(f"user message {i}") if i % 2 == 0 else AIMessage(f"ai {i}"))
        trimmer.invoke(history)
    assert len(tally.calls) == 101
    assert set(tally.calls.values()) == {1}


def test_editing_a_message_is_seen() -> None:
    tally = Tally()
    trimmer = TurnTrimmer(max_tokens=100, token_counter=tally)
    human, ai = HumanMessage("hello"), AIMessage("short", id="a")
    assert trimmer.trim_with_report([human, ai]).tokens_after == 2 + 5 + 5
    ai.content = "a much longer answer"
    assert trimmer.trim_with_report([human, ai]).tokens_after == 2 + 5 + 20
    ai.tool_calls = [{"name": "f", "args": {}, "id": "1", "type": "tool_call"}]
    ai.name = "bot"
    result = ToolMessage("done", tool_call_id="1")
    trimmer.invoke([human, ai, result])
    trimmer.invoke([human, ai, result])
    assert tally.calls == {"hello": 1, "short": 1, "a much longer answer": 2, "done": 1}


def test_equal_messages_in_new_objects_are_not_counted_again() -> None:
    tally = Tally()
    cached = CachedCounter(tally)
    first = [
        HumanMessage("hello"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}]),
    ]
    restored = [m.model_copy(deep=True) for m in first]  # e.g. loaded from a checkpoint
    assert cached.count_each(first) == cached.count_each(restored)
    assert tally.calls == {"hello": 1, "": 1}


def test_the_cache_by_content_sees_in_place_edits() -> None:
    tally = Tally()
    cached = CachedCounter(tally)
    message = HumanMessage([{"type": "text", "text": "short"}])
    before = cached.count_each([message])
    message.content.append({"type": "text", "text": "a much longer block"})  # type: ignore[union-attr]
    assert cached.count_each([message]) != before


def test_a_remembered_history_needs_an_assignment_or_clear_after_in_place_edits() -> None:
    trimmer = TurnTrimmer(max_tokens=10_000, token_counter=Tally())
    message = HumanMessage([{"type": "text", "text": "short"}])
    history = [message, AIMessage("ok")]
    trimmer.trim(history)
    before = trimmer.report(history).tokens_after  # planned twice: remembered
    message.content.append({"type": "text", "text": "a much longer block"})  # type: ignore[union-attr]
    assert trimmer.report(history).tokens_after == before  # documented: not seen
    message.content = list(message.content)  # an assignment is seen
    after = trimmer.report(history).tokens_after
    assert after != before
    message.content.append({"type": "text", "text": "more"})
    trimmer.clear_cache()  # so is a clear
    trimmer.trim(history)
    assert trimmer.report(history).tokens_after != after


def test_cache_is_bounded_lru() -> None:
    tally = Tally()
    cached = CachedCounter(tally, cache_size=10)
    messages = [HumanMessage(f"m{i}") for i in range(25)]
    cached.count_each(messages)
    assert len(cached) == 10
    cached.count_each(messages[-10:])  # the 10 most recent: all hits
    assert all(tally.calls[f"m{i}"] == 1 for i in range(15, 25))
    cached.count_each(messages[:1])  # evicted long ago: counted again
    assert tally.calls["m0"] == 2
    cached.clear()
    assert len(cached) == 0


def test_cache_threads_agree() -> None:
    trimmer = TurnTrimmer(max_tokens=150, token_counter=Tally(), cache_size=50)
    histories = [tool_history(n) for n in range(1, 30)]
    expected = [TurnTrimmer(max_tokens=150, token_counter=Tally()).invoke(h) for h in histories]
    results: list[Any] = [None] * len(histories)

    def work(k: int) -> None:
        for _ in range(5):
            results[k] = trimmer.invoke(histories[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(histories))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected
    assert len(trimmer.counter) <= 50  # type: ignore[arg-type]


# --- the approximate counter and functions ------------------------------------------


@settings(max_examples=300)
@given(message_histories())
def test_approximate_counter_is_additive(case: Any) -> None:
    _, messages, _ = case
    counter = ApproximateCounter()
    assert isinstance(counter, TokenCounter)
    assert sum(counter.count_each(messages)) == count_tokens_approximately(messages)


def message_length(message: BaseMessage) -> int:
    return len(message.content)


def list_length(messages: list[BaseMessage]) -> int:
    return sum(len(m.content) for m in messages)


@pytest.mark.parametrize(
    "counter",
    [
        pytest.param(message_length, id="postponed-annotation-message-function"),
        pytest.param(content_length, id="annotated-message-function"),
        pytest.param(per_message(lambda m: len(m.content)), id="explicit-per-message"),
        pytest.param(list_length, id="list-function"),
        pytest.param(per_list(list_length), id="explicit-per-list"),
        pytest.param(LENGTH, id="per-message-helper"),
    ],
)
@settings(max_examples=150)
@given(case=message_histories())
def test_function_counters_follow_the_spec(counter: Any, case: Any) -> None:
    records, messages, budget = case
    kept = TurnTrimmer(max_tokens=budget, token_counter=counter).invoke(messages)
    assert [m.id for m in kept] == [r["id"] for r in reference_trim(records, budget)]


def test_len_counts_messages() -> None:
    history = tool_history(3)  # 1 system + 3 turns of 5 messages
    kept = TurnTrimmer(max_tokens=11, token_counter=len).invoke(history)
    assert len(kept) == 11
    assert kept[1].id == "u1"


def test_count_tokens_approximately_function_is_recognised() -> None:
    trimmer = TurnTrimmer(max_tokens=10, token_counter=count_tokens_approximately)
    assert isinstance(trimmer.counter, ApproximateCounter)


@pytest.mark.slow
@settings(max_examples=500)
@given(strategies.messages())
def test_approximate_counter_equals_langchain_for_every_message(message: BaseMessage) -> None:
    assert ApproximateCounter().count_each([message]) == [count_tokens_approximately([message])]


@settings(max_examples=300)
@given(strategies.message_lists(max_size=12))
def test_approximate_counter_equals_langchain_message_by_message(
    messages: list[BaseMessage],
) -> None:
    """count_each counts a list in one inlined pass (and plan skips checking its own
    counts): every message still gets count_tokens_approximately's number."""
    counter = ApproximateCounter()
    expected = [count_tokens_approximately([m]) for m in messages]
    assert counter.count_each(messages) == expected
    kinds = [(PINNED, START, CONTINUE, CONTINUE)[i % 4] for i in range(len(messages))]
    planner = AdditivePlanner(counter, 0)
    for max_tokens in (0, sum(expected) // 2, sum(expected)):
        plan = planner.plan(messages, kinds, max_tokens)
        assert plan == plan_costs(kinds, expected, max_tokens)


def test_approximate_counter_field_deleted_names_the_field() -> None:
    """A field missing from the message's ``__dict__``: LangChain's count fails
    with a bare ``AttributeError``; the counter names the message and the field."""
    message = HumanMessage("hi", name="n", id="h")
    del message.__dict__["name"]
    with pytest.raises(AttributeError):
        count_tokens_approximately([message])
    with pytest.raises(ValueError, match=r"^messages\[0\] \(id 'h'\) has no 'name' field") as info:
        ApproximateCounter().count_each([message])
    assert isinstance(info.value.__cause__, AttributeError)


def test_approximate_counter_subclass_counts_are_checked() -> None:
    class Negative(ApproximateCounter):
        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            return [-1] * len(messages)

    history = [HumanMessage("hi", id="h")]
    with pytest.raises(ValueError, match=r"counted messages\[0\] \(id 'h'\) as -1"):
        AdditivePlanner(Negative(), 0).plan(history, message_kinds(history), 10)
    with pytest.raises(ValueError, match=r"counted messages\[0\] \(id 'h'\) as -1"):
        TurnTrimmer(max_tokens=10, token_counter=Negative()).trim(history)


@pytest.mark.parametrize("bad", [1.5, "3", None, True])
def test_function_returning_bad_counts(bad: Any) -> None:
    trimmer = TurnTrimmer(max_tokens=10, token_counter=per_message(lambda m: bad))
    with pytest.raises((TypeError, ValueError), match=r"counted messages\[0\] \(id 'h'\) as"):
        trimmer.invoke([HumanMessage("x", id="h")])


@given(st.lists(st.text(max_size=30), max_size=8))
def test_message_function_counter_sums(texts: list[str]) -> None:
    messages = [HumanMessage(t) for t in texts]
    counter = per_message(content_length)
    assert counter.overhead == 0
    assert counter.count_each(messages) == [len(t) for t in texts]


def test_the_suite_wide_guard_catches_a_mutated_history() -> None:
    """conftest checks every planned history is unchanged: prove it can fail."""

    class Vandal:
        overhead = 0

        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            messages[0].content = "changed"
            return [1] * len(messages)

    with pytest.raises(AssertionError, match="a history was mutated"):
        TurnTrimmer(max_tokens=10, token_counter=Vandal(), cache_size=0).invoke([HumanMessage("x")])
    # A cached counter is given frozen copies: its assignments never reach the history.
    history = [HumanMessage("x")]
    TurnTrimmer(max_tokens=10, token_counter=Vandal()).invoke(history)
    assert history[0].content == "x"


@pytest.mark.parametrize(
    ("message", "field", "value"),
    [
        (HumanMessage("a"), "content", "b"),
        (HumanMessage("a"), "name", "n"),
        (HumanMessage("a"), "additional_kwargs", {"name": "n"}),
        (AIMessage("a"), "tool_calls", [{"name": "f", "args": {}, "id": "1"}]),
        (AIMessage("a"), "invalid_tool_calls", [{"name": "f", "args": "{", "id": "1"}]),
        (ToolMessage("a", tool_call_id="1"), "tool_call_id", "2"),
        (ChatMessage(content="a", role="user"), "role", "assistant"),
    ],
)
def test_message_key_covers_every_field_a_remembered_history_checks(
    message: BaseMessage, field: str, value: Any
) -> None:
    """message_key and message_fields spell the same fields out separately (for
    speed): a field in one must change the other."""
    before_key, before_fields = message_key(message), message_fields(message)
    setattr(message, field, value)
    assert message_key(message) != before_key
    assert message_fields(message) != before_fields


@pytest.mark.parametrize("cache_size", [16, 0])
def test_count_each_may_return_any_iterable_of_ints(cache_size: int) -> None:
    class Lazy:
        overhead = 1

        def count_each(self, messages: Sequence[BaseMessage]) -> Any:
            return (len(str(m.content)) for m in messages)

    history = [HumanMessage("hello"), AIMessage("hi")]
    trimmer = TurnTrimmer(max_tokens=100, token_counter=Lazy(), cache_size=cache_size)
    assert trimmer.trim_with_report(history).tokens_after == 1 + 5 + 2


def test_an_overhead_that_changes_is_checked_where_it_is_used() -> None:
    class Fickle:
        overhead: Any = 0

        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            return [1] * len(messages)

    fickle = Fickle()
    trimmer = TurnTrimmer(max_tokens=100, token_counter=fickle)
    fickle.overhead = 2.5
    with pytest.raises(TypeError, match=r"Fickle.overhead must be an int, got float 2.5"):
        trimmer.invoke([HumanMessage("x")])


def test_int_subclass_counts_are_read_as_the_ints_they_hold() -> None:
    class Sticky(int):
        def __add__(self, other: object) -> int:
            return 0

        __radd__ = __add__

    class Counter:
        overhead = 0

        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            return [Sticky(7) for _ in messages]

    report = TurnTrimmer(max_tokens=100, token_counter=Counter()).trim_with_report(
        [HumanMessage("a"), AIMessage("b")]
    )
    assert report.tokens_after == 14
    assert type(report.tokens_after) is int


@pytest.mark.usefixtures("tiktoken_cache")
def test_one_turn_and_a_per_request_constant_report_what_is_sent() -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    count = ChatOpenAI(model="gpt-4", api_key=SecretStr("sk-test")).get_num_tokens_from_messages
    system = SystemMessage("You are terse.")
    history = [system, HumanMessage("hello there"), AIMessage("hi")]
    trimmer = TurnTrimmer(max_tokens=10, token_counter=per_list(count))
    report = trimmer.trim_with_report(history)
    assert report.kept == [system]
    assert report.tokens_after == count([system]) > 10
    assert report.budget_met is False
    with pytest.raises(TurnTrimOverflowError):
        TurnTrimmer(max_tokens=10, token_counter=per_list(count), on_overflow="raise").invoke(
            history
        )
    # With two turns the constant comes from the two counted apart and together.
    longer = [system, HumanMessage("a long question " * 10), AIMessage("ok"), *history[1:]]
    report = TurnTrimmer(max_tokens=10, token_counter=per_list(count)).trim_with_report(longer)
    assert report.kept == [system]
    assert report.tokens_after == count([system])


def test_no_list_of_system_messages_alone_is_ever_counted() -> None:
    model = StrictModel()  # rejects a conversation without a user message
    history = [SystemMessage("s" * 40), HumanMessage("q" * 30), AIMessage("a" * 30)]
    report = TurnTrimmer(max_tokens=20, token_counter=model).trim_with_report(history)
    assert report.kept == history[:1]
    assert report.tokens_after == 3 + 40  # what sending the system message would count
    assert all(any(isinstance(m, HumanMessage) for m in sent) for sent in model.sent)


# --- models bound with tools ---------------------------------------------------------------


def weather(city: str) -> str:
    """The weather in a city, today, with the temperature, the wind and the rain."""
    return "mild"


class ToolCountingModel(GenericFakeChatModel):
    """A chat model whose own count takes tools (as ChatAnthropic's does):
    3 per request, a message's content length, 50 per tool."""

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        return 3 + sum(len(str(m.content)) for m in messages) + 50 * len(tools or ())


class PlainModel(GenericFakeChatModel):
    """A chat model whose count knows nothing of tools."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage]) -> int:  # type: ignore[override]
        return 3 + sum(len(str(m.content)) for m in messages)


def fake(cls: type[GenericFakeChatModel]) -> Any:
    return cls(messages=iter([]))


TURNS = [HumanMessage("q" * 20), AIMessage("a" * 20), HumanMessage("r" * 20), AIMessage("b" * 20)]


@pytest.mark.usefixtures("tiktoken_cache")
def test_an_openai_model_bound_with_tools_prices_them() -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    model = ChatOpenAI(model="gpt-4", api_key=SecretStr("sk-test"))
    bound = model.bind_tools([weather])
    plain = TurnTrimmer(max_tokens=10_000, token_counter=model)
    priced = TurnTrimmer(max_tokens=10_000, token_counter=bound)
    tools = TiktokenCounter("gpt-4").count_tools(bound.kwargs["tools"])  # type: ignore[attr-defined]
    assert tools > 20
    assert priced.counter.count(TURNS) == plain.counter.count(TURNS) + tools
    assert priced.trim_with_report(TURNS).overhead_tokens == 3 + tools
    budget = plain.counter.count(TURNS) + tools
    assert TurnTrimmer(max_tokens=budget, token_counter=bound).invoke(TURNS) == TURNS
    assert TurnTrimmer(max_tokens=budget - 1, token_counter=bound).invoke(TURNS) == TURNS[2:]
    assert TurnTrimmer(max_tokens=budget - 1, token_counter=model).invoke(TURNS) == TURNS


def test_a_model_that_counts_tools_is_given_them() -> None:
    bound = fake(ToolCountingModel).bind(tools=[weather])
    trimmer = TurnTrimmer(max_tokens=10_000, token_counter=bound)
    assert trimmer.counter.count(TURNS) == 3 + 80 + 50
    assert TurnTrimmer(max_tokens=3 + 80 + 49, token_counter=bound).invoke(TURNS) == TURNS[2:]


class SentModel(PlainModel):
    """``PlainModel``, recording what it is sent."""

    sent: list[list[BaseMessage]] = Field(default_factory=list)

    def get_num_tokens_from_messages(self, messages: list[BaseMessage]) -> int:  # type: ignore[override]
        self.sent.append(list(messages))
        return super().get_num_tokens_from_messages(messages)


def test_a_model_that_cannot_count_tools_prices_them_in_its_own_units() -> None:
    model = fake(SentModel)
    bound = model.bind(tools=[weather])
    trimmer = TurnTrimmer(max_tokens=10_000, token_counter=bound)
    approximate = ApproximateCounter()
    # The tools' approximate estimate, scaled by the model's count over the approximate one.
    scale = (3 + 80) / approximate.count(TURNS)
    tools = math.ceil(approximate.count_tools([weather]) * scale)
    assert tools > 0
    assert trimmer.counter.count(TURNS) == 3 + 80 + tools
    newest = (
        3 + 40 + math.ceil(approximate.count_tools([weather]) * 43 / approximate.count(TURNS[2:]))
    )
    report = TurnTrimmer(max_tokens=3 + 80 + tools - 1, token_counter=bound).trim_with_report(TURNS)
    assert report.kept == TURNS[2:]
    assert report.tokens_after == newest
    # The schemas are never sent as messages: only the conversation is.
    assert len(tool_json(weather)) > 40
    assert all(isinstance(m, (HumanMessage, AIMessage)) for sent in model.sent for m in sent)
