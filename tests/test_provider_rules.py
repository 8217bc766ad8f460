"""Requests every provider accepts: real shapes, every entry point, budgets down to nothing.

Each request is checked by ``tests/providers.py``: as message objects against
the history (R1-R7), and as the payloads langchain-openai (Chat Completions,
Responses) and langchain-anthropic (with and without extended thinking)
build from it (P1-P6). The shapes are the integrations' own: Anthropic's
native blocks, LangChain's v1 translation of them (``output_version="v1"``),
and the Responses items langchain-openai makes from an API response.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
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
from langchain_openai.chat_models.base import _construct_lc_result_from_responses_api
from openai.types.responses import Response

from langchain_turntrim import (
    TrimReport,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimOverflowError,
    TurnTrimStateMiddleware,
    per_list,
    trim_turns,
)
from tests.providers import (
    ANTHROPIC,
    OPENAI,
    PROVIDERS,
    ProviderRuleError,
    call_ids,
    check_payloads,
    check_request,
)

LONG = "The committee reviewed every figure in the quarterly statement twice. "


def words(n: int, seed: str = "") -> str:
    return seed + (LONG * (n // len(LONG) + 1))[:n]


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def anthropic_reply(
    ident: str, text: str, calls: Sequence[tuple[str, str]], *, think: bool
) -> AIMessage:
    """An assistant message as langchain-anthropic returns it (thinking on or off)."""
    blocks: list[Any] = []
    if think:
        blocks.append({"type": "thinking", "thinking": f"plan {ident}", "signature": f"s{ident}=="})
    blocks.append({"type": "text", "text": text})
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": {"q": i}} for i, n in calls]
    return AIMessage(
        blocks,
        tool_calls=[call(i, name, q=i) for i, name in calls],
        id=ident,
        response_metadata={"model_provider": "anthropic"},
    )


def as_v1(message: AIMessage) -> AIMessage:
    """``message`` as ``ChatAnthropic(output_version="v1")`` returns it:
    ``reasoning`` blocks with ``extras.signature``, ``tool_call`` blocks."""
    return message.model_copy(
        update={
            "content": message.content_blocks,
            "response_metadata": {**message.response_metadata, "output_version": "v1"},
        }
    )


def results(ident: str, *pairs: tuple[str, str], text: str | None = None) -> HumanMessage:
    """Anthropic's parallel results: ``tool_result`` blocks of one user message."""
    blocks: list[Any] = [
        {"type": "tool_result", "tool_use_id": i, "content": body} for i, body in pairs
    ]
    if text is not None:
        blocks.append({"type": "text", "text": text})
    return HumanMessage(blocks, id=ident)


def responses_reply(ident: str, *items: dict[str, Any]) -> AIMessage:
    """What ``ChatOpenAI(output_version="responses/v1")`` makes of a Responses API
    answer of ``items`` (reasoning, function calls, a message)."""
    response = Response.model_validate(
        {
            "id": ident,
            "created_at": 0,
            "model": "gpt-5",
            "object": "response",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": list(items),
        }
    )
    result = _construct_lc_result_from_responses_api(response, output_version="responses/v1")
    return result.generations[0].message  # type: ignore[return-value]


def reasoning(ident: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{ident}", "summary": []}


def function_call(call_id: str, name: str) -> dict[str, Any]:
    arguments = f'{{"path": "{call_id}.py"}}'
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def said(ident: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{ident}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


@dataclass
class Case:
    name: str
    history: list[BaseMessage]
    thinking: bool = False  # from a model with extended thinking on
    #: The payloads built from it: every provider's, unless it is in one
    #: provider's own format or an integration cannot format it.
    providers: tuple[str, ...] = PROVIDERS


def anthropic_thinking(*, v1: bool = False) -> Case:
    """Claude with extended thinking: an answered turn, then a turn in progress
    with parallel results (and the user's text beside them); ``v1``: its
    replies in LangChain's v1 blocks, results as tool messages."""
    replies = [
        AIMessage(
            [
                {"type": "thinking", "thinking": "easy", "signature": "sa0=="},
                {"type": "text", "text": "Sunny, 21 C."},
            ],
            id="a0",
            response_metadata={"model_provider": "anthropic"},
        ),
        anthropic_reply(
            "a1", words(800, "Looking both up. "), [("w1", "weather"), ("s1", "stock")], think=True
        ),
        anthropic_reply("a2", "Now the news.", [("n1", "news")], think=False),
    ]
    first: list[BaseMessage] = [
        results(
            "r1",
            ("w1", words(3000, "WEATHER ")),
            ("s1", words(3000, "STOCK ")),
            text="Mind the holidays.",
        )
    ]
    second: list[BaseMessage] = [results("r2", ("n1", words(2000, "NEWS ")))]
    if v1:
        replies = [as_v1(r) for r in replies]
        first = [
            ToolMessage(words(3000, "WEATHER "), tool_call_id="w1", name="weather", id="r1w"),
            ToolMessage(words(3000, "STOCK "), tool_call_id="s1", name="stock", id="r1s"),
        ]
        second = [ToolMessage(words(2000, "NEWS "), tool_call_id="n1", name="news", id="r2")]
    history = [
        SystemMessage("You are a research assistant.", id="sys"),
        HumanMessage("What is the weather in Paris?", id="u0"),
        replies[0],
        HumanMessage("Compare the weather and the stock " + words(300), id="u1"),
        replies[1],
        *first,
        replies[2],
        *second,
    ]
    return Case("anthropic-v1" if v1 else "anthropic-thinking", history, True, ANTHROPIC)


def openai_parallel() -> Case:
    """OpenAI Chat: parallel calls answered by tool messages, two turns."""
    return Case(
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


def responses_reasoning() -> Case:
    """OpenAI Responses: reasoning items before parallel calls and a message."""
    return Case(
        "responses-reasoning",
        [
            SystemMessage("You are a coding agent.", id="sys"),
            HumanMessage("Fix the failing test " + words(300), id="u0"),
            responses_reply(
                "resp_a0",
                reasoning("a0"),
                said("a0", words(900, "Reading. ")),
                function_call("fc1", "read"),
            ),
            ToolMessage(words(4000, "SOURCE "), tool_call_id="fc1", name="read", id="t1"),
            responses_reply(
                "resp_a1",
                reasoning("a1"),
                function_call("fc2", "run"),
                reasoning("a1b"),
                function_call("fc3", "run"),
            ),
            ToolMessage(words(3000, "PYTEST "), tool_call_id="fc2", name="run", id="t2"),
            ToolMessage(words(1000, "LINT "), tool_call_id="fc3", name="run", id="t3"),
            responses_reply("resp_a2", reasoning("a2"), said("a2", words(500, "Fixed. "))),
        ],
        providers=OPENAI,
    )


def aborted_run() -> Case:
    """A run a tool exception stopped: calls without results, then the user again."""
    return Case(
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


def aborted_responses() -> Case:
    """Responses: a reasoning item before each of two calls, one never answered,
    and a newest reply that is nothing but reasoning and an unanswered call."""
    return Case(
        "aborted-responses",
        [
            SystemMessage("You are a coding agent.", id="sys"),
            HumanMessage("Run the tests " + words(300), id="u0"),
            responses_reply(
                "resp_a0",
                reasoning("a0"),
                function_call("f1", "run"),
                reasoning("a0b"),
                function_call("f2", "lint"),
            ),
            ToolMessage(words(2000, "PASSED "), tool_call_id="f1", name="run", id="t1"),
            HumanMessage("And the docs? " + words(100), id="u1"),
            responses_reply("resp_a1", reasoning("a1"), function_call("f3", "build")),
        ],
        providers=OPENAI,
    )


def aborted_v1() -> Case:
    """v1 blocks (``ChatAnthropic(output_version="v1")``): a reply whose second
    parallel call was never answered, then one whose only call was not."""
    history = [
        SystemMessage("You are a helpful agent.", id="sys"),
        HumanMessage("Check both " + words(300), id="u0"),
        as_v1(anthropic_reply("a0", "Checking.", [("k1", "ping"), ("k2", "trace")], think=True)),
        ToolMessage(words(2000, "PONG "), tool_call_id="k1", name="ping", id="t1"),
        HumanMessage("Again? " + words(100), id="u1"),
        as_v1(anthropic_reply("a1", "", [("k3", "ping")], think=True)),
    ]
    return Case("aborted-v1", history, providers=ANTHROPIC)


def chat_roles() -> Case:
    """Roles given as ChatMessage roles (the developer role is a system message)."""
    return Case(
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


CASES: list[Callable[[], Case]] = [
    anthropic_thinking,
    lambda: anthropic_thinking(v1=True),
    openai_parallel,
    responses_reasoning,
    aborted_run,
    aborted_responses,
    aborted_v1,
    chat_roles,
]
SHARES = [1.2, 0.7, 0.5, 0.3, 0.15, 0.05, 0.0]


def scaled(messages: list[BaseMessage]) -> int:
    return math.ceil(count_tokens_approximately(messages) * 1.3) + 3


COUNTERS: dict[str, Callable[[], Any]] = {
    "approximate": lambda: "approximate",
    "whole-list": lambda: per_list(scaled),
}


def request_of(history: list[BaseMessage], tools: Sequence[Any] = ()) -> ModelRequest[Any]:
    system = history[0] if isinstance(history[0], SystemMessage) else None
    return ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=history[1:] if system is not None else history,  # type: ignore[arg-type]
        system_message=system,
        tools=list(tools),
    )


def sent_by(entry: str, history: list[BaseMessage], options: dict[str, Any]) -> list[BaseMessage]:
    """What ``entry`` sends (or returns to be sent) for ``history``."""
    budget, rest = options["max_tokens"], {k: v for k, v in options.items() if k != "max_tokens"}
    if entry == "invoke":
        return TurnTrimmer(budget, **rest).invoke(history)
    if entry == "ainvoke":
        return asyncio.run(TurnTrimmer(budget, **rest).ainvoke(history))
    if entry == "trim":
        return TurnTrimmer(budget, **rest).trim(history)
    if entry == "trim_turns":
        return trim_turns(history, **options)
    middleware = {"middleware": TurnTrimMiddleware, "state": TurnTrimStateMiddleware}[entry]
    sent, _ = middleware(budget, **rest).trim_request(request_of(history))
    return [*([sent.system_message] if sent.system_message else []), *sent.messages]


ENTRIES = ["invoke", "ainvoke", "trim", "trim_turns", "middleware", "state"]


def own_count(counter: Any, sent: Sequence[BaseMessage]) -> int:
    """The counter's count of ``sent`` as a request (system messages first)."""
    resolved = TurnTrimmer(0, token_counter=counter).counter
    pinned = [m for m in sent if m.type == "system" or getattr(m, "role", "") == "developer"]
    count: int = resolved.count([*pinned, *(m for m in sent if not any(m is p for p in pinned))])
    return count


def check_sent(case: Case, sent: list[BaseMessage], label: object) -> None:
    try:
        check_request(sent, case.history, thinking=case.thinking)
        check_payloads(sent, thinking=case.thinking, providers=case.providers)
    except ProviderRuleError as error:
        raise AssertionError(f"{case.name}, {label}: {error}") from error


@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("on_overflow", ["drop", "compact"])
@pytest.mark.parametrize("make", CASES, ids=lambda f: f().name)
def test_every_entry_point_sends_what_every_provider_accepts(
    make: Callable[[], Case], on_overflow: str, counter: str
) -> None:
    case = make()
    full = own_count(COUNTERS[counter](), case.history)
    sent_some = 0
    for share in SHARES:
        options = {
            "max_tokens": int(full * share),
            "on_overflow": on_overflow,
            "token_counter": COUNTERS[counter](),
        }
        try:
            report = TurnTrimmer(**options).report(case.history)
        except TurnTrimOverflowError:
            report = None
        for entry in ENTRIES:
            try:
                sent = sent_by(
                    entry, case.history, {**options, "token_counter": COUNTERS[counter]()}
                )
            except TurnTrimOverflowError:
                assert report is None, (case.name, share, entry)
                continue
            assert report is not None, (case.name, share, entry)
            assert sent == report.kept, (case.name, share, entry)  # every entry point alike
        if report is None:
            continue
        check_sent(case, report.kept, (on_overflow, counter, share))
        # A whole-list counter is never sent system messages alone: they are estimated.
        estimated = report.plan.kept_turns == 0 and counter == "whole-list"
        assert estimated or report.tokens_after == own_count(options["token_counter"], report.kept)
        assert report.budget_met or (on_overflow == "drop" and report.dropped_turns == report.turns)
        if report.compaction is None:
            planned = [case.history[i] for i in report.plan.kept]
            left_out = sum(len(call_ids(m)) for m in planned) - sum(
                len(call_ids(m)) for m in report.kept
            )
            assert report.unanswered_calls == left_out
        sent_some += 1
    assert sent_some >= 3


# -- the defects of the old version, each through the public API ------------------------


def test_a_system_message_between_a_call_and_its_result_keeps_them_together() -> None:
    history = [
        SystemMessage("You are terse.", id="sys"),
        HumanMessage("old " + words(200), id="u0"),
        AIMessage("old answer", id="a0"),
        HumanMessage("find x " + words(100), id="u1"),
        AIMessage("", tool_calls=[call("c1", "search", q="x")], id="a1"),
        SystemMessage("reminder: cite your sources", id="note"),
        ToolMessage(words(400, "FOUND "), tool_call_id="c1", name="search", id="t1"),
    ]
    full = count_tokens_approximately(history)
    for share in (2.0, 1.0, 0.8, 0.5, 0.3, 0.0):
        for on_overflow in ("drop", "compact"):
            options = {"max_tokens": int(full * share), "on_overflow": on_overflow}
            for entry in ENTRIES:
                try:
                    sent = sent_by(entry, history, {**options})
                except TurnTrimOverflowError:
                    continue
                kept = [m.id for m in sent]
                assert ("a1" in kept) == ("t1" in kept), (share, on_overflow, entry, kept)
                if share >= 1:
                    assert sent == history, (share, entry)  # nothing to leave out
    report = TurnTrimmer(10 * full).report(history)
    assert (report.unanswered_calls, report.orphan_results) == (0, 0)


def test_unanswered_responses_calls_are_left_out_with_the_reasoning_before_them() -> None:
    case = aborted_responses()
    report = TurnTrimmer(100_000).report(case.history)
    sent = {m.id: m for m in report.kept}
    a0 = case.history[2]
    # f2 had no result: its function_call block, its tool call and the
    # reasoning item that preceded it are left out; the rest is as it was.
    assert sent["resp_a0"].content == a0.content[:2]
    assert [c["id"] for c in sent["resp_a0"].tool_calls] == ["f1"]
    # Nothing but reasoning would be left of the newest reply: it is not sent.
    assert "resp_a1" not in sent
    assert list(report.kept_indices) == [0, 1, 2, 3, 4]
    assert report.unanswered_calls == 2
    assert report.orphan_results == 0
    assert report.dropped == [case.history[5]]
    assert report.tokens_after == count_tokens_approximately(report.kept)
    assert case.history[2].content == a0.content  # the caller's message is as it was
    check_sent(case, report.kept, "aborted")


def test_unanswered_v1_calls_are_left_out_blocks_and_tool_calls_alike() -> None:
    case = aborted_v1()
    report = TurnTrimmer(100_000).report(case.history)
    sent = {m.id: m for m in report.kept}
    original = case.history[2]
    kept = sent["a0"]
    assert [b["type"] for b in kept.content] == ["reasoning", "text", "tool_call"]
    assert kept.content[0] == original.content[0]  # the reasoning, signature and all
    assert [b.get("id") for b in kept.content if b["type"] == "tool_call"] == ["k1"]
    assert [c["id"] for c in kept.tool_calls] == ["k1"]
    assert kept.response_metadata == original.response_metadata
    assert "a1" not in sent  # its reasoning and its unanswered call were all it held
    assert report.unanswered_calls == 2
    assert report.tokens_after == count_tokens_approximately(report.kept)
    check_sent(case, report.kept, "aborted")


def test_unanswered_tool_calls_are_left_out_and_their_text_stays() -> None:
    case = aborted_run()
    report = TurnTrimmer(100_000).report(case.history)
    sent = {m.id: m for m in report.kept}
    assert [c["id"] for c in sent["a0"].tool_calls] == ["x2"]
    assert sent["a0"].content == "Cancelling it now."
    assert "a2" not in sent  # nothing but the unanswered call
    assert report.unanswered_calls == 2
    assert report.summary()["unanswered_calls"] == 2
    assert report.kept_indices == (0, 1, 2, 3, 4, 5, 6)
    assert report.dropped == [case.history[7]]
    assert report.removed == []  # the state keeps it: a result may still come
    assert report.tokens_after == count_tokens_approximately(report.kept)
    whole = TurnTrimmer(100_000, token_counter=per_list(scaled)).report(case.history)
    assert whole.kept == report.kept
    assert whole.tokens_after == scaled(whole.kept)  # the count of what is sent


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_result_whose_call_is_not_in_the_history_is_left_out(entry: str) -> None:
    history = [
        SystemMessage("You are terse.", id="sys"),
        HumanMessage("go", id="u0"),
        ToolMessage("from a call long trimmed away", tool_call_id="gone", id="orphan"),
        AIMessage("", tool_calls=[call("c1", "f")], id="a0"),
        ToolMessage("done", tool_call_id="c1", id="t1"),
        ToolMessage("answered twice", tool_call_id="c1", id="again"),
        AIMessage("All done.", id="a1"),
    ]
    sent = sent_by(entry, history, {"max_tokens": 100_000})
    assert [m.id for m in sent] == ["sys", "u0", "a0", "t1", "a1"]
    assert all(m is h for m, h in zip(sent, [history[i] for i in (0, 1, 3, 4, 6)], strict=True))
    report = TurnTrimmer(100_000).report(history)
    assert report.orphan_results == 2
    assert report.unanswered_calls == 0
    assert report.summary()["orphan_results"] == 2
    assert report.tokens_after == count_tokens_approximately(sent)
    check_request(sent, history)
    check_payloads(sent)


def test_anthropic_tool_result_blocks_without_their_call_are_left_out() -> None:
    history = [
        HumanMessage("go", id="u0"),
        anthropic_reply("a0", "Looking.", [("w1", "weather")], think=False),
        results("r0", ("w1", "sunny"), ("zz", "a result of nothing"), text="thanks"),
    ]
    report = TurnTrimmer(100_000).report(history)
    r0 = report.kept[-1]
    assert r0.content == [history[2].content[0], history[2].content[2]]
    assert report.orphan_results == 1
    check_request(report.kept, history)
    check_payloads(report.kept, providers=ANTHROPIC)


# -- compaction never breaks a provider's shape ------------------------------------------


def compact(history: list[BaseMessage], budget: int, **options: Any) -> TrimReport[BaseMessage]:
    return TurnTrimmer(budget, on_overflow="compact", **options).report(history)


def test_truncation_keeps_thinking_and_tool_use_blocks_unchanged() -> None:
    big = anthropic_reply("a1", words(20_000), [("w1", "weather")], think=True)
    history = [HumanMessage("go", id="u0"), big, results("r1", ("w1", "sunny"))]
    report = compact(history, 400)
    cut = report.kept[1]
    assert cut.content[0] == big.content[0]  # the thinking block, signature and all
    assert cut.content[2] == big.content[2]  # the tool_use block
    assert len(cut.content[1]["text"]) < 20_000
    assert cut.tool_calls == big.tool_calls
    check_request(report.kept, history, thinking=True)
    check_payloads(report.kept, thinking=True, providers=ANTHROPIC)


def test_responses_reasoning_items_survive_compaction() -> None:
    case = responses_reasoning()
    report = compact(case.history, 900)
    assert report.compaction is not None
    for message in report.kept:
        original = next(m for m in case.history if m.id == message.id)
        if isinstance(message, AIMessage):
            assert [b for b in message.content if b["type"] == "reasoning"] == [  # type: ignore[index]
                b
                for b in original.content
                if b["type"] == "reasoning"  # type: ignore[index]
            ]
    check_sent(case, report.kept, "compact")


def test_parallel_results_are_cut_each_on_its_own() -> None:
    history = [
        HumanMessage("compare", id="u0"),
        anthropic_reply("a1", "both", [("w1", "weather"), ("s1", "stock")], think=False),
        results(
            "r1", ("w1", words(6000, "WEATHER ")), ("s1", words(6000, "STOCK ")), text="holidays"
        ),
    ]
    report = compact(history, 900)
    weather, stock, note = report.kept[2].content
    assert (weather["tool_use_id"], stock["tool_use_id"]) == ("w1", "s1")
    assert "STOCK" not in weather["content"]
    assert "WEATHER" not in stock["content"]
    assert note == {"type": "text", "text": "holidays"}
    check_request(report.kept, history)
    check_payloads(report.kept, providers=ANTHROPIC)


# -- unanswered calls and orphan results, by the rule read directly --------------------


def naive_left_out(history: Sequence[BaseMessage]) -> tuple[dict[str, set[str]], set[str]]:
    """By message id, the calls no result answers before the next user or
    assistant message; and the ids of the results that answer no open call."""
    calls: dict[str, set[str]] = {}
    orphans: set[str] = set()
    open_calls: set[str] = set()
    for message in history:
        if isinstance(message, ToolMessage):
            if message.tool_call_id in open_calls:
                open_calls.discard(message.tool_call_id)
            else:
                orphans.add(str(message.id))
            continue
        open_calls = set()
        if isinstance(message, AIMessage):
            open_calls = set(call_ids(message))
            calls[str(message.id)] = open_calls
    return {k: v for k, v in calls.items() if v}, orphans


def made_as(style: str, ident: str, text: str, ids: list[str]) -> AIMessage:
    """A step calling ``ids`` in the given format."""
    if style == "responses":
        items: list[dict[str, Any]] = [reasoning(ident)]
        items += [function_call(i, "f") for i in ids] or [said(ident, text or "ok")]
        return responses_reply(ident, *items)
    message = AIMessage(text, id=ident, tool_calls=[call(i, "f") for i in ids])
    if style == "v1":
        message = as_v1(anthropic_reply(ident, text, [(i, "f") for i in ids], think=True))
    return message


@st.composite
def histories_with_gaps(draw: st.DrawFn) -> list[BaseMessage]:
    """Turns of steps (in one format) whose calls are answered in any order,
    some not at all, some results answering nothing."""
    style = draw(st.sampled_from(["tool_calls", "responses", "v1"]))
    history: list[BaseMessage] = []
    for turn in range(draw(st.integers(1, 4))):
        history.append(HumanMessage(f"task {turn}", id=f"u{turn}"))
        for step in range(draw(st.integers(0, 3))):
            ids = [f"c{turn}.{step}.{k}" for k in range(draw(st.integers(0, 3)))]
            text = draw(st.sampled_from(["", f"step {step}"]))
            history.append(made_as(style, f"a{turn}.{step}", text, ids))
            answered = draw(st.permutations(ids))[: draw(st.integers(0, len(ids)))]
            if draw(st.booleans()):
                answered.insert(draw(st.integers(0, len(answered))), f"stray{turn}.{step}")
            history += [ToolMessage("ok", tool_call_id=i, id=f"t{i}") for i in answered]
    return history


@settings(max_examples=100, deadline=None)
@given(histories_with_gaps())
def test_what_is_sent_leaves_out_exactly_the_unanswered_calls_and_orphans(
    history: list[BaseMessage],
) -> None:
    unanswered, orphans = naive_left_out(history)
    trimmer = TurnTrimmer(100_000)
    for sent in (trimmer.trim(history), trimmer.trim(history)):  # cold, then warm
        check_request(sent, history)
        by_id = {m.id: m for m in sent}
        assert not orphans & set(by_id)
        for message in history:
            if not isinstance(message, AIMessage):
                continue
            missing = unanswered.get(str(message.id), set())
            kept = by_id.get(message.id)
            calls = set(call_ids(message)) - missing
            if kept is None:  # left out only when nothing else remains
                assert not calls
                assert not message.text.strip() or not message.content
            else:
                assert set(call_ids(kept)) == calls
                if not missing:
                    assert kept is message
    report = trimmer.report(history)
    assert report.unanswered_calls == sum(map(len, unanswered.values()))
    assert report.orphan_results == len(orphans)
    assert report.tokens_after == count_tokens_approximately(report.kept)
