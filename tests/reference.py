"""A deliberately naive trimmer written straight from the spec text.

It re-sums the kept turns after every drop and builds index sets: slow and
obvious, which is the point. The product is checked against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PINNED_ROLES = ("system", "developer")


def reference_trim(messages: Sequence[Mapping[str, Any]], max_tokens: int) -> list[Any]:
    # 1. Sum the tokens of all system messages. This is the base cost.
    base = sum(m["tokens"] for m in messages if m["role"] in PINNED_ROLES)
    # 2. Group the remaining messages into turns. A turn starts at a user
    #    message and includes every message after it up to the next user
    #    message. Non-system messages before the first user message belong to
    #    no turn and are discarded.
    turns: list[list[int]] = []
    for i, m in enumerate(messages):
        if m["role"] in PINNED_ROLES:
            continue
        if m["role"] == "user":
            turns.append([i])
        elif turns:
            turns[-1].append(i)

    # 3. While the total (base + kept turns) exceeds max_tokens, drop the
    #    oldest remaining turn.
    def total() -> int:
        return int(base + sum(messages[i]["tokens"] for turn in turns for i in turn))

    while turns and total() > max_tokens:
        turns.pop(0)
    # 4. If the system messages alone still exceed the budget, only they are
    #    left, which the loop above already gives.
    keep = {i for turn in turns for i in turn}
    keep |= {i for i, m in enumerate(messages) if m["role"] in PINNED_ROLES}
    return [m for i, m in enumerate(messages) if i in keep]


def reference_start_moved(messages: Sequence[Mapping[str, Any]], max_tokens: int) -> bool:
    """Whether this call's first kept turn differs from the previous model call's.

    The previous model call was sent the history up to, not including, its
    newest assistant message; a move is a different first kept message after
    the pinned ones, where the previous call kept one.
    """
    replies = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not replies:
        return False

    def first_kept(history: Sequence[Mapping[str, Any]]) -> Any:
        kept = reference_trim(history, max_tokens)
        return next((m for m in kept if m["role"] not in PINNED_ROLES), None)

    before = first_kept(messages[: replies[-1]])
    return before is not None and before is not first_kept(messages)
