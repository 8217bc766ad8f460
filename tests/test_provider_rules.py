"""Requests every provider accepts: real shapes, every entry point, budgets down to the skeleton.

Each request is checked by ``tests/providers.py``: as message objects against
the history (R1-R7), and as the payloads langchain-openai (Chat Completions,
Responses) and langchain-anthropic (with and without extended thinking)
build from it (P1-P6).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim import (
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    TurnTrimStateMiddleware,
    per_list,
    trim_turns,
    trim_update,
)
from tests.helpers import arun
from tests.providers import (
    ANTHROPIC,
    OPENAI,
    PROVIDERS,
    ProviderRuleError,
    check_payloads,
    check_request,
)

LONG = "The committee reviewed every figure in the quarterly statement twice. "


def words(n: int, seed: str = "") -> str:
    return seed + (LONG * (n // len(LONG) + 1))[:n]


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def thinking(text: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def anthropic_reply(
    ident: str, text: str, calls: Sequence[tuple[str, str]], *, think: bool
) -> AIMessage:
    blocks: list[Any] = [thinking(f"plan {ident}", f"sig-{ident}==")] if think else []
    blocks.append({"type": "text", "text": text})
    blocks += [use(i, name, q=i) for i, name in calls]
    return AIMessage(
        blocks,
        tool_calls=[call(i, name, q=i) for i, name in calls],
        id=ident,
        response_metadata={"model_provider": "anthropic"},
    )


def results(ident: str, *pairs: tuple[str, str], text: str | None = None) -> HumanMessage:
    blocks: list[Any] = [
        {"type": "tool_result", "tool_use_id": i, "content": body} for i, body in pairs
    ]
    if text is not None:
        blocks.append({"type": "text", "text": text})
    return HumanMessage(blocks, id=ident)


@dataclass
class Fixture:
    name: str
    history: list[BaseMessage]
    thinking: bool = False  # from a model with extended thinking on
    #: The payloads built from it: every provider's, unless it is in one
    #: provider's own format (Anthropic's tool_result blocks, Responses'
    #: reasoning items) or langchain-anthropic cannot format it (ChatMessage).
    providers: tuple[str, ...] = PROVIDERS


def anthropic_thinking() -> Fixture:
    """Claude with extended thinking: an answered turn, then a turn in progress
    with parallel tool_result blocks (and the user's text beside them)."""
    return Fixture(
        "anthropic-thinking",
        [
            SystemMessage("You are a research assistant.", id="sys"),
            HumanMessage("What is the weather in Paris?", id="u0"),
            AIMessage(
                [thinking("easy", "sig-a0=="), {"type": "text", "text": "Sunny, 21 C."}], id="a0"
            ),
            HumanMessage("Compare the weather and the stock " + words(300), id="u1"),
            anthropic_reply(
                "a1",
                words(800, "I will look both up. "),
                [("w1", "weather"), ("s1", "stock")],
                think=True,
            ),
            results(
                "r1",
                ("w1", words(3000, "WEATHER ")),
                ("s1", words(3000, "STOCK ")),
                text="Also mind the holidays.",
            ),
            anthropic_reply("a2", "Now the news.", [("n1", "news")], think=False),
            results("r2", ("n1", words(2000, "NEWS "))),
        ],
        thinking=True,
        providers=ANTHROPIC,
    )


def openai_parallel() -> Fixture:
    """OpenAI Chat: parallel calls answered by tool messages, two steps."""
    return Fixture(
        "openai-parallel",
        [
            SystemMessage("You are an airline agent.", id="sys"),
            HumanMessage("Book me on the cheapest flight " + words(200), id="u0"),
            AIMessage(
                "",
                id="a0",
                tool_calls=[call("c1", "search", day="mon"), call("c2", "search", day="tue")],
            ),
            ToolMessage(words(2500, "MONDAY "), tool_call_id="c1", name="search", id="t1"),
            ToolMessage(words(2500, "TUESDAY "), tool_call_id="c2", name="search", id="t2"),
            AIMessage("", id="a1", tool_calls=[call("c3", "book", flight="AF1")]),
            ToolMessage(words(1500, "BOOKED "), tool_call_id="c3", name="book", id="t3"),
            AIMessage(words(600, "Done. "), id="a2"),
            HumanMessage("And a hotel? " + words(100), id="u1"),
            AIMessage("", id="a3", tool_calls=[call("c4", "hotels", city="Paris")]),
            ToolMessage(words(3000, "HOTELS "), tool_call_id="c4", name="hotels", id="t4"),
        ],
    )


def responses_reasoning() -> Fixture:
    """OpenAI Responses: reasoning items before the text and the calls."""

    def reasoning(ident: str) -> dict[str, Any]:
        return {
            "type": "reasoning",
            "id": f"rs_{ident}",
            "summary": [{"type": "summary_text", "text": f"thinking about {ident}"}],
            "encrypted_content": f"enc-{ident}",
        }

    meta = {"model_provider": "openai"}
    return Fixture(
        "responses-reasoning",
        [
            SystemMessage("You are a coding agent.", id="sys"),
            HumanMessage("Fix the failing test " + words(300), id="u0"),
            AIMessage(
                [reasoning("a0"), {"type": "text", "text": words(900, "Reading. ")}],
                tool_calls=[call("fc1", "read", path="a.py")],
                id="a0",
                response_metadata=meta,
            ),
            ToolMessage(words(4000, "SOURCE "), tool_call_id="fc1", name="read", id="t1"),
            AIMessage(
                [reasoning("a1")],
                tool_calls=[call("fc2", "run", cmd="pytest")],
                id="a1",
                response_metadata=meta,
            ),
            ToolMessage(words(3000, "PYTEST "), tool_call_id="fc2", name="run", id="t2"),
        ],
        providers=OPENAI,
    )


def aborted_run() -> Fixture:
    """A run a tool exception stopped: a call without its result, then the user again."""
    return Fixture(
        "aborted-run",
        [
            SystemMessage("You are a helpful agent.", id="sys"),
            HumanMessage("Cancel my order " + words(300), id="u0"),
            AIMessage(
                "Cancelling it now.",
                id="a0",
                tool_calls=[call("x1", "cancel", order="7"), call("x2", "notify", order="7")],
            ),
            ToolMessage("notified", tool_call_id="x2", name="notify", id="t2"),
            HumanMessage("Did it work? " + words(200), id="u1"),
            AIMessage("", id="a1", tool_calls=[call("x3", "status", order="7")]),
            ToolMessage(words(2500, "STATUS "), tool_call_id="x3", name="status", id="t3"),
            AIMessage("", id="a2", tool_calls=[call("x4", "refund", order="7")]),
        ],
    )


def chat_roles() -> Fixture:
    """Roles given as ChatMessage roles (the developer role is a system message)."""
    return Fixture(
        "chat-roles",
        [
            ChatMessage(role="developer", content="Be brief.", id="sys"),
            ChatMessage(role="user", content="Summarise " + words(300), id="u0"),
            ChatMessage(role="assistant", content=words(1500, "Old answer. "), id="a0"),
            ChatMessage(role="user", content="Again, shorter " + words(400), id="u1"),
            ChatMessage(role="assistant", content=words(2000, "Draft one. "), id="a1"),
            ChatMessage(role="assistant", content=words(2500, "Draft two. "), id="a2"),
        ],
        providers=OPENAI,
    )


FIXTURES = [anthropic_thinking, openai_parallel, responses_reasoning, aborted_run, chat_roles]
SHARES = [1.2, 0.7, 0.5, 0.3, 0.15, 0.05, 0.0]


def scaled(messages: list[BaseMessage]) -> int:
    return round(count_tokens_approximately(messages) * 1.3) + 3


COUNTERS: dict[str, Callable[[], Any]] = {
    "approximate": lambda: None,
    "whole-list": lambda: per_list(scaled),
}


class Handler:
    """A model call that keeps what it was sent."""

    def __init__(self) -> None:
        self.sent: list[list[BaseMessage]] = []

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        system = [request.system_message] if request.system_message else []
        self.sent.append([*system, *request.messages])
        return ModelResponse(result=[AIMessage("ok")])

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self(request)


def request_of(history: list[BaseMessage]) -> ModelRequest[Any]:
    system = history[0] if isinstance(history[0], SystemMessage) else None
    return ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=history[1:] if system is not None else history,  # type: ignore[arg-type]
        system_message=system,
        tools=[],
    )


def sent_by(entry: str, history: list[BaseMessage], options: dict[str, Any]) -> list[BaseMessage]:
    """What the entry point sends (or returns to be sent) for ``history``."""
    if entry == "trim":
        return TurnTrimmer(**options).trim(history)
    if entry == "ainvoke":
        return arun(TurnTrimmer(**options).ainvoke(history))
    if entry == "trim_turns":
        return trim_turns(
            history,
            max_tokens=options["max_tokens"],
            token_counter=options.get("token_counter") or count_tokens_approximately,
            on_overflow=options.get("on_overflow", "drop"),
        )
    handler = Handler()
    if entry == "middleware":
        TurnTrimMiddleware(**options).wrap_model_call(request_of(history), handler)
    elif entry == "amiddleware":
        arun(TurnTrimMiddleware(**options).awrap_model_call(request_of(history), handler.acall))
    else:  # the state mode: delete what the state update deletes, then the call
        middleware = TurnTrimStateMiddleware(**options)
        update = middleware.state_update(history) or {"messages": []}
        gone = {m.id for m in update["messages"]}
        assert gone <= {m.id for m in history}
        middleware.wrap_model_call(request_of([m for m in history if m.id not in gone]), handler)
    (sent,) = handler.sent
    return sent


ENTRIES = ["trim", "ainvoke", "trim_turns", "middleware", "amiddleware", "state"]


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("on_overflow", ["drop", "compact"])
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.__name__)
def test_every_entry_point_sends_what_every_provider_accepts(
    fixture: Callable[[], Fixture], on_overflow: str, counter: str
) -> None:
    case = fixture()
    pristine = copy.deepcopy(case.history)
    full = count_tokens_approximately(case.history)
    checked = 0
    for share in SHARES:
        options: dict[str, Any] = {"max_tokens": int(full * share), "on_overflow": on_overflow}
        made = COUNTERS[counter]()
        if made is not None:
            options["token_counter"] = made
        outcomes: list[tuple[str, object]] = []
        for entry in ENTRIES:
            if entry == "trim_turns" and counter != "approximate":
                continue
            try:
                sent = sent_by(entry, case.history, options)
            except TurnTrimOverflowError:
                outcomes.append((entry, None))
                continue
            try:
                check_request(sent, case.history, thinking=case.thinking)
                check_payloads(sent, thinking=case.thinking, providers=case.providers)
            except ProviderRuleError as error:
                raise AssertionError(f"{case.name}, {entry}, {options}: {error}") from error
            outcomes.append((entry, [(m.id, m.content) for m in sent]))
            checked += 1
        # Every entry point sends the same request.
        assert len({repr(o) for _, o in outcomes}) == 1, (case.name, options, outcomes)
    assert case.history == pristine  # never mutated
    assert checked >= len(ENTRIES)


# -- reasoning, parallel results, keep_tool_results -----------------------------------------


def compact(history: list[BaseMessage], budget: int, **options: Any) -> Any:
    return TurnTrimmer(max_tokens=budget, on_overflow="compact", **options).trim_with_report(
        history
    )


def test_truncation_keeps_thinking_and_tool_use_blocks_unchanged() -> None:
    big = anthropic_reply("a1", words(20_000), [("w1", "weather")], think=True)
    history = [
        HumanMessage("go", id="u0"),
        big,
        results("r1", ("w1", "sunny")),
    ]
    report = compact(history, 400)
    (cut,) = [m for m in report.kept if m.id == "a1"]
    assert cut.content[0] == big.content[0]  # the thinking block, signature and all
    assert cut.content[2] == big.content[2]  # the tool_use block
    assert len(cut.content[1]["text"]) < 20_000
    assert cut.tool_calls == big.tool_calls
    check_request(report.kept, history, thinking=True)


def test_a_responses_reasoning_item_survives_truncation() -> None:
    case = responses_reasoning()
    report = compact(case.history, 600)
    assert report.compaction is not None
    for message in report.kept:
        if message.id in ("a0", "a1"):
            original = next(m for m in case.history if m.id == message.id)
            assert message.content[0] == original.content[0]
    check_payloads(report.kept, providers=OPENAI)


def test_parallel_results_are_cut_each_on_its_own() -> None:
    history = [
        HumanMessage("compare", id="u0"),
        anthropic_reply("a1", "both", [("w1", "weather"), ("s1", "stock")], think=False),
        results(
            "r1",
            ("w1", words(6000, "WEATHER ")),
            ("s1", words(6000, "STOCK ")),
            text="and mind the holidays",
        ),
    ]
    report = compact(history, 900)
    (cut,) = [m for m in report.kept if m.id == "r1"]
    weather, stock, note = cut.content
    assert weather["tool_use_id"] == "w1"
    assert stock["tool_use_id"] == "s1"
    assert "STOCK" not in weather["content"]
    assert "WEATHER" not in stock["content"]
    assert note == {"type": "text", "text": "and mind the holidays"}
    check_request(report.kept, history)


def test_clearing_parallel_results_names_each_tool_and_keeps_the_users_text() -> None:
    history = [
        HumanMessage("compare", id="u0"),
        anthropic_reply("a1", "both", [("w1", "weather"), ("s1", "stock")], think=False),
        results(
            "r1",
            ("w1", words(6000, "WEATHER ")),
            ("s1", words(6000, "STOCK ")),
            text="and mind the holidays",
        ),
        anthropic_reply("a2", "more", [("n1", "news")], think=False),
        results("r2", ("n1", "quiet day")),
    ]
    report = compact(history, 700, keep_tool_results=1)
    (cleared,) = [m for m in report.kept if m.id == "r1"]
    weather, stock, note = cleared.content
    assert weather["content"].startswith("[result of weather cleared to fit the context: ")
    assert stock["content"].startswith("[result of stock cleared to fit the context: ")
    assert note["text"] == "and mind the holidays"
    assert report.compaction.cleared_results == 2
    assert [m for m in report.kept if m.id == "r2"] == [history[4]]


@pytest.mark.parametrize("k", [0, 1, 2, 3, 10])
def test_keep_tool_results_keeps_the_newest_min_k_results(k: int) -> None:
    history = [
        HumanMessage("go", id="u"),
        AIMessage("", id="a0", tool_calls=[call("c1", "f"), call("c2", "g")]),
        ToolMessage(words(3000, "ONE "), tool_call_id="c1", name="f", id="t1"),
        ToolMessage(words(3000, "TWO "), tool_call_id="c2", name="g", id="t2"),
        AIMessage("", id="a1", tool_calls=[call("c3", "h")]),
        ToolMessage(words(3000, "THREE "), tool_call_id="c3", name="h", id="t3"),
    ]
    report = compact(history, 400, keep_tool_results=k)
    kept = {m.id: m for m in report.kept}
    protected = ["t3", "t2", "t1"][: min(k, 3)]
    for ident in protected:
        assert ident not in kept or not str(kept[ident].content).startswith("[result of")
    assert report.compaction.cleared_results <= 3 - min(k, 3)


def test_a_first_step_that_opens_with_thinking_is_never_dropped() -> None:
    case = anthropic_thinking()
    history = case.history[3:]  # the turn in progress alone
    for budget in (4000, 2500, 1500, 900):
        report = compact(history, budget)
        ids = [m.id for m in report.kept]
        assert "a1" in ids, (budget, ids)
        assert "a2" in ids, (budget, ids)
        check_request(report.kept, history, thinking=True)
        check_payloads(report.kept, thinking=True, providers=ANTHROPIC)


# -- unanswered calls --------------------------------------------------------------------


def test_an_unanswered_call_is_left_out_of_the_request_never_answered() -> None:
    case = aborted_run()
    report = TurnTrimmer(max_tokens=100_000).trim_with_report(case.history)
    sent = {m.id: m for m in report.kept}
    assert [c["id"] for c in sent["a0"].tool_calls] == ["x2"]  # x1 had no result
    assert sent["a0"].text == "Cancelling it now."  # its text stays
    assert "a2" not in sent  # nothing but the unanswered call
    assert not any(
        isinstance(m, ToolMessage) and m.tool_call_id in ("x1", "x4") for m in report.kept
    )
    assert report.unanswered_calls == 2
    assert report.summary()["unanswered_calls"] == 2
    assert report.tokens_after == count_tokens_approximately(report.kept)
    assert report.kept_indices == (0, 1, 2, 3, 4, 5, 6)
    assert report.dropped == []  # left out of what is sent, not dropped
    check_request(report.kept, case.history)
    check_payloads(report.kept)


def test_the_state_keeps_an_unanswered_call() -> None:
    case = aborted_run()
    assert trim_update(case.history, TurnTrimmer(max_tokens=100_000)) == {"messages": []}
    assert TurnTrimStateMiddleware(max_tokens=100_000).state_update(case.history) is None


def test_a_whole_list_counter_counts_the_request_as_sent() -> None:
    case = aborted_run()
    counter = per_list(scaled)
    report = TurnTrimmer(max_tokens=100_000, token_counter=counter).trim_with_report(case.history)
    assert report.tokens_after == scaled(report.kept)


def test_a_warm_trimmer_finds_a_call_answered_later() -> None:
    trimmer = TurnTrimmer(max_tokens=100_000)
    history = [HumanMessage("go", id="u"), AIMessage("", id="a", tool_calls=[call("c", "f")])]
    assert [m.id for m in trimmer.trim(history)] == ["u"]
    history.append(ToolMessage("done", tool_call_id="c", id="t"))
    assert [m.id for m in trimmer.trim(history)] == ["u", "a", "t"]
    assert trimmer.trim(history)[1] is history[1]


@pytest.mark.parametrize("ident", [5, ["x"]], ids=["int", "unhashable"])
def test_a_call_id_that_is_not_text_is_answered_by_its_text(ident: object) -> None:
    # Built without validation, as a message reassigned in place may be.
    reply = AIMessage.model_construct(
        content="", id="a", tool_calls=[{"name": "f", "args": {}, "id": ident, "type": "tool_call"}]
    )
    history = [HumanMessage("go", id="u"), reply, ToolMessage("ok", tool_call_id=str(ident))]
    for cache_size in (0, 128):
        trimmer = TurnTrimmer(max_tokens=100_000, cache_size=cache_size)
        for _ in range(3):  # cold, noted, remembered
            assert trimmer.trim(history) == history
    unanswered = [*history[:2], ToolMessage("ok", tool_call_id="other", id="t")]
    assert [m.id for m in TurnTrimmer(max_tokens=100_000).trim(unanswered)] == ["u", "t"]


# -- ChatMessage roles ---------------------------------------------------------------------


def test_a_chatmessage_user_task_is_kept_first_and_assistant_steps_drop() -> None:
    case = chat_roles()
    history = case.history[3:]  # one turn: the user, then two long assistant messages
    report = compact(history, 700)
    ids = [m.id for m in report.kept]
    assert ids[0] == "u1"
    assert report.kept[0].content == history[0].content  # the task is not cut first
    assert ids == ["u1", "a2"]  # the older assistant step went whole
    assert report.compaction.dropped_steps == 1
    check_request(report.kept, history)


def naive_unanswered(history: Sequence[BaseMessage]) -> dict[str, set[str]]:
    """By message id: the calls with no result before the next user or
    assistant message (the rule, read directly)."""
    found: dict[str, set[str]] = {}
    for i, message in enumerate(history):
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        ids = {str(c["id"]) for c in message.tool_calls}
        for later in history[i + 1 :]:
            if not isinstance(later, ToolMessage):
                break
            ids.discard(later.tool_call_id)
        if ids:
            found[str(message.id)] = ids
    return found


@st.composite
def histories_with_gaps(draw: st.DrawFn) -> list[BaseMessage]:
    """User turns of steps whose calls are answered in any order, some not at all."""
    history: list[BaseMessage] = []
    for turn in range(draw(st.integers(1, 4))):
        history.append(HumanMessage(f"task {turn}", id=f"u{turn}"))
        for step in range(draw(st.integers(0, 3))):
            ids = [f"c{turn}.{step}.{k}" for k in range(draw(st.integers(0, 3)))]
            history.append(
                AIMessage(
                    draw(st.sampled_from(["", f"step {step}"])),
                    id=f"a{turn}.{step}",
                    tool_calls=[call(i, "f") for i in ids],
                )
            )
            answered = draw(st.permutations(ids))[: draw(st.integers(0, len(ids)))]
            history += [ToolMessage("ok", tool_call_id=i, id=f"t{i}") for i in answered]
    return history


@settings(max_examples=200)
@given(histories_with_gaps(), st.data())
def test_unanswered_calls_match_the_rule_cold_and_warm(
    history: list[BaseMessage], data: st.DataObject
) -> None:
    expected = naive_unanswered(history)
    cold = TurnTrimmer(max_tokens=100_000, cache_size=0).trim(history)
    warm_trimmer = TurnTrimmer(max_tokens=100_000)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(history)), max_size=4)))
    for cut in cuts:  # the memo grows the history chunk by chunk
        warm_trimmer.trim(history[:cut])
    warm_trimmer.trim(history)
    warm = warm_trimmer.trim(history)
    for sent in (cold, warm):
        check_request(sent, history)
        by_id = {m.id: m for m in sent}
        for message in history:
            if not isinstance(message, AIMessage):
                continue
            missing = expected.get(str(message.id), set())
            kept = by_id.get(message.id)
            calls = {c["id"] for c in message.tool_calls} - missing
            if kept is None:
                assert not calls, message.id  # left out only when nothing else remains
                assert not message.text
            else:
                assert isinstance(kept, AIMessage)
                assert {c["id"] for c in kept.tool_calls} == calls
