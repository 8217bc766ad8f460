"""Size the budget from ChatOpenAI's profile and count exactly with tiktoken, offline.

Usage: python examples/exact_budget_openai.py [model]   (default gpt-4o; no API call is made)
"""

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import tiktoken
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from langchain_turntrim import TurnTrimmer

MODEL = sys.argv[1] if len(sys.argv) > 1 else "gpt-4o"

# tiktoken downloads an encoding on first use. Check its cache first, so that
# this script never tries the network (tiktoken's own cache lookup, in Python).
encoding = tiktoken.encoding_name_for_model(MODEL)
url = f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
cache = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
cache = str(Path(tempfile.gettempdir(), "data-gym-cache")) if cache is None else cache
key = hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()
if not cache or not (Path(cache) / key).is_file():
    print(f"tiktoken's {encoding!r} encoding for {MODEL} is not available offline.")
    print(f"To provide it, download {url}")
    print(f"save it as {key} in a folder, and set TIKTOKEN_CACHE_DIR to that folder")
    print(f"(now: {cache or 'caching disabled'}). Then run this script again.")
    sys.exit(0)

model = ChatOpenAI(model=MODEL, api_key="sk-placeholder")  # no network until it is called
trimmer = TurnTrimmer.for_model(model, reserve_tokens=1024)  # room for the reply
limit = model.profile["max_input_tokens"]
print(f"{MODEL}: max_input_tokens {limit} - 1024 reserved = budget {trimmer.max_tokens}")
print(f"counter: {trimmer.counter.counter!r}")

history = [SystemMessage("You summarise long reports.")]
for i in range(trimmer.max_tokens // 500 + 3):  # ~620 tokens a turn: over budget
    history.append(HumanMessage(f"Report {i}: " + "quarterly figures rose " * 200))
    history.append(AIMessage(f"Summary {i}: figures rose."))
report = trimmer.trim_with_report(history)
plan = report.plan
print(f"history: {plan.turns} turns, {plan.tokens_before} tokens")
print(f"kept {plan.kept_turns} turns: {plan.tokens_after} tokens <= budget {plan.max_tokens}")
exact = model.get_num_tokens_from_messages(report.kept)
print(f"ChatOpenAI.get_num_tokens_from_messages(kept) = {exact}: same count, offline")
