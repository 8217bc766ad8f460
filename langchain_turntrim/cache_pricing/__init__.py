"""Trims priced by the prompt cache: the providers' cache rules as data, and
what each thread's cache did.

``trim_to="auto"`` cuts at the level with the lowest expected cost per call,
input plus the context given up, by the rules of the model called
(``cache_price_for``); the agent middlewares time cuts to the cache (a cold cache
is cut at once, a warm one is kept) and keep each thread's ``CacheTotals``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from langchain_turntrim._core import check_count, check_rate, shown

__all__ = [
    "CACHE_RULES",
    "CACHE_RULES_DATE",
    "DEFAULT_CACHE_PRICE",
    "CachePrice",
    "CacheRule",
    "CacheTotals",
    "cache_price_for",
]

#: When the table's figures were taken from the providers' pricing pages.
CACHE_RULES_DATE: Final = "2026-12-01"


@dataclass(frozen=True)
class CachePrice:
    """A prompt cache's rules for one model and TTL, in base input prices (an
    uncached input token costs 1)."""

    read: float = 0.1
    """A token read from the cache (a hit)."""
    write: float = 1.25
    """A token written to the cache (1.25 for Anthropic's 5-minute cache)."""
    ttl: float = 300.0
    """Seconds idle after which the cache is gone."""
    min_prefix: int = 1024
    """The shortest prompt, in tokens, that is cached at all."""
    name: str = "custom"
    """Where these rules come from."""

    def __post_init__(self) -> None:
        for name in ("read", "write", "ttl"):
            check_rate(getattr(self, name), f"CachePrice.{name}", positive=name == "ttl")
        check_count(self.min_prefix, "CachePrice.min_prefix")
        if not isinstance(self.name, str):
            msg = f"CachePrice.name must be a str, got {shown(self.name)}"
            raise TypeError(msg)


@dataclass(frozen=True)
class CacheRule:
    """One row of the cache table: a model family's rules."""

    provider: str
    """``"anthropic"``, ``"openai"``, ..."""
    models: tuple[str, ...]
    """Model-name prefixes the row matches."""
    read: float
    """A cache hit's price, in base input prices."""
    writes: Mapping[str, tuple[float, float]] = field(hash=False)
    """Each TTL offered (its name in a request, such as ``"5m"``): its seconds
    and a written token's price; the first is the provider's default."""
    min_prefix: int = 1024
    """The shortest prompt cached."""

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str):
            msg = f"CacheRule.provider must be a str, got {shown(self.provider)}"
            raise TypeError(msg)
        models = self.models
        valid = isinstance(models, tuple) and all(m and isinstance(m, str) for m in models)
        if not valid or not models:
            msg = f"CacheRule.models must be a tuple of model-name prefixes, got {shown(models)}"
            raise TypeError(msg)
        if not isinstance(self.writes, Mapping) or not self.writes:
            msg = f"CacheRule {self.provider}: writes must map at least one TTL name"
            raise ValueError(msg)
        for ttl, pair in self.writes.items():
            if not (isinstance(ttl, str) and isinstance(pair, tuple) and len(pair) == len("sp")):
                what = f"CacheRule {self.provider}: writes[{ttl!r}]"
                msg = f"{what} must be (seconds, price), got {shown(pair)}"
                raise TypeError(msg)
            self.price(ttl)

    def price(self, ttl: str | None = None) -> CachePrice:
        """The rules at ``ttl`` (unknown or None: the default TTL)."""
        name = ttl if ttl in self.writes else next(iter(self.writes))
        seconds, write = self.writes[name]  # type: ignore[index]
        label = f"{self.provider} {self.models[0]}" + (f" ({name})" if len(self.writes) > 1 else "")
        return CachePrice(self.read, write, seconds, self.min_prefix, label)


_ANTHROPIC: Final = {"5m": (300.0, 1.25), "1h": (3600.0, 2.0)}
#: OpenAI caches in memory for 5 to 10 minutes idle (the lower figure here);
#: writes cost nothing extra before the GPT-5.6 family.
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
#: The rules of a model no row matches: the dearest writes at the shortest TTL,
#: so an unknown model is never cut shallower than its cache would justify.
DEFAULT_CACHE_PRICE: Final = CachePrice(0.1, 1.25, 300.0, 1024, "default")


def model_name(model: object) -> str | None:
    """A chat model's name (``model_name``, ``model`` or ``model_id``), or the string itself."""
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return None


def request_ttl(settings: Mapping[str, Any] | None) -> str | None:
    """The cache TTL a request's model settings ask for: Anthropic's
    ``cache_control["ttl"]`` or OpenAI's ``prompt_cache_retention``."""
    if not isinstance(settings, Mapping):
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
    """The rules of ``model`` (a chat model or a name) at ``ttl``: the row whose
    prefix matches its name longest, else ``DEFAULT_CACHE_PRICE`` named for it."""
    name = model_name(model)
    if name is not None:
        # "anthropic:claude-x", "anthropic/claude-x:beta": any part may be the model.
        parts = name.lower().replace("/", ":").split(":")
        matches = [
            (len(p), rule)
            for rule in rules
            for p in rule.models
            for part in parts
            if part.startswith(p)
        ]
        if matches:
            return max(matches, key=lambda match: match[0])[1].price(ttl)
    what = "no model name" if name is None else f"no rule matches {name!r}"
    return replace(DEFAULT_CACHE_PRICE, name=f"default ({what})")


def check_price(
    value: object, name: str = "cache_price"
) -> CachePrice | tuple[CacheRule, ...] | None:
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
                msg = f"{name}[{i}] must be a CacheRule, got {shown(row)}"
                raise TypeError(msg)
        return rows
    msg = f"{name} must be a CachePrice, a sequence of CacheRule or None, got {shown(value)}"
    raise TypeError(msg)


from langchain_turntrim.cache_pricing._clock import CacheTotals  # noqa: E402 - it prices with the rules above
