"""Text from a transcript, made safe to show on a terminal or write as JSON."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE", "json_escaped", "neutral"]

#: What no output carries raw: C0 and C1 controls and DEL (which can start an
#: escape sequence), lone surrogates (which cannot be encoded) and the
#: bidirectional formatting characters (which reorder what is shown around them).
UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)

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
    return UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < _ONE_BYTE else f"\\u{code:04x}"


def json_escaped(json_text: str) -> str:
    """JSON text with every ``UNSAFE`` character as its ``\\uNNNN`` escape, as
    a transcript holds them: only strings can hold them, and an escape there
    is the same value.

    >>> json_escaped('"a\\u202eb"')
    '"a\\\\u202eb"'
    """
    return UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", json_text)
