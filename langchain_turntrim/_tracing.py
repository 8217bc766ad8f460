"""Where a trim shows up: a DEBUG log line, the run's metadata and a custom event.

``report_trim`` (and ``areport_trim`` in async code) records one trim in three
places, none of which needs ``langsmith`` as a dependency:

* one DEBUG line on the standard-library logger ``langchain_turntrim``;
* the metadata of the run the trim belongs to, under the key ``"turntrim"``:
  tracers (LangSmith's ``LangChainTracer``, ``collect_runs``, any
  ``BaseTracer``) keep the runs they are tracing in ``run_map``; the summary is
  set on that run object before the run ends, so it is sent with the run's
  end (the way ``LangChainTracer`` itself adds ``usage_metadata``) and shows in
  LangSmith's Metadata tab;
* a custom event named ``"turntrim"`` with the same summary, for
  ``astream_events`` and callback handlers' ``on_custom_event`` (LangSmith does
  not record custom events, hence the metadata).

The run is the one given as ``run_manager`` (a Runnable's own run), else the
run the code is executing in (LangChain's context variable), e.g. an agent
middleware's hook. Outside any run only the log line is written, and so
inside a run that no callback handler (tracer, event stream) watches: no
event is dispatched that nobody would receive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final
from uuid import UUID

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    BaseCallbackHandler,
    BaseCallbackManager,
    CallbackManager,
    CallbackManagerForChainRun,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_callback_manager_for_config,
    var_child_runnable_config,
)

from langchain_turntrim._report import TrimReport

__all__ = [
    "CACHE_EVENT_NAME",
    "EVENT_NAME",
    "METADATA_KEY",
    "SUMMARY_KEYS",
    "areport_cache",
    "areport_trim",
    "observed",
    "report_cache",
    "report_trim",
    "trim_summary",
]

logger = logging.getLogger("langchain_turntrim")

#: The name of the custom event every trim dispatches.
EVENT_NAME: Final = "turntrim"
#: The run metadata key every trim sets.
METADATA_KEY: Final = "turntrim"
#: The custom event (and run metadata key) of what a model call's prompt
#: cache did, after the call (the agent middlewares).
CACHE_EVENT_NAME: Final = "turntrim_cache"
#: The keys every summary has; a middleware adds its own (``mode``, ...).
SUMMARY_KEYS: Final = (
    "max_tokens",
    "tokens_before",
    "tokens_after",
    "messages_before",
    "messages_after",
    "dropped_messages",
    "turns",
    "dropped_turns",
    "system_tokens",
    "budget_met",
    "start_moved",
)


def trim_summary(report: TrimReport[Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The numbers of a trim, JSON-ready: what the log, the trace and the event carry.

    ``SUMMARY_KEYS`` (and compaction's figures) from the report, then
    ``extra`` (which may override them).
    """
    summary = report.summary()
    if extra:
        summary.update(extra)
    return summary


def _log(summary: Mapping[str, Any]) -> None:
    extra = ", ".join(f"{k}={v}" for k, v in summary.items() if k not in SUMMARY_KEYS)
    logger.debug(
        "trimmed %d -> %d messages: dropped %d of %d turns, tokens %d -> %d, budget %d%s",
        summary["messages_before"],
        summary["messages_after"],
        summary["dropped_turns"],
        summary["turns"],
        summary["tokens_before"],
        summary["tokens_after"],
        summary["max_tokens"],
        f" ({extra})" if extra else "",
    )


def _attach(
    handlers: Sequence[BaseCallbackHandler],
    run_ids: Sequence[UUID],
    summary: dict[str, Any],
    key: str = METADATA_KEY,
) -> None:
    """Set the summary in the metadata of the run each tracer has, the first of ``run_ids``.

    The metadata dict is replaced, never mutated: LangChain shares one dict
    between a callback manager and the runs it starts.
    """
    keys = [str(run_id) for run_id in run_ids]
    for handler in handlers:
        run_map = getattr(handler, "run_map", None)
        if not isinstance(run_map, dict):
            continue
        run = next((run_map[key] for key in keys if key in run_map), None)
        extra = getattr(run, "extra", None)
        if isinstance(extra, dict):
            metadata = extra.get("metadata")
            merged = dict(metadata) if isinstance(metadata, Mapping) else {}
            merged[key] = dict(summary)
            extra["metadata"] = merged


def observed(callbacks: Callbacks) -> bool:
    """Whether a callback handler would see a run made with a config's
    ``callbacks``: the handlers LangChain configures for them (passed,
    inherited from the enclosing run, tracing, hooks such as ``collect_runs``).
    Tags and metadata choose no handler, so they are not looked at."""
    return bool(CallbackManager.configure(inheritable_callbacks=callbacks).handlers)


def _run_observed(own: BaseCallbackManager) -> bool:
    """Whether a handler would see an event of the run whose child manager is
    ``own``: LangChain chose the run's handlers when it started (those passed,
    inherited, tracing, hooks such as ``collect_runs``), and its child
    manager holds the inheritable ones, so no configuring is needed."""
    return bool(own.handlers or own.inheritable_handlers)


def _logged(report: TrimReport[Any], extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The summary, logged, when the DEBUG line is wanted; else None (not built)."""
    if not logger.isEnabledFor(logging.DEBUG):
        return None
    summary = trim_summary(report, extra)
    _log(summary)
    return summary


def _prepare(
    report: TrimReport[Any],
    run_manager: CallbackManagerForChainRun | AsyncCallbackManagerForChainRun | None,
    extra: Mapping[str, Any] | None,
) -> tuple[dict[str, Any] | None, RunnableConfig | None, CallbackManager | None]:
    """Log, set the run's metadata; return the summary (None when nobody reads
    it: no log line, no handler), the event's config and, inside a run, the
    manager that dispatches the event (config and manager are None when no
    handler would receive it)."""
    if run_manager is not None:
        if not run_manager.handlers and not run_manager.inheritable_handlers:
            return _logged(report, extra), None, None  # nobody is listening: no event
        summary = _logged(report, extra) or trim_summary(report, extra)
        _attach(run_manager.handlers, [run_manager.run_id], summary)
        return summary, {"callbacks": run_manager.get_child()}, None
    # Inside a run (an agent's hook, a RunnableLambda), LangChain's context
    # variable holds the run's child config. The run is the parent of the
    # manager LangChain would build from it: with LangSmith tracing, an
    # enclosing @traceable span such as an agent middleware's
    # "<name>.wrap_model_call"; other tracers only know the LangChain run
    # around it, the config's own parent.
    current = var_child_runnable_config.get() or {}
    own = current.get("callbacks")
    if not isinstance(own, BaseCallbackManager) or own.parent_run_id is None:
        return _logged(report, extra), None, None  # not inside a run (the common case)
    if not _run_observed(own):
        # No handler: no tracer to attach to, and on_custom_event would return at once.
        return _logged(report, extra), None, None
    summary = _logged(report, extra) or trim_summary(report, extra)
    config = ensure_config()
    manager = get_callback_manager_for_config(config)
    run_ids = [own.parent_run_id]
    if manager.parent_run_id is not None and manager.parent_run_id != own.parent_run_id:
        run_ids.insert(0, manager.parent_run_id)
    _attach(manager.handlers, run_ids, summary)
    return summary, config, manager


def report_trim(
    report: TrimReport[Any],
    run_manager: CallbackManagerForChainRun | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Log a trim and record it on its run; returns the summary, or None when
    nobody reads it (no DEBUG log line, no handler: then it is not even built).

    ``run_manager`` is the trimming Runnable's own run (what ``invoke`` passes
    to the function it runs); without it, the run the caller executes in.
    Outside any run only the log line is written; never raises for want of a run.
    """
    summary, config, manager = _prepare(report, run_manager, extra)
    if summary is None:
        return None
    if manager is not None:  # what dispatch_custom_event does, with the manager at hand
        manager.on_custom_event(EVENT_NAME, summary, run_id=manager.parent_run_id)
    elif config is not None:
        dispatch_custom_event(EVENT_NAME, summary, config=config)
    return summary


async def areport_trim(
    report: TrimReport[Any],
    run_manager: AsyncCallbackManagerForChainRun | None = None,
    *,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """``report_trim`` for async code: the custom event is awaited."""
    summary, config, _ = _prepare(report, run_manager, extra)
    if summary is not None and config is not None:
        await adispatch_custom_event(EVENT_NAME, summary, config=config)
    return summary


def _cache_run(
    figures: Callable[[], dict[str, Any]],
) -> tuple[dict[str, Any], RunnableConfig, CallbackManager] | None:
    """Log a call's cache figures (built only when someone reads them), set
    them on the run it executes in; the figures, the event's config and
    manager, or None when no handler would receive it."""
    built = None
    if logger.isEnabledFor(logging.DEBUG):
        built = figures()
        logger.debug("prompt cache: %s", ", ".join(f"{k}={v}" for k, v in built.items()))
    current = var_child_runnable_config.get() or {}
    own = current.get("callbacks")
    if not isinstance(own, BaseCallbackManager) or own.parent_run_id is None:
        return None
    if not _run_observed(own):
        return None
    built = built or figures()
    config = ensure_config()
    manager = get_callback_manager_for_config(config)
    run_ids = [own.parent_run_id]
    if manager.parent_run_id is not None and manager.parent_run_id != own.parent_run_id:
        run_ids.insert(0, manager.parent_run_id)
    _attach(manager.handlers, run_ids, built, CACHE_EVENT_NAME)
    return built, config, manager


def report_cache(figures: Callable[[], dict[str, Any]]) -> None:
    """Record what a model call's prompt cache did (``figures()``, JSON-ready,
    built only when someone reads it): a DEBUG line, the run's metadata
    (``"turntrim_cache"``) and a ``"turntrim_cache"`` custom event."""
    found = _cache_run(figures)
    if found is not None:
        built, _, manager = found
        manager.on_custom_event(CACHE_EVENT_NAME, built, run_id=manager.parent_run_id)


async def areport_cache(figures: Callable[[], dict[str, Any]]) -> None:
    """``report_cache`` for async code: the custom event is awaited."""
    found = _cache_run(figures)
    if found is not None:
        built, config, _ = found
        await adispatch_custom_event(CACHE_EVENT_NAME, built, config=config)
