"""``TurnTrimOverflowError``, and the one place it is built."""

from __future__ import annotations

from typing import Any

from langchain_core.exceptions import ContextOverflowError

from langchain_turntrim._core import TrimPlan

__all__ = ["TurnTrimOverflowError", "overflow_error"]


class TurnTrimOverflowError(ContextOverflowError):
    """Not even the newest turn fits beside the system messages.

    Raised by ``on_overflow="raise"`` instead of returning only the system
    messages, and by ``on_overflow="compact"`` when not even the newest turn
    compacted to its skeleton (the user message and the newest step) fits.
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


def overflow_error(plan: TrimPlan) -> TurnTrimOverflowError:
    """The error for a plan where not even the newest turn fits: its figures
    are the plan's (the request's constant counted with the system messages)."""
    return TurnTrimOverflowError(
        plan.max_tokens, plan.system_tokens + plan.overhead_tokens, plan.newest_turn_tokens
    )
