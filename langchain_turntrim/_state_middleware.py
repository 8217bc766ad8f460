"""``TurnTrimStateMiddleware``: ``TurnTrimMiddleware`` that also deletes old
turns from the agent's state (a ``before_model`` node).

Needs LangChain v1 (``langchain.agents``), as ``_middleware`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.messages import BaseMessage
from langchain_core.runnables.config import run_in_executor

from langchain_turntrim._cache_timing import thread_id
from langchain_turntrim._langgraph import removals

# Before any LangChain agents import: without them, its ImportError says what to install.
from langchain_turntrim._middleware import TurnTrimMiddleware
from langchain_turntrim._options import Mode
from langchain_turntrim._pipeline import CacheCall
from langchain_turntrim._report import TrimReport
from langchain_turntrim._tracing import areport_trim, report_trim

if TYPE_CHECKING:  # the hooks' annotations
    from langchain.agents.middleware import AgentState
    from langgraph.runtime import Runtime

__all__ = ["TurnTrimStateMiddleware"]


class TurnTrimStateMiddleware(TurnTrimMiddleware):
    """``TurnTrimMiddleware`` that also deletes old turns from the agent's state.

    Before each model call (a ``before_model`` node), the turns that no longer
    fit are removed from the state with ``RemoveMessage`` updates, so a
    long-lived thread with a checkpointer stops growing; the request is then
    trimmed exactly as ``TurnTrimMiddleware`` does. Same arguments.

    The deletion is decided on the state's messages against ``max_tokens``
    alone, since ``before_model`` cannot see the system prompt or the tools;
    the state holds at most a turn or so more than the model sees. Nothing is
    deleted while every turn fits; messages before the first user message
    (a greeting) go only together with the first dropped turn; the newest
    turn (the one in progress) is never deleted, even when it does not fit:
    ``on_overflow`` decides what the model call does then. Messages in an
    agent's state always have ids (``add_messages`` assigns one to each); a
    message without one raises ``ValueError`` naming its index.
    """

    #: What this class trims: the model request, and the state.
    mode: ClassVar[Mode] = "state"

    def state_update(self, messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
        """The ``before_model`` update (pure).

        ``{"messages": [RemoveMessage(id=...), ...]}`` deleting what a trim of
        ``messages`` to ``max_tokens`` removes (``TrimReport.removed``);
        ``None`` when there is nothing to delete.
        """
        update, _ = self._state_update(messages)
        return update

    def _state_update(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[dict[str, Any] | None, TrimReport[Any]]:
        if not isinstance(messages, Sequence):
            msg = f"state messages must be a sequence of messages, got {type(messages).__name__}"
            raise TypeError(msg)
        cache = None
        if self._timed:  # never delete what the thread's previous cut keeps
            thread = self._clock.thread(thread_id())
            price = thread.price or self._trimmer.options.price_for()
            cache = CacheCall(price, floor=self._clock.floor(thread, messages))
        report = self._trimmer.decide(messages, cache=cache)
        removed = removals(report)
        return ({"messages": removed} if removed else None), report

    def before_model(
        self,
        state: AgentState[Any],
        runtime: Runtime[Any],  # noqa: ARG002 - LangChain's hook signature
    ) -> dict[str, Any] | None:
        """Delete the turns that no longer fit from the state (see the class docs)."""
        update, report = self._state_update(state["messages"])
        report_trim(report, extra=_state_extra(update))
        return update

    async def abefore_model(
        self,
        state: AgentState[Any],
        runtime: Runtime[Any],  # noqa: ARG002 - LangChain's hook signature
    ) -> dict[str, Any] | None:
        """``before_model`` for async agents."""
        messages = state["messages"]
        if self._trimmer.planner.blocking:
            update, report = await run_in_executor(None, self._state_update, messages)
        else:
            update, report = self._state_update(messages)
        await areport_trim(report, extra=_state_extra(update))
        return update


def _state_extra(update: dict[str, Any] | None) -> dict[str, Any]:
    return {"mode": "state", "removed_from_state": len(update["messages"]) if update else 0}
