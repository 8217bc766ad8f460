"""The ``held`` scenario: the memory an exact trimmer's cache holds, per message.

A 10,000-message history is trimmed as an agent loop trims it (its last model
calls, then the whole history) by one fresh exact trimmer, with ``tracemalloc``
tracing from just before the first call; the figure is the Python-level bytes
still allocated after the last call (the trimmer's cache: the messages were
built before tracing started), over the number of messages.
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Final

from benchmarks.conversations import assistant_steps, fresh_messages
from benchmarks.encoding import exact_counter
from benchmarks.report import Row, Target
from benchmarks.timing import BUDGET_FRACTION, Settings
from langchain_turntrim import TurnTrimmer

__all__ = ["held"]

MESSAGES: Final = 10_000
#: The agent loop's last model calls trimmed before the whole history.
LAST_CALLS: Final = 3


def held(settings: Settings) -> list[Row]:
    base = settings.source.conversation(MESSAGES)
    messages = fresh_messages(base, "held")
    counter = exact_counter()
    budget = int(counter.count(messages) * BUDGET_FRACTION)
    trimmer = TurnTrimmer(budget, token_counter=counter)
    TurnTrimmer(budget, token_counter=counter).trim(messages[:2])  # lazy imports, loaded
    ends = [*assistant_steps(base)[-LAST_CALLS:], len(messages)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for end in ends:
            trimmer.trim(messages[:end])
        gc.collect()
        held_bytes = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    row = Row(
        f"cache memory, {len(messages):,} msgs, exact",
        f"bytes a trimmer holds after trimming them (its last {LAST_CALLS} calls, then all), "
        "per message (tracemalloc)",
        Target("<=", 400, unit="B"),
        held_bytes / len(messages),
        details={"messages": len(messages), "held_bytes": held_bytes, "trims": len(ends)},
    )
    return [row]
