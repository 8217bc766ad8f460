"""``TurnTrimMiddleware``: the turn-atomic trim for ``langchain.agents.create_agent``.

Needs LangChain v1: ``pip install 'langchain-turntrim[agents]'`` (from a
checkout: ``pip install -e '.[agents]'``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, cast

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
except ImportError as error:
    _msg = (
        "TurnTrimMiddleware needs LangChain v1 agents (langchain.agents.middleware); "
        "install them with: pip install 'langchain-turntrim[agents]' (from a checkout: "
        "pip install -e '.[agents]'; from a wheel: pip install 'FILE.whl[agents]')"
    )
    raise ImportError(_msg) from error

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables.config import run_in_executor

from langchain_turntrim._cache_rules import request_ttl
from langchain_turntrim._cache_timing import (
    CacheClock,
    CacheTotals,
    Call,
    check_clock,
    thread_id,
)
from langchain_turntrim._core.depth import CachePrice
from langchain_turntrim._counting import CalibratedCounter
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._messages import check_message_errors
from langchain_turntrim._options import AGENT_ON_OVERFLOW, AUTO, Mode, TrimOptions
from langchain_turntrim._overflow import DEFAULT_OVERFLOW_RETRIES
from langchain_turntrim._pipeline import CacheCall
from langchain_turntrim._recovery import Recovering, Retrying, check_retries
from langchain_turntrim._report import TrimReport
from langchain_turntrim._safe_repr import safe_repr
from langchain_turntrim._sizing import model_budget, model_counter, sized_options
from langchain_turntrim._tracing import areport_cache, areport_trim, report_cache, report_trim
from langchain_turntrim._trimmer import TurnTrimmer
from langchain_turntrim._usage import cache_usage

__all__ = ["TurnTrimMiddleware"]

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

    from langchain_turntrim._options import TrimKeywords

    _Base = AgentMiddleware[AgentState[Any], Any, Any]
else:  # unparametrized at runtime: langchain 1.0's AgentMiddleware takes 2 parameters
    _Base = AgentMiddleware


def _system_message(request: ModelRequest[Any]) -> SystemMessage | None:
    """The request's system message (langchain < 1.1 has only ``system_prompt``)."""
    system = getattr(request, "system_message", None)
    if system is None:
        prompt = getattr(request, "system_prompt", None)
        return SystemMessage(prompt) if isinstance(prompt, str) else None
    return cast("SystemMessage", system)


class TurnTrimMiddleware(_Base):
    """Trim an agent's messages to a token budget before each model call, by whole turns.

    The system message and every system message in the history are pinned; a
    turn is a user message and everything up to the next one (the assistant's
    tool calls and their tool results included); the oldest turns are dropped
    first, so the model never sees a tool result without its call, a call
    without its results, or a history that starts mid-turn.

    Only what the model is sent is trimmed: the agent's state, and its
    checkpoints, keep the whole history (``TurnTrimStateMiddleware`` also
    deletes old turns from the state). This class adds no graph node.

    Args:
        max_tokens: The budget for everything the model is sent, as the counter
            counts it: the request's system message (``create_agent``'s
            ``system_prompt``), the bound tools' schemas and the kept messages.

    Keyword Args:
        token_counter: As for ``TurnTrimmer``: ``"approximate"``,
            ``"tiktoken:MODEL"``, a ``TokenCounter`` such as
            ``TiktokenCounter("gpt-4o")``, a chat model, or a function.
        on_overflow: When not even the newest turn fits: ``"compact"`` (the
            default: an agent works inside one long turn) drops every older
            turn and compacts the newest one until it fits (see
            ``TurnTrimmer``); ``"drop"`` sends only the system message;
            ``"raise"`` raises ``TurnTrimOverflowError`` (a
            ``ContextOverflowError``). Compaction changes only what the model
            is sent: the state keeps every message as it was.
        keep_tool_results: Under ``"compact"``, how many of the newest tool
            results are never cleared.
        trim_to: Cut down to about this many tokens at a boundary that the next
            model calls keep (prompt-cache friendly; see ``TurnTrimmer``).
        cache_size: How many per-message counts to keep (LRU), and the longest
            history remembered between calls.

    The options are checked here, not at the first call.
    """

    #: What this class trims: only the model request.
    mode: ClassVar[Mode] = "request"

    def __init__(
        self,
        max_tokens: int,
        *,
        overflow_retries: int = DEFAULT_OVERFLOW_RETRIES,
        time_to_cache: bool = True,
        clock: Callable[[], float] = time.monotonic,
        **options: Unpack[TrimKeywords],
    ) -> None:
        super().__init__()
        keywords: dict[str, Any] = {"on_overflow": AGENT_ON_OVERFLOW, **options}
        checked = TrimOptions.of(type(self).__name__, max_tokens, keywords)
        self._overflow_retries = check_retries(overflow_retries, type(self).__name__)
        if not isinstance(time_to_cache, bool):
            msg = f"time_to_cache must be a bool, got {type(time_to_cache).__name__}"
            raise TypeError(msg)
        check_clock(clock)
        self._timed = time_to_cache and checked.trim_to == AUTO
        self._clock = CacheClock(clock)
        #: (id(model), ttl) -> (model, its cache rules).
        self._prices: LRU[tuple[object, CachePrice]] = LRU(_Sizing.MODELS * 2)
        self._trimmer = TurnTrimmer.from_options(checked)
        self._sizing: _Sizing | None = None
        #: id(trimmer) -> (trimmer, what its calls learned from overflows).
        self._recovering: LRU[tuple[TurnTrimmer, Recovering]] = LRU(_Sizing.MODELS + 1)

    @classmethod
    def for_model(
        cls,
        chat_model: Any,
        *,
        reserve_tokens: int | None = None,
        overflow_retries: int = DEFAULT_OVERFLOW_RETRIES,
        time_to_cache: bool = True,
        clock: Callable[[], float] = time.monotonic,
        **options: Unpack[TrimKeywords],
    ) -> Self:
        """A middleware sized for ``chat_model``, like ``TurnTrimmer.for_model``.

        The budget is ``chat_model.profile["max_input_tokens"] - reserve_tokens``
        (``None``, the default, leaves room for the reply: ``default_reserve``);
        the counter is ``model_counter(chat_model)``: ``TiktokenCounter`` for
        OpenAI chat models, else a ``CalibratedCounter``, which the middleware
        feeds with the input tokens each model call reports.

        When another middleware changes ``request.model`` (dynamic model
        selection, a fallback), the call is sized for the model actually
        called: its own budget (its profile, the same ``reserve_tokens`` rule;
        this model's budget when it has no profile) and its own counter, kept
        for the next calls (one calibration per model; the 8 most recent models).
        """
        options.setdefault("on_overflow", AGENT_ON_OVERFLOW)
        sized = sized_options(chat_model, reserve_tokens, **options)
        keywords = sized.keywords()
        middleware = cls(
            keywords.pop("max_tokens"),
            overflow_retries=overflow_retries,
            time_to_cache=time_to_cache,
            clock=clock,
            **keywords,
        )
        middleware._sizing = _Sizing(chat_model, reserve_tokens)
        return middleware

    @property
    def trimmer(self) -> TurnTrimmer:
        """The ``TurnTrimmer`` holding the options, the counter and its planner."""
        return self._trimmer

    @property
    def max_tokens(self) -> int:
        return self._trimmer.max_tokens

    @property
    def overflow_retries(self) -> int:
        """How many times a model call is retried, trimmed tighter, after the
        provider answered that the context is too long."""
        return self._overflow_retries

    def cache_totals(self, thread_id: Hashable = None) -> CacheTotals:
        """The running totals of what the prompt cache did for thread
        ``thread_id`` (the run's ``configurable["thread_id"]``; None: calls
        made without one), for the 1,024 most recent threads."""
        return self._clock.totals(thread_id)

    def __repr__(self) -> str:
        t = self._trimmer
        return (
            f"{type(self).__name__}(max_tokens={t.max_tokens}, "
            f"token_counter={safe_repr(t.counter)}, "
            f"on_overflow={t.on_overflow!r})"
        )

    def trim_request(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], TrimReport[Any]]:
        """The request with its messages trimmed, and what was decided (pure).

        The one function behind ``wrap_model_call`` and ``awrap_model_call``.
        The decision covers the whole request: the planned list is the system
        message (when there is one) followed by ``request.messages``, sent
        with ``request.tools``. The request is returned as it is when nothing
        is dropped or compacted. Raises ``TurnTrimOverflowError`` under
        ``on_overflow="raise"`` when not even the newest turn fits (under
        ``"compact"``: when not even its skeleton does).
        """
        trimmer = self.trimmer_for(getattr(request, "model", None))
        return self._trim(request, trimmer, self._call(request))

    def _call(self, request: ModelRequest[Any]) -> Call:
        """This model call's cache context: its thread and the cache's rules."""
        model = getattr(request, "model", None)
        ttl = request_ttl(getattr(request, "model_settings", None))
        key = (id(model), ttl)
        found = self._prices.get(key)
        if found is None or found[0] is not model:
            found = (model, self._trimmer.options.price_for(model, ttl))
            self._prices.put_many(((key, found),))
        return Call(self._clock.thread(thread_id()), found[1])

    def _answered(
        self,
        attempt: Retrying,
        call: Call,
        report: TrimReport[Any],
        trimmed: ModelRequest[Any],
        response: Any,
    ) -> Callable[[], dict[str, Any]]:
        """After a model call: its reply's usage, read once, fed to a
        ``CalibratedCounter`` and to the thread's cache figures; the builder
        of those figures, for the trace."""
        result = getattr(response, "result", None)
        usage = cache_usage(result) if isinstance(result, list) else None
        counter = attempt.trimmer.counter
        if usage is not None and isinstance(counter, CalibratedCounter):
            counter.observe(_sent(trimmed), usage[0], tools=trimmed.tools)
        figures = self._clock.observe(
            call.thread, CacheCall(call.price), report, call.planned, usage, cold=call.cold
        )
        return figures.summary

    def trimmer_for(self, model: object) -> TurnTrimmer:
        """The trimmer a call of ``model`` is sized with: ``trimmer``, unless
        this middleware was built by ``for_model`` for another model."""
        sizing = self._sizing
        if sizing is None or model is sizing.model or model is None:
            return self._trimmer
        return sizing.trimmer_for(model, self._trimmer.options)

    def _attempts(self, request: ModelRequest[Any]) -> Retrying:
        """The attempts of this model call, on the trimmer sized for its model."""
        trimmer = self.trimmer_for(getattr(request, "model", None))
        entry = self._recovering.get(id(trimmer))
        if entry is None or entry[0] is not trimmer:
            entry = (trimmer, Recovering(trimmer))
            self._recovering.put_many(((id(trimmer), entry),))
        return Retrying(entry[1], self._overflow_retries)

    def _trim(
        self, request: ModelRequest[Any], trimmer: TurnTrimmer, call: Call | None = None
    ) -> tuple[ModelRequest[Any], TrimReport[Any]]:
        system = _system_message(request)
        messages: list[BaseMessage] = list(request.messages)
        planned = messages if system is None else [system, *messages]
        cache = None
        if call is not None:
            call.planned = planned
            cache, call.cold = self._clock.call(call.thread, call.price, planned, timed=self._timed)
        try:
            report = trimmer.decide(planned, tools=request.tools, cache=cache)
        except (TypeError, ValueError):
            check_message_errors(messages)
            raise
        if not report.changed:
            return request, report
        kept = report.kept[1:] if system is not None else report.kept
        return request.override(messages=cast("list[AnyMessage]", kept)), report

    # -- the hooks -----------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Trim the request's messages (``trim_request``), then call the model;
        after a context-overflow error, trim tighter and call again (at most
        ``overflow_retries`` times)."""
        attempt = self._attempts(request)
        call = self._call(request)
        while True:
            trimmed, report = attempt.decide(partial(self._trim, request, call=call))
            # None: no log line, no handler (nobody will read the cache figures either).
            seen = report_trim(report, extra=_request_extra(request, report, attempt))
            try:
                response = handler(trimmed)
            except Exception as error:
                if attempt.overflowed(error, report, _sent(trimmed), trimmed.tools):
                    continue
                raise
            figures = self._answered(attempt, call, report, trimmed, response)
            if seen is not None:
                report_cache(figures)
            return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """``wrap_model_call`` for async agents (a model's counter runs in a thread)."""
        attempt = self._attempts(request)
        call = self._call(request)
        while True:
            trim = partial(self._trim, request, call=call)
            if attempt.trimmer.planner.blocking:
                trimmed, report = await run_in_executor(None, attempt.decide, trim)
            else:
                trimmed, report = attempt.decide(trim)
            seen = await areport_trim(report, extra=_request_extra(request, report, attempt))
            try:
                response = await handler(trimmed)
            except Exception as error:
                if attempt.overflowed(error, report, _sent(trimmed), trimmed.tools):
                    continue
                raise
            figures = self._answered(attempt, call, report, trimmed, response)
            if seen is not None:
                await areport_cache(figures)
            return response


def _sent(request: ModelRequest[Any]) -> list[BaseMessage]:
    """The messages of ``request`` as sent: its system message first."""
    system = _system_message(request)
    return [system, *request.messages] if system is not None else list(request.messages)


class _Sizing:
    """What ``for_model`` sized a middleware from, and the trimmers of the
    other models its calls were routed to (the most recent ``MODELS``)."""

    MODELS: ClassVar[int] = 8

    def __init__(self, model: object, reserve_tokens: int | None) -> None:
        self.model = model
        self.reserve_tokens = reserve_tokens
        #: id(model) -> (model, its trimmer): the model is held, so its id is not reused.
        self._trimmers: LRU[tuple[object, TurnTrimmer]] = LRU(self.MODELS)

    def trimmer_for(self, model: object, home: TrimOptions) -> TurnTrimmer:
        entry = self._trimmers.get(id(model))
        if entry is not None and entry[0] is model:
            return entry[1]
        try:
            budget = model_budget(model, self.reserve_tokens)
        except ValueError:  # no profile (or a window smaller than the reserve)
            budget = home.max_tokens
        options = home.with_budget(budget, token_counter=model_counter(model))
        trimmer = TurnTrimmer.from_options(options)
        entry = self._trimmers.get(id(model))
        if entry is None or entry[0] is not model:  # else another thread was first
            entry = (model, trimmer)
            self._trimmers.put_many(((id(model), entry),))
        return entry[1]


def _request_extra(
    request: ModelRequest[Any], report: TrimReport[Any], attempt: Retrying
) -> dict[str, Any]:
    return {
        "mode": "request",
        "messages_before": len(request.messages),
        "messages_after": len(request.messages) - (report.plan.size - len(report.kept)),
        "tool_tokens": report.tool_tokens,
        **attempt.extra(),
    }
