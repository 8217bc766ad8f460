"""Text from a transcript, made safe to show on a terminal."""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["neutral"]

#: Bidirectional formatting characters: they reorder what is shown around them.
_BIDI: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


#: Code points below this are written ``\\xNN``, the rest ``\\uNNNN``.
_ONE_BYTE: Final = 0x100


def neutral(text: str) -> str:
    """``text`` with every control character, lone surrogate and bidirectional
    override written as its escape (``\\x1b``, ``\\x9b``, ``\\ud83d``, ``\\u202e``).

    A transcript is untrusted: shown as is, an escape sequence in it could set
    the viewer's clipboard (OSC 52) or window title, or clear the screen; a lone
    surrogate (a truncated emoji) cannot be encoded at all.
    """
    if text.isprintable():
        return text
    return "".join(_escape(c) for c in text)


def _escape(char: str) -> str:
    if char in _BIDI or unicodedata.category(char) in ("Cc", "Cs"):
        code = ord(char)
        return f"\\x{code:02x}" if code < _ONE_BYTE else f"\\u{code:04x}"
    return char
