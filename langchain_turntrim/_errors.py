"""``TurnTrimOverflowError``: what ``on_overflow="raise"`` raises."""

from __future__ import annotations

from typing import Any

from langchain_core.exceptions import ContextOverflowError

from langchain_turntrim._core import TrimPlan
from langchain_turntrim._options import OnOverflow

__all__ = ["TurnTrimOverflowError", "check_overflow"]


class TurnTrimOverflowError(ContextOverflowError):
    """Not even the newest turn fits beside the system messages.

    Raised by ``on_overflow="raise"`` instead of returning only the system
    messages, and by ``on_overflow="compact"`` when not even the newest turn
    cut to its skeleton (the user message and the newest step) fits.
    """

    def __init__(self, max_tokens: int, system_tokens: int, newest_turn_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.system_tokens = system_tokens
        self.newest_turn_tokens = newest_turn_tokens
        super().__init__(
            f"the newest turn ({newest_turn_tokens} tokens) does not fit beside the "
            f"system messages ({system_tokens} tokens) in a budget of {max_tokens} tokens"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.max_tokens, self.system_tokens, self.newest_turn_tokens))


def check_overflow(plan: TrimPlan, on_overflow: OnOverflow) -> None:
    """Under ``on_overflow="raise"``, raise when not even the newest turn fits."""
    if on_overflow == "raise" and plan.overflowed:
        raise TurnTrimOverflowError(
            plan.max_tokens, plan.system_tokens + plan.overhead_tokens, plan.newest_turn_tokens
        )
