"""The ``middleware`` scenario: ``TurnTrimMiddleware``'s cost per model call in an agent loop.

Both sides see the same states of agent runs (5 a sample, each on its own
fresh messages, timed on its last 20 model calls): a history that grows by the
model's replies and the tool results between calls. ``TurnTrimMiddleware`` is
timed through ``wrap_model_call`` with a handler that returns a canned reply at
once (so the figure is the hook's own work), called as ``create_agent`` calls
it: a ``ModelRequest`` carrying the model, the bound tools, the system message,
the state and the runtime, inside the model node's run context (the config and
runtime a real ``create_agent`` run hands its hooks, captured once). The
baseline is ``SummarizationMiddleware.before_model`` on the same states,
configured so that it never fires (it counts the history every call, then
returns ``None``).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool, tool

from benchmarks.conversations import OpenAIMessage, fresh_messages
from benchmarks.report import Row, Target
from benchmarks.timing import Prepare, Settings, interleave, ratio_row

__all__ = ["middleware"]

#: The model calls timed per loop: its last ones (the earlier run first, untimed).
TIMED_CALLS: Final = 20
#: Agent loops (each on its own fresh messages) timed together per sample.
LOOPS: Final = 5
#: The default middleware's budget: the agents guide's example.
DEFAULT_BUDGET: Final = 100_000
#: SummarizationMiddleware's trigger: far above any history here, so it never fires.
NEVER: Final = 10**12


@tool
def get_user_details(user_id: str) -> str:
    """Get a customer's profile: name, address, payment methods and reservations."""
    return user_id


@tool
def search_flights(origin: str, destination: str, date: str, cabin: str = "economy") -> str:
    """Search direct flights between two airports (IATA codes) on a date (YYYY-MM-DD)."""
    return origin + destination + date + cabin


@tool
def get_reservation(reservation_id: str) -> str:
    """Get a reservation's flights, passengers, baggage and payment history."""
    return reservation_id


@tool
def list_orders(user_id: str, status: str | None = None, limit: int = 10) -> str:
    """List a customer's orders, newest first, optionally only those of one status."""
    return f"{user_id}{status}{limit}"


@tool
def cancel_reservation(reservation_id: str, reason: str) -> str:
    """Cancel a reservation; the reason is one of change of plan, airline cancelled, other."""
    return reservation_id + reason


@tool
def run_query(query: str, max_rows: int = 100) -> str:
    """Run a read-only SQL query against the orders database and return rows as JSON."""
    return f"{query}{max_rows}"


#: The agent's tools, the same objects on every call (as ``create_agent`` binds them).
TOOLS: Final[list[BaseTool]] = [
    get_user_details,
    search_flights,
    get_reservation,
    list_orders,
    cancel_reservation,
    run_query,
]


@dataclass(frozen=True)
class Context:
    """What a real ``create_agent`` run hands a ``wrap_model_call`` hook."""

    config: RunnableConfig
    runtime: Any

    def run(self, call: Callable[[], object]) -> object:
        """``call`` inside the model node's run context."""
        context = contextvars.copy_context()
        context.run(var_child_runnable_config.set, self.config)
        return context.run(call)


def capture_context() -> Context:
    """One real ``create_agent`` run, whose model call records its config and runtime."""
    from langchain.agents import create_agent  # noqa: PLC0415 (needs the agents extra)
    from langchain.agents.middleware import AgentMiddleware  # noqa: PLC0415

    seen: list[Context] = []

    class Capture(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            config = var_child_runnable_config.get()  # as it is, not ensure_config()'s copy
            if config is None:
                msg = "create_agent ran its wrap_model_call hook outside a run"
                raise RuntimeError(msg)
            seen.append(Context(config, request.runtime))
            return handler(request)

    model = GenericFakeChatModel(messages=iter([AIMessage("ok")]))
    create_agent(model, middleware=[Capture()]).invoke({"messages": [("user", "hi")]})
    return seen[0]


@dataclass(frozen=True)
class Loop:
    """One agent run's model calls: the system message and each call's messages."""

    system: SystemMessage | None
    warm: list[list[BaseMessage]]
    timed: list[list[BaseMessage]]


def agent_loop(base: Sequence[OpenAIMessage], tag: str) -> Loop:
    """Fresh messages (with ids, as in an agent's state) and the history before each
    assistant message; the system prompt is the request's system message."""
    messages = fresh_messages(base, tag)
    for i, message in enumerate(messages):
        message.id = f"{tag}-{i}"
    system = messages[0] if isinstance(messages[0], SystemMessage) else None
    body = messages[1:] if system is not None else messages
    histories = [body[:k] for k, m in enumerate(body) if k and isinstance(m, AIMessage)]
    return Loop(system, histories[:-TIMED_CALLS], histories[-TIMED_CALLS:])


def turntrim_arm(base: Sequence[OpenAIMessage], context: Context) -> Prepare:
    """A fresh middleware runs the whole loop: the early calls untimed, the last timed."""
    from langchain.agents.middleware import ModelRequest, ModelResponse  # noqa: PLC0415

    from langchain_turntrim import TurnTrimMiddleware  # noqa: PLC0415 (needs the agents extra)

    reply = ModelResponse(result=[AIMessage("Done.")])
    model = GenericFakeChatModel(messages=iter([]))

    def handler(_request: Any) -> Any:
        return reply

    def requests(loop: Loop, histories: list[list[BaseMessage]]) -> list[Any]:
        return [
            ModelRequest(
                model=model,
                messages=list(history),  # type: ignore[arg-type]
                system_message=loop.system,
                tools=list(TOOLS),
                state={"messages": history},  # type: ignore[arg-type]
                runtime=context.runtime,
            )
            for history in histories
        ]

    def prepare(tag: str) -> Callable[[], object]:
        calls = []
        for i in range(LOOPS):
            loop = agent_loop(base, f"{tag}.{i}")
            wrap = TurnTrimMiddleware(max_tokens=DEFAULT_BUDGET).wrap_model_call
            for request in requests(loop, loop.warm):
                context.run(functools.partial(wrap, request, handler))
            calls += [(wrap, r) for r in requests(loop, loop.timed)]
        return lambda: context.run(lambda: [wrap(r, handler) for wrap, r in calls])

    return prepare


def summarization_arm(base: Sequence[OpenAIMessage], context: Context) -> Prepare:
    """SummarizationMiddleware.before_model on the same states; it never fires."""
    from langchain.agents.middleware import SummarizationMiddleware  # noqa: PLC0415

    def prepare(tag: str) -> Callable[[], object]:
        calls: list[tuple[Any, Any]] = []
        for i in range(LOOPS):
            loop = agent_loop(base, f"{tag}.{i}")
            fake = GenericFakeChatModel(messages=iter([AIMessage("summary")]))
            hook = SummarizationMiddleware(model=fake, trigger=("tokens", NEVER))
            calls += [(hook.before_model, {"messages": history}) for history in loop.timed]
        runtime = context.runtime
        return lambda: context.run(lambda: [before(s, runtime) for before, s in calls])

    return prepare


def middleware(settings: Settings) -> list[Row]:
    context = capture_context()
    base = settings.source.conversation(200)
    arms = {
        "turntrim": turntrim_arm(base, context),
        "summarization": summarization_arm(base, context),
    }
    times = interleave(arms, settings.repeats)
    row = ratio_row(
        f"middleware, {TIMED_CALLS} calls up to {len(base)} msgs",
        f"TurnTrimMiddleware(max_tokens={DEFAULT_BUDGET:,}).wrap_model_call / "
        "SummarizationMiddleware.before_model (never fires)",
        Target("<=", 0.6),
        times,
        "turntrim",
        "summarization",
        messages=len(base),
        timed_calls=TIMED_CALLS,
        loops_per_sample=LOOPS,
    )
    row.notes.append(_dropping(base))
    return [row]


def _dropping(base: Sequence[OpenAIMessage]) -> str:
    """How many of the timed calls drop turns (the row's premise: none)."""
    from langchain_turntrim import TurnTrimmer  # noqa: PLC0415

    loop = agent_loop(base, "plan")
    trimmer = TurnTrimmer(DEFAULT_BUDGET, on_overflow="compact")
    system = [loop.system] if loop.system is not None else []
    found = sum(
        bool(trimmer.report([*system, *history], tools=TOOLS).dropped) for history in loop.timed
    )
    return f"turns dropped at {found} of {len(loop.timed)} timed calls"
