"""``turntrim``: trim a chat transcript in a pipeline, or see its turns
(``report``, ``demo``); every error is one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any, Final, NoReturn, get_args

from langchain_turntrim import __version__
from langchain_turntrim._anatomy import to_messages
from langchain_turntrim._cli.transcript import (
    MAX_INPUT_BYTES,
    Conversation,
    InputError,
    a_json_type,
    neutral,
    parse,
    read_document,
)
from langchain_turntrim._core import plan_trim
from langchain_turntrim._options import OnOverflow, TrimOptions
from langchain_turntrim._report import TrimReport, TurnTrimOverflowError
from langchain_turntrim._trimmer import TurnTrimmer

__all__ = ["main"]

PROG: Final = "turntrim"
DEMO_MAX_TOKENS: Final = 1200
SAMPLE: Final = "sample_conversation.json"
#: The exit status when the output's reader closed it early (``| head``).
PIPE_CLOSED: Final = 1
RICH_MISSING: Final = (
    "the report needs rich, which is not installed: pip install 'langchain-turntrim[cli]' "
    "(from a checkout: pip install -e '.[cli]'; from a wheel: pip install 'FILE.whl[cli]')"
)
_KEEP: Final = TrimOptions.__dataclass_fields__["keep_tool_results"].default
#: The options the library's messages name, each set by the flag of its name.
_OPTION: Final = re.compile(r"\b(max_tokens|token_counter|on_overflow|keep_tool_results|trim_to)\b")
_LINK: Final = re.compile(r"For (?:troubleshooting|further information),? visit:? \S+")
_EPILOG: Final = """\
examples:
  turntrim trim chat.json --max-tokens 8000 > trimmed.json
  cat request.json | turntrim trim - --max-tokens 4000 --token-counter tiktoken:gpt-4o
  turntrim report runs.jsonl --max-tokens 8000 --conversation 3

FILE: OpenAI chat messages as a JSON array, an object with "messages" (a request
body: its "tools" are priced) or "traj" (tau-bench), or JSONL; or a JSON array
or JSONL of such conversations. Kept messages are written as they were read.
COUNTER: approximate (default), tiktoken:MODEL, tiktoken:ENCODING, or field
(records {id, role, tokens}). --on-overflow, when not even the newest turn
fits: drop (keep the system messages), raise, or compact the newest turn.

exit status: 0 on success (a warning on stderr when only the system messages
are kept); 1 when whatever reads the output closed it before the end (e.g.
"| head"; nothing is said); 2 on any other error (one line on stderr); 130 when
interrupted."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.description = "Trim a chat transcript to a token budget, whole turns at a time."
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, said in (("trim", "write the kept messages"), ("report", "show the turns kept")):
        add = commands.add_parser(name, help=said).add_argument
        add("file", metavar="FILE", help='the transcript; "-" reads stdin')
        add("--max-tokens", type=int, required=True, metavar="N", help="the token budget")
        add("--token-counter", "--counter", dest="counter", default="approximate", metavar="NAME")
        add("--on-overflow", choices=get_args(OnOverflow), default="drop")
        add("--keep-tool-results", type=int, default=_KEEP, metavar="N", help=f"default {_KEEP}")
        add("--trim-to", type=int, metavar="N", help="cut over budget to about N tokens")
        add("--conversation", type=int, metavar="N", help="only the Nth, from 0")
        help_ = f"read at most N bytes (default {MAX_INPUT_BYTES:,})"
        add("--max-input-bytes", type=int, default=MAX_INPUT_BYTES, metavar="N", help=help_)
    demo = commands.add_parser("demo", help="the report on a sample conversation")
    demo.add_argument("--max-tokens", type=int, default=DEMO_MAX_TOKENS, metavar="N")
    demo.set_defaults(
        counter="approximate", on_overflow="drop", keep_tool_results=_KEEP, trim_to=None
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``turntrim`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    try:
        try:
            args = _parser().parse_args(None if argv is None else list(argv))
        except SystemExit as done:  # --help, --version and usage errors
            return done.code if isinstance(done.code, int) else 2 if done.code else 0
        return _run(args)
    except KeyboardInterrupt:
        _say("interrupted")
        return 130
    except BrokenPipeError:  # `turntrim trim big.json ... | head`: not worth a word
        with contextlib.suppress(OSError, ValueError):  # no file descriptor: captured
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # for the exit flush
        return PIPE_CLOSED
    except (TypeError, ValueError, OSError) as error:
        _say(f"error: {error}")
        return 2


def _say(message: str) -> None:
    """One line on stderr, whatever the library's message spans and holds."""
    if sys.stderr is not None:
        sys.stderr.write(f"{PROG}: {neutral(' '.join(_LINK.sub('', message).split()))}\n")


def _write(text: str) -> None:
    """UTF-8 whatever the locale: JSON is UTF-8 (RFC 8259)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


def _run(args: argparse.Namespace) -> int:
    """Every conversation decided before anything is written: an error in any writes nothing."""
    if sys.stdout is None:
        msg = "cannot write the output: stdout is closed"
        raise InputError(msg)
    if args.command != "trim" and importlib.util.find_spec("rich") is None:
        raise InputError(RICH_MISSING)
    trimmer = _trimmer(args)
    if args.command == "demo":
        sample = resources.files("langchain_turntrim._cli").joinpath(SAMPLE)
        document = parse(sample.read_text(encoding="utf-8"), SAMPLE)
    elif args.conversation is not None and args.conversation < 0:
        msg = f"--conversation must be >= 0, got {args.conversation}"
        raise InputError(msg)
    else:
        document = read_document(args.file, args.max_input_bytes).select(args.conversation)
    decided = [_decide(c, trimmer, args.counter) for c in document.conversations]
    if args.command == "trim":
        _write(document.render([_kept(report) for report, _ in decided]))
        for conversation, (report, _) in zip(document.conversations, decided, strict=True):
            _warn_if_only_systems(conversation, report)
        return 0
    from langchain_turntrim._cli.tables import render, render_messages  # noqa: PLC0415 - rich

    counter = None if args.counter == "field" else trimmer.counter
    encoding = getattr(getattr(counter, "encoding", None), "name", None)
    label = args.counter + (f" ({encoding})" if encoding else "")
    pairs = zip(document.conversations, decided, strict=True)
    for i, (conversation, (report, messages)) in enumerate(pairs):
        _write("\n" if i else "")
        title = f"{conversation.place}: budget {report.max_tokens:,} tokens, counter {label}"
        render(title, conversation, messages, counter, report, sys.stdout)
    if args.command == "demo":
        items, report = document.conversations[0].items, decided[0][0]
        render_messages([items[i] for i in _kept(report)[0]], len(items), sys.stdout)
    return 0


def _trimmer(args: argparse.Namespace) -> TurnTrimmer:
    """The library's trimmer for the options (for ``field``: only the options checked)."""
    spec = args.counter
    if spec not in ("approximate", "field") and not spec.startswith("tiktoken:"):
        msg = f"unknown counter {spec!r}; use approximate, tiktoken:MODEL or ENCODING, or field"
        raise InputError(msg)
    if spec == "field" and args.on_overflow == "compact":
        msg = "--on-overflow compact needs message content; --token-counter field has none"
        raise InputError(msg)
    options = {k: vars(args)[k] for k in ("on_overflow", "keep_tool_results", "trim_to")}
    counter = "approximate" if spec == "field" else spec
    try:
        return TurnTrimmer(args.max_tokens, token_counter=counter, **options)
    except (TypeError, ValueError) as error:
        raise InputError(_for_the_shell(error)) from error


def _for_the_shell(error: Exception) -> str:
    """The library's message with flags for option names, and no Python call for advice."""
    text = str(error)
    for advice in (", or build the encoding from a local file", ". TiktokenCounter knows"):
        text = text.split(advice, 1)[0]
    if text.startswith("unknown OpenAI model"):
        text += "; for any other model, its encoding: e.g. --token-counter tiktoken:o200k_base"
    return _OPTION.sub(lambda m: "--" + m[0].replace("_", "-"), text)


def _decide(
    conversation: Conversation, trimmer: TurnTrimmer, spec: str
) -> tuple[TrimReport[Any], list[Any]]:
    """The library's decision, and the messages it decided on (LangChain's, or
    the records); an error names the file, conversation and JSONL line."""
    try:
        if spec == "field":
            return _records(conversation.items, trimmer.options), conversation.items
        messages = to_messages([_message(i, item) for i, item in enumerate(conversation.items)])
        return trimmer.report(messages, tools=conversation.tools), messages
    except (TypeError, ValueError, TurnTrimOverflowError) as error:
        index = re.search(r"messages\[(\d+)\]", str(error))
        msg = f"{conversation.where(int(index[1]) if index else None)}: {error}"
        raise InputError(msg) from error


def _message(index: int, item: object) -> object:
    """A message dict as LangChain converts it: OpenAI may leave ``content`` out
    beside tool calls, LangChain requires the key."""
    if not isinstance(item, dict):
        msg = f"messages[{index}] must be a JSON object, got {a_json_type(item)}"
        raise TypeError(msg)
    if "content" not in item and (item.get("tool_calls") or item.get("function_call")):
        return {**item, "content": None}
    return item


def _records(records: list[Any], options: TrimOptions) -> TrimReport[Any]:
    """``--counter field``: the spec's ``plan_trim`` on ``{id, role, tokens}`` records."""
    trim_to = options.trim_to if isinstance(options.trim_to, int) else None
    plan = plan_trim(records, options.max_tokens, trim_to=trim_to)
    if plan.overflowed and options.on_overflow == "raise":
        raise TurnTrimOverflowError(plan.max_tokens, plan.system_tokens, plan.newest_turn_tokens)
    return TrimReport(plan.select(records), plan.kept, [], [], plan, plan.tokens_after)


def _kept(report: TrimReport[Any]) -> tuple[Sequence[int], Mapping[int, Any]]:
    """The kept messages and the new ``content`` of each one compaction rewrote.
    The plan's whole turns, as read, unless compacted: a transcript's own tool
    calls and results are its, even those the library leaves out of a request."""
    if report.compaction is None:
        return report.plan.kept, {}
    pairs = zip(report.kept_indices, report.kept, strict=True)
    return report.kept_indices, {i: m.content for i, m in pairs if i in report.compaction.changed}


def _warn_if_only_systems(conversation: Conversation, report: TrimReport[Any]) -> None:
    """Keeping only the system messages is the spec's answer, and worth a word."""
    plan, budget = report.plan, f"{report.plan.max_tokens:,} tokens"
    if not plan.budget_met:
        pinned = plan.system_tokens + plan.overhead_tokens
        why = f"the system messages alone exceed the budget ({pinned:,} > {budget})"
    elif plan.turns and not plan.kept_turns and report.compaction is None:
        newest = plan.newest_turn_tokens
        why = f"not even the newest turn ({newest:,} tokens) fits in {budget} beside them"
    else:
        return
    _say(f"warning: {conversation.place}: {why}; only the system messages are kept")
