"""Prompt-cache rules as data: what a hit and a write cost, how long a cache
lives and the shortest prompt cached, per provider and model family.

A dated table (``CACHE_RULES``, as published on ``CACHE_RULES_DATE``) that
``trim_to="auto"`` prices its cut with. A model is matched by its name (the
longest matching prefix wins; ``"anthropic:"``-style provider prefixes are
ignored); a model no row matches gets ``DEFAULT_CACHE_PRICE``, and its name
says so. Pass your own rules as ``cache_price``: one ``CachePrice`` for every
model, or a sequence of ``CacheRule`` rows to match from. Imports nothing
from LangChain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_turntrim._core.depth import CachePrice
from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "CACHE_RULES",
    "CACHE_RULES_DATE",
    "DEFAULT_CACHE_PRICE",
    "CacheRule",
    "cache_price_for",
    "check_cache_price",
    "model_name",
    "request_ttl",
]

#: A TTL's figures: its seconds and a written token's price.
_PAIR: Final = 2
#: When the table's figures were taken from the providers' pricing pages.
CACHE_RULES_DATE: Final = "2026-12-01"


@dataclass(frozen=True)
class CacheRule:
    """One row of the cache table: a model family's cache rules.

    Attributes:
        provider: ``"anthropic"``, ``"openai"``, ...
        models: Model-name prefixes the row matches (``"claude-opus-4-5"``).
        read: A cache hit's price, in base input prices.
        writes: Each TTL the provider offers (its name in a request, such as
            ``"5m"``), with its seconds and a written token's price; the
            first is the provider's default.
        min_prefix: The shortest prompt (tokens) that is cached.
    """

    provider: str
    models: tuple[str, ...]
    read: float
    writes: Mapping[str, tuple[float, float]] = field(hash=False)
    min_prefix: int = 1024

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str):
            msg = f"CacheRule.provider must be a str, got {type(self.provider).__name__}"
            raise TypeError(msg)
        models = self.models
        if not isinstance(models, tuple) or not all(isinstance(m, str) and m for m in models):
            msg = (
                "CacheRule.models must be a tuple of model-name prefixes (non-empty str), "
                f"got {safe_repr(models, 80)}"
            )
            raise TypeError(msg)
        if not models:
            msg = f"CacheRule {self.provider}: models must name at least one prefix"
            raise ValueError(msg)
        if not isinstance(self.writes, Mapping) or not self.writes:
            msg = f"CacheRule {self.provider} {models[0]}: writes must map at least one TTL name"
            raise ValueError(msg)
        for name, pair in self.writes.items():
            if not (
                isinstance(name, str)
                and isinstance(pair, tuple)
                and len(pair) == len(("seconds", "price"))
            ):
                msg = (
                    f"CacheRule {self.provider} {models[0]}: writes[{safe_repr(name, 40)}] "
                    f"must be (seconds, write price), got {safe_repr(pair, 80)}"
                )
                raise TypeError(msg)
            self.price(name)  # every figure checked now

    def price(self, ttl: str | None = None) -> CachePrice:
        """The rules at ``ttl`` (a name in ``writes``; None or an unknown
        name: the default TTL)."""
        name = ttl if ttl is not None and ttl in self.writes else next(iter(self.writes))
        seconds, write = self.writes[name]
        label = f"{self.provider} {self.models[0]}" + (f" ({name})" if len(self.writes) > 1 else "")
        return CachePrice(self.read, write, seconds, self.min_prefix, label)


_ANTHROPIC: Final = {"5m": (300.0, 1.25), "1h": (3600.0, 2.0)}
#: OpenAI caches in memory for about 5 to 10 minutes idle (the lower figure
#: here); ``prompt_cache_retention="24h"`` keeps it longer. Writes cost
#: nothing extra before the GPT-5.6 family.
_OPENAI_FREE: Final = {"in_memory": (300.0, 1.0), "24h": (86400.0, 1.0)}
_OPENAI_PAID: Final = {"in_memory": (300.0, 1.25), "24h": (86400.0, 1.25)}

#: The published rules (see ``CACHE_RULES_DATE``).
CACHE_RULES: Final[tuple[CacheRule, ...]] = (
    CacheRule("anthropic", ("claude-opus-4-5", "claude-opus-4-6"), 0.1, _ANTHROPIC, 4096),
    CacheRule("anthropic", ("claude-haiku-4-5",), 0.1, _ANTHROPIC, 4096),
    CacheRule("anthropic", ("claude-sonnet-4-6",), 0.1, _ANTHROPIC, 2048),
    CacheRule("anthropic", ("claude-3-5-haiku", "claude-3-haiku"), 0.1, _ANTHROPIC, 2048),
    CacheRule("anthropic", ("claude",), 0.1, _ANTHROPIC, 1024),
    CacheRule("openai", ("gpt-5.6", "gpt-6"), 0.1, _OPENAI_PAID),
    CacheRule("openai", ("gpt-5",), 0.1, _OPENAI_FREE),
    CacheRule("openai", ("gpt-4.1", "o3", "o4-mini"), 0.25, _OPENAI_FREE),
    CacheRule("openai", ("gpt-4o", "o1"), 0.5, _OPENAI_FREE),
)

#: The rules of a model no row matches: the dearest writes of the table at
#: the shortest TTL and the usual minimum, so an unknown model is never cut
#: shallower than its cache would justify.
DEFAULT_CACHE_PRICE: Final = CachePrice(0.1, 1.25, 300.0, 1024, "default")


def model_name(model: object) -> str | None:
    """A chat model's name (``model_name``, ``model`` or ``model_id``), or
    ``model`` itself when it is a string; None when it has none."""
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return None


def request_ttl(settings: Mapping[str, Any] | None) -> str | None:
    """The cache TTL a request's model settings ask for: Anthropic's
    ``cache_control["ttl"]`` (what ``AnthropicPromptCachingMiddleware`` sets)
    or OpenAI's ``prompt_cache_retention``; None when they say nothing."""
    if not settings or not isinstance(settings, Mapping):
        return None
    control = settings.get("cache_control")
    if isinstance(control, Mapping):
        ttl = control.get("ttl")
        return ttl if isinstance(ttl, str) else "5m"
    retention = settings.get("prompt_cache_retention")
    return retention if isinstance(retention, str) else None


def cache_price_for(
    model: object, *, ttl: str | None = None, rules: Sequence[CacheRule] = CACHE_RULES
) -> CachePrice:
    """The cache rules of ``model`` (a chat model or a name) at ``ttl``: the
    row of ``rules`` whose prefix matches its name longest, else
    ``DEFAULT_CACHE_PRICE`` named for what was not matched."""
    name = model_name(model)
    if name is not None:
        bare = name.rsplit("/", 1)[-1].split(":", 1)[-1].lower()
        best: tuple[int, CacheRule] | None = None
        for rule in rules:
            for prefix in rule.models:
                if bare.startswith(prefix) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), rule)
        if best is not None:
            return best[1].price(ttl)
    shown = "no model name" if name is None else f"no rule matches {safe_repr(name, 60)}"
    return CachePrice(
        DEFAULT_CACHE_PRICE.read,
        DEFAULT_CACHE_PRICE.write,
        DEFAULT_CACHE_PRICE.ttl,
        DEFAULT_CACHE_PRICE.min_prefix,
        f"default ({shown})",
    )


def check_cache_price(value: object, name: str = "cache_price") -> object:
    """``value`` if it is None, a ``CachePrice`` or a sequence of ``CacheRule``."""
    if value is None or isinstance(value, CachePrice):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        rows = tuple(value)
        if not rows:
            msg = f"{name} must hold at least one CacheRule (None: the published table)"
            raise ValueError(msg)
        for i, row in enumerate(rows):
            if not isinstance(row, CacheRule):
                msg = f"{name}[{i}] must be a CacheRule, got {type(row).__name__}"
                raise TypeError(msg)
        return rows
    msg = (
        f"{name} must be a CachePrice, a sequence of CacheRule or None, "
        f"got {type(value).__name__} {safe_repr(value, 80)}"
    )
    raise TypeError(msg)
