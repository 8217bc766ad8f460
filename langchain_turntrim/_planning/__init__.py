"""Planning: which whole turns fit, decided with what the counter can do.

* ``additive``: ``AdditivePlanner``, from each message's count (additive
  counters), with ``memo``'s ``HistoryMemo`` of the histories it planned;
* ``calibrated``: ``CalibratedPlanner``, the same for ``CalibratedCounter``,
  remembering base counts and planning under the current calibration;
* ``whole_list``: ``WholeListPlanner``, by searching the counts of whole
  requests (chat models, ``list -> int`` functions);
* ``base``: what they share: ``compact`` (the newest turn fitted in the
  counter's units, see ``_compaction.fit``), ``blocking`` and ``clear``.

Both offer what the decision pipeline calls (``_pipeline.Planner``).
"""

from __future__ import annotations

from typing import Any

from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.calibrated import CalibratedCounter
from langchain_turntrim._counting.resolve import resolve_counter
from langchain_turntrim._planning.additive import AdditivePlanner
from langchain_turntrim._planning.calibrated import CalibratedPlanner
from langchain_turntrim._planning.whole_list import WholeListPlanner

__all__ = [
    "AdditivePlanner",
    "CalibratedPlanner",
    "MessagePlanner",
    "WholeListPlanner",
    "planner_for",
]

#: A planner of LangChain messages.
MessagePlanner = AdditivePlanner | WholeListPlanner


def planner_for(token_counter: Any, cache_size: int) -> MessagePlanner:
    """The planner of what ``token_counter=`` names (resolved with
    ``resolve_counter``), or ``token_counter`` itself when it is one."""
    if isinstance(token_counter, (AdditivePlanner, WholeListPlanner)):
        return token_counter
    counter = resolve_counter(token_counter, cache_size)
    if isinstance(counter, CalibratedCounter):
        return CalibratedPlanner(counter, cache_size)
    if isinstance(counter, AdditiveCounter):
        return AdditivePlanner(counter, cache_size)
    return WholeListPlanner(counter)
