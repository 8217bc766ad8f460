"""Reusable Hypothesis strategies for LangChain messages.

Everything here builds valid ``langchain_core`` messages. By default the
messages are ones ``ChatOpenAI.get_num_tokens_from_messages`` can count
offline (``allow_fetching_images=False``) and count exactly: no special-token
text, images only with ``"detail": "low"``, tool-call names and arguments
always strings. Flags widen that where a test wants the awkward cases.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call

__all__ = [
    "SPECIAL_TOKENS",
    "ai_messages",
    "chat_messages",
    "content_blocks",
    "contents",
    "conversations",
    "function_messages",
    "human_messages",
    "image_blocks",
    "invalid_tool_calls",
    "json_values",
    "message_lists",
    "messages",
    "names",
    "raw_tool_call_arguments",
    "reassignments",
    "system_messages",
    "texts",
    "tool_calls",
    "tool_messages",
    "tricky_contents",
]

#: Special-token strings of the OpenAI encodings (tiktoken's ``encode`` raises on them).
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|endofprompt|>",
)

_SAMPLES = (
    "",
    " ",
    "\n",
    "  \t\n\n  ",
    "Hello, world!",
    "What's the weather in Paris today?",
    "Grüße aus Köln — naïve café, señor.",
    "日本語のテキストと中文字符",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "👋🏽 emoji 🎉🧑‍🚀 and ZWJ 👨‍👩‍👧‍👦",
    "def f(x):\n    return x ** 2\n\n\nprint(f(3))",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "https://example.com/path?q=1&r=two#frag",
    "1234567890 3.14159 -42 1e10",
    "<| not a special token |>",
    "</s><s>[INST] <<SYS>>",
    "\u00a0\u2003\u200b\ufeff",
)

_ALPHABET = st.characters(codec="utf-8")


# Built once per arguments: draws call these inside composites, and Hypothesis
# would check a new recursive strategy at each call.
@functools.cache
def texts(*, max_size: int = 40, special_tokens: bool = False) -> st.SearchStrategy[str]:
    """Text: arbitrary Unicode, tricky samples, whitespace runs and long repeats.

    With ``special_tokens=True`` some strings embed ``SPECIAL_TOKENS``;
    otherwise no string contains one.
    """
    plain = st.one_of(
        st.text(_ALPHABET, max_size=max_size),
        st.text(st.sampled_from(" \t\n\r"), max_size=max_size),
        st.sampled_from(_SAMPLES),
        st.builds(
            lambda chunk, times: chunk * times,
            st.one_of(st.sampled_from(_SAMPLES[4:]), st.text(_ALPHABET, min_size=1, max_size=8)),
            st.integers(20, 300),
        ),
    )
    if special_tokens:
        return st.one_of(
            plain,
            st.builds(lambda a, tok, b: a + tok + b, plain, st.sampled_from(SPECIAL_TOKENS), plain),
        )
    return plain.filter(lambda s: not any(tok in s for tok in SPECIAL_TOKENS))


def names() -> st.SearchStrategy[str | None]:
    """Values for a message ``name``: absent, empty or text."""
    return st.one_of(st.none(), st.just(""), texts(max_size=12))


@functools.cache
def json_values(*, max_leaves: int = 10) -> st.SearchStrategy[Any]:
    """JSON-compatible values (NaN and infinities included, as json.dumps allows)."""
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), texts(max_size=12))
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(texts(max_size=8), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def _ids() -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), st.from_regex(r"call_[A-Za-z0-9]{4,24}", fullmatch=True))


def tool_calls() -> st.SearchStrategy[Any]:
    """LangChain ``ToolCall`` dicts with arbitrary JSON arguments."""
    return st.builds(
        tool_call,
        name=texts(max_size=20),
        args=st.dictionaries(texts(max_size=10), json_values(), max_size=4),
        id=_ids(),
    )


def invalid_tool_calls(*, allow_none: bool = False) -> st.SearchStrategy[Any]:
    """LangChain ``InvalidToolCall`` dicts (``None`` name/args only if asked)."""
    strs: st.SearchStrategy[str | None] = texts(max_size=30)
    if allow_none:
        strs = st.one_of(st.none(), strs)
    return st.builds(
        invalid_tool_call,
        name=strs,
        args=strs,
        id=_ids(),
        error=st.one_of(st.none(), texts(max_size=20)),
    )


def image_blocks(*, low_only: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Image content blocks. ``low_only`` keeps to ``image_url`` with detail "low"."""
    urls = st.one_of(
        st.sampled_from(["https://example.com/cat.png", "http://127.0.0.1:9/x.jpg"]),
        st.just(
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        ),
    )
    low = st.builds(lambda u: {"type": "image_url", "image_url": {"url": u, "detail": "low"}}, urls)
    if low_only:
        return low
    return st.one_of(
        low,
        st.builds(
            lambda u, d: {"type": "image_url", "image_url": {"url": u, "detail": d}},
            urls,
            st.sampled_from(["high", "auto"]),
        ),
        st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, urls),
        st.builds(lambda u: {"type": "image", "url": u}, urls),
        st.just({"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}),
        st.just({"type": "image", "source_type": "url", "url": "https://example.com/a.gif"}),
        st.just(
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
            }
        ),
        st.just({"type": "image", "source": {"type": "url", "url": "https://example.com/b.png"}}),
    )


def content_blocks(*, low_only_images: bool = True) -> st.SearchStrategy[Any]:
    """Blocks of a list ``content``: plain strings, text blocks, images, blocks
    ChatOpenAI drops (thinking, tool_use, ...) and ``file`` blocks (which
    ChatOpenAI counts as 0 with a warning)."""
    text = texts()
    return st.one_of(
        text,
        st.builds(lambda t: {"type": "text", "text": t}, text),
        st.builds(
            lambda t, i: {"type": "text", "text": t, "id": i, "annotations": []},
            text,
            st.text(max_size=5),
        ),
        st.builds(
            lambda t: {"type": "text", "text": t, "extras": {"prompt_cache_breakpoint": True}},
            text,
        ),
        image_blocks(low_only=low_only_images),
        st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "sig"}, text),
        st.builds(lambda t: {"type": "reasoning_content", "reasoning_content": t}, text),
        st.builds(
            lambda t: {"type": "tool_use", "id": "toolu_1", "name": t, "input": {"q": t}}, text
        ),
        st.just({"type": "file", "file": {"file_id": "file-abc123"}}),
        st.just({"type": "file", "file_id": "file-abc123"}),
        st.just(
            {
                "type": "file",
                "base64": "JVBERi0xLjQK",
                "mime_type": "application/pdf",
                "filename": "a.pdf",
            }
        ),
        # An Anthropic-style image with an unusable source: ChatOpenAI drops it.
        st.just({"type": "image", "source": {"type": "file", "file_id": "file-1"}}),
    )


def contents(*, low_only_images: bool = True) -> st.SearchStrategy[Any]:
    """A message ``content``: a string or a list of blocks."""
    return st.one_of(
        texts(),
        st.lists(content_blocks(low_only_images=low_only_images), max_size=5),
    )


def _kwargs_name() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), st.builds(lambda n: {"name": n}, texts(max_size=10)))


def human_messages() -> st.SearchStrategy[BaseMessage]:
    """``HumanMessage`` and ``HumanMessageChunk``, with or without names."""
    return st.builds(
        lambda cls, c, n, kw: cls(content=c, name=n, additional_kwargs=kw),
        st.sampled_from([HumanMessage, HumanMessageChunk]),
        contents(),
        names(),
        _kwargs_name(),
    )


def system_messages() -> st.SearchStrategy[BaseMessage]:
    """``SystemMessage`` including developer ones (``__openai_role__``)."""
    kwargs = st.one_of(
        st.just({}),
        st.just({"__openai_role__": "developer"}),
        st.builds(lambda r: {"__openai_role__": r}, texts(max_size=10)),
    )
    return st.builds(
        lambda c, n, kw: SystemMessage(content=c, name=n, additional_kwargs=kw),
        contents(),
        names(),
        kwargs,
    )


def _raw_tool_call(call_id: str | None, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
        "index": 0,
    }


def _ai(
    cls: type[AIMessage], content: Any, name: str | None, extra: dict[str, Any], mode: str
) -> AIMessage:
    message = cls(content=content, name=name, additional_kwargs=extra)
    if mode == "raw":  # keep only the raw OpenAI tool calls in additional_kwargs
        message.tool_calls = []
        message.invalid_tool_calls = []
    return message


def _not_json_scalar(text: str) -> bool:
    # AIMessage parses raw tool-call arguments (``json.loads(...) or {}``): truthy
    # JSON that is not an object would fail its validation.
    try:
        parsed = json.loads(text)
    except ValueError:
        return True
    return isinstance(parsed, dict) or not parsed


def raw_tool_call_arguments() -> st.SearchStrategy[str]:
    """``arguments`` strings of raw OpenAI tool calls: JSON objects or broken JSON."""
    return st.one_of(
        st.builds(
            lambda args, ascii_: json.dumps(args, ensure_ascii=ascii_),
            st.dictionaries(texts(max_size=10), json_values(), max_size=4),
            st.booleans(),
        ),
        texts(max_size=30).filter(_not_json_scalar),
    )


def ai_messages() -> st.SearchStrategy[BaseMessage]:
    """``AIMessage``/``AIMessageChunk``: plain, with tool calls and invalid tool
    calls, with raw ``additional_kwargs`` tool calls only, with a legacy
    ``function_call``; any of them possibly named or carrying ``audio``."""
    classes = st.sampled_from([AIMessage, AIMessageChunk])
    extras = st.one_of(
        st.just({}),
        _kwargs_name(),
        st.builds(
            lambda i: {"audio": {"id": i, "data": "UklGRg==", "expires_at": 1}},
            texts(max_size=10),
        ),
    )
    plain = st.builds(
        lambda cls, c, n, kw: cls(content=c, name=n, additional_kwargs=kw),
        classes,
        contents(),
        names(),
        extras,
    )
    with_calls = st.builds(
        lambda cls, c, n, kw, calls, bad: cls(
            content=c, name=n, additional_kwargs=kw, tool_calls=calls, invalid_tool_calls=bad
        ),
        classes,
        st.one_of(st.just(""), st.just([]), contents()),
        names(),
        extras,
        st.lists(tool_calls(), max_size=3),
        st.lists(invalid_tool_calls(), max_size=2),
    )
    function_call = st.builds(
        lambda cls, c, n, kw, fn, args: cls(
            content=c,
            name=n,
            additional_kwargs={**kw, "function_call": {"name": fn, "arguments": args}},
        ),
        classes,
        st.one_of(st.just(""), contents()),
        names(),
        extras,
        texts(max_size=15),
        raw_tool_call_arguments(),
    )
    raw_calls = st.lists(
        st.builds(_raw_tool_call, _ids(), texts(max_size=15), raw_tool_call_arguments()),
        max_size=3,
    )
    raw = st.builds(
        _ai,
        classes,
        st.one_of(st.just(""), contents()),
        names(),
        st.builds(lambda kw, calls: {**kw, "tool_calls": calls}, extras, raw_calls),
        st.just("raw"),
    )
    return st.one_of(plain, with_calls, function_call, raw)


def tool_messages() -> st.SearchStrategy[BaseMessage]:
    """``ToolMessage`` (its ``name`` is not sent to OpenAI)."""
    return st.builds(
        lambda c, i, n, s: ToolMessage(content=c, tool_call_id=i, name=n, status=s),
        contents(),
        st.one_of(st.just(""), st.from_regex(r"call_[A-Za-z0-9]{1,24}", fullmatch=True)),
        names(),
        st.sampled_from(["success", "error"]),
    )


def function_messages() -> st.SearchStrategy[BaseMessage]:
    """``FunctionMessage`` (legacy function results; ``name`` is required)."""
    return st.builds(
        lambda c, n: FunctionMessage(content=c, name=n), contents(), texts(max_size=15)
    )


def chat_messages() -> st.SearchStrategy[BaseMessage]:
    """``ChatMessage`` with OpenAI roles, odd roles and empty roles."""
    roles = st.one_of(
        st.sampled_from(["user", "assistant", "system", "developer", "tool", "critic", ""]),
        texts(max_size=10),
    )
    return st.builds(
        lambda c, r, n: ChatMessage(content=c, role=r, name=n), contents(), roles, names()
    )


def messages() -> st.SearchStrategy[BaseMessage]:
    """Any one message of the kinds above."""
    return st.one_of(
        human_messages(),
        ai_messages(),
        system_messages(),
        tool_messages(),
        function_messages(),
        chat_messages(),
    )


def message_lists(*, max_size: int = 8) -> st.SearchStrategy[list[BaseMessage]]:
    """Lists of messages of any kind, in any order."""
    return st.lists(messages(), max_size=max_size)


# --- whole conversations ------------------------------------------------------------


def _user(content: Any, flavour: int) -> BaseMessage:
    if flavour == 0:
        return HumanMessage(content=content)
    if flavour == 1:
        return HumanMessageChunk(content=content)
    return ChatMessage(content=content, role="user" if flavour == 2 else "human")


def _system(content: Any, flavour: int) -> BaseMessage:
    if flavour == 0:
        return SystemMessage(content=content)
    if flavour == 1:
        return SystemMessage(content=content, additional_kwargs={"__openai_role__": "developer"})
    return ChatMessage(content=content, role="system" if flavour == 2 else "developer")


@st.composite
def _step(draw: st.DrawFn, turn: int, step: int) -> list[BaseMessage]:
    """One assistant step: a reply, or parallel tool calls and all their results."""
    text = draw(texts(max_size=20))
    calls = draw(st.integers(0, 3))
    if not calls:
        cls = draw(st.sampled_from([AIMessage, AIMessageChunk]))
        if draw(st.booleans()):
            return [ChatMessage(content=text, role=draw(st.sampled_from(["assistant", "ai"])))]
        return [cls(content=text)]
    ids = [draw(st.text(min_size=1, max_size=8)) + f"#{turn}.{step}.{k}" for k in range(calls)]
    requested = [
        tool_call(name=draw(_TOOL_NAMES), args=draw(json_values().map(_as_args)), id=i) for i in ids
    ]
    cls = draw(st.sampled_from([AIMessage, AIMessageChunk]))
    ai = cls(content=text, tool_calls=requested)
    order = draw(st.permutations(ids))
    results = [ToolMessage(content=draw(texts(max_size=60)), tool_call_id=i) for i in order]
    return [ai, *results]


_TOOL_NAMES = st.sampled_from(["search", "get_weather", "book_flight", "run_sql", "x"])


def _as_args(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"value": value}


@st.composite
def conversations(draw: st.DrawFn, max_turns: int = 8) -> list[BaseMessage]:
    """Conversations OpenAI and Anthropic accept: system messages first, then
    turns that start with a user message, every tool call answered by its
    results (parallel calls, results in any order), chunks and ChatMessage
    roles mixed in."""
    flavours = st.integers(0, 3)
    # Plain text or text blocks: cheap to draw, so many conversations fit in a run.
    content = st.one_of(texts(), st.lists(texts().map(lambda t: {"type": "text", "text": t})))
    history = [_system(draw(content), draw(flavours)) for _ in range(draw(st.integers(0, 2)))]
    for turn in range(draw(st.integers(1, max_turns))):
        history.append(_user(draw(content), draw(flavours)))
        for step in range(draw(st.integers(0, 3))):
            history += draw(_step(turn, step))
    return history


# --- changes to existing messages ----------------------------------------------------


def tricky_contents() -> st.SearchStrategy[Any]:
    """Contents, and strings that spell other contents (their repr, their str)."""
    base = contents()
    return st.one_of(base, base.map(repr), base.map(str), st.just(""), st.just([]))


def reassignments() -> st.SearchStrategy[tuple[str, Any]]:
    """A counted field's name and a new value for it, odd values included (a
    list as a name, an unknown chat role)."""
    return st.one_of(
        st.tuples(st.just("content"), tricky_contents()),
        st.tuples(st.just("name"), st.one_of(names(), st.just(["a", "b"]), st.just(7))),
        st.tuples(
            st.just("additional_kwargs"),
            st.dictionaries(st.sampled_from(["name", "x", "__openai_role__"]), json_values()),
        ),
        st.tuples(st.just("tool_calls"), st.lists(tool_calls(), max_size=2)),
        st.tuples(st.just("tool_call_id"), st.text(max_size=5)),
        st.tuples(st.just("role"), st.sampled_from(["user", "assistant", "robot"])),
    )


def field_reassignments() -> st.SearchStrategy[tuple[str, Any]]:
    """``reassignments``, and fields no count depends on but a copy carries
    (``id``, ``response_metadata``, a tool message's ``status`` and ``artifact``)."""
    return st.one_of(
        reassignments(),
        st.tuples(st.just("id"), st.none() | st.text(max_size=5)),
        st.tuples(st.just("response_metadata"), st.dictionaries(st.just("model"), json_values())),
        st.tuples(st.just("status"), st.sampled_from(["success", "error"])),
        st.tuples(st.just("artifact"), json_values()),
    )


# --- OpenAI message dicts, as the turntrim command reads them --------------------------


def _openai_call(call_id: str, name: str, args: dict[str, Any], ascii_: bool) -> dict[str, Any]:
    arguments = json.dumps(args, ensure_ascii=ascii_)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


#: OpenAI's tool call ids (``call_...``).
_CALL_IDS = st.text("abcXYZ0189", min_size=1, max_size=12).map("call_".__add__)


def _openai_calls() -> st.SearchStrategy[list[dict[str, Any]]]:
    call = st.builds(
        _openai_call,
        _CALL_IDS,
        texts(max_size=12),
        st.dictionaries(texts(max_size=10), json_values(), max_size=4),
        st.booleans(),
    )
    return st.lists(call, max_size=3)


@st.composite
def plain_openai_messages(draw: st.DrawFn) -> dict[str, Any]:
    """OpenAI message dicts that ``PlainCounter`` counts (see its module)."""
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
    message: dict[str, Any] = {"role": role}
    calls = draw(_openai_calls()) if role == "assistant" and draw(st.booleans()) else None
    content = draw(st.one_of(texts(special_tokens=True), st.just(""), st.none()))
    if not (calls and draw(st.booleans())):  # OpenAI may omit content beside tool calls
        message["content"] = content
    if calls is not None:
        message["tool_calls"] = calls
    if role == "tool":
        message["tool_call_id"] = draw(_CALL_IDS)
    name = draw(names())
    if name is not None or draw(st.booleans()):
        message["name"] = name
    if draw(st.booleans()):
        message["id"] = draw(st.one_of(st.none(), st.integers(0, 999).map("m{}".format)))
    return message


def _with_arguments(message: dict[str, Any], arguments: str) -> dict[str, Any]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {**message, "role": "assistant", "tool_calls": [call]}


#: Changes that make a plain message one that LangChain must convert (or reject).
_UNPLAIN: tuple[Callable[[dict[str, Any]], Any], ...] = (
    lambda m: {**m, "content": [{"type": "text", "text": "x"}]},
    lambda m: {**m, "content": 5},
    lambda m: {**m, "name": 7},
    lambda m: {**m, "id": 3},
    lambda m: {**m, "refusal": None},
    lambda m: {**m, "function_call": {"name": "f", "arguments": "{}"}},
    lambda m: {**m, "role": "function", "name": "f"},
    lambda m: {**m, "role": "human"},
    lambda m: {**m, "role": "tool", "tool_call_id": None},
    lambda m: {k: v for k, v in m.items() if k != "content"},
    lambda m: {**m, "role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
    lambda m: {
        **m,
        "role": "assistant",
        "tool_calls": [{**_openai_call("c", "f", {}, True), "x": 1}],
    },
    lambda m: {**m, "role": "assistant", "tool_calls": _openai_call("c", "f", {}, True)},
    lambda m: {**m, "role": "user", "tool_calls": []},
)
#: Tool-call arguments LangChain rejects, or parses into something other than an object.
_BAD_ARGUMENTS = ("[1]", "{", '{"a": "\x01"}', "null", "", "7", '"s"')


@st.composite
def openai_messages(draw: st.DrawFn) -> Any:
    """Plain OpenAI message dicts, and some that are not plain (or not messages)."""
    message = draw(plain_openai_messages())
    if draw(st.integers(0, 3)):
        return message
    return draw(
        st.one_of(
            st.sampled_from(_UNPLAIN).map(lambda change: change(message)),
            st.sampled_from(_BAD_ARGUMENTS).map(lambda a: _with_arguments(message, a)),
            st.sampled_from(["text", None, [], 3]),
        )
    )
