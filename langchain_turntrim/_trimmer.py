"""``TurnTrimmer``, the trim as a LangChain Runnable, and ``trim_turns``, the
drop-in for ``trim_messages``: two adapters of the one pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from langchain_core.messages import BaseMessage, HumanMessage, MessageLikeRepresentation
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, run_in_executor

from langchain_turntrim._anatomy import to_messages
from langchain_turntrim._core import TrimPlan, shown
from langchain_turntrim._options import TrimOptions
from langchain_turntrim._pipeline import Pipeline
from langchain_turntrim._report import TrimReport
from langchain_turntrim._tracing import arecord, observed, record
from langchain_turntrim.cache_pricing import cache_price_for

if TYPE_CHECKING:
    from langchain_turntrim._recovery import OverflowRetry
    from langchain_turntrim.cache_pricing._depth import CacheCall

__all__ = ["TrimInput", "TurnTrimmer", "trim_turns"]

#: What every entry point takes as a history.
TrimInput = PromptValue | Sequence[MessageLikeRepresentation]


class TurnTrimmer(Runnable[TrimInput, list[BaseMessage]]):
    """Keep the newest whole turns that fit ``max_tokens``, and every system message.

    Input: a ``PromptValue`` or a sequence of message-likes (anything
    ``convert_to_messages`` takes). Output: the kept messages, your own objects
    in their order (new objects only where a message had to change to be
    sent: compacted, or without a call no result answers).

    Args:
        max_tokens: The budget for the kept messages, as the counter counts them.

    Keyword Args:
        **options: ``token_counter``, ``on_overflow``, ``keep_tool_results``,
            ``trim_to``, ``cache_size``, ``cache_price``, ``context_value``,
            ``overflow_retries``: the options every entry point takes, each
            described, defaulted and checked in ``TrimOptions``. They are
            checked here, and never change: a copy or a pickle is a new trimmer
            with the same options and nothing remembered.
    """

    def __init__(self, max_tokens: int, *, name: str | None = None, **options: Any) -> None:
        checked = TrimOptions.of(type(self).__name__, max_tokens=max_tokens, **options)
        self._pipeline = Pipeline(checked)
        self.name = name

    @classmethod
    def from_options(cls, options: TrimOptions, name: str | None = None) -> TurnTrimmer:
        """A trimmer with ``options`` (the counter shared, nothing remembered)."""
        trimmer = cls.__new__(cls)
        trimmer._pipeline = Pipeline(options)  # noqa: SLF001 - its own class
        trimmer.name = name
        return trimmer

    @classmethod
    def for_model(
        cls, chat_model: Any, *, reserve_tokens: int | None = None, **options: Any
    ) -> TurnTrimmer:
        """A trimmer sized for ``chat_model``, counting without a network call.

        The budget is ``chat_model.profile["max_input_tokens"] - reserve_tokens``
        (None: room for the reply, ``min(max_output_tokens, max_input_tokens //
        4)``); the counter ``TiktokenCounter`` for an OpenAI chat model, else a
        ``CalibratedCounter``. Under ``trim_to="auto"`` the cache rules are the model's.
        """
        if options.get("trim_to") == "auto" and options.get("cache_price") is None:
            options["cache_price"] = cache_price_for(chat_model)
        sized = TrimOptions.for_model(cls.__name__, chat_model, reserve_tokens, **options)
        return cls.from_options(sized)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self).from_options, (self.options, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options.arguments()})"

    @property
    def options(self) -> TrimOptions:
        return self._pipeline.options

    @property
    def max_tokens(self) -> int:
        return self._pipeline.options.max_tokens

    @property
    def counter(self) -> Any:
        """The resolved counter."""
        return self._pipeline.counter

    def clear_cache(self) -> None:
        """Forget every message's kind and count (after editing a nested value in place)."""
        self._pipeline.cache.clear()

    def report(
        self,
        messages: TrimInput,
        *,
        tools: Sequence[Any] = (),
        max_tokens: int | None = None,
        cache: CacheCall | None = None,
    ) -> TrimReport[BaseMessage]:
        """What a trim of ``messages`` decides, without logging or tracing:
        ``tools`` are the request's tool schemas, counted once beside them;
        ``max_tokens`` another budget for this call (a retry's)."""
        history = to_messages(messages)
        return self._pipeline.decide(history, tools=tools, max_tokens=max_tokens, cache=cache)

    def plan(self, messages: TrimInput) -> TrimPlan:
        """The plan behind ``report(messages)``: which whole turns fit."""
        return self.report(messages).plan

    def trim_with_report(self, messages: TrimInput) -> TrimReport[BaseMessage]:
        """Trim ``messages`` and say what was kept, left out and compacted (logged
        and traced like ``trim``)."""
        report = self.report(messages)
        record(report)
        return report

    def trim(self, messages: TrimInput) -> list[BaseMessage]:
        """The kept messages, recorded on the run the caller executes in (if any)."""
        return self.trim_with_report(messages).kept

    async def _atrim(self, messages: TrimInput) -> list[BaseMessage]:
        if self.counter.blocking:  # a provider's count endpoint: keep the loop free
            report = await run_in_executor(None, self.report, messages)
        else:
            report = self.report(messages)
        await arecord(report)
        return report.kept

    def invoke(
        self,
        input: TrimInput,  # noqa: A002 - Runnable's name
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """Trim ``input`` as a run of its own, which callbacks and tracers see
        (without a handler to see it, straight away: the result is the same)."""
        if kwargs or observed(ensure_config(config).get("callbacks")):
            return self._call_with_config(self.trim, input, config, **kwargs)
        return self.trim(input)

    async def ainvoke(
        self,
        input: TrimInput,  # noqa: A002 - Runnable's name
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """``invoke`` for async code (a counter that may block runs in a thread)."""
        if kwargs or observed(ensure_config(config).get("callbacks")):
            return await self._acall_with_config(self._atrim, input, config, **kwargs)
        return await self._atrim(input)

    def with_overflow_retry(self, model: Runnable[Any, Any]) -> OverflowRetry:
        """This trimmer piped into ``model``, trimming tighter and calling again
        (``overflow_retries`` times) when the provider answers that the context
        is too long; what the provider said is kept for the next calls."""
        from langchain_turntrim._recovery import OverflowRetry  # noqa: PLC0415 - a cycle

        return OverflowRetry(self, model)


_HUMAN = ("human", HumanMessage)


@overload
def trim_turns(messages: None = None, *, max_tokens: int, **options: Any) -> TurnTrimmer: ...
@overload
def trim_turns(messages: TrimInput, *, max_tokens: int, **options: Any) -> list[BaseMessage]: ...
def trim_turns(
    messages: TrimInput | None = None,
    *,
    max_tokens: int,
    strategy: str = "last",
    start_on: Any = "human",
    include_system: bool = True,
    allow_partial: bool = False,
    end_on: Any = None,
    text_splitter: Any = None,
    **options: Any,
) -> list[BaseMessage] | TurnTrimmer:
    """``trim_messages``' calling convention, trimming whole turns.

    Replaces ``trim_messages(messages, max_tokens=..., token_counter=...,
    strategy="last", start_on="human", include_system=True)``: given ``messages``
    it returns the kept ones; without them, a Runnable (a ``TurnTrimmer``). The
    options that would split a turn or drop a system message (``strategy="first"``,
    ``allow_partial=True``, ``end_on``, ``text_splitter``, ``include_system=False``,
    another ``start_on``) raise ``ValueError``; ``start_on=None`` is accepted (the
    result starts on a human message anyway).

    Keyword Args:
        **options: ``token_counter``, ``on_overflow``, ``keep_tool_results``,
            ``trim_to``, ``cache_size``, ``cache_price``, ``context_value``,
            ``overflow_retries``: as for ``TurnTrimmer`` (``TrimOptions``), with
            the same defaults; ``token_counter`` defaults to ``"approximate"``
            where ``trim_messages`` requires one.
    """
    humans = start_on if isinstance(start_on, (list, tuple)) else [start_on]
    problems = [
        f"strategy={strategy!r} (only 'last' keeps the newest turns)" * (strategy != "last"),
        f"start_on={shown(start_on)} (turns start on a human message)"
        * (start_on is not None and not all(h in _HUMAN for h in humans)),
        f"include_system={include_system!r} (system messages are always kept)"
        * (include_system is not True),
        f"allow_partial={allow_partial!r} (messages are never split)"
        * (allow_partial is not False),
        f"end_on={shown(end_on)} (turns are never ended early)" * (end_on is not None),
        "text_splitter (messages are never split)" * (text_splitter is not None),
    ]
    if any(problems):
        msg = "trim_turns does not support " + "; ".join(p for p in problems if p)
        raise ValueError(msg)
    trimmer = TurnTrimmer.from_options(
        TrimOptions.of("trim_turns", max_tokens=max_tokens, **options)
    )
    return trimmer if messages is None else trimmer.trim(messages)
