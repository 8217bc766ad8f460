"""The timed scenarios: each compares TurnTrimmer with a baseline, side by side."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import tiktoken
from langchain_core.messages import BaseMessage, trim_messages
from langchain_core.messages.utils import count_tokens_approximately
from pydantic import SecretStr

from benchmarks.conversations import OpenAIMessage, Source, fresh_messages, records
from benchmarks.encoding import EXACT_MODEL
from benchmarks.floors import (
    Count,
    approximate_count,
    counted_loop,
    encode_loop,
    encoded_texts,
    full_count,
)
from benchmarks.report import Row, Target, seconds_summary, show_ratio
from benchmarks.timing import Prepare, Times, interleave, median_ratio
from langchain_turntrim import TiktokenCounter, TurnTrimmer, trim_history

__all__ = [
    "BUDGET_FRACTION",
    "Settings",
    "agent_loop",
    "approximate",
    "approximate_loop",
    "cold_exact",
    "core",
]

#: Every budget is this fraction of the history's total tokens.
BUDGET_FRACTION: Final = 0.25
#: trim_messages configured to keep whole turns, as close to TurnTrimmer as it gets.
TRIM_MESSAGES_OPTIONS: Final[dict[str, Any]] = {
    "strategy": "last",
    "start_on": "human",
    "include_system": True,
}
#: A .trim ratio differing from the .invoke one by more than this is reported.
NOTABLE: Final = 0.10
#: Cold (or warm) calls timed together per repeat in the warm-vs-cold comparison.
WARM_COLD_CALLS: Final = 10
#: A timed sample of cold calls covers at least this many messages (several fresh
#: histories when they are small), so that no sample lasts only a few milliseconds.
SAMPLE_MESSAGES: Final = 5_000
#: Cold approximate trims up to this size have the higher target.
APPROXIMATE_TARGET_UP_TO: Final = 10_000

Trim = Callable[[list[BaseMessage]], object]
#: Turns a trim function and fresh messages into the call to time.
Workload = Callable[[Trim, list[BaseMessage]], Callable[[], object]]


@dataclass(frozen=True)
class Settings:
    source: Source
    repeats: int
    quick: bool

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full


# ---------------------------------------------------------------------------
# Arms: what each side of a comparison runs


def once(trim: Trim, messages: list[BaseMessage]) -> Callable[[], object]:
    """One call on the whole history."""
    return lambda: trim(messages)


def loop_over(steps: Sequence[int]) -> Workload:
    """The agent loop: one call per step, on the history up to (not including) that step."""

    def workload(trim: Trim, messages: list[BaseMessage]) -> Callable[[], object]:
        prefixes = [messages[:k] for k in steps]
        return lambda: [trim(prefix) for prefix in prefixes]

    return workload


def arm(
    new_trim: Callable[[], Trim],
    base: list[OpenAIMessage],
    workload: Workload,
    *,
    calls: int = 1,
    primes: int = 0,
) -> Prepare:
    """Every repeat, ``calls`` runs of ``workload``, each with its own fresh messages and
    a new trim function from ``new_trim`` (a fresh trimmer). ``primes``: how many
    times each run's trimmer has trimmed its history already, untimed."""

    def prepare(tag: str) -> Callable[[], object]:
        runs = []
        for i in range(calls):
            trim, messages = new_trim(), fresh_messages(base, f"{tag}.{i}")
            for _ in range(primes):
                trim(messages)
            runs.append(workload(trim, messages))
        return lambda: [run() for run in runs]

    return prepare


def turntrimmer_arms(
    make: Callable[[], TurnTrimmer],
    base: list[OpenAIMessage],
    workload: Workload,
    *,
    calls: int = 1,
    primes: int = 0,
    prefix: str = "",
) -> dict[str, Prepare]:
    """``invoke`` (the Runnable path users call) and ``trim`` (no callbacks)."""
    return {
        prefix + method: arm(
            functools.partial(_trim_method, make, method),
            base,
            workload,
            calls=calls,
            primes=primes,
        )
        for method in ("invoke", "trim")
    }


def _trim_method(make: Callable[[], TurnTrimmer], method: str) -> Trim:
    trim: Trim = getattr(make(), method)
    return trim


def function_arm(trim: Trim, base: list[OpenAIMessage], workload: Workload, calls: int) -> Prepare:
    """``trim`` (a baseline function) on fresh messages."""
    return arm(lambda: trim, base, workload, calls=calls)


def calls_per_sample(n: int) -> int:
    """Cold calls per timed sample: enough for SAMPLE_MESSAGES messages in all."""
    return max(1, SAMPLE_MESSAGES // n)


def trim_messages_with(counter: object, budget: int) -> Trim:
    return functools.partial(
        trim_messages, max_tokens=budget, token_counter=counter, **TRIM_MESSAGES_OPTIONS
    )


def ratio_row(
    scenario: str, comparison: str, target: Target, times: Times, numerator: str, denominator: str
) -> Row:
    """A row for ``times[numerator] / times[denominator]``. When a side times ``.invoke``,
    the same ratio with ``.trim`` is kept too, and noted when it differs notably."""
    ratio = median_ratio(times[numerator], times[denominator])
    row = Row(scenario, comparison, target, ratio, details=seconds_summary(times))
    if "invoke" in numerator + denominator:
        alt = median_ratio(
            *(times[name.replace("invoke", "trim")] for name in (numerator, denominator))
        )
        row.details["ratio_with_trim"] = alt
        if abs(alt / ratio - 1) > NOTABLE:
            row.notes.append(f".trim instead of .invoke: {target.show(alt)}")
    return row


# ---------------------------------------------------------------------------
# Exact counting (gpt-4o, o200k_base, on both sides)


@dataclass(frozen=True)
class ExactInput:
    """A history, the ChatOpenAI baseline and the budget, for an exact scenario."""

    base: list[OpenAIMessage]
    chat: Any
    budget: int
    notes: list[str]

    def trimmer(self) -> TurnTrimmer:
        """A fresh exact trimmer."""
        return TurnTrimmer(max_tokens=self.budget, token_counter=TiktokenCounter(EXACT_MODEL))

    def annotate(self, row: Row) -> Row:
        row.notes.extend(self.notes)
        row.details.update(messages=len(self.base), budget=self.budget)
        return row


def exact_input(settings: Settings, n: int) -> ExactInput:
    """``n`` messages and BUDGET_FRACTION of their exact total (noting any disagreement
    between TiktokenCounter and ChatOpenAI, which the comparisons assume equal)."""
    from langchain_openai import ChatOpenAI  # noqa: PLC0415 (only for the exact scenarios)

    base = settings.source.conversation(n)
    chat = ChatOpenAI(model=EXACT_MODEL, api_key=SecretStr("sk-bench"))
    messages = fresh_messages(base, "budget")
    counter = TiktokenCounter(EXACT_MODEL)
    ours = counter.count(messages)
    theirs = chat.get_num_tokens_from_messages(messages)
    notes = (
        [] if ours == theirs else [f"counts differ: TiktokenCounter {ours}, ChatOpenAI {theirs}"]
    )
    return ExactInput(base, chat, int(theirs * BUDGET_FRACTION), notes)


def exact_encode() -> Callable[[str], list[int]]:
    return tiktoken.encoding_for_model(EXACT_MODEL).encode_ordinary


def encode_loop_arm(base: list[OpenAIMessage], calls: int) -> Prepare:
    """``calls`` encode loops over the ``encoded_texts`` of fresh messages (gathered
    outside the clock)."""
    encode = exact_encode()

    def prepare(tag: str) -> Callable[[], object]:
        texts = [encoded_texts(fresh_messages(base, f"{tag}.{i}")) for i in range(calls)]
        return lambda: [encode_loop(encode, t) for t in texts]

    return prepare


def full_count_arm(base: list[OpenAIMessage], calls: int) -> Prepare:
    """``calls`` ``full_count`` floors, each over its own fresh messages."""
    count = functools.partial(full_count, exact_encode())

    def prepare(tag: str) -> Callable[[], object]:
        histories = [fresh_messages(base, f"{tag}.{i}") for i in range(calls)]
        return lambda: [count(messages) for messages in histories]

    return prepare


def counted_loop_arm(base: list[OpenAIMessage], steps: Sequence[int], count: Count) -> Prepare:
    """The ``counted_loop`` floor of an agent loop over fresh messages."""

    def prepare(tag: str) -> Callable[[], object]:
        messages = fresh_messages(base, tag)
        return lambda: counted_loop(count, messages, steps)

    return prepare


def cold_exact(settings: Settings) -> list[Row]:
    exact = exact_input(settings, settings.size(1_000, 200))
    base, chat = exact.base, exact.chat
    calls = calls_per_sample(len(base))
    arms = turntrimmer_arms(exact.trimmer, base, once, calls=calls)
    arms["trim_messages"] = function_arm(trim_messages_with(chat, exact.budget), base, once, calls)
    arms["chat_count"] = function_arm(chat.get_num_tokens_from_messages, base, once, calls)
    arms["encode_loop"] = encode_loop_arm(base, calls)
    arms["full_count"] = full_count_arm(base, calls)
    times = interleave(arms, settings.repeats)
    name = f"cold exact trim, {len(base):,} msgs"
    rows = [
        ratio_row(name, comparison, target, times, numerator, denominator)
        for comparison, target, numerator, denominator in (
            ("trim_messages(ChatOpenAI) / TurnTrimmer", Target(">=", 3), "trim_messages", "invoke"),
            (
                "TurnTrimmer / ChatOpenAI.get_num_tokens_from_messages",
                Target("<=", 1.1),
                "invoke",
                "chat_count",
            ),
            (
                "TurnTrimmer / full_count floor (read fields, dump arguments, encode, sum)",
                Target("<=", 1.15),
                "invoke",
                "full_count",
            ),
        )
    ]
    bare = median_ratio(times["full_count"], times["encode_loop"])
    rows[-1].notes.append(f"full_count / a bare encode loop over the same texts: {bare:.2f}x")
    rows[-1].notes.append(_encoded_share(exact))
    for row in rows:
        row.details["calls_per_sample"] = calls
    return [exact.annotate(row) for row in rows]


def _encoded_share(exact: ExactInput) -> str:
    """How many of the counted tokens the encode loop encodes (the rest are constants)."""
    messages = fresh_messages(exact.base, "share")
    counter = TiktokenCounter(EXACT_MODEL)
    encoded = full_count(exact_encode(), messages)
    total = counter.count(messages)
    return f"the loop encodes {encoded:,} of the {total:,} tokens counted (the rest are constants)"


def agent_loop(settings: Settings) -> list[Row]:
    """Whole loops, each repeat with fresh messages and a fresh trimmer (see docs/benchmarks.md)."""
    exact = exact_input(settings, settings.size(200, 60))
    base = exact.base
    steps = assistant_steps(base)
    loop = loop_over(steps)
    arms = turntrimmer_arms(exact.trimmer, base, loop)
    plain = trim_messages_with(exact.chat, exact.budget)
    arms["trim_messages"] = function_arm(plain, base, loop, calls=1)
    # trim_messages without messages is a Runnable: the like-for-like of .invoke.
    runnable = trim_messages(
        max_tokens=exact.budget, token_counter=exact.chat, **TRIM_MESSAGES_OPTIONS
    )
    arms["trim_messages-invoke"] = function_arm(runnable.invoke, base, loop, calls=1)
    arms["encode_loop"] = encode_loop_arm(base, 1)
    arms["counted_loop"] = counted_loop_arm(
        base, steps, functools.partial(full_count, exact_encode())
    )
    times = interleave(arms, settings.repeats)
    # Like with like: plain calls on both sides (a Runnable's invoke adds
    # LangChain's callback machinery to either side).
    name = f"agent loop, {len(steps)} trims up to {len(base)} msgs"
    floor = counted_loop_row(name, "encode", times)
    floor.notes.append(dropping_steps(exact.trimmer(), base, steps))
    both = Row(
        name,
        "as a Runnable: TurnTrimmer.invoke / TurnTrimmer.trim, whole loop",
        Target("<=", 1.1),
        median_ratio(times["invoke"], times["trim"]),
    )
    row = Row(
        name,
        "trim_messages(ChatOpenAI) / TurnTrimmer.trim, whole loop",
        None,
        median_ratio(times["trim_messages"], times["trim"]),
    )
    runnables = median_ratio(times["trim_messages-invoke"], times["invoke"])
    ceiling = median_ratio(times["trim_messages"], times["encode_loop"])
    row.notes.append(f"both as Runnables (.invoke on each side): {show_ratio(runnables)}")
    row.notes.append(
        f"trim_messages / an encode loop over the history once: {show_ratio(ceiling)}, "
        "the most a trimmer that tokenizes each message once could reach"
    )
    row.details.update(steps=len(steps), ratio_runnables=runnables)
    rows = [floor, both, row, warm_vs_cold(settings, exact)]
    return [exact.annotate(r) for r in rows]


def counted_loop_row(name: str, count: str, times: Times) -> Row:
    """The loop's row against its ``counted_loop`` floor (``count``: what it does to
    each new message)."""
    return Row(
        name,
        f"TurnTrimmer.trim, whole loop / counted_loop floor ({count} each new message "
        "once, check every remembered message's fields)",
        Target("<=", 1.2),
        median_ratio(times["trim"], times["counted_loop"]),
        details=seconds_summary(times),
    )


def assistant_steps(base: Sequence[OpenAIMessage]) -> list[int]:
    """The agent loop's steps: the index of every assistant message (the history
    before it is what the model is sent)."""
    return [k for k, m in enumerate(base) if k and m["role"] == "assistant"]


def dropping_steps(trimmer: TurnTrimmer, base: list[OpenAIMessage], steps: Sequence[int]) -> str:
    """A note: at how many steps ``trimmer`` drops turns (the loop does real trims)."""
    messages = fresh_messages(base, "plan")
    dropping = sum(trimmer.plan(messages[:k]).dropped_turns > 0 for k in steps)
    return f"turns dropped at {dropping} of {len(steps)} steps"


def warm_vs_cold(settings: Settings, exact: ExactInput) -> Row:
    """The same history trimmed by a fresh trimmer (cold), and again by one that has
    trimmed it twice (warm: a history is remembered from its second plan on, the
    steady state of an agent loop); the note gives the second plan itself."""
    arms = {
        **turntrimmer_arms(exact.trimmer, exact.base, once, calls=WARM_COLD_CALLS, prefix="cold-"),
        **turntrimmer_arms(
            exact.trimmer, exact.base, once, calls=WARM_COLD_CALLS, primes=2, prefix="warm-"
        ),
        # The note reads the second plan through invoke only.
        "second-invoke": arm(
            functools.partial(_trim_method, exact.trimmer, "invoke"),
            exact.base,
            once,
            calls=WARM_COLD_CALLS,
            primes=1,
        ),
    }
    times = interleave(arms, settings.repeats)
    target = Target("<=", 0.10, percent=True)
    row = ratio_row(
        f"agent loop, {len(exact.base)} msgs",
        "warm call / cold call, same history",
        target,
        times,
        "warm-invoke",
        "cold-invoke",
    )
    second = median_ratio(times["second-invoke"], times["cold-invoke"])
    row.details.update(calls_per_sample=WARM_COLD_CALLS, ratio_second=second)
    row.notes.append(f"the history's second plan (when it is remembered) / cold: {second:.1%}")
    return row


# ---------------------------------------------------------------------------
# Approximate counting


def approximate(settings: Settings) -> list[Row]:
    sizes = (1_000, 10_000) if settings.quick else (10_000, 100_000)
    return [approximate_at(settings, n) for n in sizes]


def approximate_budget(base: list[OpenAIMessage]) -> int:
    """BUDGET_FRACTION of the history's approximate total."""
    return int(count_tokens_approximately(fresh_messages(base, "budget")) * BUDGET_FRACTION)


def approximate_at(settings: Settings, n: int) -> Row:
    base = settings.source.conversation(n)
    budget = approximate_budget(base)
    calls = calls_per_sample(n)
    arms = turntrimmer_arms(lambda: TurnTrimmer(max_tokens=budget), base, once, calls=calls)
    arms["trim_messages"] = function_arm(
        trim_messages_with(count_tokens_approximately, budget), base, once, calls
    )
    times = interleave(arms, settings.repeats)
    row = ratio_row(
        f"approximate, cold, {n:,} msgs",
        "trim_messages(count_tokens_approximately) / TurnTrimmer.trim",
        Target(">=", 10 if n <= APPROXIMATE_TARGET_UP_TO else 5),
        times,
        "trim_messages",
        "trim",
    )
    row.details.update(messages=n, budget=budget, calls_per_sample=calls)
    return row


def approximate_loop(settings: Settings) -> list[Row]:
    """``agent_loop`` with approximate counts on both sides: whole loops, each repeat
    with fresh messages and one fresh trimmer reused across the loop."""
    base = settings.source.conversation(settings.size(200, 60))
    budget = approximate_budget(base)
    steps = assistant_steps(base)
    loop = loop_over(steps)
    arms = turntrimmer_arms(lambda: TurnTrimmer(max_tokens=budget), base, loop)
    plain = trim_messages_with(count_tokens_approximately, budget)
    arms["trim_messages"] = function_arm(plain, base, loop, calls=1)
    arms["counted_loop"] = counted_loop_arm(base, steps, approximate_count)
    times = interleave(arms, settings.repeats)
    name = f"approximate loop, {len(steps)} trims up to {len(base)} msgs"
    floor = counted_loop_row(name, "count", times)
    floor.details.update(messages=len(base), budget=budget, steps=len(steps))
    floor.notes.append(dropping_steps(TurnTrimmer(max_tokens=budget), base, steps))
    invoke = median_ratio(times["invoke"], times["trim"])
    floor.notes.append(f"TurnTrimmer.invoke / TurnTrimmer.trim: {show_ratio(invoke)}")
    row = Row(
        name,
        "trim_messages(count_tokens_approximately) / TurnTrimmer.trim, whole loop",
        None,
        median_ratio(times["trim_messages"], times["trim"]),
    )
    return [floor, row]


# ---------------------------------------------------------------------------
# The core, on plain records


def sum_tokens(items: Sequence[dict[str, Any]]) -> int:
    """The floor: one bare Python pass summing ``tokens``."""
    total = 0
    for item in items:
        total += item["tokens"]
    return total


def core(settings: Settings) -> list[Row]:
    n = settings.size(1_000_000, 100_000)
    items = records(settings.source, n)
    budget = int(sum_tokens(items) * BUDGET_FRACTION)
    # Each timed sample covers at least a million records, so that smaller
    # (--quick) samples are not a few milliseconds a scheduler hiccup can double.
    passes = range(max(1, 1_000_000 // n))
    arms: dict[str, Prepare] = {
        "trim_history": lambda _tag: lambda: [trim_history(items, budget) for _ in passes],
        "sum": lambda _tag: lambda: [sum_tokens(items) for _ in passes],
    }
    times = interleave(arms, settings.repeats)
    row = ratio_row(
        f"core trim_history, {n:,} records",
        "trim_history / one pass summing tokens",
        Target("<=", 5),
        times,
        "trim_history",
        "sum",
    )
    row.details.update(records=n, budget=budget, passes_per_sample=len(passes))
    return [row]
