"""The rule on plain records: trim the spec's sample history to 100 tokens."""

from langchain_turntrim import plan_trim, trim_history

history = [
    {"id": "s0", "role": "system", "tokens": 20},
    {"id": "u1", "role": "user", "tokens": 30},
    {"id": "a1", "role": "assistant", "tokens": 30},
    {"id": "u2", "role": "user", "tokens": 25},
    {"id": "a2", "role": "assistant", "tokens": 25},
]

print("kept:", [m["id"] for m in trim_history(history, max_tokens=100)])
plan = plan_trim(history, max_tokens=100)
print(f"dropped {plan.dropped_turns} of {plan.turns} turns: {plan.tokens_after} tokens <= 100")
