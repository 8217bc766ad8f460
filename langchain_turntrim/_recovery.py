"""Model calls that recover from a context overflow: trim tighter, call again.

Shared by ``TurnTrimMiddleware`` (its ``overflow_retries``) and the Runnable
``TurnTrimmer.with_overflow_retry(model)`` returns (``OverflowRetry``). The
first attempt trims to the budget learned so far; when the provider refuses
the request as too long (``_overflow.overflow_of``), what it said tightens the
budget (``_overflow.Recovery``; a ``CalibratedCounter`` is given the
provider's count instead, and learns it), the history is trimmed again and
the model called again, at most ``retries`` times. Then the provider's error
is raised, with what the retries did in its ``turntrim`` attribute (and a
note). No LLM call is made to shrink anything.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, field_validator

from langchain_turntrim._counting import CalibratedCounter
from langchain_turntrim._counting.lru import LRU
from langchain_turntrim._errors import TurnTrimOverflowError
from langchain_turntrim._overflow import DEFAULT_OVERFLOW_RETRIES, Overflow, Recovery, overflow_of
from langchain_turntrim._report import TrimReport
from langchain_turntrim._safe_repr import safe_repr
from langchain_turntrim._trimmer import TurnTrimmer
from langchain_turntrim._usage import reported_input_tokens

__all__ = ["OverflowRetry", "Recovering", "Retrying", "check_retries"]

_R = TypeVar("_R")

#: The tighter trimmers kept per trimmer (one per budget tried).
_BUDGETS = 8


def check_retries(value: object, owner: str) -> int:
    """``overflow_retries``, checked: an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        what = f"{type(value).__name__} {safe_repr(value, 80)}"
        msg = f"{owner}: overflow_retries must be an int >= 0, got {what}"
        raise TypeError(msg)
    if value < 0:
        msg = f"{owner}: overflow_retries must be >= 0, got {value}"
        raise ValueError(msg)
    return value


class Recovering:
    """A trimmer, what its calls learned from overflows, and its trimmers of
    the tighter budgets (sharing its planner: what it remembers stays warm,
    and one calibration)."""

    def __init__(self, trimmer: TurnTrimmer) -> None:
        self.trimmer = trimmer
        self.learned = Recovery()
        # A calibrated counter learns the provider's count itself: the budget
        # is tightened for the retry only, never for later calls.
        self.persist = not isinstance(trimmer.counter, CalibratedCounter)
        self._trimmers: LRU[TurnTrimmer] = LRU(_BUDGETS)
        self._lock = threading.Lock()

    def current(self) -> TurnTrimmer:
        """The trimmer of the budget learned so far."""
        return self.at(self.learned.budget(self.trimmer.max_tokens))

    def at(self, budget: int) -> TurnTrimmer:
        """The trimmer's options with ``budget`` (and ``trim_to`` no higher)."""
        home = self.trimmer
        if budget >= home.max_tokens:
            return home
        with self._lock:
            found = self._trimmers.get(budget)
            if found is None:
                found = TurnTrimmer.from_options(home.options.with_budget(budget))
                self._trimmers.put_many(((budget, found),))
        return found


class Retrying:
    """The attempts of one model call: ``trimmer`` trims the current one;
    ``overflowed`` says whether to make another after an error."""

    def __init__(self, recovering: Recovering, retries: int) -> None:
        self.recovering = recovering
        self.retries = retries
        self.trimmer = recovering.current()
        self.attempts = 0
        self.overflows: list[Overflow] = []

    def overflowed(
        self,
        error: BaseException,
        report: TrimReport[Any],
        sent: Sequence[BaseMessage],
        tools: Sequence[Any] = (),
    ) -> bool:
        """After ``error`` on the request ``report`` decided (``sent`` its
        messages): whether to try again (``trimmer`` is then tighter). When
        not, an overflow's figures are attached to ``error``."""
        overflow = overflow_of(error)
        if overflow is None:
            return False
        self.overflows.append(overflow)
        counter = self.trimmer.counter
        if isinstance(counter, CalibratedCounter) and overflow.sent is not None:
            counter.observe(sent, overflow.sent, tools=tools)
        if self.attempts >= self.retries:
            attach(error, self.figures())
            return False
        recovering = self.recovering
        budget = recovering.learned.learn(
            overflow,
            report.tokens_after,
            recovering.trimmer.max_tokens,
            self.trimmer.max_tokens,
            persist=recovering.persist,
        )
        self.attempts += 1
        self.trimmer = recovering.at(budget)
        return True

    def decide(self, decide: Callable[[TurnTrimmer], _R]) -> _R:
        """``decide(trimmer)``; when a tighter budget cannot even hold the
        request's skeleton, the provider's last error, with the figures."""
        try:
            return decide(self.trimmer)
        except TurnTrimOverflowError as cause:
            if not self.overflows:
                raise
            error = self.overflows[-1].error
            attach(error, {**self.figures(), "retry_refused": str(cause)})
            raise error from cause

    def extra(self) -> dict[str, Any]:
        """The trace figures of the current attempt (none for a first attempt
        that nothing has tightened)."""
        if not self.attempts:
            return {}
        last = self.overflows[-1]
        return {"overflow_retry": self.attempts, **last.figures()}

    def figures(self) -> dict[str, Any]:
        """What the retries did: how many, the budgets tried, each overflow's figures."""
        return {
            "overflow_retries": self.attempts,
            "budget": self.trimmer.max_tokens,
            "overflows": [o.figures() for o in self.overflows],
        }


def attach(error: BaseException, figures: dict[str, Any]) -> None:
    """Set ``error.turntrim`` to ``figures`` and add a note saying them."""
    retries = figures["overflow_retries"]
    note = (
        f"langchain-turntrim: the context overflowed after {retries} "
        f"retr{'y' if retries == 1 else 'ies'} (last budget {figures['budget']:,} tokens; "
        f"provider figures {figures['overflows']})"
    )
    # An exception class with slots takes no attribute: the note still says it.
    with contextlib.suppress(AttributeError):
        error.turntrim = figures  # type: ignore[attr-defined]
    add_note = getattr(error, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(note)


class OverflowRetry(RunnableSerializable[Any, Any]):
    """A trimmer and a chat model, as one Runnable: trim, call the model, and
    when the provider answers that the context is too long, trim tighter and
    call again (at most ``retries`` times). Built by
    ``TurnTrimmer.with_overflow_retry(model)``.

    Input: what ``TurnTrimmer`` takes; output: the model's. What the provider
    said is learned for the next calls (see ``TurnTrimmer.with_overflow_retry``).
    """

    trimmer: TurnTrimmer
    model: Runnable[LanguageModelInput, Any]
    retries: int = DEFAULT_OVERFLOW_RETRIES

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @field_validator("retries", mode="before")
    @classmethod
    def _check_retries(cls, value: object) -> int:
        return check_retries(value, "with_overflow_retry")

    def model_post_init(self, context: Any, /) -> None:  # noqa: ARG002 - pydantic's hook
        self.__dict__["_recovering"] = Recovering(self.trimmer)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002 - LangChain's signature
        attempt = Retrying(self.__dict__["_recovering"], self.retries)
        while True:
            report = attempt.decide(lambda trimmer: trimmer.trim_with_report(input))
            try:
                response = self.model.invoke(report.kept, config, **kwargs)
            except Exception as error:
                if attempt.overflowed(error, report, report.kept):
                    continue
                raise
            _observe(attempt.trimmer, report.kept, response)
            return response

    async def ainvoke(
        self,
        input: Any,  # noqa: A002 - LangChain's signature
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        attempt = Retrying(self.__dict__["_recovering"], self.retries)
        while True:
            report = attempt.decide(lambda trimmer: trimmer.trim_with_report(input))
            try:
                response = await self.model.ainvoke(report.kept, config, **kwargs)
            except Exception as error:
                if attempt.overflowed(error, report, report.kept):
                    continue
                raise
            _observe(attempt.trimmer, report.kept, response)
            return response


def _observe(trimmer: TurnTrimmer, sent: Sequence[BaseMessage], response: object) -> None:
    """Feed a ``CalibratedCounter`` the input tokens the response reports."""
    counter = trimmer.counter
    if isinstance(counter, CalibratedCounter):
        tokens = reported_input_tokens([response])
        if tokens is not None:
            counter.observe(sent, tokens)
