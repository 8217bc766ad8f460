"""What ``turntrim`` decides: its options, its counter, and the one decision
(``_pipeline.decide``) made on a transcript, through one of three planners:

* records (``--counter field``): each message's ``tokens``, planned by ``plan_trim``;
* a plain transcript counted with tiktoken: ``PlainCounter``'s counts, made
  without importing LangChain (which is loaded only if compaction is needed);
* any other transcript: its messages converted with LangChain and planned by
  the library's planner for the counter.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_turntrim import _pipeline
from langchain_turntrim._cli.transcript import InputError, Transcript
from langchain_turntrim._core import ROLE_KINDS, TrimPlan, plan_costs, plan_trim
from langchain_turntrim._core.depth import Cut
from langchain_turntrim._counting.openai.chat import REPLY_PRIMING, PlainCounter
from langchain_turntrim._counting.openai.encodings import (
    DEFAULT_DOWNLOAD_TIMEOUT,
    OFFLINE_VARIABLE,
    TIMEOUT_VARIABLE,
    EncodingUnavailableError,
    downloads_forbidden,
)
from langchain_turntrim._counting.openai.models import UnknownModelError
from langchain_turntrim._options import DEFAULT_KEEP_TOOL_RESULTS, OnOverflow, TrimOptions
from langchain_turntrim._pipeline import Planner
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from langchain_turntrim._compaction.ladder import Compaction
    from langchain_turntrim._counting import TokenCounter
    from langchain_turntrim._planning import MessagePlanner

__all__ = [
    "CounterChoice",
    "Planned",
    "choose_counter",
    "plain_counter",
    "plan_transcript",
    "trim_options",
]

#: The command's flag for each option.
_FLAGS = {
    "max_tokens": "--max-tokens",
    "keep_tool_results": "--keep-tool-results",
    "trim_to": "--trim-to",
}


@dataclass(frozen=True)
class CounterChoice:
    """What ``--counter`` asked for: ``counter`` is None for ``field``."""

    label: str
    counter: TokenCounter | None


def trim_options(args: argparse.Namespace, on_overflow: OnOverflow | None = None) -> TrimOptions:
    """The options the flags ask for, or an ``InputError`` naming the flag."""
    for name, flag in _FLAGS.items():
        value = getattr(args, name, None)
        if isinstance(value, int) and value < 0:
            msg = f"{flag} must be >= 0, got {value}"
            raise InputError(msg)
    trim_to = getattr(args, "trim_to", None)
    if trim_to is not None and trim_to > args.max_tokens:
        msg = f"--trim-to must be from 0 to --max-tokens ({args.max_tokens}), got {trim_to}"
        raise InputError(msg)
    return TrimOptions(
        max_tokens=args.max_tokens,
        on_overflow=on_overflow or args.on_overflow,
        keep_tool_results=getattr(args, "keep_tool_results", DEFAULT_KEEP_TOOL_RESULTS),
        trim_to=trim_to,
    )


@dataclass(frozen=True)
class Planned:
    """The decision, (for the report) each message's turn kind and cost, and
    the request's tool schemas: how many, and their tokens."""

    report: TrimReport[Any]
    kinds: list[int]
    costs: list[int]
    tools: int = 0
    tool_tokens: int = 0

    @property
    def plan(self) -> TrimPlan:
        return self.report.plan

    @property
    def compaction(self) -> Compaction | None:
        return self.report.compaction

    def kept(self) -> tuple[list[int], dict[int, Any]]:
        """The kept indices of the transcript, and the compacted ``content`` of
        each kept message whose content compaction changed."""
        compaction = self.report.compaction
        if compaction is None:
            return list(self.report.kept_indices), {}
        changed = compaction.changed
        return list(compaction.kept), {
            i: changed[i].content for i in compaction.kept if i in changed
        }


def choose_counter(spec: str) -> CounterChoice:
    """``approximate``, ``field``, ``tiktoken:ENCODING`` or ``tiktoken:MODEL``
    (the library's ``token_counter`` shortcuts, plus ``field``)."""
    from langchain_turntrim._counting import ApproximateCounter  # noqa: PLC0415 (LangChain)
    from langchain_turntrim._counting.resolve import tiktoken_shortcut  # noqa: PLC0415

    if spec == "approximate":
        return CounterChoice(spec, ApproximateCounter())
    if spec == "field":
        return CounterChoice(spec, None)
    if not spec.startswith("tiktoken:"):
        msg = (
            f"unknown counter {spec!r}; use approximate, field, tiktoken:MODEL "
            "(e.g. tiktoken:gpt-4o) or tiktoken:ENCODING (e.g. tiktoken:o200k_base)"
        )
        raise InputError(msg)
    if not spec.partition(":")[2].strip():
        msg = "--token-counter tiktoken: needs a model or an encoding, e.g. tiktoken:gpt-4o"
        raise InputError(msg)
    try:
        counter = tiktoken_shortcut(spec)
    except EncodingUnavailableError as error:
        raise InputError(_advice(error)) from error
    except UnknownModelError as error:
        raise InputError(error.for_command_line()) from error
    encoding = getattr(counter, "encoding", None)
    label = spec.strip() + (f" ({encoding.name})" if encoding is not None else "")
    return CounterChoice(label, counter)


def plain_counter(spec: str) -> PlainCounter | None:
    """The counter of ``tiktoken:NAME`` for plain transcripts (see ``plan_transcript``),
    or ``None`` for any other ``spec`` and where ``choose_counter`` would fail."""
    if not spec.startswith("tiktoken:"):
        return None
    try:
        return PlainCounter.of(spec.partition(":")[2])
    except EncodingUnavailableError as error:
        raise InputError(_advice(error)) from error
    except UnknownModelError as error:
        raise InputError(error.for_command_line()) from error


def _advice(error: EncodingUnavailableError) -> str:
    """What to do on the command line when an encoding cannot be loaded (the
    library's message advises a Python call)."""
    if not error.encoding:
        return str(error)
    said = f"tiktoken could not load the {error.encoding!r} encoding: {error.reason}"
    if not error.files:
        return f"{said}; --token-counter approximate needs no encoding file"
    saved = " and ".join(f"the file downloaded from {url} as {key}" for url, key in error.files)
    advice = (
        f"; to count offline, save {saved} in a folder and set the TIKTOKEN_CACHE_DIR "
        "environment variable to that folder"
    )
    if downloads_forbidden():
        advice += (
            f", or unset {OFFLINE_VARIABLE} to let turntrim download "
            f"{'them' if len(error.files) > 1 else 'it'} (within {TIMEOUT_VARIABLE} seconds, "
            f"default {DEFAULT_DOWNLOAD_TIMEOUT:g})"
        )
    return f"{said}{advice}; --token-counter approximate needs no file"


def plan_transcript(
    transcript: Transcript,
    choose: Callable[[], CounterChoice],
    options: TrimOptions,
    *,
    plain: PlainCounter | None = None,
    with_costs: bool = False,
) -> Planned:
    """The decision on ``transcript``: by ``plain``'s counts when it is a plain
    transcript without tools, else with the counter ``choose()`` gives; with
    ``with_costs``, also each message's turn kind and cost."""
    records = transcript.messages
    tools = (transcript.envelope or {}).get("tools") or []
    costs = plain.count(records) if plain is not None and not tools else None
    if costs is not None:
        kinds = [ROLE_KINDS[r["role"]] for r in records]
        planner = _PlainPlanner(kinds, costs, lambda: _full_planner(transcript, choose()))
        return Planned(_decided(records, options, planner, kinds=kinds), kinds, costs)
    choice = choose()
    if choice.counter is None:
        if options.on_overflow == "compact":
            msg = "--on-overflow compact needs message content; --token-counter field has none"
            raise InputError(msg)
        report = _decided(records, options, _RecordsPlanner())
        if not with_costs:
            return Planned(report, [], [])
        return Planned(
            report, [ROLE_KINDS[r["role"]] for r in records], [r["tokens"] for r in records]
        )
    messages, full = _full_planner(transcript, choice)
    from langchain_turntrim._messages import message_kinds  # noqa: PLC0415 - LangChain

    kinds = message_kinds(messages)
    report = _decided(messages, options, full, tools=tools, kinds=kinds)
    tool_tokens = full.tool_tokens(tools) or 0
    costs = full.counter.count_each(messages) if with_costs else []
    return Planned(report, kinds if with_costs else [], costs, len(tools), tool_tokens)


def _decided(
    messages: Sequence[Any],
    options: TrimOptions,
    planner: Planner[Any],
    *,
    tools: Sequence[Any] = (),
    kinds: Sequence[int] | None = None,
) -> TrimReport[Any]:
    """``decide``, with ``TurnTrimOverflowError`` (not even the newest turn
    fits under ``raise``, or its skeleton under ``compact``) as an
    ``InputError`` with its message."""
    try:
        # A transcript is written as it is read: its calls stay as they are.
        return _pipeline.decide(messages, options, planner, tools=tools, kinds=kinds, sent=False)
    except Exception as error:
        # The error can only have been built if its module was loaded: the
        # command need not import LangChain to recognise it.
        errors = sys.modules.get("langchain_turntrim._errors")
        if errors is not None and isinstance(error, errors.TurnTrimOverflowError):
            raise InputError(str(error)) from error
        raise


def _full_planner(
    transcript: Transcript, choice: CounterChoice
) -> tuple[list[BaseMessage], MessagePlanner]:
    """The transcript's messages (converted with LangChain) and the planner of
    the chosen counter (one decision per run: no cache, it would only cost time)."""
    from langchain_turntrim._cli.conversion import to_messages  # noqa: PLC0415 - LangChain
    from langchain_turntrim._planning import planner_for  # noqa: PLC0415

    return to_messages(transcript), planner_for(choice.counter, 0)


class _TranscriptPlanner:
    """What both of the command's own planners share: no tools, and a
    transcript written as it is read (``sent=False``: no calls left out)."""

    blocking = False

    def tool_tokens(self, tools: Sequence[Any]) -> int:  # noqa: ARG002 - the planner interface
        return 0

    def answered(
        self,
        report: TrimReport[Any],
        tools: Sequence[Any] = (),  # noqa: ARG002 - the planner interface
    ) -> TrimReport[Any]:
        return report


class _RecordsPlanner(_TranscriptPlanner):
    """Plans records by their ``tokens`` (``plan_trim`` validates them)."""

    def plan(
        self,
        messages: Sequence[Any],
        kinds: Sequence[int] | None,  # noqa: ARG002 - the planner interface
        max_tokens: int,
        *,
        tools: Sequence[Any] = (),  # noqa: ARG002 - records have no tools
        trim_to: int | Cut | None = None,
        pinned_alone: bool = True,  # noqa: ARG002 - every count is exact here
        again: bool = False,  # noqa: ARG002 - planned afresh: it is cheap
    ) -> TrimPlan:
        level = trim_to.level if isinstance(trim_to, Cut) else trim_to  # never a Cut here
        return plan_trim(messages, max_tokens, trim_to=level)

    def compact(self, *args: Any, **kwargs: Any) -> Compaction:  # noqa: ARG002
        msg = "records have no content to compact"  # refused before planning
        raise AssertionError(msg)


class _PlainPlanner(_TranscriptPlanner):
    """Plans a plain transcript from ``PlainCounter``'s counts; compacts with
    the full planner (``full()``: the converted messages and their planner),
    whose counts are the same (a property test holds them to each other)."""

    def __init__(
        self,
        kinds: list[int],
        costs: list[int],
        full: Callable[[], tuple[list[BaseMessage], MessagePlanner]],
    ) -> None:
        self.kinds = kinds
        self.costs = costs
        self.full = full

    def plan(
        self,
        messages: Sequence[Any],  # noqa: ARG002 - planned from the counts
        kinds: Sequence[int] | None,  # noqa: ARG002
        max_tokens: int,
        *,
        tools: Sequence[Any] = (),  # noqa: ARG002 - a plain transcript has none
        trim_to: int | Cut | None = None,
        pinned_alone: bool = True,  # noqa: ARG002 - every count is exact here
        again: bool = False,  # noqa: ARG002 - planned afresh: it is cheap
    ) -> TrimPlan:
        return plan_costs(self.kinds, self.costs, max_tokens, REPLY_PRIMING, trim_to)

    def compact(
        self,
        messages: Sequence[Any],  # noqa: ARG002 - compacted as converted
        plan: TrimPlan,
        *,
        keep_tool_results: int,
        tools: Sequence[Any] = (),
    ) -> Compaction:
        converted, planner = self.full()
        return planner.compact(converted, plan, keep_tool_results=keep_tool_results, tools=tools)
