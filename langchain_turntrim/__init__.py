"""Trim a chat history to a token budget, whole turns at a time.

The layers, each depending only on those above it:

* ``_core``: the turn algorithm on plain records (imports nothing from LangChain);
* ``_messages``: LangChain messages in, turn kinds out;
* ``_counting``: the counter interfaces, the built-in counters, the cache;
* ``_trimmer`` (``TurnTrimmer``), ``_drop_in`` (``trim_turns``), with
  ``_options``, ``_report``, ``_errors`` and ``_tracing``;
* integrations: ``_middleware`` (``create_agent``), ``_langgraph``;
* ``_cli``: the ``turntrim`` command.
"""

import importlib
from typing import TYPE_CHECKING, Any

from langchain_turntrim._core import TrimPlan, plan_trim, trim_history
from langchain_turntrim._counting import (
    DEFAULT_CACHE_SIZE,
    ApproximateCounter,
    CachedCounter,
    CalibratedCounter,
    ResolvedCounter,
    TokenCounter,
    WholeListCounter,
    per_list,
    per_message,
    resolve_counter,
)
from langchain_turntrim._messages import TrimInput
from langchain_turntrim._options import Mode, OnOverflow

if TYPE_CHECKING:
    from langchain_turntrim._counting.callback import (
        CalibrationCallback as CalibrationCallback,
    )
    from langchain_turntrim._counting.tiktoken_counter import (
        EncodingUnavailableError as EncodingUnavailableError,
    )
    from langchain_turntrim._counting.tiktoken_counter import TiktokenCounter as TiktokenCounter
    from langchain_turntrim._drop_in import trim_turns as trim_turns
    from langchain_turntrim._errors import TurnTrimOverflowError as TurnTrimOverflowError
    from langchain_turntrim._langgraph import removals as removals
    from langchain_turntrim._langgraph import trim_update as trim_update
    from langchain_turntrim._middleware import TurnTrimMiddleware as TurnTrimMiddleware
    from langchain_turntrim._middleware import TurnTrimStateMiddleware as TurnTrimStateMiddleware
    from langchain_turntrim._report import TrimReport as TrimReport
    from langchain_turntrim._trimmer import TurnTrimmer as TurnTrimmer

__version__ = "0.1.0.dev0"

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "ApproximateCounter",
    "CachedCounter",
    "CalibratedCounter",
    "CalibrationCallback",
    "EncodingUnavailableError",
    "Mode",
    "OnOverflow",
    "ResolvedCounter",
    "TiktokenCounter",
    "TokenCounter",
    "TrimInput",
    "TrimPlan",
    "TrimReport",
    "TurnTrimOverflowError",
    "TurnTrimmer",
    "WholeListCounter",
    "__version__",
    "per_list",
    "per_message",
    "plan_trim",
    "removals",
    "resolve_counter",
    "trim_history",
    "trim_turns",
    "trim_update",
]

# Names imported on first use: the Runnable machinery (LangChain's tracers and
# LangSmith's run trees) and tiktoken are slow to import, and the middleware
# needs an optional extra. The middleware's names are not in __all__, so that
# `from langchain_turntrim import *` works without the extra.
_LAZY = {
    "CalibrationCallback": "langchain_turntrim._counting.callback",
    "TrimReport": "langchain_turntrim._report",
    "TurnTrimOverflowError": "langchain_turntrim._errors",
    "TurnTrimmer": "langchain_turntrim._trimmer",
    "removals": "langchain_turntrim._langgraph",
    "trim_turns": "langchain_turntrim._drop_in",
    "trim_update": "langchain_turntrim._langgraph",
    "EncodingUnavailableError": "langchain_turntrim._counting.tiktoken_counter",
    "TiktokenCounter": "langchain_turntrim._counting.tiktoken_counter",
    "TurnTrimMiddleware": "langchain_turntrim._middleware",  # [agents]
    "TurnTrimStateMiddleware": "langchain_turntrim._middleware",  # [agents]
}


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
