"""``turntrim``: trim or inspect a chat transcript from the shell.

``turntrim trim`` writes the kept messages in the input's own shape (a JSON
array, an object with a ``"messages"`` array, or JSONL), each one exactly as it
was read, so it can sit in a pipeline. ``turntrim report`` shows a table of the
turns for a human (it needs ``rich``: ``pip install langchain-turntrim[cli]``),
and ``turntrim demo`` runs the report on a conversation shipped with the
package. Every error is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

import tiktoken
from langchain_core.messages import BaseMessage, convert_to_messages
from pydantic import ValidationError

from langchain_turntrim import __version__
from langchain_turntrim._core import ROLE_KINDS, TrimPlan, plan_trim
from langchain_turntrim._counters import ApproximateCounter
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._protocol import TokenCounter
from langchain_turntrim._runnable import TurnTrimmer
from langchain_turntrim._tiktoken import TiktokenCounter

__all__ = ["main"]

PROG: Final = "turntrim"
#: The budget ``turntrim demo`` trims the sample conversation to.
DEMO_MAX_TOKENS: Final = 1200
SAMPLE: Final = "sample_conversation.json"
RICH_MISSING: Final = (
    "the report needs rich, which is not installed: pip install 'langchain-turntrim[cli]'"
)

_EPILOG: Final = """\
examples:
  turntrim trim chat.json --max-tokens 8000 > trimmed.json
  turntrim trim history.jsonl --max-tokens 128000 --counter tiktoken:gpt-4o
  cat chat.json | turntrim trim - --max-tokens 4000 --counter tiktoken:cl100k_base
  turntrim trim records.json --max-tokens 100 --counter field
  turntrim report chat.json --max-tokens 8000
  turntrim demo

input: a JSON array of OpenAI chat messages (role, content, tool_calls,
tool_call_id, name), an object with a "messages" array (other keys are kept),
or JSONL (one message per line); "-" reads stdin. With --counter field, each
message is a record {id, role, tokens} and its "tokens" is its cost.

counters: approximate (default; LangChain's count_tokens_approximately),
tiktoken:MODEL or tiktoken:ENCODING (OpenAI's exact count, offline once the
encoding file is cached), field (the "tokens" of each message).

exit status: 0 on success, 2 on any error (one line on stderr)."""

Shape = Literal["array", "object", "jsonl"]
_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function", "human", "ai")
_JSON_TYPES: Final = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


class InputError(ValueError):
    """The transcript or an option is wrong; the message says where and how."""


class RichMissingError(ImportError):
    """``report``/``demo`` need ``rich``."""


@dataclass(frozen=True)
class Transcript:
    """Messages as read, and what is needed to write a subset back in the same shape."""

    source: str
    shape: Shape
    messages: list[Any]
    envelope: dict[str, Any] | None = None
    lines: list[int] | None = None  # JSONL: the line of each message


@dataclass(frozen=True)
class CounterChoice:
    """What ``--counter`` asked for: ``counter`` is None for ``field``."""

    label: str
    counter: TokenCounter | None


@dataclass(frozen=True)
class Planned:
    """A plan, and (for the report) each message's turn kind and cost."""

    plan: TrimPlan
    kinds: list[int]
    costs: list[int]


# -- command line ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Trim a chat transcript to a token budget, whole turns at a time.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    trim = commands.add_parser(
        "trim", help="write the kept messages, in the input's format, to stdout"
    )
    _add_trim_arguments(trim)
    trim.set_defaults(run=_run_trim)
    report = commands.add_parser("report", help="show what a trim keeps and drops, turn by turn")
    _add_trim_arguments(report)
    report.set_defaults(run=_run_report)
    demo = commands.add_parser("demo", help="the report on a sample conversation (no network)")
    demo.add_argument(
        "--max-tokens",
        type=int,
        default=DEMO_MAX_TOKENS,
        metavar="N",
        help=f"the budget (default: {DEMO_MAX_TOKENS})",
    )
    demo.set_defaults(run=_run_demo)
    return parser


def _add_trim_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help='the transcript; "-" reads stdin')
    parser.add_argument(
        "--max-tokens", type=int, required=True, metavar="N", help="the token budget"
    )
    parser.add_argument(
        "--counter",
        default="approximate",
        metavar="COUNTER",
        help="approximate (default), tiktoken:MODEL, tiktoken:ENCODING or field",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``turntrim`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exit_:  # --help, --version and usage errors
        return _exit_status(exit_.code)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except RichMissingError:
        return _fail(RICH_MISSING)
    except BrokenPipeError:  # e.g. `turntrim trim big.json ... | head`: not an error
        _silence_stdout()
        return 1
    except (TypeError, ValueError, OSError) as error:  # json.JSONDecodeError is a ValueError
        return _fail(str(error))


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 2


def _fail(message: str) -> int:
    # Library messages may span lines; the contract is one line.
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    return 2


def _silence_stdout() -> None:
    """After a broken pipe, keep Python's exit-time flush from raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. captured)
        pass


# -- commands -------------------------------------------------------------------------------


def _run_trim(args: argparse.Namespace) -> int:
    max_tokens = _check_budget(args.max_tokens)
    choice = _choose_counter(args.counter)
    transcript = _read_transcript(args.file)
    planned = _plan(transcript, choice, max_tokens, with_costs=False)
    _write(_dump(transcript, planned.plan.select(transcript.messages)))
    return 0


def _run_report(args: argparse.Namespace) -> int:
    _require_rich()
    max_tokens = _check_budget(args.max_tokens)
    choice = _choose_counter(args.counter)
    transcript = _read_transcript(args.file)
    _show_report(transcript, choice, max_tokens)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    _require_rich()
    from langchain_turntrim._report import render_messages  # noqa: PLC0415

    max_tokens = _check_budget(args.max_tokens)
    text = resources.files("langchain_turntrim").joinpath(SAMPLE).read_text(encoding="utf-8")
    transcript = _parse(text, SAMPLE)
    plan = _show_report(transcript, CounterChoice("approximate", ApproximateCounter()), max_tokens)
    render_messages(plan.select(transcript.messages), plan.size, sys.stdout)
    return 0


def _show_report(transcript: Transcript, choice: CounterChoice, max_tokens: int) -> TrimPlan:
    from langchain_turntrim._report import render, summarize  # noqa: PLC0415

    planned = _plan(transcript, choice, max_tokens, with_costs=True)
    summary = summarize(transcript.messages, planned.kinds, planned.costs, planned.plan)
    title = f"{transcript.source}: budget {max_tokens:,} tokens, counter {choice.label}"
    render(summary, title, sys.stdout)
    return planned.plan


def _require_rich() -> None:
    """Fail before any work when rich (the ``cli`` extra) is missing."""
    try:
        import rich  # noqa: F401, PLC0415
    except ImportError as error:
        raise RichMissingError(RICH_MISSING) from error


def _check_budget(max_tokens: int) -> int:
    if max_tokens < 0:
        msg = f"--max-tokens must be >= 0, got {max_tokens}"
        raise InputError(msg)
    return max_tokens


def _choose_counter(spec: str) -> CounterChoice:
    """``approximate``, ``field``, ``tiktoken:ENCODING`` or ``tiktoken:MODEL``."""
    if spec == "approximate":
        return CounterChoice(spec, ApproximateCounter())
    if spec == "field":
        return CounterChoice(spec, None)
    kind, _, name = spec.partition(":")
    if kind != "tiktoken":
        msg = (
            f"unknown counter {spec!r}; use approximate, field, tiktoken:MODEL "
            "(e.g. tiktoken:gpt-4o) or tiktoken:ENCODING (e.g. tiktoken:o200k_base)"
        )
        raise InputError(msg)
    name = name.strip()
    if not name:
        msg = "--counter tiktoken: needs a model or an encoding, e.g. tiktoken:gpt-4o"
        raise InputError(msg)
    if name in tiktoken.list_encoding_names():
        counter = TiktokenCounter(encoding=name)
    else:
        counter = TiktokenCounter(name)
    return CounterChoice(f"tiktoken:{name} ({counter.encoding.name})", counter)


# -- reading --------------------------------------------------------------------------------


def _read_transcript(path: str) -> Transcript:
    source = "<stdin>" if path == "-" else path
    try:
        data = _read_stdin() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        msg = f"cannot read {source}: {error.strerror or error}"
        raise InputError(msg) from error
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        msg = f"{source} is not UTF-8 text (byte {error.start}: {error.reason})"
        raise InputError(msg) from error
    return _parse(text, source)


def _read_stdin() -> bytes:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        data: bytes = buffer.read()
        return data
    return sys.stdin.read().encode("utf-8")


def _parse(text: str, source: str) -> Transcript:
    """A JSON array, an object with a ``"messages"`` array, or JSONL."""
    if not text.strip():
        msg = f"{source} is empty; expected a JSON array of messages, an object or JSONL"
        raise InputError(msg)
    try:
        data = json.loads(text)
    except RecursionError as error:
        raise _too_deep(source) from error
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and _is_json_object(text.lstrip().split("\n", 1)[0]):
            return _parse_jsonl(text, source)
        raise _json_error(source, error.msg, error.lineno, error.colno) from error
    if isinstance(data, list):
        return Transcript(source, "array", data)
    if isinstance(data, dict):
        return _from_object(data, source)
    msg = (
        f"{source}: expected a JSON array of messages, an object with a 'messages' array "
        f"or JSONL, got a {_json_type(data)}"
    )
    raise InputError(msg)


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def _from_object(data: dict[str, Any], source: str) -> Transcript:
    if "messages" not in data:
        if "role" in data or "type" in data:  # JSONL holding a single message
            return Transcript(source, "jsonl", [data], lines=[1])
        keys = ", ".join(repr(key) for key in list(data)[:5]) or "none"
        msg = f"{source}: a JSON object needs a 'messages' array (its keys: {keys})"
        raise InputError(msg)
    messages = data["messages"]
    if not isinstance(messages, list):
        msg = f"{source}: 'messages' must be an array, got a {_json_type(messages)}"
        raise InputError(msg)
    return Transcript(source, "object", messages, envelope=data)


def _parse_jsonl(text: str, source: str) -> Transcript:
    messages: list[Any] = []
    lines: list[int] = []
    decode = json.loads
    # Not splitlines(): JSON strings may hold U+2028 and friends unescaped.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            messages.append(decode(line))
        except RecursionError as error:
            raise _too_deep(f"{source} line {number}") from error
        except json.JSONDecodeError as error:
            raise _json_error(source, error.msg, number, error.colno) from error
        lines.append(number)
    return Transcript(source, "jsonl", messages, lines=lines)


def _too_deep(where: str) -> InputError:
    return InputError(f"{where}: JSON nested too deeply to read")


def _json_error(source: str, reason: str, line: int, column: int) -> InputError:
    return InputError(f"{source}: invalid JSON at line {line}, column {column}: {reason}")


def _json_type(value: object) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


# -- planning -------------------------------------------------------------------------------


def _plan(
    transcript: Transcript, choice: CounterChoice, max_tokens: int, *, with_costs: bool
) -> Planned:
    """Plan the trim; with ``with_costs``, also each message's turn kind and cost."""
    records = transcript.messages
    if choice.counter is None:
        plan = plan_trim(records, max_tokens)  # validates every record
        if not with_costs:
            return Planned(plan, [], [])
        return Planned(
            plan, [ROLE_KINDS[r["role"]] for r in records], [r["tokens"] for r in records]
        )
    messages = _to_messages(transcript)
    # One plan per run: a cache would only cost time.
    trimmer = TurnTrimmer(max_tokens=max_tokens, token_counter=choice.counter, cache_size=0)
    plan = trimmer.plan(messages)
    if not with_costs:
        return Planned(plan, [], [])
    return Planned(plan, message_kinds(messages), choice.counter.count_each(messages))


def _to_messages(transcript: Transcript) -> list[BaseMessage]:
    """Convert each message dict with LangChain, naming the first one that is wrong."""
    messages: list[BaseMessage] = []
    append = messages.append
    for index, item in enumerate(transcript.messages):
        if type(item) is not dict:
            raise InputError(
                f"{_where(transcript, index)} must be a JSON object, got a {_json_type(item)}"
            )
        message = _with_content(item)
        try:
            append(convert_to_messages([message])[0])
        except (TypeError, ValueError, KeyError, AttributeError, NotImplementedError) as error:
            problem = _problem(message) or _first_line(error)
            raise InputError(f"{_where(transcript, index)}: {problem}") from error
    return messages


def _with_content(message: dict[str, Any]) -> dict[str, Any]:
    """OpenAI may omit ``content`` beside tool calls; LangChain requires the key."""
    if "content" in message or not (message.get("tool_calls") or message.get("function_call")):
        return message
    return {**message, "content": None}


def _where(transcript: Transcript, index: int) -> str:
    """``messages[3] (id 'm3', line 4)``."""
    item = transcript.messages[index]
    details = []
    if isinstance(item, dict) and isinstance(item.get("id"), (str, int)):
        details.append(f"id {item['id']!r}")
    if transcript.lines is not None:
        details.append(f"line {transcript.lines[index]}")
    return f"messages[{index}]" + (f" ({', '.join(details)})" if details else "")


def _first_line(error: BaseException) -> str:
    """LangChain's reason, in one line (pydantic's: the field and the reason)."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        return f"{field!r}: {first['msg']}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- diagnosing a message LangChain rejected --------------------------------------------------


def _problem(message: dict[str, Any]) -> str | None:
    """The first wrong field of a message dict, in words, or None if none is found."""
    for check in (_role_problem, _content_problem, _tool_calls_problem, _name_problem):
        problem = check(message)
        if problem is not None:
            return problem
    return None


def _role_problem(message: dict[str, Any]) -> str | None:
    if "role" not in message:
        return None if "type" in message else "no 'role' field"
    role = message["role"]
    if not isinstance(role, str):
        return f"'role' must be a string, got a {_json_type(role)}"
    if role not in _ROLES:
        accepted = ", ".join(repr(r) for r in _ROLES[:6])
        return f"unknown 'role' {role!r}; expected one of {accepted}"
    if role == "tool" and "tool_call_id" not in message:
        return "no 'tool_call_id' field (a 'tool' message answers a tool call)"
    return None


def _content_problem(message: dict[str, Any]) -> str | None:
    if "content" not in message:
        hint = " (records with 'tokens' need --counter field)" if "tokens" in message else ""
        return f"no 'content' field{hint}"
    content = message["content"]
    if content is None or isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"'content' must be a string, an array of parts or null, got a {_json_type(content)}"
    for i, part in enumerate(content):
        if not isinstance(part, (str, dict)):
            return f"'content[{i}]' must be a string or an object, got a {_json_type(part)}"
    return None


def _tool_calls_problem(message: dict[str, Any]) -> str | None:
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return f"'tool_calls' must be an array, got a {_json_type(calls)}"
    for i, call in enumerate(calls):
        problem = _tool_call_problem(f"tool_calls[{i}]", call)
        if problem is not None:
            return problem
    return None


def _tool_call_problem(where: str, call: object) -> str | None:
    """What is wrong with one OpenAI-format tool call."""
    if not isinstance(call, dict):
        return f"'{where}' must be an object, got a {_json_type(call)}"
    if "function" not in call:
        return None  # LangChain's own tool call format
    function = call["function"]
    if not isinstance(function, dict):
        return f"'{where}.function' must be an object, got a {_json_type(function)}"
    missing = [f"{where}.{key}" for key in ("id",) if key not in call]
    missing += [f"{where}.function.{key}" for key in ("name", "arguments") if key not in function]
    if missing:
        return f"no '{missing[0]}' field"
    arguments = function["arguments"]
    if isinstance(arguments, str):
        try:
            json.loads(arguments, strict=False)
        except json.JSONDecodeError as error:
            return f"'{where}.function.arguments' is not valid JSON: {error}"
    return None


def _name_problem(message: dict[str, Any]) -> str | None:
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        return f"'name' must be a string, got a {_json_type(name)}"
    return None


# -- writing --------------------------------------------------------------------------------


def _dump(transcript: Transcript, kept: list[Any]) -> str:
    """The kept messages in the input's shape."""
    if transcript.shape == "jsonl":
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in kept)
    if transcript.shape == "object" and transcript.envelope is not None:
        envelope = transcript.envelope
        document: Any = {key: kept if key == "messages" else envelope[key] for key in envelope}
    else:
        document = kept
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def _write(text: str) -> None:
    """UTF-8 to stdout whatever the locale: JSON is UTF-8 (RFC 8259)."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    data = memoryview(text.encode("utf-8"))
    try:
        while data:  # a pipe may take part of it, then fail on the rest: never lose the error
            written = buffer.write(data)
            if not written:
                raise OSError(errno.EIO, "nothing written")
            data = data[written:]
        buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        msg = f"cannot write to stdout: {error.strerror or error}"
        raise OSError(msg) from error
