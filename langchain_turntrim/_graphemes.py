"""Where text may be cut without splitting a character a reader sees as one:
the extended grapheme cluster boundaries of Unicode's UAX #29, from the
standard library's ``unicodedata`` and a few small tables.

Handled (the rules that matter for cutting chat text): CR LF (GB3); controls
(GB4, GB5); Hangul syllable sequences (GB6-GB8, computed); combining and
enclosing marks, ZWJ, ZWNJ, variation selectors, tags and emoji modifiers
(GB9); spacing marks (GB9a); prepended concatenation marks (GB9b); emoji
ZWJ sequences (GB11); regional-indicator pairs, i.e. flags (GB12, GB13).

Where a class needs data ``unicodedata`` lacks, it is taken wider than
Unicode's, never narrower, so a boundary found here is always one of
Unicode's (a cut may fall a character earlier than it could, never inside a
cluster): ``Extended_Pictographic`` is every symbol (``So``/``Sm``) of the
symbol blocks plus the emoji planes' blocks, and conjuncts (GB9c) are kept
whole after any virama Unicode 16 lists as a linker, before any letter
(``Lo``), whatever precedes the virama (as the ``regex`` module does). Not
handled: Unicode's few ``Lo``/``Lm`` spacing marks and extend characters
beyond Thai and Lao SARA AM and the halfwidth sound marks (a cut before one
of those is possible).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Final

__all__ = ["cut_end", "cut_start", "is_boundary"]

# The classes (Grapheme_Cluster_Break values, as far as they are told apart here).
OTHER: Final = 0
CR: Final = 1
LF: Final = 2
CONTROL: Final = 3
EXTEND: Final = 4
ZWJ: Final = 5
REGIONAL: Final = 6
PREPEND: Final = 7
SPACING: Final = 8
L: Final = 9
V: Final = 10
T: Final = 11
LV: Final = 12
LVT: Final = 13
PICTOGRAPHIC: Final = 14

#: Extend characters that are not marks (Mn, Me): ZWNJ, the halfwidth
#: katakana sound marks, the tag characters; and the emoji modifiers.
_OTHER_EXTEND: Final = ((0x200C, 0x200C), (0xFF9E, 0xFF9F), (0xE0020, 0xE007F), (0x1F3FB, 0x1F3FF))
#: Prepend (GB9b): the prepended concatenation marks and the Indic prefixed letters.
_PREPEND: Final = (
    (0x0600, 0x0605),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x0D4E, 0x0D4E),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x111C2, 0x111C3),
    (0x113D1, 0x113D1),
    (0x1193F, 0x1193F),
    (0x11941, 0x11941),
    (0x11A84, 0x11A89),
    (0x11D46, 0x11D46),
    (0x11F02, 0x11F02),
)
#: Spacing marks that are letters (Lo): Thai and Lao SARA AM.
_SPACING_LETTERS: Final = frozenset({0x0E33, 0x0EB3})
#: Extended_Pictographic outside the symbol blocks and the emoji planes.
_PICTOGRAPHIC_OTHERS: Final = frozenset({0xA9, 0xAE, 0x203C, 0x2049, 0x2139, 0x3030, 0x303D})
#: The viramas that join conjuncts (GB9c: InCB=Linker, as of Unicode 16).
_LINKERS: Final = frozenset(
    "\u094d\u09cd\u0acd\u0b4d\u0c4d\u0d4d\u1039\u17d2\u1a60\u1b44\u1bab\ua9c0\uaaf6"
    "\U00010a3f\U00011133\U0001193e\U00011a47\U00011a99"
)


def _within(cp: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= cp <= high for low, high in ranges)


@lru_cache(maxsize=4096)
def char_class(char: str) -> int:
    """The boundary class of one character."""
    cp = ord(char)
    if char == "\r":
        return CR
    if char == "\n":
        return LF
    if cp == 0x200D:  # noqa: PLR2004 - ZERO WIDTH JOINER
        return ZWJ
    if 0x1F1E6 <= cp <= 0x1F1FF:  # noqa: PLR2004
        return REGIONAL
    hangul = _hangul(cp)
    if hangul is not None:
        return hangul
    category = unicodedata.category(char)
    if category in ("Mn", "Me") or _within(cp, _OTHER_EXTEND):
        return EXTEND
    if _within(cp, _PREPEND):
        return PREPEND
    if category in ("Cc", "Cf", "Zl", "Zp"):
        return CONTROL
    if category == "Mc" or cp in _SPACING_LETTERS:
        return SPACING
    if _pictographic(cp, category):
        return PICTOGRAPHIC
    return OTHER


def _hangul(cp: int) -> int | None:
    if 0xAC00 <= cp <= 0xD7A3:  # noqa: PLR2004 - precomposed syllables
        return LV if (cp - 0xAC00) % 28 == 0 else LVT
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:  # noqa: PLR2004
        return L
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:  # noqa: PLR2004
        return V
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:  # noqa: PLR2004
        return T
    return None


def _pictographic(cp: int, category: str) -> bool:
    """Extended_Pictographic, or wider (see the module's docs)."""
    if cp in _PICTOGRAPHIC_OTHERS:
        return True
    if 0x1F000 <= cp <= 0x1FFFD:  # noqa: PLR2004 - the emoji planes' blocks, reserved ones too
        return True
    if 0x2100 <= cp <= 0x2BFF or 0x3290 <= cp <= 0x32FF:  # noqa: PLR2004 - the symbol blocks
        return category in ("So", "Sm")
    return False


def _letter(char: str) -> bool:
    return unicodedata.category(char) == "Lo"


def is_boundary(text: str, i: int) -> bool:
    """Whether ``text`` may be cut before ``text[i]`` (0 and ``len(text)`` always)."""
    if i <= 0 or i >= len(text):
        return True
    before, after = char_class(text[i - 1]), char_class(text[i])
    if before == CR and after == LF:  # GB3
        return False
    if before in (CONTROL, CR, LF) or after in (CONTROL, CR, LF):  # GB4, GB5
        return True
    if (  # GB6-GB8
        (before == L and after in (L, V, LV, LVT))
        or (before in (LV, V) and after in (V, T))
        or (before in (LVT, T) and after == T)
    ):
        return False
    if after in (EXTEND, ZWJ, SPACING) or before == PREPEND:  # GB9, GB9a, GB9b
        return False
    if _letter(text[i]) and _after_linker(text, i):  # GB9c
        return False
    if after == PICTOGRAPHIC and before == ZWJ:  # GB11
        j = i - 2
        while j >= 0 and char_class(text[j]) == EXTEND:
            j -= 1
        return not (j >= 0 and char_class(text[j]) == PICTOGRAPHIC)
    if after == REGIONAL and before == REGIONAL:  # GB12, GB13: pairs, from the run's start
        j = i - 1
        while j >= 0 and char_class(text[j]) == REGIONAL:
            j -= 1
        return (i - 1 - j) % 2 == 0
    return True  # GB999


def _after_linker(text: str, i: int) -> bool:
    """Marks, a virama among them, end at ``i`` (SARA AM, a letter, is no
    mark here: its Indic_Conjunct_Break is none)."""
    j = i - 1
    while (
        j >= 0
        and char_class(text[j]) in (EXTEND, ZWJ, SPACING)
        and ord(text[j]) not in _SPACING_LETTERS
    ):
        if text[j] in _LINKERS:
            return True
        j -= 1
    return False


def cut_end(text: str, end: int) -> int:
    """The last boundary at or before ``end``: ``text[:cut_end(text, end)]``
    is the longest prefix of at most ``end`` characters that splits no cluster."""
    end = max(0, min(end, len(text)))
    while not is_boundary(text, end):
        end -= 1
    return end


def cut_start(text: str, start: int) -> int:
    """The first boundary at or after ``start``: ``text[cut_start(text, start):]``
    is the longest suffix starting at ``start`` or later that splits no cluster."""
    start = max(0, min(start, len(text)))
    while not is_boundary(text, start):
        start += 1
    return start
