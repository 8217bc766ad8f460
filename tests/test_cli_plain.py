"""The command's plain path: OpenAI dicts counted and planned without LangChain,
exactly as converting them with LangChain and counting with TiktokenCounter does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_turntrim import TiktokenCounter
from langchain_turntrim._cli import app
from langchain_turntrim._cli.conversion import to_messages
from langchain_turntrim._cli.planning import choose_counter, plain_counter, plan_transcript
from langchain_turntrim._cli.transcript import InputError, Transcript
from langchain_turntrim._counting.openai.chat import PlainCounter
from langchain_turntrim._options import TrimOptions
from tests import strategies
from tests.helpers import run_cli, run_python, write_json

pytestmark = pytest.mark.usefixtures("tiktoken_cache")

#: The encodings the tests have offline (cl100k_base), by model and by name.
SPECS = ("gpt-4", "cl100k_base", "gpt-3.5-turbo-0301")


def transcript(messages: list[Any], tools: list[Any] | None = None) -> Transcript:
    envelope = None if tools is None else {"messages": messages, "tools": tools}
    return Transcript("chat.json", "array" if tools is None else "object", messages, envelope)


def full_counts(messages: list[Any], name: str) -> list[int] | None:
    """TiktokenCounter's counts of what LangChain makes of ``messages`` (None: it refuses)."""
    try:
        converted = to_messages(transcript(messages))
    except InputError:
        return None
    counter = choose_counter(f"tiktoken:{name}").counter
    assert isinstance(counter, TiktokenCounter)
    return counter.count_each(converted)


@settings(max_examples=150)  # the first example loads the encoding
@given(st.lists(strategies.plain_openai_messages(), max_size=6), st.sampled_from(SPECS))
def test_plain_messages_count_as_tiktoken_counts_them_converted(
    messages: list[dict[str, Any]], name: str
) -> None:
    counter = PlainCounter.of(name)
    assert counter is not None
    counts = counter.count(messages)
    assert counts is not None
    assert counts == full_counts(messages, name)


@settings(max_examples=150)  # the first example loads the encoding
@given(st.lists(strategies.openai_messages(), max_size=6))
def test_any_other_message_is_left_to_langchain(messages: list[Any]) -> None:
    counter = PlainCounter.of("gpt-4")
    assert counter is not None
    counts = counter.count(messages)
    assert counts is None or counts == full_counts(messages, "gpt-4")


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": "hi", "refusal": None},
        {"role": "user"},
        {"role": "assistant", "tool_calls": []},
        {"role": "function", "name": "f", "content": "x"},
        {"role": "human", "content": "x"},
        {"role": "tool", "content": "x"},
        {"role": "tool", "content": "x", "tool_call_id": 5},
        {"role": "user", "content": "x", "tool_call_id": "c"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {}}]},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1, 2]"}}],
        },
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        ["user", "hi"],
        "hi",
    ],
)
def test_what_is_not_plain(message: Any) -> None:
    counter = PlainCounter.of("gpt-4")
    assert counter is not None
    assert counter.count([{"role": "user", "content": "hi"}, message]) is None


@pytest.mark.parametrize("name", ["", "  ", "gpt4o", "not-a-model"])
def test_no_plain_counter_where_tiktoken_counter_raises(name: str) -> None:
    assert PlainCounter.of(name) is None
    assert plain_counter(f"tiktoken:{name}") is None
    with pytest.raises(ValueError):  # noqa: PT011 - the message is choose_counter's
        choose_counter(f"tiktoken:{name}")


@pytest.mark.parametrize("spec", ["approximate", "field", "words", "tiktoken"])
def test_only_tiktoken_counters_have_a_plain_path(spec: str) -> None:
    assert plain_counter(spec) is None


@settings(max_examples=150)
@given(
    st.lists(strategies.openai_messages(), max_size=10),
    st.integers(0, 600),
    st.sampled_from(["drop", "raise", "compact"]),
    st.one_of(st.none(), st.floats(0, 1)),
    st.sampled_from([None, [], [{"type": "function", "function": {"name": "f"}}]]),
)
def test_a_plain_plan_is_the_full_plan(
    messages: list[Any],
    budget: int,
    on_overflow: Any,
    trim_to: float | None,
    tools: list[Any] | None,
) -> None:
    options = TrimOptions(
        budget,
        on_overflow=on_overflow,
        keep_tool_results=1,
        trim_to=None if trim_to is None else int(budget * trim_to),
    )
    counter = plain_counter("tiktoken:gpt-4")
    assert counter is not None

    def outcome(plain: PlainCounter | None) -> object:
        """The decision (or the error) with the plain path allowed, or not."""
        try:
            planned = plan_transcript(
                transcript(messages, tools),
                lambda: choose_counter("tiktoken:gpt-4"),
                options,
                plain=plain,
                with_costs=True,
            )
        except InputError as error:
            return str(error)
        compaction = planned.compaction
        figures = None if compaction is None else (compaction.figures(), compaction.tokens_after)
        return planned.plan, planned.kept(), planned.kinds, planned.costs, figures

    # Under every overflow rule (compaction included), whether the transcript
    # is plain or not: the same decision as the full path's.
    assert outcome(counter) == outcome(None)


def test_the_command_writes_what_the_full_path_writes(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "old " * 40, "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "look", "arguments": '{"q": "é"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "found " * 30},
        {"role": "user", "content": "new"},
        {"role": "assistant", "content": "sure"},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(chat, indent=1), encoding="utf-8")
    runs = []
    for budget in ("0", "20", "60", "200", "1000"):
        for overflow in ("drop", "raise", "compact"):
            args = ("trim", str(path), "--max-tokens", budget, "--on-overflow", overflow)
            plain = run_cli(capsys, *args, "--token-counter", "tiktoken:gpt-4")
            with monkeypatch.context() as m:
                m.setattr(app, "plain_counter", lambda _spec: None)
                full = run_cli(capsys, *args, "--token-counter", "tiktoken:gpt-4")
            assert plain == full
            runs.append(plain[0])
    assert {0, 2} <= set(runs)  # kept messages, and refusals under "raise"


@pytest.mark.parametrize(
    ("chat", "loaded"),
    [
        ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], False),
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], True),
    ],
)
def test_a_plain_transcript_is_trimmed_without_importing_langchain(
    tmp_path: Path, chat: list[Any], loaded: bool
) -> None:
    path = write_json(tmp_path, "chat.json", chat)
    script = (
        "import sys\n"
        "from langchain_turntrim._cli import main\n"
        f"code = main(['trim', {path!r}, '--max-tokens', '100',"
        " '--token-counter', 'tiktoken:gpt-4'])\n"
        "sys.stderr.write(repr(['langchain_core' in sys.modules, 'pydantic' in sys.modules]))\n"
        "raise SystemExit(code)\n"
    )
    done = run_python("-c", script)
    assert (done.returncode, done.stderr) == (0, repr([loaded, loaded]))
    assert json.loads(done.stdout) == chat
