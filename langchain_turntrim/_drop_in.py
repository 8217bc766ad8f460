"""``trim_turns``: a drop-in for ``langchain_core.messages.trim_messages``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, overload

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable

from langchain_turntrim._messages import TrimInput
from langchain_turntrim._options import TrimOptions
from langchain_turntrim._safe_repr import safe_repr
from langchain_turntrim._trimmer import TurnTrimmer

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from langchain_turntrim._options import TrimKeywords

__all__ = ["trim_turns"]

_HUMAN = ("human", HumanMessage)


def _is_human(start_on: object) -> bool:
    if start_on is None or start_on in _HUMAN:
        return True
    return (
        isinstance(start_on, Sequence)
        and not isinstance(start_on, str)
        and len(start_on) == 1
        and start_on[0] in _HUMAN
    )


@overload
def trim_turns(
    messages: None = None,
    *,
    max_tokens: int,
    strategy: str = ...,
    start_on: Any = ...,
    include_system: bool = ...,
    allow_partial: bool = ...,
    end_on: Any = ...,
    text_splitter: Callable[[str], list[str]] | None = ...,
    **options: Unpack[TrimKeywords],
) -> Runnable[TrimInput, list[BaseMessage]]: ...
@overload
def trim_turns(
    messages: TrimInput,
    *,
    max_tokens: int,
    strategy: str = ...,
    start_on: Any = ...,
    include_system: bool = ...,
    allow_partial: bool = ...,
    end_on: Any = ...,
    text_splitter: Callable[[str], list[str]] | None = ...,
    **options: Unpack[TrimKeywords],
) -> list[BaseMessage]: ...
def trim_turns(
    messages: TrimInput | None = None,
    *,
    max_tokens: int,
    strategy: str = "last",
    start_on: Any = "human",
    include_system: bool = True,
    allow_partial: bool = False,
    end_on: Any = None,
    text_splitter: Callable[[str], list[str]] | None = None,
    **options: Unpack[TrimKeywords],
) -> list[BaseMessage] | Runnable[TrimInput, list[BaseMessage]]:
    """Trim whole turns with ``trim_messages``' calling convention.

    Replaces ``trim_messages(messages, max_tokens=..., token_counter=...,
    strategy="last", start_on="human", include_system=True)``: given
    ``messages`` it returns the trimmed list; without them it returns a
    Runnable (a ``TurnTrimmer``). Options that would split a turn or drop a
    system message (``strategy="first"``, ``allow_partial=True``, ``end_on``,
    ``include_system=False``, a ``start_on`` other than human) raise
    ``ValueError``. ``start_on=None`` is accepted: the result starts on a
    human message anyway. ``token_counter``, ``on_overflow``,
    ``keep_tool_results``, ``trim_to`` and ``cache_size`` mean what they mean for
    ``TurnTrimmer``, with the same defaults (``on_overflow="compact"`` keeps
    the newest turn, compacted, where ``trim_messages`` would return little or
    nothing).
    """
    problems = []
    if strategy != "last":
        problems.append(f"strategy={safe_repr(strategy, 80)} (only 'last' keeps the newest turns)")
    if not _is_human(start_on):
        problems.append(
            f"start_on={safe_repr(start_on, 80)} (turns always start on a human message)"
        )
    if include_system is not True:
        problems.append(
            f"include_system={safe_repr(include_system, 80)} (system messages are always kept)"
        )
    if allow_partial is not False:
        problems.append(f"allow_partial={safe_repr(allow_partial, 80)} (messages are never split)")
    if end_on is not None:
        problems.append(f"end_on={safe_repr(end_on, 80)} (turns are never ended early)")
    if text_splitter is not None:
        problems.append("text_splitter (messages are never split)")
    if problems:
        msg = "trim_turns does not support " + "; ".join(problems)
        raise ValueError(msg)
    trimmer = TurnTrimmer.from_options(TrimOptions.of("trim_turns", max_tokens, dict(options)))
    if messages is None:
        return trimmer
    return trimmer.trim(messages)
