"""Trim a chat history to a token budget, whole turns at a time."""

import importlib
from typing import TYPE_CHECKING, Any

from langchain_turntrim._compat import trim_turns
from langchain_turntrim._core import TrimPlan, plan_trim, trim_history
from langchain_turntrim._counters import (
    DEFAULT_CACHE_SIZE,
    ApproximateCounter,
    CachedCounter,
    WholeListCounter,
    per_list,
    per_message,
)
from langchain_turntrim._langgraph import removals, trim_update
from langchain_turntrim._protocol import TokenCounter
from langchain_turntrim._runnable import TrimReport, TurnTrimmer, TurnTrimOverflowError
from langchain_turntrim._tiktoken import EncodingUnavailableError, TiktokenCounter

if TYPE_CHECKING:
    from langchain_turntrim._middleware import TurnTrimMiddleware as TurnTrimMiddleware

__version__ = "0.1.0.dev0"

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "ApproximateCounter",
    "CachedCounter",
    "EncodingUnavailableError",
    "TiktokenCounter",
    "TokenCounter",
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
    "trim_history",
    "trim_turns",
    "trim_update",
]

# Names that need an optional extra, imported on first use. Not in __all__, so
# that `from langchain_turntrim import *` works without the extra.
_LAZY = {"TurnTrimMiddleware": "langchain_turntrim._middleware"}  # [agents]


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
