"""The whole-list count cache is bounded in bytes as well as in requests."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_turntrim import per_list
from langchain_turntrim._counting.lru import SizedLRU
from langchain_turntrim._counting.whole_list import DEFAULT_CACHE_BYTES, WholeListCounter


def history(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for t in range(turns):
        messages += [HumanMessage(f"question {t} " * (t % 7 + 1)), AIMessage(f"answer {t} " * 9)]
    return messages


@given(
    operations=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 400)), max_size=200),
    maxsize=st.integers(0, 12),
    maxbytes=st.integers(0, 1_000),
)
def test_a_sized_lru_keeps_the_newest_entries_within_both_bounds(
    operations: list[tuple[int, int]], maxsize: int, maxbytes: int
) -> None:
    lru: SizedLRU[int] = SizedLRU(maxsize, maxbytes)
    model: OrderedDict[int, int] = OrderedDict()  # key -> size, oldest first
    for key, size in operations:
        lru.put(key, key, size)
        if maxsize and size <= maxbytes:
            model.pop(key, None)
            model[key] = size
            while len(model) > maxsize or sum(model.values()) > maxbytes:
                model.popitem(last=False)
        assert len(lru) == len(model)
        assert lru.nbytes == sum(model.values()) <= maxbytes
    assert [k for k in model if lru.get(k) == k] == list(model)


def test_a_sized_lru_takes_sizes() -> None:
    lru: SizedLRU[int] = SizedLRU(4, 100)
    with pytest.raises(TypeError, match=r"use put\(key, value, size\)"):
        lru.put_many([("a", 1)])
    with pytest.raises(ValueError, match="maxbytes must be >= 0"):
        SizedLRU(4, -1)
    with pytest.raises(ValueError, match="cache_bytes must be >= 0"):
        WholeListCounter(len, cache_bytes=-1)


def lengths(messages: Sequence[BaseMessage]) -> int:
    return sum(len(m.text) + 3 for m in messages)


def test_the_whole_list_cache_holds_at_most_its_bytes() -> None:
    counter = WholeListCounter(lengths, cache_size=10_000, cache_bytes=50_000)
    assert WholeListCounter(lengths).cache_bytes == DEFAULT_CACHE_BYTES
    messages = history(100)
    for end in range(1, len(messages) + 1):
        assert counter.count(messages[:end]) == lengths(messages[:end])
        assert counter.cached_bytes <= 50_000
    assert 0 < len(counter) < len(messages)  # the oldest requests left
    assert counter.remembered(messages) == lengths(messages)
    assert counter.remembered(messages[:1]) is None
    counter.clear()
    assert counter.cached_bytes == 0


def test_the_byte_bound_survives_copies_and_resizing() -> None:
    counter = WholeListCounter(lengths, cache_bytes=12_345)
    assert counter.resized(10).cache_bytes == 12_345
    assert pickle.loads(pickle.dumps(counter)).cache_bytes == 12_345  # noqa: S301
    assert copy.deepcopy(counter).cache_bytes == 12_345
    assert per_list(lengths).cache_bytes == DEFAULT_CACHE_BYTES
