"""The trimming options: one frozen object that every entry point builds, each
field's validator declared beside it and every default in one place.

Imports nothing from LangChain (the ``turntrim`` command builds it before
deciding whether it needs LangChain at all). ``token_counter`` is checked when
it is resolved, by the entry point that counts with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict, get_args

from langchain_turntrim._cache_rules import (
    CACHE_RULES,
    CacheRule,
    cache_price_for,
    check_cache_price,
)
from langchain_turntrim._core import check_count, check_trim_to
from langchain_turntrim._core.depth import CachePrice, check_rate
from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "AGENT_ON_OVERFLOW",
    "AUTO",
    "DEFAULT_CACHE_SIZE",
    "DEFAULT_KEEP_TOOL_RESULTS",
    "MODES",
    "ON_OVERFLOW",
    "Auto",
    "CachePricing",
    "Mode",
    "OnOverflow",
    "TrimKeywords",
    "TrimOptions",
    "check_choice",
]

#: What to do when not even the newest turn fits beside the pinned messages:
#: keep only the pinned messages, raise ``TurnTrimOverflowError``, or compact
#: inside the newest turn.
OnOverflow = Literal["drop", "raise", "compact"]
#: ``"request"`` trims what the model sees; ``"state"`` also deletes from the agent's state.
Mode = Literal["request", "state"]
#: ``trim_to="auto"``: the cut depth priced by the prompt cache's rules.
Auto = Literal["auto"]
AUTO: Final[Auto] = "auto"
#: What ``cache_price`` takes: one price for every model, your own table, or
#: None (the published table, matched from the model called).
CachePricing = CachePrice | Sequence[CacheRule] | None

ON_OVERFLOW: Final[tuple[str, ...]] = get_args(OnOverflow)
MODES: Final[tuple[str, ...]] = get_args(Mode)
#: Tool results of the newest turn that ``"compact"`` leaves intact by default.
DEFAULT_KEEP_TOOL_RESULTS: Final = 3
#: Messages whose counts (and histories whose plans) are remembered by default.
DEFAULT_CACHE_SIZE: Final = 16_384
#: ``on_overflow`` of the agent middlewares: an agent works inside one long turn.
AGENT_ON_OVERFLOW: Final[OnOverflow] = "compact"

#: A field's validator: ``(value, the options so far, field name) -> the value to keep``.
Check = Callable[[Any, "TrimOptions", str], Any]


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        quoted = [repr(choice) for choice in choices]
        accepted = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
        msg = f"{name} must be {accepted}, got {safe_repr(value, 80)}"
        raise ValueError(msg)


def _count(value: object, _: TrimOptions, name: str) -> int:
    return check_count(value, name)


def _on_overflow(value: object, _: TrimOptions, name: str) -> object:
    check_choice(value, name, ON_OVERFLOW)
    return value


def _trim_to(value: object, options: TrimOptions, _: str) -> int | Auto | None:
    if value == AUTO and isinstance(value, str):
        return AUTO
    if isinstance(value, str):
        msg = f"trim_to must be an int, None or {AUTO!r}, got {safe_repr(value, 80)}"
        raise ValueError(msg)  # noqa: TRY004 - a str, but not the one accepted
    return check_trim_to(value, options.max_tokens)


def _cache_price(value: object, _: TrimOptions, name: str) -> object:
    return check_cache_price(value, name)


def _context_value(value: object, _: TrimOptions, name: str) -> float:
    return check_rate(value, name)


@dataclass(frozen=True)
class TrimOptions:
    """The options of a trim, checked when built (in field order).

    Attributes:
        max_tokens: The budget for the whole kept list (or request), as the
            counter counts it.
        token_counter: What counts tokens (see ``TurnTrimmer``).
        on_overflow: When not even the newest turn fits beside the pinned
            messages: ``"drop"`` keeps only them, ``"raise"`` raises,
            ``"compact"`` compacts the newest turn.
        keep_tool_results: Under ``"compact"``, how many of the newest tool
            results are never cleared.
        trim_to: Cut an over-budget history down to about this many tokens,
            at a boundary later calls keep (``None``: just under ``max_tokens``;
            ``"auto"``: the level the prompt cache's prices make cheapest).
        cache_size: How many per-message counts to keep (LRU), and the
            longest history whose plan is remembered; 0 disables both.
        cache_price: The prompt cache's rules ``"auto"`` prices with: a
            ``CachePrice`` for every model, a sequence of ``CacheRule`` to
            match the model from, or None (``CACHE_RULES``, matched from
            the model called; ``DEFAULT_CACHE_PRICE`` without one).
        context_value: What a token of context given up (against the greedy
            trim) is worth, in base input prices (default 1.0).
    """

    max_tokens: int = field(metadata={"check": _count})
    token_counter: Any = "approximate"
    on_overflow: OnOverflow = field(default="drop", metadata={"check": _on_overflow})
    keep_tool_results: int = field(default=DEFAULT_KEEP_TOOL_RESULTS, metadata={"check": _count})
    trim_to: int | Auto | None = field(default=None, metadata={"check": _trim_to})
    cache_size: int = field(default=DEFAULT_CACHE_SIZE, metadata={"check": _count})
    cache_price: CachePricing = field(default=None, metadata={"check": _cache_price})
    context_value: float = field(default=1.0, metadata={"check": _context_value})

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            check: Check | None = spec.metadata.get("check")
            if check is not None:
                object.__setattr__(
                    self, spec.name, check(getattr(self, spec.name), self, spec.name)
                )

    @classmethod
    def of(cls, owner: str, max_tokens: object, keywords: dict[str, Any]) -> TrimOptions:
        """The options ``owner`` (an entry point's name) was given, with a
        ``TypeError`` naming it and the closest option for a misspelt keyword."""
        known = [spec.name for spec in dataclasses.fields(cls)]
        for name in keywords:
            if name not in known:
                import difflib  # noqa: PLC0415 - only to word an error

                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                options = ", ".join(known[1:])
                msg = (
                    f"{owner}() got an unexpected keyword argument {name!r}{hint}; "
                    f"its options are {options}"
                )
                raise TypeError(msg)
        return cls(max_tokens, **keywords)  # type: ignore[arg-type]

    def replace(self, **changes: Any) -> TrimOptions:
        """A copy with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)

    def with_budget(self, max_tokens: int, **changes: Any) -> TrimOptions:
        """A copy for the budget ``max_tokens``, ``trim_to`` no higher."""
        trim_to = self.trim_to
        if isinstance(trim_to, int):
            trim_to = min(trim_to, max_tokens)
        return self.replace(max_tokens=max_tokens, trim_to=trim_to, **changes)

    def price_for(self, model: object = None, ttl: str | None = None) -> CachePrice:
        """The cache rules ``"auto"`` prices a call of ``model`` with."""
        pricing = self.cache_price
        if isinstance(pricing, CachePrice):
            return pricing
        return cache_price_for(model, ttl=ttl, rules=CACHE_RULES if pricing is None else pricing)

    def keywords(self) -> dict[str, Any]:
        """Every option by name (what the entry points' keywords are)."""
        return {spec.name: getattr(self, spec.name) for spec in dataclasses.fields(self)}


class TrimKeywords(TypedDict, total=False):
    """The keyword options every entry point takes after ``max_tokens``
    (``TrimOptions`` holds their defaults and checks)."""

    token_counter: Any
    on_overflow: OnOverflow
    keep_tool_results: int
    trim_to: int | Auto | None
    cache_size: int
    cache_price: CachePrice | Sequence[CacheRule] | None
    context_value: float
