"""Trim a LangChain chat history to a token budget, whole turns at a time."""

import importlib.util
from typing import TYPE_CHECKING, Any

from langchain_turntrim._core import TrimPlan, plan_trim, trim_history

if TYPE_CHECKING:
    from langchain_turntrim._counting import ApproximateCounter, CalibratedCounter
    from langchain_turntrim._counting.base import TokenCounter, per_list, per_message
    from langchain_turntrim._counting.openai import EncodingUnavailableError, TiktokenCounter
    from langchain_turntrim._langgraph import removals, trim_update
    from langchain_turntrim._middleware import TurnTrimMiddleware as TurnTrimMiddleware
    from langchain_turntrim._middleware import TurnTrimStateMiddleware as TurnTrimStateMiddleware
    from langchain_turntrim._options import TrimOptions
    from langchain_turntrim._recovery import OverflowRetry
    from langchain_turntrim._report import Compaction, TrimReport, TurnTrimOverflowError
    from langchain_turntrim._trimmer import TurnTrimmer, trim_turns

__version__ = "0.1.0.dev0"

# Imported on first use: LangChain's Runnables and tiktoken are slow to import,
# and the middlewares need the [agents] extra.
_LAZY = {
    name: module
    for module, names in [
        ("_trimmer", "trim_turns TurnTrimmer"),
        ("_middleware", "TurnTrimMiddleware TurnTrimStateMiddleware"),
        ("_langgraph", "trim_update removals"),
        ("_recovery", "OverflowRetry"),
        ("_report", "TrimReport Compaction TurnTrimOverflowError"),
        ("_options", "TrimOptions"),
        ("_counting", "ApproximateCounter CalibratedCounter"),
        ("_counting.base", "TokenCounter per_message per_list"),
        ("_counting.openai", "TiktokenCounter EncodingUnavailableError"),
    ]
    for name in names.split()
}

# In the README's order: entry points, results, counters, options, errors.
__all__ = [  # noqa: RUF022
    "trim_turns",
    "TurnTrimmer",
    "trim_update",
    "removals",
    "trim_history",
    "plan_trim",
    "OverflowRetry",
    "TrimReport",
    "TrimPlan",
    "Compaction",
    "TokenCounter",
    "ApproximateCounter",
    "TiktokenCounter",
    "CalibratedCounter",
    "per_message",
    "per_list",
    "TrimOptions",
    "TurnTrimOverflowError",
    "EncodingUnavailableError",
]
# The middlewares need the [agents] extra: public where LangChain's agents are.
if importlib.util.find_spec("langchain") is not None:
    __all__[2:2] = ["TurnTrimMiddleware", "TurnTrimStateMiddleware"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
