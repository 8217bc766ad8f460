"""The count cache: a remembered count never differs from a fresh count,
whatever happens to the messages (fields reassigned, copies, values equal in
Python but of other types, threads writing meanwhile); an equal message in a
new object is not counted again; the cache is bounded and holds nothing of a
message that is gone; and tool prices are remembered until a tool changes."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from langchain_turntrim import ApproximateCounter, CalibratedCounter, TiktokenCounter, TurnTrimmer
from langchain_turntrim._counting.cache import CountCache
from langchain_turntrim._pipeline import Pipeline
from tests import strategies as lcst

pytestmark = pytest.mark.usefixtures("tiktoken_cache")

BIG = 10**9
ANCHOR = HumanMessage("the turn every generated message belongs to")


def counted_fields(message: BaseMessage) -> tuple[Any, ...]:
    fields = message.__dict__
    names = ("content", "name", "additional_kwargs", "type", "tool_calls", "tool_call_id", "role")
    return tuple(fields.get(name) for name in names)


class Crc:
    """A ``TokenCounter`` that tells apart whatever ``repr`` tells apart (``1``,
    ``True`` and ``1.0``; dict orders), and counts how many messages it counted."""

    overhead = 1

    def __init__(self) -> None:
        self.calls = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        self.calls += len(messages)
        return [zlib.crc32(repr(counted_fields(m)).encode()) % 997 + 1 for m in messages]

    def __repr__(self) -> str:
        return "Crc()"


COUNTERS: dict[str, Callable[[], Any]] = {"own": Crc, "tiktoken": lambda: TiktokenCounter("gpt-4")}


def outcome(trimmer: TurnTrimmer, history: Sequence[BaseMessage]) -> tuple[Any, ...]:
    """What a trim says (its count and what it keeps), or the error it raises."""
    try:
        report = trimmer.report(history)
    except (TypeError, ValueError) as error:
        return type(error), str(error)
    return report.tokens_after, report.kept_indices


#: Values equal in Python (or as JSON) but of other types, or other orders.
TWINS: list[Any] = [1, True, 1.0, "1", [1, 2], (1, 2), {"a": 1, "b": 2}, {"b": 2, "a": 1}]


def answered_call(value: Any, call_id: str = "c") -> list[BaseMessage]:
    call = {"name": "f", "args": {"x": value}, "id": call_id, "type": "tool_call"}
    return [AIMessage("", tool_calls=[call]), ToolMessage("ok", tool_call_id=call_id)]


class CacheAgrees(RuleBasedStateMachine):
    """Random creation, reassignment, copies and deletion of messages: a
    long-lived trimmer (and one with a tiny cache, and one without) always
    says what a fresh one says."""

    pool: list[BaseMessage]

    @initialize(counter=st.sampled_from(sorted(COUNTERS)))
    def build(self, counter: str) -> None:
        self.make = COUNTERS[counter]
        self.trimmers = [
            TurnTrimmer(max_tokens=BIG, token_counter=self.make(), cache_size=size)
            for size in (16_384, 2, 0)
        ]
        self.pool = []

    @rule(message=lcst.messages())
    def create(self, message: BaseMessage) -> None:
        self.pool.append(message)

    @rule(value=st.sampled_from(TWINS), where=st.sampled_from(["args", "kwargs", "block"]))
    def create_twin(self, value: Any, where: str) -> None:
        if where == "args":
            self.pool += answered_call(value, f"c{len(self.pool)}")
        elif where == "kwargs":
            self.pool.append(HumanMessage("same", additional_kwargs={"x": value}))
        else:
            self.pool.append(HumanMessage([{"type": "text", "text": "same", "x": value}]))

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), change=lcst.reassignments())
    def reassign(self, data: st.DataObject, change: tuple[str, Any]) -> None:
        message = data.draw(st.sampled_from(self.pool))
        field, value = change
        if field in type(message).model_fields:
            setattr(message, field, value)

    @precondition(lambda self: any(isinstance(m, AIMessage) and m.tool_calls for m in self.pool))
    @rule(data=st.data(), value=st.sampled_from(TWINS))
    def reassign_twin_args(self, data: st.DataObject, value: Any) -> None:
        calls = [m for m in self.pool if isinstance(m, AIMessage) and m.tool_calls]
        message = data.draw(st.sampled_from(calls))
        message.tool_calls = [{**message.tool_calls[0], "args": {"x": value}}]

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), deep=st.booleans(), content=st.none() | lcst.tricky_contents())
    def model_copy(self, data: st.DataObject, deep: bool, content: Any) -> None:
        message = data.draw(st.sampled_from(self.pool))
        update = {} if content is None else {"content": content}
        self.pool.append(message.model_copy(update=update, deep=deep))

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), collect=st.booleans())
    def delete(self, data: st.DataObject, collect: bool) -> None:
        del self.pool[data.draw(st.integers(0, len(self.pool) - 1))]
        if collect:
            gc.collect()  # another message may now be born at a dead one's address

    @invariant()
    def counts_agree(self) -> None:
        for history in ([ANCHOR, *self.pool], [ANCHOR, *self.pool[::-1]]):
            fresh = outcome(TurnTrimmer(max_tokens=BIG, token_counter=self.make()), history)
            for trimmer in self.trimmers:
                assert outcome(trimmer, history) == fresh


TestCacheAgrees = CacheAgrees.TestCase
TestCacheAgrees.settings = settings(
    max_examples=40,
    stateful_step_count=15,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Hypothesis describes each step; a few hold values long enough to warn.
TestCacheAgrees.pytestmark = [  # type: ignore[attr-defined]
    pytest.mark.filterwarnings("ignore:Generating overly large repr")
]


@pytest.mark.parametrize("counter", sorted(COUNTERS))
def test_equal_values_of_other_types_are_each_counted_as_themselves(counter: str) -> None:
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=COUNTERS[counter]())
    seen = set()
    for value in TWINS * 2:  # the second round finds each one remembered
        for history in (
            [ANCHOR, *answered_call(value)],
            [ANCHOR, HumanMessage("same", additional_kwargs={"x": value})],
            [HumanMessage([{"type": "text", "text": "same", "x": value}])],
        ):
            fresh = TurnTrimmer(max_tokens=BIG, token_counter=COUNTERS[counter]())
            assert outcome(trimmer, history) == outcome(fresh, history)
            seen.add(outcome(fresh, history))
    assert len(seen) > 3  # the values do count differently


def conversation() -> list[BaseMessage]:
    call = {"name": "lookup", "args": {"q": "x", "n": [1, 2.5, True, None]}, "id": "c1"}
    return [
        SystemMessage("rules", id="s"),
        HumanMessage("question", id="h", name="ana"),
        AIMessage("", tool_calls=[call], id="a"),
        ToolMessage("found", tool_call_id="c1"),
        AIMessage([{"type": "text", "text": "answer"}], additional_kwargs={"k": {"b": 1, "a": 2}}),
    ]


@pytest.mark.parametrize(
    "reload",
    [
        copy.deepcopy,
        lambda h: messages_from_dict(messages_to_dict(h)),
        lambda h: pickle.loads(pickle.dumps(h)),  # noqa: S301 - our own bytes
        lambda h: [m.model_copy(deep=True) for m in h],
    ],
    ids=["deepcopy", "dicts", "pickle", "model_copy"],
)
def test_a_history_reloaded_as_new_objects_is_not_counted_again(
    reload: Callable[[list[BaseMessage]], list[BaseMessage]],
) -> None:
    counter = Crc()
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=counter)
    history = conversation()
    first = trimmer.report(history).tokens_after
    assert counter.calls == len(history)
    again = reload(history)
    assert all(a is not b for a, b in zip(history, again, strict=True))
    assert trimmer.report(again).tokens_after == first
    assert counter.calls == len(history)


def test_a_reassigned_field_is_counted_again_and_clear_cache_forgets_everything() -> None:
    counter = Crc()
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=counter)
    history = conversation()
    trimmer.report(history)
    history[4].content = "a new answer"
    history[1].name = "bo"
    fresh = TurnTrimmer(max_tokens=BIG, token_counter=Crc())
    assert trimmer.report(history).tokens_after == fresh.report(history).tokens_after
    assert counter.calls == len(history) + 2
    trimmer.clear_cache()
    trimmer.report(history)
    assert counter.calls == 2 * len(history) + 2


@pytest.mark.parametrize(("cache_size", "recounted"), [(0, 5), (2, None), (5, 0), (16_384, 0)])
def test_cache_size_bounds_what_is_remembered(cache_size: int, recounted: int | None) -> None:
    counter = Crc()
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=counter, cache_size=cache_size)
    history = conversation()
    trimmer.report(history)
    counter.calls = 0
    trimmer.report(history)
    if recounted is None:  # some are evicted, some are not
        assert 0 < counter.calls < len(history)
    else:
        assert counter.calls == recounted


@settings(max_examples=100)
@given(
    maxsize=st.integers(0, 6),
    batches=st.lists(st.lists(st.integers(0, 11), max_size=9), max_size=8),
    collect=st.booleans(),
)
def test_the_count_cache_never_holds_more_than_its_size(
    maxsize: int, batches: list[list[int]], collect: bool
) -> None:
    pool: list[BaseMessage] = [HumanMessage(f"message {i}" * (i + 1)) for i in range(12)]
    cache = CountCache(maxsize)
    for batch in batches:
        messages = [pool[i] for i in batch]
        seen = cache.scan(messages)
        counts = cache.counts(
            lambda where, fields: [len(fields[k][0]) for k in range(len(where))],
            seen,
            range(len(messages)),
        )
        assert counts == [len(m.text) for m in messages]
        assert len(cache) <= maxsize
        assert len(cache._counts or ()) <= maxsize
        if collect and batch:  # a message replaced by a new one, the old one collected
            pool[batch[0]] = HumanMessage(f"a new message {len(seen)}")
            del messages, seen
            gc.collect()


class Block(dict):  # type: ignore[type-arg]
    """A content block a weak reference can watch."""


@pytest.mark.parametrize("counter", ["approximate", "own", "tiktoken", "calibrated"])
def test_a_message_gone_keeps_none_of_its_content_alive(counter: str) -> None:
    make: dict[str, Callable[[], Any]] = {
        "approximate": ApproximateCounter,
        "calibrated": CalibratedCounter,
        **COUNTERS,
    }
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=make[counter]())
    block = Block(type="text", text="x" * 1_000_000)
    message = HumanMessage("")
    message.content = [block]
    watched = weakref.ref(block)
    trimmer.report([message])
    trimmer.report([message])
    del message, block
    gc.collect()
    assert watched() is None, "the trimmer keeps a dead message's content alive"


def test_a_message_s_entry_goes_once_it_is_collected() -> None:
    cache = CountCache(16)
    messages = [HumanMessage(f"m{i}") for i in range(5)]
    cache.scan(messages)
    assert len(cache) == 5
    del messages
    gc.collect()
    cache.scan([])
    assert len(cache) == 0


class Meanwhile:
    """A counter during whose count another thread reassigns the message's
    content and then puts the very same object back (the worst interleaving,
    made certain)."""

    overhead = 0

    def __init__(self, original: BaseMessage) -> None:
        self.original = original

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        content = self.original.content
        self.original.content = "written meanwhile by another thread"
        counts = [len(m.text) for m in messages]
        self.original.content = content
        return counts


def test_a_field_reassigned_and_restored_during_a_count_does_not_poison_the_cache() -> None:
    message = HumanMessage("short")
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=Meanwhile(message))
    assert trimmer.report([message]).tokens_after == len("short")
    assert trimmer.report([message]).tokens_after == len("short")
    assert trimmer.report([HumanMessage("short")]).tokens_after == len("short")


class Yielding:
    """Content lengths, letting other threads run while it counts."""

    overhead = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        time.sleep(0)
        counts = [len(m.text) for m in messages]
        time.sleep(0)
        return counts


@pytest.fixture
def _written_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other threads write to the history on purpose: the suite's check that no
    trim mutates a history (conftest) would take their writes for the trim's."""
    monkeypatch.setattr(Pipeline, "decide", Pipeline.decide.__wrapped__)  # type: ignore[attr-defined]


@pytest.mark.usefixtures("_written_meanwhile")
@pytest.mark.parametrize("counter", ["own", "tiktoken"])
def test_threads_reassigning_while_others_trim_never_get_a_wrong_count(counter: str) -> None:
    make = {"own": Yielding, "tiktoken": COUNTERS["tiktoken"]}[counter]
    values = ["a", "bb " * 10, "ccc " * 40, "dddd " * 90]
    messages = [HumanMessage(values[0]), AIMessage(values[1])]
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=make())

    def fresh(history: list[BaseMessage]) -> int:
        return TurnTrimmer(max_tokens=BIG, token_counter=make()).report(history).tokens_after

    possible = {fresh([HumanMessage(a), AIMessage(b)]) for a in values for b in values}
    seen: list[int] = []
    stop = threading.Event()

    def write(seed: int) -> None:
        k = seed
        while not stop.is_set():
            k += 1
            messages[k % 2].content = values[k % len(values)]  # the same objects, again and again

    def read() -> None:
        seen.extend(trimmer.report(messages).tokens_after for _ in range(1_500))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    writers = [threading.Thread(target=write, args=(s,)) for s in range(2)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    try:
        for thread in writers + readers:
            thread.start()
        for thread in readers:
            thread.join()
    finally:
        stop.set()
        for thread in writers:
            thread.join()
        sys.setswitchinterval(interval)
    assert set(seen) <= possible
    for a in values:  # and nothing wrong was remembered, by object or by content
        for b in values:
            messages[0].content, messages[1].content = a, b
            assert trimmer.report(messages).tokens_after == fresh(messages)
            new = [HumanMessage(a), AIMessage(b)]
            assert trimmer.report(new).tokens_after == fresh(new)


@pytest.mark.parametrize(
    "clone",
    [copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))],  # noqa: S301
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copy_or_pickle_of_a_trimmer_starts_with_nothing_remembered(
    clone: Callable[[TurnTrimmer], TurnTrimmer],
) -> None:
    trimmer = TurnTrimmer(max_tokens=BIG, token_counter=Crc(), name="history")
    history = conversation()
    expected = trimmer.report(history).tokens_after
    twin = clone(trimmer)
    assert (twin.max_tokens, twin.get_name()) == (trimmer.max_tokens, "history")
    before = twin.counter.calls
    assert twin.report(history).tokens_after == expected
    assert twin.counter.calls - before == len(history)


# -- tool prices ---------------------------------------------------------------------


class Schemas:
    """A ``TokenCounter`` without ``count_tools``: each schema is counted as a
    system message; counts how many schemas it counted."""

    overhead = 0

    def __init__(self) -> None:
        self.schemas = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        self.schemas += sum(isinstance(m, SystemMessage) for m in messages)
        return [len(m.text) for m in messages]


PRICERS: dict[str, tuple[Callable[[], Any], Callable[[list[Any]], int]]] = {
    "approximate": (
        ApproximateCounter,
        lambda tools: count_tokens_approximately([], tools=tools),
    ),
    "tiktoken": (
        COUNTERS["tiktoken"],
        lambda tools: TiktokenCounter("gpt-4").count_tools(
            list(map(convert_to_openai_tool, tools))
        ),
    ),
    "own": (Schemas, lambda tools: price(Schemas(), tools)),  # a new counter remembers nothing
}


def price(counter: Any, tools: list[Any]) -> int:
    report = TurnTrimmer(max_tokens=BIG, token_counter=counter).report([ANCHOR], tools=tools)
    assert report.tool_tokens is not None
    return report.tool_tokens


LONG = " It explains every field of the result in a long, careful sentence." * 6


def book() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "book",
            "description": "Book a flight.",
            "parameters": {
                "type": "object",
                "properties": {"cabin": {"type": "string", "enum": ["economy", "business"]}},
            },
        },
    }


class Shifting(BaseTool):
    """A tool class whose schema is its own property, not ``args_schema``."""

    name: str = "shifting"
    description: str = "A tool whose schema changes."
    fields: list[str] = Field(default_factory=lambda: ["a"])

    @property
    def tool_call_schema(self) -> Any:
        return {"type": "object", "properties": {f: {"type": "string"} for f in self.fields}}

    def _run(self, *args: Any, **kwargs: Any) -> str:
        return ""


def search_tool(schema: Any = None) -> StructuredTool:
    return StructuredTool.from_function(
        lambda q: q, name="search", description="Search.", args_schema=schema
    )


@tool
def lookup(query: str) -> str:
    """Look a query up."""
    return query


def changes() -> dict[str, tuple[list[Any], Callable[[list[Any]], object]]]:
    """Tool lists, and a change to make to each."""
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    return {
        "dict edited in place": (
            [book(), lookup],
            lambda t: t[0]["function"].update(description="Book." + LONG),
        ),
        "enum appended to": (
            [book()],
            lambda t: t[0]["function"]["parameters"]["properties"]["cabin"]["enum"].append(
                "first class suite with a bed"
            ),
        ),
        "description reassigned": ([search_tool()], lambda t: setattr(t[0], "description", LONG)),
        "name reassigned": ([search_tool()], lambda t: setattr(t[0], "name", "search_everything")),
        "dict args_schema edited in place": (
            [search_tool(schema)],
            lambda t: schema["properties"].update(page={"type": "integer", "description": LONG}),
        ),
        "replaced by a namesake": (
            [lookup, search_tool()],
            lambda t: t.__setitem__(1, search_tool().model_copy(update={"description": LONG})),
        ),
        "one more tool": ([lookup], lambda t: t.append(book())),
        "own schema property": ([Shifting()], lambda t: t[0].fields.extend(["b" * 30, "c" * 30])),
    }


@pytest.mark.parametrize("pricer", sorted(PRICERS))
@pytest.mark.parametrize("change", list(changes()))
def test_a_tool_price_is_remembered_until_the_tool_changes(pricer: str, change: str) -> None:
    make, fresh = PRICERS[pricer]
    tools, edit = changes()[change]
    counter = make()
    before = price(counter, tools)
    assert before == fresh(tools)
    if isinstance(counter, Schemas) and change != "own schema property":
        counted = counter.schemas  # a tool with its own schema property is priced every time
        assert price(counter, tools) == before
        assert counter.schemas == counted  # remembered, not counted again
    edit(tools)
    after = price(counter, tools)
    assert after != before
    assert after == fresh(tools)
