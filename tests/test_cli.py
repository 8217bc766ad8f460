"""The ``turntrim`` command: in-process through ``main`` and, for a few cases, as a subprocess."""

from __future__ import annotations

import hashlib
import io
import json
import sys
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from langchain_core.messages import convert_to_messages

import langchain_turntrim
from langchain_turntrim import ApproximateCounter, EncodingUnavailableError, TiktokenCounter
from langchain_turntrim._cli.app import DEMO_MAX_TOKENS
from tests.helpers import run_cli, run_python, write_json

SPEC = [
    {"id": "s0", "role": "system", "tokens": 20},
    {"id": "u1", "role": "user", "tokens": 30},
    {"id": "a1", "role": "assistant", "tokens": 30},
    {"id": "u2", "role": "user", "tokens": 25},
    {"id": "a2", "role": "assistant", "tokens": 25},
]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


# OpenAI chat format: an orphan before the first user message, then three turns.
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a terse weather assistant."},
    {"role": "assistant", "content": "(left over from a previous session)"},
    {"role": "user", "content": "Weather in Paris tomorrow?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call("call_1", "get_forecast", {"city": "Paris", "days": 1})],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": json.dumps({"city": "Paris", "high_c": 14, "low_c": 6, "rain_mm": 3.5}),
    },
    {"role": "assistant", "content": "14 °C, light rain: take an umbrella."},
    {"role": "user", "content": "And in Zürich, café-friendly? ☕", "name": "ana"},
    {
        "role": "assistant",
        "tool_calls": [  # no "content" key at all, as OpenAI allows
            _call("call_2", "get_forecast", {"city": "Zürich", "days": 1}),
            _call("call_3", "get_air_quality", {"city": "Zürich"}),
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": '{"high_c": 11, "rain_mm": 0}'},
    {"role": "tool", "tool_call_id": "call_3", "content": '{"aqi": 21}'},
    {"role": "assistant", "content": "Dry and 11 °C: terrace weather.", "refusal": None},
    {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    {"role": "assistant", "content": "You're welcome."},
]
LAST_TURN = 11  # index of the newest user message


pytestmark = pytest.mark.usefixtures("plain_terminal")


run = run_cli


def costs(messages: list[dict[str, Any]]) -> list[int]:
    return ApproximateCounter().count_each(to_langchain(messages))


def to_langchain(messages: list[dict[str, Any]]) -> list[Any]:
    """What the command does: OpenAI may omit ``content`` beside tool calls."""
    return convert_to_messages([{"content": None, **m} for m in messages])


def newest_turn_budget() -> int:
    """Room for the system message and the newest turn, not one token more."""
    each = costs(CHAT)
    return each[0] + sum(each[LAST_TURN:])


NEWEST = [CHAT[0], *CHAT[LAST_TURN:]]
EXPECTED = (
    "expected a list of messages, a conversation object with 'messages' or 'traj', "
    "or a list of conversations"
)


def assert_one_error_line(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2
    assert out == ""
    assert err.startswith("turntrim: error: ")
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


# -- trim: round trips ----------------------------------------------------------------------


def test_field_counter_keeps_the_spec_example(tmp_path, capsys):
    code, out, err = run(
        capsys,
        "trim",
        write_json(tmp_path, "spec.json", SPEC),
        "--max-tokens",
        "100",
        "--counter",
        "field",
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == [SPEC[0], SPEC[3], SPEC[4]]


def test_array_round_trip_keeps_each_message_as_it_was(tmp_path, capsys):
    path = write_json(tmp_path, "chat.json", CHAT)
    code, out, err = run(capsys, "trim", path, "--max-tokens", str(newest_turn_budget()))
    assert (code, err) == (0, "")
    assert json.loads(out) == NEWEST
    assert "Zürich" not in out  # an older turn went
    code, out, _ = run(capsys, "trim", path, "--max-tokens", str(newest_turn_budget() - 1))
    assert json.loads(out) == [CHAT[0]]  # not even the newest turn fits


def test_everything_fits_except_the_orphan(tmp_path, capsys):
    code, out, _ = run(
        capsys, "trim", write_json(tmp_path, "c.json", CHAT), "--max-tokens", "100000"
    )
    assert code == 0
    assert json.loads(out) == [CHAT[0], *CHAT[2:]]  # the orphan is always discarded
    assert "café-friendly? ☕" in out  # UTF-8, not \u escapes


def test_object_round_trip_preserves_other_keys_in_order(tmp_path, capsys):
    document = {"model": "gpt-4o", "messages": CHAT, "temperature": 0.2, "meta": {"run": [1, 2]}}
    path = write_json(tmp_path, "request.json", document)
    code, out, err = run(capsys, "trim", path, "--max-tokens", str(newest_turn_budget()))
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result == {**document, "messages": NEWEST}
    assert list(result) == list(document)


def test_jsonl_round_trip(tmp_path, capsys):
    path = tmp_path / "chat.jsonl"
    lines = [json.dumps(m, ensure_ascii=False) for m in CHAT]
    path.write_text("\n".join(lines[:5]) + "\n\n" + "\n".join(lines[5:]) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "trim", str(path), "--max-tokens", str(newest_turn_budget()))
    assert (code, err) == (0, "")
    assert out.endswith("\n")
    assert [json.loads(line) for line in out.splitlines()] == NEWEST


def test_jsonl_of_spec_records_with_the_field_counter(tmp_path, capsys):
    path = tmp_path / "spec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in SPEC), encoding="utf-8")
    code, out, _ = run(capsys, "trim", str(path), "--max-tokens", "100", "--counter", "field")
    assert code == 0
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["s0", "u2", "a2"]


def test_dash_reads_stdin(monkeypatch, capsys):
    data = json.dumps({"messages": SPEC, "note": "é"}).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, out, _ = run(capsys, "trim", "-", "--max-tokens", "100", "--counter", "field")
    assert code == 0
    assert json.loads(out) == {"messages": [SPEC[0], SPEC[3], SPEC[4]], "note": "é"}


def test_tiktoken_encoding_and_model_counters(tiktoken_cache, tmp_path, capsys):
    counter = TiktokenCounter(encoding="cl100k_base")
    each = counter.count_each(to_langchain(CHAT))
    budget = counter.overhead + each[0] + sum(each[LAST_TURN:])
    path = write_json(tmp_path, "chat.json", CHAT)
    for spec in ("tiktoken:cl100k_base", "tiktoken:gpt-4"):
        code, out, err = run(capsys, "trim", path, "--max-tokens", str(budget), "--counter", spec)
        assert (code, err) == (0, "")
        assert json.loads(out) == NEWEST
    code, out, _ = run(
        capsys, "report", path, "--max-tokens", str(budget), "--counter", "tiktoken:gpt-4"
    )
    assert code == 0
    assert "counter tiktoken:gpt-4 (cl100k_base)" in out
    assert "overhead" in out


def test_trim_works_without_rich(monkeypatch, tmp_path, capsys):
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "rich", None)
    code, out, _ = run(
        capsys, "trim", write_json(tmp_path, "c.json", CHAT), "--max-tokens", "100000"
    )
    assert code == 0
    assert json.loads(out)[0] == CHAT[0]


# -- errors ---------------------------------------------------------------------------------


def test_missing_file(tmp_path, capsys):
    missing = str(tmp_path / "nope.json")
    code, out, err = run(capsys, "trim", missing, "--max-tokens", "10")
    assert_one_error_line(code, out, err, f"cannot read {missing}: No such file or directory")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            '[{"role": "user", "content": "hi"},\n {"role": "assistant" "content": "x"}]',
            "line 2, column 23",
        ),
        (
            '{"role": "user", "content": "a"}\n{"role": "assistant", "content": "b"}\n{"role": }\n',
            "line 3, column 10",
        ),
        ("[1, 2", "line 1, column 6"),
    ],
    ids=["array", "jsonl", "truncated"],
)
def test_invalid_json_names_line_and_column(tmp_path, capsys, text, where):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "trim", str(path), "--max-tokens", "10")
    assert_one_error_line(code, out, err, f"{path}: invalid JSON at {where}: ")


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [
                {"role": "user", "content": "hi", "id": "m0"},
                {"role": "tool", "content": "x", "id": "m1"},
            ],
            "messages[1] (id 'm1'): no 'tool_call_id' field",
        ),
        ([{"role": "user", "content": 5}], "messages[0]: 'content' must be a string"),
        ([{"role": "User", "content": "x"}], "messages[0]: unknown 'role' 'User'; expected one of"),
        ([{"content": "x"}], "messages[0]: no 'role' field"),
        (
            [{"role": "user", "content": "x"}, "hello"],
            "messages[1] must be a JSON object, got a string",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        _call("c", "f", {}) | {"function": {"name": "f", "arguments": "{oops"}}
                    ],
                }
            ],
            "messages[0]: 'tool_calls[0].function.arguments' is not valid JSON",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                }
            ],
            "messages[0]: no 'tool_calls[0].id' field",
        ),
        (
            [{"role": "user", "content": "x", "name": 7}],
            "messages[0]: 'name' must be a string, got a number",
        ),
        (
            SPEC,
            (
                "messages[0] (id 's0'): no 'content' field "
                "(records with 'tokens' need --counter field)"
            ),
        ),
    ],
    ids=[
        "tool-call-id",
        "content",
        "role",
        "no-role",
        "not-object",
        "arguments",
        "call-id",
        "name",
        "records",
    ],
)
def test_wrong_shaped_message_names_index_id_and_field(tmp_path, capsys, messages, expected):
    path = write_json(tmp_path, "chat.json", messages)
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100")
    assert_one_error_line(code, out, err, expected)


def test_wrong_shaped_jsonl_message_names_its_line(tmp_path, capsys):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "a"}\n\n{"role": "tool", "content": "b"}\n')
    code, out, err = run(capsys, "trim", str(path), "--max-tokens", "100")
    assert_one_error_line(code, out, err, "messages[1] (line 3): no 'tool_call_id' field")


def test_field_counter_record_errors(tmp_path, capsys):
    records = [SPEC[0], {"id": "u1", "role": "user"}]
    code, out, err = run(
        capsys,
        "trim",
        write_json(tmp_path, "r.json", records),
        "--max-tokens",
        "100",
        "--counter",
        "field",
    )
    assert_one_error_line(code, out, err, "messages[1] (id 'u1') has no 'tokens' field")


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"conversation": []}, f"{EXPECTED}; got a JSON object with keys 'conversation'"),
        ({}, f"{EXPECTED}; got an empty JSON object"),
        ({"messages": {"role": "user"}}, "'messages' must be an array, got an object"),
        ({"traj": "x", "reward": 1}, "'traj' must be an array, got a string"),
        ("just text", f"{EXPECTED}; got a JSON string"),
        (None, f"{EXPECTED}; got a JSON null"),
        ([1, 2, 3], f"{EXPECTED}; got a JSON array of numbers"),
        (["a", 1], f"{EXPECTED}; got a JSON array starting with a string"),
        ([[CHAT[2]], 5], "d.json conversation 1: expected a list of messages or an object"),
        (
            [{"traj": [CHAT[2]]}, {"role": "user", "content": "hi"}],
            (
                "d.json conversation 1: expected a list of messages or an object with "
                "'messages' or 'traj', got a JSON object with keys 'role', 'content'"
            ),
        ),
        ([{"messages": [CHAT[2]]}, {"messages": 1}], "d.json conversation 1: 'messages' must be"),
    ],
)
def test_wrong_document_shape(tmp_path, capsys, document, expected):
    code, out, err = run(
        capsys, "trim", write_json(tmp_path, "d.json", document), "--max-tokens", "100"
    )
    assert_one_error_line(code, out, err, expected)


def test_empty_input(tmp_path, capsys):
    path = tmp_path / "empty.json"
    path.write_text("  \n")
    code, out, err = run(capsys, "trim", str(path), "--max-tokens", "100")
    assert_one_error_line(code, out, err, "is empty")


def test_unknown_counter(tmp_path, capsys):
    path = write_json(tmp_path, "c.json", CHAT)
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100", "--counter", "words")
    assert_one_error_line(code, out, err, "unknown counter 'words'", "tiktoken:MODEL")


def test_negative_budget_in_the_equals_spelling(tmp_path, capsys):
    code, out, err = run(capsys, "trim", write_json(tmp_path, "c.json", CHAT), "--max-tokens=-5")
    assert_one_error_line(code, out, err, "--max-tokens must be >= 0, got -5")


def test_usage_errors_are_one_line_too(capsys):
    code, out, err = run(capsys, "trim", "chat.json")
    assert_one_error_line(code, out, err, "required: --max-tokens", "turntrim trim --help")
    code, out, err = run(capsys)
    assert_one_error_line(code, out, err, "COMMAND")


@pytest.mark.parametrize("spec", ["tiktoken:o200k_base", "tiktoken:gpt-4o"])
def test_tiktoken_encoding_unavailable_offline(monkeypatch, tmp_path, capsys, spec):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # nothing loaded in-process
    path = write_json(tmp_path, "c.json", CHAT)
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100", "--counter", spec)
    o200k = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    assert_one_error_line(
        code,
        out,
        err,
        "tiktoken could not load the 'o200k_base' encoding: TURNTRIM_OFFLINE forbids downloads "
        "and the file is not in the cache; to count offline, save the file downloaded from "
        f"{o200k} as {hashlib.sha1(o200k.encode(), usedforsecurity=False).hexdigest()} in a "
        "folder and set the TIKTOKEN_CACHE_DIR environment variable to that folder, or unset "
        "TURNTRIM_OFFLINE to let turntrim download it (within TURNTRIM_DOWNLOAD_TIMEOUT "
        "seconds, default 30); --token-counter approximate needs no file\n",
    )
    assert "TiktokenCounter(" not in err  # a Python call is no advice on the command line


GPT2 = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"


@pytest.mark.parametrize("spec", ["tiktoken:gpt2", "tiktoken:gpt-2"])
def test_gpt2_offline_fails_at_once_naming_both_of_its_files(monkeypatch, tmp_path, capsys, spec):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})  # nothing loaded in-process
    path = write_json(tmp_path, "c.json", CHAT)
    for command in ("trim", "report"):
        code, out, err = run(capsys, command, path, "--max-tokens", "100", "--counter", spec)
        keys = [
            hashlib.sha1(f"{GPT2}{f}".encode(), usedforsecurity=False).hexdigest()
            for f in ("vocab.bpe", "encoder.json")
        ]
        assert_one_error_line(
            code,
            out,
            err,
            "could not load the 'gpt2' encoding: TURNTRIM_OFFLINE forbids downloads",
            f"save the file downloaded from {GPT2}vocab.bpe as {keys[0]} and the file "
            f"downloaded from {GPT2}encoder.json as {keys[1]} in a folder",
            "download them (within",
        )


def test_gpt2_downloads_are_bounded_like_every_encodings(monkeypatch, tmp_path):
    from langchain_turntrim._counting.openai import encodings

    monkeypatch.delenv("TURNTRIM_OFFLINE")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    opened = []

    def never_answers(url: str, timeout: float) -> Any:
        opened.append((url, timeout))
        raise TimeoutError

    monkeypatch.setattr(encodings, "_open_url", never_answers)
    with pytest.raises(EncodingUnavailableError) as info:
        TiktokenCounter("gpt2")
    assert opened == [(f"{GPT2}vocab.bpe", encodings.DEFAULT_DOWNLOAD_TIMEOUT)]
    assert f"downloading {GPT2}vocab.bpe did not finish within 30 s" in str(info.value)
    assert info.value.encoding == "gpt2"
    assert [url for url, _ in info.value.files] == [f"{GPT2}vocab.bpe", f"{GPT2}encoder.json"]


@pytest.mark.parametrize("typo", ["gpt", "gpt3", "gpt4", "gpt5", "gpt4o", "gp2"])
def test_gpt2_is_never_offered_for_a_misspelt_name(tmp_path, capsys, typo):
    path = write_json(tmp_path, "c.json", CHAT)
    code, out, err = run(
        capsys, "trim", path, "--max-tokens", "100", "--counter", f"tiktoken:{typo}"
    )
    assert_one_error_line(code, out, err, f"unknown OpenAI model {typo!r}")
    assert "gpt2" not in err
    assert "'gpt-2'" not in err


@pytest.mark.parametrize("command", ["trim", "report"])
def test_an_unknown_model_gets_command_line_advice_not_a_python_call(tmp_path, capsys, command):
    path = write_json(tmp_path, "c.json", CHAT)
    code, out, err = run(
        capsys, command, path, "--max-tokens", "100", "--token-counter", "tiktoken:gpt4o"
    )
    assert_one_error_line(code, out, err, "unknown OpenAI model 'gpt4o' (closest known: 'gpt-4o'")
    assert "e.g. --token-counter tiktoken:o200k_base" in err
    assert "TiktokenCounter(" not in err


# -- report and demo ------------------------------------------------------------------------


def test_report_is_plain_text_when_piped(tmp_path, capsys):
    path = write_json(tmp_path, "chat.json", CHAT)
    budget = newest_turn_budget()
    code, out, err = run(capsys, "report", path, "--max-tokens", str(budget))
    assert (code, err) == (0, "")
    assert "\x1b" not in out
    rows = {
        line.split()[1]: line
        for line in out.splitlines()
        if line.split()[:1] in (["1"], ["2"], ["3"])
    }
    assert set(rows) == {"Weather", "And", "Thanks!"}
    assert rows["Weather"].split()[-1] == "dropped"
    assert rows["And"].split()[-1] == "dropped"
    assert "2" in rows["And"].split()  # two tool calls
    assert rows["Thanks!"].split()[-1] == "kept"
    orphan = next(line for line in out.splitlines() if "(before first user message)" in line)
    assert orphan.split()[-1] == "dropped"
    each = costs(CHAT)
    before, after = sum(each), budget
    assert f"system  {each[0]:>{len(str(before))}}  tokens (1 message)" in out
    assert f"before  {before}  tokens (3 turns, 13 messages)" in out
    assert (
        f"after   {after:>{len(str(before))}}  tokens (1 turn, 3 messages; 2 turns dropped)" in out
    )
    assert "100% used" in out


def test_report_with_the_field_counter(tmp_path, capsys):
    path = write_json(tmp_path, "spec.json", SPEC)
    code, out, _ = run(capsys, "report", path, "--max-tokens", "100", "--counter", "field")
    assert code == 0
    lines = {
        line.split()[1]: line.split()
        for line in out.splitlines()
        if line.split()[:1] in (["1"], ["2"])
    }
    assert lines["u1"][2:4] == ["2", "60"]
    assert lines["u1"][-1] == "dropped"
    assert lines["u2"][2:4] == ["2", "50"]
    assert lines["u2"][-1] == "kept"
    assert "before  130  tokens (2 turns, 5 messages)" in out
    assert "after    70  tokens (1 turn, 3 messages; 1 turn dropped)" in out
    assert "budget  100  tokens, 70% used" in out


def test_report_folds_long_histories(tmp_path, capsys):
    records = [SPEC[0]] + [
        {"id": f"{kind}{i}", "role": role, "tokens": 10}
        for i in range(100)
        for kind, role in (("u", "user"), ("a", "assistant"))
    ]
    path = write_json(tmp_path, "long.json", records)
    # 20 tokens a turn: the newest 40 turns (61-100) fit beside the system message.
    code, out, _ = run(capsys, "report", path, "--max-tokens", "820", "--counter", "field")
    assert code == 0
    assert len(out.splitlines()) < 60
    folded = next(line for line in out.splitlines() if "more turns" in line)
    assert folded.split()[1:6] == ["61", "more", "turns", "122", "1,220"]  # turns 6-66
    assert folded.split()[-2:] == ["6", "kept"]  # turns 61-66
    for shown in ("u0 ", "u4 ", "u66 ", "u99 "):
        assert shown in out
    assert "u5 " not in out


def test_report_without_rich_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "rich", None)
    code, out, err = run(
        capsys, "report", write_json(tmp_path, "c.json", CHAT), "--max-tokens", "100"
    )
    assert_one_error_line(code, out, err, "install 'langchain-turntrim[cli]'")
    # From a checkout or a built wheel, the name alone would not find the extra.
    assert (
        "from a checkout: pip install -e '.[cli]'; from a wheel: pip install 'FILE.whl[cli]'" in err
    )
    code, out, err = run(capsys, "demo")
    assert_one_error_line(code, out, err, "langchain-turntrim[cli]")


def test_demo_drops_some_turns(capsys):
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    assert "\x1b" not in out
    assert f"budget {DEMO_MAX_TOKENS:,} tokens" in out
    statuses = [
        line.split()[-1]
        for line in out.splitlines()
        if line.split()[:1] in [[str(n)] for n in range(1, 9)]
    ]
    assert statuses == ["dropped"] * 4 + ["kept"] * 4  # the oldest turns went
    assert "Kept 17 of 35 messages:" in out
    assert "→ rollback_service(" in out  # tool calls and results, one line each
    assert "← call_post: " in out


def test_version_and_help(capsys):
    code, out, _ = run(capsys, "--version")
    assert (code, out) == (0, f"turntrim {langchain_turntrim.__version__}\n")
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "examples:" in out
    assert "turntrim trim chat.json --max-tokens 8000" in out
    code, out, _ = run(capsys, "trim", "--help")
    assert code == 0
    assert "--counter" in out


# -- as a subprocess ------------------------------------------------------------------------


def test_subprocess_trim_from_stdin():
    done = run_python(
        "-m",
        "langchain_turntrim",
        "trim",
        "-",
        "--max-tokens",
        "100",
        "--counter",
        "field",
        stdin=json.dumps(SPEC),
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == [SPEC[0], SPEC[3], SPEC[4]]


def test_subprocess_error_is_one_line_exit_2(tmp_path):
    done = run_python(
        "-m", "langchain_turntrim", "trim", str(tmp_path / "missing.json"), "--max-tokens", "5"
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("turntrim: error: cannot read ")
    assert done.stderr.count("\n") == 1


def test_subprocess_demo_is_plain_when_piped():
    done = run_python("-m", "langchain_turntrim", "demo")
    assert (done.returncode, done.stderr) == (0, "")
    assert "\x1b" not in done.stdout
    assert "dropped" in done.stdout
    assert "Kept 17 of 35 messages:" in done.stdout


def test_subprocess_trim_never_imports_the_runnable_machinery(tmp_path):
    """Importing LangChain's tracers (for TurnTrimmer) would cost a run more than its trim."""
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "old " * 100},
        {"role": "assistant", "content": "old"},
        {"role": "user", "content": "new"},
    ]
    path = write_json(tmp_path, "chat.json", chat)
    script = (
        "import sys\n"
        "from langchain_turntrim._cli import main\n"
        f"code = main(['trim', {path!r}, '--max-tokens', '30', '--on-overflow', 'compact'])\n"
        "heavy = ['langchain_turntrim._trimmer', 'langchain_core.runnables.base',\n"
        "         'langchain_core.tracers', 'langsmith.run_trees', 'rich']\n"
        "sys.stderr.write(repr([m for m in heavy if m in sys.modules]))\n"
        "raise SystemExit(code)\n"
    )
    done = run_python("-c", script)
    assert (done.returncode, done.stderr) == (0, "[]")
    assert json.loads(done.stdout) == [chat[0], chat[3]]


def test_subprocess_trim_never_imports_rich(tmp_path):
    path = write_json(tmp_path, "spec.json", SPEC)
    script = (
        "import sys; sys.modules['rich'] = None\n"
        "from langchain_turntrim._cli import main\n"
        f"raise SystemExit(main(['trim', {path!r}, '--max-tokens', '100', '--counter', 'field']))\n"
    )
    done = run_python("-c", script)
    assert (done.returncode, done.stderr) == (0, "")
    assert [m["id"] for m in json.loads(done.stdout)] == ["s0", "u2", "a2"]


def test_report_shows_the_compaction_trim_writes(tmp_path, capsys):
    """Under --on-overflow compact, the report shows the decision trim makes:
    the newest turn compacted, and the totals of what is written."""
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "My line is down."},
    ]
    for step in range(8):
        chat.append(
            {
                "role": "assistant",
                "content": f"Running check {step}.",
                "tool_calls": [
                    {
                        "id": f"call{step}",
                        "type": "function",
                        "function": {"name": "run_diagnostic", "arguments": f'{{"check": {step}}}'},
                    }
                ],
            }
        )
        chat.append({"role": "tool", "tool_call_id": f"call{step}", "content": "log line\n" * 150})
    path = write_json(tmp_path, "agent.json", chat)
    args = (path, "--max-tokens", "2000", "--on-overflow", "compact")
    code, written, _ = run(capsys, "trim", *args)
    assert code == 0
    after = ApproximateCounter().count(convert_to_messages(json.loads(written)))
    assert after <= 2000
    code, out, _ = run(capsys, "report", *args)
    assert code == 0
    rows = {
        line.split()[1]: line.split()
        for line in out.splitlines()
        if line.split()[:1] in (["1"], ["2"])
    }
    assert rows["old"][-1] == "dropped"
    assert rows["My"][-1] == "compacted"
    assert (
        f"after   {after:,}  tokens (1 turn, {len(json.loads(written))} messages; 1 turn dropped"
        in out
    )
    assert f"{100 * after / 2000:.0f}% used" in out
    assert f"compact: the newest turn is kept in {after:,} tokens" in out
