"""Hypothesis strategies for plain trim records (``id``, ``role``, ``tokens``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

ROLES = ("system", "developer", "user", "assistant", "tool", "function")

# Users and assistants dominate real histories; systems appear anywhere.
roles = st.sampled_from((*ROLES, "user", "assistant", "assistant", "tool"))
tokens = st.one_of(st.just(0), st.integers(min_value=0, max_value=60))


@st.composite
def histories(draw: st.DrawFn, max_size: int = 30) -> list[dict[str, Any]]:
    """Histories with every role, systems anywhere, leading assistant/tool
    messages and zero-token messages; ids are unique."""
    pairs = draw(st.lists(st.tuples(roles, tokens), max_size=max_size))
    return [{"id": f"m{i}", "role": r, "tokens": t} for i, (r, t) in enumerate(pairs)]


@st.composite
def histories_and_budgets(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """A history and a budget from 0 to a little above its total."""
    messages = draw(histories())
    total = sum(m["tokens"] for m in messages)
    return messages, draw(st.integers(min_value=0, max_value=total + 10))
