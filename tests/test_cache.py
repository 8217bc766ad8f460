"""The count caches never return a count that differs from a fresh count, and
hold no content of a message that is gone."""

from __future__ import annotations

import copy
import gc
import hashlib
import io
import sys
import threading
import time
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.messages.tool import tool_call_chunk

from langchain_turntrim import TiktokenCounter, TurnTrimmer, per_list
from langchain_turntrim._counting import CachedCounter, WholeListCounter, keys
from langchain_turntrim._counting import cache as cache_module
from langchain_turntrim._counting.keys import fields_keys, message_key
from tests import strategies as lcst

pytestmark = pytest.mark.usefixtures("tiktoken_cache")

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0K" * 8_000}}


def bare() -> TiktokenCounter:
    return TiktokenCounter("gpt-4")


class Tally:
    """A ``TokenCounter`` of content lengths that records what it counted."""

    overhead = 0

    def __init__(self, hook: Callable[[Sequence[BaseMessage]], None] | None = None) -> None:
        self.counted: list[Any] = []
        self.hook = hook

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        counts = [len(str(m.content)) for m in messages]
        self.counted += [m.content for m in messages]
        if self.hook is not None:
            self.hook(messages)
        return counts


# -- 1. keys are unambiguous ----------------------------------------------------------------


AMBIGUOUS = [
    pytest.param(
        [{"type": "text", "text": "hi"}], "[{'type': 'text', 'text': 'hi'}]", id="list-vs-its-repr"
    ),
    pytest.param([IMAGE], repr([IMAGE]), id="image-vs-its-repr"),
    pytest.param(["a", "b"], "['a', 'b']", id="str-list-vs-its-repr"),
]


@pytest.mark.parametrize(("first", "second"), AMBIGUOUS)
def test_content_that_spells_another_content_gets_its_own_count(first: Any, second: Any) -> None:
    cached = CachedCounter(bare())
    messages = [HumanMessage(first), HumanMessage(second)]
    assert cached.count_each(messages[:1]) == bare().count_each(messages[:1])
    assert cached.count_each(messages) == bare().count_each(messages)
    assert message_key(messages[0]) != message_key(messages[1])


def test_a_pasted_image_repr_is_not_kept_under_the_budget() -> None:
    trimmer = TurnTrimmer(max_tokens=8_000, token_counter=bare())
    image = [SystemMessage("be brief"), HumanMessage([IMAGE]), AIMessage("a cat")]
    assert trimmer.invoke(image) == image
    pasted = HumanMessage(repr([IMAGE]))
    assert bare().count_each([pasted])[0] > 8_000
    history = [*image, pasted]
    assert trimmer.invoke(history) == history[:1]


@pytest.mark.parametrize(("first", "second"), AMBIGUOUS)
def test_whole_list_counter_keys_are_unambiguous(first: Any, second: Any) -> None:
    exact = bare()
    counter = per_list(lambda ms: exact.overhead + sum(exact.count_each(ms)))
    one, other = [HumanMessage(first)], [HumanMessage(second)]
    assert counter.count(one) == exact.overhead + sum(exact.count_each(one))
    assert counter.count(other) == exact.overhead + sum(exact.count_each(other))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        pytest.param({"x": True}, {"x": 1}, id="bool-vs-int"),
        pytest.param({"x": 1}, {"x": 1.0}, id="int-vs-float"),
        pytest.param({"x": "1"}, {"x": 1}, id="str-vs-int"),
        pytest.param({"x": ("a",)}, {"x": ["a"]}, id="tuple-vs-list"),
        pytest.param({"a": "b", "c": "d"}, {"c": "d", "a": "b"}, id="key-order"),
        pytest.param({"x": None}, {"x": "None"}, id="None-vs-its-name"),
    ],
)
def test_keys_tell_equal_looking_values_apart(one: Any, other: Any) -> None:
    first = HumanMessage("same", additional_kwargs=one)
    second = HumanMessage("same", additional_kwargs=other)
    assert message_key(first) != message_key(second)


def _one_digest(values: Any) -> bytes | None:
    """A digest as ``digest`` documents it, with a pickler of its own."""
    buffer = io.BytesIO()
    pickler = keys._Pickler(buffer, protocol=5)
    pickler.fast = True
    try:
        pickler.dump(values)
    except (keys.UnkeyableError, RecursionError, ValueError):
        return None
    return hashlib.sha256(buffer.getvalue()).digest()


def test_digests_in_one_pass_are_each_values_own() -> None:
    """Pickles share a buffer, hashed in slices: big ones, unkeyable ones and
    cycles between others change none of the others' digests."""
    big = "z" * (3 * keys._KEEP_BUFFER)
    cycle: list[Any] = []
    cycle.append(cycle)
    values: list[tuple[Any, ...]] = [
        ("a", None),
        (big,),
        (object(),),
        ([1, True, 1.0],),
        ({"a": 1, "b": 2},),
        (cycle,),
        ({"b": 2, "a": 1},),
        (big + "!", [big]),
        (),
        ("a", None),
    ]
    expected = [_one_digest(v) for v in values]
    assert [i for i, d in enumerate(expected) if d is None] == [2, 5]
    assert len({d for d in expected if d is not None}) == len(values) - 3  # one pair is equal
    assert keys.digests(values) == expected
    assert keys.digests(values[:1]) == expected[:1]  # the pickler is usable after a big one
    assert [keys.digest(v) for v in values] == expected


def test_equal_messages_share_a_key() -> None:
    def build() -> AIMessage:
        return AIMessage(
            content=[{"type": "text", "text": "x"}],
            tool_calls=[{"name": "f", "args": {"q": [1, 2.5, None]}, "id": "c"}],
            name="bot",
        )

    assert message_key(build()) == message_key(build())
    assert message_key(build()) is not None


def test_a_name_reassigned_to_a_list_counts_like_uncached() -> None:
    message = HumanMessage("hi", name="ana")
    message.name = ["ana", "bo"]  # type: ignore[assignment]
    assert CachedCounter(bare()).count_each([message]) == bare().count_each([message])


# -- 2. memory ------------------------------------------------------------------------------


class Lengths:
    """A ``TokenCounter`` of content lengths that keeps nothing."""

    overhead = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return [len(str(m.content)) for m in messages]


def test_a_dead_message_keeps_none_of_its_content_alive() -> None:
    content = "x" * 100_000 + " unique to this test"
    baseline = sys.getrefcount(content)
    cached = CachedCounter(Lengths())
    message = HumanMessage(content)
    cached.count_each([message])
    del message
    gc.collect()
    assert sys.getrefcount(content) == baseline


def test_a_key_does_not_copy_the_content() -> None:
    cached = CachedCounter(Lengths())
    messages = [
        HumanMessage([{"type": "text", "text": f"{i} " + "y" * 1_000_000}]) for i in range(3)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cached.count_each(messages)
        del messages
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(cached) == 3
    assert grown < 50_000  # 3 MB of content went through the cache


# -- 3. a field reassigned while the message is being counted -------------------------------


def test_content_reassigned_after_it_was_read_is_counted_again() -> None:
    message = HumanMessage("short")

    def meanwhile(_: Sequence[BaseMessage]) -> None:  # another thread, right after the read
        message.content = "a much longer content"

    cached = CachedCounter(Tally(hook=meanwhile))
    assert cached.count_each([message]) == [len("short")]
    cached.counter.hook = None  # type: ignore[attr-defined]
    assert cached.count_each([message]) == [len("a much longer content")]


def test_content_reassigned_before_it_was_read_is_not_filed_under_the_old_content() -> None:
    message = HumanMessage("short")

    class Early(Tally):
        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            message.content = "a much longer content"  # another thread, before the read
            return super().count_each(messages)

    cached = CachedCounter(Early())
    first = cached.count_each([message])
    assert first in ([len("short")], [len("a much longer content")])
    fresh = HumanMessage("short")
    assert cached.count_each([fresh]) == [len("short")]
    assert cached.count_each([message]) == [len("a much longer content")]


def test_a_tiktoken_count_is_of_the_fields_read_not_of_a_later_assignment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TiktokenCounter counts from the fields the cache read (no frozen copy)."""
    message = AIMessage("short", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c"}])
    before = bare().count_each([message])

    def keys_then_reassign(classes: Sequence[type], fields: Sequence[Any]) -> Any:
        keys = fields_keys(classes, fields)
        message.content = "a much longer content than the one that was read"  # another thread
        message.tool_calls = []
        return keys

    cached = CachedCounter(bare())
    assert cached._count_fields is not None  # the path without frozen copies
    monkeypatch.setattr(cache_module, "fields_keys", keys_then_reassign)
    assert cached.count_each([message]) == before
    monkeypatch.setattr(cache_module, "fields_keys", fields_keys)
    assert cached.count_each([message]) == bare().count_each([message]) != before
    twin = AIMessage("short", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c"}])
    assert cached.count_each([twin]) == before


def test_a_tiktoken_subclass_overriding_count_each_is_still_asked() -> None:
    class Doubled(TiktokenCounter):
        def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
            return [2 * n for n in super().count_each(messages)]

    messages = [HumanMessage("hi"), AIMessage("hello", name="bot")]
    doubled = Doubled("gpt-4")
    assert CachedCounter(doubled)._count_fields is None
    assert CachedCounter(doubled).count_each(messages) == doubled.count_each(messages)
    assert doubled.count_each(messages) == [2 * n for n in bare().count_each(messages)]


# -- 4. per_list and cache_size=0 -----------------------------------------------------------


def test_per_list_follows_cache_size() -> None:
    calls: list[int] = []

    def count(messages: list[BaseMessage]) -> int:
        calls.append(len(messages))
        return len(messages)

    trimmer = TurnTrimmer(max_tokens=100, token_counter=per_list(count), cache_size=0)
    assert isinstance(trimmer.counter, WholeListCounter)
    assert trimmer.counter.cache_size == 0
    history = [HumanMessage("hi"), AIMessage("hello")]
    trimmer.invoke(history)
    first = len(calls)
    trimmer.invoke(history)
    assert len(calls) == 2 * first > 0
    sized = TurnTrimmer(max_tokens=100, token_counter=per_list(count), cache_size=7)
    assert isinstance(sized.counter, WholeListCounter)
    assert sized.counter.cache_size == 7


# -- 5. eviction ----------------------------------------------------------------------------


def test_the_cache_evicts_the_least_recently_used() -> None:
    tally = Tally()
    cached = CachedCounter(tally, cache_size=2)
    a, b, c = HumanMessage("a"), HumanMessage("b"), HumanMessage("c")
    cached.count_each([a, b])
    cached.count_each([a])  # a is now the most recently used
    cached.count_each([c])  # evicts b
    tally.counted.clear()
    cached.count_each([a])
    assert tally.counted == []
    cached.count_each([b])
    assert tally.counted == ["b"]


class Peak(OrderedDict):  # type: ignore[type-arg]
    """An ``OrderedDict`` that remembers the most entries it ever held."""

    peak = 0

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.peak = max(self.peak, len(self))


def test_a_long_call_never_holds_more_than_maxsize_entries() -> None:
    cached = CachedCounter(Tally(), cache_size=64)
    cached._cache._data = content = Peak()
    messages = [HumanMessage(f"m{i}") for i in range(2_000)]
    assert cached.count_each(messages) == [len(m.content) for m in messages]
    assert content.peak <= 64
    assert cached.count_each(messages) == [len(m.content) for m in messages]


# -- 6. a cached counter always says what the bare counter says -----------------------------


class CacheAgrees(RuleBasedStateMachine):
    """Random message creation, reassignment, copies, chunk addition and deletion,
    with counts compared after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.bare = bare()
        self.cached: CachedCounter | None = None
        self.pool: list[BaseMessage] = []

    @initialize(maxsize=st.sampled_from([1, 3, 64]))
    def build(self, maxsize: int) -> None:
        self.cached = CachedCounter(self.bare, maxsize)

    @rule(message=lcst.messages())
    def create(self, message: BaseMessage) -> None:
        self.pool.append(message)

    @rule(content=lcst.tricky_contents())
    def create_tricky(self, content: Any) -> None:
        self.pool.append(HumanMessage(content))

    @rule(content=lcst.contents(), spell=st.sampled_from([repr, str]))
    def create_twins(self, content: Any, spell: Callable[[Any], str]) -> None:
        """A message, and one whose text spells the first one's content."""
        self.pool += [HumanMessage(content), HumanMessage(spell(content))]

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), change=lcst.reassignments())
    def reassign(self, data: st.DataObject, change: tuple[str, Any]) -> None:
        message = data.draw(st.sampled_from(self.pool))
        field, value = change
        if field in type(message).model_fields:
            setattr(message, field, copy.deepcopy(value))

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), deep=st.booleans(), content=st.none() | lcst.tricky_contents())
    def model_copy(self, data: st.DataObject, deep: bool, content: Any) -> None:
        message = data.draw(st.sampled_from(self.pool))
        update = {} if content is None else {"content": content}
        self.pool.append(message.model_copy(update=update, deep=deep))

    @rule(first=lcst.texts(), second=lcst.texts(), calls=st.booleans())
    def add_chunks(self, first: str, second: str, calls: bool) -> None:
        chunks = [
            tool_call_chunk(name="f", args='{"a": ', id="c1", index=0),
            tool_call_chunk(name=None, args="1}", id=None, index=0),
        ]
        one = AIMessageChunk(content=first, tool_call_chunks=chunks[:1] if calls else [])
        two = AIMessageChunk(content=second, tool_call_chunks=chunks[1:] if calls else [])
        self.pool.append(one + two)

    @precondition(lambda self: self.pool)
    @rule(data=st.data(), collect=st.booleans())
    def delete(self, data: st.DataObject, collect: bool) -> None:
        del self.pool[data.draw(st.integers(0, len(self.pool) - 1))]
        if collect:
            gc.collect(0)  # the young generation: what a deleted message's cycles are in

    @invariant()
    def counts_agree(self) -> None:
        assert self.cached is not None
        fresh = self.bare.count_each(self.pool)
        assert self.cached.count_each(self.pool) == fresh
        assert self.cached.count_each(self.pool[::-1]) == fresh[::-1]


TestCacheAgrees = CacheAgrees.TestCase
# Hypothesis describes every step; a few steps hold tool calls long enough to warn.
TestCacheAgrees.pytestmark = [  # type: ignore[attr-defined]
    pytest.mark.filterwarnings("ignore:Generating overly large repr")
]
TestCacheAgrees.settings = settings(
    max_examples=60,
    stateful_step_count=20,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Yielding:
    """Content lengths, letting other threads run between reading the
    messages and answering (where a torn read would show)."""

    overhead = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        time.sleep(0)
        counts = [len(str(m.content)) + len(str(m.name)) for m in messages]
        time.sleep(0)
        return counts


@settings(max_examples=12)
@given(
    values=st.lists(lcst.tricky_contents(), min_size=2, max_size=6, unique_by=repr),
    maxsize=st.sampled_from([2, 64]),
)
def test_threads_reassigning_fields_never_poison_the_cache(values: list[Any], maxsize: int) -> None:
    bare_counter = Yielding()
    cached = CachedCounter(bare_counter, maxsize)
    messages = [HumanMessage(copy.deepcopy(values[0]), name=str(i)) for i in range(4)]
    possible = {c for v in values for c in bare_counter.count_each([HumanMessage(v, name="0")])}
    seen: list[int] = []
    stop = threading.Event()

    def write(seed: int) -> None:
        k = seed
        while not stop.is_set():
            k += 1
            messages[k % len(messages)].content = copy.deepcopy(values[k % len(values)])

    def read() -> None:
        for _ in range(200):
            seen.extend(cached.count_each(messages[:1]))
            cached.count_each(messages)

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
    assert cached.count_each(messages) == bare_counter.count_each(messages)
    fresh = [HumanMessage(copy.deepcopy(v), name="0") for v in values]
    assert cached.count_each(fresh) == bare_counter.count_each(fresh)
