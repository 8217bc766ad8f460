"""Trim a chat history to a token budget, whole turns at a time."""

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
from langchain_turntrim._protocol import TokenCounter
from langchain_turntrim._runnable import TrimReport, TurnTrimmer, TurnTrimOverflowError
from langchain_turntrim._tiktoken import EncodingUnavailableError, TiktokenCounter

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
    "trim_history",
    "trim_turns",
]
