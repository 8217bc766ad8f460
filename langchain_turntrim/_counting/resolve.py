"""``resolve_counter``: what a user passed as ``token_counter``, made ready for planning."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from langchain_turntrim._core import check_count
from langchain_turntrim._counting.additive import AdditiveCounter, Uncached, Wrapper
from langchain_turntrim._counting.approximate import ApproximateCounter
from langchain_turntrim._counting.cache import CachedCounter
from langchain_turntrim._counting.calibrated import CalibratedCounter
from langchain_turntrim._counting.functions import per_message
from langchain_turntrim._counting.protocol import TokenCounter, refuse_class
from langchain_turntrim._counting.whole_list import WholeListCounter
from langchain_turntrim._options import DEFAULT_CACHE_SIZE
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["SHORTCUTS", "Resolved", "resolve_counter", "tiktoken_shortcut"]

#: What ``resolve_counter`` returns: a counter of one of the two families.
Resolved = AdditiveCounter | WholeListCounter

#: The strings ``token_counter`` accepts (shared with the command line's ``--token-counter``).
SHORTCUTS = "'approximate', 'tiktoken:MODEL' (e.g. 'tiktoken:gpt-4o') or 'tiktoken:ENCODING'"


def tiktoken_shortcut(spec: str) -> TokenCounter:
    """``"tiktoken:gpt-4o"`` -> ``TiktokenCounter("gpt-4o")``;
    ``"tiktoken:o200k_base"`` -> ``TiktokenCounter(encoding="o200k_base")``."""
    import tiktoken  # noqa: PLC0415

    from langchain_turntrim._counting.openai.counter import TiktokenCounter  # noqa: PLC0415

    name = spec.partition(":")[2].strip()
    if not name:
        msg = (
            f"token_counter {safe_repr(spec, 80)} needs a model or an encoding, "
            "e.g. 'tiktoken:gpt-4o'"
        )
        raise ValueError(msg)
    if name in tiktoken.list_encoding_names():
        return TiktokenCounter(encoding=name)
    return TiktokenCounter(name)


def resolve_counter(token_counter: object, cache_size: int = DEFAULT_CACHE_SIZE) -> Resolved:
    """Turn what a user passed as ``token_counter`` into a ready counter.

    Accepted: ``"approximate"``; ``"tiktoken:MODEL"`` / ``"tiktoken:ENCODING"``
    (a ``TiktokenCounter``); a ``TokenCounter`` (wrapped in a ``CachedCounter``
    unless ``cache_size`` is 0 or it already is one; a ``CalibratedCounter``
    is never wrapped: its counts change as it learns); a ``WholeListCounter``
    (one from ``per_list`` is given a cache of ``cache_size`` entries);
    an OpenAI chat model (counted exactly and locally by ``TiktokenCounter``);
    any other object with ``get_num_tokens_from_messages``; a model bound with
    tools (``model.bind_tools(...)``), whose tools are priced in every count;
    ``count_tokens_approximately``; any other callable, by the annotation rule
    of ``trim_messages`` (use ``per_message``/``per_list`` to say it
    explicitly). Anything else raises ``TypeError``/``ValueError`` now.
    """
    check_count(cache_size, "cache_size")
    counter = _expand(token_counter, cache_size)
    if isinstance(counter, WholeListCounter):
        return counter if counter.sized else counter.resized(cache_size)
    if isinstance(counter, ApproximateCounter):
        return counter
    if isinstance(counter, CachedCounter):
        check_count(counter.overhead, f"{type(counter.counter).__name__}.overhead")
        return counter
    if isinstance(counter, CalibratedCounter):  # its counts change as it learns: never cached
        return counter
    if isinstance(counter, TokenCounter):
        check_count(counter.overhead, f"{type(counter).__name__}.overhead")
        if cache_size:
            return CachedCounter(counter, cache_size)
        return counter if isinstance(counter, AdditiveCounter) else Uncached(counter)
    msg = (
        f"token_counter must be {SHORTCUTS}, a TokenCounter, a chat model with "
        "get_num_tokens_from_messages, or a function (wrap it in per_message or "
        f"per_list to say which); got {type(token_counter).__name__} {safe_repr(token_counter, 80)}"
    )
    raise TypeError(msg)


def _expand(token_counter: object, cache_size: int) -> object:
    """The counter a shortcut, a chat model or a function stands for."""
    refuse_class(token_counter, "token_counter")
    if isinstance(token_counter, str):
        if token_counter == "approximate":
            return ApproximateCounter()
        if token_counter.startswith("tiktoken:"):
            return tiktoken_shortcut(token_counter)
        shown = safe_repr(token_counter, 80)
        msg = f"unknown token_counter shortcut {shown}; the shortcuts are {SHORTCUTS}"
        raise ValueError(msg)
    if token_counter is count_tokens_approximately:
        return ApproximateCounter()
    if isinstance(token_counter, (TokenCounter, WholeListCounter)):
        return token_counter
    tools = _bound_tools(token_counter)
    if tools is not None:
        return _with_tools(token_counter.bound, tools, cache_size)  # type: ignore[attr-defined]
    if hasattr(token_counter, "get_num_tokens_from_messages"):
        exact = local_counter_for_model(token_counter)
        if exact is not None:
            return exact
        check_model_counts(token_counter)
        return WholeListCounter(
            token_counter.get_num_tokens_from_messages,
            cache_size,
            takes_tools=_counts_tools(token_counter),
            label=f"{type(token_counter).__name__}.get_num_tokens_from_messages",
        )
    if callable(token_counter):
        if _first_parameter_is_message(token_counter):
            return per_message(token_counter)
        return WholeListCounter(token_counter, cache_size)
    return token_counter


def check_model_counts(model: object) -> None:
    """Refuse a chat model that cannot count its messages, now rather than at
    the first trim, saying what to use instead.

    Two cases are known without calling a provider: an OpenAI-compatible
    model langchain-openai does not count (``ChatOpenAI(model="deepseek-chat",
    base_url=...)``: its ``get_num_tokens_from_messages`` raises
    ``NotImplementedError`` for names outside OpenAI's families; checked with
    an empty list, counted locally), and a model left with LangChain's default
    counting (GPT-2 tokens through the ``transformers`` package) without that
    package installed.
    """
    name = type(model).__name__
    reason = None
    if type(model).__module__.startswith("langchain_openai"):
        try:
            model.get_num_tokens_from_messages([])  # type: ignore[attr-defined]
        except NotImplementedError:
            label = getattr(model, "model_name", None)
            reason = f"langchain-openai does not implement counting for model {label!r}"
    elif (
        _default_counting(model)
        and getattr(model, "custom_get_token_ids", None) is None
        and importlib.util.find_spec("transformers") is None
    ):
        reason = (
            "it has no token counting of its own, and LangChain's default "
            "(GPT-2 tokens) needs the transformers package"
        )
    if reason is None:
        return
    msg = (
        f"token_counter={name}(...) cannot count tokens: {reason}. Use "
        "token_counter=CalibratedCounter() (it learns the provider's count from "
        "the usage each call reports; for_model(model) chooses it for such a "
        "model), token_counter='approximate', or, if the server tokenizes like "
        "OpenAI, TiktokenCounter(encoding='o200k_base')"
    )
    raise ValueError(msg)


def _default_counting(model: object) -> bool:
    from langchain_core.language_models import BaseLanguageModel  # noqa: PLC0415

    method = getattr(type(model), "get_num_tokens_from_messages", None)
    return (
        method is BaseLanguageModel.get_num_tokens_from_messages
        and (getattr(type(model), "get_num_tokens", None) is BaseLanguageModel.get_num_tokens)
        and getattr(type(model), "get_token_ids", None) is BaseLanguageModel.get_token_ids
    )


def _first_parameter_is_message(function: Callable[..., Any]) -> bool:
    """``trim_messages``' rule: a function whose first parameter is annotated
    ``BaseMessage`` counts one message; anything else counts a list. The
    string ``"BaseMessage"`` (postponed annotations) counts too."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    first = next(iter(parameters), None)
    return first is not None and first.annotation in (BaseMessage, "BaseMessage")


def local_counter_for_model(model: object) -> TokenCounter | None:
    """The exact local counter for a chat model, where one exists.

    OpenAI chat models (``langchain_openai.BaseChatOpenAI`` and subclasses)
    count with tiktoken; ``TiktokenCounter`` gives the same numbers without
    a provider round trip. A model with a custom ``custom_get_token_ids``
    keeps its own counting, and so does one whose model name tiktoken and
    ``TiktokenCounter`` do not know (an OpenAI-compatible server's
    ``deepseek-chat``, say): its tokenizer is not OpenAI's.
    """
    if not type(model).__module__.startswith("langchain_openai"):
        return None
    from langchain_openai.chat_models.base import BaseChatOpenAI  # noqa: PLC0415

    if not isinstance(model, BaseChatOpenAI) or model.custom_get_token_ids is not None:
        return None
    from langchain_turntrim._counting.openai.counter import (  # noqa: PLC0415
        EncodingUnavailableError,
        TiktokenCounter,
    )

    try:
        return TiktokenCounter(model.tiktoken_model_name or model.model_name)
    except ValueError as exc:
        if isinstance(exc, EncodingUnavailableError):
            raise
        return None


def _bound_tools(value: object) -> list[Any] | None:
    """The tools of a model bound with them (``model.bind_tools(...)``), else None."""
    # Without LangChain's Runnables loaded, nothing can be a RunnableBinding.
    runnables = sys.modules.get("langchain_core.runnables.base")
    if runnables is None or not isinstance(value, runnables.RunnableBinding):
        return None
    tools = value.kwargs.get("tools")
    if not isinstance(tools, (list, tuple)) or not hasattr(
        value.bound, "get_num_tokens_from_messages"
    ):
        return None
    return list(tools)


def _with_tools(model: Any, tools: list[Any], cache_size: int) -> object:
    """The counter of ``model`` with ``tools`` priced in every count.

    OpenAI models: ``TiktokenCounter``, the tools a constant per request (as
    its ``count_tools`` prices them). Any other model: its own
    ``get_num_tokens_from_messages``, given the tools as ``tools=`` where it
    counts them (as ``trim_messages`` does), else with them priced by the
    approximate estimate in its units (see ``WholeListCounter``).
    """
    exact = local_counter_for_model(model)
    if exact is not None:
        return ToolsPriced(exact, tools)
    label = f"{type(model).__name__}.get_num_tokens_from_messages with {len(tools)} tools"
    return WholeListCounter(
        model.get_num_tokens_from_messages,
        cache_size,
        takes_tools=_counts_tools(model),
        bound_tools=tools,
        label=label,
    )


def _counts_tools(model: object) -> bool:
    from langchain_core.language_models import BaseLanguageModel  # noqa: PLC0415

    method = getattr(type(model), "get_num_tokens_from_messages", None)
    if method is BaseLanguageModel.get_num_tokens_from_messages:
        return False  # it warns and ignores them
    if type(model).__module__.startswith("langchain_openai"):
        return False  # so does ChatOpenAI's
    try:
        parameters = inspect.signature(model.get_num_tokens_from_messages).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
    return "tools" in parameters


class ToolsPriced(Wrapper):
    """A ``TokenCounter`` whose ``overhead`` includes the bound tools' price."""

    def __init__(self, counter: TokenCounter, tools: Sequence[Any]) -> None:
        self.counter = counter
        self.tools = list(tools)
        self._tool_tokens = self.count_tools(self.tools)

    @property
    def overhead(self) -> int:
        return self.counter.overhead + self._tool_tokens

    def count_each(self, messages: Sequence[BaseMessage]) -> list[int]:
        return self.counter.count_each(messages)

    def __repr__(self) -> str:
        tools = f"{len(self.tools)} bound tools ({self._tool_tokens} tokens)"
        return f"{safe_repr(self.counter)} + {tools}"
