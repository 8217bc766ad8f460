"""Recovering from a provider's context-overflow error (a count can be off: an
estimate not yet calibrated, a provider that counts more): trim tighter and call
again, with no LLM call of its own. The refusal (``ContextOverflowError`` or the
provider's own words and figures) tightens the budget for the retry and for
later calls; a ``CalibratedCounter`` learns the provider's count instead."""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from langchain_core.exceptions import ContextOverflowError
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor

from langchain_turntrim._calls import reported_usage
from langchain_turntrim._counting import CalibratedCounter
from langchain_turntrim._report import TrimReport, TurnTrimOverflowError
from langchain_turntrim._tracing import arecord, record

if TYPE_CHECKING:
    from langchain_turntrim._trimmer import TurnTrimmer

__all__ = ["Attempts", "OverflowRetry", "Recovery", "Try", "calibrate", "overflow_of"]

_R = TypeVar("_R")
#: The words of a provider's context-overflow error (in lower case).
_PHRASES: Final = re.compile(
    "context_length_exceeded|maximum context length|context length exceeded|context window"
    "|prompt is too long|input is too long|too many tokens"
    "|exceeds the maximum number of tokens|input token count|input tokens exceed"
)
_N: Final = r"\d[\d,]*"
#: Each gives the provider's count (``sent``) and its limit (``limit``).
_FIGURES: Final = (
    re.compile(rf"(?P<sent>{_N})\s*tokens?\s*>\s*(?P<limit>{_N})\s*maximum"),
    re.compile(
        rf"maximum context length is (?P<limit>{_N}) tokens.*?(?P<sent>{_N}) in the messages"
        rf"(?:, (?P<completion>{_N}) in the completion)?",
        re.DOTALL,
    ),
    re.compile(
        rf"maximum context length is (?P<limit>{_N}) tokens.*?resulted in (?P<sent>{_N}) tokens",
        re.DOTALL,
    ),
    re.compile(
        rf"input token count \((?P<sent>{_N})\) exceeds the maximum number of tokens "
        rf"allowed \((?P<limit>{_N})\)"
    ),
    re.compile(rf"limit of (?P<limit>{_N}) tokens.*?resulted in (?P<sent>{_N}) tokens", re.DOTALL),
)
#: Room left below the provider's limit on a retry, and the share of what was
#: sent kept when the provider gives no figures.
_HEADROOM: Final = 0.02
_BLIND: Final = 0.8


@dataclass(frozen=True)
class Overflow:
    """A provider's context-overflow error, and its figures where it gave them."""

    error: BaseException
    sent: int | None = None
    limit: int | None = None

    def figures(self) -> dict[str, Any]:
        return {"provider_tokens": self.sent, "provider_limit": self.limit}


def overflow_of(error: BaseException) -> Overflow | None:
    """The overflow ``error`` reports, or None when it is another error."""
    body = getattr(error, "body", None)
    text = f"{error} {body!r}" if isinstance(body, dict) else str(error)
    if not isinstance(error, ContextOverflowError) and not _PHRASES.search(text.lower()):
        return None
    for pattern in _FIGURES:
        match = pattern.search(text)
        if match is not None:
            found = {k: int(v.replace(",", "")) for k, v in match.groupdict().items() if v}
            limit = found["limit"] - found.get("completion", 0)  # the room for the messages
            return Overflow(error, found["sent"], max(0, limit))
    return Overflow(error)


class Recovery:
    """What a trimmer's calls learned from overflows: the share of the budget
    to trim to (1 until an overflow). Thread-safe."""

    def __init__(self) -> None:
        self.scale = 1.0
        self._lock = threading.Lock()

    def budget(self, max_tokens: int) -> int:
        return max_tokens if self.scale <= 1 else math.floor(max_tokens / self.scale)

    def tighten(self, max_tokens: int, budget: int) -> None:
        """Trim later calls to ``budget`` of ``max_tokens`` too."""
        scale = max_tokens / budget if budget else float(max(max_tokens, 1))
        with self._lock:
            self.scale = max(self.scale, scale)


class Try(NamedTuple):
    """One attempt: what is sent, its trim (``report.kept``), the tools, its trace figures."""

    sent: Any
    report: TrimReport[Any]
    tools: Sequence[Any] = ()
    extra: Mapping[str, Any] = MappingProxyType({})


class Attempts:
    """One model call's attempts: the next one's budget; whether an error calls for it."""

    def __init__(self, trimmer: TurnTrimmer, recovery: Recovery) -> None:
        self.trimmer, self.recovery = trimmer, recovery
        self.counter = trimmer.counter
        self.budget = recovery.budget(trimmer.max_tokens)
        self.retries = trimmer.options.overflow_retries
        self.overflows: list[Overflow] = []

    def run(self, decide: Callable[[int], Try], send: Callable[[Any], _R]) -> tuple[Try, _R]:
        """Decide, trace and ``send`` attempts until one is answered (or raises)."""
        while True:
            tried = self.decide(decide)
            record(tried.report, extra={**tried.extra, **self.extra()})
            try:
                return tried, send(tried.sent)
            except Exception as error:
                if not self.retry(error, tried):
                    raise

    async def arun(
        self, decide: Callable[[int], Try], send: Callable[[Any], Awaitable[_R]]
    ) -> tuple[Try, _R]:
        """``run`` for async code (a counter that may block decides in a thread)."""
        while True:
            if self.counter.blocking:
                tried = await run_in_executor(None, self.decide, decide)
            else:
                tried = self.decide(decide)
            await arecord(tried.report, extra={**tried.extra, **self.extra()})
            try:
                return tried, await send(tried.sent)
            except Exception as error:
                if not self.retry(error, tried):
                    raise

    def decide(self, decide: Callable[[int], _R]) -> _R:
        """``decide(budget)``; when a tighter budget cannot hold even the newest
        turn's skeleton, the provider's last error, with the figures."""
        try:
            return decide(self.budget)
        except TurnTrimOverflowError as cause:
            if not self.overflows:
                raise
            error = self.overflows[-1].error
            attach(error, {**self.figures(), "retry_refused": str(cause)})
            raise error from cause

    def retry(self, error: BaseException, tried: Try) -> bool:
        """After ``error`` on the request ``tried``: try again (tighter)?"""
        overflow = overflow_of(error)
        if overflow is None:
            return False
        self.overflows.append(overflow)
        calibrated = isinstance(self.counter, CalibratedCounter)
        if calibrated and overflow.sent is not None:
            self.counter.observe(tried.report.kept, overflow.sent, tried.tools)
        if len(self.overflows) > self.retries:
            attach(error, self.figures())
            return False
        # Retry below the provider's limit less 2%, in the counter's units, else
        # with 80% of what was sent; a calibrated counter learns instead.
        counted, max_tokens = tried.report.tokens_after, self.trimmer.max_tokens
        if overflow.sent is not None and counted > 0:
            window = overflow.limit if overflow.limit is not None else max_tokens
            retry = math.floor(window * (1 - _HEADROOM) * counted / overflow.sent)
        else:
            retry = math.floor(min(self.budget, counted) * _BLIND)
        self.budget = max(0, min(retry, self.budget - 1))
        if not calibrated:
            self.recovery.tighten(max_tokens, self.budget)
        return True

    def extra(self) -> dict[str, Any]:
        """The trace figures of a retry (none for a first attempt)."""
        if not self.overflows:
            return {}
        return {"overflow_retry": len(self.overflows), **self.overflows[-1].figures()}

    def figures(self) -> dict[str, Any]:
        return {
            "overflow_retries": min(len(self.overflows), self.retries),
            "budget": self.budget,
            "overflows": [o.figures() for o in self.overflows],
        }


def attach(error: BaseException, figures: dict[str, Any]) -> None:
    """Set ``error.turntrim`` to ``figures`` and add a note saying them."""
    with contextlib.suppress(AttributeError):  # an exception class with slots
        error.turntrim = figures  # type: ignore[attr-defined]
    add_note = getattr(error, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(f"langchain-turntrim: the context overflowed; retries: {figures}")


class OverflowRetry(Runnable[Any, Any]):
    """A trimmer and a chat model as one Runnable: trim, call the model, and when
    the provider answers that the context is too long, trim tighter and call
    again (``overflow_retries`` times). Made by ``TurnTrimmer.with_overflow_retry``."""

    def __init__(self, trimmer: TurnTrimmer, model: Runnable[Any, Any]) -> None:
        self.trimmer, self.model = trimmer, model
        self.recovery = Recovery()

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002 - Runnable's name
        attempt = Attempts(self.trimmer, self.recovery)
        send = partial(self.model.invoke, config=config, **kwargs)
        return self._observed(*attempt.run(partial(self._decide, input), send))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002 - Runnable's name
        attempt = Attempts(self.trimmer, self.recovery)
        send = partial(self.model.ainvoke, config=config, **kwargs)
        return self._observed(*await attempt.arun(partial(self._decide, input), send))

    def _decide(self, messages: Any, budget: int) -> Try:
        report = self.trimmer.report(messages, max_tokens=budget)
        return Try(report.kept, report)

    def _observed(self, tried: Try, response: object) -> object:
        calibrate(self.trimmer.counter, tried, [response])
        return response


def calibrate(counter: object, tried: Try, replies: Sequence[Any]) -> Any:
    """The usage ``replies`` report (``reported_usage``), and its input tokens
    fed to ``counter`` if it is a ``CalibratedCounter``, with what was sent."""
    usage = reported_usage(replies)
    if usage is not None and isinstance(counter, CalibratedCounter):
        counter.observe(tried.report.kept, usage[0], tried.tools)
    return usage
