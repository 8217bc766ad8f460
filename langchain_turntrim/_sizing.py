"""Sizing a trim for a chat model: its budget from the model's profile, and a
counter that never makes a network call (``for_model`` everywhere)."""

from __future__ import annotations

from typing import Any

from langchain_turntrim._core import check_count
from langchain_turntrim._counting import CalibratedCounter, ResolvedCounter, TokenCounter
from langchain_turntrim._counting.resolve import local_counter_for_model
from langchain_turntrim._options import TrimOptions
from langchain_turntrim._safe_repr import safe_repr

__all__ = ["default_reserve", "model_budget", "model_counter", "sized_options"]


def sized_options(chat_model: Any, reserve_tokens: int | None, **options: Any) -> TrimOptions:
    """The options of a trim sized for ``chat_model``: its budget
    (``model_budget``) and counter (``model_counter``), then ``options``."""
    return TrimOptions(
        max_tokens=model_budget(chat_model, reserve_tokens),
        token_counter=model_counter(chat_model),
        **options,
    )


def model_counter(chat_model: Any) -> ResolvedCounter | TokenCounter:
    """The counter ``for_model`` uses: never a network call.

    OpenAI chat models count exactly with ``TiktokenCounter`` (as
    ``get_num_tokens_from_messages`` does, without the round trip); every
    other model gets a ``CalibratedCounter`` on the approximate counter, which
    learns the provider's count from the usage each call reports.
    """
    return local_counter_for_model(chat_model) or CalibratedCounter()


def _window(chat_model: Any) -> int:
    profile = getattr(chat_model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if limit is None:
        name = type(chat_model).__name__
        msg = (
            f"{name} has no profile['max_input_tokens'] to size the budget from; "
            f"pass max_tokens explicitly (e.g. TurnTrimmer(max_tokens=..., token_counter=model))"
        )
        raise ValueError(msg)
    return _profile_count(chat_model, "max_input_tokens", limit, minimum=1)


def _profile_count(chat_model: Any, key: str, value: object, *, minimum: int) -> int:
    """``profile[key]`` as an int >= ``minimum``; a float that is a whole number
    (``128000.0``, as a profile read from JSON may hold) is taken as that int.
    Raises ``TypeError``/``ValueError`` naming the profile's value otherwise."""
    where = f"{type(chat_model).__name__}'s profile[{key!r}]"
    expected = "a positive int" if minimum else "an int >= 0"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        what = f"{type(value).__name__} {safe_repr(value, 80)}"
        msg = f"{where} must be {expected} (a token count), got {what}"
        raise TypeError(msg)
    count = int.__int__(value)  # an int subclass as the int it holds
    if count < minimum:
        msg = f"{where} must be {expected} (a token count), got {count}"
        raise ValueError(msg)
    return count


def default_reserve(chat_model: Any) -> int:
    """Room left for the reply when ``reserve_tokens`` is not given:
    ``min(max_output_tokens, max_input_tokens // 4)`` from the model's
    profile, or a quarter of ``max_input_tokens`` when it has no
    ``max_output_tokens``."""
    limit = _window(chat_model)
    output = chat_model.profile.get("max_output_tokens")
    quarter = limit // 4
    if output is None:
        return quarter
    return min(_profile_count(chat_model, "max_output_tokens", output, minimum=0), quarter)


def model_budget(chat_model: Any, reserve_tokens: int | None) -> int:
    """``chat_model.profile["max_input_tokens"] - reserve_tokens``, checked
    (``default_reserve`` when ``reserve_tokens`` is None).

    The profile's ``max_input_tokens`` must be a positive int, and its
    ``max_output_tokens``, when present, an int >= 0; a float that is a whole
    number (``128000.0``) counts as that int, as pydantic's validation of a
    profile takes it; any other value raises ``TypeError``/``ValueError``
    naming the profile's value and what was expected."""
    if reserve_tokens is not None:
        check_count(reserve_tokens, "reserve_tokens")
    limit = _window(chat_model)
    if reserve_tokens is None:
        reserve_tokens = default_reserve(chat_model)
    budget = limit - reserve_tokens
    if budget < 0:
        msg = f"reserve_tokens ({reserve_tokens}) exceeds the model's max_input_tokens ({limit})"
        raise ValueError(msg)
    return budget
