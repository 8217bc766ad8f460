"""The trim around every model call of ``langchain.agents.create_agent`` (needs
LangChain v1: ``pip install 'langchain-turntrim[agents]'``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, cast
from weakref import WeakKeyDictionary

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
except ImportError as error:
    _msg = "TurnTrimMiddleware needs LangChain v1: pip install 'langchain-turntrim[agents]'"
    raise ImportError(_msg) from error

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables.config import ensure_config
from langgraph.types import Command

from langchain_turntrim._anatomy import check, to_messages
from langchain_turntrim._counting import LRU
from langchain_turntrim._langgraph import removals
from langchain_turntrim._options import TrimOptions, model_counter, model_window
from langchain_turntrim._recovery import Attempts, Recovery, Try, calibrate
from langchain_turntrim._report import TrimReport
from langchain_turntrim._trimmer import TurnTrimmer
from langchain_turntrim.cache_pricing import CachePrice, CacheTotals, request_ttl
from langchain_turntrim.cache_pricing._clock import CacheClock
from langchain_turntrim.cache_pricing._depth import CacheCall

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["TurnTrimMiddleware", "TurnTrimStateMiddleware"]


def _planned(request: ModelRequest) -> list[BaseMessage]:
    """What the request sends: its system message, then its messages."""
    system = request.system_message
    return [system, *request.messages] if system is not None else list(request.messages)


class TurnTrimMiddleware(AgentMiddleware):
    """Trim what each model call is sent to a token budget, by whole turns.

    The request's system message and every system message in the history are
    pinned; a turn is a user message and everything up to the next one (the
    assistant's tool calls and their results included); the oldest turns go
    first. Only what the model is sent is trimmed: the agent's state and
    checkpoints keep every message (``TurnTrimStateMiddleware`` also deletes the
    dropped turns). When the provider still answers that the context is too
    long, the call is trimmed tighter and made again (``overflow_retries``).

    Args:
        max_tokens: The budget for everything the model is sent: the system
            message, the bound tools' schemas and the kept messages.

    Keyword Args:
        **options: ``token_counter``, ``on_overflow``, ``keep_tool_results``,
            ``trim_to``, ``cache_size``, ``cache_price``, ``context_value``,
            ``overflow_retries``: as for ``TurnTrimmer`` (``TrimOptions``);
            ``on_overflow`` defaults to ``"compact"`` here: an agent works
            inside one long turn, which is compacted for the call.
    """

    def __init__(self, max_tokens: int, **options: Any) -> None:
        super().__init__()
        options.setdefault("on_overflow", "compact")
        checked = TrimOptions.of(type(self).__name__, max_tokens=max_tokens, **options)
        self._trimmer = TurnTrimmer.from_options(checked)
        #: What ``for_model`` sized this middleware for, and how.
        self._model: object = None
        self._reserve: int | None = None
        #: The trimmers of the other models calls were routed to (the 8 newest).
        self._sized: LRU[tuple[object, TurnTrimmer]] = LRU(8)
        #: What each trimmer's calls learned from overflows, while it is in use.
        self._recovery: WeakKeyDictionary[TurnTrimmer, Recovery] = WeakKeyDictionary()
        self._clock = CacheClock()

    @classmethod
    def for_model(
        cls, chat_model: Any, *, reserve_tokens: int | None = None, **options: Any
    ) -> Self:
        """A middleware sized for ``chat_model`` like ``TurnTrimmer.for_model``. A
        call routed to another model (dynamic model selection, a fallback) is
        sized for that one: its profile and its own counter (8 such models kept)."""
        options.setdefault("on_overflow", "compact")
        sized = TrimOptions.for_model(cls.__name__, chat_model, reserve_tokens, **options)
        return cast("Self", _rebuilt(cls, sized, chat_model, reserve_tokens))

    @property
    def trimmer(self) -> TurnTrimmer:
        """The ``TurnTrimmer`` holding the options and the counter."""
        return self._trimmer

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._trimmer.options.arguments(on_overflow='compact')})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self._trimmer.options, self._model, self._reserve))

    def cache_totals(self, thread_id: Hashable = None) -> CacheTotals:
        """What the prompt cache did for thread ``thread_id`` (None: calls made
        without one), for the 1,024 most recent threads."""
        return self._clock.totals(thread_id)

    def trimmer_for(self, model: object) -> TurnTrimmer:
        """The trimmer a call of ``model`` is sized with."""
        if self._model is None or model is None or model is self._model:
            return self._trimmer
        found = self._sized.get(id(model))  # the entry holds the model: its id is not reused
        if found is None:
            current, window = self._trimmer.options, model_window(model)
            if window is None or (self._reserve or 0) > window:  # no profile, or no room in it:
                sized = current.replace(token_counter=model_counter(model))  # this budget
            else:  # its own budget and counter; trim_to no higher than that budget
                options = {f.name: getattr(current, f.name) for f in dataclasses.fields(current)}
                del options["max_tokens"], options["token_counter"], options["trim_to"]
                sized = TrimOptions.for_model(type(self).__name__, model, self._reserve, **options)
                sized = sized.replace(trim_to=current.trim_to)
            found = (model, TurnTrimmer.from_options(sized))
            self._sized.put_many([(id(model), found)])
        return found[1]

    def trim_request(self, request: ModelRequest) -> tuple[ModelRequest, TrimReport[Any]]:
        """The request with its messages trimmed, and what was decided (pure)."""
        trimmer = self.trimmer_for(getattr(request, "model", None))
        return _trim(request, trimmer, trimmer.max_tokens, CacheCall(self._price(request)))

    def _price(self, request: ModelRequest) -> CachePrice:
        """The cache rules of the request's model, at the TTL its settings ask for."""
        model = getattr(request, "model", None) or self._model
        ttl = request_ttl(getattr(request, "model_settings", None))
        return self.trimmer_for(model).options.price_for(model, ttl)

    def _start(self, request: ModelRequest) -> tuple[_Call, Attempts]:
        """This call (its trimmer and what it knows of its cache), and its attempts."""
        trimmer = self.trimmer_for(getattr(request, "model", None))
        recovery = self._recovery.setdefault(trimmer, Recovery())
        thread = self._clock.thread(_thread_id(request))
        cache = self._clock.call(thread, self._price(request), _planned(request))
        return _Call(request, trimmer, thread, cache), Attempts(trimmer, recovery)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        """Trim the request and call the model; retry tighter on overflow (``overflow_retries``)."""
        call, attempt = self._start(request)
        return self._answered(call, *attempt.run(call.decide, handler))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        """``wrap_model_call`` for async agents (a counter that may block runs in a thread)."""
        call, attempt = self._start(request)
        return self._answered(call, *await attempt.arun(call.decide, handler))

    def _answered(self, call: _Call, tried: Try, response: Any) -> Any:
        """After the call: the reply's usage to a ``CalibratedCounter`` and the cache figures."""
        usage = calibrate(call.trimmer.counter, tried, getattr(response, "result", None) or [])
        self._clock.observe(call.thread, call.cache, tried.report, _planned(call.request), usage)
        return response


@dataclasses.dataclass(frozen=True)
class _Call:
    """One model call: its request, trimmer and cache context."""

    request: ModelRequest
    trimmer: TurnTrimmer
    thread: Any
    cache: CacheCall

    def decide(self, budget: int) -> Try:
        sent, report = _trim(self.request, self.trimmer, budget, self.cache)
        return Try(sent, report, sent.tools, {"tool_tokens": report.tool_tokens})


class TurnTrimStateMiddleware(TurnTrimMiddleware):
    """``TurnTrimMiddleware`` that also deletes the dropped turns from the state.

    After each model call, what its trim left out of the request (whole older
    turns: ``TrimReport.removed``) is removed from the agent's state with
    ``RemoveMessage`` updates, so a long-lived thread with a checkpointer stops
    growing. The deletion is the request's own decision (its system prompt and
    tools counted); the newest turn is never deleted.

    Args:
        max_tokens: As for ``TurnTrimMiddleware``.

    Keyword Args:
        **options: ``token_counter``, ``on_overflow``, ``keep_tool_results``,
            ``trim_to``, ``cache_size``, ``cache_price``, ``context_value``,
            ``overflow_retries``: as for ``TurnTrimMiddleware``.
    """

    def _answered(self, call: _Call, tried: Try, response: Any) -> Any:
        response = super()._answered(call, tried, response)
        removed = removals(tried.report)
        if not removed:
            return response
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"messages": removed})
        )


def _trim(
    request: ModelRequest, trimmer: TurnTrimmer, budget: int, cache: CacheCall
) -> tuple[ModelRequest, TrimReport[Any]]:
    planned = _planned(request)
    try:
        report = trimmer.report(planned, tools=request.tools, max_tokens=budget, cache=cache)
    except (TypeError, ValueError):
        for i, message in enumerate(to_messages(request.messages)):  # named where it is
            check(i, message)
        if request.system_message is not None:
            try:
                check(0, request.system_message)
            except (TypeError, ValueError) as bad:
                text = str(bad).replace("messages[0]", "system_message", 1)
                raise type(bad)(text) from None
        raise
    if not report.changed:
        return request, report
    kept = report.kept[1:] if request.system_message is not None else report.kept
    return request.override(messages=cast("list[AnyMessage]", kept)), report


def _rebuilt(
    cls: type[TurnTrimMiddleware], options: TrimOptions, model: object, reserve: int | None
) -> TurnTrimMiddleware:
    """A copy or an unpickled middleware: the same options, nothing remembered."""
    middleware = cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(options)})
    middleware._model, middleware._reserve = model, reserve
    return middleware


def _thread_id(request: ModelRequest) -> Hashable:
    """The ``thread_id`` of the agent run the request is made in (None outside
    one): its runtime's, which async hooks have on Python 3.10 too, else the
    run's config."""
    info = getattr(getattr(request, "runtime", None), "execution_info", None)
    thread: Hashable = getattr(info, "thread_id", None)
    return thread if thread is not None else ensure_config()["configurable"].get("thread_id")
