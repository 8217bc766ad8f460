"""``resolve_counter``: what ``token_counter=`` accepts, made a counter once."""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim._core import check_count, shown
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.base import Counter, ListCounter, TokenCounter, per_message

__all__ = ["openai_counter", "resolve_counter"]

_SHORTCUTS = "'approximate', 'tiktoken:MODEL' or 'tiktoken:ENCODING'"


def resolve_counter(value: object, name: str = "token_counter") -> TokenCounter | ListCounter:
    """The counter ``value`` names: a shortcut, a counter, a chat model (bound with
    tools or not), or a function, per message if its first parameter is annotated
    ``BaseMessage``, else per list (as ``trim_messages`` does); else an error."""
    if isinstance(value, type) and hasattr(value, "count_each"):
        msg = f"{name} is the class {value.__name__}: pass an instance, {value.__name__}()"
        raise TypeError(msg)
    if value is count_tokens_approximately or (isinstance(value, str) and value == "approximate"):
        return ApproximateCounter()
    if isinstance(value, str):
        tokenizer = value.removeprefix("tiktoken:").strip()
        if value.startswith("tiktoken:") and tokenizer:
            from langchain_turntrim._counting.openai import TiktokenCounter  # noqa: PLC0415

            return TiktokenCounter(tokenizer)
        msg = f"unknown {name} {value!r}; the shortcuts are {_SHORTCUTS}"
        raise ValueError(msg)
    if isinstance(value, ListCounter):
        return value
    if isinstance(value, TokenCounter):
        check_count(value.overhead, f"{type(value).__name__}.overhead")
        return value
    model, tools = _unbound(value)
    if hasattr(model, "get_num_tokens_from_messages"):
        return openai_counter(model, tools) or _model_counter(model, tools)
    if callable(value):
        return per_message(value) if _takes_a_message(value) else ListCounter(value)
    msg = (
        f"{name} must be {_SHORTCUTS}, a TokenCounter, a chat model or a function, "
        f"got {shown(value)}"
    )
    raise TypeError(msg)


def _takes_a_message(function: Any) -> bool:
    try:
        first = next(iter(inspect.signature(function).parameters.values()), None)
    except (TypeError, ValueError):
        return False
    return first is not None and first.annotation in (BaseMessage, "BaseMessage")


def _unbound(value: object) -> tuple[object, list[Any]]:
    """A model bound with tools (``model.bind_tools(...)``) as the model and its tools."""
    from langchain_core.runnables import RunnableBinding  # noqa: PLC0415

    if isinstance(value, RunnableBinding) and isinstance(value.kwargs.get("tools"), (list, tuple)):
        return value.bound, list(value.kwargs["tools"])
    return value, []


def openai_counter(model: object, tools: Sequence[Any] = ()) -> Counter | None:
    """``TiktokenCounter`` for an OpenAI chat model (its own counts, locally);
    None for any other model, one counting its own way, or an unknown name."""
    if not type(model).__module__.startswith("langchain_openai"):
        return None
    from langchain_openai.chat_models.base import BaseChatOpenAI  # noqa: PLC0415

    from langchain_turntrim._counting.openai import EncodingUnavailableError, TiktokenCounter  # noqa: PLC0415

    if not isinstance(model, BaseChatOpenAI) or model.custom_get_token_ids is not None:
        return None
    try:
        counter = TiktokenCounter(model.tiktoken_model_name or model.model_name)
    except EncodingUnavailableError:
        raise
    except ValueError:
        return None
    return _WithTools(counter, tools) if tools else counter


class _WithTools(Counter):
    """A counter whose per-request constant includes the tools a model was bound with."""

    def __init__(self, counter: Counter, tools: Sequence[Any]) -> None:
        self.counter, self.bound = counter, list(tools)
        self._bound = counter.count_tools(self.bound)
        self.overhead = counter.overhead + self._bound

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return self.counter.count_each(messages)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """What ``tools`` add to the bound ones (one tool list per request)."""
        return self.counter.count_tools([*self.bound, *tools]) - self._bound

    def __repr__(self) -> str:
        return f"{self.counter!r} with its bound tools"


def _model_counter(model: Any, tools: list[Any]) -> ListCounter:
    """A chat model's own counting, refused now (not at every trim) if it cannot count."""
    from langchain_core.language_models import BaseLanguageModel  # noqa: PLC0415

    name = type(model).__name__
    count = model.get_num_tokens_from_messages
    openai = type(model).__module__.startswith("langchain_openai")
    own = type(model).get_num_tokens_from_messages
    inherited = own is BaseLanguageModel.get_num_tokens_from_messages
    gpt2 = inherited and getattr(model, "custom_get_token_ids", None) is None
    reason = None
    if openai:
        try:
            count([])
        except NotImplementedError:
            reason = f"langchain-openai does not count for model {model.model_name!r}"
    elif gpt2 and importlib.util.find_spec("transformers") is None:
        reason = "LangChain's default counting (GPT-2 tokens) needs the transformers package"
    if reason is not None:
        msg = (
            f"token_counter={name}(...) cannot count tokens: {reason}. Use "
            "token_counter=CalibratedCounter() (it learns the provider's count from reported "
            "usage), 'approximate', or TiktokenCounter('o200k_base') if it tokenizes like OpenAI"
        )
        raise ValueError(msg)
    takes_tools = not (inherited or openai) and "tools" in inspect.signature(count).parameters
    label = f"{name}.get_num_tokens_from_messages" + (f" with {len(tools)} tools" if tools else "")
    return ListCounter(count, takes_tools=takes_tools, bound_tools=tools, name=label)
