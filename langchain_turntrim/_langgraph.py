"""Trims as LangGraph state updates, for graphs whose messages use ``add_messages``
(a ``RemoveMessage`` in a node's update deletes the message with its id)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, RemoveMessage

from langchain_turntrim._core import describe
from langchain_turntrim._report import TrimReport

if TYPE_CHECKING:
    from langchain_turntrim._trimmer import TrimInput, TurnTrimmer

__all__ = ["removals", "trim_update"]


def removals(report: TrimReport[BaseMessage]) -> list[RemoveMessage]:
    """One ``RemoveMessage`` per message the trim removes from a state
    (``report.removed``): nothing while every turn fits, messages before the
    first user message only with the first dropped turn, and never the newest
    turn (the task in progress). ``ValueError`` naming a removed message
    without an id (``add_messages`` gives every message it stores one)."""
    removed: list[RemoveMessage] = []
    for index, message in zip(report.plan.removed, report.removed, strict=True):
        if not message.id:
            where = describe(index, message)
            msg = f"{where} is dropped but has no id, so no RemoveMessage can delete it"
            raise ValueError(msg)
        removed.append(RemoveMessage(id=message.id))
    return removed


def trim_update(
    messages: TrimInput, trimmer: TurnTrimmer, *, key: str = "messages"
) -> dict[str, Any]:
    """The state update that trims ``messages`` in place: ``{key: [RemoveMessage, ...]}``.

    Return it from a node before the model's, in a graph whose ``key`` channel
    uses ``add_messages``: the dropped turns leave the state and the checkpoint.

    Examples:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_turntrim import TurnTrimmer
        >>> history = [HumanMessage("a" * 40, id="h1"), AIMessage("b" * 40, id="a1"),
        ...            HumanMessage("hi", id="h2")]
        >>> [m.id for m in trim_update(history, TurnTrimmer(max_tokens=10))["messages"]]
        ['h1', 'a1']
    """
    return {key: removals(trimmer.trim_with_report(messages))}
