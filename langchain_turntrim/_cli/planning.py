"""What ``turntrim`` plans: the counter and overflow options it was given, and the plan."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_turntrim._cli.transcript import InputError, Transcript
from langchain_turntrim._core import ROLE_KINDS, TrimPlan, plan_costs, plan_trim
from langchain_turntrim._counting.openai_chat import REPLY_PRIMING, PlainCounter
from langchain_turntrim._options import DEFAULT_KEEP_TOOL_RESULTS, OnOverflow

if TYPE_CHECKING:
    from langchain_turntrim._compaction import Compaction
    from langchain_turntrim._counting import TokenCounter

__all__ = [
    "CounterChoice",
    "Overflow",
    "Planned",
    "choose_counter",
    "overflow_options",
    "plain_counter",
    "plan_plain",
    "plan_transcript",
]


@dataclass(frozen=True)
class CounterChoice:
    """What ``--counter`` asked for: ``counter`` is None for ``field``."""

    label: str
    counter: TokenCounter | None


@dataclass(frozen=True)
class Overflow:
    """What ``--on-overflow``, ``--keep-tool-results`` and ``--trim-to`` asked for."""

    on_overflow: OnOverflow
    keep_tool_results: int = DEFAULT_KEEP_TOOL_RESULTS
    trim_to: int | None = None


def overflow_options(args: argparse.Namespace) -> Overflow:
    keep = args.keep_tool_results
    if keep < 0:
        msg = f"--keep-tool-results must be >= 0, got {keep}"
        raise InputError(msg)
    trim_to = args.trim_to
    if trim_to is not None and not 0 <= trim_to <= args.max_tokens:
        msg = f"--trim-to must be from 0 to --max-tokens ({args.max_tokens}), got {trim_to}"
        raise InputError(msg)
    return Overflow(args.on_overflow, keep, trim_to)


@dataclass(frozen=True)
class Planned:
    """A plan, (for the report) each message's turn kind and cost, the
    compaction of the newest turn under ``--on-overflow compact``, and the
    request's tool schemas: how many, and their tokens."""

    plan: TrimPlan
    kinds: list[int]
    costs: list[int]
    compaction: Compaction | None = None
    tools: int = 0
    tool_tokens: int = 0

    def kept(self) -> tuple[list[int], dict[int, Any]]:
        """The kept indices of the transcript, and the compacted ``content`` of
        each kept message whose content compaction changed."""
        compaction = self.compaction
        if compaction is None:
            return list(self.plan.kept), {}
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
    counter = tiktoken_shortcut(spec)
    encoding = getattr(counter, "encoding", None)
    label = spec.strip() + (f" ({encoding.name})" if encoding is not None else "")
    return CounterChoice(label, counter)


def plan_transcript(
    transcript: Transcript,
    choice: CounterChoice,
    max_tokens: int,
    overflow: Overflow,
    *,
    with_costs: bool,
) -> Planned:
    """Plan the trim; with ``with_costs``, also each message's turn kind and cost."""
    # Imported here: LangChain's messages, which a plain transcript never needs.
    from langchain_turntrim._cli.conversion import to_messages  # noqa: PLC0415
    from langchain_turntrim._compaction import decide  # noqa: PLC0415
    from langchain_turntrim._counting import resolve_counter  # noqa: PLC0415
    from langchain_turntrim._errors import check_overflow  # noqa: PLC0415
    from langchain_turntrim._messages import message_kinds  # noqa: PLC0415

    records = transcript.messages
    if choice.counter is None:
        if overflow.on_overflow == "compact":
            msg = "--on-overflow compact needs message content; --token-counter field has none"
            raise InputError(msg)
        plan = plan_trim(records, max_tokens, trim_to=overflow.trim_to)  # validates records
        with _overflow_as_input_error():
            check_overflow(plan, overflow.on_overflow)
        if not with_costs:
            return Planned(plan, [], [])
        return Planned(
            plan, [ROLE_KINDS[r["role"]] for r in records], [r["tokens"] for r in records]
        )
    messages = to_messages(transcript)
    # TurnTrimmer.report's decision (decide), without importing the Runnable machinery
    # (LangChain's tracers and LangSmith's run trees), which would cost a run
    # more than its trim. One plan per run: a cache would only cost time.
    counter = resolve_counter(choice.counter, 0)
    tools = (transcript.envelope or {}).get("tools") or []
    tool_tokens = counter.count_tools(tools)
    kinds = message_kinds(messages)
    with _overflow_as_input_error():
        plan, compaction = decide(
            messages,
            kinds,
            counter,
            max_tokens,
            on_overflow=overflow.on_overflow,
            keep_tool_results=overflow.keep_tool_results,
            trim_to=overflow.trim_to,
            reserved=tool_tokens,
        )
    if not with_costs:
        return Planned(plan, [], [], compaction, len(tools), tool_tokens)
    return Planned(plan, kinds, counter.count_each(messages), compaction, len(tools), tool_tokens)


@contextmanager
def _overflow_as_input_error() -> Iterator[None]:
    """``TurnTrimOverflowError`` (not even the newest turn fits under ``raise``,
    or its skeleton under ``compact``) as an ``InputError`` with its message,
    so that the command need not import LangChain to catch it."""
    from langchain_turntrim._errors import TurnTrimOverflowError  # noqa: PLC0415

    try:
        yield
    except TurnTrimOverflowError as error:
        raise InputError(str(error)) from error


def plain_counter(spec: str) -> PlainCounter | None:
    """The counter of ``tiktoken:NAME`` for plain transcripts (see ``plan_plain``),
    or ``None`` for any other ``spec`` and where ``choose_counter`` would fail."""
    if not spec.startswith("tiktoken:"):
        return None
    return PlainCounter.of(spec.partition(":")[2])


def plan_plain(
    transcript: Transcript, counter: PlainCounter, max_tokens: int, overflow: Overflow
) -> Planned | None:
    """``plan_transcript``'s plan of a plain transcript (``PlainCounter``'s
    messages, no tools) when it fits without ``on_overflow`` acting, from
    counts made without LangChain; ``None`` otherwise (then plan it in full)."""
    if (transcript.envelope or {}).get("tools"):
        return None
    records = transcript.messages
    costs = counter.count(records)
    if costs is None:
        return None
    kinds = [ROLE_KINDS[r["role"]] for r in records]
    plan = plan_costs(kinds, costs, max_tokens, REPLY_PRIMING, overflow.trim_to)
    if plan.overflowed and overflow.on_overflow != "drop":
        return None
    return Planned(plan, kinds, costs)
