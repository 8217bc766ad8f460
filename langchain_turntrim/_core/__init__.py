"""The turn rule on plain data: kinds, turns, the plan, and the spec on records.

Imports nothing from LangChain.
"""

from langchain_turntrim._core.records import (
    ROLE_KINDS,
    check_count,
    check_rate,
    check_trim_to,
    describe,
    plan_trim,
    scaled,
    shown,
    trim_history,
)
from langchain_turntrim._core.stable import Cut
from langchain_turntrim._core.turns import (
    ANCHOR,
    CONTINUE,
    PINNED,
    REPLY,
    START,
    Count,
    TrimPlan,
    Turns,
    group,
    plan,
)

__all__ = [
    "ANCHOR",
    "CONTINUE",
    "PINNED",
    "REPLY",
    "ROLE_KINDS",
    "START",
    "Count",
    "Cut",
    "TrimPlan",
    "Turns",
    "check_count",
    "check_rate",
    "check_trim_to",
    "describe",
    "group",
    "plan",
    "plan_trim",
    "scaled",
    "shown",
    "trim_history",
]
