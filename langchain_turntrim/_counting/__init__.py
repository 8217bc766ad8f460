"""Token counting: the two interfaces, the built-in counters, the cache and resolution.

* ``protocol``: ``TokenCounter`` (what a user implements) and
  ``ResolvedCounter`` (what the planner calls);
* ``additive``: planning from per-message counts, for every additive counter;
* ``whole_list``: planning with a counter that only counts whole conversations;
* ``approximate``, ``tiktoken_counter``, ``functions``: the built-in counters;
* ``calibrated``, ``callback``: ``CalibratedCounter``, an estimate fitted to
  reported usage, and the callback handler feeding it (imported on first use);
* ``keys`` and ``cache``: ``CachedCounter`` and what its keys are made of;
  ``lru``: the bounded, thread-safe map behind every cache;
* ``tools``: tool schemas priced as messages; ``tool_cache``: tool prices
  remembered under everything a tool's conversion reads;
* ``resolve``: what ``token_counter=`` accepts.

``openai_chat`` counts plain OpenAI message dicts without LangChain, for the
``turntrim`` command; so every name here is imported on first use, and
``tiktoken_counter`` only when ``TiktokenCounter`` is (loading tiktoken costs
more than the rest of the package).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_turntrim._counting.additive import AdditiveCounter as AdditiveCounter
    from langchain_turntrim._counting.approximate import (
        ApproximateCounter as ApproximateCounter,
    )
    from langchain_turntrim._counting.cache import DEFAULT_CACHE_SIZE as DEFAULT_CACHE_SIZE
    from langchain_turntrim._counting.cache import CachedCounter as CachedCounter
    from langchain_turntrim._counting.calibrated import CalibratedCounter as CalibratedCounter
    from langchain_turntrim._counting.functions import per_list as per_list
    from langchain_turntrim._counting.functions import per_message as per_message
    from langchain_turntrim._counting.protocol import ResolvedCounter as ResolvedCounter
    from langchain_turntrim._counting.protocol import TokenCounter as TokenCounter
    from langchain_turntrim._counting.resolve import resolve_counter as resolve_counter
    from langchain_turntrim._counting.whole_list import WholeListCounter as WholeListCounter

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

# Imported on first use: the counters need LangChain's messages, which
# ``openai_chat`` (the ``turntrim`` command's plain path) does without.
_LAZY: dict[str, str] = {
    "AdditiveCounter": "additive",
    "ApproximateCounter": "approximate",
    "DEFAULT_CACHE_SIZE": "cache",
    "CachedCounter": "cache",
    "CalibratedCounter": "calibrated",
    "per_list": "functions",
    "per_message": "functions",
    "ResolvedCounter": "protocol",
    "TokenCounter": "protocol",
    "resolve_counter": "resolve",
    "WholeListCounter": "whole_list",
}


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
