"""``CalibratedCounter``: a local estimate scaled to what the provider reports."""

from __future__ import annotations

import logging
import math
import statistics
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Any, Final, NamedTuple
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from langchain_turntrim._calls import reported_usage
from langchain_turntrim._core import check_count, check_rate, scaled, shown
from langchain_turntrim._counting.base import Counter, ListCounter, TokenCounter, checked_counts
from langchain_turntrim._counting.tools import tool_price

__all__ = ["CalibratedCounter", "Calibration"]

logger = logging.getLogger("langchain_turntrim")

#: The newest calls whose ratios the median is taken over.
WINDOW: Final = 64
#: A shift (another model behind the same name, new content): this many calls
#: in a row off by more than ``SHIFT_ERROR`` the same way; the window restarts.
SHIFT_CALLS: Final = 3
SHIFT_ERROR: Final = 0.2
#: Reports no provider makes: more tokens than this, or this many times the
#: base count (either way; above, of at least ``_RATIO_FLOOR``).
ABSURD_TOKENS: Final = 100_000_000
ABSURD_RATIO: Final = 50
_RATIO_FLOOR: Final = 32
#: Model runs started and not ended that a callback remembers.
PENDING: Final = 256


class Calibration(NamedTuple):
    """One state of a ``CalibratedCounter``: ``reported ≈ ratio * base * (1 + margin)``."""

    ratio: float
    margin: float
    observations: int


class CalibratedCounter(Counter):
    """An additive counter that learns what a provider really counts.

    Each ``observe(messages, input_tokens, tools)`` records one model call.
    Estimates are the base counter's counts times the median reported/base
    ratio of the newest 64 calls, plus a margin: ``margin`` (15%) for the
    first ``warmup`` calls (8), then the window's largest under-estimate,
    never more than ``margin``. Three calls in a row off by more than 20% the
    same way are a shift: the window restarts from them. Reports no provider
    would make (not finite, negative, zero, over 100,000,000 tokens, or over
    50 times the base count either way) are ignored. Thread-safe.

    Args:
        base: ``"approximate"`` (default) or any ``TokenCounter``.
        warmup: Calls observed before the warm-up margin is lifted.
        margin: The warm-up margin, and the most the margin ever is (a fraction).
    """

    #: One lock for all counters (an update is brief): a counter pickles as its state.
    _lock = threading.Lock()

    def __init__(
        self, base: object = "approximate", *, warmup: int = 8, margin: float = 0.15
    ) -> None:
        from langchain_turntrim._counting.resolve import resolve_counter  # noqa: PLC0415 - a cycle

        resolved = resolve_counter(base)
        if isinstance(resolved, (CalibratedCounter, ListCounter)):
            msg = f"CalibratedCounter needs an additive base counter, got {shown(base)}"
            raise TypeError(msg)
        self.base: TokenCounter = resolved
        self.warmup = check_count(warmup, "warmup")
        self.max_margin = check_rate(margin, "margin")
        if self.max_margin > 1:
            msg = f"margin must be between 0 and 1, got {margin!r}"
            raise ValueError(msg)
        self._ratios: deque[float] = deque(maxlen=WINDOW)
        self._errors: deque[float] = deque(maxlen=SHIFT_CALLS)
        self._since = 0
        self.state = Calibration(1.0, self.max_margin, 0)

    @property
    def ratio(self) -> float:
        return self.state.ratio

    @property
    def margin(self) -> float:
        return self.state.margin

    @property
    def observations(self) -> int:
        return self.state.observations

    @property
    def overhead(self) -> int:  # type: ignore[override]
        return self.scale(self.state, [self.base.overhead])[0]

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        counts = checked_counts(self.base.count_each(messages), messages, self.base)
        return self.scale(self.state, counts)

    def count_tools(self, tools: Sequence[Any]) -> int:
        return self.scale(self.state, [tool_price(self.base, tools)])[0]

    @staticmethod
    def scale(state: Calibration, counts: Sequence[int]) -> list[int]:
        """Base counts under ``state``: one calibration for a whole plan."""
        factor = state.ratio * (1 + state.margin)
        return [scaled(count, factor) for count in counts]

    def observe(
        self,
        messages: Sequence[BaseMessage],
        input_tokens: float,
        tools: Sequence[Any] | None = None,
    ) -> int:
        """Record a call that sent ``messages`` (and ``tools``) and reported
        ``input_tokens``; returns the estimate it had of that request."""
        return self.learn(self.base_count(messages, tools or ()), len(messages), input_tokens)

    def base_count(self, messages: Sequence[BaseMessage], tools: Sequence[Any]) -> int:
        base = self.base
        return base.overhead + sum(base.count_each(messages)) + tool_price(base, tools)

    def learn(self, base: int, messages: int, input_tokens: float) -> int:
        """``observe`` of a request whose base count was ``base``."""
        if isinstance(input_tokens, bool) or not isinstance(input_tokens, (int, float)):
            msg = f"input_tokens must be a number, got {shown(input_tokens)}"
            raise TypeError(msg)
        state = self.state
        estimate = self.scale(state, [base])[0]
        reason = _implausible(input_tokens, base, messages)
        if reason is not None:
            logger.debug("CalibratedCounter ignored a report (%s): %r", reason, input_tokens)
        if reason is not None or not base:
            return estimate
        ratio = float(input_tokens) / base
        with self._lock:
            if len(self._ratios) >= SHIFT_CALLS:
                self._errors.append(ratio / self.state.ratio - 1)
            self._ratios.append(ratio)
            full = len(self._errors) == SHIFT_CALLS
            if full and (min(self._errors) > SHIFT_ERROR or max(self._errors) < -SHIFT_ERROR):
                logger.debug("CalibratedCounter: the provider's count shifted; starting again")
                self._ratios = deque(list(self._ratios)[-SHIFT_CALLS:], maxlen=WINDOW)
                self._errors.clear()
                self._since = SHIFT_CALLS - 1
            self._since += 1
            median = statistics.median(self._ratios)
            worst = max(self._ratios) / median - 1
            warm = self._since >= self.warmup
            margin = min(self.max_margin, max(0.0, worst)) if warm else self.max_margin
            self.state = Calibration(median, margin, self.state.observations + 1)
        return estimate

    def callback(self) -> CalibrationCallback:
        """A callback handler feeding this counter from a chat model's runs
        (``chain.invoke(..., config={"callbacks": [counter.callback()]})``)."""
        return CalibrationCallback(self)

    def __repr__(self) -> str:
        s = self.state
        return (
            f"CalibratedCounter({self.base!r}, ratio={s.ratio:.3f}, "
            f"observations={s.observations}, margin={s.margin:.3f})"
        )


def _implausible(reported: float, base: int, messages: int) -> str | None:
    if reported != reported or reported in (math.inf, -math.inf):  # noqa: PLR0124 - NaN
        return "not a finite number"
    if reported < 0:
        return "negative"
    if reported == 0:
        return "zero for a request with messages" if messages else None
    if reported > ABSURD_TOKENS:
        return f"more than {ABSURD_TOKENS:,} tokens"
    # A small request's count is coarse: it is held to the floor's bound above.
    if reported * ABSURD_RATIO < base or reported > max(base, _RATIO_FLOOR) * ABSURD_RATIO:
        return f"{reported!r} tokens for a base count of {base}"
    return None


class CalibrationCallback(BaseCallbackHandler):
    """Feeds a ``CalibratedCounter`` from chat model runs: each run's base count
    when it starts, its reported input tokens when it ends. Runs that fail, are
    cancelled or never end are forgotten; at most ``PENDING`` are held (counts only)."""

    def __init__(self, counter: CalibratedCounter) -> None:
        self.counter = counter
        self._pending: OrderedDict[UUID, tuple[int, int]] = OrderedDict()
        self._lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        del serialized
        sent = messages[0] if messages else []
        tools = (kwargs.get("invocation_params") or {}).get("tools") or ()
        count = self.counter.base_count(sent, tools)
        with self._lock:
            self._pending[run_id] = (count, len(sent))
            while len(self._pending) > PENDING:
                self._pending.popitem(last=False)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        del kwargs
        with self._lock:
            pending = self._pending.pop(run_id, None)
        first = response.generations[0][:1] if response.generations else []
        usage = reported_usage([getattr(g, "message", None) for g in first])
        if pending is not None and usage is not None:
            self.counter.learn(pending[0], pending[1], usage[0])

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        del error, kwargs
        with self._lock:
            self._pending.pop(run_id, None)
