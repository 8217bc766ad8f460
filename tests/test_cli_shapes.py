"""The files people have: one conversation or several, as a JSON array or JSONL of
them (tau-bench's ``{"traj": [...]}`` items, request bodies, message lists), all
of them trimmed or ``--conversation N`` alone, each written back as it was read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli
from tests.test_cli import SPEC

pytestmark = pytest.mark.usefixtures("plain_terminal")

run = run_cli

SPEC_A = SPEC  # the spec's example: s0, then turns u1-a1 and u2-a2
# With a budget of 100: conversation A keeps s0, u2, a2; B keeps all of its own.
SPEC_B = [
    {"id": "u5", "role": "user", "tokens": 10, "note": "é"},
    {"id": "a5", "role": "assistant", "tokens": 10},
]
KEPT_A = [SPEC_A[0], SPEC_A[3], SPEC_A[4]]
FIELD = ("--max-tokens", "100", "--counter", "field")
# The numbers and keys a re-serialisation would change: they must come back as written.
ODD = '{"id": "u9", "role": "user", "tokens": 1, "big": 1e400, "x": 1, "x": 2, "e": "\\u00e9"}'


def put(tmp_path: Path, text: str, name: str = "runs.json") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def tau(traj: list[Any], task: int) -> dict[str, Any]:
    """A tau-bench item: the conversation is its ``traj``."""
    return {"task_id": task, "reward": 1.0, "info": {"k": [1, 2]}, "traj": traj, "trial": 0}


# -- a JSON array of conversations ------------------------------------------------------------


def test_tau_bench_items_are_each_trimmed_and_keep_their_other_keys(tmp_path, capsys):
    items = [tau(SPEC_A, 0), tau(SPEC_B, 1)]
    text = json.dumps(items, indent=2, ensure_ascii=False)
    code, out, err = run(capsys, "trim", put(tmp_path, text), *FIELD)
    assert (code, err) == (0, "")
    assert json.loads(out) == [tau(KEPT_A, 0), tau(SPEC_B, 1)]
    assert out.endswith('"trial": 0\n  }\n]\n')  # the layout around them is kept
    assert '"note": "é"' in out


def test_a_list_of_message_lists_written_back_unchanged_when_all_fit(tmp_path, capsys):
    text = f"[\n [{ODD}],\n  {json.dumps(SPEC_B)} ]\n"
    code, out, err = run(
        capsys, "trim", put(tmp_path, text), "--max-tokens", "50", "--counter", "field"
    )
    assert (code, out, err) == (0, text, "")


def test_every_shape_of_conversation_in_one_array(tmp_path, capsys):
    items = [SPEC_A, {"messages": SPEC_A, "model": "m"}, tau(SPEC_A, 7)]
    code, out, err = run(capsys, "trim", put(tmp_path, json.dumps(items)), *FIELD)
    assert (code, err) == (0, "")
    assert json.loads(out) == [KEPT_A, {"messages": KEPT_A, "model": "m"}, tau(KEPT_A, 7)]


@pytest.mark.parametrize("index", [0, 1])
def test_one_conversation_is_written_alone_in_its_own_shape(tmp_path, capsys, index):
    items = [tau(SPEC_A, 0), SPEC_B]
    path = put(tmp_path, json.dumps(items, ensure_ascii=False))
    code, out, err = run(capsys, "trim", path, *FIELD, "--conversation", str(index))
    assert (code, err) == (0, "")
    assert json.loads(out) == [tau(KEPT_A, 0), SPEC_B][index]


def test_a_single_tau_bench_item_is_one_conversation(tmp_path, capsys):
    path = put(tmp_path, json.dumps(tau(SPEC_A, 3)))
    code, out, err = run(capsys, "trim", path, *FIELD)
    assert (code, err) == (0, "")
    assert json.loads(out) == tau(KEPT_A, 3)
    code, out, err = run(capsys, "trim", path, *FIELD, "--conversation", "0")
    assert json.loads(out) == tau(KEPT_A, 3)


def test_a_request_body_in_a_list_has_its_tools_priced(tmp_path, capsys):
    tool = {"type": "function", "function": {"name": "f", "description": "x" * 400}}
    chat = [{"role": "user", "content": "hi"}]
    items = [{"messages": chat}, {"messages": chat, "tools": [tool]}]
    code, out, err = run(capsys, "trim", put(tmp_path, json.dumps(items)), "--max-tokens", "50")
    assert code == 0
    assert json.loads(out) == [{"messages": chat}, {"messages": [], "tools": [tool]}]
    assert err.startswith("turntrim: warning: conversation 1: the system messages alone exceed")


# -- JSONL of conversations ------------------------------------------------------------------


def test_jsonl_of_conversations_one_trimmed_conversation_a_line(tmp_path, capsys):
    lines = [json.dumps(tau(SPEC_A, 0)), "", json.dumps(SPEC_B), json.dumps({"messages": SPEC_A})]
    path = put(tmp_path, "\n".join(lines) + "\n", "runs.jsonl")
    code, out, err = run(capsys, "trim", path, *FIELD)
    assert (code, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [
        tau(KEPT_A, 0),
        SPEC_B,
        {"messages": KEPT_A},
    ]
    code, out, _ = run(capsys, "trim", path, *FIELD, "--conversation", "2")
    assert out == json.dumps({"messages": KEPT_A}) + "\n"


def test_jsonl_of_messages_is_still_one_conversation(tmp_path, capsys):
    path = put(tmp_path, "".join(json.dumps(m) + "\n" for m in SPEC_A), "chat.jsonl")
    code, out, _ = run(capsys, "trim", path, *FIELD)
    assert (code, [json.loads(line) for line in out.splitlines()]) == (0, KEPT_A)


# -- choosing one, and what is wrong ---------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "index", "expected"),
    [
        ([SPEC_A, SPEC_B], "2", "--conversation 2: {path} holds 2 conversations (0 to 1)"),
        (SPEC_A, "1", "--conversation 1: {path} holds 1 conversation (0)"),
        ([SPEC_A], "-1", "--conversation must be >= 0, got -1"),
    ],
    ids=["past-the-end", "one-conversation", "negative"],
)
@pytest.mark.parametrize("command", ["trim", "report"])
def test_a_conversation_out_of_range_says_how_many_there_are(
    tmp_path, capsys, items, index, expected, command
):
    path = put(tmp_path, json.dumps(items))
    code, out, err = run(capsys, command, path, *FIELD, "--conversation", index)
    assert (code, out) == (2, "")
    assert err == f"turntrim: error: {expected.format(path=path)}\n"


def test_an_error_names_the_conversation_and_nothing_is_written(tmp_path, capsys):
    bad = [{"id": "u1", "role": "user"}]
    path = put(tmp_path, json.dumps([SPEC_A, SPEC_B, bad]))
    code, out, err = run(capsys, "trim", path, *FIELD)
    assert (code, out) == (2, "")
    assert err == "turntrim: error: conversation 2: messages[0] (id 'u1') has no 'tokens' field\n"


def test_a_jsonl_error_names_the_conversation_and_its_line(tmp_path, capsys):
    good = json.dumps([{"role": "user", "content": "hi"}])
    path = put(tmp_path, f'{good}\n\n[{{"role": "User", "content": "x"}}]\n', "runs.jsonl")
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100")
    assert (code, out) == (2, "")
    assert err.startswith(
        "turntrim: error: conversation 1 (line 3): messages[0]: unknown 'role' 'User'"
    )


# -- report: one table a conversation --------------------------------------------------------


def test_report_shows_one_table_per_conversation(tmp_path, capsys):
    path = put(tmp_path, json.dumps([tau(SPEC_A, 0), tau(SPEC_B, 1)]))
    code, out, err = run(capsys, "report", path, *FIELD)
    assert (code, err) == (0, "")
    titles = [line for line in out.splitlines() if "budget 100 tokens" in line]
    assert titles == [
        f"{path} conversation 0: budget 100 tokens, counter field",
        f"{path} conversation 1: budget 100 tokens, counter field",
    ]
    assert "after    70  tokens (1 turn, 3 messages; 1 turn dropped)" in out
    assert "after    20  tokens (1 turn, 2 messages; 0 turns dropped)" in out
    code, out, _ = run(capsys, "report", path, *FIELD, "--conversation", "1")
    titles = [line for line in out.splitlines() if "budget 100 tokens" in line]
    assert titles == [f"{path} conversation 1: budget 100 tokens, counter field"]
