"""Token counting: counters only count (planning is ``_planning``'s).

* ``protocol``: ``TokenCounter`` (what a user implements) and
  ``ResolvedCounter`` (what every resolved counter offers);
* ``additive``: the base of every additive counter (a request's count is the
  sum of its parts); ``whole_list``: ``WholeListCounter``, which counts only
  whole requests (chat models, ``list -> int`` functions);
* ``approximate``, ``functions`` (``per_message``, ``per_list``) and
  ``openai`` (``TiktokenCounter``, OpenAI's rules): the built-in counters;
* ``calibrated``, ``callback``: ``CalibratedCounter``, an estimate fitted to
  reported usage, and the callback handler feeding it (imported on first use);
* ``keys`` and ``cache``: ``CachedCounter`` and what its keys are made of;
  ``lru``: the bounded, thread-safe map of the count caches and tool prices;
* ``tools``: tool schemas priced as messages, and tool prices remembered;
* ``resolve``: what ``token_counter=`` accepts.

``openai.chat`` counts plain OpenAI message dicts without LangChain, for the
``turntrim`` command; so every name here is imported on first use, and
``openai.counter`` only when ``TiktokenCounter`` is (loading tiktoken costs
more than the rest of the package).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_turntrim._counting.additive import AdditiveCounter as AdditiveCounter
    from langchain_turntrim._counting.approximate import (
        ApproximateCounter as ApproximateCounter,
    )
    from langchain_turntrim._counting.cache import CachedCounter as CachedCounter
    from langchain_turntrim._counting.calibrated import CalibratedCounter as CalibratedCounter
    from langchain_turntrim._counting.functions import per_list as per_list
    from langchain_turntrim._counting.functions import per_message as per_message
    from langchain_turntrim._counting.protocol import ResolvedCounter as ResolvedCounter
    from langchain_turntrim._counting.protocol import TokenCounter as TokenCounter
    from langchain_turntrim._counting.resolve import Resolved as Resolved
    from langchain_turntrim._counting.resolve import resolve_counter as resolve_counter
    from langchain_turntrim._counting.whole_list import WholeListCounter as WholeListCounter

__all__ = [
    "AdditiveCounter",
    "ApproximateCounter",
    "CachedCounter",
    "CalibratedCounter",
    "Resolved",
    "ResolvedCounter",
    "TokenCounter",
    "WholeListCounter",
    "per_list",
    "per_message",
    "resolve_counter",
]

# Imported on first use: the counters need LangChain's messages, which
# ``openai.chat`` (the ``turntrim`` command's plain path) does without.
_LAZY: dict[str, str] = {
    "AdditiveCounter": "additive",
    "ApproximateCounter": "approximate",
    "CachedCounter": "cache",
    "CalibratedCounter": "calibrated",
    "per_list": "functions",
    "per_message": "functions",
    "ResolvedCounter": "protocol",
    "TokenCounter": "protocol",
    "Resolved": "resolve",
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
