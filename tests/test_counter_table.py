"""Every row of the counting guide's counter table is a setup that works: built, then trimmed with.

A row added to the table without a case here fails the test; so does a case
whose setup no longer works.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.tools import tool
from pydantic import SecretStr

from langchain_turntrim import (
    CalibratedCounter,
    TiktokenCounter,
    TurnTrimmer,
    TurnTrimMiddleware,
    per_list,
    per_message,
)

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "counting.md"


@tool
def search(query: str) -> str:
    """Search the web."""
    return query


class OwnCounting(GenericFakeChatModel):
    """A provider's chat model with counting of its own."""

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None) -> int:
        return 3 + sum(len(m.text) // 4 + 4 for m in messages)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=list(tools))


class Own:
    """A ``TokenCounter`` of one's own."""

    overhead = 3

    def count_each(self, messages: Any) -> list[int]:
        return [len(m.text) // 4 + 4 for m in messages]


def openai(model: str = "gpt-4") -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, api_key=SecretStr("sk-test"))


#: A distinctive piece of each row's first cell -> the setups it names.
ROWS: dict[str, list[Callable[[], Any]]] = {
    '`"approximate"` (default)': [lambda: "approximate", lambda: count_tokens_approximately],
    '`TiktokenCounter("gpt-4o")`': [
        lambda: TiktokenCounter("gpt-4"),
        lambda: TiktokenCounter(encoding="cl100k_base"),
        lambda: "tiktoken:gpt-4",
        lambda: "tiktoken:cl100k_base",
    ],
    "a chat model |": [openai, lambda: OwnCounting(messages=iter([]))],
    "`CalibratedCounter()`": [
        CalibratedCounter,
        lambda: CalibratedCounter(TiktokenCounter("gpt-4")),
    ],
    "a chat model bound with tools": [
        lambda: openai().bind_tools([search]),
        lambda: OwnCounting(messages=iter([])).bind_tools([search]),
    ],
    "`per_message(fn)`": [lambda: per_message(lambda m: len(m.text) // 4 + 4)],
    "`per_list(fn)`": [
        lambda: per_list(len),
        lambda: per_list(
            lambda messages, tools=(): count_tokens_approximately(messages) + 10 * len(tools),
            takes_tools=True,
        ),
    ],
    "any object with `overhead`": [Own],
}


def table_rows() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("| `token_counter=` | counts with |")
    table = text[start:].split("\n\n", 1)[0].splitlines()
    return [row for row in table[2:] if row.startswith("|")]


def test_every_row_of_the_table_has_its_setups() -> None:
    rows = table_rows()
    assert len(rows) == len(ROWS)
    for row, key in zip(rows, ROWS, strict=True):
        assert key in row, (key, row)


HISTORY: list[BaseMessage] = [
    SystemMessage("You are terse."),
    *[
        m
        for i in range(6)
        for m in (HumanMessage(f"question {i} " * 20), AIMessage(f"answer {i} " * 20))
    ],
    HumanMessage("and now?"),
]


@pytest.mark.usefixtures("tiktoken_cache")
@pytest.mark.parametrize(
    "setup", [s for setups in ROWS.values() for s in setups], ids=lambda s: repr(s)[:60]
)
def test_each_setup_builds_and_trims(setup: Callable[[], Any]) -> None:
    counter = setup()
    trimmer = TurnTrimmer(max_tokens=200, token_counter=counter)
    kept = trimmer.trim(HISTORY)
    assert kept[0] is HISTORY[0]
    assert kept[-1] is HISTORY[-1]
    report = trimmer.trim_with_report(HISTORY)
    assert report.tokens_after <= 200
    assert len(kept) < len(HISTORY) or report.tokens_before <= 200  # trimmed when over
    TurnTrimMiddleware(max_tokens=200, token_counter=setup())  # the middleware takes it too


def test_a_table_row_never_names_a_setup_that_fails() -> None:
    """The OpenAI-compatible model the table used to list is refused at construction."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="deepseek-chat", base_url="http://localhost:9", api_key=SecretStr("k"))
    assert not any("deepseek" in row for row in table_rows())
    with pytest.raises(ValueError, match="CalibratedCounter"):
        TurnTrimmer(max_tokens=200, token_counter=model)
    assert "A chat model that cannot count is refused" in GUIDE.read_text(encoding="utf-8")
