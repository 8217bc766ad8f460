"""``TurnTrimMiddleware``: the turn-atomic trim for ``langchain.agents.create_agent``.

Needs LangChain v1: ``pip install 'langchain-turntrim[agents]'``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, cast

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langgraph.runtime import Runtime
except ImportError as error:
    _msg = (
        "TurnTrimMiddleware needs LangChain v1 agents (langchain.agents.middleware); "
        "install them with: pip install 'langchain-turntrim[agents]'"
    )
    raise ImportError(_msg) from error

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_turntrim._core import PINNED, START, TrimPlan
from langchain_turntrim._counters import (
    DEFAULT_CACHE_SIZE,
    ApproximateCounter,
    CachedCounter,
    Counter,
    WholeListCounter,
)
from langchain_turntrim._langgraph import remove_messages
from langchain_turntrim._messages import message_kinds
from langchain_turntrim._plan import plan_messages
from langchain_turntrim._runnable import (
    OnOverflow,
    TrimReport,
    TurnTrimmer,
    check_overflow,
    model_budget,
)
from langchain_turntrim._tracing import areport_trim, report_trim

__all__ = ["Mode", "TurnTrimMiddleware", "tool_tokens"]

#: ``"request"`` trims what the model sees; ``"state"`` also deletes from the state.
Mode = Literal["request", "state"]
_MODES: Final = ("request", "state")
_NAME: Final = "TurnTrimMiddleware"

Tool = BaseTool | dict[str, Any]

if TYPE_CHECKING:
    _Base = AgentMiddleware[AgentState[Any], Any, Any]
else:  # unparametrized at runtime: langchain 1.0's AgentMiddleware takes 2 parameters
    _Base = AgentMiddleware


def _tool_json(tool: Tool) -> str:
    """A tool's schema as the JSON an OpenAI-style request carries."""
    try:
        schema: Any = convert_to_openai_tool(tool)
    except (TypeError, ValueError, NotImplementedError, KeyError):  # odd provider tools
        schema = tool if isinstance(tool, dict) else {"name": getattr(tool, "name", repr(tool))}
    return json.dumps(schema, ensure_ascii=False, default=str)


def tool_tokens(counter: Counter, tools: Sequence[Tool]) -> int:
    """What the tool schemas bound to a model call cost, as ``counter`` counts.

    * The approximate counter: ``count_tokens_approximately([], tools=tools)``,
      LangChain's own estimate (the number ``SummarizationMiddleware`` and
      ``count_tokens_approximately(messages, tools=...)`` use).
    * A ``TokenCounter`` (e.g. ``TiktokenCounter``): each tool is converted with
      ``convert_to_openai_tool`` and its JSON is counted as one system message;
      the per-message constant is paid once per tool, a small over-estimate.
      Providers render tool schemas in their own formats and ChatOpenAI itself
      does not count them, so no counter is exact here.
    * A whole-list counter (a chat model, a ``list -> int`` function): those
      system messages counted as one list (its per-request constant included).
    """
    if not tools:
        return 0
    inner = counter.counter if isinstance(counter, CachedCounter) else counter
    if isinstance(inner, ApproximateCounter):
        return count_tokens_approximately([], tools=list(tools))
    schemas: list[BaseMessage] = [SystemMessage(content=_tool_json(tool)) for tool in tools]
    if isinstance(counter, WholeListCounter):
        return counter.count(schemas)
    return sum(counter.count_each(schemas))


def _system_message(request: ModelRequest[Any]) -> SystemMessage | None:
    """The request's system message (langchain < 1.1 has only ``system_prompt``)."""
    system = getattr(request, "system_message", None)
    if system is None:
        prompt = getattr(request, "system_prompt", None)
        return SystemMessage(prompt) if isinstance(prompt, str) else None
    return cast("SystemMessage", system)


def _newest_start(kinds: Sequence[int]) -> int:
    """Index of the newest user message (``len(kinds)`` if there is none)."""
    for i in range(len(kinds) - 1, -1, -1):
        if kinds[i] == START:
            return i
    return len(kinds)


class TurnTrimMiddleware(_Base):
    """Trim an agent's messages to a token budget before each model call, by whole turns.

    The system message and every system message in the history are pinned; a
    turn is a user message and everything up to the next one (the assistant's
    tool calls and their tool results included); the oldest turns are dropped
    first, so the model never sees a tool result without its call, a call
    without its results, or a history that starts mid-turn.

    Args:
        max_tokens: The budget for everything the model is sent, as the counter
            counts it: the request's system message (``create_agent``'s
            ``system_prompt``), the bound tools' schemas (see ``tool_tokens``)
            and the kept messages.
        token_counter: As for ``TurnTrimmer``: ``"approximate"``, a
            ``TokenCounter`` such as ``TiktokenCounter("gpt-4o")``, a chat model,
            or a function.
        on_overflow: ``"drop"`` sends only the system message when not even the
            newest turn fits; ``"raise"`` raises ``TurnTrimOverflowError`` (a
            ``ContextOverflowError``) instead.
        mode: ``"request"`` (default) trims only what the model sees: the
            agent's state, and its checkpoints, keep the whole history.
            ``"state"`` also deletes old turns from the state before each model
            call (``RemoveMessage`` updates from ``before_model``), so a
            long-lived thread with a checkpointer stops growing; see below.
        cache_size: How many per-message counts to keep (LRU).

    In ``"state"`` mode the deletion is planned on the state's messages
    against ``max_tokens`` alone, since ``before_model`` cannot see the system
    prompt or the tools; the request is then trimmed exactly as in
    ``"request"`` mode, so the state holds at most a turn or so more than the
    model sees. The newest turn (the one in progress) is never deleted from
    the state, even when it does not fit: ``on_overflow`` decides what the
    model call does then. Messages in an agent's state always have ids
    (``add_messages`` assigns one to each); a message without one raises
    ``ValueError`` naming its index.

    Configuration is checked here, not at the first call.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> TurnTrimMiddleware:
        # create_agent adds a before_model node for a middleware whose class
        # overrides before_model: only the state mode's classes do.
        mode = kwargs.get("mode", args[3] if len(args) > 3 else "request")
        target = _with_state_hooks(cls) if mode == "state" else cls
        return super().__new__(target)

    def __init__(
        self,
        max_tokens: int,
        token_counter: Any = "approximate",
        on_overflow: OnOverflow = "drop",
        mode: Mode = "request",
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__()
        if mode not in _MODES:
            msg = f"mode must be 'request' or 'state', got {mode!r}"
            raise ValueError(msg)
        self._trimmer = TurnTrimmer(
            max_tokens=max_tokens,
            token_counter=token_counter,
            on_overflow=on_overflow,
            cache_size=cache_size,
        )
        self._mode: Mode = mode

    @classmethod
    def for_model(
        cls,
        chat_model: Any,
        reserve_tokens: int = 0,
        *,
        on_overflow: OnOverflow = "drop",
        mode: Mode = "request",
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> TurnTrimMiddleware:
        """A middleware sized for ``chat_model``, like ``TurnTrimmer.for_model``.

        The budget is ``chat_model.profile["max_input_tokens"] - reserve_tokens``
        (reserve room for the reply); the counter is the model's exact local
        counter where one exists (``TiktokenCounter`` for OpenAI chat models),
        else the model itself.
        """
        return cls(
            max_tokens=model_budget(chat_model, reserve_tokens),
            token_counter=chat_model,
            on_overflow=on_overflow,
            mode=mode,
            cache_size=cache_size,
        )

    @property
    def name(self) -> str:
        """The class name (``"TurnTrimMiddleware"``), whatever the mode."""
        cls = type(self)
        return _NAME if cls is _StateTurnTrimMiddleware else cls.__name__

    @property
    def trimmer(self) -> TurnTrimmer:
        """The ``TurnTrimmer`` holding the budget, the counter and ``on_overflow``."""
        return self._trimmer

    @property
    def max_tokens(self) -> int:
        return self._trimmer.max_tokens

    @property
    def mode(self) -> Mode:
        return self._mode

    def __repr__(self) -> str:
        t = self._trimmer
        return (
            f"{_NAME}(max_tokens={t.max_tokens}, token_counter={t.counter!r}, "
            f"on_overflow={t.on_overflow!r}, mode={self._mode!r})"
        )

    # -- the plan ------------------------------------------------------------

    def _plan(
        self, messages: Sequence[BaseMessage], kinds: Sequence[int], reserved: int
    ) -> TrimPlan:
        """The trimmer's plan for ``messages`` with ``reserved`` tokens (the
        tools) paid once per request, so the plan reads as the whole request."""
        trimmer = self._trimmer
        return plan_messages(messages, kinds, trimmer.counter, trimmer.max_tokens, reserved)

    def trim_request(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], TrimReport]:
        """The request with its messages trimmed, and what was dropped (pure).

        The one function behind ``wrap_model_call`` and ``awrap_model_call``.
        The plan covers the whole request: the planned list is the system
        message (when there is one) followed by ``request.messages``, and the
        tools' cost (``tool_tokens``) is included in ``plan.overhead_tokens``.
        The request is returned as it is when nothing is dropped. Raises
        ``TurnTrimOverflowError`` under ``on_overflow="raise"`` when not even
        the newest turn fits.
        """
        trimmed, report, _ = self._trim(request)
        return trimmed, report

    def _trim(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], TrimReport, int]:
        system = _system_message(request)
        messages: list[BaseMessage] = list(request.messages)
        kinds = message_kinds(messages)  # errors name the index in request.messages
        if system is not None:
            messages, kinds = [system, *messages], [PINNED, *kinds]
        tools = tool_tokens(self._trimmer.counter, request.tools)
        plan = self._plan(messages, kinds, tools)
        check_overflow(plan, self._trimmer.on_overflow)
        kept = plan.select(messages)
        report = TrimReport(kept=kept, dropped=[messages[i] for i in plan.dropped], plan=plan)
        if not report.dropped:
            return request, report, tools
        if system is not None:
            kept = kept[1:]
        return request.override(messages=cast("list[AnyMessage]", kept)), report, tools

    def state_update(self, messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
        """The state mode's ``before_model`` update (pure).

        ``{"messages": [RemoveMessage(id=...), ...]}`` deleting the messages a
        trim of ``messages`` to ``max_tokens`` drops, except those of the
        newest turn; ``None`` when there is nothing to delete.
        """
        update, _ = self._state_update(messages)
        return update

    def _state_update(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[dict[str, Any] | None, TrimPlan]:
        if not isinstance(messages, Sequence):
            msg = f"state messages must be a sequence of messages, got {type(messages).__name__}"
            raise TypeError(msg)
        kinds = message_kinds(messages)
        plan = self._plan(messages, kinds, 0)
        newest = _newest_start(kinds)
        doomed = [(i, messages[i]) for i in plan.dropped if i < newest]
        return ({"messages": remove_messages(doomed)} if doomed else None), plan

    # -- the hooks -----------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Trim the request's messages (``trim_request``), then call the model."""
        trimmed, report, tools = self._trim(request)
        report_trim(report.plan, extra=_request_extra(request, report, tools))
        return handler(trimmed)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """``wrap_model_call`` for async agents (a model's counter runs in a thread)."""
        if isinstance(self._trimmer.counter, WholeListCounter):
            trimmed, report, tools = await run_in_executor(None, self._trim, request)
        else:
            trimmed, report, tools = self._trim(request)
        await areport_trim(report.plan, extra=_request_extra(request, report, tools))
        return await handler(trimmed)


class _StateTurnTrimMiddleware(TurnTrimMiddleware):
    """``TurnTrimMiddleware(mode="state")``: adds the ``before_model`` hooks."""

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Delete the turns that no longer fit from the state (see the class docs)."""
        update, plan = self._state_update(state["messages"])
        report_trim(plan, extra=_state_extra(update))
        return update

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``before_model`` for async agents."""
        messages = state["messages"]
        if isinstance(self._trimmer.counter, WholeListCounter):
            update, plan = await run_in_executor(None, self._state_update, messages)
        else:
            update, plan = self._state_update(messages)
        await areport_trim(plan, extra=_state_extra(update))
        return update


_STATE_CLASSES: dict[type[TurnTrimMiddleware], type[TurnTrimMiddleware]] = {}


def _with_state_hooks(cls: type[TurnTrimMiddleware]) -> type[TurnTrimMiddleware]:
    """``cls`` with the state mode's hooks (a subclass's own overrides win)."""
    if cls is TurnTrimMiddleware:
        return _StateTurnTrimMiddleware
    if issubclass(cls, _StateTurnTrimMiddleware):
        return cls
    known = _STATE_CLASSES.get(cls)
    if known is None:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        made = type(cls.__name__, (cls, _StateTurnTrimMiddleware), namespace)
        known = _STATE_CLASSES.setdefault(cls, made)
    return known


def _request_extra(request: ModelRequest[Any], report: TrimReport, tools: int) -> dict[str, Any]:
    before = len(request.messages)
    return {
        "mode": "request",
        "messages_before": before,
        "messages_after": before - len(report.dropped),
        "tool_tokens": tools,
    }


def _state_extra(update: dict[str, Any] | None) -> dict[str, Any]:
    return {"mode": "state", "removed_from_state": len(update["messages"]) if update else 0}
