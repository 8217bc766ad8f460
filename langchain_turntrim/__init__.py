"""Trim a chat history to a token budget, whole turns at a time.

The layers, each depending only on those above it:

* ``_core``: the turn algorithm on plain records (imports nothing from LangChain);
* ``_options``, ``_report``, ``_pipeline``: the options, the decision and the
  one pipeline that makes it (nothing from LangChain either);
* ``_messages``: LangChain messages in, turn kinds out;
* ``_counting``: the counters, which only count; ``_planning``: the planners,
  chosen by what the counter can do; ``_compaction``: the newest turn compacted;
* entry points, each an adapter of the pipeline: ``_trimmer`` (``TurnTrimmer``),
  ``_drop_in`` (``trim_turns``), ``_middleware`` and ``_state_middleware``
  (``create_agent``),
  ``_langgraph``, ``_cli`` (the ``turntrim`` command); with ``_sizing``
  (``for_model``), ``_errors`` and ``_tracing``;
* what is sent: ``_calls`` (calls without their results left out),
  ``_overflow`` and ``_recovery`` (a provider's context-overflow error: trim
  tighter and call again);
* what the prompt cache costs: ``_core.depth`` (``trim_to="auto"``'s cut,
  priced), ``_cache_rules`` (the providers' cache rules, as data) and
  ``_cache_timing`` (the middlewares' per-thread clock and cache figures).
"""

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from langchain_turntrim._cache_rules import (
    CACHE_RULES,
    CACHE_RULES_DATE,
    DEFAULT_CACHE_PRICE,
    CacheRule,
    cache_price_for,
)
from langchain_turntrim._core import TrimPlan, plan_trim, trim_history
from langchain_turntrim._core.depth import CachePrice
from langchain_turntrim._options import Mode, OnOverflow, TrimOptions
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from langchain_turntrim._cache_timing import CacheTotals as CacheTotals
    from langchain_turntrim._counting import ApproximateCounter as ApproximateCounter
    from langchain_turntrim._counting import CalibratedCounter as CalibratedCounter
    from langchain_turntrim._counting import TokenCounter as TokenCounter
    from langchain_turntrim._counting import per_list as per_list
    from langchain_turntrim._counting import per_message as per_message
    from langchain_turntrim._counting.openai.counter import (
        EncodingUnavailableError as EncodingUnavailableError,
    )
    from langchain_turntrim._counting.openai.counter import TiktokenCounter as TiktokenCounter
    from langchain_turntrim._drop_in import trim_turns as trim_turns
    from langchain_turntrim._errors import TurnTrimOverflowError as TurnTrimOverflowError
    from langchain_turntrim._langgraph import removals as removals
    from langchain_turntrim._langgraph import trim_update as trim_update
    from langchain_turntrim._middleware import TurnTrimMiddleware as TurnTrimMiddleware
    from langchain_turntrim._recovery import OverflowRetry as OverflowRetry
    from langchain_turntrim._state_middleware import (
        TurnTrimStateMiddleware as TurnTrimStateMiddleware,
    )
    from langchain_turntrim._trimmer import TurnTrimmer as TurnTrimmer

__version__ = "0.1.0.dev0"

# Names imported on first use: LangChain's messages, its Runnable machinery
# (tracers, LangSmith's run trees) and tiktoken are slow to import (the
# `turntrim` command trims a plain transcript with none but tiktoken), and the
# middleware needs an optional extra.
_LAZY = {
    "CacheTotals": "langchain_turntrim._cache_timing",
    "ApproximateCounter": "langchain_turntrim._counting",
    "CalibratedCounter": "langchain_turntrim._counting",
    "TokenCounter": "langchain_turntrim._counting",
    "per_list": "langchain_turntrim._counting",
    "per_message": "langchain_turntrim._counting",
    "EncodingUnavailableError": "langchain_turntrim._counting.openai.counter",
    "TiktokenCounter": "langchain_turntrim._counting.openai.counter",
    "TurnTrimOverflowError": "langchain_turntrim._errors",
    "OverflowRetry": "langchain_turntrim._recovery",
    "TurnTrimmer": "langchain_turntrim._trimmer",
    "trim_turns": "langchain_turntrim._drop_in",
    "removals": "langchain_turntrim._langgraph",
    "trim_update": "langchain_turntrim._langgraph",
    "TurnTrimMiddleware": "langchain_turntrim._middleware",  # [agents]
    "TurnTrimStateMiddleware": "langchain_turntrim._state_middleware",  # [agents]
}

__all__ = [
    "CACHE_RULES",
    "CACHE_RULES_DATE",
    "DEFAULT_CACHE_PRICE",
    "ApproximateCounter",
    "CachePrice",
    "CacheRule",
    "CacheTotals",
    "CalibratedCounter",
    "EncodingUnavailableError",
    "Mode",
    "OnOverflow",
    "OverflowRetry",
    "TiktokenCounter",
    "TokenCounter",
    "TrimOptions",
    "TrimPlan",
    "TrimReport",
    "TurnTrimOverflowError",
    "TurnTrimmer",
    "__version__",
    "cache_price_for",
    "per_list",
    "per_message",
    "plan_trim",
    "removals",
    "trim_history",
    "trim_turns",
    "trim_update",
]
# The middleware needs the [agents] extra: it is public where LangChain's agents
# can be imported, so `from langchain_turntrim import *` works without them.
if importlib.util.find_spec("langchain") is not None:
    __all__ += ["TurnTrimMiddleware", "TurnTrimStateMiddleware"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
