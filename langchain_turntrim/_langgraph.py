"""Trims as LangGraph state updates, for graphs whose messages use ``add_messages``.

Nothing here imports ``langgraph``: a ``RemoveMessage`` (from
``langchain_core``) in a node's ``{"messages": [...]}`` update is what
``add_messages`` reads as "delete the message with this id".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, RemoveMessage

from langchain_turntrim._messages import TrimInput, describe
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from langchain_turntrim._trimmer import TurnTrimmer

__all__ = ["removals", "remove_messages", "trim_update"]


def removals(report: TrimReport[BaseMessage]) -> list[RemoveMessage]:
    """One ``RemoveMessage`` per message the trim removes from a state
    (``report.removed``), in order.

    Nothing is removed while every turn fits; messages before the first user
    message go only together with the first dropped turn; the newest turn
    (the task in progress) is never deleted, even when it was dropped or
    compacted for the model call: the state keeps it whole.

    Raises ``ValueError`` naming the message's index in the trimmed list if a
    removed message has no id. Messages stored by ``add_messages`` always have
    one (it assigns a UUID to every message that lacks an id), so this only
    happens for lists that did not come from such a state.
    """
    return remove_messages(zip(report.removed_indices, report.removed, strict=True))


def remove_messages(indexed: Iterable[tuple[int, BaseMessage]]) -> list[RemoveMessage]:
    """``RemoveMessage`` for each ``(index, message)``; ``ValueError`` if one has no id."""
    removed: list[RemoveMessage] = []
    for index, message in indexed:
        if not message.id:
            msg = (
                f"{describe(index, message)} is dropped but has no id, so no RemoveMessage "
                "can delete it from the state (add_messages gives every message it stores one)"
            )
            raise ValueError(msg)
        removed.append(RemoveMessage(id=message.id))
    return removed


def trim_update(
    messages: TrimInput, trimmer: TurnTrimmer, *, key: str = "messages"
) -> dict[str, Any]:
    """The state update that trims ``messages`` in place: ``{key: [RemoveMessage, ...]}``.

    Return it from a node (before the model's node) of a graph whose ``key``
    channel uses ``add_messages``: the dropped messages leave the state, and
    the checkpoint, for good, and the state is what the trimmer keeps. The
    list is empty when nothing is dropped. The newest turn is never deleted,
    even when it alone exceeds the budget: the graph keeps the task, and the
    model node decides what to send (``on_overflow="compact"`` compacts it for
    the call; ``"raise"`` makes this node raise ``TurnTrimOverflowError``).

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_turntrim import TurnTrimmer
        >>> history = [HumanMessage("a" * 40, id="h1"), AIMessage("b" * 40, id="a1"),
        ...            HumanMessage("hi", id="h2")]
        >>> [m.id for m in trim_update(history, TurnTrimmer(max_tokens=10))["messages"]]
        ['h1', 'a1']
    """
    return {key: removals(trimmer.trim_with_report(messages))}
