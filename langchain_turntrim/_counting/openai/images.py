"""What OpenAI charges for an image in a chat request: its size, ``detail`` and model.

Two documented formulas (OpenAI's vision guide, "Calculating costs"):

* tiles: ``"low"`` costs ``base``; ``"high"`` and ``"auto"`` fit the image in
  2048x2048, shrink its shortest side to 768 if longer, then cost ``base``
  plus ``tile`` per 512-pixel tile;
* patches (gpt-4.1-mini, gpt-4.1-nano, o4-mini): the 32-pixel patches that
  cover the image, scaled down to fit at most 1536, times a model multiplier
  (rounded up); ``detail`` is not used.

Sizes are read from the image's header (PNG, JPEG, GIF, WebP), never by
fetching a URL.
"""

from __future__ import annotations

import binascii
import math
import struct
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import is_data_content_block

__all__ = ["ImagePricing", "image_pricing", "image_size", "image_source"]

#: (model prefix, multiplier) of the patch-priced models, most specific first.
PATCH_MODELS: Final = (("gpt-4.1-mini", 1.62), ("gpt-4.1-nano", 2.46), ("o4-mini", 1.72))
#: (model prefix, base, tile) of the tile-priced models, most specific first.
TILE_MODELS: Final = (
    ("gpt-4o-mini", 2833, 5667),
    ("gpt-4o", 85, 170),
    ("gpt-4.1", 85, 170),
    ("gpt-4-turbo", 85, 170),
    ("gpt-4", 85, 170),
)
#: Every other model (and a counter built from an encoding): gpt-4o's prices.
DEFAULT_TILE: Final = (85, 170)
MAX_PATCHES: Final = 1536
PATCH: Final = 32
TILE: Final = 512
# The largest tile grid the formula leaves: 768x2048 after resizing, 2 x 4 tiles.
MAX_TILES: Final = 8


@dataclass(frozen=True)
class ImagePricing:
    """How one model prices images: tiles (``base``, ``tile``) or patches (``multiplier``)."""

    base: int = 0
    tile: int = 0
    multiplier: float = 0.0

    @property
    def patches(self) -> bool:
        return self.multiplier > 0

    def tokens(self, width: int, height: int, detail: str) -> int:
        """An image of ``width`` x ``height`` pixels at ``detail``."""
        if self.patches:
            return math.ceil(_patches(width, height) * self.multiplier)
        if detail == "low":
            return self.base
        width, height = _resize(width, height)
        return self.base + self.tile * math.ceil(width / TILE) * math.ceil(height / TILE)

    def low(self) -> int | None:
        """What a ``"low"``-detail image costs whatever its size (None: it depends)."""
        return None if self.patches else self.base

    def most(self) -> int:
        """The most one image can cost under the formula."""
        if self.patches:
            return math.ceil(MAX_PATCHES * self.multiplier)
        return self.base + self.tile * MAX_TILES


def image_pricing(model: str | None) -> ImagePricing:
    """The pricing of ``model`` (fine-tunes by their base); gpt-4o's for others."""
    name = (model or "").lower()
    if name.startswith("ft:"):
        name = name[3:].partition(":")[0]
    for prefix, multiplier in PATCH_MODELS:
        if name.startswith(prefix):
            return ImagePricing(multiplier=multiplier)
    for prefix, base, tile in TILE_MODELS:
        if name.startswith(prefix):
            return ImagePricing(base, tile)
    return ImagePricing(*DEFAULT_TILE)


def _resize(width: int, height: int) -> tuple[int, int]:
    """Fit in 2048x2048, then shortest side to 768 (never enlarged), as ChatOpenAI does."""
    if width > 2048 or height > 2048:  # noqa: PLR2004
        if width > height:
            width, height = 2048, height * 2048 // width
        else:
            width, height = width * 2048 // height, 2048
    if width > 768 and height > 768:  # noqa: PLR2004
        if width > height:
            width, height = width * 768 // height, 768
        else:
            width, height = 768, height * 768 // width
    return width, height


def _patches(width: int, height: int) -> int:
    covering = math.ceil(width / PATCH) * math.ceil(height / PATCH)
    if covering <= MAX_PATCHES:
        return covering
    shrink = math.sqrt(PATCH * PATCH * MAX_PATCHES / (width * height))
    w, h = width * shrink / PATCH, height * shrink / PATCH
    shrink *= min(math.floor(w) / w, math.floor(h) / h)
    # The scaled sides are whole patches up to float error: never round that up.
    w, h = width * shrink / PATCH - 1e-9, height * shrink / PATCH - 1e-9
    return min(math.ceil(w) * math.ceil(h), MAX_PATCHES)


# --- sizes from headers ---------------------------------------------------------------

_PNG: Final = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic).
_SOF: Final = frozenset({*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC)}) | frozenset(
    range(0xCD, 0xD0)
)
_HEAD_CHARS: Final = 4096  # base64 characters decoded first: every header but JPEG's


def image_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 image (a data URL or bare base64), or None."""
    if data.startswith("data:"):
        meta, comma, data = data.partition(",")
        if not comma or not meta.endswith(";base64"):
            return None
    head = _decode(data[:_HEAD_CHARS])
    if head is None:
        return None
    size = _size(head)
    if size is None and head.startswith(b"\xff\xd8") and len(data) > _HEAD_CHARS:
        whole = _decode(data)
        size = None if whole is None else _jpeg(whole)
    return size


def _decode(text: str) -> bytes | None:
    text = "".join(text.split())
    text = text[: len(text) - len(text) % 4]
    try:
        return binascii.a2b_base64(text)
    except (binascii.Error, ValueError):
        return None


def _size(b: bytes) -> tuple[int, int] | None:
    if b.startswith(_PNG) and b[12:16] == b"IHDR" and len(b) >= 24:  # noqa: PLR2004
        return _positive(*struct.unpack(">II", b[16:24]))
    if b[:6] in (b"GIF87a", b"GIF89a") and len(b) >= 10:  # noqa: PLR2004
        return _positive(*struct.unpack("<HH", b[6:10]))
    if b[:4] == b"RIFF" and b[8:12] == b"WEBP":
        return _webp(b)
    if b.startswith(b"\xff\xd8"):
        return _jpeg(b)
    return None


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _webp(b: bytes) -> tuple[int, int] | None:
    chunk = b[12:16]
    if chunk == b"VP8 " and len(b) >= 30 and b[23:26] == b"\x9d\x01\x2a":  # noqa: PLR2004
        width, height = struct.unpack("<HH", b[26:30])
        return _positive(width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(b) >= 25 and b[20] == 0x2F:  # noqa: PLR2004
        bits = int.from_bytes(b[21:25], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(b) >= 30:  # noqa: PLR2004
        width = int.from_bytes(b[24:27], "little") + 1
        return _positive(width, int.from_bytes(b[27:30], "little") + 1)
    return None


def _jpeg(b: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 4 <= len(b):
        if b[i] != 0xFF:  # noqa: PLR2004
            return None
        marker = b[i + 1]
        if marker == 0xFF:  # noqa: PLR2004 - fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers, no length
            i += 2
            continue
        length = int.from_bytes(b[i + 2 : i + 4], "big")
        if marker in _SOF:
            if i + 9 > len(b):
                return None
            height, width = struct.unpack(">HH", b[i + 5 : i + 9])
            return _positive(width, height)
        if marker == 0xDA or length < 2:  # noqa: PLR2004 - scan data: no frame header found
            return None
        i += 2 + length
    return None


def _data_url(url: object) -> object:
    """``url`` if it carries the image (a ``data:`` URL), else None: never fetched."""
    return url if isinstance(url, str) and url.startswith("data:") else None


def image_source(block: dict[str, Any]) -> tuple[object, str] | None:
    """An image block's base64 data (None for a URL or a file id) and its
    detail; None where ChatOpenAI drops the block (an Anthropic-style
    unusable source)."""
    if block.get("type") == "image_url":
        spec = block.get("image_url")
        if isinstance(spec, dict):
            detail = spec.get("detail")
            return _data_url(spec.get("url")), detail if isinstance(detail, str) else "auto"
        return _data_url(spec), "auto"
    source = block.get("source")
    if source and isinstance(source, dict) and not is_data_content_block(block):
        kind = source.get("type")
        if kind == "base64" and source.get("media_type") and source.get("data"):
            return source["data"], "auto"
        return (None, "auto") if kind == "url" and source.get("url") else None
    if block.get("source_type") == "base64":
        return block.get("data"), "auto"
    return block.get("base64") or _data_url(block.get("url")), "auto"
