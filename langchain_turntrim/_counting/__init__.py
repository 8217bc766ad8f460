"""Token counting: the two interfaces, the built-in counters, the cache and resolution.

* ``protocol``: ``TokenCounter`` (what a user implements) and
  ``ResolvedCounter`` (what the planner calls);
* ``additive``: planning from per-message counts, for every additive counter;
* ``whole_list``: planning with a counter that only counts whole conversations;
* ``approximate``, ``tiktoken_counter``, ``functions``: the built-in counters;
* ``calibrated``, ``callback``: ``CalibratedCounter``, an estimate fitted to
  reported usage, and the callback handler feeding it (imported on first use);
* ``keys`` and ``cache``: ``CachedCounter`` and what its keys are made of;
* ``tools``: tool schemas priced as messages; ``tool_cache``: tool prices
  remembered under everything a tool's conversion reads;
* ``resolve``: what ``token_counter=`` accepts.

``tiktoken_counter`` is imported on first use (``TiktokenCounter``): loading
tiktoken costs more than the rest of the package.
"""

from langchain_turntrim._counting.additive import AdditiveCounter
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.cache import DEFAULT_CACHE_SIZE, CachedCounter
from langchain_turntrim._counting.calibrated import CalibratedCounter
from langchain_turntrim._counting.functions import per_list, per_message
from langchain_turntrim._counting.protocol import ResolvedCounter, TokenCounter
from langchain_turntrim._counting.resolve import resolve_counter
from langchain_turntrim._counting.whole_list import WholeListCounter

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "AdditiveCounter",
    "ApproximateCounter",
    "CachedCounter",
    "CalibratedCounter",
    "ResolvedCounter",
    "TokenCounter",
    "WholeListCounter",
    "per_list",
    "per_message",
    "resolve_counter",
]
