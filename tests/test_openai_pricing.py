"""TiktokenCounter's images and tool schemas: OpenAI's documented prices, never a fetch.

Only cl100k_base is available offline. Image prices do not depend on the
encoding, so counters of o200k_base models are built with cl100k_base served
in its place (``any_encoding``): their image figures are exact.
"""

from __future__ import annotations

import base64
import functools
import math
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import tiktoken
import tiktoken.model
import tiktoken.registry
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from langchain_turntrim._counting.openai import TiktokenCounter

pytestmark = pytest.mark.usefixtures("tiktoken_cache")


@functools.cache
def cl100k_named(name: str) -> tiktoken.Encoding:
    """cl100k_base under another encoding's name."""
    real = tiktoken.get_encoding("cl100k_base")
    ranks, special = real._mergeable_ranks, real._special_tokens
    return tiktoken.Encoding(
        name, pat_str=real._pat_str, mergeable_ranks=ranks, special_tokens=special
    )


@pytest.fixture
def any_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve cl100k_base under every encoding's name (image prices ignore the encoding)."""
    names = tiktoken.list_encoding_names()
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {n: cl100k_named(n) for n in names})
    monkeypatch.setattr(tiktoken, "get_encoding", cl100k_named)
    monkeypatch.setattr(tiktoken.model, "get_encoding", cl100k_named)


# --- real image headers ---------------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    chunk = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0d" + chunk + struct.pack(">I", zlib.crc32(chunk))


def jpeg(width: int, height: int, *, app_bytes: int = 14) -> bytes:
    """SOI, an APP1 segment of ``app_bytes`` bytes, then a baseline SOF0 frame header."""
    app = b"\xff\xe1" + struct.pack(">H", app_bytes + 2) + b"E" * app_bytes
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    return b"\xff\xd8" + app + sof + b"\xff\xda"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


def webp(kind: bytes, body: bytes) -> bytes:
    chunk = kind + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


FORMATS: dict[str, Callable[[int, int], bytes]] = {
    "png": png,
    "jpeg": jpeg,
    "gif": gif,
    "webp-vp8": lambda w, h: webp(b"VP8 ", b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", w, h)),
    "webp-vp8l": lambda w, h: webp(
        b"VP8L", b"\x2f" + ((w - 1) | (h - 1) << 14).to_bytes(4, "little")
    ),
    "webp-vp8x": lambda w, h: webp(
        b"VP8X", b"\x00" * 4 + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    ),
}


def data_url(data: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(data).decode()}"


def url_block(url: str, detail: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": url} if detail is None else {"url": url, "detail": detail}
    return {"type": "image_url", "image_url": spec}


def image_cost(counter: TiktokenCounter, block: dict[str, Any]) -> int:
    """The tokens one image block adds to a user message."""
    (with_image, empty) = counter.count_each([HumanMessage([block]), HumanMessage([])])
    return with_image - empty


# --- sizes from headers -------------------------------------------------------------------


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("width", "height"), [(1, 1), (100, 7), (300, 2000), (2048, 4096)])
def test_size_is_read_from_each_format_header(fmt: str, width: int, height: int) -> None:
    c = TiktokenCounter("o4-mini")  # patch-priced: each size has its own price
    data = FORMATS[fmt](width, height)
    expected = c.image_tokens(width, height)
    assert image_cost(c, url_block(data_url(data))) == expected
    bare = {"type": "image", "base64": base64.b64encode(data).decode(), "mime_type": "image/png"}
    assert image_cost(c, bare) == expected


def test_jpeg_frame_after_a_large_metadata_segment_is_found() -> None:
    c = TiktokenCounter("gpt-4")
    data = jpeg(100, 100, app_bytes=60_000)  # the frame header is far past the first bytes
    assert image_cost(c, url_block(data_url(data))) == 85 + 170


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,",
        "data:image/png,rawbytes",
        "data:image/png;base64,not base64 at all!",
        data_url(b"BM this is a bitmap"),
        data_url(png(0, 5)),
        data_url(b"\xff\xd8\xff\xda scan before any frame"),
    ],
)
def test_unreadable_data_costs_what_an_unsized_image_does(url: str) -> None:
    c = TiktokenCounter("gpt-4")
    assert image_cost(c, url_block(url)) == c.url_image_tokens == 85 + 8 * 170


# --- tile and patch prices -------------------------------------------------------------------


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpt_4o_documented_examples_from_real_headers(fmt: str) -> None:
    c, make = TiktokenCounter("gpt-4o"), FORMATS[fmt]
    assert image_cost(c, url_block(data_url(make(1024, 1024)), "high")) == 765
    assert image_cost(c, url_block(data_url(make(1024, 1024)))) == 765  # auto is high
    assert image_cost(c, url_block(data_url(make(2048, 4096)), "high")) == 1105
    assert image_cost(c, url_block(data_url(make(4096, 8192)), "low")) == 85


@pytest.mark.usefixtures("any_encoding")
def test_every_image_block_shape_is_sized() -> None:
    c = TiktokenCounter("gpt-4o")
    raw = base64.b64encode(png(1024, 1024)).decode()
    blocks: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": f"data:image/png;base64,{raw}"},
        {"type": "image", "base64": raw, "mime_type": "image/png"},
        {"type": "image", "url": f"data:image/png;base64,{raw}"},
        {"type": "image", "source_type": "base64", "data": raw, "mime_type": "image/png"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": raw}},
    ]
    assert [image_cost(c, b) for b in blocks] == [765] * len(blocks)


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize(
    ("model", "base", "tile"),
    [
        ("gpt-4o-mini", 2833, 5667),
        ("gpt-4o-mini-2024-07-18", 2833, 5667),
        ("ft:gpt-4o-mini:org::abc", 2833, 5667),
        ("gpt-4o", 85, 170),
        ("gpt-4.1", 85, 170),
        ("gpt-4", 85, 170),
        ("o200k_base", 85, 170),
    ],
)
def test_tile_prices_by_model(model: str, base: int, tile: int) -> None:
    c = TiktokenCounter(model)
    assert image_cost(c, url_block(data_url(png(1024, 1024)), "high")) == base + 4 * tile
    assert image_cost(c, url_block(data_url(png(8, 8)), "low")) == base


@pytest.mark.parametrize(
    ("width", "height", "tiles"),
    [
        (512, 512, 1),
        (513, 512, 2),
        (768, 2048, 8),
        (4000, 1000, 4),
        (100, 3000, 4),
        (3000, 2000, 6),
    ],
)
def test_tile_formula_edges(width: int, height: int, tiles: int) -> None:
    assert TiktokenCounter("gpt-4").image_tokens(width, height, "high") == 85 + 170 * tiles


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize(
    ("model", "multiplier"), [("gpt-4.1-mini", 1.62), ("gpt-4.1-nano", 2.46), ("o4-mini", 1.72)]
)
def test_patch_prices(model: str, multiplier: float) -> None:
    c = TiktokenCounter(model)
    # 1024x1024: 32 x 32 patches; 1800x2400 is scaled to 1056x1408: 33 x 44 = 1452 patches.
    assert c.image_tokens(1024, 1024) == math.ceil(1024 * multiplier)
    assert c.image_tokens(1800, 2400) == math.ceil(1452 * multiplier)
    # 10000x10000 is scaled to 39 x 39 whole patches; 1024x1536 is exactly the cap.
    assert c.image_tokens(10_000, 10_000) == math.ceil(1521 * multiplier)
    assert c.image_tokens(1024, 1536) == c.image_tokens(5000, 7500) == math.ceil(1536 * multiplier)
    assert c.image_tokens(33, 32) == math.ceil(2 * multiplier)
    # 1082x1442 is scaled to 1056 x 1407.4: 33 x 44 patches, not 34 x 44 by float error.
    assert c.image_tokens(1082, 1442) == math.ceil(1452 * multiplier)
    low = url_block(data_url(jpeg(1024, 1024)), "low")
    assert image_cost(c, low) == math.ceil(1024 * multiplier)  # detail is not used
    assert c.url_image_tokens == math.ceil(1536 * multiplier)


@pytest.mark.parametrize(
    ("width", "height", "detail", "error"),
    [(0, 5, "low", ValueError), (5, 1.5, "low", TypeError), (5, 5, "medium", ValueError)],
)
def test_image_tokens_checks_its_arguments(
    width: Any, height: Any, detail: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        TiktokenCounter("gpt-4").image_tokens(width, height, detail)


# --- images without a size in the request ------------------------------------------------------


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize(
    ("model", "most"),
    [("gpt-4o", 85 + 8 * 170), ("gpt-4o-mini", 2833 + 8 * 5667), ("o4-mini", 2642)],
)
def test_unsized_images_cost_the_most_the_model_charges(model: str, most: int) -> None:
    c = TiktokenCounter(model)
    assert c.url_image_tokens == most
    sides = [1, 31, 32, 500, 512, 513, 767, 768, 769, 1024, 1500, 2047, 2048, 2049, 5000, 9999]
    assert max(c.image_tokens(w, h, "high") for w in sides for h in sides) == most
    unsized: list[dict[str, Any]] = [
        url_block("https://x.test/a.png"),
        url_block("https://x.test/a.png", "high"),
        {"type": "image_url", "image_url": "https://x.test/a.png"},
        {"type": "image", "url": "https://x.test/a.png"},
        {"type": "image", "file_id": "file-1"},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/b.png"}},
        {"type": "image", "base64": "bm90IGFuIGltYWdl", "mime_type": "image/png"},
    ]
    assert [image_cost(c, b) for b in unsized] == [most] * len(unsized)
    low = image_cost(c, url_block("https://x.test/a.png", "low"))
    assert low == (most if model == "o4-mini" else c.image_tokens(1, 1, "low"))
    dropped = {"type": "image", "source": {"type": "file", "file_id": "f"}}  # as ChatOpenAI does
    assert image_cost(c, dropped) == 0


def test_url_image_tokens_is_configurable() -> None:
    c = TiktokenCounter("gpt-4", url_image_tokens=500)
    assert image_cost(c, url_block("https://x.test/a.png")) == 500
    assert image_cost(c, url_block("https://x.test/a.png", "low")) == 85
    assert image_cost(c, url_block(data_url(png(1024, 1024)))) == 765
    assert c != TiktokenCounter("gpt-4")
    assert c == TiktokenCounter("gpt-4", url_image_tokens=500)
    assert "url_image_tokens=500" in repr(c)
    assert TiktokenCounter("gpt-4", url_image_tokens=1445) == TiktokenCounter("gpt-4")
    assert "url_image_tokens" not in repr(TiktokenCounter("gpt-4"))


# --- tool schemas ---------------------------------------------------------------------------

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-4"])
def test_cookbook_weather_example_matches_the_api_prompt_tokens(model: str) -> None:
    """The cookbook reports 105 prompt tokens from the API for these models."""
    messages: list[BaseMessage] = [
        SystemMessage(
            "You are a helpful assistant that can answer to questions about the weather."
        ),
        HumanMessage("What's the weather like in San Francisco?"),
    ]
    assert TiktokenCounter(model).count(messages, [WEATHER]) == 105


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-4-0613", "gpt-4"])
def test_cookbook_messages_example_matches_the_api_prompt_tokens(model: str) -> None:
    """The cookbook reports 129 prompt tokens from the API for its messages alone."""
    user, bot = "example_user", "example_assistant"
    messages = [
        SystemMessage(
            "You are a helpful, pattern-following assistant that translates corporate jargon "
            "into plain English."
        ),
        SystemMessage("New synergies will help drive top-line growth.", name=user),
        SystemMessage("Things working well together will increase revenue.", name=bot),
        SystemMessage(
            "Let's circle back when we have more bandwidth to touch base on opportunities for "
            "increased leverage.",
            name=user,
        ),
        SystemMessage("Let's talk later when we're less busy about how to do better.", name=bot),
        HumanMessage(
            "This late pivot means we don't have time to boil the ocean for the client deliverable."
        ),
    ]
    assert TiktokenCounter(model)(messages) == 129


def ntok(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base").encode(text))


def test_flat_function_is_the_cookbook_rendering() -> None:
    c = TiktokenCounter("gpt-4")
    expected = 10 + ntok("get_current_weather:Get the current weather in a given location")
    expected += 3  # prop_init
    expected += 3 + ntok("location:string:The city and state, e.g. San Francisco, CA")
    expected += 3 + ntok("unit:string:The unit of temperature to return")
    expected += -3 + (3 + ntok("celsius")) + (3 + ntok("fahrenheit"))
    assert c.count_tools([WEATHER]) == expected + 12
    assert c.count_tools([WEATHER, WEATHER]) == 2 * expected + 12
    assert c.count_tools([]) == 0
    bare = {"type": "function", "function": {"name": "ping", "description": "Ping."}}
    assert c.count_tools([bare]) == 10 + ntok("ping:Ping") + 12  # the trailing period is dropped


@pytest.mark.usefixtures("any_encoding")
def test_o200k_models_use_the_gpt_4o_constants() -> None:
    gpt4o = TiktokenCounter("gpt-4o").count_tools([WEATHER])
    assert gpt4o == TiktokenCounter("gpt-4").count_tools([WEATHER]) - 3  # func_init 7, not 10
    assert TiktokenCounter("o200k_base").count_tools([WEATHER]) == gpt4o


class Forecast(BaseModel):
    """Get the forecast for a city."""

    city: str = Field(description="The city.")
    days: int = Field(default=3, description="How many days")


def get_forecast(city: str, days: int = 3) -> str:
    """Get the forecast for a city.

    Args:
        city: The city.
        days: How many days
    """
    return city * days


@pytest.mark.parametrize("given", [tool(get_forecast), Forecast, get_forecast])
def test_langchain_tools_cost_what_their_openai_dicts_cost(given: Any) -> None:
    c = TiktokenCounter("gpt-4")
    as_dict = convert_to_openai_tool(given)
    assert c.count_tools([given]) == c.count_tools([as_dict])
    assert c.count_tools([given, WEATHER]) == c.count_tools([as_dict, WEATHER])
    assert c.count_tools([given]) > c.count_tools([{"type": "function", "function": {"name": "x"}}])


def test_nested_arrays_anyof_and_defaults_are_priced_as_documented() -> None:
    properties = {
        "guest": {"type": "object", "properties": {"name": {"type": "string"}}},
        "nights": {"type": "integer", "default": 2},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }
    schema = {
        "type": "function",
        "function": {"name": "book", "parameters": {"properties": properties}},
    }
    expected = 10 + ntok("book") + 3
    expected += 3 + ntok("guest:object") + 3 + (3 + ntok("name:string"))
    expected += 3 + ntok("nights:integer") + ntok("default:2")
    expected += 3 + ntok("tags:array") + ntok("string") + (-3 + 3 + ntok("a") + 3 + ntok("b"))
    expected += 3 + ntok("note:string | null")
    assert TiktokenCounter("gpt-4").count_tools([schema]) == expected + 12


def test_provider_tools_cost_their_json() -> None:
    provider = {"type": "web_search_preview"}
    as_json = '{"type": "web_search_preview"}'
    assert TiktokenCounter("gpt-4").count_tools([provider]) == ntok(as_json) + 12
