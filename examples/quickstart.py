"""Trim the spec's sample history to 100 tokens and print the kept ids."""

from langchain_turntrim import plan_trim, trim_history

history = [
    {"id": "s0", "role": "system", "tokens": 20},
    {"id": "u1", "role": "user", "tokens": 30},
    {"id": "a1", "role": "assistant", "tokens": 30},
    {"id": "u2", "role": "user", "tokens": 25},
    {"id": "a2", "role": "assistant", "tokens": 25},
]

kept = trim_history(history, max_tokens=100)
print("kept:", [m["id"] for m in kept])

plan = plan_trim(history, max_tokens=100)
print(
    f"dropped {plan.dropped_turns} of {plan.turns} turns; "
    f"tokens {plan.tokens_before} -> {plan.tokens_after} (budget {plan.max_tokens})"
)
