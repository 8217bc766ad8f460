"""The ``turntrim`` command loses nothing it keeps, lets nothing drive the terminal,
and fails in one line whatever happens to its streams."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any, TextIO

import pytest

from langchain_turntrim._cli import app
from langchain_turntrim._cli.app import main
from langchain_turntrim._cli.streams import MAX_INPUT_BYTES
from tests.helpers import run_cli

# Numbers and keys a re-serialisation would change: every one must come back as written.
ODD = (
    '{"role": "user", "content": "odd numbers", "id": "u1",\n'
    '   "metadata": {"big": 1e400, "precise": 12345678901234567890.5, "e": 1e5,'
    ' "zero": -0, "x": 1, "x": 2, "esc": "\\u00e9\\/"}}'
)
OLD = '{"role": "user", "content": "' + "old question " * 40 + '", "id": "u0"}'
REPLY = '{"role":"assistant","content":"ok","id":"a1"}'


pytestmark = pytest.mark.usefixtures("plain_terminal")


run = run_cli


def put(tmp_path: Path, text: str, name: str = "chat.json") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


# -- 9. kept messages are written value for value ------------------------------------------


def test_nothing_dropped_writes_the_input_unchanged(tmp_path, capsys):
    for text in (
        f"[\n  {ODD},\n  {REPLY}\n]\n",
        f'{{"model": "m", "n": 1e5, "messages": [{ODD} , {REPLY}], "n": 2}}',
        f"{ODD.replace(chr(10), ' ')}\n{REPLY}\n",
    ):
        code, out, err = run(capsys, "trim", put(tmp_path, text), "--max-tokens", "100000")
        assert (code, err) == (0, "")
        assert out == text if text.endswith("\n") else out == text + "\n"


@pytest.mark.parametrize("shape", ["array", "object", "jsonl"])
def test_kept_messages_are_the_bytes_that_were_read(tmp_path, capsys, shape):
    odd = ODD.replace("\n", " ") if shape == "jsonl" else ODD
    if shape == "array":
        text = f"[{OLD},\n {odd},\t{REPLY}]"
    elif shape == "object":
        text = f'{{"temperature": 0.10000000000000001, "messages": [{OLD}, {odd}, {REPLY}]}}'
    else:
        text = f"{OLD}\n{odd}\r\n{REPLY}\n"
    code, out, err = run(capsys, "trim", put(tmp_path, text), "--max-tokens", "60")
    assert (code, err) == (0, "")
    assert odd in out
    assert REPLY in out
    assert "old question" not in out
    if shape == "object":
        assert out.startswith('{"temperature": 0.10000000000000001, "messages": [')
    if shape == "object":
        kept = json.loads(out)["messages"]
    elif shape == "array":
        kept = json.loads(out)
    else:
        kept = [json.loads(line) for line in out.splitlines()]
    assert [m["id"] for m in kept] == ["u1", "a1"]


# -- 10. lone surrogates --------------------------------------------------------------------


SURROGATE = '[{"role": "user", "content": "truncated emoji \\ud83d", "id": "u1"}]'


def test_a_lone_surrogate_escape_is_written_back_as_it_was(tmp_path, capsys):
    code, out, err = run(capsys, "trim", put(tmp_path, SURROGATE), "--max-tokens", "1000")
    assert (code, err) == (0, "")
    assert out == SURROGATE + "\n"


def test_the_report_shows_a_lone_surrogate_without_failing(tmp_path, capsys):
    code, out, err = run(capsys, "report", put(tmp_path, SURROGATE), "--max-tokens", "1000")
    assert (code, err) == (0, "")
    assert "truncated emoji \\ud83d" in out
    out.encode("utf-8")


# -- 11. nothing from the transcript drives the terminal -----------------------------------


#: Escape sequences, and how each is shown instead.
ESCAPES = {
    "\x1b]52;c;cm0gLXJmIH4=\x07": r"\x1b]52;c;",  # OSC 52: set the clipboard
    "\x1b]0;pwned\x07": r"\x1b]0;pwned\x07",  # the window title
    "\x1b[2J\x1b[H": r"\x1b[2J\x1b[H",  # clear the screen
    "\x9b2J": r"\x9b2J",  # the same with a C1 control
    "\u202etxt.exe": r"\u202etxt.exe",  # right-to-left override
    "bell\x07": r"bell\x07",
}


def hostile(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": text},
        {"role": "user", "content": text + " question", "name": text},
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {"id": text, "type": "function", "function": {"name": text, "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": text, "content": text},
        {"role": "user", "id": text, "content": ""},
    ]


def controls(text: str) -> list[str]:
    """Control characters, surrogates and bidirectional controls in ``text``."""
    bidi = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    return [c for c in text if c != "\n" and (unicodedata.category(c) in ("Cc", "Cs") or c in bidi)]


@pytest.mark.parametrize(("escape", "shown"), ESCAPES.items())
def test_report_neutralises_control_characters(tmp_path, capsys, escape, shown):
    path = put(tmp_path, json.dumps(hostile(escape)), name=f"chat{escape}.json")
    code, out, err = run(capsys, "report", path, "--max-tokens", "60")
    assert (code, err) == (0, "")
    assert controls(out) == []
    assert f"chat{shown}" in out  # the title
    assert out.count(shown) >= 2  # and a turn


def test_error_messages_neutralise_control_characters(tmp_path, capsys):
    chat = [{"role": "user", "content": "hi"}, {"role": "\x1b[2Jbad", "content": "x"}]
    code, out, err = run(capsys, "trim", put(tmp_path, json.dumps(chat)), "--max-tokens", "9")
    assert (code, out) == (2, "")
    assert controls(err) == []
    assert "messages[1]" in err


def test_the_demo_neutralises_control_characters(monkeypatch, capsys):
    sample = json.dumps(hostile("\x1b]52;c;cm0gLXJmIH4=\x07"))
    monkeypatch.setattr(app, "_sample_text", lambda: sample)
    code, out, err = run(capsys, "demo", "--max-tokens", "1000")
    assert (code, err) == (0, "")
    assert controls(out) == []
    assert "Kept " in out


# -- 12. closed streams and Ctrl-C ------------------------------------------------------------


def assert_one_line(code: int, err: str, status: int, fragment: str) -> None:
    assert code == status
    assert err.startswith("turntrim: ")
    assert err.count("\n") == 1, err
    assert fragment in err


def test_stdout_closed(monkeypatch, tmp_path, capsys):
    path = put(tmp_path, json.dumps([{"role": "user", "content": "hi"}]))
    for command in ("trim", "report"):
        monkeypatch.setattr(sys, "stdout", None)
        code = main([command, path, "--max-tokens", "10"])
        monkeypatch.undo()
        assert_one_line(code, capsys.readouterr().err, 2, "stdout is closed")


def test_stdin_closed(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)
    code = main(["trim", "-", "--max-tokens", "10"])
    assert_one_line(code, capsys.readouterr().err, 2, "stdin is closed")


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, tmp_path, capsys):
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(app, "read_document", interrupted)
    code = main(["trim", put(tmp_path, "[]"), "--max-tokens", "10"])
    assert_one_line(code, capsys.readouterr().err, 130, "interrupted")


def _subprocess(script: str, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run(
        ["sh", "-c", script, sys.executable, *args],  # noqa: S607 - the shell on PATH, as a user's
        stdin=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_subprocess_with_stdout_closed(tmp_path):
    path = put(tmp_path, json.dumps([{"role": "user", "content": "hi"}]))
    done = _subprocess('exec "$0" -m langchain_turntrim trim "$1" --max-tokens 10 >&-', path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "turntrim: error: cannot write the output: stdout is closed\n"


def test_subprocess_with_stdin_closed():
    done = _subprocess('exec "$0" -m langchain_turntrim trim - --max-tokens 10 <&-')
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "turntrim: error: cannot read <stdin>: stdin is closed\n"


# -- 13. what trim says, and what it prices --------------------------------------------------


CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "first question " * 10},
    {"role": "assistant", "content": "first answer " * 10},
    {"role": "user", "content": "second question " * 10},
    {"role": "assistant", "content": "second answer " * 10},
]


def test_keeping_only_the_system_messages_is_said_on_stderr(tmp_path, capsys):
    path = put(tmp_path, json.dumps(CHAT))
    code, out, err = run(capsys, "trim", path, "--max-tokens", "10")
    assert code == 0
    assert json.loads(out) == CHAT[:1]
    assert err.startswith("turntrim: warning: ")
    assert err.count("\n") == 1
    assert "only the system messages are kept" in err
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100000")
    assert (code, err) == (0, "")


def test_the_system_messages_alone_over_budget_is_said_on_stderr(tmp_path, capsys):
    code, out, err = run(capsys, "trim", put(tmp_path, json.dumps(CHAT)), "--max-tokens", "1")
    assert code == 0
    assert json.loads(out) == CHAT[:1]
    assert "the system messages alone exceed the budget" in err


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


@pytest.mark.parametrize("counter", ["approximate", "tiktoken:cl100k_base"])
def test_a_request_bodys_tools_are_priced(tiktoken_cache, tmp_path, capsys, counter):
    plain = put(tmp_path, json.dumps({"messages": CHAT}), name="plain.json")
    tools = put(tmp_path, json.dumps({"messages": CHAT, "tools": TOOLS}), name="tools.json")
    sizes = {}
    for budget in range(40, 400, 5):
        code, out, _ = run(capsys, "trim", plain, "--max-tokens", str(budget), "--counter", counter)
        without = len(json.loads(out)["messages"])
        code, out, _ = run(capsys, "trim", tools, "--max-tokens", str(budget), "--counter", counter)
        assert json.loads(out)["tools"] == TOOLS
        sizes[budget] = (without, len(json.loads(out)["messages"]))
    assert all(with_tools <= without for without, with_tools in sizes.values())
    assert any(with_tools < without for without, with_tools in sizes.values())
    code, out, _ = run(capsys, "report", tools, "--max-tokens", "400", "--counter", counter)
    assert code == 0
    tools_row = next(line for line in out.splitlines() if line.startswith("tools "))
    assert tools_row.rstrip().endswith("tokens (1 tool schema)")


def test_a_tools_value_that_is_not_an_array_is_an_error(tmp_path, capsys):
    path = put(tmp_path, json.dumps({"messages": CHAT, "tools": {"name": "x"}}))
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100")
    assert (code, out) == (2, "")
    assert "'tools' must be an array, got an object" in err


def test_reading_stdin_as_bytes(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SURROGATE.encode())))
    code, out, err = run(capsys, "trim", "-", "--max-tokens", "1000")
    assert (code, out, err) == (0, SURROGATE + "\n", "")


# -- 14. reads are bounded --------------------------------------------------------------------

SMALL = '[{"role": "user", "content": "hi"}]'


def test_the_default_bound_is_256_mib_and_the_help_says_so(capsys):
    assert MAX_INPUT_BYTES == 256 * 1024 * 1024
    code, out, _ = run(capsys, "trim", "--help")
    assert code == 0
    assert "--max-input-bytes N" in out
    assert "268,435,456" in out


@pytest.mark.parametrize("extra", [0, 1])
def test_a_file_at_the_bound_is_read_and_one_byte_more_is_not(tmp_path, capsys, extra):
    path = put(tmp_path, SMALL + " " * extra)
    limit = str(len(SMALL))
    code, out, err = run(capsys, "trim", path, "--max-tokens", "100", "--max-input-bytes", limit)
    if extra:
        assert (code, out) == (2, "")
        assert err == (
            f"turntrim: error: {path} is larger than {len(SMALL)} bytes, the most turntrim "
            "reads (--max-input-bytes N reads more)\n"
        )
    else:
        assert (code, out, err) == (0, SMALL + "\n", "")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_endless_device_fails_at_the_bound(capsys):
    code, out, err = run(
        capsys, "trim", "/dev/zero", "--max-tokens", "1", "--max-input-bytes", "5000000"
    )
    assert (code, out) == (2, "")
    assert err.startswith("turntrim: error: /dev/zero is larger than 5,000,000 bytes")
    assert err.count("\n") == 1


class Endless(io.RawIOBase):
    """A stdin that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = len(buffer)
        buffer[:size] = b" " * size
        self.given += size
        return size


def test_endless_stdin_fails_at_the_bound(monkeypatch, capsys):
    endless = Endless()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(endless)))
    code, out, err = run(capsys, "trim", "-", "--max-tokens", "1", "--max-input-bytes", "3000000")
    assert (code, out) == (2, "")
    assert err.startswith("turntrim: error: <stdin> is larger than 3,000,000 bytes")
    assert endless.given < 3_000_000 + 2 * io.DEFAULT_BUFFER_SIZE + (1 << 20)


def test_endless_text_stdin_fails_at_the_bound(monkeypatch, capsys):
    class EndlessText(io.StringIO):
        def read(self, size: int | None = -1) -> str:
            assert size is not None  # never "all of it"
            assert size > 0
            return "x" * size

    monkeypatch.setattr(sys, "stdin", EndlessText())
    code, out, err = run(capsys, "trim", "-", "--max-tokens", "1", "--max-input-bytes", "100")
    assert (code, out) == (2, "")
    assert err.startswith("turntrim: error: <stdin> is larger than 100 bytes")


# -- 15. exit statuses: the help lists every one, and each is what happens ------------------


def test_the_help_lists_every_exit_status(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    statuses = " ".join(out.split("exit status:", 1)[1].split())
    for said in (
        "0 on success",
        "1 when whatever reads the output closed it before the end",
        "2 on any other error",
        "130 when interrupted",
    ):
        assert said in statuses


def closed_pipe() -> TextIO:
    """A stdout whose reader has gone: every write fails as a closed pipe's does."""
    read, write = os.pipe()
    os.close(read)
    return os.fdopen(write, "w", encoding="utf-8")


@pytest.mark.parametrize("command", ["trim", "report", "demo"])
def test_a_closed_pipe_is_exit_status_1_and_says_nothing(monkeypatch, tmp_path, capsys, command):
    path = put(tmp_path, json.dumps(CHAT))
    argv = ["demo"] if command == "demo" else [command, path, "--max-tokens", "100"]
    stdout = closed_pipe()
    monkeypatch.setattr(sys, "stdout", stdout)
    code = main(argv)
    monkeypatch.undo()
    stdout.close()  # its file descriptor now writes to os.devnull
    assert (code, capsys.readouterr().err) == (app.PIPE_CLOSED, "")
    assert app.PIPE_CLOSED == 1


def test_subprocess_report_into_a_closed_pipe_is_exit_status_1(tmp_path):
    path = put(tmp_path, json.dumps(CHAT))
    command = [sys.executable, "-m", "langchain_turntrim", "report", path, "--max-tokens", "100"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as done:
        assert done.stdout is not None
        done.stdout.close()  # as `| head -0` does: the first write fails
        _, err = done.communicate(timeout=60)
    assert (done.returncode, err) == (1, b"")


# -- 16. compacted content is written with the escapes the rest of the output keeps ---------


def _compactable(content: str) -> str:
    """A request whose newest turn only fits truncated: its user message's content is rewritten."""
    return json.dumps(
        [{"role": "user", "content": content + " padding" * 400, "id": "u1"}], ensure_ascii=True
    )


@pytest.mark.parametrize(
    ("char", "escape"),
    [
        ("\ud83d", "\\ud83d"),  # a lone surrogate: a truncated emoji
        ("\udc00", "\\udc00"),
        ("\x9b", "\\u009b"),  # C1 CSI: an escape sequence on some terminals
        ("\x85", "\\u0085"),
        ("\x7f", "\\u007f"),
        ("\u202e", "\\u202e"),  # right-to-left override
        ("\u2066", "\\u2066"),
        ("\x1b", "\\u001b"),
    ],
)
def test_compacted_content_keeps_unsafe_characters_escaped(tmp_path, capsys, char, escape):
    path = put(tmp_path, _compactable(f"before {char} after"))
    args = ("trim", path, "--max-tokens", "60", "--on-overflow", "compact")
    code, out, err = run(capsys, *args)
    assert (code, err) == (0, "")
    assert escape in out
    assert char not in out
    content = json.loads(out)[0]["content"]
    assert content.startswith(f"before {char} after padding")
    assert len(content) < len(json.loads(Path(path).read_text())[0]["content"])  # truncated


def test_compacted_content_keeps_other_text_as_utf8(tmp_path, capsys):
    path = put(tmp_path, _compactable("café ☕ 😀"))
    code, out, _ = run(capsys, "trim", path, "--max-tokens", "60", "--on-overflow", "compact")
    assert code == 0
    assert "café ☕ 😀" in out
