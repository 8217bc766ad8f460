"""The warm path: a trimmer that remembers the histories it planned gives, after
any sequence of edits, exactly what a fresh trimmer gives, and counts and
classifies only the messages a history gained."""

from __future__ import annotations

import copy
import gc
import pickle
import sys
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TiktokenCounter,
    TurnTrimmer,
    TurnTrimOverflowError,
)
from langchain_turntrim._compaction.ladder import Compaction
from langchain_turntrim._counting import CachedCounter
from langchain_turntrim._planning.memo import HISTORIES, HistoryMemo
from tests import strategies as lcst

pytestmark = pytest.mark.usefixtures("tiktoken_cache")


class Lengths:
    """Content lengths plus one per message; records every list it is given."""

    overhead = 3

    def __init__(self) -> None:
        self.calls: list[list[BaseMessage]] = []

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        self.calls.append(list(messages))
        return [len(str(m.content)) + 1 for m in messages]


def history(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("rules")]
    for t in range(turns):
        messages += [
            HumanMessage(f"question {t}"),
            AIMessage("", tool_calls=[{"name": "look", "args": {"t": t}, "id": f"c{t}"}]),
            ToolMessage(f"result {t} " * 5, tool_call_id=f"c{t}"),
            AIMessage(f"answer {t}"),
        ]
    return messages


def outcome(trimmer: TurnTrimmer, messages: list[BaseMessage]) -> tuple[Any, ...]:
    """What a trim gives (the report), or the error it raises (type and text)."""
    try:
        report = trimmer.report(messages)
    except (TypeError, ValueError, TurnTrimOverflowError) as error:
        return type(error), str(error)
    return report.plan, report.kept, report.dropped, report.compaction


# -- 1. after any edits, warm equals cold ----------------------------------------------------

COUNTERS = {
    "approximate": lambda: "approximate",
    "exact": lambda: TiktokenCounter("gpt-4"),
    "own": Lengths,
    "calibrated": CalibratedCounter,
}


class WarmAgreesWithCold(RuleBasedStateMachine):
    """An agent's history, grown and edited at random, trimmed after every step
    by one long-lived trimmer and by a fresh one."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[BaseMessage] = []
        self.other: list[BaseMessage] = []  # a second conversation, trimmed by the same trimmer
        self.options: dict[str, Any] = {}
        self.warm: TurnTrimmer | None = None
        #: What the warm trimmer returned last: its compacted copies, if it made any.
        self.returned: list[BaseMessage] = []

    @initialize(
        counter=st.sampled_from(sorted(COUNTERS)),
        max_tokens=st.sampled_from([0, 40, 150, 600, 10**6]),
        trim_to=st.sampled_from([None, 0.5, "auto"]),
        on_overflow=st.sampled_from(["drop", "compact"]),
        cache_size=st.sampled_from([3, 16_384]),
        start=lcst.conversations(max_turns=3),
    )
    def build(
        self,
        counter: str,
        max_tokens: int,
        trim_to: float | str | None,
        on_overflow: str,
        cache_size: int,
        start: list[BaseMessage],
    ) -> None:
        self.options = {
            "max_tokens": max_tokens,
            "token_counter": COUNTERS[counter],
            "trim_to": trim_to if not isinstance(trim_to, float) else int(max_tokens * trim_to),
            "on_overflow": on_overflow,
            "cache_size": cache_size,
        }
        self.warm = self.fresh()
        self.messages = start

    def fresh(self) -> TurnTrimmer:
        """A new trimmer; for a calibrated counter, one with the same calibration state."""
        options = dict(self.options)
        counter = options["token_counter"]()
        if self.warm is not None and isinstance(self.warm.counter, CalibratedCounter):
            counter = copy.deepcopy(self.warm.counter)
        return TurnTrimmer(**{**options, "token_counter": counter})

    @rule(new=lcst.conversations(max_turns=2), keep_system=st.booleans())
    def append_turns(self, new: list[BaseMessage], keep_system: bool) -> None:
        self.messages = self.messages + [
            m for m in new if keep_system or not isinstance(m, SystemMessage)
        ]

    @rule(message=lcst.messages())
    def append_one(self, message: BaseMessage) -> None:
        self.messages = [*self.messages, message]

    @precondition(lambda self: self.messages)
    @rule(data=st.data(), change=lcst.field_reassignments())
    def reassign(self, data: st.DataObject, change: tuple[str, Any]) -> None:
        message = data.draw(st.sampled_from(self.messages))
        field, value = change
        if field in type(message).model_fields:
            setattr(message, field, copy.deepcopy(value))

    @precondition(lambda self: self.returned)
    @rule(data=st.data(), change=lcst.field_reassignments(), extra=st.booleans())
    def reassign_a_copy(self, data: st.DataObject, change: tuple[str, Any], extra: bool) -> None:
        """A field of a compacted copy the caller was given reassigned (as
        LangGraph's ``add_messages`` gives an id to a message without one), or
        a field its class does not have set (an extra field)."""
        message = data.draw(st.sampled_from(self.returned))
        field, value = change
        if field in type(message).model_fields or extra:
            setattr(message, field, copy.deepcopy(value))

    @precondition(lambda self: self.messages)
    @rule(data=st.data(), deep=st.booleans())
    def replace_with_a_copy(self, data: st.DataObject, deep: bool) -> None:
        i = data.draw(st.integers(0, len(self.messages) - 1))
        self.messages = [*self.messages[:i], self.messages[i].model_copy(deep=deep)]
        self.messages += self.messages[i + 1 :]

    @precondition(lambda self: self.messages)
    @rule(data=st.data(), message=lcst.messages())
    def insert_or_remove(self, data: st.DataObject, message: BaseMessage) -> None:
        i = data.draw(st.integers(0, len(self.messages) - 1))
        if data.draw(st.booleans()):
            self.messages = [*self.messages[:i], message, *self.messages[i:]]
        else:
            self.messages = self.messages[:i] + self.messages[i + 1 :]

    @precondition(lambda self: self.messages)
    @rule(data=st.data())
    def cut_the_tail(self, data: st.DataObject) -> None:
        self.messages = self.messages[: data.draw(st.integers(0, len(self.messages) - 1))]

    @rule()
    def switch_conversation(self) -> None:
        """The other conversation shares a prefix with this one, then differs."""
        self.messages, self.other = self.other, self.messages[: len(self.messages) // 2]

    @precondition(lambda self: isinstance(getattr(self.warm, "counter", None), CalibratedCounter))
    @rule(
        data=st.data(),
        ratio=st.floats(0.2, 4.0),
        per_message=st.integers(-3, 12),
        per_request=st.integers(0, 40),
    )
    def observe(
        self, data: st.DataObject, ratio: float, per_message: int, per_request: int
    ) -> None:
        """A provider's report of some of the history (what was sent), fed to the calibration."""
        assert self.warm is not None
        counter = self.warm.counter
        assert isinstance(counter, CalibratedCounter)
        start = data.draw(st.integers(0, len(self.messages)))
        sent = self.messages[start:]
        base = ApproximateCounter().count(sent)
        counter.observe(sent, max(0, round(ratio * base + per_message * len(sent) + per_request)))

    @invariant()
    def warm_equals_cold(self) -> None:
        assert self.warm is not None
        warm = outcome(self.warm, self.messages)
        assert warm == outcome(self.fresh(), self.messages)
        compaction = warm[-1] if len(warm) == 4 else None  # a report, not an error
        self.returned = compaction.compacted if isinstance(compaction, Compaction) else []


TestWarmAgreesWithCold = WarmAgreesWithCold.TestCase
TestWarmAgreesWithCold.pytestmark = [  # type: ignore[attr-defined]
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]
TestWarmAgreesWithCold.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- 2. only what a history gained is counted ------------------------------------------------


@pytest.mark.parametrize("cache_size", [0, 16_384])
def test_an_appended_history_counts_only_its_new_messages(cache_size: int) -> None:
    counter = Lengths()
    trimmer = TurnTrimmer(max_tokens=200, token_counter=counter, cache_size=cache_size)
    messages = history(6)
    trimmer.trim(messages[:-3])
    trimmer.trim(messages[:-2])  # planned before: now remembered
    counter.calls.clear()
    trimmer.trim(messages)
    # With a cache, only the two new messages are counted; without one, every message
    # is (the pinned ones first, then the rest newest-first), each once.
    if cache_size:
        assert counter.calls == [messages[-2:]]
    else:
        counted = [id(m) for call in counter.calls for m in call]
        assert sorted(counted) == sorted(map(id, messages))


def test_a_remembered_history_is_not_even_looked_up_message_by_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trimmer = TurnTrimmer(max_tokens=200, token_counter=Lengths())
    messages = history(6)
    trimmer.trim(messages)
    trimmer.trim(messages)
    given: list[int] = []
    counter = trimmer.counter
    assert isinstance(counter, CachedCounter)
    costs_of, count_each = counter.costs_of, counter.count_each

    def spy(
        messages: Sequence[BaseMessage],
        fields: Sequence[tuple[object, ...]],
        *,
        cached: bool = True,
    ) -> list[int]:
        given.append(len(messages))
        return costs_of(messages, fields, cached=cached)

    def spy_each(messages: Sequence[BaseMessage]) -> list[int]:
        given.append(len(messages))
        return count_each(messages)

    monkeypatch.setattr(counter, "costs_of", spy)
    monkeypatch.setattr(counter, "count_each", spy_each)
    trimmer.trim(messages)
    trimmer.trim([*messages, HumanMessage("next")])
    assert given == [1]  # nothing for the history seen, one for the new message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", "question 1, reworded at length"),
        ("name", "bob"),
        ("additional_kwargs", {"x": 1}),
    ],
)
def test_a_field_reassigned_in_the_remembered_part_is_counted_again(
    field: str, value: object
) -> None:
    counter = Lengths()
    trimmer = TurnTrimmer(max_tokens=200, token_counter=counter)
    messages = history(6)
    before = trimmer.report(messages).plan
    setattr(messages[1], field, value)
    counter.calls.clear()
    after = trimmer.report(messages).plan
    assert [messages[1]] in counter.calls
    assert after == TurnTrimmer(max_tokens=200, token_counter=Lengths()).report(messages).plan
    if field == "content":
        assert after.tokens_before > before.tokens_before


def other_history(i: int) -> list[BaseMessage]:
    """A short history sharing no content with ``history``'s."""
    return [HumanMessage(f"other {i}"), AIMessage(f"reply {i}"), HumanMessage(f"more {i}")]


@pytest.mark.parametrize("edit", ["reassigned", "restored", "forked", "pushed out"])
def test_what_a_loop_counted_is_not_counted_again_after_a_change(edit: str) -> None:
    """The messages a remembered history gains are counted without the cache
    (new messages only miss), and their counts reach it as soon as a plan may
    look them up: a message changed, a history restored from a checkpoint
    (equal messages, new objects), a thread forked from it, or its entry
    pushed out by newer histories."""
    counter = Lengths()
    trimmer = TurnTrimmer(max_tokens=200, token_counter=counter)
    messages = history(6)
    for k in range(3, len(messages) + 1):  # an agent loop: one message more each call
        trimmer.trim(messages[:k])
    counter.calls.clear()
    expected: list[BaseMessage] = []
    if edit == "reassigned":
        messages[-2].content = "reworded"
        planned = messages
        expected = [messages[-2]]
    elif edit == "restored":
        planned = copy.deepcopy(messages)
    elif edit == "forked":
        planned = [*messages[:-3], HumanMessage("another way")]
        expected = [planned[-1]]
    else:
        for i in range(HISTORIES + 1):
            others = other_history(i)
            trimmer.trim(others[:-1])
            trimmer.trim(others)
        counter.calls.clear()
        planned = messages
    report = trimmer.report(planned)
    assert [m for call in counter.calls for m in call] == expected
    fresh = TurnTrimmer(max_tokens=200, token_counter=Lengths()).report(planned)
    assert (report.plan, report.kept) == (fresh.plan, fresh.kept)


def test_a_counter_without_a_cache_keeps_nothing_to_file() -> None:
    """Only a caching counter's counts wait to be filed: a remembered history
    counted by the approximate counter holds no more than its messages' fields."""
    trimmer = TurnTrimmer(max_tokens=200)
    messages = history(6)
    for k in range(3, len(messages) + 1):
        trimmer.trim(messages[:k])
    memo = memo_of(trimmer)
    assert len(memo) == 1
    assert all(not entry.unfiled for entry in memo._entries)


def test_a_message_replaced_removed_or_reordered_is_seen() -> None:
    trimmer = TurnTrimmer(max_tokens=120, token_counter="approximate")
    messages = history(8)
    trimmer.trim(messages)
    edits = [
        [*messages[:5], HumanMessage("a new question"), *messages[6:]],
        messages[:5] + messages[6:],
        [messages[0], *messages[5:9], *messages[1:5], *messages[9:]],
        [HumanMessage("no system prompt now"), *messages[1:]],
    ]
    for edited in edits:
        fresh = TurnTrimmer(max_tokens=120, token_counter="approximate")
        assert trimmer.report(edited).plan == fresh.report(edited).plan
        assert trimmer.trim(edited) == fresh.trim(edited)


# -- 3. errors name the message by its index in the whole history ----------------------------


class NegativeForBad:
    overhead = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return [-1 if m.content == "bad" else 1 for m in messages]


@pytest.mark.parametrize(
    ("new", "error", "text"),
    [
        (RemoveMessage(id="x"), TypeError, r"messages\[25\] \(id 'x'\) is a RemoveMessage"),
        (42, TypeError, r"messages\[25\] is not a message"),
        (HumanMessage("bad"), ValueError, r"counted messages\[25\] as -1"),
    ],
)
def test_a_bad_new_message_is_named_by_its_place_in_the_history(
    new: object, error: type[Exception], text: str
) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=NegativeForBad())
    messages = history(6)
    trimmer.trim(messages)
    with pytest.raises(error, match=text):
        trimmer.trim([*messages, new])  # type: ignore[list-item]
    assert trimmer.trim(messages) == TurnTrimmer(
        max_tokens=100, token_counter=NegativeForBad()
    ).trim(messages)


# -- 4. what is remembered, for how long ------------------------------------------------------


def memo_of(trimmer: TurnTrimmer) -> HistoryMemo:
    assert isinstance(trimmer.counter, (CachedCounter, ApproximateCounter))
    memo = trimmer.planner.memo  # type: ignore[union-attr]
    assert memo is not None
    return memo


@pytest.fixture(params=["approximate", "own"])
def token_counter(request: pytest.FixtureRequest) -> object:
    """The approximate counter and a custom one (in a CachedCounter), fresh."""
    return COUNTERS[request.param]()


def test_only_the_newest_histories_are_remembered(token_counter: object) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=token_counter)
    memo = memo_of(trimmer)
    for _ in range(HISTORIES + 3):
        messages = history(2)
        trimmer.trim(messages[:-1])
        trimmer.trim(messages)
    assert len(memo) == HISTORIES
    trimmer.clear_cache()
    assert len(memo) == 0


def test_a_history_is_remembered_from_its_second_plan(token_counter: object) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=token_counter)
    memo = memo_of(trimmer)
    messages = history(3)
    trimmer.trim(messages[:-1])
    assert len(memo) == 0  # planned once: a history loaded afresh per call costs no more
    trimmer.trim(messages)
    assert len(memo) == 1
    trimmer.trim(history(3))
    assert len(memo) == 1
    trimmer.clear_cache()
    trimmer.trim(messages)
    assert len(memo) == 0  # clear_cache() forgot that it was planned before


def test_cache_size_zero_remembers_no_history(token_counter: object) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=token_counter, cache_size=0)
    assert getattr(trimmer.planner, "memo", None) is None


def test_a_history_longer_than_cache_size_is_not_remembered() -> None:
    trimmer = TurnTrimmer(max_tokens=100, cache_size=5)
    memo = memo_of(trimmer)
    for messages in (history(1), history(2)):
        trimmer.trim(messages)
        trimmer.trim(messages)
    assert len(memo) == 1


@pytest.mark.parametrize("token_counter", ["approximate", "tiktoken:gpt-4"])
def test_a_forgotten_history_keeps_none_of_its_content_alive(token_counter: str) -> None:
    content = "x" * 100_000 + " unique to this test"
    baseline = sys.getrefcount(content)
    trimmer = TurnTrimmer(max_tokens=10**6, token_counter=token_counter)
    messages = [HumanMessage(content)]
    trimmer.trim(messages)
    trimmer.trim(messages)
    del messages
    assert sys.getrefcount(content) > baseline
    for _ in range(HISTORIES):
        newer = history(1)
        trimmer.trim(newer)
        trimmer.trim(newer)
    gc.collect()
    assert sys.getrefcount(content) == baseline


def test_copies_and_pickles_start_with_no_history(token_counter: object) -> None:
    trimmer = TurnTrimmer(max_tokens=100, token_counter=token_counter)
    messages = history(3)
    trimmer.trim(messages)
    trimmer.trim(messages)
    for twin in (copy.deepcopy(trimmer), pickle.loads(pickle.dumps(trimmer))):  # noqa: S301
        assert len(memo_of(twin)) == 0
        assert twin.trim(messages) == trimmer.trim(messages)


def test_threads_trimming_their_own_conversations_get_fresh_results() -> None:
    trimmer = TurnTrimmer(max_tokens=150, token_counter=Lengths())
    conversations = [history(12) for _ in range(HISTORIES * 2)]
    expected = [
        [TurnTrimmer(max_tokens=150, token_counter=Lengths()).trim(c[:k]) for k in range(len(c))]
        for c in conversations
    ]
    results: dict[int, list[list[BaseMessage]]] = {}
    start = threading.Barrier(len(conversations))

    def run(i: int) -> None:
        start.wait()
        c = conversations[i]
        results[i] = [trimmer.trim(c[:k]) for k in range(len(c))]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(conversations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(len(conversations))] == expected
