"""The public API's shape: few names, imported lazily, one set of options
declared once and taken alike by every entry point, frozen results, and
trimmers that copy and pickle to the same options with nothing remembered."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import pickle
import subprocess
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

import langchain_turntrim
from langchain_turntrim import (
    ApproximateCounter,
    CalibratedCounter,
    Compaction,
    TiktokenCounter,
    TrimOptions,
    TrimPlan,
    TrimReport,
    TurnTrimmer,
    TurnTrimMiddleware,
    TurnTrimStateMiddleware,
    cache_pricing,
    per_list,
    per_message,
    trim_turns,
)

ROOT = Path(__file__).resolve().parent.parent
OPTIONS = [spec.name for spec in dataclasses.fields(TrimOptions)]
#: The options after the budget, which every entry point takes as keywords.
KEYWORDS = [name for name in OPTIONS if name != "max_tokens"]
BUDGET = 50


def length(message: BaseMessage) -> int:
    return len(message.content)


AGENTS = (TurnTrimmer, TurnTrimMiddleware, TurnTrimStateMiddleware)
OWNERS: dict[str, Any] = {
    "TurnTrimmer": TurnTrimmer,
    "trim_turns": trim_turns,
    "TurnTrimMiddleware": TurnTrimMiddleware,
    "TurnTrimStateMiddleware": TurnTrimStateMiddleware,
}


def options_of(entry: str, **options: Any) -> TrimOptions:
    """The options ``entry`` holds, built with the budget and ``options``."""
    built = OWNERS[entry](max_tokens=BUDGET, **options)
    held: TrimOptions = getattr(built, "trimmer", built).options
    return held


#: The one planned difference: an agent works inside one long turn.
AGENT_DEFAULTS = {"on_overflow": "compact"}


def _default(entry: str, name: str) -> Any:
    own = AGENT_DEFAULTS if "Middleware" in entry else {}
    return own.get(name, getattr(TrimOptions(max_tokens=BUDGET), name))


def _candidates(name: str) -> list[Any]:
    """Valid values of option ``name``, read off its declared type and default."""
    spec = next(s for s in dataclasses.fields(TrimOptions) if s.name == name)
    hint = typing.get_type_hints(TrimOptions)[name]
    default = spec.default
    if hint is Any:  # the counter: anything that counts
        return [per_message(length)]
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 1, default + 2]
    if isinstance(default, float):
        return [default + 0.5]
    found: list[Any] = []
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    for arg in typing.get_args(hint) if union else (hint,):
        if typing.get_origin(arg) is typing.Literal:
            found += typing.get_args(arg)
        elif arg is int:
            found.append(0)
        elif isinstance(arg, type) and arg is not type(None) and dataclasses.is_dataclass(arg):
            found.append(arg())
    assert found, f"no value to try for option {name}: extend _candidates"
    return found


def _other(name: str) -> Any:
    """A valid value of ``name`` that no entry point takes by default."""
    defaults = [_default(entry, name) for entry in OWNERS]
    return next(v for v in _candidates(name) if all(v != d for d in defaults))


# -- the names ------------------------------------------------------------------------


def test_few_public_names_each_a_class_or_a_function() -> None:
    names = langchain_turntrim.__all__
    assert len(names) <= 22
    assert len(set(names)) == len(names)
    for name in names:
        value = getattr(langchain_turntrim, name)
        assert inspect.isclass(value) or inspect.isfunction(value), f"{name} is a constant"
        assert not name.startswith("_")
        if inspect.isclass(value) and issubclass(value, Exception):
            assert name.endswith("Error")
    internal = {"Counter", "ListCounter", "resolve_counter", "CountCache", "Pipeline", "LRU"}
    assert not internal & set(names)
    assert set(dir(langchain_turntrim)) >= set(names)
    with pytest.raises(AttributeError, match="has no attribute 'trim_everything'"):
        langchain_turntrim.trim_everything  # noqa: B018 - the lookup is the test


def test_the_results_are_frozen_dataclasses() -> None:
    history = [
        HumanMessage("q", id="h"),
        AIMessage("", id="a", tool_calls=[{"name": "f", "args": {}, "id": "c"}]),
        ToolMessage("r" * 4000, tool_call_id="c", id="t"),
        AIMessage("done", id="d"),
    ]
    report = TurnTrimmer(200, on_overflow="compact", keep_tool_results=0).report(history)
    assert report.compaction is not None
    for value in (report, report.plan, report.compaction, TurnTrimmer(1).options):
        assert dataclasses.is_dataclass(value)
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)
    assert {TrimReport, TrimPlan, Compaction} <= {
        getattr(langchain_turntrim, n) for n in langchain_turntrim.__all__
    }


def test_star_import_binds_every_public_name() -> None:
    namespace: dict[str, Any] = {}
    exec("from langchain_turntrim import *", namespace)  # noqa: S102 - the statement under test
    for name in langchain_turntrim.__all__:
        assert namespace[name] is getattr(langchain_turntrim, name)


def test_the_cache_pricing_names_live_in_their_own_module() -> None:
    names = cache_pricing.__all__
    assert {"CachePrice", "CacheRule", "CACHE_RULES", "cache_price_for"} <= set(names)
    for name in names:
        assert getattr(cache_pricing, name) is not None
        assert name not in langchain_turntrim.__all__
        assert not hasattr(langchain_turntrim, name)


def test_importing_the_package_is_lazy() -> None:
    code = (
        "import sys\n"
        "heavy = ('tiktoken', 'langchain', 'langchain.agents', 'langgraph', 'langchain_core')\n"
        "import langchain_turntrim\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "langchain_turntrim.TurnTrimmer(5).invoke([('human', 'hi')])\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from langchain_turntrim import *\n"
        "print(all(n in globals() for n in langchain_turntrim.__all__))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.splitlines()
    assert out == ["[]", "['langchain_core']", "True"]


# -- options: declared once, taken alike everywhere -------------------------------------------


@pytest.mark.parametrize("entry", sorted(OWNERS))
def test_every_entry_point_has_the_options_defaults(entry: str) -> None:
    built = options_of(entry)
    assert built.max_tokens == BUDGET
    for name in KEYWORDS:
        assert getattr(built, name) == _default(entry, name), name


@pytest.mark.parametrize("name", KEYWORDS)
@pytest.mark.parametrize("entry", sorted(OWNERS))
def test_every_entry_point_takes_every_option_by_its_name(entry: str, name: str) -> None:
    value = _other(name)
    built = options_of(entry, **{name: value})
    assert getattr(built, name) == value
    others = [n for n in KEYWORDS if n != name]
    assert all(getattr(built, n) == _default(entry, n) for n in others)


@pytest.mark.parametrize("entry", sorted(OWNERS))
def test_options_after_the_budget_are_keywords(entry: str) -> None:
    owner = OWNERS[entry]
    function = owner if inspect.isfunction(owner) else owner.__init__
    parameters = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    first = parameters[0].name
    assert first == ("messages" if entry == "trim_turns" else "max_tokens")
    assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in parameters[1:])
    if entry != "trim_turns":
        with pytest.raises(TypeError):
            owner(10, "approximate")


@pytest.mark.parametrize("entry", sorted(OWNERS))
def test_every_option_is_named_in_each_entry_point_s_docstring(entry: str) -> None:
    doc = inspect.getdoc(OWNERS[entry]) or ""
    missing = [name for name in OPTIONS if name not in doc]
    assert not missing, f"{entry}'s docstring does not name {missing}"


def _model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 1_000})


MISSPELT: dict[str, Callable[..., Any]] = {
    **{entry: functools.partial(owner, max_tokens=10) for entry, owner in OWNERS.items()},
    "trim_turns(messages)": functools.partial(trim_turns, [HumanMessage("x")], max_tokens=10),
    **{f"{c.__name__}.for_model": lambda c=c, **kw: c.for_model(_model(), **kw) for c in AGENTS},
}


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("entry", sorted(MISSPELT))
def test_a_misspelt_option_is_a_type_error_naming_it_and_the_closest(entry: str, name: str) -> None:
    typo = name[:-1]
    with pytest.raises(TypeError) as info:
        MISSPELT[entry](**{typo: 1})
    text = str(info.value)
    assert f"unexpected keyword argument {typo!r}" in text
    assert f"did you mean {name!r}" in text
    assert entry.split("(", maxsplit=1)[0].split(".", maxsplit=1)[0] in text


def test_an_unknown_option_far_from_any_is_named_without_a_guess() -> None:
    with pytest.raises(TypeError) as info:
        TurnTrimmer(10, zzzzzz=1)
    assert "'zzzzzz'" in str(info.value)
    assert "did you mean" not in str(info.value)


# -- copies and pickles: the same options, nothing remembered --------------------------------


HISTORY = [
    SystemMessage("be brief"),
    HumanMessage("old " * 30),
    AIMessage("old answer " * 30),
    HumanMessage("new"),
    AIMessage("answer"),
]
DUPLICATES: dict[str, Callable[[Any], Any]] = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda value: pickle.loads(pickle.dumps(value)),  # noqa: S301 - our own bytes
}
TRIMMERS: dict[str, Callable[[], TurnTrimmer]] = {
    "approximate": lambda: TurnTrimmer(40),
    "tiktoken": lambda: TurnTrimmer(40, token_counter=TiktokenCounter("gpt-4")),
    "tiktoken-shortcut": lambda: TurnTrimmer(40, token_counter="tiktoken:gpt-4", trim_to=30),
    "options": lambda: TurnTrimmer(
        40, on_overflow="raise", cache_size=5, cache_price=cache_pricing.CachePrice(), trim_to=0
    ),
    "trim_turns": lambda: trim_turns(max_tokens=40, keep_tool_results=1),
}


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize("duplicate", sorted(DUPLICATES))
@pytest.mark.parametrize("build", sorted(TRIMMERS))
def test_a_copied_trimmer_has_equal_options_and_nothing_remembered(
    build: str, duplicate: str
) -> None:
    original = TRIMMERS[build]()
    expected = original.report(HISTORY)
    assert len(original._pipeline.cache) > 0
    twin = DUPLICATES[duplicate](original)
    assert type(twin) is TurnTrimmer
    assert twin.options == original.options
    assert repr(twin) == repr(original)
    assert len(twin._pipeline.cache) == 0  # no public view of the cache
    report = twin.report(HISTORY)
    assert [m.content for m in report.kept] == [m.content for m in expected.kept]
    assert report.plan == expected.plan


@pytest.mark.parametrize("duplicate", sorted(DUPLICATES))
@pytest.mark.parametrize("cls", [TurnTrimMiddleware, TurnTrimStateMiddleware])
def test_a_copied_middleware_has_equal_options(
    cls: type[TurnTrimMiddleware], duplicate: str
) -> None:
    original = cls(40, trim_to=30)
    original.trimmer.report(HISTORY)
    twin = DUPLICATES[duplicate](original)
    assert type(twin) is cls
    assert twin.trimmer.options == original.trimmer.options
    assert repr(twin) == repr(original)
    if duplicate != "copy":  # a shallow copy may share its trimmer
        assert len(twin.trimmer._pipeline.cache) == 0


# -- reprs ---------------------------------------------------------------------------------


def test_the_options_repr_names_every_option() -> None:
    text = repr(TurnTrimmer(7).options)
    assert all(f"{name}=" in text for name in OPTIONS)
    assert "max_tokens=7" in text


@pytest.mark.parametrize("entry", ["TurnTrimmer", "TurnTrimMiddleware", "TurnTrimStateMiddleware"])
def test_a_repr_shows_the_budget_the_counter_and_every_option_set(entry: str) -> None:
    plain = OWNERS[entry](12)
    assert repr(plain).startswith(f"{entry}(")
    assert "max_tokens=12" in repr(plain)
    assert "ApproximateCounter()" in repr(plain)
    changed = {name: _other(name) for name in KEYWORDS}
    text = repr(OWNERS[entry](12, **changed))
    missing = [name for name in KEYWORDS if f"{name}=" not in text]
    assert not missing, f"{text} does not show {missing}"


@pytest.mark.usefixtures("tiktoken_cache")
def test_counter_reprs_say_how_they_count() -> None:
    assert repr(ApproximateCounter()) == "ApproximateCounter()"
    assert "model='gpt-4'" in repr(TiktokenCounter("gpt-4"))
    assert "cl100k_base" in repr(TiktokenCounter("gpt-4"))
    assert "length" in repr(per_message(length))
    assert "len" in repr(per_list(len))
    calibrated = repr(CalibratedCounter())
    assert calibrated.startswith("CalibratedCounter(ApproximateCounter()")
    assert "observations=0" in calibrated
