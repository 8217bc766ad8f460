"""``CalibratedCounter``: a local estimate scaled to what a provider reports.

For models without a local tokenizer (Anthropic, Gemini, Bedrock, Mistral,
local and OpenAI-compatible servers) the only exact count is the one the
provider reports after the call (``usage_metadata["input_tokens"]``). This
counter learns, from those reports, how a base counter's estimate maps onto
the provider's count, and plans with the mapped estimate.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Sequence
from itertools import compress, repeat
from operator import gt, truediv
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from langchain_core.messages import BaseMessage

from langchain_turntrim._core import check_count
from langchain_turntrim._counting.additive import AdditiveCounter, checked_counts
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.cache import CachedCounter
from langchain_turntrim._counting.least_squares import Coefficients, Window, robust_fit
from langchain_turntrim._counting.priced import Priced, reused
from langchain_turntrim._counting.protocol import TokenCounter, refuse_class
from langchain_turntrim._counting.tools import check_tools
from langchain_turntrim._safe_repr import safe_repr

if TYPE_CHECKING:
    from langchain_turntrim._counting.callback import CalibrationCallback

__all__ = ["CalibratedCounter", "Calibration"]

logger = logging.getLogger("langchain_turntrim")

#: Calls seen before the warm-up margin is lifted.
DEFAULT_WARMUP: Final = 8
#: The margin estimates carry during the warm-up, and the most they ever carry.
DEFAULT_MARGIN: Final = 0.15
#: Observations the fit is made on (the newest ones).
WINDOW: Final = 64
#: A shift: this many calls in a row off by more than ``SHIFT_ERROR``, the same way.
SHIFT_CALLS: Final = 3
SHIFT_ERROR: Final = 0.2
#: Reports no provider makes: more tokens than this, or this many times the
#: base count (either way) once the base count is at least ``_RATIO_FLOOR``.
ABSURD_TOKENS: Final = 100_000_000
ABSURD_RATIO: Final = 50.0
_RATIO_FLOOR: Final = 32


class Calibration(NamedTuple):
    """One state of a ``CalibratedCounter``: ``reported ≈ (ratio * base_tokens
    + per_message * n_messages + per_request) * (1 + margin)``."""

    ratio: float
    per_message: float
    per_request: float
    margin: float
    observations: int


class CalibratedCounter(AdditiveCounter):
    """An additive counter that learns what a provider really counts.

    Every ``observe(messages, input_tokens, tools)`` records one model call:
    the base counter's tokens of what was sent (messages and tool schemas),
    the number of messages, and what the provider reported. Estimates are a
    robust linear fit ``reported ≈ ratio * base + per_message * n +
    per_request`` over the newest 64 calls (Huber-weighted least squares,
    pulled gently towards the plain ratio, so a few calls are enough and an odd
    report does not move it far; each call's fit resumes from the one before,
    one reweighting round a call, and starts afresh after a shift). The
    per-message and per-request terms catch framing that the base counter
    does not price (a provider's role tokens,
    its prompt template), so short and long messages are both right; with
    fewer than three calls the fit is the median ratio alone.

    Estimates carry a margin: ``margin`` (15% by default) until ``warmup``
    calls (8) have been seen; after that, the fit's largest under-estimate of
    the calls it was fitted on (0 when it under-estimated none), never more
    than ``margin``. Before any call, the estimate is the base count plus the
    warm-up margin.

    Thread-safe: observations take a lock; counts read one immutable state,
    so a plan never mixes two calibrations (``measure``, ``calibrated``,
    ``constant``). Nothing caches calibrated counts (``resolve_counter``
    never wraps this counter in a ``CachedCounter``, and ``stable`` is
    False): a trimmer's planner (``CalibratedPlanner``) remembers the base
    counts of the histories it planned and maps them under the current
    state, O(1) a message; the base counter's own counts are cached when it
    is an exact counter.

    Args:
        base: ``"approximate"`` (default), an ``AdditiveCounter`` or any
            ``TokenCounter`` (wrapped in a ``CachedCounter``).
        warmup: Calls observed before the warm-up margin is lifted.
        margin: The warm-up margin, and the cap of the later one (a fraction).
    """

    #: Its counts change as it learns: a planner remembers base counts instead.
    stable = False

    def __init__(
        self,
        base: object = "approximate",
        *,
        warmup: int = DEFAULT_WARMUP,
        margin: float = DEFAULT_MARGIN,
    ) -> None:
        self.base = _additive(base)
        self.warmup = check_count(warmup, "warmup")
        if isinstance(margin, bool) or not isinstance(margin, (int, float)):
            msg = f"margin must be a number, got {type(margin).__name__}"
            raise TypeError(msg)
        if not 0 <= margin <= 1:
            msg = f"margin must be between 0 and 1, got {safe_repr(margin, 80)}"
            raise ValueError(msg)
        self.max_margin = float(margin)
        self._lock = threading.Lock()
        #: The observations the fit is made on, with what each refit starts from.
        self._window = Window(WINDOW)
        #: The relative errors of the newest calls, against the fit before each.
        self._errors: deque[float] = deque(maxlen=SHIFT_CALLS)
        #: Calls observed since the fit (re)started: the warm-up margin holds until ``warmup``.
        self._since = 0
        #: The fit the next one resumes from (None: the next one starts from scratch).
        self._resume: Coefficients | None = None
        #: The request a planner priced last (``priced``), for ``observe``.
        self._priced: Priced | None = None
        self._state = Calibration(1.0, 0.0, 0.0, self.max_margin, 0)

    # -- the state -----------------------------------------------------------

    @property
    def calibration(self) -> Calibration:
        """The current state (one immutable snapshot)."""
        return self._state

    @property
    def ratio(self) -> float:
        """Provider tokens per base token, as currently fitted."""
        return self._state.ratio

    @property
    def observations(self) -> int:
        """Calls observed so far."""
        return self._state.observations

    @property
    def margin(self) -> float:
        """The safety margin estimates currently carry (a fraction)."""
        return self._state.margin

    # -- learning ------------------------------------------------------------

    def observe(
        self,
        messages: Sequence[BaseMessage],
        input_tokens: float,
        tools: Sequence[Any] | None = None,
    ) -> int:
        """Record one model call: ``messages`` and ``tools`` were sent and the
        provider reported ``input_tokens``. Returns this counter's estimate of
        that request from before the observation (what the plan used).

        A report no provider would make is ignored (with a DEBUG line on the
        ``langchain_turntrim`` logger): not finite, negative, zero for a
        request with messages, more than 100,000,000 tokens, or more than 50
        times the base count (or less than a fiftieth of it) once that is 32
        tokens or more. Three calls in a row off by more than 20% the same way
        are a shift (new content, another model behind the same name): the
        fit then restarts from them, so it follows within 3 calls, with the
        warm-up margin until ``warmup`` calls of the new fit.

        What a trimmer's plan just kept (the same message objects, each
        counted field still the object it was counted from) is not counted
        again: the plan's base counts are taken (``priced``).
        """
        if isinstance(input_tokens, bool) or not isinstance(input_tokens, (int, float)):
            msg = f"input_tokens must be a number, got {type(input_tokens).__name__}"
            raise TypeError(msg)
        state = self._state
        base_each = reused(self._priced, messages)
        if base_each is None:
            base_each = checked_counts(self.base.count_each(messages), messages, self.base)
        base = self.base.overhead + sum(base_each) + (self.base.count_tools(tools) if tools else 0)
        estimate = _estimate(state, base, len(messages))
        reason = _implausible(input_tokens, base, len(messages))
        if reason is not None:
            logger.debug(
                "CalibratedCounter ignored a report of %r input tokens: %s", input_tokens, reason
            )
            return estimate
        reported = round(input_tokens)
        with self._lock:
            state = self._state
            window = self._window
            if len(window) >= 3:  # noqa: PLR2004 - a fit to be off from
                fitted = _estimate(state._replace(margin=0.0), base, len(messages))
                self._errors.append(reported / fitted - 1 if fitted else 0.0)
            window.append(float(base), len(messages), reported)
            resume = self._resume
            if _shifted(self._errors):
                # The newest calls alone: the older ones describe what no longer holds.
                window.keep_newest(SHIFT_CALLS)
                self._errors.clear()
                self._since = SHIFT_CALLS - 1
                resume = None
                logger.debug("CalibratedCounter: the provider's count shifted; refitting")
            self._since += 1
            self._state, self._resume = _fit(
                window,
                state.observations + 1,
                settled=self._since >= self.warmup,
                max_margin=self.max_margin,
                start=resume,
            )
        return estimate

    def priced(self, request: Priced) -> None:
        """Note the request a plan priced last: its messages are what the
        next ``observe`` is usually told was sent."""
        self._priced = request

    def callback(self) -> CalibrationCallback:
        """A callback handler feeding this counter from a chat model's calls
        (``chain.invoke(..., config={"callbacks": [counter.callback()]})``)."""
        from langchain_turntrim._counting.callback import CalibrationCallback  # noqa: PLC0415

        return CalibrationCallback(self)

    # -- counting ------------------------------------------------------------

    @property
    def overhead(self) -> int:
        return _overhead(self._state, self.base.overhead)

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return _each(self._state, self.base.count_each(messages))

    def measure(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any] = ()
    ) -> tuple[list[int], int]:
        """Each message's count and the request's constant, from one calibration
        (a plan never mixes two, whatever ``observe`` does meanwhile)."""
        state = self._state
        costs = checked_counts(_each(state, self.base.count_each(messages)), messages, self)
        return costs, self.constant(state, tools)

    def count_tools(self, tools: Sequence[Any]) -> int:
        return _tools(self._state, self.base, tools)

    def calibrated(self, state: Calibration, base: Sequence[int]) -> list[int]:
        """The counts under ``state`` of messages whose base counts are
        ``base`` (checked ones): O(1) a message, nothing counted."""
        return _each(state, base)

    def constant(self, state: Calibration, tools: Sequence[Any] = ()) -> int:
        """What a request with ``tools`` adds once under ``state``: the
        per-request constant and the tools' price."""
        return _overhead(state, self.base.checked_overhead()) + _tools(state, self.base, tools)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        state["_priced"] = None  # messages: not the counter's to keep
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_seen" in state:  # pickled before the window kept its sums
            state["_window"] = Window(WINDOW, state.pop("_seen"))
        state.setdefault("_resume", None)  # pickled before fits resumed: the next one is whole
        state.setdefault("_priced", None)
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        s = self._state
        return (
            f"CalibratedCounter({self.base!r}, ratio={s.ratio:.3f}, "
            f"observations={s.observations}, margin={s.margin:.3f})"
        )


def _additive(base: object) -> AdditiveCounter:
    refuse_class(base, "base")
    if isinstance(base, str) and base == "approximate":
        return ApproximateCounter()
    if isinstance(base, CalibratedCounter):
        msg = "CalibratedCounter cannot calibrate another CalibratedCounter"
        raise TypeError(msg)
    if isinstance(base, AdditiveCounter):
        return base
    if isinstance(base, TokenCounter):
        return CachedCounter(base)
    msg = (
        "CalibratedCounter needs an additive base counter ('approximate', an "
        f"AdditiveCounter or a TokenCounter), got {type(base).__name__} {safe_repr(base, 80)}"
    )
    raise TypeError(msg)


def _implausible(reported: float, base: int, messages: int) -> str | None:
    """Why a report cannot be a provider's count of a request of ``base``
    base tokens and ``messages`` messages, or None."""
    if isinstance(reported, float) and not math.isfinite(reported):
        return "not a finite number"
    if reported < 0:
        return "negative"
    if reported == 0:
        return "zero for a request with messages" if messages else None
    if reported > ABSURD_TOKENS:
        return f"more than {ABSURD_TOKENS:,} tokens"
    if base >= _RATIO_FLOOR and not 1 / ABSURD_RATIO <= reported / base <= ABSURD_RATIO:
        return f"{reported / base:.3g} times the base count of {base}"
    return None


def _shifted(errors: deque[float]) -> bool:
    """The newest ``SHIFT_CALLS`` calls were all off by more than ``SHIFT_ERROR``, the same way."""
    if len(errors) < SHIFT_CALLS:
        return False
    return all(e > SHIFT_ERROR for e in errors) or all(e < -SHIFT_ERROR for e in errors)


def _each(state: Calibration, base: Sequence[int]) -> list[int]:
    scale = 1 + state.margin
    ratio, per_message = state.ratio, state.per_message
    ceil = math.ceil
    costs = [ceil((ratio * b + per_message) * scale) for b in base]
    if costs and min(costs) < 0:  # a negative per-message term, on a short message
        return [max(0, c) for c in costs]
    return costs


def _tools(state: Calibration, base: AdditiveCounter, tools: Sequence[Any]) -> int:
    tools = check_tools(tools)
    if not tools:
        return 0
    return math.ceil(state.ratio * base.count_tools(tools) * (1 + state.margin))


def _overhead(state: Calibration, base: int) -> int:
    return max(0, math.ceil((state.ratio * base + state.per_request) * (1 + state.margin)))


def _estimate(state: Calibration, base: float, n: int) -> int:
    fitted = state.ratio * base + state.per_message * n + state.per_request
    return max(0, math.ceil(fitted * (1 + state.margin)))


def _fit(
    window: Window,
    observations: int,
    *,
    settled: bool,
    max_margin: float,
    start: Coefficients | None = None,
) -> tuple[Calibration, Coefficients | None]:
    """The Huber-weighted fit of ``reported ≈ a * base + b * n + c`` over
    ``window`` (resumed from ``start``, the fit before its newest observation,
    if any), and what the next fit resumes from."""
    prior = window.prior()
    a, b, c = prior, 0.0, 0.0
    resume = None
    if len(window) >= 3:  # noqa: PLR2004 - three parameters
        a, b, c = robust_fit(window, prior, start)
        resume = (a, b, c)
        if a <= 0:
            a, b, c = prior, 0.0, 0.0
            resume = None
    margin = max_margin
    if settled:
        margin = min(max_margin, max(0.0, _worst(window, a, b, c)))
    return Calibration(a, b, c, margin, observations), resume


def _worst(window: Window, a: float, b: float, c: float) -> float:
    """The largest under-estimate ``reported / fitted - 1`` of the window's
    observations fitted above 0 (0 when there is none), in C passes."""
    fits = window.fitted(a, b, c)
    above = list(map(gt, fits, repeat(0.0)))
    highest = max(map(truediv, compress(window.ys, above), compress(fits, above)), default=None)
    return 0.0 if highest is None else highest - 1
