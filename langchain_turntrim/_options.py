"""The options every entry point shares, their types and their one validator each."""

from __future__ import annotations

from typing import Final, Literal, get_args

from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "DEFAULT_KEEP_TOOL_RESULTS",
    "MODES",
    "ON_OVERFLOW",
    "Mode",
    "OnOverflow",
    "check_choice",
]

#: What to do when not even the newest turn fits beside the pinned messages:
#: keep only the pinned messages, raise ``TurnTrimOverflowError``, or compact
#: inside the newest turn.
OnOverflow = Literal["drop", "raise", "compact"]
#: ``"request"`` trims what the model sees; ``"state"`` also deletes from the agent's state.
Mode = Literal["request", "state"]

ON_OVERFLOW: Final[tuple[str, ...]] = get_args(OnOverflow)
MODES: Final[tuple[str, ...]] = get_args(Mode)
#: Tool results of the newest turn that ``"compact"`` leaves intact by default.
DEFAULT_KEEP_TOOL_RESULTS: Final = 3


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        quoted = [repr(choice) for choice in choices]
        accepted = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
        msg = f"{name} must be {accepted}, got {safe_repr(value, 80)}"
        raise ValueError(msg)
