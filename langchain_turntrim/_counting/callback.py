"""``CalibrationCallback``: feeds a ``CalibratedCounter`` from LCEL chains.

Its own module: LangChain's callback and output classes load on first use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Final
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from langchain_turntrim._counting.calibrated import CalibratedCounter
from langchain_turntrim._usage import reported_input_tokens

__all__ = ["CalibrationCallback"]

#: Runs started and not ended that are remembered (the oldest are forgotten).
MAX_PENDING: Final = 256


class CalibrationCallback(BaseCallbackHandler):
    """Feeds a ``CalibratedCounter`` from chat model runs in LCEL chains.

    Pairs each run's ``on_chat_model_start`` messages (and the tools in its
    invocation parameters) with the ``usage_metadata`` its ``on_llm_end``
    reports, by run id, and calls ``observe``. Runs without reported usage
    are ignored. A run that never ends (cancelled, timed out) is forgotten
    when it or the chain around it fails, and at most ``MAX_PENDING`` (256)
    runs are remembered at once. Thread-safe.
    """

    def __init__(self, counter: CalibratedCounter) -> None:
        if not isinstance(counter, CalibratedCounter):
            msg = f"CalibrationCallback needs a CalibratedCounter, got {type(counter).__name__}"
            raise TypeError(msg)
        self.counter = counter
        #: run id -> (its prompts, its tools, its parent run's id)
        self._pending: OrderedDict[UUID, tuple[list[list[BaseMessage]], Any, UUID | None]] = (
            OrderedDict()
        )
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
            self._pending[run_id] = (messages, params.get("tools"), kwargs.get("parent_run_id"))
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:  # noqa: ARG002
        with self._lock:
            sent = self._pending.pop(run_id, None)
        if sent is None:
            return
        prompts, tools, _ = sent
        for messages, generations in zip(prompts, response.generations, strict=False):
            replies = [g.message for g in generations if isinstance(g, ChatGeneration)]
            tokens = reported_input_tokens(replies[:1])
            if tokens is not None:
                self.counter.observe(messages, tokens, tools=tools)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:  # noqa: ARG002
        with self._lock:
            self._pending.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:  # noqa: ARG002
        """Forget the model runs of a chain that failed (a cancellation, a timeout)."""
        with self._lock:
            if not self._pending:
                return
            for child in [k for k, v in self._pending.items() if v[2] == run_id]:
                del self._pending[child]
