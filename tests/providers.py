"""What OpenAI Chat, OpenAI Responses and Anthropic require of a request, as a validator.

The guide "Requests every provider accepts" (docs/guides/providers.md) lists the
same rules. Two levels:

* ``check_request(sent, history)``: the message objects a trim sends,
  against the history they came from (rules R1-R7 below);
* ``check_payloads(sent)``: those messages formatted as the providers'
  integrations really send them (langchain-openai's Chat Completions and
  Responses payloads, langchain-anthropic's Messages payload, with and without
  extended thinking), each payload checked by the provider's own rules
  (P1-P6).

Message rules:

R1. System (and developer) messages come first; then a user message (a
    summary is one).
R2. Every tool call of an assistant message is answered by a result before
    the next user or assistant message, and every result answers a call of
    the assistant message before it (OpenAI and Anthropic both answer 400).
R3. Reasoning blocks (``thinking`` with its signature, ``redacted_thinking``,
    ``reasoning``) of every sent assistant message are those of the history's
    message of the same id, unchanged and in the same order (less one that
    preceded an unanswered call left out: it goes with that call); an
    assistant message that holds one starts with it when it did, and does not
    end with one unless it did.
R4. A sent assistant message's tool calls (``tool_calls``, and ``tool_use``,
    Responses ``function_call`` and v1 ``tool_call`` blocks) are the
    history's, unchanged, less the unanswered ones.
R5. Each ``tool_result`` block answers its own call: its id is the history's,
    and its text comes from that block alone (a cut keeps a head of it).
R6. A user's own text blocks beside results are kept.
R7. Anthropic with thinking: the first assistant message after the last
    user message (the current tool-use cycle) starts with a thinking block
    when the history's did.

Payload rules:

P1. OpenAI Chat: every ``tool_calls`` id of an assistant message is answered
    by ``role: tool`` messages right after it, and every tool message answers
    one.
P2. OpenAI Responses: every ``function_call`` item has its
    ``function_call_output`` before the next message item; every output has
    its call; a ``reasoning`` item is followed by an item of the same turn
    (a message or a function call).
P3. Anthropic: the first message is a user message; roles alternate after
    LangChain merges consecutive ones.
P4. Anthropic: the ``tool_use`` ids of an assistant message are exactly
    answered by ``tool_result`` blocks of the next (user) message, and a
    ``tool_result`` only answers the assistant message before it.
P5. Anthropic: an assistant message that holds a thinking block starts with
    one, and its last block is not a thinking block.
P6. Anthropic with thinking: the assistant's turn in progress (its messages
    after the last user message that holds no tool result) starts with a
    thinking block once it has used a tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from langchain_core.messages import BaseMessage
from pydantic import SecretStr

from langchain_turntrim._anatomy import check
from langchain_turntrim._core import ANCHOR, CONTINUE, PINNED, REPLY, START

REASONING = ("thinking", "redacted_thinking", "reasoning")
THINKING = ("thinking", "redacted_thinking")
#: Content blocks that call a tool (Anthropic, OpenAI Responses, LangChain v1),
#: and the key holding the call's id.
CALL_BLOCKS = {"tool_use": "id", "function_call": "call_id", "tool_call": "id"}


def message_kinds(messages: Sequence[BaseMessage]) -> list[int]:
    """Each message's turn kind, as the trimmer reads it."""
    return [check(i, m) for i, m in enumerate(messages)]


class ProviderRuleError(AssertionError):
    """A request a provider would refuse, naming the rule."""


def fail(rule: str, text: str) -> NoReturn:
    raise ProviderRuleError(f"{rule}: {text}")


def blocks(message: BaseMessage) -> list[Any]:
    content = message.content
    return list(content) if isinstance(content, list) else []


def block_type(block: object) -> object:
    return block.get("type") if isinstance(block, dict) else None


def reasoning_blocks(message: BaseMessage) -> list[Any]:
    return [b for b in blocks(message) if block_type(b) in REASONING]


def block_call_id(block: object) -> str | None:
    """The id of the call a content block makes (None: it makes none)."""
    if not isinstance(block, dict):
        return None
    key = CALL_BLOCKS.get(block.get("type", ""))
    value = block.get(key) if key is not None else None
    return str(value) if value else None


def call_ids(message: BaseMessage) -> list[str]:
    """A message's calls: its ``tool_calls`` and its call blocks in any format
    (``tool_use``, ``function_call``, ``tool_call``), once each."""
    ids = [str(c["id"]) for c in getattr(message, "tool_calls", None) or () if c.get("id")]
    ids += [i for i in map(block_call_id, blocks(message)) if i]
    return list(dict.fromkeys(ids))


def result_ids(message: BaseMessage) -> list[str]:
    tool_id = getattr(message, "tool_call_id", None)
    if tool_id:
        return [str(tool_id)]
    return [str(b.get("tool_use_id")) for b in blocks(message) if block_type(b) == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def check_request(
    sent: Sequence[BaseMessage], history: Sequence[BaseMessage], *, thinking: bool = False
) -> None:
    """Raise ``ProviderRuleError`` unless ``sent``, trimmed from ``history``,
    meets R1-R7 (``thinking``: Anthropic's extended thinking is on)."""
    if not sent:
        fail("R1", "nothing sent")
    by_id = {m.id: m for m in history if m.id}
    kinds = message_kinds(sent)
    start = 0
    while start < len(kinds) and kinds[start] == PINNED:
        start += 1
    if start == len(kinds):
        return  # the spec's overflow result: the system messages alone
    if kinds[start] not in (START, ANCHOR):
        fail("R1", f"message {start} ({type(sent[start]).__name__}) opens the conversation")
    if PINNED in kinds[start:]:
        fail("R1", "a system message after the conversation started")
    open_calls: set[str] = set()
    for i in range(start, len(sent)):
        message, kind = sent[i], kinds[i]
        answers = result_ids(message) if kind == CONTINUE else []
        for call in answers:
            if call not in open_calls:
                fail("R2", f"message {i} answers {call}, not a call of the reply before it")
            open_calls.discard(call)
        if kind == CONTINUE:
            continue
        if open_calls:
            fail("R2", f"calls {sorted(open_calls)} unanswered before message {i}")
        if kind == REPLY:
            open_calls = set(call_ids(message))
    if open_calls:
        fail("R2", f"calls {sorted(open_calls)} unanswered at the end")
    for i, message in enumerate(sent):
        original = by_id.get(message.id) if message.id else None
        if original is None:
            continue
        if kinds[i] == REPLY:
            _check_reply(i, message, original)
        elif kinds[i] in (START, CONTINUE):
            _check_results(i, message, original)
    if thinking:
        _check_cycle(sent, history, kinds)


def _check_reply(i: int, message: BaseMessage, original: BaseMessage) -> None:
    kept = call_ids(message)
    if not set(kept) <= set(call_ids(original)):
        fail("R4", f"message {i} ({message.id}) holds calls the history's does not")
    _check_reasoning(i, message, original, set(call_ids(original)) - set(kept))
    for field in ("tool_calls",):
        calls = {c["id"]: c for c in getattr(original, field, None) or ()}
        for call in getattr(message, field, None) or ():
            if calls.get(call["id"]) != call:
                fail("R4", f"message {i} ({message.id}): call {call['id']} changed")
    made = {block_call_id(b): b for b in blocks(original) if block_call_id(b)}
    for block in blocks(message):
        ident = block_call_id(block)
        if ident and made.get(ident) != block:
            fail("R4", f"message {i} ({message.id}): {block_type(block)} {ident} changed")


def _check_reasoning(
    i: int, message: BaseMessage, original: BaseMessage, left_out: set[str]
) -> None:
    """R3: the history's reasoning blocks, unchanged and in order; one may be
    missing only when the item it preceded is a call left out of the request
    (it goes with that call)."""
    content = blocks(original)
    expected: list[tuple[Any, bool]] = []  # (block, may be missing)
    for k, block in enumerate(content):
        if block_type(block) in REASONING:
            after = next((b for b in content[k + 1 :] if block_type(b) not in REASONING), None)
            expected.append((block, block_call_id(after) in left_out))
    sent = reasoning_blocks(message)
    j = 0
    for block, optional in expected:
        if j < len(sent) and sent[j] == block:
            j += 1
        elif not optional:
            fail("R3", f"message {i} ({message.id}): reasoning blocks changed or lost")
    if j != len(sent):
        fail("R3", f"message {i} ({message.id}): reasoning blocks changed or added")
    opened = expected and not expected[0][1] and block_type(content[0]) in REASONING
    if opened and blocks(message)[:1] != content[:1]:
        fail("R3", f"message {i} ({message.id}) no longer starts with its reasoning")
    last = blocks(message)[-1:]
    if last and block_type(last[0]) in REASONING and block_type(content[-1]) not in REASONING:
        fail("R3", f"message {i} ({message.id}) ends with a reasoning block")


def _check_results(i: int, message: BaseMessage, original: BaseMessage) -> None:
    originals = {
        b.get("tool_use_id"): b for b in blocks(original) if block_type(b) == "tool_result"
    }
    for block in blocks(message):
        if block_type(block) != "tool_result":
            continue
        source = originals.get(block.get("tool_use_id"))
        if source is None:
            fail("R5", f"message {i} ({message.id}): a tool_result block not in the history")
        text, full = result_text(block), result_text(source)
        if text != full and not text.startswith("[result of ") and not _is_cut_of(text, full):
            fail("R5", f"message {i} ({message.id}): result {block.get('tool_use_id')} mixed")
    texts = [b for b in blocks(original) if block_type(b) == "text"]
    sent_texts = [b for b in blocks(message) if block_type(b) == "text"]
    if texts and originals and len(sent_texts) < len(texts):
        fail("R6", f"message {i} ({message.id}): the user's text blocks were dropped")


def _is_cut_of(text: str, full: str) -> bool:
    """``text`` is ``full`` cut around a note (a head of it, then the note)."""
    head, marker, _ = text.partition("\n[... ")
    return bool(marker) and full.startswith(head)


def _check_cycle(
    sent: Sequence[BaseMessage], history: Sequence[BaseMessage], kinds: Sequence[int]
) -> None:
    last_user = max((i for i, k in enumerate(kinds) if k in (START, ANCHOR)), default=-1)
    replies = [i for i in range(last_user + 1, len(sent)) if kinds[i] == REPLY]
    if not replies:
        return
    history_kinds = message_kinds(history)
    history_user = max(i for i, k in enumerate(history_kinds) if k in (START, ANCHOR))
    first_reply = next(
        (history[i] for i in range(history_user + 1, len(history)) if history_kinds[i] == REPLY),
        None,
    )
    opened = (
        first_reply is not None and block_type(next(iter(blocks(first_reply)), None)) in THINKING
    )
    if opened and block_type(next(iter(blocks(sent[replies[0]])), None)) not in THINKING:
        fail("R7", f"message {replies[0]} opens the tool-use cycle without its thinking block")


# -- payloads, as the integrations build them ------------------------------------------------


_MODELS: dict[str, Any] = {}


def _models() -> dict[str, Any]:
    if not _MODELS:
        from langchain_anthropic import ChatAnthropic
        from langchain_openai import ChatOpenAI

        key = SecretStr("sk-test")
        claude: dict[str, Any] = {"model": "claude-sonnet-4-5", "api_key": key}
        thinking: dict[str, Any] = {
            "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        }
        _MODELS.update(
            {
                "openai-chat": ChatOpenAI(model="gpt-4o", api_key=key),
                "openai-responses": ChatOpenAI(model="gpt-5", api_key=key, use_responses_api=True),
                "anthropic": ChatAnthropic(**claude),
                "anthropic-thinking": ChatAnthropic(**claude, **thinking),
            }
        )
    return _MODELS


#: Every payload ``check_payloads`` builds.
PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "anthropic-thinking")
OPENAI = PROVIDERS[:2]
ANTHROPIC = PROVIDERS[2:]


def payloads(sent: Sequence[BaseMessage], providers: Sequence[str] = PROVIDERS) -> dict[str, Any]:
    """The request bodies langchain-openai and langchain-anthropic build for
    ``sent`` (no network: their own formatting, called as a request would)."""
    models = _models()
    return {name: models[name]._get_request_payload(list(sent)) for name in providers}


def check_payloads(
    sent: Sequence[BaseMessage],
    *,
    thinking: bool = False,
    providers: Sequence[str] = PROVIDERS,
) -> None:
    """Raise ``ProviderRuleError`` unless every payload built for ``sent``
    (for ``providers``) meets P1-P6 (P6 when ``thinking``: the history came
    from a thinking model)."""
    built = payloads(sent, providers)
    if "openai-chat" in built:
        _check_chat(built["openai-chat"]["messages"])
    if "openai-responses" in built:
        _check_responses(built["openai-responses"]["input"])
    if "anthropic" in built:
        _check_anthropic(built["anthropic"]["messages"], thinking=False)
    if "anthropic-thinking" in built:
        _check_anthropic(built["anthropic-thinking"]["messages"], thinking=thinking)


def _check_chat(messages: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                fail("P1", f"chat message {i} answers no open call")
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            fail("P1", f"chat calls {sorted(open_calls)} unanswered before message {i}")
        if role == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    if open_calls:
        fail("P1", f"chat calls {sorted(open_calls)} unanswered at the end")


def _check_responses(items: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            open_calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item.get("call_id") not in open_calls:
                fail("P2", f"responses item {i} answers no open call")
            open_calls.discard(item["call_id"])
        elif kind == "reasoning":
            after = items[i + 1] if i + 1 < len(items) else None
            if after is None or after.get("type") not in ("message", "function_call", "reasoning"):
                fail("P2", f"responses reasoning item {i} has no following item")
            if (
                after is not None
                and after.get("type") == "message"
                and after.get("role") != "assistant"
            ):
                fail("P2", f"responses reasoning item {i} is followed by a user message")
        elif open_calls and item.get("role") in ("user", "assistant", "system", "developer"):
            fail("P2", f"responses calls {sorted(open_calls)} unanswered before item {i}")
    if open_calls:
        fail("P2", f"responses calls {sorted(open_calls)} unanswered at the end")


def _check_anthropic(messages: list[dict[str, Any]], *, thinking: bool) -> None:
    if not messages:
        return
    if messages[0]["role"] != "user":
        fail("P3", "the first anthropic message is not a user message")
    for i in range(1, len(messages)):
        if messages[i]["role"] == messages[i - 1]["role"]:
            fail("P3", f"anthropic messages {i - 1} and {i} have the same role")
    for i, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        kinds = [block_type(b) for b in content]
        results = [b.get("tool_use_id") for b in content if block_type(b) == "tool_result"]
        if message["role"] == "assistant":
            uses = [b["id"] for b in content if block_type(b) == "tool_use"]
            after = messages[i + 1] if i + 1 < len(messages) else None
            answered = [
                b.get("tool_use_id")
                for b in (after["content"] if after and isinstance(after["content"], list) else [])
                if block_type(b) == "tool_result"
            ]
            if sorted(uses) != sorted(answered):
                fail("P4", f"anthropic message {i}: tool_use {uses} answered by {answered}")
            if any(k in THINKING for k in kinds):
                if kinds[0] not in THINKING:
                    fail("P5", f"anthropic message {i} holds thinking but does not start with it")
                if kinds[-1] in THINKING:
                    fail("P5", f"anthropic message {i} ends with a thinking block")
        elif results:
            before = messages[i - 1] if i else None
            uses = [
                b["id"]
                for b in (
                    before["content"] if before and isinstance(before["content"], list) else []
                )
                if block_type(b) == "tool_use"
            ]
            if not set(results) <= set(uses):
                fail("P4", f"anthropic message {i}: results {results} answer no call before them")
    if thinking:
        _check_thinking_cycle(messages)


def _check_thinking_cycle(messages: list[dict[str, Any]]) -> None:
    """P6: the assistant's turn in progress (from the last user message that
    holds no tool result) opens with a thinking block when it used tools."""

    def has_results(message: dict[str, Any]) -> bool:
        content = message["content"]
        return isinstance(content, list) and any(block_type(b) == "tool_result" for b in content)

    users = [i for i, m in enumerate(messages) if m["role"] == "user" and not has_results(m)]
    start = users[-1] + 1 if users else 0
    cycle = messages[start:]
    if not any(m["role"] == "user" for m in cycle):
        return  # no tool results yet in this turn: nothing to continue
    first = cycle[0]
    content = first["content"] if isinstance(first["content"], list) else []
    if not content or block_type(content[0]) not in THINKING:
        fail("P6", f"anthropic message {start} opens the tool-use cycle without thinking")
