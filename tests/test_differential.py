"""Every entry point and every counter kind: the same decision, and figures that
are the counter's own count of what is returned.

Random conversations (``tests.strategies``, with greetings and system messages
inside the turns added) and real ones (``tests/data``: tau-bench, tau2, a
SWE-agent run) go through ``TurnTrimmer`` (``invoke``, ``ainvoke``, ``trim``,
``trim_with_report``, ``report``, ``plan``), ``trim_turns`` (as a function and
as a Runnable), both middlewares (sync and async), ``trim_update`` and, for
the real ones, the ``turntrim`` command (``trim`` and ``report``), with the
approximate, exact, per-message, whole-list (at several scales of the
approximate counter) and calibrated counters, under every ``on_overflow`` and
with and without ``trim_to`` (a level, and ``"auto"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim import (
    CalibratedCounter,
    OnOverflow,
    TiktokenCounter,
    TrimOptions,
    TrimReport,
    TurnTrimmer,
    TurnTrimOverflowError,
    per_list,
    per_message,
    trim_turns,
    trim_update,
)
from langchain_turntrim._cli.conversion import to_messages
from langchain_turntrim._cli.transcript import Transcript
from langchain_turntrim._core import PINNED, REPLY
from langchain_turntrim._counting import AdditiveCounter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._middleware import TurnTrimMiddleware
from langchain_turntrim._state_middleware import TurnTrimStateMiddleware
from tests import strategies
from tests.helpers import arun, run_cli
from tests.lc import check_conversation

pytestmark = pytest.mark.usefixtures("tiktoken_cache")

DATA = Path(__file__).parent / "data" / "conversations.json"


# -- the counters ------------------------------------------------------------------------------


class Scaled:
    """A whole-list counter at ``scale`` times the approximate counter (rounded
    up per message), plus ``constant`` per request, that checks it is only
    given valid conversations."""

    def __init__(self, scale: float, constant: int = 0) -> None:
        self.scale = scale
        self.constant = constant
        self.__name__ = f"scaled_{scale}_{constant}"

    def __call__(self, messages: list[BaseMessage]) -> int:
        check_conversation(messages)
        each = sum(math.ceil(self.scale * count_tokens_approximately([m])) for m in messages)
        return self.constant + each


def calibrated() -> CalibratedCounter:
    """Past its warm-up, fitted to a provider counting a third more."""
    counter = CalibratedCounter(warmup=2)
    for size in (100, 400, 1_600, 3_000):
        sent = [HumanMessage("x" * size), AIMessage("y" * size)]
        counter.observe(sent, 4 * count_tokens_approximately(sent) // 3)
    return counter


def _length(message: BaseMessage) -> int:
    return len(message.text) + 1


#: Each kind of counter, built afresh for every trimmer (the calibrated one is
#: shared: a fit of its own per trimmer would be the same fit).
COUNTERS: dict[str, Callable[[], Any]] = {
    "approximate": lambda: "approximate",
    "tiktoken": lambda: TiktokenCounter(encoding="cl100k_base"),
    "per_message": lambda: per_message(_length),
    "per_list-0.5x": lambda: per_list(Scaled(0.5)),
    "per_list-1x": lambda: per_list(Scaled(1.0)),
    "per_list-2x": lambda: per_list(Scaled(2.0)),
    "per_list-1.3x+3": lambda: per_list(Scaled(1.3, constant=3)),
    "calibrated": lambda: CALIBRATED,
}
CALIBRATED: CalibratedCounter = calibrated()
#: Every overflow rule.
RULES: tuple[OnOverflow, ...] = get_args(OnOverflow)
#: The command's names of the counters it has.
CLI_COUNTERS = {"approximate": "approximate", "tiktoken": "tiktoken:cl100k_base"}


# -- the entry points --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    history: list[BaseMessage]
    options: TrimOptions
    counter: str

    def trimmer(self) -> TurnTrimmer:
        keywords = self.options.keywords()
        keywords["token_counter"] = COUNTERS[self.counter]()
        return TurnTrimmer(keywords.pop("max_tokens"), **keywords)

    def keywords(self) -> dict[str, Any]:
        keywords = self.options.keywords()
        keywords["token_counter"] = COUNTERS[self.counter]()
        return keywords


def _split(history: list[BaseMessage]) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """A request's system message (the first message, if it is one) and messages."""
    if history and type(history[0]) is SystemMessage:
        return history[0], history[1:]
    return None, history


def _middleware_kept(case: Case, *, state: bool, asynchronous: bool) -> list[BaseMessage]:
    keywords = case.keywords()
    cls = TurnTrimStateMiddleware if state else TurnTrimMiddleware
    # Not timed to the cache: a first call finds it cold, and would cut deeper.
    middleware = cls(keywords.pop("max_tokens"), time_to_cache=False, **keywords)
    system, messages = _split(case.history)
    request = ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=messages,  # type: ignore[arg-type]
        system_message=system,
        tools=[],
    )
    sent: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    async def ahandler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        return handler(request)

    if asynchronous:
        arun(middleware.awrap_model_call(request, ahandler))
    else:
        middleware.wrap_model_call(request, handler)
    (called,) = sent
    head: list[BaseMessage] = [called.system_message] if called.system_message else []
    return [*head, *called.messages]


#: Each entry point's kept messages.
KEPT: dict[str, Callable[[Case], list[BaseMessage]]] = {
    "invoke": lambda c: c.trimmer().invoke(c.history),
    "ainvoke": lambda c: arun(c.trimmer().ainvoke(c.history)),
    "trim": lambda c: c.trimmer().trim(c.history),
    "trim_with_report": lambda c: c.trimmer().trim_with_report(c.history).kept,
    "report": lambda c: c.trimmer().report(c.history).kept,
    "warm": lambda c: _warm(c.trimmer(), c.history),
    "trim_turns": lambda c: trim_turns(c.history, **c.keywords()),
    "trim_turns-runnable": lambda c: trim_turns(**c.keywords()).invoke(c.history),
    "middleware": lambda c: _middleware_kept(c, state=False, asynchronous=False),
    "middleware-async": lambda c: _middleware_kept(c, state=False, asynchronous=True),
    "state-middleware": lambda c: _middleware_kept(c, state=True, asynchronous=False),
}


def _warm(trimmer: TurnTrimmer, history: list[BaseMessage]) -> list[BaseMessage]:
    """The third trim of a history (remembered from its second plan on)."""
    trimmer.trim(history)
    trimmer.trim(history)
    return trimmer.trim(history)


def _removed(case: Case) -> list[str | None]:
    """The ids each state entry point deletes: all must agree."""
    keywords = case.keywords()
    middleware = TurnTrimStateMiddleware(keywords.pop("max_tokens"), **keywords)
    update = middleware.state_update(case.history)
    by_middleware = [m.id for m in update["messages"]] if update else []
    by_update = [m.id for m in trim_update(case.history, case.trimmer())["messages"]]
    assert by_middleware == by_update
    return by_update


# -- the checks --------------------------------------------------------------------------------


def request_order(kept: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What a whole-list counter counts of a kept list: its system messages
    first, then the rest in order (a summary stays in its place)."""
    kinds = message_kinds(kept)
    return [m for m, k in zip(kept, kinds, strict=True) if k == PINNED] + [
        m for m, k in zip(kept, kinds, strict=True) if k != PINNED
    ]


def counted(trimmer: TurnTrimmer, kept: Sequence[BaseMessage]) -> int:
    """The counter's own count of exactly ``kept`` as a request."""
    counter = trimmer.counter
    if isinstance(counter, AdditiveCounter):
        return counter.count(kept)
    return counter.count(request_order(kept)) if kept else 0  # nothing is sent


def previous_start(case: Case) -> int | None:
    """The index the previous model call's kept turns start at (None: none
    kept, or no previous call): what ``start_moved`` compares with."""
    kinds = message_kinds(case.history)
    replies = [i for i, kind in enumerate(kinds) if kind == REPLY]
    if not replies:
        return None
    # The spec's plan of that history (start_moved is a plan's figure: no overflow rule).
    spec = Case(case.history, case.options.replace(on_overflow="drop"), case.counter)
    before = spec.trimmer().report(case.history[: replies[-1]]).plan
    return before.keep_from if before.kept_turns else None


def decided(case: Case) -> TrimReport[Any] | None:
    """The report, or None when the trim raises (then every entry point must)."""
    try:
        return case.trimmer().report(case.history)
    except TurnTrimOverflowError:
        pass
    with pytest.raises(TurnTrimOverflowError) as first:
        case.trimmer().report(case.history)
    for name, kept in KEPT.items():
        with pytest.raises(TurnTrimOverflowError) as raised:
            kept(case)
        assert str(raised.value) == str(first.value), name
    assert case.options.on_overflow in ("raise", "compact")
    return None


def check(case: Case) -> TrimReport[Any] | None:
    """Every entry point agrees, and every figure is the counter's count."""
    report = decided(case)
    if report is None:
        return None
    expected = report.kept
    for name, kept in KEPT.items():
        got = kept(case)
        assert [m.id for m in got] == [m.id for m in expected], name
        assert [m.content for m in got] == [m.content for m in expected], name
    assert case.trimmer().plan(case.history) == report.plan
    trimmer = case.trimmer()
    # The figures are the counter's count of exactly what is returned.
    assert report.tokens_after == counted(trimmer, expected)
    assert report.budget_met == (report.tokens_after <= case.options.max_tokens)
    if report.compaction is None:
        assert all(m is case.history[i] for i, m in zip(report.kept_indices, expected, strict=True))
        assert report.plan.tokens_after == report.tokens_after
    else:
        assert report.budget_met
    if any(isinstance(m, HumanMessage) for m in expected):
        check_conversation(request_order(expected))
    # What the state loses: only dropped messages before the newest turn, and
    # nothing while every turn is kept.
    removed = _removed(case)
    assert removed == [m.id for m in report.removed]
    assert {id(m) for m in report.removed} <= {id(m) for m in report.dropped}
    if not report.plan.dropped_turns:
        assert removed == []
    newest = set(map(id, case.history[report.plan.newest_turn_start :]))
    assert not newest & set(map(id, report.removed))
    # start_moved: the previous model call's first kept turn differs.
    before = previous_start(case)
    if isinstance(trimmer.counter, AdditiveCounter):
        moved = before is not None and before != report.plan.keep_from
        assert report.start_moved == moved
    return report


# -- random conversations ----------------------------------------------------------------------


#: The summary LangChain's SummarizationMiddleware writes: pinned, and the
#: start of a turn of the messages it kept (which may begin with a reply).
SUMMARY = HumanMessage(
    "Here is a summary of the conversation so far: the user booked a flight.",
    additional_kwargs={"lc_source": "summarization"},
)


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    """Valid conversations, with at times a greeting before the first user
    message, a summary (and a reply it kept) before the turns, or a system
    message inside the turns; every message has an id."""
    history = draw(strategies.conversations(max_turns=6))
    first = next(i for i, m in enumerate(history) if message_kinds([m])[0] != PINNED)
    extra = draw(st.sampled_from(["", "greeting", "summary"]))
    if extra == "greeting":
        history.insert(first, AIMessage("Hello! How can I help you today?"))
    elif extra == "summary":
        history[first:first] = [SUMMARY.model_copy(), AIMessage("I booked it, as summarised.")]
    if draw(st.booleans()) and len(history) > first + 2:
        starts = [i for i, kind in enumerate(message_kinds(history)) if kind == 1 and i > first]
        if starts:
            history.insert(draw(st.sampled_from(starts)), SystemMessage("A note for the model."))
    for i, message in enumerate(history):
        message.id = f"m{i}"
    return history


@st.composite
def cases(draw: st.DrawFn, counter: str) -> Case:
    history = draw(histories())
    total = count_tokens_approximately(history)
    budget = draw(st.integers(0, total + 10) | st.integers(total // 3, total))
    trim_to: int | Literal["auto"] | None = draw(
        st.one_of(st.none(), st.integers(0, budget), st.just("auto"))
    )
    on_overflow = draw(st.sampled_from(RULES))
    options = TrimOptions(budget, on_overflow=on_overflow, trim_to=trim_to, keep_tool_results=1)
    return Case(history, options, counter)


@pytest.mark.slow
@pytest.mark.parametrize("counter", list(COUNTERS))
@settings(
    max_examples=30,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_conversations_get_one_decision_everywhere(counter: str, data: st.DataObject):
    check(data.draw(cases(counter)))


# -- real conversations ------------------------------------------------------------------------


def _real() -> list[tuple[str, list[dict[str, Any]]]]:
    loaded = json.loads(DATA.read_text(encoding="utf-8"))
    return [
        (f"{source}-{i}", [{**m, "id": f"m{k}"} for k, m in enumerate(conversation)])
        for source, conversations in loaded.items()
        for i, conversation in enumerate(conversations)
    ]


REAL = _real()


def _messages(records: list[dict[str, Any]]) -> list[BaseMessage]:
    return to_messages(Transcript("chat.json", "array", records))


@pytest.mark.parametrize(("name", "records"), REAL, ids=[name for name, _ in REAL])
@pytest.mark.parametrize("counter", list(COUNTERS))
def test_real_conversations_get_one_decision_everywhere(
    name: str, records: list[dict[str, Any]], counter: str, tmp_path: Path, capsys: Any
):
    history = _messages(records)
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    total = count_tokens_approximately(history)
    for share in (0.1, 0.45, 1.2):
        budget = int(share * total)
        for on_overflow in RULES:
            for trim_to in (None, budget * 3 // 5, "auto"):
                options = TrimOptions(budget, on_overflow=on_overflow, trim_to=trim_to)
                case = Case(history, options, counter)
                report = check(case)
                if counter in CLI_COUNTERS and trim_to != "auto":  # no --trim-to auto
                    _check_cli(case, records, report, str(path), CLI_COUNTERS[counter], capsys)


def _check_cli(
    case: Case,
    records: list[dict[str, Any]],
    report: TrimReport[Any] | None,
    path: str,
    spec: str,
    capsys: Any,
) -> None:
    """The command writes the same messages (compacted contents included) and
    reports the same figures."""
    options = case.options
    args = [path, "--max-tokens", str(options.max_tokens), "--token-counter", spec]
    args += ["--on-overflow", options.on_overflow, "--keep-tool-results", "3"]
    if options.trim_to is not None:
        args += ["--trim-to", str(options.trim_to)]
    code, out, err = run_cli(capsys, "trim", *args)
    if report is None:
        assert code == 2
        assert "does not fit" in err
        return
    assert code == 0
    written = json.loads(out)
    assert [m["id"] for m in written] == [m.id for m in report.kept]
    changed = report.compaction.changed if report.compaction else {}
    assert [m.get("content") for m in written] == [
        changed[i].content if i in changed else records[i].get("content")
        for i in report.kept_indices
    ]
    code, out, _ = run_cli(capsys, "report", *args)
    assert code == 0
    (after,) = [line.split() for line in out.splitlines() if line.startswith("after ")]
    assert after[1] == f"{report.tokens_after:,}"


@pytest.mark.parametrize("counter", list(COUNTERS))
@pytest.mark.parametrize("trim_to", [None, 0.6])
def test_start_moved_is_exact_in_an_agent_loop(counter: str, trim_to: float | None):
    """Trimming before every model call of the real conversations joined, one
    trimmer: start_moved says exactly whether the first kept turn moved since
    the previous call, for every counter (whole-list ones included: the
    planner planned that call)."""
    history = [m for _, records in REAL for m in _messages(records)]
    history = [history[0], *(m for m in history[1:] if type(m) is not SystemMessage)]
    budget = count_tokens_approximately(history) // 4
    options = TrimOptions(budget, trim_to=None if trim_to is None else int(trim_to * budget))
    trimmer = Case(history, options, counter).trimmer()
    previous = None
    moves = 0
    for i, message in enumerate(history):
        if not isinstance(message, AIMessage):
            continue
        plan = trimmer.report(history[:i]).plan
        start = plan.keep_from if plan.kept_turns else None
        assert plan.start_moved == (previous is not None and start != previous), i
        moves += plan.start_moved
        previous = start
    assert moves > 0
