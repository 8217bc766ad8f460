"""``TurnTrimmer``: the turn-atomic trim as a LangChain Runnable (an adapter of ``decide``)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import ensure_config, run_in_executor
from pydantic import ConfigDict

from langchain_turntrim import _pipeline
from langchain_turntrim._cache_rules import cache_price_for
from langchain_turntrim._core import TrimPlan
from langchain_turntrim._counting import Resolved
from langchain_turntrim._messages import TrimInput, explain_bad_fields, to_messages
from langchain_turntrim._options import (
    AUTO,
    DEFAULT_CACHE_SIZE,
    DEFAULT_KEEP_TOOL_RESULTS,
    Auto,
    CachePricing,
    OnOverflow,
    TrimOptions,
)
from langchain_turntrim._overflow import DEFAULT_OVERFLOW_RETRIES
from langchain_turntrim._planning import MessagePlanner, planner_for
from langchain_turntrim._report import TrimReport
from langchain_turntrim._sizing import sized_options
from langchain_turntrim._tracing import areport_trim, observed, report_trim

if TYPE_CHECKING:
    from langchain_core.language_models import LanguageModelInput
    from langchain_core.runnables import Runnable
    from typing_extensions import Unpack

    from langchain_turntrim._options import TrimKeywords
    from langchain_turntrim._recovery import OverflowRetry

__all__ = ["TurnTrimmer"]


class TurnTrimmer(RunnableSerializable[TrimInput, list[BaseMessage]]):
    """Keep the newest whole turns that fit ``max_tokens``, plus every system message.

    Input: a ``PromptValue`` or a sequence of message-likes (anything
    ``convert_to_messages`` accepts). Output: the kept messages, the caller's
    own objects in their original order.

    Args:
        max_tokens: The budget for the whole kept list, as the counter counts
            it (per-request constants included once).

    Keyword Args:
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
            exceed ``max_tokens`` (a per-call ``max_tokens`` too). ``"auto"``:
            the level with the lowest expected cost per call, input plus
            context given up, by the prompt cache's rules (``cache_price``)
            and how fast the history grows per call (its recent calls).
        cache_size: How many per-message counts to keep (LRU), and the
            longest history remembered between calls; 0 disables both.
        cache_price: The cache rules ``"auto"`` prices with: a
            ``CachePrice``, a sequence of ``CacheRule`` rows, or None
            (``DEFAULT_CACHE_PRICE``: a trimmer does not know the model; the
            middleware matches ``CACHE_RULES`` from the model it calls).
        context_value: What a token of context given up is worth to
            ``"auto"``, in base input prices (default 1.0).

    The options are checked here (``TrimOptions``), not at the first call,
    and cannot be changed afterwards (an assignment raises ``AttributeError``):
    build a new trimmer, or make ``max_tokens`` configurable per call. Copies
    and pickles work, and start with nothing remembered.
    """

    max_tokens: int
    #: The planner ``token_counter`` resolved to (``counter`` is its counter).
    token_counter: Any = "approximate"
    on_overflow: OnOverflow = "drop"
    keep_tool_results: int = DEFAULT_KEEP_TOOL_RESULTS
    trim_to: int | Auto | None = None
    cache_size: int = DEFAULT_CACHE_SIZE
    cache_price: CachePricing = None
    context_value: float = 1.0

    model_config = ConfigDict(arbitrary_types_allowed=True)
    #: Each instance's checked options, set in ``__init__`` (see there).
    _options: ClassVar[TrimOptions]

    def __init__(
        self,
        max_tokens: int,
        *,
        name: str | None = None,
        **options: Unpack[TrimKeywords],
    ) -> None:
        checked = TrimOptions.of(type(self).__name__, max_tokens, dict(options))
        planner = planner_for(checked.token_counter, checked.cache_size)
        checked = checked.replace(token_counter=planner)
        super().__init__(name=name, **checked.keywords())
        # In the instance's __dict__ (not a pydantic private attribute, whose
        # reads go through __getattr__): every trim reads it.
        object.__setattr__(self, "_options", checked)

    @classmethod
    def for_model(
        cls,
        chat_model: Any,
        *,
        reserve_tokens: int | None = None,
        **options: Unpack[TrimKeywords],
    ) -> TurnTrimmer:
        """A trimmer sized for ``chat_model``, counting without a network call.

        The budget is ``chat_model.profile["max_input_tokens"] - reserve_tokens``;
        ``reserve_tokens=None`` (default) leaves room for the reply (see
        ``default_reserve``), 0 reserves nothing. The counter is
        ``model_counter(chat_model)``: ``TiktokenCounter`` for OpenAI chat
        models, else a ``CalibratedCounter`` that learns from reported usage.
        The other options are the constructor's; under ``trim_to="auto"``,
        ``cache_price`` defaults to ``chat_model``'s rules (``cache_price_for``).
        """
        sized = sized_options(chat_model, reserve_tokens, **options)
        if sized.trim_to == AUTO and sized.cache_price is None:
            sized = sized.replace(cache_price=cache_price_for(chat_model))
        return cls.from_options(sized)

    @classmethod
    def from_options(cls, options: TrimOptions) -> TurnTrimmer:
        """A trimmer with ``options`` (a ``TrimOptions``)."""
        keywords = options.keywords()
        return cls(keywords.pop("max_tokens"), **keywords)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CONFIGURATION:
            _refuse_change(self, name)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _CONFIGURATION:
            _refuse_change(self, name)
        super().__delattr__(name)

    @property
    def options(self) -> TrimOptions:
        """The checked options (``token_counter`` resolved to its planner)."""
        return self._options

    @property
    def planner(self) -> MessagePlanner:
        """The planner: chosen by what the counter can do, remembering histories."""
        planner: MessagePlanner = self.token_counter
        return planner

    @property
    def counter(self) -> Resolved:
        """The resolved counter (with its cache)."""
        return self.planner.counter

    def clear_cache(self) -> None:
        """Forget the remembered histories and the cached counts (after editing
        a message in place, say)."""
        self.planner.clear()

    @property
    def InputType(self) -> Any:  # noqa: N802 - Runnable's name
        return TrimInput

    @property
    def OutputType(self) -> Any:  # noqa: N802 - Runnable's name
        return list[BaseMessage]

    # -- the decision, pure ----------------------------------------------------------------

    def report(self, messages: TrimInput, *, tools: Sequence[Any] = ()) -> TrimReport[Any]:
        """What a trim of ``messages`` decides (kept, dropped and removed
        messages, every figure), without logging or tracing. ``tools`` are the
        request's tool schemas, counted once beside the messages."""
        return self.decide(to_messages(messages), tools=tools)

    def decide(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: Sequence[Any] = (),
        cache: _pipeline.CacheCall | None = None,
    ) -> TrimReport[BaseMessage]:
        """``report`` of ``BaseMessage`` objects, taken as they are (no
        conversion: an agent's state or request holds nothing else, and
        anything else is an error naming its index). ``cache``: what the call
        knows of its prompt cache (``trim_to="auto"``)."""
        with explain_bad_fields(messages):
            return _pipeline.decide(
                messages, self._options, self.token_counter, tools=tools, cache=cache
            )

    def plan(self, messages: TrimInput) -> TrimPlan:
        """The spec's plan behind ``report(messages)``: which whole turns fit."""
        return self.report(messages).plan

    def with_overflow_retry(
        self, model: Runnable[LanguageModelInput, Any], *, retries: int = DEFAULT_OVERFLOW_RETRIES
    ) -> OverflowRetry:
        """This trimmer piped into ``model``, retrying when the context overflows.

        ``trimmer.with_overflow_retry(model).invoke(history)`` trims ``history``
        and calls ``model`` with what is kept. When the provider answers that
        the context is too long (LangChain's ``ContextOverflowError``, or a
        provider's own error saying so: OpenAI's ``context_length_exceeded``,
        Anthropic's "prompt is too long: N tokens > M maximum", ...), the
        budget is tightened by the figures the provider gave (its count and
        its limit; without them, to 80%), the history trimmed again and the
        model called again, at most ``retries`` times; then the provider's
        error is raised, with the retries' figures in its ``turntrim``
        attribute. The tightened budget stays for later calls (for a
        ``CalibratedCounter``, the provider's count is fed to the calibration
        instead). No LLM call is made to shrink the history.
        """
        from langchain_turntrim._recovery import OverflowRetry  # noqa: PLC0415 - a cycle

        return OverflowRetry(trimmer=self, model=model, retries=retries)

    # -- the adapters ----------------------------------------------------------------------

    def trim_with_report(self, messages: TrimInput) -> TrimReport[Any]:
        """Trim ``messages`` and say what was dropped (and compacted); logged
        and traced like ``trim``."""
        report = self.report(messages)
        report_trim(report)
        return report

    def trim(self, messages: TrimInput) -> list[BaseMessage]:
        """The kept messages, without a run of its own.

        The trim is logged, and recorded on the run the caller is executing in,
        if any (see ``report_trim``).
        """
        return self._trim_in_run(messages)

    def _trim_in_run(
        self, value: TrimInput, run_manager: CallbackManagerForChainRun | None = None
    ) -> list[BaseMessage]:
        report = self.report(value)
        report_trim(report, run_manager)
        return report.kept

    async def _atrim_in_run(
        self, value: TrimInput, run_manager: AsyncCallbackManagerForChainRun | None = None
    ) -> list[BaseMessage]:
        if self.planner.blocking:
            # A model's counter may be a network call: keep the loop free.
            report = await run_in_executor(None, self.report, value)
        else:
            report = self.report(value)
        await areport_trim(report, run_manager)
        return report.kept

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
    (
        "max_tokens",
        "token_counter",
        "on_overflow",
        "keep_tool_results",
        "trim_to",
        "cache_size",
        "cache_price",
        "context_value",
    )
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
