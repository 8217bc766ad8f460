"""Grapheme cluster boundaries, and the compaction's truncation cutting only on them.

``_graphemes.is_boundary`` is checked against a naive reference written
rule by rule from UAX #29 (each rule a regular expression over the classes
of the whole text before and after the position), on the classes the module
handles; against the ``regex`` module's ``\\X`` (installed with tiktoken),
whose boundaries it must never add to (where it approximates a class, it
takes it wider, so it only ever misses one); and by examples of each case.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
import regex  # type: ignore[import-untyped]  # installed with tiktoken, without stubs
from hypothesis import example, given
from hypothesis import strategies as st

from langchain_turntrim import _graphemes as g
from langchain_turntrim._compaction.edits import truncate

# -- the naive reference ---------------------------------------------------------------

_LETTERS = {
    g.OTHER: "o",
    g.CR: "r",
    g.LF: "n",
    g.CONTROL: "c",
    g.EXTEND: "e",
    g.ZWJ: "z",
    g.REGIONAL: "R",
    g.PREPEND: "p",
    g.SPACING: "s",
    g.L: "L",
    g.V: "V",
    g.T: "T",
    g.LV: "A",
    g.LVT: "B",
    g.PICTOGRAPHIC: "P",
}


def _incb(char: str) -> str:
    """Indic_Conjunct_Break, as wide as the module takes it: Consonant (any
    letter), Linker (its viramas), Extend (any mark, ZWJ)."""
    if char in g._LINKERS:
        return "K"
    if unicodedata.category(char) == "Lo":
        return "C"
    return "E" if g.char_class(char) in (g.EXTEND, g.ZWJ, g.SPACING) else "x"


#: UAX #29's rules in order: (left pattern, right pattern, boundary?).
RULES: list[tuple[str, str, bool]] = [
    ("r$", "^n", False),  # GB3
    ("[crn]$", "", True),  # GB4
    ("", "^[crn]", True),  # GB5
    ("L$", "^[LVAB]", False),  # GB6
    ("[AV]$", "^[VT]", False),  # GB7
    ("[BT]$", "^T", False),  # GB8
    ("", "^[ez]", False),  # GB9
    ("", "^s", False),  # GB9a
    ("p$", "", False),  # GB9b
    ("Pe*z$", "^P", False),  # GB11
    ("(?:^|[^R])(?:RR)*R$", "^R", False),  # GB12, GB13
]


def reference_boundaries(text: str) -> list[int]:
    classes = "".join(_LETTERS[g.char_class(c)] for c in text)
    incb = "".join(map(_incb, text))
    found = [0] if text else []
    for i in range(1, len(text)):
        left, right = classes[:i], classes[i:]
        verdict = True
        for left_rule, right_rule, boundary in RULES[:9]:
            if re.search(left_rule, left) and re.search(right_rule, right):
                verdict = boundary
                break
        else:
            # GB9c, taken wider: no consonant is needed before the virama.
            if re.search("K[EK]*$", incb[:i]) and incb[i] == "C":
                verdict = False
            else:
                for left_rule, right_rule, boundary in RULES[9:]:
                    if re.search(left_rule, left) and re.search(right_rule, right):
                        verdict = boundary
                        break
        if verdict:
            found.append(i)
    return [*found, len(text)] if text else [0]


def boundaries(text: str) -> list[int]:
    return [i for i in range(len(text) + 1) if g.is_boundary(text, i)]


def regex_boundaries(text: str) -> set[int]:
    ends = {m.end() for m in regex.finditer(r"\X", text)}
    return {0, *ends}


#: One character or more of each class handled, and the cases of each rule.
ALPHABET = [
    "a",
    "é",
    "\r",
    "\n",
    "\t",
    "\u0301",  # combining acute (Mn)
    "\u20dd",  # enclosing circle (Me)
    "\u200d",  # ZWJ
    "\u200c",  # ZWNJ
    "\ufe0f",  # variation selector 16
    "\U0001f3fd",  # emoji modifier
    "\U0001f1eb",  # regional indicators F, R, D
    "\U0001f1f7",
    "\U0001f1e9",
    "\u1100",  # Hangul L, V, T, LV, LVT
    "\u1161",
    "\u11a8",
    "\uac00",
    "\uac01",
    "\u0600",  # prepend
    "\u0903",  # spacing mark
    "\u0e33",  # Thai SARA AM
    "\u2764",  # pictographic
    "\U0001f468",
    "\U0001f469",
    "\u0915",  # Devanagari KA, virama, SSA
    "\u094d",
    "\u0937",
    "\U000e0067",  # tag
]

texts = st.lists(st.sampled_from(ALPHABET), max_size=24).map("".join)


@given(texts)
@example("\u094d\u0e33\u1100")  # SARA AM ends a virama's marks: a cut before the letter
def test_boundaries_are_the_references(text: str) -> None:
    assert boundaries(text) == reference_boundaries(text)


@given(st.one_of(texts, st.text(max_size=24)))
def test_a_boundary_is_always_one_of_unicodes(text: str) -> None:
    # Where a class is approximated it is taken wider, so boundaries are only
    # ever missed, never added. Characters newer than this Python's Unicode
    # are left out.
    if any(unicodedata.category(c) == "Cn" for c in text):
        return
    assert set(boundaries(text)) <= regex_boundaries(text)


@given(texts, st.integers(min_value=0, max_value=30))
@example("aaaaaa\u094d\u0e33\u1100aaa", 11)  # a virama, a spacing mark, a Hangul L
def test_a_truncated_text_is_cut_on_boundaries_only(text: str, keep: int) -> None:
    cut = truncate(text, keep)
    if keep >= len(text):
        assert cut == text
        return
    head, removed, tail = re.fullmatch(
        r"(.*)\n\[\.\.\. ([\d,]+) characters cut to fit the context \.\.\.\]\n(.*)", cut, re.DOTALL
    ).groups()  # type: ignore[union-attr]
    allowed = reference_boundaries(text)
    assert text.startswith(head)
    assert len(head) in allowed
    # The longest such prefix within its share; after a virama, conjuncts are
    # taken wider than UAX #29 on purpose (a cut may land one cluster earlier).
    exact = not any(c in g._LINKERS for c in text)
    longest = max(b for b in allowed if b <= keep - keep // 3)
    assert len(head) == longest if exact else len(head) <= longest
    assert text.endswith(tail)
    assert len(text) - len(tail) in allowed
    shortest = min(b for b in allowed if b >= len(text) - keep // 3)
    start = len(text) - len(tail)
    assert start == shortest if exact else start >= shortest
    assert len(head) + len(tail) <= keep
    assert int(removed.replace(",", "")) == len(text) - len(head) - len(tail)


# -- examples ------------------------------------------------------------------------------

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # man ZWJ woman ZWJ girl
FLAGS = "\U0001f1eb\U0001f1f7\U0001f1e9\U0001f1ea"  # FR DE


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a\r\nb", [0, 1, 3, 4], id="CR-LF"),
        pytest.param("e\u0301\u0302x", [0, 3, 4], id="combining-marks"),
        pytest.param(f"a{FAMILY}b", [0, 1, 1 + len(FAMILY), 2 + len(FAMILY)], id="ZWJ-sequence"),
        pytest.param("\u2764\ufe0fa", [0, 2, 3], id="variation-selector"),
        pytest.param("\U0001f44d\U0001f3fdx", [0, 2, 3], id="emoji-modifier"),
        pytest.param(FLAGS + "\U0001f1eb", [0, 2, 4, 5], id="regional-indicator-pairs"),
        pytest.param(
            "\u1100\u1161\u11a8\uac00\u11a8a", [0, 3, 5, 6], id="Hangul-jamo-and-syllables"
        ),
        pytest.param("\u0600\u0661x", [0, 2, 3], id="prepend"),
        pytest.param("\u0915\u094d\u0937a", [0, 3, 4], id="Indic-conjunct"),
        pytest.param("a\u200db", [0, 2, 3], id="ZWJ-after-a-letter"),
        pytest.param("\u2764\u200d", [0, 2], id="ZWJ-at-the-end"),
        pytest.param("\n\u0301", [0, 1, 2], id="mark-after-a-control"),
    ],
)
def test_boundaries_of_each_case(text: str, expected: list[int]) -> None:
    assert boundaries(text) == expected
    assert reference_boundaries(text) == expected


@pytest.mark.parametrize(
    ("text", "keep", "head", "tail"),
    [
        pytest.param("ab\r\ncdefgh", 4, "ab", "h", id="CR-LF-at-the-head-cut"),
        pytest.param("abcdefg\r\nh", 6, "abcd", "h", id="CR-LF-at-the-tail-cut"),
        pytest.param("ab" + FAMILY + "cdefghij", 6, "ab", "ij", id="ZWJ-family"),
        pytest.param("abc" + FLAGS + "defghijkl", 8, "abc\U0001f1eb\U0001f1f7", "kl", id="flag"),
        pytest.param("abe\u0301\u0302fghijklmn", 6, "ab", "mn", id="combining-marks"),
        pytest.param("abc\u1100\u1161\u11a8defghijk", 6, "abc", "jk", id="Hangul"),
    ],
)
def test_truncation_keeps_each_cluster_whole(text: str, keep: int, head: str, tail: str) -> None:
    cut = truncate(text, keep)
    assert cut.startswith(head + "\n[... ")
    assert cut.endswith(" ...]\n" + tail)
    removed = len(text) - len(head) - len(tail)
    assert f"[... {removed:,} characters cut" in cut


def test_a_long_regional_indicator_run_cuts_between_pairs() -> None:
    text = "\U0001f1eb" * 10_001
    assert g.cut_end(text, 5_001) == 5_000
    assert g.cut_start(text, 5_001) == 5_002
