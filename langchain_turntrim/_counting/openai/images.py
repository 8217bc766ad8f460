"""What OpenAI charges for an image, by the vision guide's "Calculating costs".

* tiles: ``"low"`` costs ``base``; ``"high"`` and ``"auto"`` fit the image in
  2048x2048, shrink its shortest side to 768, then cost ``base`` plus
  ``tile`` per 512-pixel tile;
* patches (gpt-4.1-mini, gpt-4.1-nano, o4-mini): the 32-pixel patches
  covering the image scaled to at most 1536 of them, times a multiplier.

A size is read from the image's header (PNG, JPEG, GIF, WebP): a URL is never fetched.
"""

from __future__ import annotations

import binascii
import math
import struct
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages import is_data_content_block

__all__ = ["ImagePricing", "image_pricing", "image_size", "image_source"]

#: (model prefix, base, tile, patch multiplier), most specific first; others cost gpt-4o's.
PRICES: Final = (
    ("gpt-4.1-mini", 0, 0, 1.62),
    ("gpt-4.1-nano", 0, 0, 2.46),
    ("o4-mini", 0, 0, 1.72),
    ("gpt-4o-mini", 2833, 5667, 0.0),
    ("", 85, 170, 0.0),
)
MAX_PATCHES: Final = 1536
#: The largest grid the tile formula leaves: 768x2048 after resizing, 2 x 4 tiles.
MAX_TILES: Final = 8


@dataclass(frozen=True)
class ImagePricing:
    """How one model prices images: by tiles (``base``, ``tile``) or patches (``multiplier``)."""

    base: int
    tile: int
    multiplier: float

    def tokens(self, width: int, height: int, detail: str) -> int:
        """An image of ``width`` x ``height`` pixels at ``detail``."""
        if self.multiplier:
            return math.ceil(_patches(width, height) * self.multiplier)
        if detail == "low":
            return self.base
        if width > 2048 or height > 2048:  # noqa: PLR2004 - fit in 2048 x 2048
            side = max(width, height)
            width, height = width * 2048 // side, height * 2048 // side
        if width > 768 and height > 768:  # noqa: PLR2004 - then the shortest side to 768
            side = min(width, height)
            width, height = width * 768 // side, height * 768 // side
        return self.base + self.tile * math.ceil(width / 512) * math.ceil(height / 512)

    def most(self) -> int:
        """The most one image can cost."""
        if self.multiplier:
            return math.ceil(MAX_PATCHES * self.multiplier)
        return self.base + self.tile * MAX_TILES


def image_pricing(model: str | None) -> ImagePricing:
    """The pricing of ``model`` (a fine-tune's by its base); gpt-4o's for others."""
    name = (model or "").lower()
    if name.startswith("ft:"):
        name = name[3:].partition(":")[0]
    return next(ImagePricing(b, t, m) for prefix, b, t, m in PRICES if name.startswith(prefix))


def _patches(width: int, height: int) -> int:
    covering = math.ceil(width / 32) * math.ceil(height / 32)
    if covering <= MAX_PATCHES:
        return covering
    shrink = math.sqrt(32 * 32 * MAX_PATCHES / (width * height))
    w, h = width * shrink / 32, height * shrink / 32
    shrink *= min(math.floor(w) / w, math.floor(h) / h)
    # The scaled sides are whole patches up to float error: never round that up.
    w, h = width * shrink / 32 - 1e-9, height * shrink / 32 - 1e-9
    return min(math.ceil(w) * math.ceil(h), MAX_PATCHES)


#: JPEG start-of-frame markers: 0xC0 to 0xCF but DHT, JPG and DAC.
_SOF: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_HEAD: Final = 4096  # base64 characters decoded first: enough for every header but JPEG's


def image_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 image (a data URL or bare base64), or None."""
    if data.startswith("data:"):
        meta, comma, data = data.partition(",")
        if not comma or not meta.endswith(";base64"):
            return None
    head = _decode(data[:_HEAD])
    size = _size(head)
    if size is None and head.startswith(b"\xff\xd8") and len(data) > _HEAD:
        size = _jpeg(_decode(data))
    return size if size and min(size) > 0 else None


def _decode(text: str) -> bytes:
    text = "".join(text.split())
    try:
        return binascii.a2b_base64(text[: len(text) - len(text) % 4])
    except (binascii.Error, ValueError):
        return b""


def _size(b: bytes) -> tuple[int, int] | None:
    if b.startswith(b"\x89PNG\r\n\x1a\n") and b[12:16] == b"IHDR" and len(b) >= 24:  # noqa: PLR2004
        return struct.unpack(">II", b[16:24])
    if b[:6] in {b"GIF87a", b"GIF89a"} and len(b) >= 10:  # noqa: PLR2004
        return struct.unpack("<HH", b[6:10])
    if b.startswith(b"\xff\xd8"):
        return _jpeg(b)
    if b[:4] != b"RIFF" or b[8:12] != b"WEBP" or len(b) < 25:  # noqa: PLR2004
        return None
    chunk, full = b[12:16], len(b) >= 30  # noqa: PLR2004
    if chunk == b"VP8 " and full and b[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", b[26:30])
        return (width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and b[20] == 0x2F:  # noqa: PLR2004
        bits = int.from_bytes(b[21:25], "little")
        return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and full:
        return (int.from_bytes(b[24:27], "little") + 1, int.from_bytes(b[27:30], "little") + 1)
    return None


def _jpeg(b: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 4 <= len(b) and b[i] == 0xFF:  # noqa: PLR2004
        marker = b[i + 1]
        if marker == 0xFF:  # noqa: PLR2004 - a fill byte
            i += 1
        elif marker in {0x01, *range(0xD0, 0xD8)}:  # standalone markers, no length
            i += 2
        elif marker in _SOF:
            if i + 9 > len(b):
                return None
            height, width = struct.unpack(">HH", b[i + 5 : i + 9])
            return (width, height)
        else:
            length = int.from_bytes(b[i + 2 : i + 4], "big")
            if marker == 0xDA or length < 2:  # noqa: PLR2004 - scan data before any frame header
                return None
            i += 2 + length
    return None


def _data_url(url: object) -> object:
    """``url`` if it carries the image (a ``data:`` URL), else None: never fetched."""
    return url if isinstance(url, str) and url.startswith("data:") else None


def image_source(block: dict[str, Any]) -> tuple[object, str] | None:
    """An image block's base64 data (None for a URL or a file id) and detail;
    None where ChatOpenAI drops the block (an Anthropic-style unusable source)."""
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
