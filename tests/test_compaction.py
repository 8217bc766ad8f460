"""``on_overflow="compact"``: the newest turn compacted inside the budget, never corrupted."""

from __future__ import annotations

import asyncio
import copy
import gc
import json
import math
import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from langchain_turntrim import (
    TiktokenCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    per_list,
    per_message,
    trim_turns,
    trim_update,
)
from langchain_turntrim._cli import main
from langchain_turntrim._compaction import edits, fit
from langchain_turntrim._compaction.fit import WHOLE_LIST_COUNTS, fit_additive
from langchain_turntrim._compaction.ladder import Compaction, Ladder, Slot
from langchain_turntrim._planning import additive
from langchain_turntrim._planning.memo import HISTORIES
from tests import strategies as lcst
from tests.lc import LENGTH, check_conversation

FILLER = "the quick brown fox jumps over the lazy dog 0123456789 "


def text(size: int, seed: int = 0) -> str:
    """``size`` characters of varied text (so that tiktoken's counts vary too)."""
    base = f"[{seed}] " + FILLER
    return (base * (size // len(base) + 1))[:size]


def call(step: int, k: int) -> dict[str, Any]:
    return {"name": f"tool_{k}", "args": {"step": step, "k": k}, "id": f"c{step}.{k}"}


def agent_turn(
    sizes: Sequence[Sequence[int]],
    *,
    user: int = 40,
    system: int = 30,
    older: int = 1,
    final: int = 20,
) -> list[BaseMessage]:
    """A system message, ``older`` short turns, then one long turn: a user
    message of ``user`` characters and a step per entry of ``sizes`` (an
    assistant message calling one tool per size, then the results), then a
    final answer of ``final`` characters (0: none)."""
    history: list[BaseMessage] = [SystemMessage(text(system), id="sys")]
    for t in range(older):
        history += [HumanMessage(text(30, t), id=f"old{t}"), AIMessage(text(30), id=f"olda{t}")]
    history.append(HumanMessage(text(user, 99), id="task"))
    for step, results in enumerate(sizes):
        calls = [call(step, k) for k in range(len(results))]
        history.append(AIMessage(text(10, step), tool_calls=calls, id=f"a{step}"))
        history += [
            ToolMessage(text(size, step), tool_call_id=c["id"], name=c["name"], id=f"r{c['id']}")
            for c, size in zip(calls, results, strict=True)
        ]
    if final:
        history.append(AIMessage(text(final), id="final"))
    return history


@st.composite
def long_turns(draw: st.DrawFn) -> list[BaseMessage]:
    """Long agent turns: parallel calls, huge single results, a huge user
    message, empty (zero-token for LENGTH) messages, with or without a final answer."""
    size = st.sampled_from([0, 0, 5, 40, 200, 1_500, 6_000])
    steps = draw(st.lists(st.lists(size, max_size=3), min_size=0, max_size=12))
    return agent_turn(
        steps,
        user=draw(st.sampled_from([0, 20, 300, 5_000])),
        system=draw(st.sampled_from([0, 30, 300])),
        older=draw(st.integers(0, 2)),
        final=draw(st.sampled_from([0, 0, 30, 2_000])),
    )


def bare_count(name: str) -> Callable[[list[BaseMessage]], int]:
    """The counter's own count of a list, computed independently of the trimmer."""
    if name == "approximate":
        return count_tokens_approximately
    if name == "tiktoken":
        exact = TiktokenCounter("gpt-4")
        return lambda ms: sum(exact.count_each(ms)) + exact.overhead
    return lambda ms: sum(len(m.content) for m in ms)


def counter_for(name: str) -> Any:
    return {"approximate": "approximate", "tiktoken": "tiktoken:gpt-4", "length": LENGTH}[name]


def steps_of(history: Sequence[BaseMessage]) -> list[str]:
    """The assistant message ids of the newest turn, in order."""
    start = max(i for i, m in enumerate(history) if m.id == "task")
    return [m.id for m in history[start:] if isinstance(m, AIMessage) and m.id]


def smallest(message: BaseMessage, count: Callable[[list[BaseMessage]], int]) -> int:
    """A lower bound of what compaction can cut ``message`` to (``count`` of one message)."""
    result = isinstance(message, ToolMessage)
    parts = edits.pieces(message, result=result)
    for part in parts:
        if part.editable:
            part.text, part.change = edits.truncate(part.text, 0), "truncated"
    forms = [message, edits.rebuild(message, parts, drop_data=True)]
    if result:
        (only,) = parts
        only.text, only.change = "[result of tool_0 cleared to fit the context]", "cleared"
        forms.append(edits.rebuild(message, parts, drop_data=False))
    return min(count([form]) for form in forms)


def check_compacted(history: list[BaseMessage], kept: list[BaseMessage], budget: int, name: str):
    """The guarantees of ``"compact"`` for one result."""
    count = bare_count(name)
    assert count(kept) <= budget
    check_conversation(kept)
    by_id = {m.id: m for m in history}
    assert kept[0] is history[0]  # the system message, pinned
    assert kept[1].id == "task"  # the task, first after the pinned message
    assert isinstance(kept[1], HumanMessage)
    kept_steps = [m.id for m in kept if isinstance(m, AIMessage)]
    all_steps = steps_of(history)
    if all_steps:
        assert kept_steps
        assert kept_steps[-1] == all_steps[-1]  # the newest step
        assert kept_steps == all_steps[len(all_steps) - len(kept_steps) :]  # newest ones only
    for message in kept:
        original = by_id[message.id]
        assert type(message) is type(original)
        if message is not original:  # a compacted copy, never the caller's object edited
            assert message.content != original.content
            if isinstance(message, ToolMessage):
                assert message.tool_call_id == original.tool_call_id  # type: ignore[attr-defined]
            if isinstance(message, AIMessage):
                assert message.tool_calls == original.tool_calls  # type: ignore[attr-defined]


def with_every_counter(max_examples: int) -> Callable[[Any], Any]:
    """A property of ``long_turns()`` (``history``, and ``data`` to draw more)
    for each counter's ``name``."""

    def decorate(test: Any) -> Any:
        test = given(history=long_turns(), data=st.data())(test)
        health = [HealthCheck.function_scoped_fixture]
        test = settings(max_examples=max_examples, suppress_health_check=health)(test)
        return pytest.mark.parametrize("name", ["approximate", "tiktoken", "length"])(test)

    return decorate


@with_every_counter(max_examples=150)
def test_compaction_guarantees_at_every_budget(
    name: str, history: list[BaseMessage], data: st.DataObject, tiktoken_cache: Any
) -> None:
    count = bare_count(name)
    total = count(history)
    budget = data.draw(st.integers(0, total + 20) | st.integers(total // 3, total), label="budget")
    counter = counter_for(name)
    drop = TurnTrimmer(max_tokens=budget, token_counter=counter).trim(history)
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=counter, on_overflow="compact")
    task = next(i for i, m in enumerate(history) if m.id == "task")
    pinned_and_turn = [history[0], *history[task:]]
    if count(pinned_and_turn) <= budget:  # the newest turn fits: exactly what "drop" returns
        assert trimmer.trim(history) == drop
        return
    skeleton = pinned_and_turn[1:2]
    if steps_of(history):
        newest = history.index(next(m for m in history if m.id == steps_of(history)[-1]))
        skeleton += history[newest:]
    try:
        kept = trimmer.trim(history)
    except TurnTrimOverflowError:
        # Raised only when not even the skeleton (the system message, the task
        # and the newest step, each at its smallest form) fits; a marker's
        # digits may differ by a few tokens per message.
        least = count(history[:1]) + sum(smallest(m, count) for m in skeleton)
        assert least > budget - 8 * len(skeleton)
        return
    check_compacted(history, kept, budget, name)


def test_one_huge_old_result_is_cleared_and_nothing_else_changes() -> None:
    history = agent_turn([[40], [6_000], [40], [40], [40]])
    budget = count_tokens_approximately(history) - 1_000
    report = TurnTrimmer(max_tokens=budget, on_overflow="compact").trim_with_report(history)
    (cleared,) = report.compacted
    assert cleared.id == "rc1.0"
    assert isinstance(cleared, ToolMessage)
    assert cleared.tool_call_id == "c1.0"
    assert cleared.name == "tool_0"
    assert cleared.text.startswith("[result of tool_0 cleared to fit the context:")
    # Everything else is the caller's own object, older turns aside.
    assert [m for m in report.kept if m is not cleared] == [
        m for m in history if m.id not in ("old0", "olda0", "rc1.0")
    ]
    assert report.compaction is not None
    assert report.compaction.cleared_results == 1
    assert report.compaction.dropped_steps == 0
    assert report.compaction.truncated_messages == 0
    assert report.dropped == history[1:3]  # the older turn
    assert report.tokens_after <= budget
    # Not wasteful: the one clear was needed (the turn as it was does not fit).
    assert count_tokens_approximately([history[0], *history[3:]]) > budget


def test_the_newest_results_are_kept_intact_and_old_steps_go_before_truncation() -> None:
    history = agent_turn([[3_000]] * 6, final=0)
    budget = 2_500
    trimmer = TurnTrimmer(max_tokens=budget, on_overflow="compact", keep_tool_results=1)
    report = trimmer.trim_with_report(history)
    compaction = report.compaction
    assert compaction is not None
    cleared = [m.id for m in report.compacted]
    assert cleared == [f"rc{i}.0" for i in range(len(cleared))]  # the oldest first
    assert 0 < len(cleared) < 6
    assert compaction.dropped_steps == compaction.truncated_messages == 0
    assert report.kept[-1] is history[-1]  # the newest result, intact
    assert count_tokens_approximately(report.kept) <= budget
    # Not wasteful: without the last clear, the turn would not fit.
    last = report.compacted[-1]
    original = next(m for m in history if m.id == last.id)
    undone = [original if m is last else m for m in report.kept]
    assert count_tokens_approximately(undone) > budget
    small = TurnTrimmer(max_tokens=900, on_overflow="compact", keep_tool_results=1)
    tight = small.trim_with_report(history).compaction
    assert tight is not None
    assert tight.dropped_steps > 0  # steps dropped, oldest first
    kept_steps = [m.id for m in small.trim(history) if isinstance(m, AIMessage)]
    assert kept_steps == [f"a{i}" for i in range(6 - len(kept_steps), 6)]


def test_a_huge_user_message_is_truncated_head_and_tail() -> None:
    task = "START " + "middle " * 3_000 + " END"
    history = [SystemMessage("be brief", id="sys"), HumanMessage(task, id="task")]
    kept = TurnTrimmer(max_tokens=300, on_overflow="compact").trim(history)
    assert [m.id for m in kept] == ["sys", "task"]
    cut = kept[1].text
    assert cut.startswith("START middle")
    assert cut.endswith("middle  END")
    assert "characters cut to fit the context" in cut
    assert 250 < count_tokens_approximately(kept) <= 300
    assert history[1].content == task  # the caller's message is untouched


def test_raises_when_not_even_the_skeleton_fits() -> None:
    history = agent_turn([[100]], system=2_000)
    with pytest.raises(TurnTrimOverflowError):
        TurnTrimmer(max_tokens=100, on_overflow="compact").trim(history)
    with pytest.raises(TurnTrimOverflowError):  # the system messages alone do not fit
        TurnTrimmer(max_tokens=10, on_overflow="compact").trim([SystemMessage("x" * 400)])


def test_two_hundred_steps_in_one_turn() -> None:
    history = agent_turn([[300, 300]] * 220, final=50)
    budget = 4_000
    report = TurnTrimmer(max_tokens=budget, on_overflow="compact").trim_with_report(history)
    check_compacted(history, report.kept, budget, "approximate")
    assert report.compaction is not None
    assert report.compaction.dropped_steps > 150
    assert report.tokens_after == count_tokens_approximately(report.kept)
    assert report.tokens_after > 0.9 * budget


def test_a_whole_list_counter_is_held_to_its_exact_count() -> None:
    sent: list[list[BaseMessage]] = []

    def count(messages: list[BaseMessage]) -> int:  # not additive: 2 tokens between messages
        check_conversation(messages)
        sent.append(messages)
        return sum(len(m.text) // 4 for m in messages) + 2 * len(messages)

    history = agent_turn([[800], [800], [800]], final=0)
    trimmer = TurnTrimmer(max_tokens=300, token_counter=per_list(count), on_overflow="compact")
    kept = trimmer.trim(history)
    check_conversation(kept)
    assert count(kept) <= 300
    assert kept[1].id == "task"


def test_trim_turns_compacts_too() -> None:
    history = agent_turn([[4_000]])
    kept = trim_turns(history, max_tokens=500, on_overflow="compact")
    assert [m.id for m in kept][:2] == ["sys", "task"]
    assert count_tokens_approximately(kept) <= 500
    assert trim_turns(history, max_tokens=500) == [history[0]]  # "drop", the spec


def test_the_report_and_trace_carry_the_figures() -> None:
    history = agent_turn([[40], [6_000], [40]])
    trimmer = TurnTrimmer(max_tokens=800, on_overflow="compact", keep_tool_results=1)
    report = trimmer.trim_with_report(history)
    compaction = report.compaction
    assert compaction is not None
    summary = report.summary()
    assert summary["tokens_after"] == report.tokens_after
    assert summary["messages_after"] == len(report.kept)
    assert summary["cleared_tokens"] == compaction.cleared_tokens > 1_000
    assert summary["dropped_turns"] == report.dropped_turns == 1
    assert report.kept_turns == 1
    assert report.budget_met


# -- the turn's shape: tool results in user messages, summaries -----------------------------


def anthropic_turn() -> list[BaseMessage]:
    calls = [{"name": "search", "args": {"q": "x"}, "id": "toolu_1"}]
    return [
        SystemMessage("sys", id="sys"),
        HumanMessage("old question", id="old"),
        AIMessage("old answer", id="olda"),
        HumanMessage("find it", id="task"),
        AIMessage("", tool_calls=calls, id="a0"),
        HumanMessage(
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "y" * 4_000}],
            id="res",
        ),
        AIMessage("", tool_calls=[{**calls[0], "id": "toolu_2"}], id="a1"),
        HumanMessage(
            [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "z" * 40}], id="res2"
        ),
    ]


def test_tool_results_in_user_messages_continue_the_turn() -> None:
    history = anthropic_turn()
    budget = count_tokens_approximately(history[3:]) + 20  # the last turn and a bit
    kept = TurnTrimmer(max_tokens=budget).trim(history)
    assert [m.id for m in kept] == ["sys", "task", "a0", "res", "a1", "res2"]
    check_conversation(kept)
    compact = TurnTrimmer(
        max_tokens=300, on_overflow="compact", keep_tool_results=1
    ).trim_with_report(history)
    (cleared,) = compact.compacted
    assert cleared.id == "res"
    assert cleared.content[0]["tool_use_id"] == "toolu_1"
    assert cleared.content[0]["content"].startswith("[result of search cleared")
    check_conversation(compact.kept)
    # With the default (3), both results are protected: the older step goes whole.
    protected = TurnTrimmer(max_tokens=300, on_overflow="compact").trim_with_report(history)
    assert protected.compaction is not None
    assert protected.compaction.cleared_results == 0
    assert [m.id for m in protected.kept] == ["sys", "task", "a1", "res2"]


def test_a_summary_is_pinned() -> None:
    summary = HumanMessage(
        "Summary: the user wants X.", id="sum", additional_kwargs={"lc_source": "summarization"}
    )
    history = [
        SystemMessage("sys", id="sys"),
        summary,
        AIMessage("continuing", id="a"),
        HumanMessage("q" * 400, id="u1"),
        AIMessage("a" * 400, id="a1"),
        HumanMessage("now this", id="u2"),
    ]
    kept = TurnTrimmer(max_tokens=60).trim(history)
    assert [m.id for m in kept] == ["sys", "sum", "u2"]
    everything = TurnTrimmer(max_tokens=10_000).trim(history)
    assert [m.id for m in everything] == [m.id for m in history]  # "a" follows its summary
    check_conversation(kept)
    check_conversation(everything)


def test_trim_update_never_deletes_the_newest_turn() -> None:
    history = [
        HumanMessage("hi", id="1"),
        AIMessage("hello", id="2"),
        HumanMessage("x" * 2000, id="3"),
    ]
    update = trim_update(history, TurnTrimmer(max_tokens=100))
    assert [m.id for m in update["messages"]] == ["1", "2"]
    compact = trim_update(history, TurnTrimmer(max_tokens=100, on_overflow="compact"))
    assert [m.id for m in compact["messages"]] == ["1", "2"]


def test_async_and_sync_compact_alike() -> None:
    history = agent_turn([[2_000]] * 4)
    trimmer = TurnTrimmer(max_tokens=700, on_overflow="compact")
    assert asyncio.run(trimmer.ainvoke(history)) == trimmer.invoke(history) == trimmer.trim(history)


# -- the ladder's choices, against naive references; its work, linear -------------------------


class CheckedLadder(Ladder):
    """The ladder, each choice checked against a scan of what it keeps: the
    largest message that can still be truncated (the earliest of equals, the
    user's last of all), and the oldest step that may go (never the newest,
    nor a first kept step that opens with a thinking block)."""

    def _largest(self) -> Slot | None:
        found = super()._largest()
        slots = [s for s in self.kept_slots() if not s.at_floor]
        others = [s for s in slots if s is not self.user]
        assert found is max(others or slots, key=lambda s: s.tokens, default=None)
        return found

    def _droppable(self) -> int | None:
        gone = {id(s) for s in self.dropped}
        kept = [i for i, step in enumerate(self.steps) if id(step[0]) not in gone]
        first = next(iter(self.steps[kept[0]][0].original.content), None) if kept else None
        held = 1 if isinstance(first, dict) and first["type"] == "thinking" else 0
        expected = kept[held] if held < len(kept) - 1 else None
        found = super()._droppable()
        assert found == expected
        return found


def thinking(message: BaseMessage) -> BaseMessage:
    """``message`` opening with a thinking block (Anthropic's extended thinking)."""
    block = {"type": "thinking", "thinking": "let me think", "signature": "sig"}
    return message.model_copy(update={"content": [block, {"type": "text", "text": message.text}]})


@pytest.mark.parametrize("name", ["approximate", "length"])
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=long_turns(), data=st.data())
def test_the_ladder_chooses_as_a_scan_of_what_it_keeps_would(
    name: str, history: list[BaseMessage], data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    thinks = data.draw(st.lists(st.booleans(), min_size=len(history), max_size=len(history)))
    history = [
        thinking(m) if isinstance(m, AIMessage) and t else m
        for m, t in zip(history, thinks, strict=True)
    ]
    total = bare_count(name)(history)
    budget = data.draw(st.integers(0, total) | st.integers(total // 4, total), label="budget")
    trimmer = TurnTrimmer(max_tokens=budget, token_counter=counter_for(name), on_overflow="compact")
    expected = outcome_of(trimmer, history)
    with monkeypatch.context() as patched:
        patched.setattr(fit, "Ladder", CheckedLadder)
        checked = TurnTrimmer(budget, token_counter=counter_for(name), on_overflow="compact")
        assert outcome_of(checked, history) == expected


def outcome_of(trimmer: TurnTrimmer, history: list[BaseMessage]) -> object:
    """The compaction a trim makes, or the error it raises."""
    try:
        return trimmer.trim_with_report(history).compaction
    except TurnTrimOverflowError as error:
        return str(error)


def python_calls(run: Callable[[], object]) -> int:
    """How many Python functions ``run()`` calls, all the way down."""
    calls = 0

    def profile(_frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


@settings(max_examples=200)
@given(
    message=lcst.messages(),
    name=st.sampled_from(["tool_calls", "tool_call_id", "name", "role", "type", "text", "x"]),
    extra=st.none() | st.sampled_from(["tool_calls", "tool_call_id", "x"]),
)
def test_an_attribute_is_read_as_getattr_reads_it(
    message: BaseMessage, name: str, extra: str | None
) -> None:
    if extra is not None and extra not in type(message).model_fields:
        setattr(message, extra, [{"id": "c", "name": "n"}])  # an extra field
    assert edits.attribute(message, name) == getattr(message, name, None)


def test_a_turns_compaction_does_work_linear_in_its_steps() -> None:
    def calls(steps: int) -> int:
        history = agent_turn([[300]] * steps, final=0)
        trimmer = TurnTrimmer(max_tokens=3_000, on_overflow="compact")
        python_calls(lambda: trimmer.trim(history))  # the counts cached
        return python_calls(lambda: trimmer.trim(history[:-1]))

    assert calls(1_200) < 4.5 * calls(300)


# -- warm compactions: what a fresh trimmer gives, after any edit -----------------------------

EDITS = ("same", "original", "copy", "copy extra", "original extra", "append")


def report_of(trimmer: TurnTrimmer, history: list[BaseMessage]) -> tuple[Any, ...]:
    """What a trim gives (what is kept, and the compaction), or the error it raises."""
    try:
        report = trimmer.trim_with_report(history)
    except (TypeError, ValueError, TurnTrimOverflowError) as error:
        return type(error), str(error)
    return report.kept, report.compaction, report.tokens_after


@with_every_counter(max_examples=100)
def test_a_warm_compaction_is_a_fresh_one_after_any_edit(
    name: str, history: list[BaseMessage], data: st.DataObject, tiktoken_cache: Any
) -> None:
    total = bare_count(name)(history)
    budget = data.draw(st.integers(total // 4, total), label="budget")
    keep = data.draw(st.integers(0, 3), label="keep_tool_results")
    options: dict[str, Any] = {"on_overflow": "compact", "keep_tool_results": keep}
    warm = TurnTrimmer(budget, token_counter=counter_for(name), **options)
    for _ in range(data.draw(st.integers(1, 6), label="rounds")):
        got = report_of(warm, history)
        fresh = TurnTrimmer(budget, token_counter=counter_for(name), **options)
        assert got == report_of(fresh, history)
        copies = got[1].compacted if isinstance(got[1], Compaction) else []
        edit = data.draw(st.sampled_from(EDITS), label="edit")
        if edit == "append":
            history = [*history, AIMessage(text(30, len(history)), id=f"more{len(history)}")]
            continue
        targets = copies if edit.startswith("copy") else history
        if edit == "same" or not targets:
            continue
        message = data.draw(st.sampled_from(targets), label="message")
        field, value = data.draw(lcst.field_reassignments(), label="change")
        if edit.endswith("extra"):
            setattr(message, "extra_" + field, value)
        elif field in type(message).model_fields:
            setattr(message, field, copy.deepcopy(value))


class Recorded:
    """Content lengths; records every message it counts."""

    overhead = 0

    def __init__(self) -> None:
        self.counted: list[BaseMessage] = []

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        self.counted += messages
        return [len(str(m.content)) for m in messages]


def cleared_history() -> tuple[list[BaseMessage], dict[str, Any]]:
    """A turn whose compaction clears old results (and nothing else), and the trimmer's options."""
    history = agent_turn([[400]] * 6, final=0)
    return history, {"max_tokens": 1_000, "on_overflow": "compact", "keep_tool_results": 1}


def test_a_compacted_history_is_compacted_again_with_the_same_copies_and_no_count() -> None:
    counter = Recorded()
    history, options = cleared_history()
    trimmer = TurnTrimmer(token_counter=counter, **options)
    first = trimmer.trim_with_report(history)
    assert first.compaction is not None
    assert first.compaction.cleared_results == 5
    counter.counted.clear()
    for _ in range(2):  # planned once, then remembered
        again = trimmer.trim_with_report(history)
        assert counter.counted == []
        assert all(map(operator.is_, again.compacted, first.compacted))
        assert again.kept == first.kept
        assert again.kept is not first.kept
    step = [
        AIMessage(text(10, 6), tool_calls=[call(6, 0)], id="a6"),
        ToolMessage(text(400, 6), tool_call_id="c6.0", id="rc6.0"),
    ]
    longer = [*history, *step]
    report = trimmer.trim_with_report(longer)
    # Counted (given frozen copies): the new step, and the copy of the one
    # result cleared for the first time.
    new = [m for m in report.compacted if not any(m is c for c in first.compacted)]
    assert [m.id for m in new] == ["rc5.0"]
    assert [(m.id, m.content) for m in counter.counted] == [
        (m.id, m.content) for m in [*step, *new]
    ]


def test_a_history_compacted_as_it_is_is_not_compacted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    history, options = cleared_history()
    trimmer = TurnTrimmer(token_counter=Recorded(), **options)
    trimmer.trim(history)
    expected = trimmer.trim_with_report(history)  # remembered from its second plan
    runs: list[int] = []

    def spy(messages: Sequence[BaseMessage], *args: Any, **kwargs: Any) -> Compaction:
        runs.append(len(messages))
        return fit_additive(messages, *args, **kwargs)

    monkeypatch.setattr(additive, "fit_additive", spy)  # where the planner finds it
    again = trimmer.trim_with_report(history)
    assert runs == []
    assert (again.kept, again.compaction) == (expected.kept, expected.compaction)
    assert again.kept is not expected.kept
    trimmer.trim([*history, AIMessage("more", id="more")])  # the turn grew: compacted anew
    assert runs == [len(history) + 1]


@pytest.mark.parametrize(
    ("field", "value"),
    [("content", "edited"), ("id", "given by add_messages"), ("response_metadata", {"x": 1})],
)
@pytest.mark.parametrize("whose", ["copy", "original"])
def test_a_field_reassigned_on_a_copy_or_its_message_gives_a_fresh_copy(
    field: str, value: object, whose: str
) -> None:
    history, options = cleared_history()
    trimmer = TurnTrimmer(token_counter=Recorded(), **options)
    trimmer.trim(history)
    copied = trimmer.trim_with_report(history).compacted[0]
    target = copied if whose == "copy" else next(m for m in history if m.id == copied.id)
    setattr(target, field, value)
    again = trimmer.trim_with_report(history)
    fresh = TurnTrimmer(token_counter=Recorded(), **options).trim_with_report(history)
    assert again.kept == fresh.kept
    if whose == "copy":
        assert getattr(again.compacted[0], field) != value
    elif field != "content":
        assert getattr(again.compacted[0], field) == value


def test_an_extra_field_set_on_a_copied_message_is_carried_by_its_copy() -> None:
    history, options = cleared_history()
    trimmer = TurnTrimmer(token_counter=Recorded(), **options)
    trimmer.trim(history)
    copied = trimmer.trim_with_report(history).compacted[0]
    original = next(m for m in history if m.id == copied.id)
    original.note = "seen"  # type: ignore[attr-defined]
    again = trimmer.trim_with_report(history)
    assert again.compacted[0].note == "seen"
    fresh = TurnTrimmer(token_counter=Recorded(), **options).trim_with_report(history)
    assert again.kept == fresh.kept


def test_a_forgotten_compaction_keeps_none_of_its_content_alive() -> None:
    content = text(100_000) + " unique to this test"
    baseline = sys.getrefcount(content)
    history = agent_turn([[400], [400]], final=0)
    history[3] = history[3].model_copy(update={"content": content})  # the oldest result
    trimmer = TurnTrimmer(max_tokens=600, on_overflow="compact", keep_tool_results=1)
    trimmer.trim(history)
    assert trimmer.trim_with_report(history).compaction is not None
    assert sys.getrefcount(content) > baseline
    del history
    for k in range(HISTORIES):
        newer = agent_turn([[400], [400]], final=0, user=40 + k)
        trimmer.trim(newer)
        trimmer.trim(newer)
    gc.collect()
    assert sys.getrefcount(content) == baseline


# -- in an agent ------------------------------------------------------------------------------


class LongTurnModel(BaseChatModel):
    """Calls ``search`` ``steps`` times in one turn (two calls in parallel every
    fifth step), then answers. Records every list of messages it is sent."""

    steps: int = 120
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "long-turn-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> LongTurnModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        n = len(self.calls)
        if n > self.steps:
            reply = AIMessage(f"Done after {n - 1} steps.", id=f"ai{n}")
        else:
            width = 2 if n % 5 == 0 else 1
            calls = [
                {"name": "search", "args": {"page": n, "k": k}, "id": f"call{n}.{k}"}
                for k in range(width)
            ]
            reply = AIMessage(f"Step {n}: searching.", tool_calls=calls, id=f"ai{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def search(page: int, k: int) -> str:
    """Search one page of the documents."""
    return f"page {page}.{k}: " + text(40 + 37 * (page % 9) + (900 if page % 17 == 0 else 0), page)


def _invoke(agent: Any, inputs: Any) -> Any:
    return agent.invoke(inputs, {"recursion_limit": 1_000})


def _ainvoke(agent: Any, inputs: Any) -> Any:
    return asyncio.run(agent.ainvoke(inputs, {"recursion_limit": 1_000}))


@pytest.fixture(params=["invoke", "ainvoke"])
def run(request: pytest.FixtureRequest) -> Callable[[Any, Any], Any]:
    return {"invoke": _invoke, "ainvoke": _ainvoke}[request.param]


SYSTEM_PROMPT = "You research documents with the search tool until you are done."


def test_a_hundred_step_turn_under_a_small_budget(run: Callable[[Any, Any], Any]) -> None:
    budget = 1_500
    model = LongTurnModel()
    agent = create_agent(
        model,
        tools=[search],
        system_prompt=SYSTEM_PROMPT,
        middleware=[TurnTrimMiddleware(max_tokens=budget)],  # on_overflow="compact"
    )
    task = HumanMessage("Find every page that mentions the fox. " * 5, id="task")
    state = run(agent, {"messages": [task]})
    assert len(model.calls) == model.steps + 1
    compacted = 0
    for sent in model.calls:
        check_conversation(sent)
        assert sent[0].text == SYSTEM_PROMPT
        assert sent[1].id == "task"  # the task is in every request
        assert count_tokens_approximately(sent, tools=[search]) <= budget
        compacted += any(m.id != "task" and m.content != _original(state, m) for m in sent[1:])
    assert compacted > model.steps // 2  # the turn outgrew the budget early on
    # The state holds every message, none of them compacted.
    assert len(state["messages"]) == 1 + model.steps * 2 + model.steps // 5 + 1
    assert state["messages"][0].content == task.content
    assert all(not m.text.startswith("[result of") for m in state["messages"])


def _original(state: dict[str, Any], message: BaseMessage) -> Any:
    return next(m.content for m in state["messages"] if m.id == message.id)


def test_with_summarization_the_summary_is_pinned_and_the_tail_kept(
    run: Callable[[Any, Any], Any],
) -> None:
    summarizer = GenericFakeChatModel(messages=iter([AIMessage("The user wants the fox.")] * 20))
    model = LongTurnModel(steps=40)
    budget = 1_200
    agent = create_agent(
        model,
        tools=[search],
        system_prompt=SYSTEM_PROMPT,
        middleware=[
            SummarizationMiddleware(summarizer, trigger=("tokens", 2_000), keep=("messages", 6)),
            TurnTrimMiddleware(max_tokens=budget),
        ],
    )
    run(agent, {"messages": [HumanMessage("Find the fox.", id="task")]})
    summarized = [s for s in model.calls if any(_is_summary(m) for m in s)]
    assert summarized  # the summarizer fired
    for sent in model.calls:
        check_conversation(sent)
        assert count_tokens_approximately(sent, tools=[search]) <= budget
    for sent in summarized:
        assert _is_summary(sent[1])  # pinned, first after the system prompt
        assert isinstance(sent[-1], (AIMessage, ToolMessage))  # the preserved tail follows it
        assert len(sent) > 2


def _is_summary(message: BaseMessage) -> bool:
    return message.additional_kwargs.get("lc_source") == "summarization"


# -- on the command line ----------------------------------------------------------------------


def openai_turn() -> list[dict[str, Any]]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        for i in range(3)
    ]
    turn: list[dict[str, Any]] = [
        {"role": "system", "content": "sys", "id": "sys"},
        {"role": "user", "content": "read the files", "id": "task", "meta": {"keep": 1.5e300}},
    ]
    for i, c in enumerate(calls):
        turn.append({"role": "assistant", "content": None, "tool_calls": [c], "id": f"a{i}"})
        turn.append(
            {"role": "tool", "tool_call_id": c["id"], "content": text(3_000, i), "id": f"r{i}"}
        )
    return turn


def test_the_cli_writes_compacted_messages_in_the_input_shape(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(openai_turn()))
    args = ["--max-tokens", "1200", "--on-overflow", "compact", "--keep-tool-results", "1"]
    assert main(["trim", str(path), *args]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in out] == ["sys", "task", "a0", "r0", "a1", "r1", "a2", "r2"]
    assert out[1] == openai_turn()[1]  # untouched messages are written as they were
    assert out[3]["content"].startswith("[result of read cleared to fit the context:")
    assert out[3]["tool_call_id"] == "c0"
    assert out[-1] == openai_turn()[-1]
    kept = convert_to_messages(out)
    check_conversation(kept)
    assert count_tokens_approximately(kept) <= 1200
    assert main(["report", str(path), *args]) == 0
    assert "compact: the newest turn is kept in" in capsys.readouterr().out


def test_the_cli_refuses_to_compact_records(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "records.json"
    path.write_text(json.dumps([{"role": "user", "tokens": 5, "id": "u"}]))
    args = ["trim", str(path), "--max-tokens", "1", "--token-counter", "field"]
    assert main([*args, "--on-overflow", "compact"]) == 2
    assert "--on-overflow compact needs message content" in capsys.readouterr().err


def test_results_cleared_before_a_drop_are_given_back_when_room_allows() -> None:
    history = agent_turn([[2_000], [2_000]], final=0, older=0)
    history[2] = history[2].model_copy(update={"content": text(6_000)})  # a huge first step
    trimmer = TurnTrimmer(max_tokens=700, on_overflow="compact", keep_tool_results=0)
    report = trimmer.trim_with_report(history)
    assert report.compaction is not None
    assert report.compaction.dropped_steps == 1
    # Cleared on the way, given back intact once the first step was dropped.
    assert report.kept == [history[0], history[1], history[4], history[5]]
    assert count_tokens_approximately(report.kept) <= 700


def test_a_small_excess_is_cut_from_the_largest_message_not_paid_with_a_whole_step() -> None:
    history = agent_turn([[100], [3_000], [6_000], [40]], final=0, older=0)
    count = count_tokens_approximately
    first_step = count(history[2:4])
    budget = count(history) - first_step - 60  # one step, and 60 tokens more
    report = TurnTrimmer(max_tokens=budget, on_overflow="compact").trim_with_report(history)
    compaction = report.compaction
    assert compaction is not None
    assert compaction.dropped_steps == 1
    assert compaction.truncated_messages == 1
    (cut,) = report.compacted
    assert cut.id == "rc2.0"  # the largest message, not the user's
    assert budget - 10 <= report.tokens_after <= budget


class Events(BaseCallbackHandler):
    """Keeps the data of every ``turntrim`` custom event."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "turntrim":
            self.seen.append(data)


def test_the_trace_carries_the_compaction_figures() -> None:
    history = agent_turn([[40], [6_000], [40]])
    trimmer = TurnTrimmer(max_tokens=800, on_overflow="compact", keep_tool_results=1)
    events = Events()
    kept = trimmer.invoke(history, {"callbacks": [events]})
    (data,) = events.seen
    report = trimmer.trim_with_report(history)
    assert report.compaction is not None
    assert data == {**data, **report.summary()}
    assert data["messages_after"] == len(kept)
    assert data["tokens_after"] == count_tokens_approximately(kept)
    assert data["budget_met"] is True


def test_the_cli_reads_tool_results_in_user_messages_as_part_of_the_turn(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    chat: list[dict[str, Any]] = [
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "find it"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "s", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "y"}]},
    ]
    path = tmp_path / "anthropic.json"
    path.write_text(json.dumps(chat))
    budget = count_tokens_approximately(convert_to_messages(chat[2:])) + 1
    assert main(["trim", str(path), "--max-tokens", str(budget)]) == 0
    assert json.loads(capsys.readouterr().out) == chat[2:]  # the result stays with its call


# -- whole-list counters: as good as the additive counter of the same scale ------------------


class ScaledCounts:
    """Each message costs ``scale`` times its approximate count, rounded up;
    counted whole (``per_list``) or per message (``per_message``), and every
    whole-list call is recorded."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.calls = 0

    def one(self, message: BaseMessage) -> int:
        return math.ceil(self.scale * count_tokens_approximately([message]))

    def whole(self, messages: list[BaseMessage]) -> int:
        self.calls += 1
        check_conversation(messages)
        return sum(map(self.one, messages))


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.5, 1.0, 1.3, 2.0])
@settings(max_examples=100)
@given(history=long_turns(), data=st.data())
def test_whole_list_compaction_is_as_good_as_additive_compaction(
    scale: float, history: list[BaseMessage], data: st.DataObject
) -> None:
    counts = ScaledCounts(scale)
    total = counts.whole(history[:1] + history[1:])
    budget = data.draw(st.integers(0, total + 20) | st.integers(total // 4, total), label="budget")
    additive = TurnTrimmer(budget, token_counter=per_message(counts.one), on_overflow="compact")
    whole = TurnTrimmer(budget, token_counter=per_list(counts.whole), on_overflow="compact")
    try:
        expected = additive.trim_with_report(history)
    except TurnTrimOverflowError:
        expected = None
    counts.calls = 0
    try:
        report = whole.trim_with_report(history)
    except TurnTrimOverflowError:
        # Never where the additive counter of the same scale succeeds.
        assert expected is None
        return
    if report.compaction is not None:
        # The plan's search, then at most WHOLE_LIST_COUNTS for the compaction.
        assert counts.calls <= 8 + WHOLE_LIST_COUNTS
    # Within budget, by the counter's own count of the request sent (pinned first).
    sent: list[BaseMessage] = [m for m in report.kept if isinstance(m, SystemMessage)]
    sent += [m for m in report.kept if not isinstance(m, SystemMessage)]
    assert report.tokens_after == counts.whole(sent) <= budget
    if expected is not None and expected.compaction is not None:
        assert report.compaction is not None
        # It uses the budget about as well (it searches, at most 6 counts).
        assert report.tokens_after >= 0.8 * expected.tokens_after - 20


def test_a_remembered_whole_list_compaction_keeps_what_a_fresh_one_keeps() -> None:
    # Found by the differential test: the search spent its counts only on
    # requests the cache did not hold, so a warm trim searched further and
    # kept more than the cold one ("Hel…!" against the marker alone).
    def counter(messages: list[BaseMessage]) -> int:
        return 3 + sum(math.ceil(1.3 * count_tokens_approximately([m])) for m in messages)

    history = [HumanMessage("Hello, world!" * 24, id="m0")]
    trimmer = TurnTrimmer(27, token_counter=per_list(counter), on_overflow="compact")
    cold, *warm = (trimmer.trim(history) for _ in range(3))
    assert all(kept == cold for kept in warm)
