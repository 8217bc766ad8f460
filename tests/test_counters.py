"""What ``token_counter=`` accepts: every row of the counting guide's table
builds a trimmer that keeps the spec's cut by that counter's own count;
anything else is refused when the trimmer is built, with an error that says
what to pass instead; bad counts are named by the message they are of; and a
counter that counts only whole lists is sent only valid conversations, a
bounded number of times per trim, and never breaks the trim with a huge count."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langchain_core.tools import tool
from pydantic import SecretStr

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TiktokenCounter,
    TokenCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    per_list,
    per_message,
)
from tests.strategies import conversations, json_values, messages


@tool
def lookup(query: str) -> str:
    """Look a query up in the knowledge base and return the best passages."""
    return query


def openai(model: str = "gpt-4") -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, api_key=SecretStr("sk-test"))


class OwnCounting(GenericFakeChatModel):
    """A provider's chat model whose own count takes tools (as ChatAnthropic's does)."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return 3 + sum(len(m.text) // 4 + 4 for m in messages) + 25 * len(tools or ())

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=list(tools))


class PlainCounting(GenericFakeChatModel):
    """A chat model whose own count knows nothing of tools."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage]) -> int:  # type: ignore[override]
        return 3 + sum(len(m.text) // 3 + 2 for m in messages)


class Own:
    """A ``TokenCounter`` of one's own, pricing tools itself."""

    overhead = 3

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return [len(m.text) // 4 + 4 for m in messages]

    def count_tools(self, tools: Sequence[Any]) -> int:
        return 11 * len(tools)


def message_tokens(message: BaseMessage) -> int:
    return len(message.text) // 4 + 4


def list_tokens(messages: list[BaseMessage]) -> int:
    return 2 + sum(len(m.text) // 5 + 1 for m in messages)


def list_and_tools(messages: list[BaseMessage], tools: Sequence[Any] = ()) -> int:
    return list_tokens(messages) + 17 * len(tools)


def annotated(message: BaseMessage) -> int:
    return len(message.text) // 4 + 4


annotated.__annotations__["message"] = BaseMessage  # a real class, not the postponed string


def pinned_first(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A request as a whole-list counter is sent it: the system messages first."""
    return [m for m in messages if role(m) == "system"] + [
        m for m in messages if role(m) != "system"
    ]


Truth = Callable[[list[BaseMessage], list[Any]], int]


def tiktoken_truth(messages: list[BaseMessage], tools: list[Any]) -> int:
    counted: int = openai().get_num_tokens_from_messages(messages)
    return counted + (TiktokenCounter("gpt-4").count_tools(tools) if tools else 0)


def bound_openai() -> Any:
    return openai().bind_tools([lookup])


def bound_truth(messages: list[BaseMessage], tools: list[Any]) -> int:
    bound_tools = bound_openai().kwargs["tools"]
    return tiktoken_truth(messages, [*bound_tools, *tools])


def calibrated_truth(messages: list[BaseMessage], tools: list[Any]) -> int:
    # Before its first report: the base count plus the 15% warm-up margin, per message.
    del tools
    return sum(math.ceil(1.15 * count_tokens_approximately([m])) for m in messages)


#: Each row of the guide's counter table -> (setup, its own count of a request).
#: A ``None`` truth for tools: the row prices tools its own way (checked > 0).
ROWS: dict[str, tuple[Callable[[], Any], Truth, bool]] = {
    "approximate": (
        lambda: "approximate",
        lambda m, t: count_tokens_approximately(m, tools=t or None),
        True,
    ),
    "count_tokens_approximately": (
        lambda: count_tokens_approximately,
        lambda m, t: count_tokens_approximately(m, tools=t or None),
        True,
    ),
    "TiktokenCounter(gpt-4)": (lambda: TiktokenCounter("gpt-4"), tiktoken_truth, True),
    "tiktoken:gpt-4": (lambda: "tiktoken:gpt-4", tiktoken_truth, True),
    "tiktoken:cl100k_base": (lambda: "tiktoken:cl100k_base", tiktoken_truth, True),
    "TiktokenCounter(cl100k_base)": (lambda: TiktokenCounter("cl100k_base"), tiktoken_truth, True),
    "ChatOpenAI": (openai, tiktoken_truth, True),
    "ChatOpenAI bound with tools": (bound_openai, bound_truth, False),  # see below
    "a model counting its own way": (
        lambda: OwnCounting(messages=iter([])),
        lambda m, t: OwnCounting(messages=iter([])).get_num_tokens_from_messages(m, tools=t),
        True,
    ),
    "a model counting its own way, bound with tools": (
        lambda: OwnCounting(messages=iter([])).bind_tools([lookup]),
        lambda m, t: OwnCounting(messages=iter([])).get_num_tokens_from_messages(
            m, tools=[lookup, *t]
        ),
        True,
    ),
    "a model that does not count tools": (
        lambda: PlainCounting(messages=iter([])),
        lambda m, t: PlainCounting(messages=iter([])).get_num_tokens_from_messages(m),
        False,
    ),
    "per_message(fn)": (
        lambda: per_message(message_tokens),
        lambda m, t: sum(map(message_tokens, m)),
        False,
    ),
    "per_list(fn)": (lambda: per_list(list_tokens), lambda m, t: list_tokens(m), False),
    "per_list(fn, takes_tools=True)": (
        lambda: per_list(list_and_tools, takes_tools=True),
        list_and_tools,
        True,
    ),
    "a function of a message (postponed annotation)": (
        lambda: message_tokens,
        lambda m, t: sum(map(message_tokens, m)),
        False,
    ),
    "a function of a message (annotation object)": (
        lambda: annotated,
        lambda m, t: sum(map(annotated, m)),
        False,
    ),
    "a function of a list": (lambda: list_tokens, lambda m, t: list_tokens(m), False),
    "a lambda (a list)": (
        lambda: lambda messages: list_tokens(messages),  # noqa: PLW0108 - unannotated
        lambda m, t: list_tokens(m),
        False,
    ),
    "your own TokenCounter": (
        Own,
        lambda m, t: 3 + sum(map(message_tokens, m)) + 11 * len(t),
        True,
    ),
    "CalibratedCounter()": (CalibratedCounter, calibrated_truth, False),
}

HISTORY: list[BaseMessage] = [
    SystemMessage("You are terse."),
    *[
        m
        for i in range(6)
        for m in (HumanMessage(f"question {i} " * 20), AIMessage(f"answer {i} " * 25))
    ],
    HumanMessage("and now?"),
]


def role(message: BaseMessage) -> str:
    """'system', 'user' or 'other', as the spec groups messages."""
    if isinstance(message, ChatMessage):
        roles = {"system": "system", "developer": "system", "user": "user", "human": "user"}
        return roles.get(message.role, "other")
    if isinstance(message, SystemMessage):
        return "system"
    return "user" if isinstance(message, HumanMessage) else "other"


def turn_starts(history: Sequence[BaseMessage]) -> list[int]:
    return [i for i, m in enumerate(history) if role(m) == "user"]


def request_from(history: Sequence[BaseMessage], start: int) -> list[BaseMessage]:
    """The request keeping every turn from ``start``: every system message, then the turns."""
    pinned = [m for m in history if role(m) == "system"]
    return pinned + [m for m in history[start:] if role(m) != "system"]


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("row", list(ROWS))
def test_each_row_of_the_table_keeps_the_spec_s_cut_by_its_own_count(row: str) -> None:
    setup, truth, prices_tools = ROWS[row]
    budget = truth(pinned_first(HISTORY), []) * 3 // 5
    report = TurnTrimmer(max_tokens=budget, token_counter=setup()).trim_with_report(HISTORY)
    assert report.kept[0] is HISTORY[0]
    assert report.kept[-1] is HISTORY[-1]
    assert 0 < report.dropped_turns < report.turns
    assert report.tokens_after == truth(pinned_first(report.kept), []) <= budget
    one_more = request_from(HISTORY, report.plan.keep_from - 2)  # each older turn is two messages
    assert truth(one_more, []) > budget
    # Tools are priced in every count: exactly as the row's own count prices them where it does.
    everything = TurnTrimmer(max_tokens=10**9, token_counter=setup())
    with_tools = everything.report(HISTORY, tools=[lookup]).tokens_after
    without = everything.report(HISTORY).tokens_after
    assert with_tools > without
    if prices_tools:
        assert with_tools == truth(pinned_first(HISTORY), [lookup])
    TurnTrimMiddleware(max_tokens=budget, token_counter=setup())  # the middleware takes it too


@pytest.mark.usefixtures("tiktoken_cache")
def test_a_model_bound_with_tools_and_sent_more_prices_all_of_them_as_one_request() -> None:
    """The cookbook's 12 tokens "once for all functions" are paid once, not per tool list."""
    report = TurnTrimmer(max_tokens=10**6, token_counter=bound_openai()).report(
        HISTORY, tools=[lookup]
    )
    assert report.tokens_after == bound_truth(HISTORY, [lookup])


@pytest.mark.usefixtures("tiktoken_cache")
def test_an_openai_model_is_counted_locally_by_tiktoken() -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=openai())
    assert isinstance(trimmer.counter, TiktokenCounter)
    assert trimmer.counter.blocking is False  # no round trip, nothing to run in a thread


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("budget", [5, 40, 120, 400])
def test_tiktoken_counter_is_a_token_counter_for_trim_messages(budget: int) -> None:
    options: dict[str, Any] = {"max_tokens": budget, "strategy": "last", "start_on": "human"}
    exact = trim_messages(HISTORY, token_counter=TiktokenCounter("gpt-4"), **options)
    assert exact == trim_messages(HISTORY, token_counter=openai(), **options)
    assert TiktokenCounter("gpt-4")(HISTORY) == openai().get_num_tokens_from_messages(HISTORY)


@pytest.mark.usefixtures("tiktoken_cache")
def test_tiktoken_counter_takes_an_encoding_name() -> None:
    by_name = TiktokenCounter("cl100k_base")
    assert by_name.encoding.name == "cl100k_base"
    assert by_name.count_each(HISTORY) == TiktokenCounter("gpt-4").count_each(HISTORY)


# -- what is refused, and how -------------------------------------------------------


class NegativeOverhead:
    overhead = -1

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return [1] * len(messages)


class TextOverhead(NegativeOverhead):
    overhead = "3"  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("value", "error", "fragment"),
    [
        (ApproximateCounter, TypeError, "pass an instance, ApproximateCounter()"),
        (TiktokenCounter, TypeError, "pass an instance, TiktokenCounter()"),
        (CalibratedCounter, TypeError, "pass an instance, CalibratedCounter()"),
        (Own, TypeError, "pass an instance, Own()"),
        ("exact", ValueError, "unknown token_counter 'exact'; the shortcuts are 'approximate'"),
        ("Approximate", ValueError, "unknown token_counter 'Approximate'"),
        ("tiktoken:", ValueError, "'tiktoken:MODEL' or 'tiktoken:ENCODING'"),
        ("tiktoken:gpt4o", ValueError, "gpt-4o"),  # the closest known names
        (42, TypeError, "token_counter must be 'approximate'"),
        (None, TypeError, "got NoneType None"),
        ([1, 2], TypeError, "got list [1, 2]"),
        (NegativeOverhead(), ValueError, "NegativeOverhead.overhead must be >= 0, got -1"),
        (TextOverhead(), TypeError, "TextOverhead.overhead must be an int, got str '3'"),
    ],
)
def test_what_is_not_a_counter_is_refused_when_the_trimmer_is_built(
    value: Any, error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as raised:
        TurnTrimmer(max_tokens=100, token_counter=value)
    assert fragment in str(raised.value)
    with pytest.raises(error):
        TurnTrimMiddleware(max_tokens=100, token_counter=value)


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: per_message(3), "per_message needs a callable, got int 3"),  # type: ignore[arg-type]
        (lambda: per_list("len"), "per_list needs a callable, got str 'len'"),  # type: ignore[arg-type]
        (lambda: per_list(len, takes_tools=1), "takes_tools must be a bool, got int 1"),  # type: ignore[arg-type]
    ],
)
def test_the_adapters_refuse_what_they_cannot_call(build: Callable[[], Any], fragment: str) -> None:
    with pytest.raises(TypeError, match=None) as raised:
        build()
    assert fragment in str(raised.value)


def deepseek() -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="deepseek-chat", base_url="http://localhost:9", api_key=SecretStr("k"))


@pytest.mark.parametrize("bound", [False, True], ids=["model", "bound-with-tools"])
@pytest.mark.usefixtures("tiktoken_cache")
def test_a_model_that_cannot_count_is_refused_with_what_to_use(bound: bool) -> None:
    model = deepseek().bind_tools([lookup]) if bound else deepseek()
    with pytest.raises(ValueError, match="cannot count tokens") as raised:
        TurnTrimmer(max_tokens=100, token_counter=model)
    assert "'deepseek-chat'" in str(raised.value)
    assert "CalibratedCounter()" in str(raised.value)
    with pytest.raises(ValueError, match="CalibratedCounter"):
        TurnTrimMiddleware(max_tokens=100, token_counter=model)


@pytest.mark.parametrize("bound", [False, True], ids=["model", "bound-with-tools"])
def test_refusing_a_model_that_cannot_count_needs_no_encoding_file(bound: bool) -> None:
    """No tiktoken cache here: the refusal must not load (or download) an encoding."""
    model = deepseek().bind_tools([lookup]) if bound else deepseek()
    with pytest.raises(ValueError, match="CalibratedCounter"):
        TurnTrimmer(max_tokens=100, token_counter=model)


def test_a_model_left_with_langchain_s_default_counting_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "transformers" else find_spec(name, *args),
    )
    model = GenericFakeChatModel(messages=iter([]))
    for value in (model, model.bind(tools=[lookup])):
        with pytest.raises(ValueError, match="needs the transformers package") as raised:
            TurnTrimmer(max_tokens=100, token_counter=value)
        assert "CalibratedCounter()" in str(raised.value)


class Returns:
    """A ``TokenCounter`` returning ``answer(messages)``."""

    overhead = 0

    def __init__(self, answer: Callable[[Sequence[BaseMessage]], Any]) -> None:
        self.answer = answer

    def count_each(self, messages: Sequence[BaseMessage]) -> Any:
        return self.answer(messages)

    def __repr__(self) -> str:
        return "Returns()"


def bad_at_the_reply(value: object) -> Callable[[Sequence[BaseMessage]], list[Any]]:
    return lambda ms: [value if isinstance(m, AIMessage) else 1 for m in ms]


NAMED = [SystemMessage("rules", id="s"), HumanMessage("hi", id="h"), AIMessage("yo", id="a")]


@pytest.mark.parametrize(
    ("counter", "error", "fragment"),
    [
        (Returns(bad_at_the_reply(-1)), ValueError, "counted messages[2] (id 'a') as int -1"),
        (Returns(bad_at_the_reply(1.5)), TypeError, "counted messages[2] (id 'a') as float 1.5"),
        (Returns(bad_at_the_reply(True)), TypeError, "counted messages[2] (id 'a') as bool True"),
        (Returns(bad_at_the_reply("3")), TypeError, "counted messages[2] (id 'a') as str '3'"),
        (Returns(bad_at_the_reply(None)), TypeError, "messages[2] (id 'a') as NoneType None"),
        (Returns(lambda ms: [1]), ValueError, "returned 1 counts for "),
        (Returns(lambda ms: [1] * (len(ms) + 1)), ValueError, "counts for"),
        (Returns(lambda ms: 7), TypeError, "count_each returned int 7, expected a list of ints"),
        (per_message(lambda m: -2 if m.id == "a" else 1), ValueError, "messages[2] (id 'a')"),
        (CalibratedCounter(Returns(bad_at_the_reply(-1))), ValueError, "messages[2] (id 'a')"),
        (per_list(lambda ms: -1), ValueError, "must be >= 0, got -1"),
        (per_list(lambda ms: 2.5), TypeError, "must be an int, got float 2.5"),  # type: ignore[arg-type, return-value]
        (per_list(lambda ms: None), TypeError, "must be an int, got NoneType None"),  # type: ignore[arg-type, return-value]
    ],
)
def test_bad_counts_are_named_by_the_message_they_are_of(
    counter: Any, error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as raised:
        TurnTrimmer(max_tokens=1_000, token_counter=counter).trim(NAMED)
    assert fragment in str(raised.value)


def test_a_bare_function_is_classified_like_trim_messages_does() -> None:
    seen: list[Any] = []

    def per_item(message: BaseMessage) -> int:
        seen.append(message)
        return 1

    def whole(messages: list[BaseMessage]) -> int:
        seen.append(messages)
        return len(messages)

    TurnTrimmer(max_tokens=100, token_counter=per_item).trim(NAMED)
    assert seen
    assert all(isinstance(item, BaseMessage) for item in seen)
    seen.clear()
    TurnTrimmer(max_tokens=100, token_counter=whole).trim(NAMED)
    assert seen
    assert all(isinstance(item, list) for item in seen)
    approximate = TurnTrimmer(max_tokens=100, token_counter=count_tokens_approximately)
    assert isinstance(approximate.counter, ApproximateCounter)


def test_your_own_counter_prices_tools_as_messages_without_count_tools() -> None:
    class NoTools:
        overhead = 2

        def __init__(self) -> None:
            self.seen: list[BaseMessage] = []

        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            self.seen += messages
            return [len(m.text) for m in messages]

    counter = NoTools()
    assert isinstance(counter, TokenCounter)
    report = TurnTrimmer(max_tokens=10**6, token_counter=counter).report(NAMED, tools=[lookup])
    schemas = [m for m in counter.seen if "knowledge base" in m.text]
    assert schemas
    assert all(isinstance(m, SystemMessage) for m in schemas)
    assert report.tool_tokens == sum(len(m.text) for m in schemas[:1])
    assert report.tokens_after == 2 + sum(len(m.text) for m in NAMED) + report.tool_tokens
    own = TurnTrimmer(max_tokens=10**6, token_counter=Own()).report(NAMED, tools=[lookup, lookup])
    assert own.tool_tokens == 22


# -- counters of whole lists ----------------------------------------------------------


def approx13(messages: Sequence[BaseMessage]) -> int:
    """A provider counting 1.3 times the approximate count."""
    return math.ceil(1.3 * count_tokens_approximately(messages))


class Recorder:
    """A whole-list count, recording every list it is sent."""

    def __init__(self, count: Callable[[Sequence[BaseMessage]], int]) -> None:
        self.count = count
        self.sent: list[list[BaseMessage]] = []

    def __call__(self, messages: list[BaseMessage]) -> int:
        self.sent.append(list(messages))
        return self.count(messages)


def check_valid_conversation(sent: list[BaseMessage], history: list[BaseMessage]) -> None:
    """Every system message first, then a user message, then whole turns (a suffix)."""
    pinned = [m for m in history if role(m) == "system"]
    assert [id(m) for m in sent[: len(pinned)]] == list(map(id, pinned))
    rest = sent[len(pinned) :]
    assert rest, "a list of system messages alone was counted"
    assert role(rest[0]) == "user"
    suffixes = [[id(m) for m in request_from(history, s)] for s in turn_starts(history)]
    assert list(map(id, sent)) in suffixes


def calls_bound(turns: int) -> float:
    return 2 * math.log2(max(turns, 1)) + 4


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(history=conversations(max_turns=10), share=st.floats(0, 1.2))
def test_a_whole_list_counter_keeps_the_longest_suffix_its_own_count_fits(
    history: list[BaseMessage], share: float
) -> None:
    budget = int(share * approx13(history))
    record = Recorder(approx13)
    report = TurnTrimmer(max_tokens=budget, token_counter=per_list(record)).trim_with_report(
        history
    )
    assert len(record.sent) <= calls_bound(report.turns)
    kept_turn = any(role(m) == "user" for m in report.kept)
    if kept_turn:
        assert report.tokens_after == approx13(report.kept)
    else:  # the system messages alone: perhaps measured beside a user message
        assert abs(report.tokens_after - approx13(report.kept)) <= 2
    assert report.budget_met == (report.tokens_after <= budget)
    starts = turn_starts(history)
    newest = approx13(request_from(history, starts[-1]))
    assert kept_turn == (newest <= budget)
    if kept_turn:
        assert report.budget_met
        first = starts.index(report.plan.keep_from)
        assert first == 0 or approx13(request_from(history, starts[first - 1])) > budget


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(history=conversations(max_turns=10), share=st.floats(0, 1.2), tools=st.booleans())
def test_a_whole_list_counter_is_only_ever_sent_valid_conversations(
    history: list[BaseMessage], share: float, tools: bool
) -> None:
    """A provider's count endpoint refuses anything else (a request of system
    messages alone, say); tools go as ``tools=``, never as messages."""
    record = Recorder(approx13)
    trimmer = TurnTrimmer(max_tokens=int(share * approx13(history)), token_counter=per_list(record))
    trimmer.report(history, tools=[lookup] if tools else [])
    for sent in record.sent:
        check_valid_conversation(sent, history)


def long_history(turns: int) -> list[BaseMessage]:
    history: list[BaseMessage] = [SystemMessage("rules " * 10)]
    for t in range(turns):
        call = {"name": "lookup", "args": {"query": f"q{t}"}, "id": f"c{t}"}
        history += [
            HumanMessage(f"question {t} " * (1 + t % 7)),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"result {t} " * (3 + t % 11), tool_call_id=f"c{t}"),
            AIMessage(f"answer {t} " * (2 + t % 5)),
        ]
    return history


@pytest.mark.parametrize("turns", [1, 10, 60, 300])
@pytest.mark.parametrize("share", [0.0, 0.05, 0.3, 0.7, 0.99, 1.5])
@pytest.mark.parametrize(
    "count",
    [approx13, lambda ms: math.ceil(0.2 * count_tokens_approximately(ms)), len],
    ids=["1.3x", "0.2x", "len"],
)
def test_a_whole_list_counter_is_asked_a_logarithmic_number_of_times(
    turns: int, share: float, count: Callable[[Sequence[BaseMessage]], int]
) -> None:
    history = long_history(turns)
    record = Recorder(count)
    budget = int(share * count(history))
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=per_list(record))
    report = trimmer.trim_with_report(history)
    assert len(record.sent) <= calls_bound(turns)
    assert report.budget_met == (report.tokens_after <= budget)
    record.sent.clear()
    trimmer.trim([*history, HumanMessage("one more")])  # the next call, a message longer
    assert len(record.sent) <= calls_bound(turns + 1)


def test_a_whole_list_counter_is_never_asked_the_same_request_twice_in_one_trim() -> None:
    history = long_history(60)
    record = Recorder(count_tokens_approximately)
    budget = int(0.5 * count_tokens_approximately(history))  # above the cache's least prefix
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=per_list(record), trim_to="auto")
    trimmer.trim(history)  # plans twice: greedy, then at the cut the cache prices
    sent = [tuple(map(id, request)) for request in record.sent]
    assert len(sent) == len(set(sent))


JUNK = st.one_of(
    messages(),
    messages(),
    st.none(),
    st.integers(),
    st.text(max_size=5),
    st.tuples(st.sampled_from(["user", "ai", "system", "tool", "robot"]), st.text(max_size=5)),
    st.dictionaries(st.sampled_from(["role", "content", "type"]), json_values(max_leaves=3)),
    st.just(RemoveMessage(id="gone")),
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=st.lists(JUNK, max_size=8),
    budget=st.integers(0, 300),
    on_overflow=st.sampled_from(["drop", "raise", "compact"]),
    tools=st.sampled_from([[], [lookup]]),
)
def test_a_whole_list_counter_never_meets_an_attribute_error_whatever_the_list(
    history: list[Any], budget: int, on_overflow: str, tools: list[Any]
) -> None:
    trimmer = TurnTrimmer(
        max_tokens=budget, token_counter=per_list(approx13), on_overflow=on_overflow
    )
    try:
        trimmer.report(history, tools=tools)
    except TurnTrimOverflowError:
        pass
    except (TypeError, ValueError) as error:
        assert "messages[" in str(error)  # noqa: PT017 - the error names the bad item


HUGE = 10**400


class HugeOverhead:
    overhead = HUGE

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return [1] * len(messages)


HUGE_COUNTERS: dict[str, Callable[[], Any]] = {
    "per_list": lambda: per_list(lambda ms: HUGE),
    "per_list takes_tools": lambda: per_list(lambda ms, tools=(): HUGE, takes_tools=True),
    "per_list, small lists small": lambda: per_list(lambda ms: HUGE if len(ms) > 2 else 5),
    "per_message": lambda: per_message(lambda m: HUGE),
    "calibrated": lambda: CalibratedCounter(per_message(lambda m: HUGE)),
    "overhead": HugeOverhead,
}


@pytest.mark.parametrize("counter", list(HUGE_COUNTERS))
def test_a_count_past_any_float_gives_a_plan_or_a_clear_error(counter: str) -> None:
    """Every option with a count of 10**400: what fits, or TurnTrimOverflowError."""
    turns = [HumanMessage("q"), AIMessage("a"), HumanMessage("")]
    broken = []
    cases = [
        (history, on_overflow, trim_to, tools)
        for history in (turns, [SystemMessage("s"), *turns])
        for on_overflow in ("drop", "raise", "compact")
        for trim_to in (None, 3, "auto")
        for tools in ([], [lookup])
    ]
    for history, on_overflow, trim_to, tools in cases:
        trimmer = TurnTrimmer(
            max_tokens=10,
            token_counter=HUGE_COUNTERS[counter](),
            on_overflow=on_overflow,
            trim_to=trim_to,
        )
        try:
            report = trimmer.report(history, tools=tools)
        except TurnTrimOverflowError as error:
            assert "does not fit" in str(error)  # noqa: PT017
            continue
        except OverflowError as error:
            case = (len(history), on_overflow, trim_to, len(tools))
            broken.append((*case, str(error)))
            continue
        turns_kept = [m for m in report.kept if role(m) != "system"]
        assert not turns_kept or report.tokens_after <= 10
    assert broken == []
