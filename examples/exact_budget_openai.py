"""Size the budget from ChatOpenAI's profile and count exactly, offline (no API call).

Needs langchain-openai and tiktoken's cl100k_base file (downloaded once, or put in
the folder TIKTOKEN_CACHE_DIR names).
"""

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from langchain_turntrim import TurnTrimmer

model = ChatOpenAI(model="gpt-4", api_key=SecretStr("placeholder"))  # only counts here: no request
trimmer = TurnTrimmer.for_model(model, reserve_tokens=1024)  # room for the reply
print(f"budget: {trimmer.max_tokens} tokens (the profile's max_input_tokens less 1024)")

history: list[BaseMessage] = [SystemMessage("You summarise long reports.")]
for i in range(20):  # about 416 tokens a turn: 20 turns are over budget
    history += [HumanMessage(f"Report {i}: " + "figures rose " * 200), AIMessage("They rose.")]
report = trimmer.trim_with_report(history)
exact = model.get_num_tokens_from_messages(report.kept)
print(f"kept {report.kept_turns} of {report.turns} turns: {report.tokens_after} tokens")
print(f"ChatOpenAI.get_num_tokens_from_messages agrees: {exact == report.tokens_after}")
