"""The public API's shape: one keyword-only vocabulary across every entry point."""

from __future__ import annotations

import argparse
import copy
import inspect
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any, get_args, get_type_hints

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

import langchain_turntrim
from langchain_turntrim import (
    ApproximateCounter,
    Mode,
    OnOverflow,
    TiktokenCounter,
    TrimOptions,
    TrimReport,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimStateMiddleware,
    trim_turns,
)
from langchain_turntrim._cli.app import _build_parser
from langchain_turntrim._options import DEFAULT_CACHE_SIZE, TrimKeywords

ENTRY_POINTS = [TurnTrimmer.__init__, TurnTrimMiddleware.__init__, trim_turns]
#: The options every entry point shares, with their one default.
SHARED = {
    "token_counter": "approximate",
    "on_overflow": "drop",
    "keep_tool_results": 3,
    "cache_size": DEFAULT_CACHE_SIZE,
}
#: The one planned exception: an agent works inside one long turn.
EXCEPTIONS = {("TurnTrimMiddleware.__init__", "on_overflow"): "compact"}


def parameters(function: Any) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values() if p.name != "self"]


@pytest.mark.parametrize("function", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_every_option_after_max_tokens_is_keyword_only(function: Any) -> None:
    first, *options = [p for p in parameters(function) if p.kind is not p.VAR_KEYWORD]
    # trim_turns mirrors trim_messages: the messages first, then max_tokens=.
    assert first.name in ("max_tokens", "messages")
    assert "max_tokens" in [first.name] + [p.name for p in options]
    for param in options:
        assert param.kind is param.KEYWORD_ONLY, f"{function.__qualname__}: {param.name}"


#: Each entry point built with max_tokens alone, and its options.
BUILT: dict[str, Callable[[], TrimOptions]] = {
    "TurnTrimmer.__init__": lambda: TurnTrimmer(1).options,
    "TurnTrimMiddleware.__init__": lambda: TurnTrimMiddleware(1).trimmer.options,
    "trim_turns": lambda: trim_turns(max_tokens=1).options,  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("function", ENTRY_POINTS, ids=lambda f: f.__qualname__)
def test_shared_options_have_the_same_names_and_defaults(function: Any) -> None:
    # Every entry point takes the same keywords (TrimKeywords) and builds the
    # one options object, whose fields hold the defaults.
    (options,) = [p for p in parameters(function) if p.kind is p.VAR_KEYWORD]
    assert options.annotation == "Unpack[TrimKeywords]"
    keywords = set(get_type_hints(TrimKeywords))
    assert keywords == {f.name for f in fields(TrimOptions)} - {"max_tokens"}
    built = BUILT[function.__qualname__]()
    for name, default in SHARED.items():
        expected = EXCEPTIONS.get((function.__qualname__, name), default)
        value = getattr(built, name)
        if name == "token_counter":  # resolved: the approximate counter's planner
            assert isinstance(value.counter, ApproximateCounter), function.__qualname__
            continue
        assert value == expected, f"{function.__qualname__}: {name}"


@pytest.mark.parametrize(
    "function",
    [TurnTrimmer.for_model, TurnTrimMiddleware.for_model],
    ids=lambda f: f.__qualname__,
)
def test_for_model_takes_the_model_then_keywords(function: Any) -> None:
    model, *options = parameters(function)
    assert model.name == "chat_model"
    assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in options)
    assert {p.name: p.default for p in options}["reserve_tokens"] is None
    assert options[-1].annotation == "Unpack[TrimKeywords]"


def test_the_command_line_uses_the_same_option_names() -> None:
    parser = _build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    trim = commands.choices["trim"]
    flags = {flag for action in trim._actions for flag in action.option_strings}
    assert {"--max-tokens", "--token-counter", "--on-overflow", "--keep-tool-results"} <= flags
    (on_overflow,) = [a for a in trim._actions if "--on-overflow" in a.option_strings]
    assert tuple(on_overflow.choices) == get_args(OnOverflow)
    assert on_overflow.default == SHARED["on_overflow"]


def test_option_types_are_exported() -> None:
    assert set(get_args(OnOverflow)) == {"drop", "raise", "compact"}
    assert set(get_args(Mode)) == {"request", "state"}
    assert TurnTrimMiddleware.mode == "request"
    assert TurnTrimStateMiddleware.mode == "state"
    assert {"Mode", "OnOverflow", "TrimOptions"} <= set(langchain_turntrim.__all__)
    # What users never construct stays private (resolution and wrappers are internal).
    private = {"CachedCounter", "ResolvedCounter", "WholeListCounter", "resolve_counter"}
    assert not private & set(langchain_turntrim.__all__)
    for name in langchain_turntrim.__all__:
        assert getattr(langchain_turntrim, name) is not None


def test_tiktoken_shortcuts_count_like_the_counter(tiktoken_cache: Any) -> None:
    history = [SystemMessage("be brief"), HumanMessage("hello there"), AIMessage("hi!")]
    exact = TiktokenCounter("gpt-4")
    for spec in ("tiktoken:gpt-4", "tiktoken:cl100k_base"):
        trimmer = TurnTrimmer(max_tokens=1_000, token_counter=spec)
        assert trimmer.counter.count_each(history) == exact.count_each(history)
        assert trimmer.counter.count(history) == exact.count(history)
        assert trimmer.trim_with_report(history).tokens_after == exact.count(history)
    with pytest.raises(ValueError, match="needs a model or an encoding"):
        TurnTrimmer(max_tokens=10, token_counter="tiktoken:")


def test_report_forwards_every_plan_figure() -> None:
    history = [SystemMessage("s"), HumanMessage("a" * 40), AIMessage("b"), HumanMessage("c")]
    report = TurnTrimmer(max_tokens=20).trim_with_report(history)
    plan = report.plan
    figures = [
        name
        for name, value in vars(TrimReport).items()
        if isinstance(value, property) and name not in ("kept", "dropped", "removed")
    ]
    assert set(figures) >= {"turns", "kept_turns", "overhead_tokens", "newest_turn_tokens"}
    for name in figures:
        if hasattr(plan, name):
            assert getattr(report, name) == getattr(plan, name), name


def test_importing_the_package_loads_no_langchain_tiktoken_agents_or_cli() -> None:
    code = (
        "import sys, langchain_turntrim\n"
        "heavy = ['tiktoken', 'langchain_core', 'pydantic', 'langchain_core.runnables.base',\n"
        "         'langchain_core.tools',\n"
        "         'langchain_core.tracers.event_stream', 'langchain', 'langchain.agents',\n"
        "         'langchain_turntrim._cli', 'langchain_turntrim._cli.app']\n"
        "heavy += [m for m in sys.modules if m.startswith('langchain_turntrim._cli')]\n"
        "print(sorted({m for m in heavy if m in sys.modules}))\n"
        "langchain_turntrim.TurnTrimmer(max_tokens=1)\n"
        "print('langchain_core.runnables.base' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[:2] == ["[]", "True"]  # loaded on first use


# -- configuration is fixed at construction; copies and pickles work ------------------------


HISTORY = [
    SystemMessage("be brief"),
    HumanMessage("old " * 30),
    AIMessage("old answer " * 30),
    HumanMessage("new"),
    AIMessage("answer"),
]


def builds() -> dict[str, Any]:
    return {
        "TurnTrimmer-tiktoken": lambda: TurnTrimmer(
            max_tokens=40, token_counter=TiktokenCounter("gpt-4")
        ),
        "TurnTrimmer-approximate": lambda: TurnTrimmer(max_tokens=40),
        "TurnTrimmer-uncached": lambda: TurnTrimmer(
            max_tokens=40, token_counter=TiktokenCounter("gpt-4"), cache_size=0
        ),
        "TurnTrimmer-per_list": lambda: TurnTrimmer(max_tokens=3, token_counter=len),
        "TurnTrimMiddleware": lambda: TurnTrimMiddleware(
            max_tokens=40, token_counter=TiktokenCounter("gpt-4")
        ),
        "TurnTrimStateMiddleware": lambda: TurnTrimStateMiddleware(
            max_tokens=40, token_counter="tiktoken:gpt-4"
        ),
    }


def _trimmer_of(value: Any) -> TurnTrimmer:
    return value if isinstance(value, TurnTrimmer) else value.trimmer


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("name", list(builds()))
@pytest.mark.parametrize(
    "duplicate",
    [copy.copy, copy.deepcopy, lambda value: pickle.loads(pickle.dumps(value))],  # noqa: S301 - our own bytes
    ids=["copy", "deepcopy", "pickle"],
)
def test_copies_and_pickles_trim_alike(name: str, duplicate: Any) -> None:
    original = builds()[name]()
    expected = _trimmer_of(original).trim_with_report(HISTORY)
    twin = duplicate(original)
    assert type(twin) is type(original)
    report = _trimmer_of(twin).trim_with_report(HISTORY)
    assert [m.content for m in report.kept] == [m.content for m in expected.kept]
    assert report.plan == expected.plan
    assert repr(twin) == repr(original)


@pytest.mark.usefixtures("tiktoken_cache")
def test_a_pickled_cache_starts_empty() -> None:
    trimmer = TurnTrimmer(max_tokens=40, token_counter=TiktokenCounter("gpt-4"))
    trimmer.invoke(HISTORY)
    assert len(trimmer.counter) > 0  # type: ignore[arg-type]
    assert len(pickle.loads(pickle.dumps(trimmer)).counter) == 0  # noqa: S301 - our own bytes


def test_message_objects_come_back_as_themselves_and_the_rest_as_new_messages() -> None:
    human = HumanMessage("hi")
    kept = TurnTrimmer(max_tokens=1_000).invoke(
        [human, ("ai", "hello"), {"role": "user", "content": "and?"}, "plain"]
    )
    assert kept[0] is human
    assert [type(m).__name__ for m in kept[1:]] == ["AIMessage", "HumanMessage", "HumanMessage"]
    assert [m.content for m in kept] == ["hi", "hello", "and?", "plain"]
