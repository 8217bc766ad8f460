"""The ``middleware`` scenario: TurnTrimMiddleware's cost per model call in an agent loop.

Both sides see the same states of one agent run: a history that grows by the
model's replies and the tool results between calls. ``TurnTrimMiddleware`` is
timed through ``wrap_model_call`` with a handler that returns a canned reply at
once (so the figure is the hook's own work), called as ``create_agent`` calls
it: a ``ModelRequest`` carrying the model, the bound tools, the system message,
the state and the runtime, inside the model node's run context (the config and
runtime a real ``create_agent`` run hands its hooks, captured once). The
baseline is ``SummarizationMiddleware.before_model`` on the same states,
configured so that it never fires (it counts the history every call, then
returns ``None``); the exact middleware's floor is ``counted_arm``: check
what the earlier calls sent, tokenize what is new.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool, tool
from pydantic import SecretStr

from benchmarks.conversations import OpenAIMessage, fresh_messages
from benchmarks.encoding import EXACT_MODEL
from benchmarks.floors import Remembered, full_count
from benchmarks.report import Row, Target, seconds_summary
from benchmarks.scenarios import Settings, exact_encode
from benchmarks.timing import Prepare, Times, interleave, median_ratio

__all__ = ["TIMED_CALLS", "middleware"]

#: The model calls timed per sample: the last ones of the loop, on histories
#: just under the scenario's size (the earlier calls run first, untimed).
TIMED_CALLS: Final = 20
#: The default-counter middleware's budget: the agents guide's example.
DEFAULT_BUDGET: Final = 100_000
#: SummarizationMiddleware's trigger: far above any history here, so it never fires.
NEVER: Final = 10**12
#: The default middleware against SummarizationMiddleware.before_model.
TARGET: Final = Target("<=", 0.4)
#: The exact middleware against its counted floor.
FLOOR_TARGET: Final = Target("<=", 1.3)


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
    from langchain_core.language_models.fake_chat_models import (  # noqa: PLC0415
        GenericFakeChatModel,
    )

    seen: list[Context] = []

    class Capture(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            # The context variable as it is, not ensure_config()'s merged copy.
            config = var_child_runnable_config.get()
            if config is None:
                msg = "create_agent ran its wrap_model_call hook outside a run"
                raise RuntimeError(msg)
            seen.append(Context(config, request.runtime))
            return handler(request)

    model = GenericFakeChatModel(messages=iter([AIMessage("ok")]))
    agent = create_agent(model, middleware=[Capture()])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
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
    steps = [k for k, m in enumerate(body) if k and isinstance(m, AIMessage)]
    histories = [body[:k] for k in steps]
    return Loop(system, histories[:-TIMED_CALLS], histories[-TIMED_CALLS:])


def turntrim_arm(
    make: Callable[[], Any], base: Sequence[OpenAIMessage], context: Context, model: Any
) -> Prepare:
    """A fresh middleware runs the whole loop: the early calls untimed, the last timed."""
    from langchain.agents.middleware import ModelRequest, ModelResponse  # noqa: PLC0415

    reply = ModelResponse(result=[AIMessage("Done.")])

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
        loop = agent_loop(base, tag)
        middleware = make()
        calls = requests(loop, loop.timed)
        warm = requests(loop, loop.warm)
        context.run(lambda: [middleware.wrap_model_call(r, handler) for r in warm])
        return lambda: context.run(lambda: [middleware.wrap_model_call(r, handler) for r in calls])

    return prepare


def summarization_arm(base: Sequence[OpenAIMessage], context: Context) -> Prepare:
    """SummarizationMiddleware.before_model on the same states; it never fires."""
    from langchain.agents.middleware import SummarizationMiddleware  # noqa: PLC0415
    from langchain_core.language_models.fake_chat_models import (  # noqa: PLC0415
        GenericFakeChatModel,
    )

    def prepare(tag: str) -> Callable[[], object]:
        loop = agent_loop(base, tag)
        fake = GenericFakeChatModel(messages=iter([AIMessage("summary")]))
        middleware = SummarizationMiddleware(model=fake, trigger=("tokens", NEVER))
        states = [{"messages": history} for history in loop.timed]
        runtime = context.runtime

        def run() -> object:
            return [middleware.before_model(state, runtime) for state in states]  # type: ignore[arg-type]

        return lambda: context.run(run)

    return prepare


def counted_arm(base: Sequence[OpenAIMessage]) -> Prepare:
    """The exact middleware's floor on the same timed calls: before each, check
    every message the earlier calls sent (``Remembered.unchanged``), then
    ``full_count`` the messages new since the previous call."""
    count = functools.partial(full_count, exact_encode())

    def prepare(tag: str) -> Callable[[], object]:
        loop = agent_loop(base, tag)
        remembered = Remembered()
        sent: list[BaseMessage] = [loop.system] if loop.system is not None else []
        sent.extend(loop.warm[-1] if loop.warm else [])
        remembered.add(sent)
        seen = len(sent) - (loop.system is not None)

        def run() -> object:
            done = seen
            for history in loop.timed:
                remembered.unchanged()
                count(history[done:])
                remembered.add(history[done:])
                done = len(history)
            return done

        return run

    return prepare


def middleware(settings: Settings) -> list[Row]:
    from langchain_openai import ChatOpenAI  # noqa: PLC0415 (only for the exact scenarios)

    from langchain_turntrim import TurnTrimMiddleware  # noqa: PLC0415

    context = capture_context()
    chat = ChatOpenAI(model=EXACT_MODEL, api_key=SecretStr("sk-bench"))
    # Each arm: its label and how to build a fresh middleware.
    setups: dict[str, tuple[str, Callable[[], Any]]] = {
        "default": (
            f"TurnTrimMiddleware(max_tokens={DEFAULT_BUDGET:,})",
            lambda: TurnTrimMiddleware(max_tokens=DEFAULT_BUDGET),
        ),
        "for_model": (
            "TurnTrimMiddleware.for_model(ChatOpenAI gpt-4o)",
            lambda: TurnTrimMiddleware.for_model(chat),
        ),
    }
    rows = []
    for n in (60, 200) if settings.quick else (200, 1_000):
        base = settings.source.conversation(n)
        arms: dict[str, Prepare] = {
            name: turntrim_arm(make, base, context, chat) for name, (_, make) in setups.items()
        }
        arms["summarization"] = summarization_arm(base, context)
        arms["counted"] = counted_arm(base)
        times = interleave(arms, settings.repeats)
        dropping = _dropping_calls(base, {name: make for name, (_, make) in setups.items()})
        for name, (label, _) in setups.items():
            row = _row(times, name, label, n)
            row.notes.append(dropping)
            rows.append(row)
        label = setups["for_model"][0]
        floor = Row(
            f"middleware, {TIMED_CALLS} calls up to {n:,} msgs",
            f"{label}.wrap_model_call / counted floor (check what was sent, encode what is new)",
            FLOOR_TARGET,
            median_ratio(times["for_model"], times["counted"]),
            details=seconds_summary({k: times[k] for k in ("for_model", "counted")}),
        )
        floor.details.update(messages=n, timed_calls=TIMED_CALLS)
        rows.append(floor)
    return rows


def _row(times: Times, arm: str, label: str, n: int) -> Row:
    ratio = median_ratio(times[arm], times["summarization"])
    row = Row(
        f"middleware, {TIMED_CALLS} calls up to {n:,} msgs",
        f"{label}.wrap_model_call / SummarizationMiddleware.before_model",
        TARGET if arm == "default" else None,
        ratio,
        details=seconds_summary({k: times[k] for k in (arm, "summarization")}),
    )
    row.details.update(messages=n, timed_calls=TIMED_CALLS)
    return row


def _dropping_calls(base: Sequence[OpenAIMessage], makes: dict[str, Callable[[], Any]]) -> str:
    """How many of the timed calls drop turns, per middleware."""
    loop = agent_loop(base, "plan")
    system = [loop.system] if loop.system is not None else []
    found = []
    for name, make in makes.items():
        trimmer = make().trimmer
        dropping = sum(
            bool(trimmer.report([*system, *history], tools=TOOLS).dropped) for history in loop.timed
        )
        found.append(f"{name} drops turns at {dropping} of {len(loop.timed)} timed calls")
    return "; ".join(found)
