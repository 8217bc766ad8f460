"""Benchmark inputs: a seeded generator of realistic conversations, or recorded transcripts.

Both sources produce OpenAI-format message dicts (``role``, ``content``,
``tool_calls``, ``tool_call_id``, ``name``). ``fresh_messages`` turns them into
new LangChain message objects whose content no cache has seen (a tag per
repeat), and ``recorded`` joins the conversations of a recorded file into one history (the quality
scenarios' input).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from langchain_core.messages import BaseMessage, convert_to_messages

from benchmarks.encoding import DATA

__all__ = [
    "Generator",
    "OpenAIMessage",
    "Source",
    "Transcripts",
    "assistant_steps",
    "fresh_messages",
    "make_source",
    "mark",
    "recorded",
]

OpenAIMessage = dict[str, Any]

_VOCABULARY: Final = (
    "the a to and of in is it you that for on with as this be are can will not your we "
    "order flight booking refund account payment card baggage seat upgrade cancel change "
    "date time return policy customer agent request please thanks check update confirm "
    "available option price total fee reservation passenger economy business cabin travel "
    "insurance delay status number details information address email phone issue problem "
    "function value error list file test build deploy server query result table column "
    "index cache memory thread process request response token model budget history turn "
    "message system user assistant tool call argument output input default config version"
)
_WORDS: Final = tuple(_VOCABULARY.split())
_FOREIGN: Final = (
    "Bonjour, je voudrais changer la date de mon vol, s'il vous plaît.",
    "¿Puedo añadir una maleta facturada a mi reserva sin pagar más?",
    "Könnten Sie bitte prüfen, ob mein Flug nach München pünktlich ist?",
    "请帮我查一下订单的状态，我已经等了三天了。",  # noqa: RUF001 (non-English on purpose)
    "予約をキャンセルして、返金を受け取ることはできますか？",  # noqa: RUF001
    "Здравствуйте! Мне нужно изменить адрес доставки заказа.",
    "مرحبا، أريد استرداد المبلغ المدفوع لهذه الرحلة من فضلك.",
    "नमस्ते, क्या आप मेरी बुकिंग की पुष्टि कर सकते हैं?",
    "Merci beaucoup 🙏 c'est parfait, à bientôt ✈️",
    "안녕하세요, 좌석을 창가 쪽으로 바꿀 수 있을까요?",
)
_CODE: Final = (
    (
        "```python\ndef {name}(items: list[dict]) -> float:\n    total = 0.0\n"
        "    for item in items:\n        if item.get('{field}', 0) > {n}:\n"
        "            total += item['{field}'] * {m}\n    return round(total, 2)\n```"
    ),
    (
        "```sql\nSELECT {field}, COUNT(*) AS n\nFROM {name}\nWHERE created_at > '2024-0{m}-1{n}'\n"
        "GROUP BY {field}\nORDER BY n DESC\nLIMIT {n};\n```"
    ),
    (
        "```bash\nfor f in logs/{name}-*.json; do\n  jq '.{field} | select(. > {n})' \"$f\"\n"
        "done | sort | uniq -c | head -n {m}\n```"
    ),
)
_TOOLS: Final = (
    "get_user_details",
    "search_flights",
    "get_reservation",
    "list_orders",
    "run_query",
)
_STATUSES: Final = ("confirmed", "pending", "cancelled", "refunded", "delayed")
_PINNED_ROLES: Final = ("system", "developer")
_CITIES: Final = ("New York", "Seattle", "São Paulo", "Zürich", "東京", "Москва", "Lagos", "Paris")


class Source(Protocol):
    """Where conversations come from."""

    label: str

    def conversation(self, n: int) -> list[OpenAIMessage]:
        """A chronological history of exactly ``n`` messages, system prompt first."""
        ...


# ---------------------------------------------------------------------------
# The seeded generator


def _turn_plan(rng: random.Random) -> list[int]:
    """A turn's tool rounds: the number of tool calls in each (empty: no tool use)."""
    if rng.random() < 0.45:
        return []
    return [rng.choice((1, 1, 1, 2)) for _ in range(rng.choice((1, 1, 2, 3)))]


class Generator:
    """Seeded, realistic conversations: short user turns, assistant replies, tool
    calls with long JSON results, code and non-English text."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.label = f"generator(seed={seed})"

    def conversation(self, n: int) -> list[OpenAIMessage]:
        rng = random.Random(self.seed)
        messages = [{"role": "system", "content": _system_prompt(rng)}]
        while len(messages) < n:
            messages.extend(_turn(rng, len(messages)))
        return messages[:n]


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high)))


def _system_prompt(rng: random.Random) -> str:
    rules = (f"- {_words(rng, 12, 30).capitalize()}." for _ in range(25))
    return "# Support Agent Policy\n\nYou are a helpful support agent.\n\n" + "\n".join(rules)


def _user_text(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return rng.choice(_FOREIGN)
    return _words(rng, 4, 35).capitalize() + "?"


def _assistant_text(rng: random.Random) -> str:
    parts = [_words(rng, 30, 200).capitalize() + "."]
    if rng.random() < 0.25:
        template = rng.choice(_CODE)
        fields = {
            "name": rng.choice(_WORDS) + "_" + rng.choice(_WORDS),
            "field": rng.choice(_WORDS),
        }
        parts.append(template.format(n=rng.randint(1, 9), m=rng.randint(1, 9), **fields))
    if rng.random() < 0.1:
        parts.append(rng.choice(_FOREIGN))
    return "\n\n".join(parts)


def _record(rng: random.Random) -> dict[str, Any]:
    return {
        "id": f"ord_{rng.getrandbits(40):010x}",
        "status": rng.choice(_STATUSES),
        "amount": round(rng.uniform(5, 2_000), 2),
        "customer": {"name": _words(rng, 2, 3).title(), "city": rng.choice(_CITIES)},
        "items": [
            {"sku": f"SKU-{rng.randint(1000, 9999)}", "qty": rng.randint(1, 5)}
            for _ in range(rng.randint(1, 4))
        ],
        "created_at": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T10:00:00Z",
        "note": _words(rng, 0, 12),
    }


def _tool_call(rng: random.Random, index: int) -> dict[str, Any]:
    args = {"user_id": f"user_{rng.randint(1, 99_999)}", "query": _words(rng, 1, 5)}
    return {
        "id": f"call_{index}_{rng.getrandbits(48):012x}",
        "type": "function",
        "function": {"name": rng.choice(_TOOLS), "arguments": json.dumps(args)},
    }


def _tool_result(rng: random.Random) -> str:
    results = [_record(rng) for _ in range(rng.randint(2, 14))]
    return json.dumps({"results": results, "count": len(results)}, ensure_ascii=False)


def _turn(rng: random.Random, start: int) -> list[OpenAIMessage]:
    turn: list[OpenAIMessage] = [{"role": "user", "content": _user_text(rng)}]
    for calls in _turn_plan(rng):
        batch = [_tool_call(rng, start + len(turn) + i) for i in range(calls)]
        turn.append({"role": "assistant", "content": None, "tool_calls": batch})
        turn.extend(
            {"role": "tool", "tool_call_id": c["id"], "content": _tool_result(rng)} for c in batch
        )
    turn.append({"role": "assistant", "content": _assistant_text(rng)})
    return turn


# ---------------------------------------------------------------------------
# Recorded transcripts


def _conversations(data: object) -> list[list[OpenAIMessage]]:
    """A JSON array of conversations, or of objects whose ``traj`` holds one."""
    if not isinstance(data, list) or not data:
        msg = "expected a non-empty JSON array of conversations"
        raise ValueError(msg)
    conversations = [item["traj"] if isinstance(item, dict) else item for item in data]
    for i, conversation in enumerate(conversations):
        if not isinstance(conversation, list) or not all(
            isinstance(m, dict) and "role" in m for m in conversation
        ):
            msg = f"conversation {i} is not a list of OpenAI-format messages"
            raise ValueError(msg)
    return conversations


class Transcripts:
    """OpenAI-format conversations from a JSON file, joined into one long history.

    Only the first conversation's system messages are kept (a history has one
    system prompt); when more messages are needed than the file holds, the
    conversations are replayed with a cycle tag so that no content repeats.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = f"transcripts({path.name})"
        conversations = _conversations(json.loads(path.read_text(encoding="utf-8")))
        self._head = [m for m in conversations[0] if m["role"] in _PINNED_ROLES]
        self._body = [m for c in conversations for m in c if m["role"] not in _PINNED_ROLES]

    def conversation(self, n: int) -> list[OpenAIMessage]:
        messages = list(self._head)
        for cycle in itertools.count():
            if len(messages) >= n:
                break
            tag = f"c{cycle}"
            messages.extend(self._body if not cycle else (mark(m, tag) for m in self._body))
        return messages[:n]


# ---------------------------------------------------------------------------
# Fresh inputs


def mark(message: OpenAIMessage, tag: str) -> OpenAIMessage:
    """A copy of ``message`` that no cache has seen: ``tag`` added to its text and ids."""
    marked = dict(message)
    content = marked.get("content")
    if isinstance(content, str) and content:
        marked["content"] = f"{content} [{tag}]"
    if "tool_call_id" in marked:
        marked["tool_call_id"] = f"{marked['tool_call_id']}_{tag}"
    if marked.get("tool_calls"):
        marked["tool_calls"] = [{**c, "id": f"{c.get('id')}_{tag}"} for c in marked["tool_calls"]]
    return marked


def fresh_messages(base: Sequence[OpenAIMessage], tag: str) -> list[BaseMessage]:
    """New LangChain messages for ``base``, with content tagged ``tag``."""
    return convert_to_messages([mark(m, tag) for m in base])


def make_source(seed: int, transcripts: Path | None) -> Source:
    """The source the command line asks for: transcripts if given, else the generator."""
    return Transcripts(transcripts) if transcripts is not None else Generator(seed)


def assistant_steps(base: Sequence[OpenAIMessage]) -> list[int]:
    """An agent loop's model calls: the index of every assistant message (the
    history before it is what the model is sent)."""
    return [k for k, m in enumerate(base) if k and m["role"] == "assistant"]


def recorded(name: str, count: int) -> tuple[list[BaseMessage], set[int]]:
    """The first ``count`` conversations of the recorded file ``name`` joined into
    one history (the first system message only; every message with an id ``m<i>``),
    and the indices where a conversation starts."""
    data = json.loads((DATA / name).read_text(encoding="utf-8"))[:count]
    joined: list[OpenAIMessage] = []
    starts: set[int] = set()
    for conversation in _conversations(data):
        starts.add(len(joined) + (1 if not joined else 0))
        for item in conversation:
            if item["role"] == "system" and joined:
                continue
            joined.append({**item, "content": item.get("content") or "", "id": f"m{len(joined)}"})
    return convert_to_messages(joined), starts
