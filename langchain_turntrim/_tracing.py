"""Where a trim shows up: one DEBUG line on the ``langchain_turntrim`` logger,
and, inside a run that a callback handler watches, a ``"turntrim"`` custom
event carrying the same summary (``astream_events``, ``on_custom_event``) and
the summary in the metadata of the LangSmith span it runs in, if any.
Nothing is built when nobody would read it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from langchain_core.callbacks import (
    BaseCallbackManager,
    CallbackManager,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.runnables.config import ensure_config

from langchain_turntrim._report import TrimReport

__all__ = ["EVENT", "arecord", "observed", "record"]

logger = logging.getLogger("langchain_turntrim")
#: The custom event (and metadata key) of every trim.
EVENT: Final = "turntrim"


def observed(callbacks: Callbacks) -> bool:
    """Whether a callback handler would see a run made with ``callbacks``
    (passed, inherited from the enclosing run, or tracing)."""
    return bool(CallbackManager.configure(inheritable_callbacks=callbacks).handlers)


def _summary(report: TrimReport[Any], extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Log the trim's summary; when a handler watches the run the caller executes
    in, add it to the run's LangSmith span and return it for the event (else None)."""
    own = ensure_config().get("callbacks")
    watched = (
        isinstance(own, BaseCallbackManager)
        and own.parent_run_id is not None
        and bool(own.handlers or own.inheritable_handlers)
    )
    if not watched and not logger.isEnabledFor(logging.DEBUG):
        return None
    summary = {**report.summary(), **(extra or {})}
    logger.debug(
        "trimmed %(messages_before)d -> %(messages_after)d messages: dropped %(dropped_turns)d "
        "of %(turns)d turns, %(tokens_after)d tokens of %(max_tokens)d",
        summary,
    )
    if not watched:
        return None
    from langsmith.run_helpers import get_current_run_tree  # noqa: PLC0415

    span = get_current_run_tree()
    if span is not None:
        span.add_metadata({EVENT: summary})
    return summary


def record(report: TrimReport[Any], *, extra: Mapping[str, Any] | None = None) -> None:
    """Log a trim and tell the run the caller executes in."""
    summary = _summary(report, extra)
    if summary is not None:
        dispatch_custom_event(EVENT, summary)


async def arecord(report: TrimReport[Any], *, extra: Mapping[str, Any] | None = None) -> None:
    """``record`` for async code: the event is awaited."""
    summary = _summary(report, extra)
    if summary is not None:
        await adispatch_custom_event(EVENT, summary)
