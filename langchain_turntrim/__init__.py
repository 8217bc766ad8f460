"""Trim a chat history to a token budget, whole turns at a time."""

from langchain_turntrim._core import TrimPlan, plan_trim, trim_history

__version__ = "0.1.0.dev0"

__all__ = [
    "TrimPlan",
    "__version__",
    "plan_trim",
    "trim_history",
]
