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
from langchain_turntrim._options import Mode, OnOverflow

if TYPE_CHECKING:
    from langchain_turntrim._counting import DEFAULT_CACHE_SIZE as DEFAULT_CACHE_SIZE
    from langchain_turntrim._counting import ApproximateCounter as ApproximateCounter
    from langchain_turntrim._counting import CachedCounter as CachedCounter
    from langchain_turntrim._counting import CalibratedCounter as CalibratedCounter
    from langchain_turntrim._counting import ResolvedCounter as ResolvedCounter
    from langchain_turntrim._counting import TokenCounter as TokenCounter
    from langchain_turntrim._counting import WholeListCounter as WholeListCounter
    from langchain_turntrim._counting import per_list as per_list
    from langchain_turntrim._counting import per_message as per_message
    from langchain_turntrim._counting import resolve_counter as resolve_counter
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
    from langchain_turntrim._messages import TrimInput as TrimInput
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

# Names imported on first use: LangChain's messages, its Runnable machinery
# (tracers, LangSmith's run trees) and tiktoken are slow to import (the
# `turntrim` command trims a plain transcript with none but tiktoken), and the
# middleware needs an optional extra. The middleware's names are not in
# __all__, so that `from langchain_turntrim import *` works without the extra.
_LAZY = {
    "DEFAULT_CACHE_SIZE": "langchain_turntrim._counting",
    "ApproximateCounter": "langchain_turntrim._counting",
    "CachedCounter": "langchain_turntrim._counting",
    "CalibratedCounter": "langchain_turntrim._counting",
    "ResolvedCounter": "langchain_turntrim._counting",
    "TokenCounter": "langchain_turntrim._counting",
    "WholeListCounter": "langchain_turntrim._counting",
    "per_list": "langchain_turntrim._counting",
    "per_message": "langchain_turntrim._counting",
    "resolve_counter": "langchain_turntrim._counting",
    "TrimInput": "langchain_turntrim._messages",
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
