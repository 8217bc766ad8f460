"""``TurnTrimmer``: the turn-atomic trim as a LangChain Runnable."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, PrivateAttr

from langchain_turntrim._core import TrimPlan, check_count
from langchain_turntrim._counting import DEFAULT_CACHE_SIZE, ResolvedCounter, resolve_counter
from langchain_turntrim._errors import check_overflow
from langchain_turntrim._messages import TrimInput, message_kinds, to_messages
from langchain_turntrim._options import ON_OVERFLOW, OnOverflow, check_choice
from langchain_turntrim._report import TrimReport
from langchain_turntrim._tracing import areport_trim, report_trim

__all__ = ["TurnTrimmer", "model_budget"]


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
        on_overflow: ``"drop"`` returns only the system messages when not even
            the newest turn fits (the spec); ``"raise"`` raises
            ``TurnTrimOverflowError`` instead.
        cache_size: How many per-message counts to keep (LRU); 0 disables the
            cache.

    Configuration is checked here, not at the first call.
    """

    max_tokens: int
    token_counter: Any = "approximate"
    on_overflow: OnOverflow = "drop"
    cache_size: int = DEFAULT_CACHE_SIZE

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _counter: ResolvedCounter = PrivateAttr()

    def __init__(
        self,
        max_tokens: int,
        *,
        token_counter: Any = "approximate",
        on_overflow: OnOverflow = "drop",
        cache_size: int = DEFAULT_CACHE_SIZE,
        **kwargs: Any,
    ) -> None:
        check_count(max_tokens)
        check_count(cache_size, "cache_size")
        check_choice(on_overflow, "on_overflow", ON_OVERFLOW)
        counter = resolve_counter(token_counter, cache_size)
        fields: dict[str, Any] = {
            "max_tokens": max_tokens,
            "token_counter": counter,
            "on_overflow": on_overflow,
            "cache_size": cache_size,
        }
        super().__init__(**fields, **kwargs)
        self._counter = counter

    @classmethod
    def for_model(
        cls,
        chat_model: Any,
        *,
        reserve_tokens: int = 0,
        on_overflow: OnOverflow = "drop",
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> TurnTrimmer:
        """A trimmer sized for ``chat_model``.

        The budget is ``chat_model.profile["max_input_tokens"] - reserve_tokens``;
        the counter is the model's exact local counter where one exists
        (``TiktokenCounter`` for OpenAI chat models), else the model itself.
        """
        return cls(
            max_tokens=model_budget(chat_model, reserve_tokens),
            token_counter=chat_model,
            on_overflow=on_overflow,
            cache_size=cache_size,
        )

    @property
    def counter(self) -> ResolvedCounter:
        """The resolved counter (with its cache)."""
        return self._counter

    @property
    def InputType(self) -> Any:
        return TrimInput

    @property
    def OutputType(self) -> Any:
        return list[BaseMessage]

    def trim_with_report(self, messages: TrimInput) -> TrimReport:
        """Trim ``messages`` and say what was dropped."""
        items = to_messages(messages)
        plan = self.plan(items)
        report_trim(plan)
        return TrimReport(
            kept=plan.select(items),
            dropped=[items[i] for i in plan.dropped],
            plan=plan,
        )

    def plan(self, messages: Sequence[BaseMessage]) -> TrimPlan:
        """The plan for a list of ``BaseMessage`` (no conversion, no logging, no tracing)."""
        plan = self._counter.plan(messages, message_kinds(messages), self.max_tokens)
        check_overflow(plan, self.on_overflow)
        return plan

    def trim(self, messages: TrimInput) -> list[BaseMessage]:
        """The kept messages, without a run of its own.

        The trim is logged, and recorded on the run the caller is executing in,
        if any (see ``report_trim``).
        """
        return self._trim_in_run(messages)

    def _trim_in_run(
        self, value: TrimInput, run_manager: CallbackManagerForChainRun | None = None
    ) -> list[BaseMessage]:
        items = to_messages(value)
        plan = self.plan(items)
        report_trim(plan, run_manager)
        return plan.select(items)

    async def _atrim_in_run(
        self, value: TrimInput, run_manager: AsyncCallbackManagerForChainRun
    ) -> list[BaseMessage]:
        items = to_messages(value)
        if self._counter.blocking:
            # A model's counter may be a network call: keep the loop free.
            plan = await run_in_executor(None, self.plan, items)
        else:
            plan = self.plan(items)
        await areport_trim(plan, run_manager)
        return plan.select(items)

    def invoke(
        self, input: TrimInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        return self._call_with_config(self._trim_in_run, input, config, **kwargs)

    async def ainvoke(
        self, input: TrimInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        return await self._acall_with_config(self._atrim_in_run, input, config, **kwargs)


# LangChain inspects the signature of the function a Runnable runs on every
# call (does it take a run_manager, a config?); computing them once here keeps
# invoke's fixed cost low.
for _method in (TurnTrimmer._trim_in_run, TurnTrimmer._atrim_in_run):
    setattr(_method, "__signature__", inspect.signature(_method))  # noqa: B010


def model_budget(chat_model: Any, reserve_tokens: int) -> int:
    """``chat_model.profile["max_input_tokens"] - reserve_tokens``, checked."""
    check_count(reserve_tokens, "reserve_tokens")
    profile = getattr(chat_model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if not isinstance(limit, int) or isinstance(limit, bool):
        name = type(chat_model).__name__
        msg = (
            f"{name} has no profile['max_input_tokens'] to size the budget from; "
            f"pass max_tokens explicitly (e.g. TurnTrimmer(max_tokens=..., token_counter=model))"
        )
        raise ValueError(msg)
    budget = limit - reserve_tokens
    if budget < 0:
        msg = f"reserve_tokens ({reserve_tokens}) exceeds the model's max_input_tokens ({limit})"
        raise ValueError(msg)
    return budget
