"""``TurnTrimmer``: the turn-atomic trim as a LangChain Runnable."""

from __future__ import annotations

import inspect
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import ensure_config, run_in_executor
from pydantic import ConfigDict

from langchain_turntrim._compaction import DEFAULT_KEEP_TOOL_RESULTS, Compaction, decide
from langchain_turntrim._core import TrimPlan, check_count, check_trim_to
from langchain_turntrim._counting import (
    DEFAULT_CACHE_SIZE,
    CalibratedCounter,
    ResolvedCounter,
    TokenCounter,
    resolve_counter,
)
from langchain_turntrim._counting.resolve import _local_counter_for_model
from langchain_turntrim._errors import check_overflow
from langchain_turntrim._messages import TrimInput, to_messages
from langchain_turntrim._options import ON_OVERFLOW, OnOverflow, check_choice
from langchain_turntrim._report import TrimReport, trace_extra
from langchain_turntrim._tracing import areport_trim, observed, report_trim

__all__ = ["TurnTrimmer", "default_reserve", "model_budget", "model_counter"]


class TurnTrimmer(RunnableSerializable[TrimInput, list[BaseMessage]]):
    """Keep the newest whole turns that fit ``max_tokens``, plus every system message.

    Input: a ``PromptValue`` or a sequence of message-likes (anything
    ``convert_to_messages`` accepts). Output: the kept messages, the caller's
    own objects in their original order.

    Args:
        max_tokens: The budget for the whole kept list, as the counter counts
            it (per-request constants included once).
        token_counter: ``"approximate"`` (LangChain's
            ``count_tokens_approximately``), a ``TokenCounter`` such as
            ``TiktokenCounter("gpt-4o")``, a chat model, or a function (see
            ``per_message`` and ``per_list``).
        on_overflow: What to do when not even the newest turn fits beside the
            system messages: ``"drop"`` returns only the system messages (the
            spec); ``"raise"`` raises ``TurnTrimOverflowError``; ``"compact"``
            drops every older turn and compacts the newest one (clears old
            tool results, drops old steps, truncates the largest messages)
            until it fits, raising only when not even its skeleton does.
        keep_tool_results: Under ``"compact"``, how many of the newest tool
            results are never cleared (they may still go with a dropped step
            or be truncated).
        trim_to: When the history exceeds ``max_tokens``, cut it down to about
            ``trim_to`` tokens at a turn boundary that the next calls of a
            growing history keep, so their prompt prefix (and a provider's
            prompt cache) stays the same until the budget forces the next cut.
            ``None`` (default): just under ``max_tokens``, the spec. Must not
            exceed ``max_tokens`` (a per-call ``max_tokens`` too).
        cache_size: How many per-message counts to keep (LRU); 0 disables the
            cache.

    Configuration is checked here, not at the first call, and cannot be
    changed afterwards (an assignment raises ``AttributeError``): build a new
    trimmer, or make ``max_tokens`` configurable per call. Copies and pickles
    work, and start with an empty cache.
    """

    max_tokens: int
    token_counter: Any = "approximate"
    on_overflow: OnOverflow = "drop"
    keep_tool_results: int = DEFAULT_KEEP_TOOL_RESULTS
    trim_to: int | None = None
    cache_size: int = DEFAULT_CACHE_SIZE

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def __init__(
        self,
        max_tokens: int,
        *,
        token_counter: Any = "approximate",
        on_overflow: OnOverflow = "drop",
        keep_tool_results: int = DEFAULT_KEEP_TOOL_RESULTS,
        trim_to: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        **kwargs: Any,
    ) -> None:
        check_count(max_tokens)
        check_trim_to(trim_to, max_tokens)
        check_count(cache_size, "cache_size")
        check_count(keep_tool_results, "keep_tool_results")
        check_choice(on_overflow, "on_overflow", ON_OVERFLOW)
        counter = resolve_counter(token_counter, cache_size)
        fields: dict[str, Any] = {
            "max_tokens": max_tokens,
            "token_counter": counter,
            "on_overflow": on_overflow,
            "keep_tool_results": keep_tool_results,
            "trim_to": trim_to,
            "cache_size": cache_size,
        }
        super().__init__(**fields, **kwargs)

    @classmethod
    def for_model(
        cls,
        chat_model: Any,
        *,
        reserve_tokens: int | None = None,
        on_overflow: OnOverflow = "drop",
        keep_tool_results: int = DEFAULT_KEEP_TOOL_RESULTS,
        trim_to: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> TurnTrimmer:
        """A trimmer sized for ``chat_model``, counting without a network call.

        The budget is ``chat_model.profile["max_input_tokens"] - reserve_tokens``;
        ``reserve_tokens=None`` (default) leaves room for the reply (see
        ``default_reserve``), 0 reserves nothing. The counter is
        ``model_counter(chat_model)``: ``TiktokenCounter`` for OpenAI chat
        models, else a ``CalibratedCounter`` that learns from reported usage.
        """
        return cls(
            max_tokens=model_budget(chat_model, reserve_tokens),
            token_counter=model_counter(chat_model),
            on_overflow=on_overflow,
            keep_tool_results=keep_tool_results,
            trim_to=trim_to,
            cache_size=cache_size,
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CONFIGURATION:
            _refuse_change(self, name)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _CONFIGURATION:
            _refuse_change(self, name)
        super().__delattr__(name)

    @property
    def counter(self) -> ResolvedCounter:
        """The resolved counter (with its cache): the ``token_counter`` field,
        which holds it from construction on."""
        return cast("ResolvedCounter", self.token_counter)

    @property
    def InputType(self) -> Any:  # noqa: N802 - Runnable's name
        return TrimInput

    @property
    def OutputType(self) -> Any:  # noqa: N802 - Runnable's name
        return list[BaseMessage]

    def trim_with_report(self, messages: TrimInput) -> TrimReport:
        """Trim ``messages`` and say what was dropped (and compacted)."""
        report = self.report(to_messages(messages))
        report_trim(report.plan, extra=trace_extra(report))
        return report

    def plan(self, messages: Sequence[BaseMessage]) -> TrimPlan:
        """The spec's plan for a list of ``BaseMessage``: which whole turns fit
        (no compaction, conversion, logging or tracing). Raises under
        ``on_overflow="raise"`` when not even the newest turn fits."""
        plan: TrimPlan = self.token_counter.plan(
            messages, None, self.max_tokens, trim_to=self.trim_to
        )
        check_overflow(plan, self.on_overflow)
        return plan

    def report(
        self,
        messages: Sequence[BaseMessage],
        kinds: Sequence[int] | None = None,
        *,
        reserved: int = 0,
    ) -> TrimReport:
        """Plan, apply the overflow rule and compact: what every entry point returns, pure.

        ``messages`` are ``BaseMessage`` objects (no conversion), ``kinds``
        their turn kinds when the caller has them, ``reserved`` tokens (tool
        schemas) are paid once per request. Nothing is logged or traced.
        """
        kept, plan, compaction = self._decide(messages, kinds, reserved)
        if compaction is not None:
            # The turns dropped before the newest one (every message before it
            # but the pinned ones: no turn is kept), then what compaction dropped in it.
            start = plan.newest_turn_start
            older = start - bisect_left(plan.pinned, start)
            dropped = plan.select_dropped(messages)[:older] + compaction.dropped
        else:
            dropped = plan.select_dropped(messages) if plan.dropped_count else []
        return TrimReport(kept=kept, dropped=dropped, plan=plan, compaction=compaction)

    def _decide(
        self, messages: Sequence[BaseMessage], kinds: Sequence[int] | None, reserved: int
    ) -> tuple[list[BaseMessage], TrimPlan, Compaction | None]:
        """``report`` without the dropped list: the kept messages, the plan, the compaction."""
        plan, compaction = decide(
            messages,
            kinds,
            self.token_counter,
            self.max_tokens,
            on_overflow=self.on_overflow,
            keep_tool_results=self.keep_tool_results,
            trim_to=self.trim_to,
            reserved=reserved,
        )
        if compaction is not None:
            return compaction.messages, plan, compaction
        return plan.select(messages), plan, None

    def trim(self, messages: TrimInput) -> list[BaseMessage]:
        """The kept messages, without a run of its own.

        The trim is logged, and recorded on the run the caller is executing in,
        if any (see ``report_trim``).
        """
        return self._trim_in_run(messages)

    def _trim_in_run(
        self, value: TrimInput, run_manager: CallbackManagerForChainRun | None = None
    ) -> list[BaseMessage]:
        kept, plan, compaction = self._decide(to_messages(value), None, 0)
        report_trim(plan, run_manager, extra=compaction.summary(plan) if compaction else None)
        return kept

    async def _atrim_in_run(
        self, value: TrimInput, run_manager: AsyncCallbackManagerForChainRun | None = None
    ) -> list[BaseMessage]:
        items = to_messages(value)
        if self.token_counter.blocking:
            # A model's counter may be a network call: keep the loop free.
            kept, plan, compaction = await run_in_executor(None, self._decide, items, None, 0)
        else:
            kept, plan, compaction = self._decide(items, None, 0)
        extra = compaction.summary(plan) if compaction else None
        await areport_trim(plan, run_manager, extra=extra)
        return kept

    def invoke(
        self,
        input: TrimInput,  # noqa: A002 - Runnable.invoke's name
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """Trim ``input`` as a run of its own, which callbacks and tracers see.

        When no callback handler would see the run (none passed or inherited,
        no tracing), the trim runs without LangChain's run machinery, which
        would cost several times a warm trim: the result is the same.
        """
        if kwargs or observed(ensure_config(config).get("callbacks")):
            return self._call_with_config(self._trim_in_run, input, config, **kwargs)
        return self._trim_in_run(input)

    async def ainvoke(
        self,
        input: TrimInput,  # noqa: A002 - Runnable.invoke's name
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """``invoke`` for async code (a counter that may block runs in an executor)."""
        if kwargs or observed(ensure_config(config).get("callbacks")):
            return await self._acall_with_config(self._atrim_in_run, input, config, **kwargs)
        return await self._atrim_in_run(input)


#: The fields checked at construction, which therefore never change.
_CONFIGURATION = frozenset(
    ("max_tokens", "token_counter", "on_overflow", "keep_tool_results", "trim_to", "cache_size")
)


def _refuse_change(trimmer: TurnTrimmer, name: str) -> None:
    msg = (
        f"{type(trimmer).__name__}.{name} cannot be changed after construction (it was "
        "checked then): build a new trimmer, or make max_tokens configurable per call "
        "with configurable_fields"
    )
    raise AttributeError(msg)


# LangChain inspects the signature of the function a Runnable runs on every
# call (does it take a run_manager, a config?); computing them once here keeps
# invoke's fixed cost low.
for _method in (TurnTrimmer._trim_in_run, TurnTrimmer._atrim_in_run):  # noqa: SLF001 - its own class
    setattr(_method, "__signature__", inspect.signature(_method))  # noqa: B010


def model_counter(chat_model: Any) -> ResolvedCounter | TokenCounter:
    """The counter ``for_model`` uses: never a network call.

    OpenAI chat models count exactly with ``TiktokenCounter`` (as
    ``get_num_tokens_from_messages`` does, without the round trip); every
    other model gets a ``CalibratedCounter`` on the approximate counter, which
    learns the provider's count from the usage each call reports.
    """
    return _local_counter_for_model(chat_model) or CalibratedCounter()


def _window(chat_model: Any) -> int:
    profile = getattr(chat_model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if not isinstance(limit, int) or isinstance(limit, bool):
        name = type(chat_model).__name__
        msg = (
            f"{name} has no profile['max_input_tokens'] to size the budget from; "
            f"pass max_tokens explicitly (e.g. TurnTrimmer(max_tokens=..., token_counter=model))"
        )
        raise ValueError(msg)  # noqa: TRY004 - the profile lacks a value: not a type error
    return limit


def default_reserve(chat_model: Any) -> int:
    """Room left for the reply when ``reserve_tokens`` is not given:
    ``min(max_output_tokens, max_input_tokens // 4)`` from the model's
    profile, or a quarter of ``max_input_tokens`` when it has no
    ``max_output_tokens``."""
    limit = _window(chat_model)
    output = chat_model.profile.get("max_output_tokens")
    quarter = limit // 4
    if isinstance(output, int) and not isinstance(output, bool) and output >= 0:
        return min(output, quarter)
    return quarter


def model_budget(chat_model: Any, reserve_tokens: int | None) -> int:
    """``chat_model.profile["max_input_tokens"] - reserve_tokens``, checked
    (``default_reserve`` when ``reserve_tokens`` is None)."""
    if reserve_tokens is not None:
        check_count(reserve_tokens, "reserve_tokens")
    limit = _window(chat_model)
    if reserve_tokens is None:
        reserve_tokens = default_reserve(chat_model)
    budget = limit - reserve_tokens
    if budget < 0:
        msg = f"reserve_tokens ({reserve_tokens}) exceeds the model's max_input_tokens ({limit})"
        raise ValueError(msg)
    return budget
