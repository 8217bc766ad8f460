"""``turntrim``: trim or inspect a chat transcript from the shell.

``turntrim trim`` writes the kept messages in the input's own shape (a JSON
array, an object with a ``"messages"`` or ``"traj"`` array, JSONL, or a JSON
array or JSONL of such conversations), each one the very text it was read as,
so it can sit in a pipeline. ``turntrim report`` shows a table
of the turns for a human (it needs ``rich``: ``pip install 'langchain-turntrim[cli]'``),
and ``turntrim demo`` runs the report on a conversation shipped with the
package. Every error is one line on stderr and exit status 2 (130 when
interrupted; 1, silently, when the reader of the output closes it early, as
``| head`` does); a trim that keeps only the system messages says so on stderr.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, NoReturn

from langchain_turntrim import __version__
from langchain_turntrim._cli.planning import (
    CounterChoice,
    Planned,
    choose_counter,
    plain_counter,
    plan_transcript,
    trim_options,
)
from langchain_turntrim._cli.streams import MAX_INPUT_BYTES, write
from langchain_turntrim._cli.terminal import neutral
from langchain_turntrim._cli.transcript import (
    Document,
    InputError,
    Transcript,
    dump,
    parse,
    read_document,
)
from langchain_turntrim._options import DEFAULT_KEEP_TOOL_RESULTS, ON_OVERFLOW
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from langchain_turntrim._compaction.ladder import Compaction
    from langchain_turntrim._options import TrimOptions

__all__ = ["main"]

PROG: Final = "turntrim"
#: The budget ``turntrim demo`` trims the sample conversation to.
DEMO_MAX_TOKENS: Final = 1200
SAMPLE: Final = "sample_conversation.json"
#: The exit status when the output's reader closed it early (``| head``).
PIPE_CLOSED: Final = 1
RICH_MISSING: Final = (
    "the report needs rich, which is not installed: pip install 'langchain-turntrim[cli]' "
    "(from a checkout: pip install -e '.[cli]'; from a wheel: pip install 'FILE.whl[cli]')"
)

_EPILOG: Final = """\
examples:
  turntrim trim chat.json --max-tokens 8000 > trimmed.json
  turntrim trim history.jsonl --max-tokens 128000 --token-counter tiktoken:gpt-4o
  cat chat.json | turntrim trim - --max-tokens 4000 --token-counter tiktoken:cl100k_base
  turntrim trim records.json --max-tokens 100 --token-counter field
  turntrim report chat.json --max-tokens 8000
  turntrim demo

input: one conversation, or several. A conversation is a JSON array of OpenAI
chat messages (role, content, tool_calls, tool_call_id, name), an object with a
"messages" array (a request body: other keys are kept, its "tools" are priced)
or a "traj" array (a tau-bench item), or JSONL (one message per line). Several
are a JSON array of conversations, or JSONL of them (one a line); trim writes
them all, each trimmed, in the file's shape, and report shows a table for each,
unless --conversation N picks one (from 0). "-" reads stdin; at most
--max-input-bytes are read (default 256 MiB). Kept messages are written as they
were read, byte for byte. With --counter field, each message is a record
{id, role, tokens} and its "tokens" is its cost.

counters (--token-counter, or --counter): approximate (default; LangChain's
count_tokens_approximately),
tiktoken:MODEL or tiktoken:ENCODING (OpenAI's exact count, offline once the
encoding file is cached), field (the "tokens" of each message).

exit status: 0 on success (a warning on stderr when only the system messages
are kept); 1 when whatever reads the output closed it before the end (e.g.
"| head"; nothing is said); 2 on any other error (one line on stderr); 130 when
interrupted."""


class RichMissingError(ImportError):
    """``report``/``demo`` need ``rich``."""


class StreamClosedError(OSError):
    """stdout is closed: there is nowhere to write the output."""


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
        "--token-counter",
        "--counter",
        dest="counter",
        default="approximate",
        metavar="COUNTER",
        help="approximate (default), tiktoken:MODEL, tiktoken:ENCODING or field",
    )
    parser.add_argument(
        "--on-overflow",
        choices=ON_OVERFLOW,
        default="drop",
        help=(
            "when not even the newest turn fits: drop it (default), raise an error, or "
            "compact it (clear old tool results, drop old steps, truncate)"
        ),
    )
    parser.add_argument(
        "--keep-tool-results",
        type=int,
        default=DEFAULT_KEEP_TOOL_RESULTS,
        metavar="N",
        help=f"with --on-overflow compact: the newest N tool results are never cleared "
        f"(default: {DEFAULT_KEEP_TOOL_RESULTS})",
    )
    parser.add_argument(
        "--trim-to",
        type=int,
        default=None,
        metavar="N",
        help="cut an over-budget history down to about N tokens, at a turn boundary that "
        "later versions of the same growing history keep (prompt-cache friendly)",
    )
    parser.add_argument(
        "--conversation",
        type=int,
        default=None,
        metavar="N",
        help="of a file of several conversations, only the Nth (from 0); default: all of "
        "them (trim writes each one trimmed, in the file's shape; report shows one table each)",
    )
    parser.add_argument(
        "--max-input-bytes",
        type=int,
        default=MAX_INPUT_BYTES,
        metavar="N",
        help=f"read at most N bytes of input, else fail (default: {MAX_INPUT_BYTES:,}, "
        f"{MAX_INPUT_BYTES >> 20} MiB)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``turntrim`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exit_:  # --help, --version and usage errors
        return _exit_status(exit_.code)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        if sys.stdout is None:
            msg = "cannot write the output: stdout is closed"
            raise StreamClosedError(msg)
        return run(args)
    except RichMissingError:
        return _fail(RICH_MISSING)
    except BrokenPipeError:  # e.g. `turntrim trim big.json ... | head`: not worth a word
        _silence_stdout()
        return PIPE_CLOSED
    except (TypeError, ValueError, OSError) as error:
        # json.JSONDecodeError is a ValueError
        return _fail(str(error))


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 2


def _fail(message: str) -> int:
    _say(f"error: {message}")
    return 2


def _say(message: str) -> None:
    """One line on stderr, if there is one: library messages may span lines,
    and nothing from a transcript may drive the terminal."""
    if sys.stderr is not None:
        sys.stderr.write(f"{PROG}: {neutral(' '.join(message.split()))}\n")


def _silence_stdout() -> None:
    """After a broken pipe, keep Python's exit-time flush from raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. captured)
        pass


# -- commands -------------------------------------------------------------------------------


def _run_trim(args: argparse.Namespace) -> int:
    _check_budget(args.max_tokens)
    # A plain transcript counted with tiktoken is planned without LangChain.
    plain = plain_counter(args.counter)
    choice = choose_counter(args.counter) if plain is None else None
    document = _read(args)
    options = trim_options(args)
    choose = functools.cache(lambda: choice or choose_counter(args.counter))
    planned = _each(
        document, lambda transcript: plan_transcript(transcript, choose, options, plain=plain)
    )
    write(dump(document, [p.kept() for p in planned]))
    for transcript, each in zip(document.conversations, planned, strict=True):
        _warn_if_only_systems(each.report, transcript.name)
    return 0


def _read(args: argparse.Namespace) -> Document:
    if args.conversation is not None and args.conversation < 0:
        msg = f"--conversation must be >= 0, got {args.conversation}"
        raise InputError(msg)
    return read_document(args.file, args.max_input_bytes).select(args.conversation)


def _each(document: Document, plan: Callable[[Transcript], Planned]) -> list[Planned]:
    """Every conversation planned before anything is written: an error in one
    of them (named) leaves no output."""
    planned: list[Planned] = []
    try:
        planned.extend(plan(transcript) for transcript in document.conversations)
    except (TypeError, ValueError) as error:
        name = document.conversations[len(planned)].name
        if not name:
            raise
        msg = f"{name}: {error}"
        raise InputError(msg) from error
    return planned


def _warn_if_only_systems(report: TrimReport[object], name: str = "") -> None:
    """Keeping only the system messages is the spec's answer, and worth a word."""
    plan = report.plan
    if report.compaction is not None:
        return
    which = f"{name}: " if name else ""
    if not plan.budget_met:
        pinned = plan.system_tokens + plan.overhead_tokens
        _say(
            f"warning: {which}the system messages alone exceed the budget ({pinned:,} > "
            f"{plan.max_tokens:,} tokens); only the system messages are kept"
        )
    elif plan.turns and not plan.kept_turns:
        _say(
            f"warning: {which}not even the newest turn ({plan.newest_turn_tokens:,} tokens) "
            f"fits in {plan.max_tokens:,} tokens beside the system messages; only the "
            "system messages are kept"
        )


def _run_report(args: argparse.Namespace) -> int:
    _require_rich()
    _check_budget(args.max_tokens)
    choice = choose_counter(args.counter)
    document = _read(args)
    options = trim_options(args)
    plain = plain_counter(args.counter)
    planned = _each(
        document,
        lambda transcript: plan_transcript(
            transcript, lambda: choice, options, plain=plain, with_costs=True
        ),
    )
    for i, (transcript, each) in enumerate(zip(document.conversations, planned, strict=True)):
        if i:
            sys.stdout.write("\n")
        _show_report(transcript, each, choice, options)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    _require_rich()
    from langchain_turntrim._cli.tables import render_messages  # noqa: PLC0415

    _check_budget(args.max_tokens)
    transcript = parse(_sample_text(), SAMPLE).conversations[0]
    choice = choose_counter("approximate")
    options = trim_options(args, "drop")
    planned = plan_transcript(transcript, lambda: choice, options, with_costs=True)
    report = _show_report(transcript, planned, choice, options).report
    kept = [transcript.messages[i] for i in report.kept_indices]
    render_messages(kept, report.plan.size, sys.stdout)
    return 0


def _sample_text() -> str:
    from importlib import resources  # noqa: PLC0415 - only the demo reads it

    return resources.files("langchain_turntrim._cli").joinpath(SAMPLE).read_text(encoding="utf-8")


def _show_report(
    transcript: Transcript, planned: Planned, choice: CounterChoice, options: TrimOptions
) -> Planned:
    from langchain_turntrim._cli.tables import render, summarize  # noqa: PLC0415

    summary = summarize(
        transcript.messages,
        planned.kinds,
        planned.costs,
        planned.report,
        tools=planned.tools,
        tool_tokens=planned.tool_tokens,
    )
    title = f"{transcript.title}: budget {options.max_tokens:,} tokens, counter {choice.label}"
    render(summary, title, sys.stdout)
    if planned.compaction is not None:
        sys.stdout.write(_compaction_line(planned.compaction))
    return planned


def _compaction_line(c: Compaction) -> str:
    return (
        f"compact: the newest turn is kept in {c.tokens_after:,} tokens: "
        f"{c.cleared_results} results cleared ({c.cleared_tokens:,} tokens), "
        f"{c.dropped_steps} steps dropped ({c.dropped_step_tokens:,} tokens), "
        f"{c.truncated_messages} messages truncated ({c.truncated_tokens:,} tokens)\n"
    )


def _require_rich() -> None:
    """Fail before any work when rich (the ``cli`` extra) is missing."""
    try:
        import rich  # noqa: F401, PLC0415
    except ImportError as error:
        raise RichMissingError(RICH_MISSING) from error


def _check_budget(max_tokens: int) -> None:
    if max_tokens < 0:
        msg = f"--max-tokens must be >= 0, got {max_tokens}"
        raise InputError(msg)
