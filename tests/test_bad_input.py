"""Bad input at every public entry point: the exact error, naming the message, and nothing else.

One table enumerates bad inputs across ``trim_history``, ``TurnTrimmer`` (its
constructor, ``for_model`` and every way to call it), ``trim_turns``, the
counters, ``TiktokenCounter``, ``removals``/``trim_update``,
``TurnTrimMiddleware`` and the ``turntrim`` command. Each case names the exact
exception type (exit status 2 for the command) and a fragment of the message;
a message-level error names the message's index and id. Every history passed
is deep-snapshotted first and must be unchanged afterwards, and no call may
return anything: nothing partial is ever returned.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest
from langchain_core.language_models import ModelProfile
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
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
    removals,
    trim_history,
    trim_turns,
    trim_update,
)
from langchain_turntrim._cache_timing import CacheClock
from langchain_turntrim._cli import main
from langchain_turntrim._counting import CachedCounter, resolve_counter
from langchain_turntrim._counting.openai.models import UnknownModelError
from tests.helpers import arun, rec, snapshot

#: The expected outcome of a command-line case: exit status 2.
EXIT_2 = 2


# -- histories: a good prefix, then the bad message LAST, at index 2 ----------------------

#: Records for ``trim_history``; the bad record is appended at index 2 with id 'x2'.
RECORDS = [rec("s0", "system", 5), rec("u1", "user", 5)]


def records(bad: Any) -> list[Any]:
    return [*copy.deepcopy(RECORDS), bad]


def messages(bad: Any) -> list[Any]:
    """A system message and a user message, then ``bad`` at index 2."""
    return [SystemMessage("be brief", id="s0"), HumanMessage("hi", id="u1"), bad]


def good_messages() -> list[BaseMessage]:
    return messages(AIMessage("hello", id="a2"))


BAD_CHAT = ChatMessage(content="x", role="User", id="c2")
# An old turn without an id, dropped by a small budget.
NO_ID = [HumanMessage("q" * 400, id="u0"), AIMessage("a" * 400), HumanMessage("now", id="u2")]


# -- values whose own methods fail or lie ----------------------------------------------------


class BrokenRepr:
    """An object whose repr (and str) raise: an error message must still be built."""

    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:  # copies compare equal (the snapshots)
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


class BrokenReprStr(str):
    """A str (a valid id) whose repr raises."""

    __slots__ = ()

    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


class LyingRole:
    """Not a str, but hashes and compares like "user"."""

    def __hash__(self) -> int:
        return hash("user")

    def __eq__(self, other: object) -> bool:
        return other == "user"

    def __repr__(self) -> str:
        return "LyingRole()"


class LyingStr(str):
    """A str whose value is a typo, but that hashes and compares like "user"."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash("user")

    def __eq__(self, other: object) -> bool:
        return True


class LyingInt(int):
    """An int that says it is never below anything."""

    def __lt__(self, other: object) -> bool:
        return False

    def __ge__(self, other: object) -> bool:
        return True

    def __le__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return True


class BrokenReprFloat(float):
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")

    __str__ = __repr__


class BrokenReprInt(int):
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")

    __str__ = __repr__


def chat(role: Any, ident: Any = "c2") -> ChatMessage:
    """A ChatMessage whose role (and id) were reassigned after construction."""
    message = ChatMessage(content="x", role="user", id="c2")
    message.role = role
    message.id = ident
    return message


# -- counters that misbehave on the message with id 'a2' ----------------------------------


class BadCounter:
    """A ``TokenCounter`` answering ``bad`` for the message with id 'a2'."""

    overhead = 0

    def __init__(self, bad: Any, *, drop_one: bool = False) -> None:
        self.bad = bad
        self.drop_one = drop_one

    def count_each(self, messages: Sequence[BaseMessage]) -> list[Any]:
        counts = [self.bad if m.id == "a2" else 1 for m in messages]
        return counts[:-1] if self.drop_one else counts

    def __repr__(self) -> str:
        return "BadCounter()"


class Answering:
    """A ``TokenCounter`` whose ``count_each`` returns ``answer(messages)`` as it is."""

    def __init__(self, answer: Callable[[Sequence[BaseMessage]], Any], overhead: Any = 0) -> None:
        self.answer = answer
        self.overhead = overhead

    def count_each(self, messages: Sequence[BaseMessage]) -> Any:
        return self.answer(messages)

    def __repr__(self) -> str:
        return "Answering()"


class BrokenReprCounter(BadCounter):
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


def minus_one_for_a2(message: BaseMessage) -> int:
    return -1 if message.id == "a2" else 1


def counter_case(counter: Any, cache_size: int = 16) -> Callable[[Any], Any]:
    def call(history: Any) -> Any:
        return TurnTrimmer(max_tokens=100, token_counter=counter, cache_size=cache_size).invoke(
            history
        )

    return call


# -- models, requests ----------------------------------------------------------------------


def fake_model(profile: ModelProfile | None = None) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([]), profile=profile)


def profiled(profile: dict[str, Any]) -> GenericFakeChatModel:
    """A model whose profile is assigned after construction (not validated by pydantic)."""
    model = fake_model()
    model.profile = profile  # type: ignore[assignment]
    return model


def request(history: list[Any], system: str | None = "be brief") -> ModelRequest[Any]:
    return ModelRequest(
        model=fake_model(),
        messages=history,
        system_message=SystemMessage(system) if system is not None else None,
        tools=[],
    )


def never_called(trimmed: ModelRequest[Any]) -> Any:
    pytest.fail("the model was called despite a bad message")


async def anever_called(trimmed: ModelRequest[Any]) -> Any:
    pytest.fail("the model was called despite a bad message")


# -- the command line ---------------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    """``turntrim ARGS`` on a file ``chat.json`` holding the case's history as JSON.

    ``text`` replaces the JSON of the history; ``missing`` names a file that
    does not exist. ``{file}`` in ``args`` is replaced by the file's path.
    """

    args: tuple[str, ...]
    text: str | None = None
    missing: bool = False


def cli(*args: str, text: str | None = None, missing: bool = False, command: str = "trim") -> Cli:
    return Cli((command, "{file}", *args), text, missing)


def without_field(field: str) -> AIMessage:
    """The message with id 'a2', its ``field`` deleted from its ``__dict__``."""
    message = AIMessage("hello", id="a2")
    del vars(message)[field]
    return message


# -- the table ------------------------------------------------------------------------------


def p(call: Any, history: Any, expected: Any, fragment: str, id: str) -> Any:  # noqa: A002 - pytest.param's name
    return pytest.param(call, history, expected, fragment, id=id)


def _max_tokens_cases() -> list[Any]:
    """Each bad budget, at each entry point that takes one."""
    bad = [
        ("negative", -1, ValueError, "max_tokens must be >= 0, got -1"),
        ("float", 1.5, TypeError, "max_tokens must be an int, got float 1.5"),
        ("bool", True, TypeError, "max_tokens must be an int, got bool True"),
        ("None", None, TypeError, "max_tokens must be an int, got NoneType None"),
        ("str", "100", TypeError, "max_tokens must be an int, got str '100'"),
    ]
    cases = []
    for name, budget, error, fragment in bad:
        cases += [
            p(
                lambda h, b=budget: trim_history(h, b),
                records(rec("a2", "assistant", 5)),
                error,
                fragment,
                f"trim_history-max_tokens-{name}",
            ),
            p(
                lambda h, b=budget: TurnTrimmer(max_tokens=b),
                None,
                error,
                fragment,
                f"TurnTrimmer-max_tokens-{name}",
            ),
            p(
                lambda h, b=budget: trim_turns(h, max_tokens=b, token_counter="approximate"),
                good_messages(),
                error,
                fragment,
                f"trim_turns-max_tokens-{name}",
            ),
            p(
                lambda h, b=budget: TurnTrimMiddleware(max_tokens=b),
                None,
                error,
                fragment,
                f"TurnTrimMiddleware-max_tokens-{name}",
            ),
        ]
    return cases


#: Every entry point that takes a history of messages.
MESSAGE_ENTRY_POINTS: dict[str, Callable[[Any], Any]] = {
    "invoke": lambda h: TurnTrimmer(max_tokens=100).invoke(h),
    "ainvoke": lambda h: arun(TurnTrimmer(max_tokens=100).ainvoke(h)),
    "trim": lambda h: TurnTrimmer(max_tokens=100).trim(h),
    "trim_with_report": lambda h: TurnTrimmer(max_tokens=100).trim_with_report(h),
    "trim_turns": lambda h: trim_turns(h, max_tokens=100),
    "trim_update": lambda h: trim_update(h, TurnTrimmer(max_tokens=100)),
    "trim_request": lambda h: TurnTrimMiddleware(max_tokens=100).trim_request(request(h)),
    "state_update": lambda h: TurnTrimStateMiddleware(max_tokens=100).state_update(h),
}
_AT_ENTRY = ("trim_request", "state_update")  # messages are not converted there


def _message_cases() -> list[Any]:
    """Each bad message, at each entry point that takes messages."""
    unrepresentable = "<BrokenRepr object (its repr failed)>"
    bad: list[tuple[str, Callable[[], Any], type[Exception], str, str]] = [
        (
            "ChatMessage-role-compares-like-user",
            lambda: chat(LyingRole()),
            TypeError,
            "messages[2] (id 'c2'): ChatMessage role must be a str, got LyingRole",
            "",
        ),
        (
            "ChatMessage-role-str-lying-about-its-value",
            lambda: chat(LyingStr("User")),
            ValueError,
            "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
            "",
        ),
        (
            "ChatMessage-unknown-role-id-with-broken-repr",
            lambda: chat("robot", BrokenReprStr("c2")),
            ValueError,
            "messages[2] (id <BrokenReprStr object (its repr failed)>): unknown ChatMessage role",
            "",
        ),
        (
            "ChatMessage-role-with-broken-repr",
            lambda: chat(BrokenRepr()),
            TypeError,
            (
                "messages[2] (id 'c2'): ChatMessage role must be a str, "
                f"got BrokenRepr {unrepresentable}"
            ),
            "",
        ),
        (
            "non-message-with-broken-repr",
            BrokenRepr,
            TypeError,
            f"messages[2] is not a message (BrokenRepr {unrepresentable}",
            "messages[2]: unsupported message type BrokenRepr",
        ),
    ]
    cases = []
    for name, build, error, fragment, at_entry in bad:
        for entry, call in MESSAGE_ENTRY_POINTS.items():
            expected = at_entry if entry in _AT_ENTRY and at_entry else fragment
            cases.append(p(call, messages(build()), error, expected, f"{entry}-{name}"))
    return cases


def _record_cases() -> list[Any]:
    """Records whose values fail or lie, at ``trim_history`` and the command line."""
    return [
        p(
            lambda h: trim_history(h, 10),
            records(rec(BrokenReprStr("x2"), "User", 5)),
            ValueError,
            "messages[2] (id <BrokenReprStr object (its repr failed)>): unknown 'role' 'User'",
            "trim_history-id-with-broken-repr",
        ),
        p(
            lambda h: trim_history(h, 10),
            records({"id": BrokenRepr(), "role": "assistant", "tokens": -1}),
            ValueError,
            "messages[2] (id <BrokenRepr object (its repr failed)>): 'tokens' must be >= 0",
            "trim_history-non-str-id-with-broken-repr",
        ),
        p(
            lambda h: trim_history(h, 10),
            records(rec("x2", BrokenRepr(), 5)),
            TypeError,
            "messages[2] (id 'x2'): 'role' must be a str, got BrokenRepr <BrokenRepr object",
            "trim_history-role-with-broken-repr",
        ),
        p(
            lambda h: trim_history(h, 10),
            records(rec("x2", "assistant", BrokenRepr())),
            TypeError,
            "messages[2] (id 'x2'): 'tokens' must be an int, got BrokenRepr <BrokenRepr object",
            "trim_history-tokens-with-broken-repr",
        ),
        p(
            lambda h: trim_history(h, 10),
            records(rec("x2", "assistant", BrokenReprInt(-3))),
            ValueError,
            "messages[2] (id 'x2'): 'tokens' must be >= 0, got -3",
            "trim_history-negative-tokens-with-broken-repr",
        ),
        p(
            lambda h: trim_history(h, 10),
            records(rec("x2", LyingRole(), 5)),
            TypeError,
            "messages[2] (id 'x2'): 'role' must be a str, got LyingRole",
            "trim_history-role-compares-like-user",
        ),
        p(
            lambda h: trim_history(h, 10),
            records(rec("x2", LyingStr("usr"), 5)),
            ValueError,
            "messages[2] (id 'x2'): unknown 'role' 'usr'",
            "trim_history-role-str-lying-about-its-value",
        ),
        p(
            lambda h: trim_history(h, 10),
            records(rec("x2", "assistant", LyingInt(-5))),
            ValueError,
            "messages[2] (id 'x2'): 'tokens' must be >= 0, got -5",
            "trim_history-tokens-int-lying-about-its-sign",
        ),
        p(
            lambda h: trim_history(h, 10),
            [rec("s0", "system", 5), rec("u1", "user", LyingInt(-5)), rec("x2", "assistant", 1)],
            ValueError,
            "messages[1] (id 'u1'): 'tokens' must be >= 0, got -5",
            "trim_history-tokens-lying-int-opening-a-turn",
        ),
    ]


def _option_cases() -> list[Any]:
    """Options whose values fail or lie, at every constructor."""
    lying, broken = LyingInt(-1), BrokenRepr()
    builders: dict[str, Callable[..., Any]] = {
        "TurnTrimmer": TurnTrimmer,
        "TurnTrimMiddleware": TurnTrimMiddleware,
        "TurnTrimStateMiddleware": TurnTrimStateMiddleware,
        "trim_turns": trim_turns,
    }
    bad: list[tuple[str, dict[str, Any], type[Exception], str]] = [
        ("max_tokens-lying-int", {"max_tokens": lying}, ValueError, "max_tokens must be >= 0"),
        (
            "max_tokens-with-broken-repr",
            {"max_tokens": broken},
            TypeError,
            "max_tokens must be an int, got BrokenRepr <BrokenRepr object (its repr failed)>",
        ),
        (
            "cache_size-lying-int",
            {"max_tokens": 10, "cache_size": lying},
            ValueError,
            "cache_size must be >= 0, got -1",
        ),
        (
            "on_overflow-with-broken-repr",
            {"max_tokens": 10, "on_overflow": broken},
            ValueError,
            "on_overflow must be 'drop', 'raise' or 'compact', got <BrokenRepr object",
        ),
        (
            "token_counter-with-broken-repr",
            {"max_tokens": 10, "token_counter": broken},
            TypeError,
            "got BrokenRepr <BrokenRepr object (its repr failed)>",
        ),
    ]
    cases = [
        p(lambda h, b=build, k=kw: b(**k), None, error, fragment, f"{name}-{option}")
        for name, build in builders.items()
        for option, kw, error, fragment in bad
    ]
    for name, build in (("TurnTrimmer", TurnTrimmer), ("TurnTrimMiddleware", TurnTrimMiddleware)):
        cases.append(
            p(
                lambda h, b=build: b.for_model(
                    fake_model({"max_input_tokens": 100}), reserve_tokens=lying
                ),
                None,
                ValueError,
                "reserve_tokens must be >= 0, got -1",
                f"{name}.for_model-reserve-lying-int",
            )
        )
    cases += [
        p(
            lambda h, o=option: trim_turns(h, max_tokens=10, **{o: broken}),  # type: ignore[call-overload]
            good_messages(),
            ValueError,
            f"trim_turns does not support {option}=<BrokenRepr object (its repr failed)>",
            f"trim_turns-{option}-with-broken-repr",
        )
        for option in ("strategy", "start_on", "end_on")
    ]
    return cases


def _assignment_cases() -> list[Any]:
    """Configuration changed after construction: refused, whatever the value."""
    owners: dict[str, Callable[[], object]] = {
        "TurnTrimmer": lambda: TurnTrimmer(max_tokens=10),
        "trim_turns": lambda: trim_turns(max_tokens=10),
        "TurnTrimMiddleware.trimmer": lambda: TurnTrimMiddleware(max_tokens=10).trimmer,
    }
    values = {
        "max_tokens": -3,
        "token_counter": "exact",
        "on_overflow": "x",
        "keep_tool_results": -1,
        "trim_to": 5,
        "cache_size": 5,
    }
    cases = [
        p(
            lambda h, o=owner, f=field, v=value: setattr(o(), f, v),
            None,
            AttributeError,
            f".{field} cannot be changed after construction",
            f"{name}-assign-{field}",
        )
        for name, owner in owners.items()
        for field, value in values.items()
    ]
    cases.append(
        p(
            lambda h: delattr(TurnTrimmer(max_tokens=10), "max_tokens"),
            None,
            AttributeError,
            "TurnTrimmer.max_tokens cannot be changed after construction",
            "TurnTrimmer-delete-max_tokens",
        )
    )
    cases.append(
        p(
            lambda h: setattr(TurnTrimMiddleware(max_tokens=10), "max_tokens", -3),
            None,
            AttributeError,
            "'max_tokens'",  # a property without a setter (worded per Python version)
            "TurnTrimMiddleware-assign-max_tokens",
        )
    )
    return cases


def _counter_cases() -> list[Any]:
    """Counters that answer badly, cached and not."""
    a2 = "messages[2] (id 'a2')"
    bad: list[tuple[str, Any, type[Exception], str]] = [
        (
            "returns-an-int",
            Answering(lambda ms: 3),
            TypeError,
            "Answering().count_each returned int, expected a list of one int per message",
        ),
        (
            "returns-a-str",
            Answering(lambda ms: "111"),
            TypeError,
            "Answering().count_each returned str",
        ),
        (
            "generator-with-a-negative-count",
            Answering(lambda ms: (-1 if m.id == "a2" else 1 for m in ms)),
            ValueError,
            f"Answering() counted {a2} as -1",
        ),
        (
            "lying-int-count",
            BadCounter(LyingInt(-5)),
            ValueError,
            f"BadCounter() counted {a2} as -5, expected a count >= 0",
        ),
        (
            "count-with-broken-repr",
            BadCounter(BrokenRepr()),
            TypeError,
            f"counted {a2} as BrokenRepr <BrokenRepr object (its repr failed)>, expected an int",
        ),
        (
            "counter-with-broken-repr",
            BrokenReprCounter(-1),
            ValueError,
            f"<BrokenReprCounter object (its repr failed)> counted {a2} as -1",
        ),
        (
            "overhead-lying-int",
            Answering(lambda ms: [1] * len(ms), overhead=LyingInt(-2)),
            ValueError,
            "Answering.overhead must be >= 0, got -2",
        ),
        (
            "overhead-float",
            Answering(lambda ms: [1] * len(ms), overhead=2.5),
            TypeError,
            "Answering.overhead must be an int, got float 2.5",
        ),
    ]
    cases = []
    for name, counter, error, fragment in bad:
        for size in (16, 0):
            where = "cached" if size else "uncached"
            cases.append(
                p(counter_case(counter, size), good_messages(), error, fragment, f"{where}-{name}")
            )
    for name, overhead, error, fragment in (
        ("float", 2.5, TypeError, "Answering.overhead must be an int, got float 2.5"),
        ("negative", -1, ValueError, "Answering.overhead must be >= 0, got -1"),
    ):
        counter = Answering(lambda ms: [1] * len(ms), overhead=overhead)
        cases.append(
            p(
                lambda h, c=counter: TurnTrimmer(max_tokens=10, token_counter=CachedCounter(c)),
                None,
                error,
                fragment,
                f"CachedCounter-given-directly-overhead-{name}",
            )
        )
    results: tuple[tuple[str, Any, type[Exception], str], ...] = (
        ("lying-int", LyingInt(-1), ValueError, "must be >= 0, got -1"),
        ("broken-repr", BrokenRepr(), TypeError, "must be an int, got BrokenRepr <BrokenRepr"),
    )
    for name, result, error, fragment in results:

        def whole(_messages: list[BaseMessage], r: Any = result) -> Any:
            return r

        def each(message: BaseMessage, r: Any = result) -> Any:
            return r if message.id == "a2" else 1

        cases += [
            p(
                counter_case(per_list(whole)),
                good_messages(),
                error,
                fragment,
                f"per_list-function-{name}",
            ),
            p(
                counter_case(per_message(each)),
                good_messages(),
                error,
                "messages[2] (id 'a2')",
                f"per_message-function-{name}",
            ),
        ]
    return cases


def _profile_cases() -> list[Any]:
    """Profiles whose token limits are not token counts, at both ``for_model``."""
    inputs = "GenericFakeChatModel's profile['max_input_tokens'] must be a positive int"
    outputs = "GenericFakeChatModel's profile['max_output_tokens'] must be an int >= 0"
    bad: list[tuple[str, dict[str, Any], type[Exception], str]] = [
        ("negative", {"max_input_tokens": -5}, ValueError, f"{inputs} (a token count), got -5"),
        ("zero", {"max_input_tokens": 0}, ValueError, f"{inputs} (a token count), got 0"),
        (
            "fraction",
            {"max_input_tokens": 1000.5},
            TypeError,
            f"{inputs} (a token count), got float",
        ),
        ("str", {"max_input_tokens": "128000"}, TypeError, f"{inputs} (a token count), got str"),
        ("bool", {"max_input_tokens": True}, TypeError, f"{inputs} (a token count), got bool"),
        ("nan", {"max_input_tokens": float("nan")}, TypeError, f"{inputs} (a token count), got"),
        (
            "output-negative",
            {"max_input_tokens": 1000, "max_output_tokens": -5},
            ValueError,
            f"{outputs} (a token count), got -5",
        ),
        (
            "output-str",
            {"max_input_tokens": 1000, "max_output_tokens": "x"},
            TypeError,
            f"{outputs} (a token count), got str 'x'",
        ),
    ]
    return [
        p(
            lambda h, b=build, pr=profile: b.for_model(profiled(pr)),
            None,
            error,
            fragment,
            f"{name}.for_model-profile-{case}",
        )
        for name, build in (
            ("TurnTrimmer", TurnTrimmer),
            ("TurnTrimMiddleware", TurnTrimMiddleware),
        )
        for case, profile, error, fragment in bad
    ]


def _tools_cases() -> list[Any]:
    """Tools that are not tools, at every counter's ``count_tools`` and a trim."""
    counters: dict[str, Callable[[], Any]] = {
        "ApproximateCounter": ApproximateCounter,
        "TiktokenCounter": lambda: TiktokenCounter("gpt-4"),
        "CalibratedCounter": CalibratedCounter,
        "CalibratedCounter-tiktoken": lambda: CalibratedCounter(TiktokenCounter("gpt-4")),
        "CachedCounter": lambda: CachedCounter(BadCounter(1)),
        "per_message": lambda: per_message(minus_one_for_a2),
    }
    expected = "a tool schema dict, a BaseTool, a pydantic model class or a function"
    bad: list[tuple[str, Any, str]] = [
        ("int", [1], f"tools[0] must be {expected}, got int 1"),
        ("None", [{"name": "f"}, None], f"tools[1] must be {expected}, got NoneType None"),
        ("name-only", ["get_weather"], "tools[0] must be a tool schema dict, a BaseTool"),
        ("broken-repr", [BrokenRepr()], "got BrokenRepr <BrokenRepr object (its repr failed)>"),
        ("str", "get_weather", "tools must be a sequence of tools, got str"),
    ]
    cases = [
        p(
            lambda h, b=build, t=tools: resolve_counter(b()).count_tools(t),  # type: ignore[union-attr]
            None,
            TypeError,
            fragment,
            f"{name}.count_tools-{case}",
        )
        for name, build in counters.items()
        for case, tools, fragment in bad
    ]
    cases += [
        p(
            lambda h, t=tools: TurnTrimmer(max_tokens=100).report(h, tools=t),
            good_messages(),
            TypeError,
            fragment,
            f"report-tools-{case}",
        )
        for case, tools, fragment in bad
    ]
    cases.append(
        p(
            lambda h: CalibratedCounter().observe(h, 50, tools=[1]),
            good_messages(),
            TypeError,
            f"tools[0] must be {expected}, got int 1",
            "CalibratedCounter.observe-tools-int",
        )
    )
    return cases


def _construction_cases() -> list[Any]:
    """Counters refused when they are made, not at the first trim."""
    unrepresentable = "<BrokenRepr object (its repr failed)>"
    cases = [
        p(
            lambda h, b=build: TurnTrimmer(max_tokens=10, token_counter=b),
            None,
            TypeError,
            f"token_counter is the class {build.__name__}, not a counter: pass an instance of it",
            f"TurnTrimmer-token_counter-the-class-{build.__name__}",
        )
        for build in (ApproximateCounter, TiktokenCounter, CalibratedCounter, GenericFakeChatModel)
    ]
    cases += [
        p(
            lambda h: TurnTrimMiddleware(max_tokens=10, token_counter=ApproximateCounter),
            None,
            TypeError,
            "token_counter is the class ApproximateCounter, not a counter",
            "TurnTrimMiddleware-token_counter-a-class",
        ),
        p(
            lambda h: trim_turns(h, max_tokens=10, token_counter=ApproximateCounter),
            good_messages(),
            TypeError,
            "token_counter is the class ApproximateCounter, not a counter",
            "trim_turns-token_counter-a-class",
        ),
        p(
            lambda h: CalibratedCounter(ApproximateCounter),
            None,
            TypeError,
            "base is the class ApproximateCounter, not a counter: pass an instance of it",
            "CalibratedCounter-base-a-class",
        ),
        p(
            lambda h: CachedCounter(TiktokenCounter),  # type: ignore[arg-type]
            None,
            TypeError,
            "CachedCounter's counter is the class TiktokenCounter, not a counter",
            "CachedCounter-counter-a-class",
        ),
        p(
            lambda h: ApproximateCounter("x"),  # type: ignore[call-arg]
            None,
            TypeError,
            "ApproximateCounter() takes no arguments",
            "ApproximateCounter-an-argument",
        ),
        p(
            lambda h: CalibratedCounter(BrokenRepr()),
            None,
            TypeError,
            f"a TokenCounter), got BrokenRepr {unrepresentable}",
            "CalibratedCounter-base-with-broken-repr",
        ),
        p(
            lambda h: CalibratedCounter(margin=BrokenReprFloat(2.0)),
            None,
            ValueError,
            "margin must be between 0 and 1, got <BrokenReprFloat object (its repr failed)>",
            "CalibratedCounter-margin-with-broken-repr",
        ),
        p(
            lambda h: TiktokenCounter("gpt-4").image_tokens(5, 5, BrokenRepr()),  # type: ignore[arg-type]
            None,
            ValueError,
            f"detail must be 'low', 'high' or 'auto', got {unrepresentable}",
            "TiktokenCounter-image_tokens-detail-with-broken-repr",
        ),
        p(
            lambda h: TiktokenCounter(BrokenReprStr("gpt4o")),
            None,
            UnknownModelError,  # a ValueError
            "unknown OpenAI model <BrokenReprStr object (its repr failed)>",
            "TiktokenCounter-unknown-model-with-broken-repr",
        ),
        p(
            lambda h: TurnTrimMiddleware(max_tokens=10, overflow_retries=BrokenRepr()),  # type: ignore[arg-type]
            None,
            TypeError,
            f"overflow_retries must be an int >= 0, got BrokenRepr {unrepresentable}",
            "TurnTrimMiddleware-overflow_retries-with-broken-repr",
        ),
        p(
            lambda h: TurnTrimmer(max_tokens=10, context_value=BrokenReprFloat("nan")),
            None,
            ValueError,
            "must be finite and >= 0, got <BrokenReprFloat object (its repr failed)>",
            "TurnTrimmer-context_value-with-broken-repr",
        ),
        p(
            lambda h: CachedCounter(ApproximateCounter(), cache_size=-5),
            None,
            ValueError,
            "cache_size must be >= 0, got -5",
            "CachedCounter-cache_size-keyword-negative",
        ),
        p(
            lambda h: CacheClock(lambda: 0.0, threads=-1),
            None,
            ValueError,
            "threads must be >= 0, got -1",
            "CacheClock-threads-negative",
        ),
    ]
    return cases


def _kinds_cases() -> list[Any]:
    """Turn kinds given beside the messages (``trimmer.planner.plan``): the wrong
    number of them, or values that are not kinds, with every kind of planner."""
    counters: dict[str, Callable[[], Any]] = {
        "approximate": lambda: "approximate",
        "tiktoken": lambda: TiktokenCounter("gpt-4"),
        "per_list": lambda: per_list(lambda ms: 3 * len(ms)),
        "calibrated": CalibratedCounter,
    }
    bad: list[tuple[str, Any, type[Exception], str]] = [
        (
            "too-few",
            [0, 1],
            ValueError,
            "kinds has 2 items for 3 messages: expected one turn kind per message (or None)",
        ),
        ("too-many", [0, 1, 4, 1], ValueError, "kinds has 4 items for 3 messages"),
        (
            "unknown-kind",
            [0, 1, 9],
            ValueError,
            "kinds[2] must be one of PINNED=0, START=1, CONTINUE=2, ANCHOR=3, REPLY=4; got 9",
        ),
        ("str-kind", [0, 1, "assistant"], TypeError, "kinds[2] must be an int, one of PINNED=0"),
        ("str", "014", TypeError, "kinds must be a sequence of turn kinds (or None), got str"),
    ]
    return [
        p(
            lambda h, b=build, z=size, k=kinds: TurnTrimmer(
                max_tokens=100, token_counter=b(), cache_size=z
            ).planner.plan(h, k, 100),
            good_messages(),
            error,
            fragment,
            f"planner.plan-{name}-{'cached' if size else 'uncached'}-kinds-{case}",
        )
        for name, build in counters.items()
        for size in (16, 0)
        for case, kinds, error, fragment in bad
    ]


def _counted_every_way(
    counters: dict[str, Callable[[], Any]],
    history: list[Any],
    error: type[Exception],
    fragment: str,
    case: str,
) -> list[Any]:
    """``history`` trimmed with each of ``counters`` (cached and not), then at
    each entry point that takes messages: each raising ``error``."""
    cases = [
        p(
            lambda h, b=build, z=size: counter_case(b(), z)(h),
            history,
            error,
            fragment,
            f"{'cached' if size else 'uncached'}-{name}-{case}",
        )
        for name, build in counters.items()
        for size in (16, 0)
    ]
    cases += [
        p(call, history, error, fragment, f"{entry}-{case}")
        for entry, call in MESSAGE_ENTRY_POINTS.items()
    ]
    return cases


def _missing_field_cases() -> list[Any]:
    """A message with a field deleted from its ``__dict__``, counted every way."""

    def named(message: BaseMessage) -> int:  # reads the three fields deleted below
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        return len(message.text) + len(message.name or "") + len(calls)

    counters: dict[str, Callable[[], Any]] = {
        "approximate": lambda: "approximate",
        "tiktoken": lambda: TiktokenCounter("gpt-4"),
        "per_message": lambda: per_message(named),
        "per_list": lambda: per_list(lambda ms: sum(map(named, ms))),
        "calibrated": CalibratedCounter,
        "calibrated-tiktoken": lambda: CalibratedCounter(TiktokenCounter("gpt-4")),
    }
    cases = []
    for field in ("name", "content", "tool_calls"):
        fragment = f"messages[2] (id 'a2') has no {field!r} field: expected every field AIMessage"
        history = messages(without_field(field))
        cases += _counted_every_way(counters, history, ValueError, fragment, f"without-{field}")
        direct: dict[str, Callable[[Any], Any]] = {
            "ApproximateCounter": lambda h: ApproximateCounter().count_each(h),
            "TiktokenCounter": lambda h: TiktokenCounter("gpt-4").count_each(h),
            "CachedCounter": lambda h: CachedCounter(TiktokenCounter("gpt-4")).count_each(h),
            "CalibratedCounter": lambda h: CalibratedCounter().count_each(h),
            "CalibratedCounter.observe": lambda h: CalibratedCounter().observe(h, 100),
        }
        cases += [
            p(call, history, ValueError, fragment, f"{name}.count_each-without-{field}")
            for name, call in direct.items()
        ]
    return cases


def with_calls(field: str, calls: Any) -> AIMessage:
    """The message with id 'a2', its ``field`` reassigned to ``calls`` (not validated)."""
    message = AIMessage("hello", id="a2")
    setattr(message, field, calls)
    return message


def _malformed_call_cases() -> list[Any]:
    """Tool calls reassigned to something that is not a list of tool calls,
    counted every way: one error naming the message, never a bare one."""
    at = "messages[2] (id 'a2'): "
    bad: list[tuple[str, str, Any, type[Exception], str]] = [
        ("str-call", "tool_calls", ["call"], TypeError, "tool_calls[0] must be a tool call dict"),
        (
            "int",
            "tool_calls",
            5,
            TypeError,
            "tool_calls must be a list of tool call dicts, got int 5",
        ),
        ("str", "tool_calls", "call", TypeError, "tool_calls must be a list of tool call dicts"),
        ("None-call", "invalid_tool_calls", [None], TypeError, "invalid_tool_calls[0] must be a"),
    ]
    counters: dict[str, Callable[[], Any]] = {
        "approximate": lambda: "approximate",
        "tiktoken": lambda: TiktokenCounter("gpt-4"),
        "calibrated": CalibratedCounter,
    }
    cases = []
    for case, field, calls, error, fragment in bad:
        history = messages(with_calls(field, calls))
        cases += _counted_every_way(counters, history, error, at + fragment, f"{field}-{case}")
    # A counter that reads a call's name and arguments finds them missing.
    keyless = messages(with_calls("tool_calls", [{"id": "c"}]))
    cases += [
        p(
            lambda h, z=size: counter_case(TiktokenCounter("gpt-4"), z)(h),
            keyless,
            ValueError,
            at
            + "tool_calls[0] has no 'name' and 'args': a tool call holds 'name', 'args' and 'id'",
            f"{'cached' if size else 'uncached'}-tiktoken-tool_calls-without-name-and-args",
        )
        for size in (16, 0)
    ]
    return cases


CASES = [
    # -- trim_history: the container ----------------------------------------------------
    p(
        lambda h: trim_history(h, 10),
        None,
        TypeError,
        "messages must be a sequence of mappings, got NoneType",
        "trim_history-None",
    ),
    p(
        lambda h: trim_history(h, 10),
        "user: hi",
        TypeError,
        "messages must be a sequence of mappings, got str",
        "trim_history-str",
    ),
    p(
        lambda h: trim_history(h, 10),
        rec("u1", "user", 5),
        TypeError,
        "messages must be a sequence of mappings, got dict",
        "trim_history-a-single-record",
    ),
    # -- trim_history: the records -------------------------------------------------------
    p(
        lambda h: trim_history(h, 10),
        records(["user", 5]),
        TypeError,
        "messages[2] must be a mapping, got list",
        "trim_history-record-not-a-mapping",
    ),
    p(
        lambda h: trim_history(h, 10),
        records({"id": "x2", "tokens": 5}),
        ValueError,
        "messages[2] (id 'x2') has no 'role' field",
        "trim_history-missing-role",
    ),
    p(
        lambda h: trim_history(h, 10),
        records({"id": "x2", "role": "assistant"}),
        ValueError,
        "messages[2] (id 'x2') has no 'tokens' field",
        "trim_history-missing-tokens",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", "User", 5)),
        ValueError,
        "messages[2] (id 'x2'): unknown 'role' 'User'",
        "trim_history-role-typo",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", None, 5)),
        TypeError,
        "messages[2] (id 'x2'): 'role' must be a str, got NoneType",
        "trim_history-role-None",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", ["user"], 5)),
        TypeError,
        "messages[2] (id 'x2'): 'role' must be a str, got list",
        "trim_history-role-unhashable",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", "assistant", True)),
        TypeError,
        "messages[2] (id 'x2'): 'tokens' must be an int, got bool True",
        "trim_history-tokens-bool",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", "assistant", 2.0)),
        TypeError,
        "messages[2] (id 'x2'): 'tokens' must be an int, got float 2.0",
        "trim_history-tokens-float",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", "assistant", "2")),
        TypeError,
        "messages[2] (id 'x2'): 'tokens' must be an int, got str '2'",
        "trim_history-tokens-str",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", "assistant", None)),
        TypeError,
        "messages[2] (id 'x2'): 'tokens' must be an int, got NoneType None",
        "trim_history-tokens-None",
    ),
    p(
        lambda h: trim_history(h, 10),
        records(rec("x2", "assistant", -3)),
        ValueError,
        "messages[2] (id 'x2'): 'tokens' must be >= 0, got -3",
        "trim_history-tokens-negative",
    ),
    # -- bad budgets everywhere ------------------------------------------------------------
    *_max_tokens_cases(),
    # -- the TurnTrimmer constructor -----------------------------------------------------
    p(
        lambda h: TurnTrimmer(max_tokens=10, token_counter="exact"),
        None,
        ValueError,
        "unknown token_counter shortcut 'exact'",
        "TurnTrimmer-unknown-counter-shortcut",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=10, token_counter=42),
        None,
        TypeError,
        "token_counter must be 'approximate', 'tiktoken:MODEL'",
        "TurnTrimmer-non-counter-object",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=10, on_overflow="truncate"),  # type: ignore[arg-type]
        None,
        ValueError,
        "on_overflow must be 'drop', 'raise' or 'compact', got 'truncate'",
        "TurnTrimmer-bad-on_overflow",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=10, cache_size=-1),
        None,
        ValueError,
        "cache_size must be >= 0, got -1",
        "TurnTrimmer-cache_size-negative",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=10, cache_size=1.5),  # type: ignore[arg-type]
        None,
        TypeError,
        "cache_size must be an int, got float 1.5",
        "TurnTrimmer-cache_size-float",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=10, cache_size=None),  # type: ignore[arg-type]
        None,
        TypeError,
        "got None",
        "TurnTrimmer-cache_size-None",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=10, cache_size=False),
        None,
        TypeError,
        "cache_size must be an int, got bool False",
        "TurnTrimmer-cache_size-bool",
    ),
    # -- TurnTrimmer calls ---------------------------------------------------------------
    p(
        lambda h: TurnTrimmer(max_tokens=100).invoke(h),
        None,
        TypeError,
        "expected a sequence of messages or a PromptValue, got NoneType",
        "invoke-None",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=100).invoke(h),
        "hi there",
        TypeError,
        "expected a sequence of messages or a PromptValue, got str",
        "invoke-str",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=100).invoke(h),
        messages(BAD_CHAT),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
        "invoke-ChatMessage-unknown-role",
    ),
    p(
        lambda h: arun(TurnTrimmer(max_tokens=100).ainvoke(h)),
        messages(ChatMessage(content="x", role="robot", id="c2")),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'robot'",
        "ainvoke-ChatMessage-unknown-role",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=100).invoke(h),
        messages(RemoveMessage(id="r2")),
        TypeError,
        "messages[2] (id 'r2') is a RemoveMessage",
        "invoke-RemoveMessage",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=100).trim(h),
        messages(42),
        TypeError,
        "messages[2] is not a message (int 42)",
        "trim-non-message",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=100).trim_with_report(h),
        messages({"role": "User", "content": "x", "id": "d2"}),
        TypeError,
        "messages[2] (id 'd2') is not a message",
        "trim_with_report-dict-with-unknown-role",
    ),
    p(
        lambda h: TurnTrimmer(max_tokens=100).batch([good_messages(), h]),
        messages({"role": "user", "content": 42, "id": "d2"}),
        TypeError,
        "messages[2] (id 'd2') is not a message",
        "batch-dict-with-bad-content",
    ),
    # -- counters -------------------------------------------------------------------------
    p(
        counter_case(BadCounter(-1)),
        good_messages(),
        ValueError,
        "BadCounter() counted messages[2] (id 'a2') as -1, expected a count >= 0",
        "counter-negative",
    ),
    p(
        counter_case(BadCounter(1.5)),
        good_messages(),
        TypeError,
        "BadCounter() counted messages[2] (id 'a2') as float 1.5, expected an int",
        "counter-non-int",
    ),
    p(
        counter_case(BadCounter(1, drop_one=True)),
        good_messages(),
        ValueError,
        "returned 2 counts for 3 messages",
        "counter-wrong-length",
    ),
    p(
        counter_case(BadCounter(-1), cache_size=0),
        good_messages(),
        ValueError,
        "messages[2] (id 'a2')",
        "counter-negative-uncached",
    ),
    p(
        counter_case(BadCounter(1.5), cache_size=0),
        good_messages(),
        TypeError,
        "messages[2] (id 'a2')",
        "counter-non-int-uncached",
    ),
    p(
        counter_case(BadCounter(1, drop_one=True), cache_size=0),
        good_messages(),
        ValueError,
        "returned 2 counts for 3 messages",
        "counter-wrong-length-uncached",
    ),
    p(
        counter_case(per_message(minus_one_for_a2)),
        good_messages(),
        ValueError,
        "counted messages[2] (id 'a2') as -1, expected a count >= 0",
        "per_message-function-negative",
    ),
    p(
        counter_case(per_list(lambda ms: -1)),
        good_messages(),
        ValueError,
        "must be >= 0, got -1",
        "per_list-function-negative",
    ),
    p(
        counter_case(per_list(lambda ms: "7")),  # type: ignore[arg-type, return-value]
        good_messages(),
        TypeError,
        "must be an int, got str '7'",
        "per_list-function-non-int",
    ),
    p(
        lambda h: per_message(42),  # type: ignore[arg-type]
        None,
        TypeError,
        "per_message needs a callable, got int",
        "per_message-non-callable",
    ),
    p(
        lambda h: per_list("len"),  # type: ignore[arg-type]
        None,
        TypeError,
        "per_list needs a callable, got str",
        "per_list-non-callable",
    ),
    p(
        lambda h: CachedCounter(len),  # type: ignore[arg-type]
        None,
        TypeError,
        "CachedCounter wraps a TokenCounter, got builtin_function_or_method",
        "CachedCounter-non-counter",
    ),
    p(
        lambda h: CachedCounter(ApproximateCounter(), -5),
        None,
        ValueError,
        "got -5",
        "CachedCounter-maxsize-negative",
    ),
    p(
        lambda h: ApproximateCounter().count_each(h),
        messages(42),
        TypeError,
        "messages[2]",
        "ApproximateCounter-count_each-non-message",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4").count_each(h),
        messages(42),
        TypeError,
        "messages[2]",
        "TiktokenCounter-count_each-non-message",
    ),
    # -- TiktokenCounter ---------------------------------------------------------------------
    p(
        lambda h: TiktokenCounter("gpt-4", encoding="cl100k_base"),
        None,
        ValueError,
        "pass either model or encoding to TiktokenCounter, not both",
        "TiktokenCounter-model-and-encoding",
    ),
    p(
        lambda h: TiktokenCounter(4),  # type: ignore[arg-type]
        None,
        TypeError,
        "model must be a str, got int",
        "TiktokenCounter-model-not-str",
    ),
    p(
        lambda h: TiktokenCounter(encoding=b"cl100k_base"),  # type: ignore[arg-type]
        None,
        TypeError,
        "encoding must be a str or a tiktoken.Encoding, got bytes",
        "TiktokenCounter-encoding-wrong-type",
    ),
    p(
        lambda h: TiktokenCounter(encoding="no_such_base"),
        None,
        ValueError,
        "unknown tiktoken encoding 'no_such_base'",
        "TiktokenCounter-unknown-encoding",
    ),
    p(
        lambda h: TiktokenCounter(" "),
        None,
        ValueError,
        "model must be a non-empty model name",
        "TiktokenCounter-blank-model",
    ),
    p(
        lambda h: TiktokenCounter("gpt4o"),
        None,
        UnknownModelError,  # a ValueError
        "unknown OpenAI model 'gpt4o' (closest known: 'gpt-4o'",
        "TiktokenCounter-unknown-model",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4", url_image_tokens="500"),  # type: ignore[arg-type]
        None,
        TypeError,
        "url_image_tokens must be an int, got str",
        "TiktokenCounter-url_image_tokens-not-int",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4", url_image_tokens=True),
        None,
        TypeError,
        "url_image_tokens must be an int, got bool",
        "TiktokenCounter-url_image_tokens-bool",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4", url_image_tokens=-1),
        None,
        ValueError,
        "url_image_tokens must be >= 0, got -1",
        "TiktokenCounter-url_image_tokens-negative",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4").image_tokens(0, 5),
        None,
        ValueError,
        "width must be >= 1, got 0",
        "TiktokenCounter-image_tokens-zero-width",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4").image_tokens(5, 2.5),  # type: ignore[arg-type]
        None,
        TypeError,
        "height must be an int, got float",
        "TiktokenCounter-image_tokens-float-height",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4").image_tokens(5, 5, "medium"),
        None,
        ValueError,
        "detail must be 'low', 'high' or 'auto', got 'medium'",
        "TiktokenCounter-image_tokens-bad-detail",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4").count_tools(h),
        "get_current_weather",
        TypeError,
        "tools must be a sequence of tools, got str",
        "TiktokenCounter-count_tools-str",
    ),
    p(
        lambda h: TiktokenCounter("gpt-4").count_tools(h),
        5,
        TypeError,
        "tools must be a sequence of tools, got int",
        "TiktokenCounter-count_tools-int",
    ),
    # -- for_model ------------------------------------------------------------------------
    p(
        lambda h: TurnTrimmer.for_model(fake_model()),
        None,
        ValueError,
        "GenericFakeChatModel has no profile['max_input_tokens']",
        "TurnTrimmer.for_model-no-profile",
    ),
    p(
        lambda h: TurnTrimmer.for_model(fake_model({"max_input_tokens": 100}), reserve_tokens=101),
        None,
        ValueError,
        "reserve_tokens (101) exceeds the model's max_input_tokens (100)",
        "TurnTrimmer.for_model-reserve-too-large",
    ),
    p(
        lambda h: TurnTrimmer.for_model(fake_model({"max_input_tokens": 100}), reserve_tokens=-1),
        None,
        ValueError,
        "reserve_tokens must be >= 0, got -1",
        "TurnTrimmer.for_model-reserve-negative",
    ),
    p(
        lambda h: TurnTrimMiddleware.for_model(fake_model({})),
        None,
        ValueError,
        "GenericFakeChatModel has no profile['max_input_tokens']",
        "TurnTrimMiddleware.for_model-no-profile",
    ),
    p(
        lambda h: TurnTrimMiddleware.for_model(
            fake_model({"max_input_tokens": 100}), reserve_tokens=500
        ),
        None,
        ValueError,
        "reserve_tokens (500) exceeds the model's max_input_tokens (100)",
        "TurnTrimMiddleware.for_model-reserve-too-large",
    ),
    # -- trim_turns -----------------------------------------------------------------------
    p(
        lambda h: trim_turns(h, max_tokens=10, token_counter="approximate", strategy="first"),
        good_messages(),
        ValueError,
        "trim_turns does not support strategy='first'",
        "trim_turns-strategy-first",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=10, token_counter="approximate", allow_partial=True),
        good_messages(),
        ValueError,
        "trim_turns does not support allow_partial=True",
        "trim_turns-allow_partial",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=10, token_counter="approximate", include_system=False),
        good_messages(),
        ValueError,
        "trim_turns does not support include_system=False",
        "trim_turns-include_system-False",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=10, token_counter="approximate", start_on="ai"),
        good_messages(),
        ValueError,
        "trim_turns does not support start_on='ai'",
        "trim_turns-start_on-ai",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=10, token_counter="exact"),
        good_messages(),
        ValueError,
        "unknown token_counter shortcut 'exact'",
        "trim_turns-unknown-counter-shortcut",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=100, token_counter="approximate"),
        messages(BAD_CHAT),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
        "trim_turns-ChatMessage-unknown-role",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=100, token_counter="approximate"),
        messages({"role": "bot", "content": "x", "id": "d2"}),
        TypeError,
        "messages[2] (id 'd2') is not a message",
        "trim_turns-dict-with-unknown-role",
    ),
    # -- removals / trim_update --------------------------------------------------------------
    p(
        lambda h: trim_update(h, TurnTrimmer(max_tokens=10)),
        NO_ID,
        ValueError,
        "messages[1] is dropped but has no id",
        "trim_update-dropped-without-id",
    ),
    p(
        lambda h: removals(TurnTrimmer(max_tokens=10).trim_with_report(h)),
        NO_ID,
        ValueError,
        "messages[1] is dropped but has no id",
        "removals-dropped-without-id",
    ),
    p(
        lambda h: trim_update(h, TurnTrimmer(max_tokens=100)),
        messages(RemoveMessage(id="r2")),
        TypeError,
        "messages[2] (id 'r2') is a RemoveMessage",
        "trim_update-RemoveMessage",
    ),
    p(
        lambda h: TurnTrimmer(10, cache_sise=3),  # type: ignore[call-arg]
        None,
        TypeError,
        "TurnTrimmer() got an unexpected keyword argument 'cache_sise' (did you mean "
        "'cache_size'?); its options are token_counter, on_overflow, keep_tool_results, "
        "trim_to, cache_size",
        "TurnTrimmer-misspelt-option",
    ),
    p(
        lambda h: trim_turns(h, max_tokens=10, on_overflw="drop"),  # type: ignore[call-overload]
        good_messages(),
        TypeError,
        "trim_turns() got an unexpected keyword argument 'on_overflw' (did you mean "
        "'on_overflow'?)",
        "trim_turns-misspelt-option",
    ),
    # -- TurnTrimMiddleware ------------------------------------------------------------------
    p(
        lambda h: TurnTrimMiddleware(max_tokens=10, mode="state"),  # type: ignore[call-arg]
        None,
        TypeError,
        "unexpected keyword argument 'mode'",
        "TurnTrimMiddleware-mode-is-a-class",
    ),
    p(
        lambda h: TurnTrimMiddleware(10, "approximate"),  # type: ignore[call-arg, arg-type]
        None,
        TypeError,
        "takes 2 positional arguments but 3 were given",
        "TurnTrimMiddleware-options-are-keyword-only",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=10, on_overflow="truncate"),  # type: ignore[arg-type]
        None,
        ValueError,
        "on_overflow must be 'drop', 'raise' or 'compact', got 'truncate'",
        "TurnTrimMiddleware-bad-on_overflow",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=10, token_counter="exact"),
        None,
        ValueError,
        "unknown token_counter shortcut 'exact'",
        "TurnTrimMiddleware-unknown-counter-shortcut",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=10, cache_size=-1),
        None,
        ValueError,
        "got -1",
        "TurnTrimMiddleware-cache_size-negative",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=100).trim_request(request(h)),
        messages(BAD_CHAT),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
        "trim_request-ChatMessage-unknown-role",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=100).trim_request(request(h, system=None)),
        messages(BAD_CHAT),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
        "trim_request-no-system-ChatMessage-unknown-role",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=100).trim_request(request(h)),
        messages(RemoveMessage(id="r2")),
        TypeError,
        "messages[2] (id 'r2') is a RemoveMessage",
        "trim_request-RemoveMessage",
    ),
    p(
        lambda h: TurnTrimMiddleware(max_tokens=100).wrap_model_call(request(h), never_called),
        messages(BAD_CHAT),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
        "wrap_model_call-ChatMessage-unknown-role",
    ),
    p(
        lambda h: arun(
            TurnTrimMiddleware(max_tokens=100).awrap_model_call(request(h), anever_called)
        ),
        messages(42),
        TypeError,
        "messages[2]: unsupported message type int",
        "awrap_model_call-non-message",
    ),
    p(
        lambda h: TurnTrimStateMiddleware(max_tokens=100).state_update(h),
        messages(BAD_CHAT),
        ValueError,
        "messages[2] (id 'c2'): unknown ChatMessage role 'User'",
        "state_update-ChatMessage-unknown-role",
    ),
    p(
        lambda h: TurnTrimStateMiddleware(max_tokens=10).state_update(h),
        NO_ID,
        ValueError,
        "messages[1] is dropped but has no id",
        "state_update-dropped-without-id",
    ),
    # -- the command line ----------------------------------------------------------------
    p(
        cli("--max-tokens", "10", missing=True),
        None,
        EXIT_2,
        "cannot read ",
        "cli-missing-file",
    ),
    p(
        cli("--max-tokens", "10", text='[{"role": "user", "content": "hi"'),
        None,
        EXIT_2,
        "chat.json: invalid JSON at line 1",
        "cli-invalid-json",
    ),
    p(
        cli("--max-tokens", "10", text="[" * 100_000 + "]" * 100_000),
        None,
        EXIT_2,
        "chat.json",
        "cli-json-nested-too-deep",
    ),
    p(
        cli("--max-tokens", "10"),
        {"messages": "hi"},
        EXIT_2,
        "'messages' must be an array, got a string",
        "cli-messages-not-an-array",
    ),
    p(
        cli("--max-tokens", "10"),
        [
            {"role": "user", "content": "hi", "id": "u1"},
            {"role": "User", "content": "x", "id": "a1"},
        ],
        EXIT_2,
        "messages[1] (id 'a1'): unknown 'role' 'User'",
        "cli-message-unknown-role",
    ),
    p(
        cli("--max-tokens", "10"),
        [{"role": "user", "content": "hi", "id": "u1"}, {"role": "assistant", "id": "a1"}],
        EXIT_2,
        "messages[1] (id 'a1'): no 'content' field",
        "cli-message-without-content",
    ),
    p(
        cli("--max-tokens", "10"),
        [{"role": "user", "content": "hi", "id": "u1"}, ["assistant", "x"]],
        EXIT_2,
        "messages[1] must be a JSON object, got an array",
        "cli-message-not-an-object",
    ),
    p(
        cli("--max-tokens", "10", "--counter", "field"),
        [rec("u1", "user", 1), rec("a1", "assistant", True)],
        EXIT_2,
        "messages[1] (id 'a1'): 'tokens' must be an int, got bool True",
        "cli-field-tokens-bool",
    ),
    p(
        cli("--max-tokens", "-1"),
        [{"role": "user", "content": "hi", "id": "u1"}],
        EXIT_2,
        "--max-tokens must be >= 0, got -1",
        "cli-negative-budget",
    ),
    p(
        cli("--max-tokens", "1.5"),
        [{"role": "user", "content": "hi", "id": "u1"}],
        EXIT_2,
        "argument --max-tokens: invalid int value: '1.5'",
        "cli-float-budget",
    ),
    p(
        cli("--max-tokens", "10", "--counter", "exact"),
        [{"role": "user", "content": "hi", "id": "u1"}],
        EXIT_2,
        "unknown counter 'exact'",
        "cli-unknown-counter",
    ),
    p(
        cli("--max-tokens", "10", "--counter", "tiktoken:"),
        [{"role": "user", "content": "hi", "id": "u1"}],
        EXIT_2,
        "--token-counter tiktoken: needs a model or an encoding",
        "cli-tiktoken-without-name",
    ),
    p(
        cli("--max-tokens", "10", "--counter", "tiktoken:gpt4o"),
        [{"role": "user", "content": "hi", "id": "u1"}],
        EXIT_2,
        "for any other model name its encoding instead, e.g. --token-counter tiktoken:o200k_base",
        "cli-tiktoken-unknown-model",
    ),
    p(
        cli("--max-tokens", "10"),
        {"messages": [{"role": "user", "content": "hi"}], "tools": {"name": "f"}},
        EXIT_2,
        "'tools' must be an array, got an object",
        "cli-tools-not-an-array",
    ),
    *(
        p(
            cli("--max-tokens", "10", *counter, command=command),
            {"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f"}, 1]},
            EXIT_2,
            "chat.json: 'tools[1]' must be an object (a tool schema), got a number",
            f"cli-{command}-tool-not-an-object-{counter[-1] if counter else 'approximate'}",
        )
        for command in ("trim", "report")
        for counter in ((), ("--counter", "tiktoken:cl100k_base"))
    ),
    p(
        cli("--max-tokens", "10"),
        [{"role": "user", "content": "hi", "id": "u1"}, {"role": "\x1b[2J", "content": "x"}],
        EXIT_2,
        "messages[1]: unknown 'role' '\\x1b[2J'",
        "cli-role-with-an-escape-sequence",
    ),
    p(
        cli("--max-tokens", "10"),
        [{"role": "user", "content": "hi", "id": "u1"}, {"role": "\ud83d", "content": "x"}],
        EXIT_2,
        "messages[1]: unknown 'role' '\\ud83d'",
        "cli-role-a-lone-surrogate",
    ),
    p(
        cli("--max-tokens", "10", text='{"role": "user", "content": "hi"}\n[1]\n'),
        None,
        EXIT_2,
        "messages[1] (line 2) must be a JSON object, got an array",
        "cli-jsonl-line-not-an-object",
    ),
    p(
        cli("--max-tokens", "2", "--on-overflow", "raise"),
        [{"role": "user", "content": "a long question " * 20}],
        EXIT_2,
        "does not fit",
        "cli-on-overflow-raise",
    ),
    p(
        cli("--max-tokens", "10", "--max-input-bytes", "10"),
        [{"role": "user", "content": "hi"}],
        EXIT_2,
        "chat.json is larger than 10 bytes, the most turntrim reads (--max-input-bytes N",
        "cli-input-over-the-size-bound",
    ),
    p(
        cli("--max-tokens", "10", "--max-input-bytes", "0"),
        [{"role": "user", "content": "hi"}],
        EXIT_2,
        "--max-input-bytes must be >= 1, got 0",
        "cli-size-bound-zero",
    ),
    p(
        cli("--max-tokens", "10"),
        [1, 2, 3],
        EXIT_2,
        "chat.json: expected a list of messages, a conversation object with 'messages' or "
        "'traj', or a list of conversations; got a JSON array of numbers",
        "cli-array-of-numbers",
    ),
    p(
        cli("--max-tokens", "10"),
        {"task_id": 1, "reward": 0},
        EXIT_2,
        "or a list of conversations; got a JSON object with keys 'task_id', 'reward'",
        "cli-object-without-messages-or-traj",
    ),
    *(
        p(
            cli("--max-tokens", "10", "--conversation", "2", command=command),
            [[{"role": "user", "content": "hi"}], {"traj": []}],
            EXIT_2,
            "--conversation 2: ",
            f"cli-{command}-conversation-out-of-range",
        )
        for command in ("trim", "report")
    ),
    p(
        cli("--max-tokens", "10", "--conversation", "-1"),
        [[{"role": "user", "content": "hi"}]],
        EXIT_2,
        "--conversation must be >= 0, got -1",
        "cli-conversation-negative",
    ),
    p(
        cli("--max-tokens", "10"),
        [[{"role": "user", "content": "hi"}], 5],
        EXIT_2,
        "chat.json conversation 1: expected a list of messages or an object with 'messages' "
        "or 'traj', got a number",
        "cli-conversation-not-a-conversation",
    ),
    p(
        cli("--max-tokens", "10"),
        [{"traj": "hi"}],
        EXIT_2,
        "chat.json conversation 0: 'traj' must be an array, got a string",
        "cli-traj-not-an-array",
    ),
    *(
        p(
            cli("--max-tokens", "10", command=command),
            [{"traj": [{"role": "user", "content": "hi"}]}, {"traj": [{"content": "x"}]}],
            EXIT_2,
            "conversation 1: messages[0]: no 'role' field",
            f"cli-{command}-message-error-in-a-conversation",
        )
        for command in ("trim", "report")
    ),
    p(
        cli("--max-tokens", "10", text='[{"role": "user", "content": "hi"}]\n[{"role": 1}]\n'),
        None,
        EXIT_2,
        "conversation 1 (line 2): messages[0]: 'role' must be a string, got a number",
        "cli-jsonl-conversation-message-error",
    ),
    *_record_cases(),
    *_option_cases(),
    *_assignment_cases(),
    *_message_cases(),
    *_counter_cases(),
    *_missing_field_cases(),
    *_malformed_call_cases(),
    *_kinds_cases(),
    *_profile_cases(),
    *_tools_cases(),
    *_construction_cases(),
]


def run_cli(
    case: Cli, history: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str, Path]:
    path = tmp_path / ("missing.json" if case.missing else "chat.json")
    if not case.missing:
        path.write_text(case.text if case.text is not None else json.dumps(history))
    argv = [str(path) if arg == "{file}" else arg for arg in case.args]
    capsys.readouterr()
    try:
        status = main(argv)
    except BaseException as error:  # noqa: BLE001 - a traceback is a bug: every error is exit status 2
        pytest.fail(f"main({argv[:1]}...) raised {type(error).__name__}: {error!s:.200}")
    out, err = capsys.readouterr()
    return status, out, err, path


def raised(call: Callable[[Any], Any], history: Any, expected: type[Exception]) -> Exception:
    """What ``call(history)`` raised; a return, partial or not, fails the test."""
    try:
        result = call(history)
    except Exception as error:  # noqa: BLE001 - the test checks its exact type
        return error
    pytest.fail(f"returned {result!r:.300} instead of raising {expected.__name__}")


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize(("call", "history", "expected", "fragment"), CASES)
def test_bad_input(
    call: Any,
    history: Any,
    expected: Any,
    fragment: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = snapshot(history)
    if isinstance(call, Cli):
        content = None if call.missing else call.text or json.dumps(history)
        status, out, err, path = run_cli(call, history, tmp_path, capsys)
        assert status == expected, err
        assert out == ""
        assert err.startswith("turntrim: error: "), err
        assert err.endswith("\n")
        assert err.count("\n") == 1, err
        assert fragment in err
        if content is not None:
            assert path.read_text() == content
        else:
            assert not path.exists()
    else:
        error = raised(call, history, expected)
        assert type(error) is expected, f"{type(error).__name__}: {error}"
        assert fragment in str(error)
    assert snapshot(history) == before


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 150
    ids = [case.id for case in CASES]
    assert len(set(ids)) == len(ids)


# -- nothing partial: a bad LAST message fails every way of calling the trimmer -------------


async def _acollect(iterator: Any, into: list[Any]) -> None:
    # One chunk at a time: whatever was yielded before the error stays in ``into``.
    async for chunk in iterator:
        into.append(chunk)  # noqa: PERF401


def _stream(trimmer: TurnTrimmer, history: Any, into: list[Any]) -> None:
    for chunk in trimmer.stream(history):
        into.append(chunk)  # noqa: PERF402


PATHS: dict[str, Callable[[TurnTrimmer, Any, list[Any]], Any]] = {
    "invoke": lambda t, h, out: out.append(t.invoke(h)),
    "ainvoke": lambda t, h, out: out.append(arun(t.ainvoke(h))),
    "batch": lambda t, h, out: out.extend(t.batch([good_messages(), h], return_exceptions=False)),
    "abatch": lambda t, h, out: out.extend(
        arun(t.abatch([good_messages(), h], return_exceptions=False))
    ),
    "stream": _stream,
    "astream": lambda t, h, out: arun(_acollect(t.astream(h), out)),
    "trim": lambda t, h, out: out.append(t.trim(h)),
    "trim_with_report": lambda t, h, out: out.append(t.trim_with_report(h)),
}

LAST_BAD = [
    pytest.param(
        BAD_CHAT,
        ValueError,
        "messages[3] (id 'c2'): unknown ChatMessage role 'User'",
        id="ChatMessage-role",
    ),
    pytest.param(
        RemoveMessage(id="r2"),
        TypeError,
        "messages[3] (id 'r2') is a RemoveMessage",
        id="RemoveMessage",
    ),
    pytest.param(42, TypeError, "messages[3] is not a message (int 42)", id="non-message"),
]


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize(("bad", "error", "fragment"), LAST_BAD)
def test_a_bad_last_message_fails_instead_of_returning_the_good_prefix(
    path: str, bad: Any, error: type[Exception], fragment: str
) -> None:
    # Everything before the bad message fits easily: a trimmer that stopped
    # at the bad message could return the good prefix; it must raise.
    history = [*good_messages(), bad]
    before = snapshot(history)
    trimmer = TurnTrimmer(max_tokens=10_000)
    assert trimmer.invoke(history[:-1]) == history[:-1]
    out: list[Any] = []
    with pytest.raises(Exception) as info:  # noqa: PT011 - the exact type is checked below
        PATHS[path](trimmer, history, out)
    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    assert fragment in str(info.value)
    assert out == []
    assert snapshot(history) == before


@pytest.mark.parametrize("build", [TurnTrimmer, TurnTrimMiddleware])
def test_for_model_takes_a_whole_float_limit_as_its_int(build: Any) -> None:
    # A profile read from JSON may hold 128000.0: it is the int it equals.
    profile = {"max_input_tokens": 128000.0, "max_output_tokens": 4096.0}
    assert build.for_model(profiled(profile)).max_tokens == 128000 - 4096
    assert build.for_model(profiled(profile), reserve_tokens=1000).max_tokens == 127000
