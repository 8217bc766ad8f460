"""``TrimOptions``: every option of a trim, each declared once with its check."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from langchain_turntrim._core import check_count, check_rate, check_trim_to, shown
from langchain_turntrim._counting import CalibratedCounter, openai_counter, resolve_counter
from langchain_turntrim.cache_pricing import CachePrice, CacheRule, cache_price_for, check_price

__all__ = ["OnOverflow", "TrimOptions", "model_counter", "model_window"]

OnOverflow = Literal["drop", "raise", "compact"]


def _on_overflow(value: object, name: str) -> object:
    if value not in get_args(OnOverflow):
        msg = f"{name} must be 'drop', 'raise' or 'compact', got {shown(value)}"
        raise ValueError(msg)
    return value


@dataclass(frozen=True, kw_only=True)
class TrimOptions:
    """The options of a trim, checked when made, in this order. Every entry point
    (``TurnTrimmer``, ``trim_turns``, the middlewares) takes them as keywords,
    with these defaults (the middlewares' ``on_overflow`` aside: ``"compact"``)."""

    max_tokens: int = field(metadata={"check": check_count})
    """The budget for everything sent, as the counter counts it: the pinned
    messages, the tools' schemas and the kept turns."""
    token_counter: Any = field(default="approximate", metadata={"check": resolve_counter})
    """What counts: ``"approximate"`` (LangChain's ``count_tokens_approximately``),
    ``"tiktoken:MODEL"`` or a ``TiktokenCounter``, a ``CalibratedCounter``, a chat
    model, a function (see ``per_message``, ``per_list``) or your own
    ``TokenCounter``. Held resolved: ``options.token_counter`` is the counter."""
    on_overflow: OnOverflow = field(default="drop", metadata={"check": _on_overflow})
    """When not even the newest turn fits beside the pinned messages: ``"drop"``
    keeps only them (the spec), ``"raise"`` raises ``TurnTrimOverflowError``,
    ``"compact"`` makes the newest turn smaller until it fits."""
    keep_tool_results: int = field(default=3, metadata={"check": check_count})
    """Under ``"compact"``, how many of the newest tool results are never cleared."""
    trim_to: int | Literal["auto"] | None = None
    """Cut an over-budget history down to about this many tokens, at a turn
    boundary that later calls keep, so a provider's prompt cache survives
    (None: just under ``max_tokens``; ``"auto"``: the level the cache's prices
    make cheapest)."""
    cache_size: int = field(default=16_384, metadata={"check": check_count})
    """How many messages' kinds and counts are remembered (0: none)."""
    cache_price: CachePrice | Sequence[CacheRule] | None = field(
        default=None, metadata={"check": check_price}
    )
    """The cache rules ``trim_to="auto"`` prices with: one ``CachePrice``, your
    own ``CacheRule`` rows, or None (``CACHE_RULES``, matched from the model)."""
    context_value: float = field(default=1.0, metadata={"check": check_rate})
    """What a token of context given up is worth to ``"auto"``, in input prices."""
    overflow_retries: int = field(default=1, metadata={"check": check_count})
    """How many times a model call is retried, trimmed tighter, after the
    provider answered that the context is too long (0: never)."""

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            # trim_to's check is a method: it needs max_tokens, checked before it.
            check = spec.metadata.get("check", self._check_trim_to)
            object.__setattr__(self, spec.name, check(getattr(self, spec.name), spec.name))

    def _check_trim_to(self, value: object, _: str) -> object:
        if value == "auto":
            return value
        if isinstance(value, str):
            msg = f"trim_to must be an int, None or 'auto', got {shown(value)}"
            raise ValueError(msg)  # noqa: TRY004 - a str, but not the one accepted
        return check_trim_to(value, self.max_tokens)

    @classmethod
    def of(cls, owner: str, **options: Any) -> TrimOptions:
        """The options ``owner`` was given; a misspelt one is a ``TypeError`` naming it."""
        known = [spec.name for spec in dataclasses.fields(cls)]
        for name in options:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                msg = f"{owner}() got an unexpected keyword argument {name!r}{hint}"
                raise TypeError(msg)
        return cls(**options)

    def replace(self, **changes: Any) -> TrimOptions:
        """A copy with ``changes`` (checked again); ``trim_to`` no higher than the budget."""
        trim_to = changes.get("trim_to", self.trim_to)
        budget = changes.get("max_tokens", self.max_tokens)
        if isinstance(trim_to, int) and isinstance(budget, int) and trim_to > budget:
            changes["trim_to"] = budget
        return dataclasses.replace(self, **changes)

    def arguments(self, **defaults: Any) -> str:
        """The budget, the counter and each option off its default (or ``defaults``), for a repr."""
        shown = []
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            default = defaults.get(spec.name, spec.default)
            if spec.name in ("max_tokens", "token_counter") or value != default:
                shown.append(f"{spec.name}={value!r}")
        return ", ".join(shown)

    def price_for(self, model: object = None, ttl: str | None = None) -> CachePrice:
        """The cache rules a call of ``model`` is priced by."""
        if isinstance(self.cache_price, CachePrice):
            return self.cache_price
        if self.cache_price:
            return cache_price_for(model, ttl=ttl, rules=self.cache_price)
        return cache_price_for(model, ttl=ttl)

    @classmethod
    def for_model(
        cls, owner: str, chat_model: Any, reserve_tokens: int | None, **options: Any
    ) -> TrimOptions:
        """``owner``'s options sized for ``chat_model``, without a network call: the
        budget ``profile["max_input_tokens"] - reserve_tokens`` (None: room for the
        reply, ``min(max_output_tokens, max_input_tokens // 4)``), its counter
        (``model_counter``), then ``options``."""
        if "max_tokens" in options:
            msg = (
                f"{owner}.for_model() got an unexpected keyword argument 'max_tokens': the "
                "budget is the model's profile less reserve_tokens"
            )
            raise TypeError(msg)
        keywords = {"token_counter": model_counter(chat_model), **options}
        if reserve_tokens is not None:
            check_count(reserve_tokens, "reserve_tokens")
        window = model_window(chat_model)
        if window is None:
            msg = (
                f"{type(chat_model).__name__} has no profile['max_input_tokens'] to size the "
                "budget from; pass max_tokens (and token_counter=model) instead"
            )
            raise ValueError(msg)
        if reserve_tokens is None:
            output = _profile(chat_model, "max_output_tokens", minimum=0)
            reserve_tokens = window // 4 if output is None else min(output, window // 4)
        if reserve_tokens > window:
            msg = (
                f"reserve_tokens ({reserve_tokens}) exceeds the model's max_input_tokens ({window})"
            )
            raise ValueError(msg)
        return cls.of(owner, max_tokens=window - reserve_tokens, **keywords)


def model_counter(chat_model: Any) -> Any:
    """``TiktokenCounter`` for an OpenAI chat model, else a ``CalibratedCounter``."""
    return openai_counter(chat_model) or CalibratedCounter()


def model_window(chat_model: Any) -> int | None:
    """``chat_model.profile["max_input_tokens"]``, if it has one."""
    return _profile(chat_model, "max_input_tokens", minimum=1)


def _profile(chat_model: Any, key: str, *, minimum: int) -> int | None:
    profile = getattr(chat_model, "profile", None)
    value = profile.get(key) if isinstance(profile, dict) else None
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # a profile read from JSON
        value = int(value)
    where = f"{type(chat_model).__name__}'s profile[{key!r}]"
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        kind = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
        msg = f"{where} must be an int >= {minimum} (a token count), got {shown(value)}"
        raise kind(msg)
    return value
