"""Token counters, which only count; ``openai`` (tiktoken, slow to load) loads on first use."""

from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.base import ListCounter, checked_counts
from langchain_turntrim._counting.cache import LRU, CountCache
from langchain_turntrim._counting.calibrated import CalibratedCounter
from langchain_turntrim._counting.resolve import openai_counter, resolve_counter

__all__ = [
    "LRU",
    "ApproximateCounter",
    "CalibratedCounter",
    "CountCache",
    "ListCounter",
    "checked_counts",
    "openai_counter",
    "resolve_counter",
]
