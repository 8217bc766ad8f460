"""The ``turntrim`` command's errors, streams and terminal: every error one line
naming where, nothing from a transcript driving the terminal, and the exit
statuses the help promises (a few as real subprocesses)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
from typing import Any

import pytest

from langchain_turntrim._cli import app, main
from tests.test_cli import CHAT, SPEC, one_error, put, run

SMALL = '[{"role": "user", "content": "hi"}]'
BODY = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "first question " * 10},
    {"role": "assistant", "content": "first answer " * 10},
    {"role": "user", "content": "second question " * 10},
    {"role": "assistant", "content": "second answer " * 10},
]


pytestmark = pytest.mark.usefixtures("plain_terminal")


# -- what is wrong, and where ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
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
def test_invalid_json_names_its_line_and_column(tmp_path, capsys, text, expected):
    path = put(tmp_path, text)
    one_error(
        *run(capsys, "trim", path, "--max-tokens", "10"), f"{path}: invalid JSON at {expected}: "
    )


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"conversation": []}, "got an object with keys 'conversation'"),
        ({"messages": {"role": "user"}}, "'messages' must be an array, got an object"),
        ({"traj": "x", "reward": 1}, "'traj' must be an array, got a string"),
        ('"just text"', "got a string"),
        (None, "got null"),
        ([1, 2, 3], "d.json: messages[0] must be a JSON object, got a number"),
        ([[CHAT[2]], 5], "d.json conversation 1: expected a list of messages"),
        (
            [{"messages": [CHAT[2]]}, {"messages": 1}],
            "d.json conversation 1: 'messages' must be an array",
        ),
        ({"messages": CHAT, "tools": [5]}, "d.json: tools[0] must be a tool schema dict"),
    ],
)
def test_a_document_of_another_shape_is_named(tmp_path, capsys, document, expected):
    one_error(
        *run(capsys, "trim", put(tmp_path, document, "d.json"), "--max-tokens", "100"), expected
    )


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [CHAT[2], {"role": "tool", "content": "x", "id": "m1"}],
            ("messages[1] (id 'm1') is not",),
        ),
        ([{"role": "User", "content": "x"}], ("messages[0] is not a message", "type: 'User'")),
        ([{"content": "x"}], ("messages[0] is not a message", "must contain 'role'")),
        ([CHAT[2], "hello"], ("messages[1] must be a JSON object, got a string",)),
        (
            [{"role": "user", "content": 5, "id": 7}],
            ("messages[0] (id 7) is not a", "valid string"),
        ),
        (SPEC, ("messages[0] (id 's0') is not a message", "'content'")),
    ],
)
def test_a_message_langchain_cannot_convert_is_named(tmp_path, capsys, messages, expected):
    path = put(tmp_path, messages)
    one_error(
        *run(capsys, "trim", path, "--max-tokens", "100"), f"{path}: {expected[0]}", *expected[1:]
    )


def test_a_jsonl_message_is_named_by_its_line(tmp_path, capsys):
    path = put(
        tmp_path,
        '{"role": "user", "content": "a"}\n\n{"role": "tool", "content": "b", "id": "t"}\n',
    )
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100")
    one_error(code, out, err, f"{path} line 3: messages[1] (id 't') is not a message")
    assert "troubleshooting" not in err


def test_a_record_without_tokens_is_named(tmp_path, capsys):
    path = put(tmp_path, [SPEC[0], {"id": "u1", "role": "user"}])
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100", "--counter", "field")
    assert (code, out, err) == (
        2,
        "",
        f"turntrim: error: {path}: messages[1] (id 'u1') has no 'tokens' field\n",
    )


@pytest.mark.parametrize("counter", ["approximate", "field"])
def test_raise_fails_when_not_even_the_newest_turn_fits(tmp_path, capsys, counter):
    path = put(tmp_path, SPEC if counter == "field" else BODY)
    code, out, err = run(
        capsys, "trim", path, "--max-tokens", "30", "--counter", counter, "--on-overflow", "raise"
    )
    one_error(
        code, out, err, f"{path}: the newest turn (", "does not fit beside the system messages"
    )


def test_missing_empty_and_not_utf8_files(tmp_path, capsys):
    missing = str(tmp_path / "nope.json")
    one_error(
        *run(capsys, "trim", missing, "--max-tokens", "10"), f"cannot read {missing}: No such file"
    )
    one_error(
        *run(capsys, "trim", put(tmp_path, "  \n"), "--max-tokens", "10"),
        "is empty; expected a list",
    )
    (tmp_path / "latin.json").write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    one_error(
        *run(capsys, "trim", str(tmp_path / "latin.json"), "--max-tokens", "10"),
        "is not UTF-8 text (byte 33",
    )


def test_usage_errors_are_one_line_too(capsys):
    one_error(*run(capsys, "trim", "chat.json"), "required: --max-tokens", "turntrim trim --help")
    one_error(*run(capsys), "COMMAND")


def test_help_and_version(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    statuses = " ".join(out.split("exit status:", 1)[1].split())
    for said in (
        "0 on success",
        "1 when whatever reads the output closed it",
        "2 on any other error",
        "130 when",
    ):
        assert said in statuses
    code, out, _ = run(capsys, "trim", "--help")
    assert "--counter" in out
    assert "268,435,456" in out
    code, out, _ = run(capsys, "--version")
    assert (code, out.split()[0]) == (0, "turntrim")


# -- warnings --------------------------------------------------------------------------------


def test_keeping_only_the_system_messages_is_said_on_stderr(tmp_path, capsys):
    path = put(tmp_path, BODY)
    code, out, err = run(capsys, "trim", path, "--max-tokens", "20")
    assert (code, json.loads(out)) == (0, BODY[:1])
    assert err.startswith(f"turntrim: warning: {path}: not even the newest turn (")
    assert err.endswith("only the system messages are kept\n")
    assert err.count("\n") == 1
    code, out, err = run(capsys, "trim", path, "--max-tokens", "1")
    assert (code, json.loads(out)) == (0, BODY[:1])
    assert "the system messages alone exceed the budget (" in err
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100000")
    assert (code, err) == (0, "")


# -- bounded reads ---------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [0, 1])
def test_a_file_at_the_bound_is_read_and_one_byte_more_is_not(tmp_path, capsys, extra):
    path = put(tmp_path, SMALL + " " * extra)
    code, out, err = run(
        capsys, "trim", path, "--max-tokens", "100", "--max-input-bytes", str(len(SMALL))
    )
    if extra:
        one_error(
            code,
            out,
            err,
            f"{path} is larger than {len(SMALL)} bytes (--max-input-bytes N reads more)",
        )
    else:
        assert (code, out, err) == (0, SMALL + "\n", "")


def test_endless_inputs_fail_at_the_bound(monkeypatch, capsys):
    code, out, err = run(
        capsys, "trim", "/dev/zero", "--max-tokens", "1", "--max-input-bytes", "5000000"
    )
    one_error(code, out, err, "/dev/zero is larger than 5,000,000 bytes")

    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            buffer[:] = b" " * len(buffer)
            return len(buffer)

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Endless())))
    code, out, err = run(capsys, "trim", "-", "--max-tokens", "1", "--max-input-bytes", "3000000")
    one_error(code, out, err, "<stdin> is larger than 3,000,000 bytes")


# -- closed streams, interruptions, and a missing rich ---------------------------------------


def test_closed_stdout_and_stdin(monkeypatch, tmp_path, capsys):
    path = put(tmp_path, SMALL)
    for command in ("trim", "report"):
        monkeypatch.setattr(sys, "stdout", None)
        code = main([command, path, "--max-tokens", "10"])
        monkeypatch.undo()
        one_error(code, "", capsys.readouterr().err, "cannot write the output: stdout is closed")
    monkeypatch.setattr(sys, "stdin", None)
    one_error(
        *run(capsys, "trim", "-", "--max-tokens", "10"), "cannot read <stdin>: stdin is closed"
    )


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, tmp_path, capsys):
    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(app, "read_document", interrupted)
    assert main(["trim", put(tmp_path, SMALL), "--max-tokens", "10"]) == 130
    assert capsys.readouterr().err == "turntrim: interrupted\n"


@pytest.mark.parametrize("command", ["trim", "report", "demo"])
def test_a_closed_pipe_is_exit_status_1_and_says_nothing(monkeypatch, tmp_path, capsys, command):
    argv = ["demo"] if command == "demo" else [command, put(tmp_path, BODY), "--max-tokens", "100"]
    read, write = os.pipe()
    os.close(read)  # the reader has gone: every write fails as a closed pipe's does
    stdout = os.fdopen(write, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", stdout)
    code = main(argv)
    monkeypatch.undo()
    stdout.close()
    assert (code, capsys.readouterr().err) == (1, "")


def test_report_and_demo_without_rich_say_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "rich", None)
    path = put(tmp_path, BODY)
    for argv in (["report", path, "--max-tokens", "100"], ["demo"]):
        code, out, err = run(capsys, *argv)
        one_error(
            code, out, err, "pip install 'langchain-turntrim[cli]'", "pip install -e '.[cli]'"
        )
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100000")
    assert (code, json.loads(out), err) == (0, BODY, "")


# -- nothing from the transcript drives the terminal ------------------------------------------

ESCAPES = {
    "\x1b]52;c;cm0gLXJmIH4=\x07": r"\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: set the clipboard
    "\x1b[2J\x1b[H": r"\x1b[2J\x1b[H",  # clear the screen
    "\x9b2J": r"\x9b2J",  # the same with a C1 control
    "\u202etxt.exe": r"\u202etxt.exe",  # right-to-left override
    "\ud83d": r"\ud83d",  # a lone surrogate
}


def controls(text: str) -> list[str]:
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    return [c for c in text if c != "\n" and (unicodedata.category(c) in ("Cc", "Cs") or c in bidi)]


@pytest.mark.parametrize(("escape", "shown"), ESCAPES.items())
def test_tables_and_errors_neutralise_control_characters(
    tmp_path, capsys, monkeypatch, escape, shown
):
    hostile = [
        {"role": "system", "content": escape},
        {"role": "user", "content": escape + " question", "name": "x"},
        {
            "role": "assistant",
            "content": escape,
            "tool_calls": [
                {"id": escape, "type": "function", "function": {"name": escape, "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": escape, "content": escape},
    ]
    name = "chat-" + escape.replace("\ud83d", "x") + ".json"
    path = put(tmp_path, json.dumps(hostile), name)
    code, out, err = run(capsys, "report", path, "--max-tokens", "1000")
    assert (code, err) == (0, "")
    assert controls(out) == []
    assert shown[:12] in out.split("\n", 1)[1]  # in a row
    title = "chat-" + ("x" if escape == "\ud83d" else shown) + ".json: budget"
    assert title in out.split("\n", 1)[0]
    code, out, err = run(
        capsys,
        "trim",
        put(tmp_path, json.dumps([{"role": escape, "content": "x"}])),
        "--max-tokens",
        "9",
    )
    assert (code, out) == (2, "")
    assert controls(err) == []
    assert "messages[0]" in err
    monkeypatch.setattr(app, "SAMPLE", name)
    monkeypatch.setattr("langchain_turntrim._cli.app.resources.files", lambda _: tmp_path)
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    assert controls(out) == []
    assert f"← {shown}: {shown}" in out


# -- as a subprocess -------------------------------------------------------------------------


def shell(script: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run(
        ["sh", "-c", script, sys.executable, *args],  # noqa: S607 - the shell on PATH
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_subprocess_trim_from_stdin():
    done = shell(
        '"$0" -m langchain_turntrim trim - --max-tokens 100 --counter field', stdin=json.dumps(SPEC)
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == [SPEC[0], SPEC[3], SPEC[4]]


def test_subprocess_with_stdout_closed(tmp_path):
    done = shell(
        'exec "$0" -m langchain_turntrim trim "$1" --max-tokens 10 >&-', put(tmp_path, SMALL)
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "turntrim: error: cannot write the output: stdout is closed\n"


def test_subprocess_demo_into_a_closed_pipe_is_exit_status_1():
    command = [sys.executable, "-m", "langchain_turntrim", "demo"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as done:
        assert done.stdout is not None
        done.stdout.close()  # as `| head -0` does: the first write fails
        _, err = done.communicate(timeout=60)
    assert (done.returncode, err) == (1, b"")
