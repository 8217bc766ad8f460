"""Bad input at every public entry point: the exact error, naming what is wrong, and nothing else.

One table: bad messages across every entry point that takes a history, then
bad histories, options, models, tools, counters and their outputs, and
records. Each case names the exception type and a fragment of its message (a
bad message's errors also name its index, its id and the field); the call
must raise, never return (nothing partial), and leave its input as it was.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest
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

from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    TiktokenCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimStateMiddleware,
    per_list,
    per_message,
    plan_trim,
    removals,
    trim_history,
    trim_turns,
    trim_update,
)

T = TurnTrimmer
TE, VE = TypeError, ValueError

# -- bad messages, each at index 2 after a system and a user message ----------------------


def messages(bad: Any) -> list[Any]:
    return [SystemMessage("be brief", id="s0"), HumanMessage("hi", id="u1"), bad]


def good() -> list[BaseMessage]:
    return messages(AIMessage("hello", id="a2"))


def changed(message: BaseMessage, **fields: Any) -> Any:
    """``message`` with ``fields`` reassigned after construction (not validated)."""
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def ai(**fields: Any) -> Any:
    return changed(AIMessage("hello", id="a2"), **fields)


def deleted(field: str) -> AIMessage:
    message = AIMessage("hello", id="a2")
    del vars(message)[field]
    return message


class Custom(BaseMessage):
    type: str = "custom"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


def chat(role: Any) -> Any:
    return changed(ChatMessage(content="x", role="user", id="c2"), role=role)


def tool(**fields: Any) -> Any:
    return changed(ToolMessage("found", tool_call_id="c", id="t2"), **fields)


ARGS_STR = {"name": "f", "args": "x", "id": "c"}
TEXT_INT = {"type": "text", "text": 5}
DICT = {"role": "assistant", "content": "x", "id": "d2"}


def ident(message: Any) -> Any:
    return message.get("id") if isinstance(message, dict) else getattr(message, "id", None)


#: Bad messages: how to make one, the error, and the field it names.
BAD_MESSAGES: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "content-dict": (lambda: ai(content={"text": "x"}), TE, ": content must be"),
    "content-tuple": (lambda: ai(content=("a", "b")), TE, ": content must be"),
    "content-int": (lambda: ai(content=5), TE, ": content must be"),
    "content-block-int": (lambda: ai(content=[5]), TE, ": content[0] must be"),
    "content-text-int": (lambda: ai(content=[TEXT_INT]), TE, ": content[0]['text'] must be"),
    "name-int": (lambda: ai(name=5), TE, ": name must be"),
    "additional_kwargs-str": (lambda: ai(additional_kwargs="x"), TE, ": additional_kwargs"),
    "tool_calls-str": (lambda: ai(tool_calls="nope"), TE, ": tool_calls must be a list"),
    "tool_calls-item-str": (lambda: ai(tool_calls=["c"]), TE, ": tool_calls[0] must be"),
    "tool_calls-keyless": (lambda: ai(tool_calls=[{"id": "c"}]), VE, ": tool_calls[0] has no"),
    "tool_calls-args-str": (lambda: ai(tool_calls=[ARGS_STR]), TE, ": tool_calls[0]['args']"),
    "invalid_tool_calls-None": (lambda: ai(invalid_tool_calls=[None]), TE, ": invalid_tool_calls"),
    "tool_call_id-None": (lambda: tool(tool_call_id=None), TE, ": tool_call_id must be a str"),
    "role-unknown": (lambda: chat("robot"), VE, ": unknown ChatMessage role 'robot'"),
    "role-int": (lambda: chat(5), TE, ": role must be a str"),
    "RemoveMessage": (lambda: RemoveMessage(id="r2"), TE, " is a RemoveMessage"),
    "without-name": (lambda: deleted("name"), VE, " has no 'name' field"),
    "without-content": (lambda: deleted("content"), VE, " has no 'content' field"),
    "without-tool_calls": (lambda: deleted("tool_calls"), VE, " has no 'tool_calls'"),
    "custom-class": (lambda: Custom(content="x", id="x2"), TE, " is not a supported"),
    "int": (lambda: 42, TE, " is not a message (int 42)"),
    "broken-repr": (BrokenRepr, TE, " is not a message (BrokenRepr"),
    "dict-tool_calls-str": (lambda: {**DICT, "tool_calls": "nope"}, TE, " is not a message"),
    "dict-role": (lambda: {**DICT, "role": "bot"}, TE, " is not a message"),
}


def request(history: Sequence[Any], tools: Any = (), system: Any = None) -> ModelRequest:
    """An agent's model request for ``history`` (an error names a message by its
    index there), with a system prompt of its own."""
    return ModelRequest(
        model=None,  # type: ignore[arg-type]
        messages=list(history),
        system_message=system or SystemMessage("agent rules"),
        tools=tools,
        state={},  # type: ignore[arg-type]
        runtime=None,
    )


def never_called(sent: Any) -> Any:
    pytest.fail("the model was called despite a bad message")


async def anever_called(sent: Any) -> Any:
    pytest.fail("the model was called despite a bad message")


def streamed(chunks: Iterator[Any]) -> list[Any]:
    """The chunks of a stream; none may come before an error (nothing partial)."""
    out: list[Any] = []
    try:
        out.extend(chunks)
    except Exception:
        assert out == [], f"{out!r:.200} came out before the error"
        raise
    return out


async def astreamed(chunks: AsyncIterator[Any]) -> list[Any]:
    out: list[Any] = []
    try:
        async for chunk in chunks:
            out.append(chunk)  # noqa: PERF401 - what came before an error is kept
    except Exception:
        assert out == [], f"{out!r:.200} came out before the error"
        raise
    return out


#: Every entry point that takes a history.
ENTRY_POINTS: dict[str, Callable[[Any], Any]] = {
    "invoke": lambda h: T(100).invoke(h),
    "ainvoke": lambda h: asyncio.run(T(100).ainvoke(h)),
    "batch": lambda h: T(100).batch([good(), h]),
    "abatch": lambda h: asyncio.run(T(100).abatch([good(), h])),
    "stream": lambda h: streamed(T(100).stream(h)),
    "astream": lambda h: asyncio.run(astreamed(T(100).astream(h))),
    "trim": lambda h: T(100).trim(h),
    "trim_with_report": lambda h: T(100).trim_with_report(h),
    "report-compact": lambda h: T(100, on_overflow="compact").report(h),
    "plan": lambda h: T(100).plan(h),
    "trim_turns": lambda h: trim_turns(h, max_tokens=100),
    "trim_turns()": lambda h: trim_turns(max_tokens=100).invoke(h),
    "trim_update": lambda h: trim_update(h, T(100)),
    "trim_request": lambda h: TurnTrimMiddleware(100).trim_request(request(h)),
    "state-trim_request": lambda h: TurnTrimStateMiddleware(100).trim_request(request(h)),
    "wrap_model_call": lambda h: TurnTrimMiddleware(100).wrap_model_call(request(h), never_called),
    "awrap_model_call": lambda h: asyncio.run(
        TurnTrimStateMiddleware(100).awrap_model_call(request(h), anever_called)
    ),
}


def calls(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
    """A case's call that takes no history: ``function(*args, **kwargs)``."""
    return lambda history: function(*args, **kwargs)


def p(case: str, call: Callable[[Any], Any], history: Any, error: type, *fragments: str) -> Any:
    return pytest.param(call, history, error, fragments, id=case)


def _where(bad: Any) -> str:
    return "messages[2]" + (f" (id {ident(bad)!r})" if ident(bad) else "")


MESSAGE_CASES = [
    p(f"{entry}-{name}", call, messages(bad), error, _where(bad) + fragment)
    for name, (build, error, fragment) in BAD_MESSAGES.items()
    for entry, call in ENTRY_POINTS.items()
    for bad in [build()]
]
SEQUENCE = "expected a sequence of messages or a PromptValue, got"
BAD_HISTORIES: list[tuple[Any, str]] = [(None, "NoneType"), ("hi", "str"), (5, "int")]
BAD_HISTORIES += [(HumanMessage("x"), "HumanMessage"), ({"role": "user"}, "dict")]
HISTORY_CASES = (
    [
        p(f"{entry}-history-{got}", call, history, TypeError, f"{SEQUENCE} {got}")
        for history, got in BAD_HISTORIES
        for entry, call in ENTRY_POINTS.items()
        if not any(w in entry for w in ("request", "wrap", "batch"))
        and not (history is None and entry == "trim_turns")  # trim_turns(None): a Runnable
    ]
    + [
        p(
            "trim_request-bad-system-message",
            lambda h: TurnTrimMiddleware(100).trim_request(request(h[1:], system=h[0])),
            [ai(content=5), HumanMessage("x")],
            TypeError,
            "system_message (id 'a2'): content must be",
        )
    ]
)

# -- options, at every constructor -------------------------------------------------------


def _model(profile: Any = None) -> GenericFakeChatModel:
    model = GenericFakeChatModel(messages=iter([]))
    model.profile = {"max_input_tokens": 1_000} if profile is None else profile
    return model


CONSTRUCTORS: dict[str, Callable[..., Any]] = {
    "TurnTrimmer": lambda **kw: T(**{"max_tokens": 10, **kw}),
    "trim_turns": lambda **kw: trim_turns(**{"max_tokens": 10, **kw}),
    "trim_turns(messages)": lambda **kw: trim_turns(good(), **{"max_tokens": 10, **kw}),
    "TurnTrimMiddleware": lambda **kw: TurnTrimMiddleware(**{"max_tokens": 10, **kw}),
    "TurnTrimStateMiddleware": lambda **kw: TurnTrimStateMiddleware(**{"max_tokens": 10, **kw}),
    "TurnTrimmer.for_model": lambda **kw: T.for_model(_model(), **kw),
    "TurnTrimMiddleware.for_model": lambda **kw: TurnTrimMiddleware.for_model(_model(), **kw),
}
PRICE = "cache_price must be a CachePrice, a sequence of CacheRule or None, got"
BAD_OPTIONS: list[tuple[str, Any, type[Exception], str]] = [
    ("max_tokens", -1, VE, "max_tokens must be >= 0, got -1"),
    ("max_tokens", True, TE, "max_tokens must be an int, got bool True"),
    ("max_tokens", "9", TE, "max_tokens must be an int, got str '9'"),
    ("max_tokens", None, TE, "max_tokens must be an int, got NoneType None"),
    ("trim_to", 10**6, VE, "trim_to (1000000) must be <= max_tokens"),
    ("trim_to", "fast", VE, "trim_to must be an int, None or 'auto', got str 'fast'"),
    ("trim_to", -1, VE, "trim_to must be >= 0, got -1"),
    ("trim_to", True, TE, "trim_to must be an int, got bool True"),
    ("on_overflow", "skip", VE, "on_overflow must be 'drop', 'raise' or 'compact'"),
    ("cache_size", -1, VE, "cache_size must be >= 0, got -1"),
    ("cache_size", 1.5, TE, "cache_size must be an int, got float 1.5"),
    ("keep_tool_results", 1.5, TE, "keep_tool_results must be an int, got float 1.5"),
    ("keep_tool_results", -1, VE, "keep_tool_results must be >= 0, got -1"),
    ("context_value", float("nan"), VE, "context_value must be finite and >= 0, got nan"),
    ("context_value", -1.0, VE, "context_value must be finite and >= 0, got -1.0"),
    ("context_value", "1", TE, "context_value must be a number, got str '1'"),
    ("cache_price", "x", TE, f"{PRICE} str 'x'"),
    ("cache_price", 5, TE, f"{PRICE} int 5"),
    ("cache_price", [1], TE, "cache_price[0] must be a CacheRule, got int 1"),
    ("cache_price", [], VE, "cache_price must hold at least one CacheRule"),
    ("overflow_retries", -1, VE, "overflow_retries must be >= 0, got -1"),
    ("overflow_retries", 0.5, TE, "overflow_retries must be an int, got float 0.5"),
    ("token_counter", None, TE, "token_counter must be 'approximate', 'tiktoken:MODEL'"),
    ("token_counter", 42, TE, "a chat model or a function, got int 42"),
    ("token_counter", "exact", VE, "unknown token_counter 'exact'"),
    ("token_counter", ApproximateCounter, TE, "is the class ApproximateCounter"),
]
OPTION_CASES = [
    p(f"{entry}-{name}-{value!r}", calls(build, **{name: value}), None, error, text)
    for entry, build in CONSTRUCTORS.items()
    for name, value, error, text in BAD_OPTIONS
    if not (name == "max_tokens" and entry.endswith("for_model"))
] + [
    p("report-max_tokens", lambda h: T(10).report(h, max_tokens=-1), good(), ValueError, ">= 0"),
    p("an-option-by-position", calls(T, 10, "approximate"), None, TypeError, "positional"),
    p(  # the error names the entry point, not an internal one
        "for_model-given-max_tokens",
        lambda h: T.for_model(_model(), max_tokens=5),
        None,
        TypeError,
        "TurnTrimmer.for_model",
        "max_tokens",
    ),
]

# -- models, for for_model -------------------------------------------------------------------

LIMIT = "GenericFakeChatModel's profile['max_input_tokens'] must be an int >= 1 (a token count)"
BAD_MODELS: list[tuple[str, Any, Any, type[Exception], str]] = [
    ("no-profile", {}, None, VE, "GenericFakeChatModel has no profile['max_input_tokens']"),
    ("input-negative", {"max_input_tokens": -5}, None, VE, f"{LIMIT}, got int -5"),
    ("input-str", {"max_input_tokens": "128000"}, None, TE, f"{LIMIT}, got str"),
    ("input-bool", {"max_input_tokens": True}, None, TE, f"{LIMIT}, got bool"),
    ("input-nan", {"max_input_tokens": float("nan")}, None, TE, f"{LIMIT}, got float"),
    ("output-negative", {"max_input_tokens": 9, "max_output_tokens": -5}, None, VE, "-5"),
    ("reserve-over", {"max_input_tokens": 100}, 101, VE, "reserve_tokens (101) exceeds"),
    ("reserve-negative", {"max_input_tokens": 100}, -1, VE, "reserve_tokens must be >= 0"),
    ("reserve-str", {"max_input_tokens": 100}, "5", TE, "reserve_tokens must be an int"),
]


def sized(owner: Any, profile: Any, reserve: Any) -> Any:
    return owner.for_model(_model(profile), reserve_tokens=reserve)


MODEL_CASES = [
    p(f"{owner.__name__}-{name}", calls(sized, owner, profile, reserve), None, error, text)
    for owner in (TurnTrimmer, TurnTrimMiddleware, TurnTrimStateMiddleware)
    for name, profile, reserve, error, text in BAD_MODELS
]

# -- tools -----------------------------------------------------------------------------------

TOOL = "must be a tool schema dict, a BaseTool, a class or a function"
BAD_TOOLS: list[tuple[str, Any, str]] = [
    ("int", [1], f"tools[0] {TOOL}, got int 1"),
    ("None", [{"name": "f"}, None], f"tools[1] {TOOL}, got NoneType None"),
    ("str", "get_weather", "tools must be a sequence of tools, got str"),
    ("dict", {"name": "f"}, "tools must be a sequence of tools, got dict"),
]
TOOL_USERS: dict[str, Callable[..., Any]] = {
    "report": lambda h, t: T(100).report(h, tools=t),
    "report-per_list": lambda h, t: T(100, token_counter=per_list(len)).report(h, tools=t),
    "trim_request": lambda h, t: TurnTrimMiddleware(100).trim_request(request(h, t)),
    "ApproximateCounter": lambda h, t: ApproximateCounter().count_tools(t),
    "TiktokenCounter": lambda h, t: TiktokenCounter("gpt-4").count_tools(t),
    "CalibratedCounter": lambda h, t: CalibratedCounter().count_tools(t),
    "CalibratedCounter.observe": lambda h, t: CalibratedCounter().observe(h, 50, tools=t),
}
TOOL_CASES = [
    p(f"{name}-tools-{case}", functools.partial(use, t=tools), good(), TypeError, text)
    for name, use in TOOL_USERS.items()
    for case, tools, text in BAD_TOOLS
]

# -- counters and what they answer -----------------------------------------------------------


class Answering:
    """A ``TokenCounter`` whose ``count_each`` answers ``answer(messages)``."""

    def __init__(self, answer: Callable[[Sequence[BaseMessage]], Any], overhead: Any = 0) -> None:
        self.answer, self.overhead = answer, overhead

    def count_each(self, messages: Sequence[BaseMessage]) -> Any:
        return self.answer(messages)

    def __repr__(self) -> str:
        return "Answering()"


def returns(value: Any) -> Callable[..., Any]:
    return lambda *args: value


def at_a2(value: Any) -> Answering:
    """Counts 1 a message, and ``value`` for the message 'a2'."""
    return Answering(lambda ms: [value if m.id == "a2" else 1 for m in ms])


A2 = "counted messages[2] (id 'a2') as"
BAD_COUNTERS: list[tuple[str, Any, type[Exception], str]] = [
    ("an-int", Answering(lambda ms: 3), TE, "Answering().count_each returned int 3"),
    ("a-str", Answering(lambda ms: "111"), TE, "Answering().count_each returned str"),
    ("too-few", Answering(lambda ms: [1] * (len(ms) - 1)), VE, "counts for"),
    ("negative", at_a2(-1), VE, f"Answering() {A2} int -1, expected an int >= 0"),
    ("float", at_a2(1.5), TE, f"Answering() {A2} float 1.5"),
    ("bool", at_a2(True), TE, f"{A2} bool True"),
    ("None", at_a2(None), TE, f"{A2} NoneType None"),
    ("per_message", per_message(lambda m: -1 if m.id == "a2" else 1), VE, f"{A2} int -1"),
    ("per_list-negative", per_list(returns(-1)), VE, "must be >= 0, got -1"),
    ("per_list-str", per_list(returns("7")), TE, "must be an int, got str '7'"),
    ("per_list-float", per_list(returns(7.0)), TE, "must be an int, got float 7.0"),
    ("calibrated-base", CalibratedCounter(at_a2(-1)), VE, f"{A2} int -1"),
]


def trimmed(history: Any, counter: Any, cache_size: int) -> Any:
    return T(9, token_counter=counter, cache_size=cache_size).invoke(history)


REFUSED: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "per_message": (lambda: per_message(42), TE, "per_message needs a callable"),  # type: ignore[arg-type]
    "per_list": (lambda: per_list("len"), TE, "per_list needs a callable"),  # type: ignore[arg-type]
    "per_list-takes_tools": (lambda: per_list(len, takes_tools="y"), TE, "takes_tools"),  # type: ignore[arg-type]
    "overhead-negative": (lambda: T(10, token_counter=Answering(len, -1)), VE, "overhead must"),
    "overhead-float": (lambda: T(10, token_counter=Answering(len, 2.5)), TE, "Answering.overhead"),
    "calibrated-class": (lambda: CalibratedCounter(ApproximateCounter), TE, "the class"),
    "calibrated-list": (lambda: CalibratedCounter(per_list(len)), TE, "additive base"),
    "calibrated-margin": (lambda: CalibratedCounter(margin=2), VE, "margin must be"),
    "calibrated-warmup": (lambda: CalibratedCounter(warmup=-1), VE, "warmup must be"),
    "observe": (lambda: CalibratedCounter().observe(good(), "x"), TE, "input_tokens"),  # type: ignore[arg-type]
}
COUNTER_CASES = [
    p(f"{name}-{z}", functools.partial(trimmed, counter=c, cache_size=z), good(), error, text)
    for name, c, error, text in BAD_COUNTERS
    for z in (16, 0)
]
COUNTER_CASES += [
    p(f"{name}-refused", calls(build), None, e, text) for name, (build, e, text) in REFUSED.items()
]

# -- removals, and the spec on records ----------------------------------------------------------

NO_ID = [HumanMessage("q" * 400, id="u0"), AIMessage("a" * 400), HumanMessage("now", id="u2")]
RECORDS = [{"id": "s0", "role": "system", "tokens": 5}, {"id": "u1", "role": "user", "tokens": 5}]
BAD_RECORDS: list[tuple[str, Any, type[Exception], str]] = [
    ("not-a-mapping", ["user", 5], TE, "messages[2] must be a mapping, got list"),
    ("no-role", {"id": "x2", "tokens": 5}, VE, "messages[2] (id 'x2') has no 'role'"),
    ("no-tokens", {"id": "x2", "role": "user"}, VE, "(id 'x2') has no 'tokens' field"),
    ("role-typo", {"id": "x2", "role": "User", "tokens": 5}, VE, ": unknown 'role' 'User'"),
    ("role-None", {"id": "x2", "role": None, "tokens": 5}, TE, "(id 'x2'): 'role' must be"),
    ("tokens-bool", {"id": "x2", "role": "user", "tokens": True}, TE, "'tokens' must be"),
    ("tokens-negative", {"id": "x2", "role": "user", "tokens": -3}, VE, "got -3"),
]
OTHER_CASES = [
    p("trim_update-no-id", lambda h: trim_update(h, T(10)), NO_ID, VE, "messages[1] is"),
    p("removals-no-id", lambda h: removals(T(10).trim_with_report(h)), NO_ID, VE, "no id"),
    p("trim_history-None", lambda h: trim_history(h, 10), None, TE, "got NoneType"),
    p("plan_trim-str", lambda h: plan_trim(h, 10), "user", TE, "of mappings, got str"),
    p("trim_history-budget", lambda h: trim_history(h, -1), RECORDS, VE, "max_tokens"),
    p("trim_to-over", lambda h: trim_history(h, 5, trim_to=6), RECORDS, VE, "trim_to (6)"),
] + [
    p(f"{f.__name__}-{name}", functools.partial(f, max_tokens=10), [*RECORDS, record], error, text)
    for f in (trim_history, plan_trim)
    for name, record, error, text in BAD_RECORDS
]


CASES = [*MESSAGE_CASES, *HISTORY_CASES, *OPTION_CASES, *MODEL_CASES, *TOOL_CASES]
CASES += [*COUNTER_CASES, *OTHER_CASES]


def raised(call: Callable[[Any], Any], history: Any) -> Exception:
    """What ``call(history)`` raised; a return, partial or not, fails the test."""
    try:
        returned = call(history)
    except Exception as error:  # noqa: BLE001 - the test checks its exact type
        return error
    pytest.fail(f"returned {returned!r:.300} instead of raising")


def same(before: Any, after: Any) -> bool:
    if isinstance(after, list):
        return len(before) == len(after) and all(map(same, before, after))
    if isinstance(after, BaseMessage):
        return type(before) is type(after) and vars(before) == vars(after)
    return type(before) is type(after) and (isinstance(after, BrokenRepr) or before == after)


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize(
    ("call", "history", "expected", "fragments"),
    CASES,
)
def test_bad_input(call: Any, history: Any, expected: type[Exception], fragments: Any) -> None:
    before = copy.deepcopy(history)
    error = raised(call, history)
    assert type(error) is expected, f"{type(error).__name__}: {error}"
    for fragment in fragments:
        assert fragment in str(error), str(error)
    assert same(before, history)


# -- defect 8: every counter refuses the same malformed fields, by name ------------------------

COUNTERS: dict[str, Callable[[], Any]] = {
    "approximate": ApproximateCounter,
    "tiktoken": lambda: TiktokenCounter("gpt-4"),
}
MALFORMED = ["content-int", "content-dict", "content-tuple", "additional_kwargs-str"]
MALFORMED += ["tool_calls-str", "tool_calls-keyless", "tool_call_id-None", "dict-tool_calls-str"]


def tool_turn(last: Any) -> list[Any]:
    """A turn whose tool result does not fit (compaction's work), then ``last``."""
    call = {"name": "search", "args": {"q": "x"}, "id": "c"}
    return [
        SystemMessage("be brief", id="s0"),
        HumanMessage("find x", id="u1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("r" * 4_000, tool_call_id="c", id="t1"),
        last,
    ]


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("on_overflow", ["drop", "compact"])
@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("name", MALFORMED)
def test_every_counter_refuses_a_malformed_message_by_name(
    name: str, counter: str, on_overflow: str
) -> None:
    build, error, fragment = BAD_MESSAGES[name]
    history = tool_turn(build())
    trimmer = T(200, token_counter=COUNTERS[counter](), on_overflow=on_overflow)
    with pytest.raises(error) as info:
        trimmer.invoke(history)
    assert f"messages[4] (id {ident(history[4])!r}){fragment}" in str(info.value)


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("value", [{"text": "x"}, ("a", "b")], ids=["dict", "tuple"])
@pytest.mark.parametrize("counter", sorted(COUNTERS))
@pytest.mark.parametrize("index", [3, 4])
def test_content_reassigned_after_a_compacting_trim_is_refused_by_name(
    counter: str, value: Any, index: int
) -> None:
    history = tool_turn(AIMessage("done", id="a2"))
    trimmer = T(200, token_counter=COUNTERS[counter](), on_overflow="compact")
    middleware = TurnTrimMiddleware(200, token_counter=trimmer.counter)
    assert trimmer.report(history).compaction is not None  # remembered, then changed
    assert middleware.trim_request(request(history))[1].compaction is not None
    copied = [*history]
    copied[index] = changed(history[index].model_copy(), content=value)
    changed(history[index], content=value)  # the very object the caches know
    where = f"messages[{index}] (id {history[index].id!r}): content must be"
    for run in (trimmer.invoke, lambda h: middleware.trim_request(request(h))):
        for given in (copied, history):
            with pytest.raises(TypeError) as info:
                run(given)
            assert where in str(info.value)


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("counter", sorted(COUNTERS))
def test_a_counter_called_on_its_own_refuses_the_same_messages(counter: str) -> None:
    """Counters are LangChain token counters too (``trim_messages(token_counter=...)``):
    called on a list, they refuse what a trim refuses, with the same error."""
    wrong = []
    for name in MALFORMED[:-1]:
        build, error, fragment = BAD_MESSAGES[name]
        bad = build()
        try:
            got: Any = COUNTERS[counter]()(messages(bad))
        except Exception as raised_error:  # noqa: BLE001 - compared below
            got = raised_error
        if type(got) is not error or _where(bad) + fragment not in str(got):
            wrong.append(f"{name}: {type(got).__name__} {got}")
    assert not wrong, "\n".join(wrong)
