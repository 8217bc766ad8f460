"""``on_overflow="compact"``: the newest turn made to fit, never corrupted.

The ladder (docs/guides/agents.md, "Long agent turns"): clear the oldest tool
results, drop the oldest whole steps, truncate the largest message (the user
message last), each rung only as far as needed; the task and the newest step
always stay, and a request without the task is never built.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import regex  # type: ignore[import-untyped]  # no stubs installed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool

from langchain_turntrim import (
    CalibratedCounter,
    TiktokenCounter,
    TrimReport,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    TurnTrimStateMiddleware,
    per_list,
    per_message,
    trim_turns,
)
from tests.providers import check_request

FILLER = "the quick brown fox jumps over the lazy dog 0123456789 "
CLEARED = re.compile(r"\[result of (\w+) cleared to fit the context: (\d+) tokens\]")
CUT = re.compile(
    r"(.*)\n\[\.\.\. ([\d,]+) characters cut to fit the context \.\.\.\]\n(.*)", re.DOTALL
)


def text(size: int, seed: int = 0) -> str:
    """``size`` characters of varied text (tiktoken's counts vary with it too)."""
    base = f"[{seed}] " + FILLER
    return (base * (size // len(base) + 1))[:size]


def as_v1(message: AIMessage) -> AIMessage:
    """``message`` as ``ChatAnthropic(output_version="v1")`` returns it
    (LangChain's own translation to standard content blocks)."""
    return message.model_copy(
        update={
            "content": message.content_blocks,
            "response_metadata": {**message.response_metadata, "output_version": "v1"},
        }
    )


def reply(step: int, calls: list[dict[str, Any]], *, style: str, think: bool) -> AIMessage:
    """An assistant step: plain (``tool_calls``), or Anthropic's blocks, native or v1."""
    if style == "openai" and not think:
        return AIMessage(text(10, step), tool_calls=calls, id=f"a{step}")
    blocks: list[Any] = []
    if think:
        blocks.append({"type": "thinking", "thinking": f"plan {step}", "signature": f"sig{step}=="})
    blocks.append({"type": "text", "text": text(10, step)})
    blocks += [
        {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]} for c in calls
    ]
    message = AIMessage(
        blocks, tool_calls=calls, id=f"a{step}", response_metadata={"model_provider": "anthropic"}
    )
    return as_v1(message) if style == "v1" else message


def agent_turn(
    sizes: Sequence[Sequence[int]],
    *,
    user: int = 40,
    system: int = 30,
    older: int = 1,
    final: int = 20,
    style: str = "openai",
    think: bool = False,
) -> list[BaseMessage]:
    """A system message, ``older`` short turns, then one long turn: the task
    (``user`` characters) and a step per entry of ``sizes`` (an assistant
    message calling one tool per size, then its results: tool messages, or
    for ``style="anthropic"`` a user message of ``tool_result`` blocks), then
    a final answer (``final`` characters; 0: none). ``think``: the first step
    opens with a reasoning block (native for "anthropic", v1 for "v1")."""
    history: list[BaseMessage] = [SystemMessage(text(system), id="sys")] if system else []
    for t in range(older):
        history += [HumanMessage(text(30, t), id=f"old{t}"), AIMessage(text(30), id=f"olda{t}")]
    history.append(HumanMessage(text(user, 99), id="task"))
    for step, results in enumerate(sizes):
        calls = [
            {"name": f"tool_{k}", "args": {"step": step}, "id": f"c{step}.{k}", "type": "tool_call"}
            for k in range(len(results))
        ]
        history.append(reply(step, calls, style=style, think=think and step == 0))
        if style == "anthropic" and calls:
            blocks: list[Any] = [
                {"type": "tool_result", "tool_use_id": c["id"], "content": text(size, step)}
                for c, size in zip(calls, results, strict=True)
            ]
            history.append(HumanMessage(blocks, id=f"r{step}"))
        else:
            history += [
                ToolMessage(
                    text(size, step), tool_call_id=c["id"], name=c["name"], id=f"r{c['id']}"
                )
                for c, size in zip(calls, results, strict=True)
            ]
    if final:
        history.append(AIMessage(text(final), id="final"))
    return history


@st.composite
def long_turns(draw: st.DrawFn) -> list[BaseMessage]:
    """Long agent turns: parallel calls, huge results, a huge task, empty
    messages, native or v1 reasoning opening the first step, with or without
    a final answer."""
    size = st.sampled_from([0, 5, 40, 200, 1_500, 6_000])
    style = draw(st.sampled_from(["openai", "anthropic", "v1"]))
    return agent_turn(
        draw(st.lists(st.lists(size, min_size=style != "openai", max_size=3), max_size=10)),
        user=draw(st.sampled_from([0, 20, 300, 5_000])),
        system=draw(st.sampled_from([0, 30, 300])),
        older=draw(st.integers(0, 2)),
        final=draw(st.sampled_from([0, 0, 30, 2_000])),
        style=style,
        think=style != "openai" and draw(st.booleans()),
    )


def scaled(messages: list[BaseMessage]) -> int:
    """A whole-list counter that counts 1.3 times the approximate estimate."""
    return math.ceil(1.3 * count_tokens_approximately(messages))


#: Every kind of counter: additive (approximate, exact, a function of one
#: message, calibrated) and whole-list (the estimate, and 1.3 times it).
COUNTERS: dict[str, Callable[[], Any]] = {
    "approximate": lambda: "approximate",
    "tiktoken": lambda: TiktokenCounter("gpt-4"),
    "per_message": lambda: per_message(lambda m: len(str(m.content)) // 3),
    "calibrated": CalibratedCounter,
    "per_list": lambda: per_list(count_tokens_approximately),
    "per_list_1.3x": lambda: per_list(scaled),
}


@pytest.fixture(params=sorted(COUNTERS))
def counter(request: pytest.FixtureRequest) -> Any:
    if request.param == "tiktoken":
        request.getfixturevalue("tiktoken_cache")
    return COUNTERS[request.param]()


def own_count(trimmer: TurnTrimmer, sent: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> int:
    """The counter's own count of ``sent`` as a request (system messages first)."""
    pinned = [m for m in sent if isinstance(m, SystemMessage)]
    count: int = trimmer.counter.count([*pinned, *(m for m in sent if m not in pinned)], tools)
    return count


def compact(history: list[BaseMessage], budget: int, **options: Any) -> TrimReport[BaseMessage]:
    return TurnTrimmer(budget, on_overflow="compact", **options).trim_with_report(history)


def ids(messages: Sequence[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


def opens_with_reasoning(message: BaseMessage) -> bool:
    first = message.content[0] if isinstance(message.content, list) and message.content else None
    return isinstance(first, dict) and first.get("type") in ("thinking", "reasoning")


def check_compacted(history: list[BaseMessage], report: TrimReport[BaseMessage]) -> None:
    """What every compaction guarantees, whatever the counter."""
    kept, task = report.kept, next(i for i, m in enumerate(history) if m.id == "task")
    compaction = report.compaction
    assert compaction is not None
    assert report.kept_indices[0] == 0 or not isinstance(history[0], SystemMessage)
    first = 1 if isinstance(history[0], SystemMessage) else 0
    assert kept[first].id == "task"  # the task, first after the pinned messages
    older = [i for i in report.kept_indices if i < task and history[i].type != "system"]
    assert not older  # every older turn dropped
    steps = [m.id for m in history[task:] if isinstance(m, AIMessage)]
    kept_steps = [m.id for m in kept if isinstance(m, AIMessage)]
    if steps:
        assert kept_steps[-1] == steps[-1]  # the newest step
        held = opens_with_reasoning(history[task + 1])
        if held:  # a first step opening with reasoning is never dropped
            assert kept_steps[0] == steps[0]
        rest = kept_steps[1:] if held else kept_steps
        assert rest == steps[len(steps) - len(rest) :]  # the newest steps
    assert compaction.dropped_steps == len(steps) - len(kept_steps)
    for i, message in zip(report.kept_indices, kept, strict=True):
        original = history[i]
        assert (message is not original) == (i in compaction.changed)
        if message is not original:  # a new object, never the caller's edited
            assert type(message) is type(original)
            assert message.content != original.content
            for field in ("id", "name", "tool_calls", "tool_call_id", "response_metadata"):
                assert getattr(message, field, None) == getattr(original, field, None)
    check_request(kept, history, thinking=True)


@settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=long_turns(), data=st.data())
def test_compaction_keeps_its_guarantees_with_every_counter(
    counter: Any, history: list[BaseMessage], data: st.DataObject
) -> None:
    trimmer = TurnTrimmer(0, token_counter=counter)
    total = own_count(trimmer, history)
    budget = data.draw(st.integers(0, total + 20) | st.integers(total // 4, total), label="budget")
    drop = TurnTrimmer(budget, token_counter=counter).report(history)
    compacting = TurnTrimmer(budget, token_counter=counter, on_overflow="compact")
    task = next(i for i, m in enumerate(history) if m.id == "task")
    pinned = history[:1] if isinstance(history[0], SystemMessage) else []
    try:
        report = compacting.report(history)
    except TurnTrimOverflowError:
        # Only when not even the skeleton fits: the system message, the task,
        # the newest step (and a first step opening with reasoning).
        steps = [i for i in range(task, len(history)) if isinstance(history[i], AIMessage)]
        skeleton = [*pinned, history[task]]
        if steps and opens_with_reasoning(history[steps[0]]):
            skeleton += history[steps[0] : steps[1] if len(steps) > 1 else None]
        if steps:
            skeleton += [m for m in history[steps[-1] :] if m not in skeleton]
        assert own_count(trimmer, skeleton) > budget
        return
    assert report.tokens_after == own_count(trimmer, report.kept) <= budget
    if own_count(trimmer, [*pinned, *history[task:]]) <= budget:  # the turn fits: "drop"'s answer
        assert report.compaction is None
        assert report.kept == drop.kept
        return
    check_compacted(history, report)


# -- the rungs, one at a time ----------------------------------------------------------------


def diagnostics() -> list[BaseMessage]:
    """The agents guide's example: one turn of 8 diagnostic calls."""
    history: list[BaseMessage] = [
        SystemMessage("You are a support agent."),
        HumanMessage("My line is down.", id="task"),
    ]
    for step in range(8):
        call = {"name": "run_diagnostic", "args": {"check": step}, "id": f"call{step}"}
        history.append(AIMessage(f"Running check {step}.", tool_calls=[call], id=f"ai{step}"))
        history.append(ToolMessage("log line\n" * 150, tool_call_id=f"call{step}", id=f"res{step}"))
    return history


def test_the_guide_s_example_clears_the_oldest_results_as_far_as_needed() -> None:
    history = diagnostics()
    assert TurnTrimmer(2_000).trim(history) == history[:1]  # "drop": the task is gone
    report = compact(history, 2_000)
    compaction = report.compaction
    assert compaction is not None
    assert report.kept_indices == tuple(range(len(history)))  # nothing dropped
    cleared = [m for m in report.kept if CLEARED.fullmatch(str(m.content))]
    assert 0 < compaction.cleared_results == len(cleared) <= 8 - 3  # the 3 newest stay
    assert ids(cleared) == [f"res{i}" for i in range(len(cleared))]  # the oldest first
    held = count_tokens_approximately([history[3]])
    note = f"[result of run_diagnostic cleared to fit the context: {held} tokens]"
    assert all(m.content == note for m in cleared)
    assert all(
        type(m) is ToolMessage and m.tool_call_id == f"call{i}" for i, m in enumerate(cleared)
    )
    assert compaction.dropped_steps == compaction.truncated_messages == 0
    assert compaction.changed == tuple(3 + 2 * i for i in range(len(cleared)))
    assert report.tokens_after == count_tokens_approximately(report.kept) <= 2_000
    # Not wasteful: without its last clear the request would not fit.
    last = compaction.changed[-1]
    undone = [history[last] if i == last else m for i, m in enumerate(report.kept)]
    assert count_tokens_approximately(undone) > 2_000


def test_the_guide_s_example_at_a_small_budget_keeps_the_task_and_the_newest_step() -> None:
    history = diagnostics()
    report = compact(history, 400)
    assert report.kept == [history[0], history[1], history[-2], history[-1]]  # newest, intact
    assert report.compaction is not None
    assert report.compaction.dropped_steps == 7
    assert report.compaction.dropped_step_tokens == count_tokens_approximately(history[2:-2])
    assert report.tokens_after == count_tokens_approximately(report.kept) <= 400


@pytest.mark.parametrize("keep", [0, 1, 2, 3, 10])
def test_keep_tool_results_keeps_the_newest_results_intact(keep: int) -> None:
    history = agent_turn([[3_000, 3_000], [3_000]], older=0, final=0)
    report = compact(history, 2_000, keep_tool_results=keep)
    results = [m for m in history if isinstance(m, ToolMessage)]
    kept = {m.id: m for m in report.kept}
    for rank, result in enumerate(reversed(results)):
        if result.id in kept and rank < keep:  # protected: never cleared
            assert not CLEARED.fullmatch(str(kept[result.id].content))
    assert report.compaction is not None
    assert report.compaction.cleared_results <= max(0, 3 - keep)


def test_parallel_results_in_one_user_message_are_cleared_each_naming_its_tool() -> None:
    calls = [("w1", "weather"), ("s1", "stock")]
    history = [
        HumanMessage("compare", id="task"),
        AIMessage(
            [{"type": "tool_use", "id": i, "name": n, "input": {}} for i, n in calls],
            tool_calls=[{"name": n, "args": {}, "id": i} for i, n in calls],
            id="a0",
        ),
        HumanMessage(
            [
                {"type": "tool_result", "tool_use_id": "w1", "content": text(6_000, 1)},
                {"type": "tool_result", "tool_use_id": "s1", "content": text(6_000, 2)},
                {"type": "text", "text": "and mind the holidays"},
            ],
            id="r0",
        ),
        AIMessage("", tool_calls=[{"name": "news", "args": {}, "id": "n1"}], id="a1"),
        ToolMessage("quiet day", tool_call_id="n1", id="r1"),
    ]
    report = compact(history, 400, keep_tool_results=1)
    cleared = report.kept[2]
    weather, stock, note = cleared.content
    assert CLEARED.fullmatch(weather["content"])[1] == "weather"  # type: ignore[index]
    assert CLEARED.fullmatch(stock["content"])[1] == "stock"  # type: ignore[index]
    assert (weather["tool_use_id"], stock["tool_use_id"]) == ("w1", "s1")
    assert note == {"type": "text", "text": "and mind the holidays"}  # the user's own text
    assert report.compaction is not None
    assert report.compaction.cleared_results == 2
    assert report.kept[3:] == history[3:]
    check_request(report.kept, history)


def test_the_oldest_steps_go_whole_and_a_small_excess_is_cut_instead() -> None:
    history = agent_turn([[100], [3_000], [6_000], [40]], final=0, older=0)
    first_step = count_tokens_approximately(history[2:4])
    budget = count_tokens_approximately(history) - first_step - 60  # a step and 60 tokens
    report = compact(history, budget)
    compaction = report.compaction
    assert compaction is not None
    assert compaction.dropped_steps == 1
    assert compaction.dropped_step_tokens == first_step
    assert ids(report.kept)[:2] == ["sys", "task"]
    assert "a0" not in ids(report.kept)
    assert "rc0.0" not in ids(report.kept)  # a call never travels without its result
    assert compaction.truncated_messages == 1
    (cut,) = [
        m for i, m in zip(report.kept_indices, report.kept, strict=True) if m is not history[i]
    ]
    assert cut.id == "rc2.0"  # the largest message, not a whole step more
    assert budget - 10 <= report.tokens_after <= budget


def test_results_cleared_before_a_drop_are_given_back_when_room_allows() -> None:
    history = agent_turn([[2_000], [2_000]], final=0, older=0)
    history[2] = history[2].model_copy(update={"content": text(6_000)})  # a huge first step
    report = compact(history, 700, keep_tool_results=0)
    assert report.compaction is not None
    assert report.compaction.dropped_steps == 1
    assert report.compaction.cleared_results == 0
    assert report.kept == [history[0], history[1], history[4], history[5]]  # given back intact


def test_truncation_cuts_the_largest_message_head_and_tail_around_a_note() -> None:
    history = agent_turn([[40]], user=200, final=0, older=0)
    history[2] = history[2].model_copy(update={"content": "HEAD " + text(8_000) + " TAIL"})
    report = compact(history, 400)
    compaction = report.compaction
    assert compaction is not None
    assert compaction.truncated_messages == 1
    assert report.kept[1] is history[1]  # the task is not cut while another message can be
    cut = report.kept[2]
    assert cut.tool_calls == history[2].tool_calls  # type: ignore[attr-defined]
    head, removed, tail = CUT.fullmatch(cut.content).groups()  # type: ignore[union-attr]
    original = history[2].content
    assert isinstance(original, str)
    assert original.startswith(head)
    assert original.endswith(tail)
    assert head.startswith("HEAD ")
    assert tail.endswith(" TAIL")
    assert int(removed.replace(",", "")) == len(original) - len(head) - len(tail)
    assert 2 * len(tail) <= len(head) <= 2 * len(tail) + 2  # two thirds from the head
    assert compaction.truncated_tokens == count_tokens_approximately(
        history[2:3]
    ) - count_tokens_approximately([cut])
    assert report.tokens_after <= 400


def test_the_user_message_is_cut_last_of_all() -> None:
    history = agent_turn([[3_000]], user=9_000, final=0, older=0)
    history[2] = history[2].model_copy(update={"content": text(3_000, 5)})
    full = count_tokens_approximately(history)
    report = compact(history, full - 1_000)  # the others are enough
    assert report.kept[1] is history[1]
    assert report.kept[2] is not history[2]
    tight = compact(history, 300)  # nothing else is left to cut
    assert CUT.fullmatch(tight.kept[1].content)
    assert tight.tokens_after <= 300


def test_a_lone_huge_task_is_truncated_rather_than_lost() -> None:
    task = "START " + "middle " * 3_000 + " END"
    history = [SystemMessage("be brief", id="sys"), HumanMessage(task, id="task")]
    assert trim_turns(history, max_tokens=300) == history[:1]  # "drop", the spec
    for kept in (
        TurnTrimmer(300, on_overflow="compact").trim(history),
        trim_turns(history, max_tokens=300, on_overflow="compact"),
    ):
        assert ids(kept) == ["sys", "task"]
        content = kept[1].content
        assert isinstance(content, str)
        assert content.startswith("START middle")
        assert content.endswith("middle  END")
        assert 250 < count_tokens_approximately(kept) <= 300


#: Grapheme clusters a cut must keep whole: combining marks, flags, ZWJ
#: sequences, skin tones, Thai with its tone mark.
CLUSTERS = ["a", "Z", " ", "\n", "e\u0301", "🇫🇷", "🇯🇵", "👩\u200d👩\u200d👧", "👍🏽", "ก่", "中"]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(CLUSTERS), min_size=400, max_size=1_500),
    where=st.sampled_from(["task", "result"]),
    room=st.integers(20, 200),
)
def test_a_cut_never_splits_a_grapheme_cluster(pieces: list[str], where: str, room: int) -> None:
    content = "".join(pieces)
    history: list[BaseMessage] = [SystemMessage("s", id="sys")]
    if where == "task":
        history.append(HumanMessage(content, id="task"))
    else:
        call = {"name": "read", "args": {}, "id": "c"}
        history += [
            HumanMessage("go", id="task"),
            AIMessage("", tool_calls=[call], id="a"),
            ToolMessage(content, tool_call_id="c", id="r"),
        ]
    budget = count_tokens_approximately(history[:-1]) + room
    if budget >= count_tokens_approximately(history):
        return
    kept = compact(history, budget).kept
    cut = next(m.content for m in kept if m.id == ("task" if where == "task" else "r"))
    match = CUT.fullmatch(cut)
    assert match is not None
    head, removed, tail = match.groups()
    # The oracle: regex's \X, UAX #29 extended grapheme clusters.
    bounds = {0, *(m.end() for m in regex.finditer(r"\X", content))}
    assert content.startswith(head)
    assert content.endswith(tail)
    assert len(head) in bounds
    assert len(content) - len(tail) in bounds
    assert int(removed.replace(",", "")) == len(content) - len(head) - len(tail)


IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 200}}


def test_a_truncated_message_loses_its_images_with_a_note() -> None:
    history = [SystemMessage("s"), HumanMessage([{"type": "text", "text": text(8_000)}, IMAGE])]
    report = compact(history, 200)
    cut = report.kept[1]
    assert isinstance(cut, HumanMessage)
    assert IMAGE not in cut.content
    assert CUT.fullmatch(cut.content[0]["text"])  # type: ignore[index]
    assert cut.content[-1] == {
        "type": "text",
        "text": "[1 non-text part(s) removed to fit the context]",
    }
    result = [
        HumanMessage("look"),
        AIMessage("", tool_calls=[{"name": "shot", "args": {}, "id": "c"}]),
        ToolMessage([{"type": "text", "text": text(8_000)}, IMAGE], tool_call_id="c"),
    ]
    shot = compact(result, 200).kept[-1]
    assert isinstance(shot, ToolMessage)
    assert shot.tool_call_id == "c"
    assert "image_url" not in str(shot.content)
    assert "non-text part(s) removed to fit the context" in str(shot.content)


def test_raises_when_not_even_the_skeleton_fits() -> None:
    history = agent_turn([[100]], system=2_000)
    with pytest.raises(TurnTrimOverflowError) as raised:
        compact(history, 100)
    assert raised.value.max_tokens == 100
    assert raised.value.system_tokens == count_tokens_approximately(history[:1])
    with pytest.raises(TurnTrimOverflowError):  # the system messages alone do not fit
        compact([SystemMessage("x" * 400)], 10)
    alone = [SystemMessage("x" * 400)]
    assert TurnTrimmer(10).trim(alone) == alone  # "drop": the spec, the system messages alone


# -- a first step that opens with reasoning ---------------------------------------------------


def reasoning_turn(style: str) -> list[BaseMessage]:
    """A turn in progress whose first step opens with reasoning: Anthropic's
    native thinking, or the same as v1 blocks (``reasoning`` + ``extras.signature``)."""
    return agent_turn([[3_000], [3_000], [3_000], [3_000]], final=0, style=style, think=True)


def middleware_compacts(history: list[BaseMessage], budget: int) -> TrimReport[Any]:
    """``TurnTrimMiddleware`` (compact by default) on ``history``'s request."""
    request = ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=history[1:],  # type: ignore[arg-type]
        system_message=history[0],  # type: ignore[arg-type]
        tools=[],
    )
    sent, report = TurnTrimMiddleware(budget).trim_request(request)
    assert [sent.system_message, *sent.messages] == report.kept
    return report


@pytest.mark.parametrize("entry", ["TurnTrimmer", "TurnTrimMiddleware"])
@pytest.mark.parametrize("style", ["anthropic", "v1"])
def test_a_first_step_opening_with_reasoning_is_never_dropped(style: str, entry: str) -> None:
    history = reasoning_turn(style)
    first = history[4]
    assert opens_with_reasoning(first)
    full = count_tokens_approximately(history)
    dropped = 0
    for share in (0.8, 0.6, 0.4, 0.3, 0.2, 0.1):
        budget = int(full * share)
        if entry == "TurnTrimmer":
            report = compact(history, budget)
        else:
            report = middleware_compacts(history, budget)
        kept = {m.id: m for m in report.kept}
        assert "a0" in kept, (share, ids(report.kept))
        assert kept["a0"].content[0] == first.content[0]  # its reasoning, unchanged
        assert "a3" in kept  # the newest step
        assert report.compaction is not None
        dropped = max(dropped, report.compaction.dropped_steps)
        check_compacted(history, report)
    assert dropped == 2  # the steps between them went


# -- every entry point, every counter ---------------------------------------------------------


def test_every_counter_s_own_count_of_the_compacted_request_is_within_budget(counter: Any) -> None:
    history = agent_turn([[1_500, 300], [6_000], [200], [2_000]], user=600, style="anthropic")
    trimmer = TurnTrimmer(0, token_counter=counter)
    total = own_count(trimmer, history)
    for share in (0.9, 0.6, 0.4, 0.25, 0.15):
        budget = int(total * share)
        report = TurnTrimmer(budget, token_counter=counter, on_overflow="compact").report(history)
        assert report.compaction is not None
        assert report.tokens_after == own_count(trimmer, report.kept) <= budget
        assert report.budget_met
        check_compacted(history, report)


def run_entry(entry: str, history: list[BaseMessage], budget: int, **options: Any) -> Any:
    """What ``entry`` sends (or returns) with ``on_overflow="compact"``."""
    trimmer = TurnTrimmer(budget, on_overflow="compact", **options)
    if entry == "invoke":
        return trimmer.invoke(history)
    if entry == "ainvoke":
        return asyncio.run(trimmer.ainvoke(history))
    if entry == "trim":
        return trimmer.trim(history)
    if entry == "trim_turns":
        return trim_turns(history, max_tokens=budget, on_overflow="compact", **options)
    middleware = {"middleware": TurnTrimMiddleware, "state": TurnTrimStateMiddleware}[entry]
    request = ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=history[1:],  # type: ignore[arg-type]
        system_message=history[0],  # type: ignore[arg-type]
        tools=[],
    )
    sent, _ = middleware(budget, **options).trim_request(request)
    return [sent.system_message, *sent.messages]


@pytest.mark.parametrize(
    "counter_name", ["approximate", "per_list_1.3x"], ids=["approximate", "whole-list"]
)
def test_every_entry_point_compacts_alike(counter_name: str) -> None:
    history = agent_turn([[2_000]] * 4, style="anthropic")
    options = {"token_counter": COUNTERS[counter_name](), "keep_tool_results": 1}
    expected = TurnTrimmer(700, on_overflow="compact", **options).trim(history)
    assert ids(expected)[:2] == ["sys", "task"]
    for entry in ("invoke", "ainvoke", "trim", "trim_turns", "middleware", "state"):
        assert run_entry(entry, history, 700, **options) == expected, entry


@tool
def search(query: str) -> str:
    """Search the documents."""
    return query


def test_the_middleware_compacts_by_default_and_counts_the_tools() -> None:
    history = diagnostics()
    request = ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=history[1:],  # type: ignore[arg-type]
        system_message=history[0],  # type: ignore[arg-type]
        tools=[search],
    )
    middleware = TurnTrimMiddleware(1_500)
    sent, report = middleware.trim_request(request)
    assert report.compaction is not None
    assert sent.messages[0] is history[1]
    assert report.tokens_after == count_tokens_approximately(report.kept, tools=[search]) <= 1_500
    assert report.tool_tokens == middleware.trimmer.counter.count_tools([search]) > 0
    assert all(m is h for m, h in zip(request.messages, history[1:], strict=True))  # unchanged


def test_the_report_and_its_summary_carry_the_figures() -> None:
    history = agent_turn([[40], [6_000], [40]])
    report = compact(history, 800, keep_tool_results=1)
    compaction = report.compaction
    assert compaction is not None
    summary = report.summary()
    figures = compaction.figures()
    assert figures["compacted_messages"] == len(compaction.changed) > 0
    assert summary == {**summary, **figures}
    assert summary["tokens_after"] == report.tokens_after
    assert summary["messages_after"] == len(report.kept)
    assert summary["cleared_tokens"] == compaction.cleared_tokens > 1_000
    assert summary["dropped_turns"] == report.dropped_turns == 1
    assert report.kept_turns == 1
    assert report.dropped == history[1:3]  # the older turn, the caller's objects
    assert report.changed
    assert report.budget_met


def test_chat_message_roles_compact_like_their_classes() -> None:
    history: list[BaseMessage] = [
        ChatMessage(role="developer", content="Be brief.", id="sys"),
        ChatMessage(role="user", content="Again, shorter " + text(400), id="task"),
        ChatMessage(role="assistant", content=text(2_000, 1), id="a1"),
        ChatMessage(role="assistant", content=text(2_500, 2), id="a2"),
    ]
    report = compact(history, 700)
    assert ids(report.kept) == ["sys", "task", "a2"]  # the older assistant step went whole
    assert report.kept[1] is history[1]  # the task is not cut first
    assert report.compaction is not None
    assert report.compaction.dropped_steps == 1
    assert report.tokens_after == count_tokens_approximately(report.kept) <= 700


# -- the work it does -------------------------------------------------------------------------


class Recorded:
    """Counts content lengths, recording how many messages it counts."""

    overhead = 0

    def __init__(self) -> None:
        self.counted = 0

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        self.counted += len(messages)
        return [len(str(m.content)) // 4 for m in messages]


@pytest.mark.parametrize("keep", [0, 3])
def test_compaction_counts_a_number_of_messages_linear_in_the_steps(keep: int) -> None:
    def counted(steps: int) -> int:
        history = agent_turn([[300, 300]] * steps, final=0)
        recorded = Recorded()
        report = TurnTrimmer(
            3_000, token_counter=recorded, on_overflow="compact", keep_tool_results=keep
        ).report(history)
        assert report.compaction is not None
        return recorded.counted

    small, large = counted(100), counted(800)
    assert large <= 8.5 * small
    assert large <= 3 * (1 + 800 * 3 + 4)  # a few counts per message at most


def test_a_whole_list_counter_counts_a_bounded_number_of_requests() -> None:
    calls = []

    def whole(messages: list[BaseMessage]) -> int:
        calls.append(len(messages))
        return scaled(messages)

    for steps in (20, 200, 2_000):
        calls.clear()
        history = agent_turn([[300, 300]] * steps, final=0, older=3)
        report = TurnTrimmer(3_000, token_counter=per_list(whole), on_overflow="compact").report(
            history
        )
        assert report.compaction is not None
        assert report.tokens_after == scaled([*report.kept]) <= 3_000
        assert len(calls) <= 12, (steps, len(calls))


def cleared_then_dropped() -> tuple[list[BaseMessage], int, Callable[[list[BaseMessage]], int]]:
    """Clearing the oldest result lands far under the room, still over budget
    by the counter (1.3x): the oldest step must go too."""
    calls = [{"name": "f", "args": {}, "id": "c0"}], [{"name": "f", "args": {}, "id": "c1"}]
    history = [
        HumanMessage("task", id="task"),
        AIMessage("", tool_calls=calls[0], id="a0"),
        ToolMessage("x" * 6_000, tool_call_id="c0", id="r0"),
        AIMessage("", tool_calls=calls[1], id="a1"),
        ToolMessage("y" * 6_000, tool_call_id="c1", id="r1"),
    ]
    return history, scaled([history[0], *history[3:]]), scaled


def cut_at_twice() -> tuple[list[BaseMessage], int, Callable[[list[BaseMessage]], int]]:
    """A counter at twice the estimate, no turn fitting: the room must be
    scaled by what the counter measured, not the plan's unmeasured ratio."""

    def double(messages: list[BaseMessage]) -> int:
        return 2 * count_tokens_approximately(messages)

    return [HumanMessage("", id="task"), AIMessage("x" * 2_000, id="final")], 100, double


@pytest.mark.parametrize("case", [cleared_then_dropped, cut_at_twice])
def test_a_whole_list_counter_compacts_where_the_same_counts_per_message_do(
    case: Callable[[], tuple[list[BaseMessage], int, Callable[[list[BaseMessage]], int]]],
) -> None:
    history, budget, whole = case()
    options: dict[str, Any] = {"on_overflow": "compact", "keep_tool_results": 1}
    additive = TurnTrimmer(budget, token_counter=per_message(lambda m: whole([m])), **options)
    expected = additive.report(history)
    assert expected.tokens_after <= budget
    report = TurnTrimmer(budget, token_counter=per_list(whole), **options).report(history)
    assert ids(report.kept) == ids(expected.kept)
    assert report.tokens_after == whole(report.kept) <= budget


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(history=long_turns(), data=st.data(), scale=st.sampled_from([0.5, 1.0, 1.3, 2.0]))
def test_a_whole_list_counter_compacts_wherever_the_same_counts_per_message_do(
    history: list[BaseMessage], data: st.DataObject, scale: float
) -> None:
    def one(message: BaseMessage) -> int:
        return math.ceil(scale * count_tokens_approximately([message]))

    def whole(messages: list[BaseMessage]) -> int:  # never more than the sum of ``one``
        return math.ceil(scale * count_tokens_approximately(messages))

    total = whole(history)
    budget = data.draw(st.integers(0, total) | st.integers(total // 4, total), label="budget")
    options: dict[str, Any] = {"on_overflow": "compact", "keep_tool_results": 1}
    try:
        TurnTrimmer(budget, token_counter=per_message(one), **options).report(history)
    except TurnTrimOverflowError:
        return
    report = TurnTrimmer(budget, token_counter=per_list(whole), **options).report(history)
    assert report.tokens_after == own_count(
        TurnTrimmer(0, token_counter=per_list(whole)), report.kept
    )
    assert report.tokens_after <= budget


def test_the_caller_s_messages_are_never_changed() -> None:
    history = agent_turn([[3_000]] * 5, style="anthropic", think=True)
    snapshot = [m.model_copy(deep=True) for m in history]
    for budget in (3_000, 1_500, 600):
        compact(history, budget, keep_tool_results=1)
    assert [vars(m) for m in history] == [vars(m) for m in snapshot]
