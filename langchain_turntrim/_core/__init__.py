"""The turn-atomic trimming algorithm, on plain data (imports nothing from LangChain).

* ``kinds``: the five turn kinds, the roles mapping to them, and the shared
  validators (counts, ``trim_to``, how an error names a message);
* ``grouping``: messages (kinds and costs) grouped into turns, resumably;
* ``plan``: ``TrimPlan``, and which newest turns fit a budget;
* ``stable``: ``trim_to``'s cut points, which stay put as a history grows;
* ``records``: the plain-record API, ``plan_trim`` and ``trim_history``.

Whole turns are dropped from the oldest end until the pinned cost plus the
kept turns fits the budget; messages before the first turn are discarded.
"""

from langchain_turntrim._core.grouping import Grouping, plan_costs, previous_call
from langchain_turntrim._core.kinds import (
    ANCHOR,
    CHAT_ROLE_KINDS,
    CONTINUE,
    PINNED,
    REPLY,
    ROLE_KINDS,
    START,
    check_count,
    check_kinds,
    check_trim_to,
    describe,
    request_order,
)
from langchain_turntrim._core.plan import Previous, TrimPlan, plan_turns
from langchain_turntrim._core.records import plan_trim, trim_history

__all__ = [
    "ANCHOR",
    "CHAT_ROLE_KINDS",
    "CONTINUE",
    "PINNED",
    "REPLY",
    "ROLE_KINDS",
    "START",
    "Grouping",
    "Previous",
    "TrimPlan",
    "check_count",
    "check_kinds",
    "check_trim_to",
    "describe",
    "plan_costs",
    "plan_trim",
    "plan_turns",
    "previous_call",
    "request_order",
    "trim_history",
]
