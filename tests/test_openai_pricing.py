"""TiktokenCounter's images and tool schemas: OpenAI's documented prices, never a fetch.

Only cl100k_base is available offline. Image prices do not depend on the
encoding, so counters for o200k_base models (gpt-4o, gpt-4o-mini, gpt-4.1-mini,
o4-mini) are built with cl100k_base served in its place (``any_encoding``):
their image figures are exact, their text tokens are cl100k's.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import tiktoken
import tiktoken.model
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, convert_to_messages
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from langchain_turntrim._counting import CachedCounter, resolve_counter
from langchain_turntrim._counting.openai import encodings
from langchain_turntrim._counting.openai.counter import TiktokenCounter
from langchain_turntrim._counting.openai.images import image_size
from tests.lc import refuse

pytestmark = pytest.mark.usefixtures("tiktoken_cache")


@pytest.fixture
def any_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve cl100k_base for every encoding name (image prices ignore the encoding)."""
    real = tiktoken.get_encoding("cl100k_base")
    monkeypatch.setattr(tiktoken, "get_encoding", lambda _name: real)
    monkeypatch.setattr(tiktoken.model, "get_encoding", lambda _name: real)
    monkeypatch.setattr(encodings, "_ensure_cached", lambda _name: None)  # tiktoken is faked


# --- real image headers -------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", len(ihdr))
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
    )


def jpeg(width: int, height: int, *, app_bytes: int = 14) -> bytes:
    """SOI, an APP1 segment of ``app_bytes`` bytes, then a baseline SOF0 frame header."""
    app = b"\xff\xe1" + struct.pack(">H", app_bytes + 2) + b"E" * app_bytes
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    return b"\xff\xd8" + app + sof + b"\xff\xda"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


def webp_vp8(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height)
    header = b"WEBPVP8 " + struct.pack("<I", len(frame))
    return b"RIFF" + struct.pack("<I", len(header) + len(frame)) + header + frame


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"\x2f" + bits.to_bytes(4, "little")
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBPVP8L" + b"\x05\x00\x00\x00" + body


def webp_vp8x(width: int, height: int) -> bytes:
    sides = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    body = b"\x00\x00\x00\x00" + sides
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBPVP8X" + b"\x0a\x00\x00\x00" + body


FORMATS: dict[str, tuple[Callable[[int, int], bytes], str]] = {
    "png": (png, "image/png"),
    "jpeg": (jpeg, "image/jpeg"),
    "gif": (gif, "image/gif"),
    "webp-vp8": (webp_vp8, "image/webp"),
    "webp-vp8l": (webp_vp8l, "image/webp"),
    "webp-vp8x": (webp_vp8x, "image/webp"),
}


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_cost(counter: TiktokenCounter, block: dict[str, Any]) -> int:
    """The tokens one image block adds to a user message."""
    (with_image,) = counter.count_each([HumanMessage([block])])
    (empty,) = counter.count_each([HumanMessage([])])
    return with_image - empty


def url_block(url: str, detail: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": url}
    if detail is not None:
        spec["detail"] = detail
    return {"type": "image_url", "image_url": spec}


# --- sizes from headers ---------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("width", "height"), [(1, 1), (1024, 1024), (2048, 4096), (300, 7)])
def test_size_is_read_from_each_format_header(fmt: str, width: int, height: int) -> None:
    make, mime = FORMATS[fmt]
    if fmt == "webp-vp8" and max(width, height) > 0x3FFF:
        pytest.skip("VP8 holds 14-bit sizes")
    data = make(width, height)
    assert image_size(data_url(data, mime)) == (width, height)
    assert image_size(base64.b64encode(data).decode()) == (width, height)


def test_jpeg_frame_after_a_large_metadata_segment_is_found() -> None:
    data = jpeg(640, 480, app_bytes=60_000)  # the frame header is far past the first bytes
    assert image_size(data_url(data, "image/jpeg")) == (640, 480)


@pytest.mark.parametrize(
    "data",
    [
        "data:image/png;base64,",
        "data:image/png,rawbytes",
        "not base64 at all!",
        base64.b64encode(b"BM this is a bitmap").decode(),
        base64.b64encode(png(0, 5)).decode(),
        base64.b64encode(b"\xff\xd8\xff\xda scan before any frame").decode(),
    ],
)
def test_unreadable_data_has_no_size(data: str) -> None:
    assert image_size(data) is None


# --- tile prices ------------------------------------------------------------------------


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize("fmt", FORMATS)
def test_gpt_4o_documented_examples_from_real_headers(fmt: str) -> None:
    make, mime = FORMATS[fmt]
    c = TiktokenCounter("gpt-4o")
    assert image_cost(c, url_block(data_url(make(1024, 1024), mime), "high")) == 765
    if fmt != "webp-vp8":
        assert image_cost(c, url_block(data_url(make(2048, 4096), mime), "high")) == 1105
        assert image_cost(c, url_block(data_url(make(4096, 8192), mime), "low")) == 85
    assert image_cost(c, url_block(data_url(make(1024, 1024), mime))) == 765  # auto is high
    assert image_cost(c, url_block(data_url(make(16, 16), mime), "low")) == 85


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
def test_tile_prices_by_model() -> None:
    square = url_block(data_url(png(1024, 1024), "image/png"), "high")
    tiny_low = url_block(data_url(png(8, 8), "image/png"), "low")
    # gpt-4o-mini: 2833 base, 5667 per tile; gpt-4 family and unknown-family counters: 85 / 170.
    for model, base, tile in [
        ("gpt-4o-mini", 2833, 5667),
        ("gpt-4o-mini-2024-07-18", 2833, 5667),
        ("ft:gpt-4o-mini:org::abc", 2833, 5667),
        ("gpt-4o", 85, 170),
        ("gpt-4.1", 85, 170),
        ("gpt-4-turbo", 85, 170),
        ("gpt-4", 85, 170),
    ]:
        c = TiktokenCounter(model)
        assert (image_cost(c, square), image_cost(c, tiny_low)) == (base + 4 * tile, base), model
    by_encoding = TiktokenCounter(encoding="cl100k_base")
    assert image_cost(by_encoding, square) == 765


@pytest.mark.parametrize(
    ("width", "height", "tiles"),
    [
        (512, 512, 1),
        (513, 512, 2),
        (768, 2048, 8),
        (4000, 1000, 4),
        (100, 3000, 4),
        (3000, 2000, 6),
        (1, 1, 1),
    ],
)
def test_tile_formula_edges(width: int, height: int, tiles: int) -> None:
    assert TiktokenCounter("gpt-4").image_tokens(width, height, "high") == 85 + 170 * tiles


# --- patch prices -----------------------------------------------------------------------


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
    assert c.image_tokens(1024, 1536) == c.image_tokens(5000, 5000 * 3 // 2)
    assert c.image_tokens(1024, 1536) == math.ceil(1536 * multiplier)
    assert c.image_tokens(33, 32) == math.ceil(2 * multiplier)
    block = url_block(data_url(jpeg(1024, 1024), "image/jpeg"), "low")
    assert image_cost(c, block) == math.ceil(1024 * multiplier)  # detail is not used
    assert c.url_image_tokens == math.ceil(1536 * multiplier)


# --- images without a size in the request -------------------------------------------------


@pytest.mark.usefixtures("any_encoding")
@pytest.mark.parametrize(
    ("model", "most"),
    [("gpt-4o", 85 + 8 * 170), ("gpt-4o-mini", 2833 + 8 * 5667), ("o4-mini", 2642)],
)
def test_unsized_images_cost_the_most_the_model_charges(
    model: str, most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(httpx.Client, "send", refuse)
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


def test_url_image_tokens_is_configurable() -> None:
    c = TiktokenCounter("gpt-4", url_image_tokens=500)
    assert image_cost(c, url_block("https://x.test/a.png")) == 500
    assert image_cost(c, url_block("https://x.test/a.png", "low")) == 85
    assert image_cost(c, url_block(data_url(png(1024, 1024), "image/png"))) == 765
    assert c != TiktokenCounter("gpt-4")
    assert c == TiktokenCounter("gpt-4", url_image_tokens=500)
    assert "url_image_tokens=500" in repr(c)
    assert TiktokenCounter("gpt-4", url_image_tokens=1445) == TiktokenCounter("gpt-4")
    assert "url_image_tokens" not in repr(TiktokenCounter("gpt-4"))


# --- tool schemas -----------------------------------------------------------------------

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
WEATHER_MESSAGES: list[BaseMessage] = [
    SystemMessage("You are a helpful assistant that can answer to questions about the weather."),
    HumanMessage("What's the weather like in San Francisco?"),
]


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-4"])
def test_cookbook_weather_example_matches_the_api_prompt_tokens(model: str) -> None:
    """The cookbook reports 105 prompt tokens from the API for these models."""
    c = TiktokenCounter(model)
    assert c.count(WEATHER_MESSAGES) + c.count_tools([WEATHER]) == 105


JARGON = convert_to_messages(
    [
        {
            "role": "system",
            "content": "You are a helpful, pattern-following assistant that translates "
            "corporate jargon into plain English.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "New synergies will help drive top-line growth.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Things working well together will increase revenue.",
        },
        {
            "role": "system",
            "name": "example_user",
            "content": "Let's circle back when we have more bandwidth to touch base on "
            "opportunities for increased leverage.",
        },
        {
            "role": "system",
            "name": "example_assistant",
            "content": "Let's talk later when we're less busy about how to do better.",
        },
        {
            "role": "user",
            "content": "This late pivot means we don't have time to boil the ocean for the "
            "client deliverable.",
        },
    ]
)


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-4-0613", "gpt-4"])
def test_cookbook_messages_example_matches_the_api_prompt_tokens(model: str) -> None:
    """The cookbook reports 129 prompt tokens from the API for its messages alone."""
    assert TiktokenCounter(model).count(JARGON) == 129


def test_flat_function_is_the_cookbook_rendering() -> None:
    c = TiktokenCounter("gpt-4")

    def n(text: str) -> int:
        return len(c.encoding.encode(text))

    expected = 10 + n("get_current_weather:Get the current weather in a given location")
    expected += 3  # prop_init
    expected += 3 + n("location:string:The city and state, e.g. San Francisco, CA")
    expected += 3 + n("unit:string:The unit of temperature to return")
    expected += -3 + (3 + n("celsius")) + (3 + n("fahrenheit"))
    assert c.count_tools([WEATHER]) == expected + 12
    assert c.count_tools([WEATHER, WEATHER]) == 2 * expected + 12
    assert c.count_tools([]) == 0
    bare = {"type": "function", "function": {"name": "ping", "description": "Ping."}}
    assert c.count_tools([bare]) == 10 + n("ping:Ping") + 12  # the trailing period is dropped


@pytest.mark.usefixtures("any_encoding")
def test_o200k_models_use_the_gpt_4o_constants() -> None:
    gpt4o = TiktokenCounter("gpt-4o").count_tools([WEATHER])
    assert gpt4o == TiktokenCounter("gpt-4").count_tools([WEATHER]) - 3  # func_init 7, not 10


class Forecast(BaseModel):
    """Get the forecast for a city."""

    city: str = Field(description="The city.")
    days: int = Field(default=3, description="How many days")


@tool
def forecast(city: str, days: int = 3) -> str:
    """Get the forecast for a city.

    Args:
        city: The city.
        days: How many days
    """
    return city * days


def get_forecast(city: str, days: int = 3) -> str:
    """Get the forecast for a city.

    Args:
        city: The city.
        days: How many days
    """
    return city * days


@pytest.mark.parametrize("given", [forecast, Forecast, get_forecast])
def test_langchain_tools_cost_what_their_openai_dicts_cost(given: Any) -> None:
    c = TiktokenCounter("gpt-4")
    as_dict = convert_to_openai_tool(given)
    assert c.count_tools([given]) == c.count_tools([as_dict])
    assert c.count_tools([given, WEATHER]) == c.count_tools([as_dict, WEATHER])
    assert c.count_tools([given]) > c.count_tools([{"type": "function", "function": {"name": "x"}}])


def test_nested_arrays_anyof_and_defaults_are_priced_as_documented() -> None:
    c = TiktokenCounter("gpt-4")

    def n(text: str) -> int:
        return len(c.encoding.encode(text))

    schema = {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {
                    "guest": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                    },
                    "nights": {"type": "integer", "default": 2},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
            },
        },
    }
    expected = 10 + n("book") + 3
    expected += 3 + n("guest:object") + 3 + (3 + n("name:string"))
    expected += 3 + n("nights:integer") + n("default:2")
    expected += 3 + n("tags:array") + n("string") + (-3 + 3 + n("a") + 3 + n("b"))
    expected += 3 + n("note:string | null")
    assert c.count_tools([schema]) == expected + 12


def test_provider_tools_cost_their_json() -> None:
    c = TiktokenCounter("gpt-4")
    provider = {"type": "web_search_preview"}
    as_json = '{"type": "web_search_preview"}'
    assert c.count_tools([provider]) == len(c.encoding.encode(as_json)) + 12


def test_the_cache_delegates_count_tools() -> None:
    c = TiktokenCounter("gpt-4")
    resolved = resolve_counter(c)
    assert isinstance(resolved, CachedCounter)
    assert resolved.count_tools([WEATHER]) == c.count_tools([WEATHER])
