"""Native NFC (pyx/_normalize.pyx) against tokenizers 0.22.1's NFC normalizer.

The reference's normalization tables are older than any CPython's (Unicode 9
era), so every expectation here comes from the reference itself, never from
`unicodedata`. Many probe strings are checked in one call, joined by U+0000:
a starter that never composes and never appears in a normalization, so
nothing crosses it (and it is itself part of what gets compared).
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen4exp._native._normalize import is_nfc, nfc

SEP = "\x00"
SCALARS = [c for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]
HANGUL_S_BASE, HANGUL_S_COUNT = 0xAC00, 11172


# --dist loadgroup: one worker computes the module's reference facts (`ref`), not both.
pytestmark = pytest.mark.xdist_group("normalize")


@pytest.fixture(scope="module")
def hf():
    from tokenizers import normalizers

    return normalizers.NFC().normalize_str


@pytest.fixture(scope="module")
def hf_nfd():
    from tokenizers import normalizers

    return normalizers.NFD().normalize_str


def joined(f, strings):
    out = f(SEP.join(strings)).split(SEP)
    assert len(out) == len(strings)
    return out


@pytest.fixture(scope="module")
def ref(hf, hf_nfd):
    """Facts read off the reference: single-code-point NFD/NFC, non-starters,
    composites and what may combine backwards (QC=Maybe)."""
    chars = [chr(c) for c in SCALARS]
    nfd = dict(zip(chars, joined(hf_nfd, chars)))
    nfc1 = dict(zip(chars, joined(hf, chars)))
    # x has a non-zero combining class iff it moves next to U+0345 (ccc 240)
    # or U+0334 (ccc 1).
    stable = [ch for ch in chars if nfd[ch] == ch]
    hi = joined(hf_nfd, ["\u0345" + ch for ch in stable])
    lo = joined(hf_nfd, [ch + "\u0334" for ch in stable])
    nonstarters = {
        ch for ch, a, b in zip(stable, hi, lo) if a != "\u0345" + ch or b != ch + "\u0334"
    } | {"\u0345", "\u0334"}
    # A composite survives NFC but not NFD; the last code point of its
    # decomposition is what combined with the rest, the first what it started from.
    composites = [ch for ch in chars if nfd[ch] != ch and nfc1[ch] == ch]
    maybe = {nfd[ch][-1] for ch in composites}
    pairs = [(hf(nfd[ch][:-1]), nfd[ch][-1], ch) for ch in composites]
    return {
        "nfd": nfd,
        "nfc": nfc1,
        "nonstarters": nonstarters,
        "maybe": maybe,
        "pairs": pairs,
        "marks": sorted(nonstarters | maybe),
    }


def check_against_reference(hf, strings, maybe):
    """nfc == reference for each string; is_nfc only where the reference keeps
    it, and where it keeps it but is_nfc says no, a QC=Maybe character explains it."""
    whole = SEP.join(strings)
    want_whole = hf(whole)
    if nfc(whole) != want_whole:
        for s, w in zip(strings, want_whole.split(SEP)):
            assert nfc(s) == w, (s.encode("unicode_escape"), nfc(s).encode("unicode_escape"))
        raise AssertionError("joined input differs but every piece matches")
    for s, w in zip(strings, want_whole.split(SEP)):
        if is_nfc(s):
            assert w == s, s.encode("unicode_escape")
        elif w == s:
            assert any(ch in maybe for ch in s), s.encode("unicode_escape")
    if is_nfc(whole):
        assert want_whole == whole


def test_reference_facts(ref):
    """The traps of NOTES-parity.md, as the reference sees them (guards the probes)."""
    assert len(ref["nonstarters"]) > 700
    for mark in ("\u07fd", "\u0898", "\u089f", "\u0c3c", "\u1abf"):
        assert mark not in ref["nonstarters"]  # newer than the reference's tables
    for mark in ("\u0301", "\u0316", "\u05b0", "\u093c", "\u0e38", "\u3099", "\U0001d165"):
        assert mark in ref["nonstarters"]
    assert ref["nfd"]["\U00011938"] == "\U00011938"
    assert "\U00011930" not in ref["maybe"]
    assert {"\u0301", "\u0cd5", "\u1161", "\u11a8", "\u3099"} <= ref["maybe"]


def test_every_scalar_value(ref, hf):
    """NFC of each scalar value alone, one native call each."""
    want = ref["nfc"]
    maybe = ref["maybe"]
    for c in SCALARS:
        ch = chr(c)
        got = nfc(ch)
        assert got == want[ch], hex(c)
        if is_nfc(ch):
            assert got == ch, hex(c)
        elif got == ch:
            assert ch in maybe, hex(c)
    assert nfc("") == "" and is_nfc("")
    assert nfc("\x00") == "\x00"
    assert hf(want["\U0001d160"]) == nfc("\U0001d160") == "\U0001d158\U0001d165\U0001d16e"


@pytest.mark.parametrize("follower", ["", "a", "\u0301", "\u0316\u0301", "\u11a8", "\u1161", "\u3099", "\u0cd5"])
def test_every_bmp_scalar_in_runs(hf, follower):
    """Runs of characters with what may combine with them after each: checks
    the table that lets the scan skip stable characters (one bit per code
    point below U+10000) in context, where a skipped character must still be
    composed with what follows it."""
    chars = [chr(c) for c in range(0x300, 0x10000) if not 0xD800 <= c < 0xE000]
    for k in range(0, len(chars), 4096):
        text = "".join(c + follower for c in chars[k:k + 4096])
        want = hf(text)
        assert nfc(text) == want, f"block from U+{ord(chars[k]):04X}"
        if is_nfc(text):
            assert want == text, f"block from U+{ord(chars[k]):04X}"


def test_every_decomposition_recomposes(ref, hf):
    decomposed = [d for ch, d in ref["nfd"].items() if d != ch]
    assert len(decomposed) > 13000
    check_against_reference(hf, decomposed, ref["maybe"])
    # ... also with the decomposition's marks given in reverse order.
    check_against_reference(hf, [d[0] + d[:0:-1] for d in decomposed if len(d) > 2], ref["maybe"])


@pytest.mark.parametrize("bases", [("", "a"), pytest.param(("\u03b1", "\u0627", "\u1100"), marks=pytest.mark.slow)])
def test_pairs_of_marks(ref, hf, bases):
    """Every ordered pair of non-starters / combining characters, alone and after
    bases (Greek, Arabic and a Hangul lead under slow)."""
    marks = ref["marks"]
    pairs = [a + b for a in marks for b in marks]
    for base in bases:
        check_against_reference(hf, [base + p for p in pairs], ref["maybe"])


@pytest.mark.slow
def test_triples_of_marks(ref, hf):
    """Ordered triples of combining characters (a fifth of the non-starters plus
    everything that composes) after a base that composes with many of them."""
    marks = sorted(set(sorted(ref["nonstarters"])[::5]) | ref["maybe"])
    for base in ("a", "\u03b1"):
        check_against_reference(
            hf, [base + x + y + z for x in marks for y in marks for z in marks], ref["maybe"]
        )


def test_every_composition_with_blockers(ref, hf):
    """Each composition, adjacent and with each mark between or after its parts
    (Hangul syllables: a sample here, the rest in test_hangul)."""
    marks = ref["marks"]
    strings = []
    for a, b, c in ref["pairs"]:
        if 0 <= ord(c) - HANGUL_S_BASE < HANGUL_S_COUNT and ord(c) % 97:
            continue
        strings.append(a + b)
        strings.extend(a + m + b for m in marks)
        strings.extend(a + b + m for m in marks[::7])
    check_against_reference(hf, strings, ref["maybe"])


def test_hangul(ref, hf):
    jamo = [chr(c) for c in range(0x1100, 0x1200)] + [chr(c) for c in range(0xA960, 0xA980)]
    jamo += [chr(c) for c in range(0xD7B0, 0xD800)]
    check_against_reference(hf, [a + b for a in jamo for b in jamo], ref["maybe"])
    syllables = [chr(c) for c in range(HANGUL_S_BASE - 1, HANGUL_S_BASE + HANGUL_S_COUNT + 1)]
    trailing = [chr(c) for c in range(0x11A6, 0x11C5)] + ["\u1161", "\u0301"]
    check_against_reference(hf, [s + t for s in syllables for t in trailing], ref["maybe"])
    # Long runs: L V T ... without separators, and decomposed syllables.
    run = "".join(ref["nfd"][s] for s in syllables[1:-1])
    assert nfc(run) == hf(run) == "".join(syllables[1:-1])
    lvt = "\u1100\u1161\u11a8\u11a7\u1161\u11c3\u1112\u1175\u11c2\u11c2" * 5000
    assert nfc(lvt) == hf(lvt)
    assert nfc("\uac00\u11a7") == hf("\uac00\u11a7") == "\uac00\u11a7"


TRAPS = [
    "\U00011935\U00011930",  # CPython composes to U+11938; the reference does not
    "\U00011938",
    "a\u0301\u07fd",  # U+07FD: ccc 220 since Unicode 11, a starter to the reference
    "a\u07fd\u0301",
    "a\u0898\u0316\u0301",  # U+0898..U+089F: Unicode 14
    "a\u0301\u089f",
    "\u0c15\u0c3c\u0c4d",  # U+0C3C: ccc 7 since Unicode 14
    "\u0c15\u0c4d\u0c3c",
    "e\u1abf\u0301",  # U+1ABF: ccc 220 since Unicode 14
    "e\u0301\u1abf\u0316",
    "\u003e\u0338",  # composes to U+226F (across a segment boundary it must not: core's job)
    "\u226f",
    "\u0958",  # composition exclusion
    "\u0915\u093c",
    "\u212b",  # singleton: ANGSTROM SIGN -> U+00C5
    "\u0344",  # non-starter decomposition
    "\u0f73\u0f71\u0f72",
    "\u1f82\u0345",
    "\u1fb7",
    "a\u0328\u0302\u0301\u0323",
    "\u0b47\u0b3e\u0b57",
    "\u0cbf\u0cd5",
    "\u0dd9\u0dcf\u0dca",
    "\u304b\u3099",
    "\u0301a",
    "\u0301\u0300\u0316",
    "\U0001d15f\U0001d16e",
]


def test_traps(ref, hf):
    for s in TRAPS:
        assert nfc(s) == hf(s), s.encode("unicode_escape")
        if is_nfc(s):
            assert hf(s) == s
    assert nfc("\U00011935\U00011930") == "\U00011935\U00011930"
    assert nfc("a\u0301\u07fd") == "\u00e1\u07fd"
    assert nfc("a\u07fd\u0301") == "a\u07fd\u0301"


def test_quick_check_fast_path_boundaries(hf):
    # Bytes below 0xCC are skipped 8 at a time; U+02FF (CB BF) must be skipped
    # and U+0300 (CC 80) seen, at every alignment.
    for pre in range(20):
        for post in range(10):
            assert is_nfc("x" * pre + "\u02ff" + "y" * post)
            assert not is_nfc("x" * pre + "\u0300" * 2 + "\u0316" + "y" * post)
            assert not is_nfc("e" * pre + "\u0301" + "y" * post)
            assert is_nfc("\u00e9" * pre + "\u0316\u0316" + "y" * post)
            s = "e" * pre + "\u0301" + "\u00e9" * post
            assert nfc(s) == hf(s)
    assert is_nfc("".join(map(chr, range(1, 0x300))))
    # A lone byte below 0xCC between other scripts' letters is stepped over on
    # its own (no word-at-a-time scan); what follows it must still compose
    # with it, and a mark after a letter of a block with marks is still seen.
    for s in ("\u0434a\u0301", "\u0915 \u0915\u093c\u094d", "\u0e01e\u0301\u0e48", "\u4e00a\u0301\u4e00",
              "\u0915\u0301a", "\u0e01\u0e38\u0e48 x\u0316\u0301"):
        for k in (1, 2, 5):
            assert nfc(s * k) == hf(s * k), (s * k).encode("unicode_escape")
            assert not is_nfc(s * k) or hf(s * k) == s * k


def test_long_inputs(hf):
    """Linear time on 1 MB inputs (counting sort on long runs); output as the reference."""
    n = 500_000
    cases = [
        "\u0301" * n,
        "a" + "\u0301" * n,
        "a" + "\u0301\u0316" * (n // 2),
        "o" + "\u0316\u0301\u0323\u031b\u0345\u0334" * (n // 6),
        "e\u0301" * (n // 2),
        "\u1100\u1161" * (n // 2),
        "\u4e00a\u0301\u1100\u1161\u11a8 " * (n // 8),
        "x" * (2 * n),
    ]
    for s in cases:
        assert nfc(s) == hf(s), s[:8].encode("unicode_escape")


def test_allocation_failures_leave_nothing_behind(hf):
    from qwen4exp._native._alloc import allocations_seen, fail_allocation

    s = "abc" + "o\u0316\u0301\u0323" * 50 + "\u0301\u0316" * 300 + "\u0958" * 400 + "e\u0301"
    want = hf(s)
    fail_allocation(1 << 60)
    try:
        assert nfc(s) == want
        seen = allocations_seen()
    finally:
        fail_allocation(0)
    assert seen >= 3  # output, work buffer, counting-sort scratch, growth
    for k in range(1, seen + 1):
        fail_allocation(k)
        try:
            with pytest.raises(MemoryError):
                nfc(s)
        finally:
            fail_allocation(0)
        assert nfc(s) == want


# ------------------------------------------------------------------ hypothesis

ALPHABET = (
    "aeiouAEOUnsczgkyw\u03b1\u03b7\u03c9\u0391\u0415\u0438\u0627\u05d0\u0915\u0930\u0b47"
    "\u0cbf\u0cc6\u0dd9\u1100\u1112\u1161\u1175\u11a7\u11a8\u11c2\u11c3\uac00\uac01\ud7a3"
    "\u304b\u306f\u30cf\u4e00\u9fa5\U00020000\u00e9\u00c5\u1ea0\u1f00\u212b\u2126\u0958"
    "\u0300\u0301\u0302\u0303\u0308\u030a\u030c\u0316\u0323\u0327\u0328\u031b\u0334\u0338"
    "\u0342\u0344\u0345\u05b0\u05bc\u093c\u094d\u0b3e\u0b57\u0cd5\u0dca\u0dcf\u0e38\u3099"
    "\u309a\u07fd\u0898\u0c3c\u1abf\U00011930\U00011935\U0001d165\U0001d16e \n!1"
)


def _check_mixture(ref, hf, s):
    want = hf(s)
    assert nfc(s) == want
    if is_nfc(s):
        assert want == s
    elif want == s:
        assert any(ch in ref["maybe"] for ch in s)
    assert nfc(want) == want  # the reference's output is a fixed point of ours


_mixtures = given(st.text(alphabet=ALPHABET, max_size=40))
test_random_mixtures = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])(
    _mixtures(_check_mixture))
test_random_mixtures_long = pytest.mark.slow(settings(max_examples=10000, deadline=None, suppress_health_check=[
    HealthCheck.too_slow])(_mixtures(_check_mixture)))
