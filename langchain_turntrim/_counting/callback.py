"""``CalibrationCallback``: feeds a ``CalibratedCounter`` from LCEL chains.

Its own module: LangChain's callback and output classes load on first use.
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langchain_turntrim._counting.calibrated import CalibratedCounter, reported_input_tokens

__all__ = ["CalibrationCallback"]


class CalibrationCallback(BaseCallbackHandler):
    """Feeds a ``CalibratedCounter`` from chat model runs in LCEL chains.

    Pairs each run's ``on_chat_model_start`` messages (and the tools in its
    invocation parameters) with the ``usage_metadata`` its ``on_llm_end``
    reports, by run id, and calls ``observe``. Runs without reported usage
    are ignored. Thread-safe.
    """

    def __init__(self, counter: CalibratedCounter) -> None:
        if not isinstance(counter, CalibratedCounter):
            msg = f"CalibrationCallback needs a CalibratedCounter, got {type(counter).__name__}"
            raise TypeError(msg)
        self.counter = counter
        self._pending: dict[UUID, tuple[list[list[BaseMessage]], Any]] = {}
        self._lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],  # noqa: ARG002 - LangChain's hook signature
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        params = kwargs.get("invocation_params") or {}
        with self._lock:
            self._pending[run_id] = (messages, params.get("tools"))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:  # noqa: ARG002
        with self._lock:
            sent = self._pending.pop(run_id, None)
        if sent is None:
            return
        prompts, tools = sent
        for messages, generations in zip(prompts, response.generations, strict=False):
            replies = [g.message for g in generations if isinstance(g, ChatGeneration)]
            tokens = reported_input_tokens(replies[:1])
            if tokens is not None:
                self.counter.observe(messages, tokens, tools=tools)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:  # noqa: ARG002
        with self._lock:
            self._pending.pop(run_id, None)
