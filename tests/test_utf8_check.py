"""The native UTF-8 check (rows refused by encode_arrow, DATA segments'
bytes) against Python's strict codec: the 16-byte-step check's verdict and
the byte loop's offset of the first bad byte, which is where the codec's
error starts."""
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen4exp._native._geometry import utf8_checks, utf8_simd_level

# Byte values at the edges of every range the rules tell apart.
EDGES = (0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0,
         0xF4, 0xF5, 0xFF)
# What comes before a sequence: ASCII (the check skips ASCII after ASCII),
# or a multibyte character, so that the block before is not ASCII.
CONTEXTS = (b"", "é".encode(), "中".encode(), "😀".encode())


# The byte loop alone (0) runs by default only on a CPU without a vector check
# (where it is the check); elsewhere it is `slow`, as is SSSE3 beside AVX2.
_BYTES = 0 if utf8_simd_level() == 0 else pytest.param(0, marks=pytest.mark.slow)


@pytest.fixture(params=[2, pytest.param(1, marks=pytest.mark.slow), _BYTES], ids=["avx2", "ssse3", "bytes"],
                autouse=True)
def width(request):
    """Each test at each vector width this CPU has (0: the byte loop alone)."""
    best = utf8_simd_level()
    if request.param > best:
        pytest.skip(f"this CPU's widest UTF-8 check is level {best}")  # a plain x86-64 without AVX2
    utf8_simd_level(request.param)
    yield request.param
    utf8_simd_level(best)


def codec(data: bytes) -> int:
    """-1 if data is valid UTF-8, else where the strict codec's error starts."""
    try:
        data.decode("utf-8")
        return -1
    except UnicodeDecodeError as e:
        return e.start


def check(data: bytes) -> None:
    fast, at = utf8_checks(data)
    want = codec(data)
    assert at == want, data
    if utf8_simd_level() > 0:
        assert fast == (want == -1), data
    else:
        assert fast == -1


def sequences():
    yield from (bytes([a]) for a in range(256))
    yield from (bytes([a, b]) for a in range(256) for b in range(256))
    yield from (bytes([a, b, c]) for a in range(0xC0, 0x100) for b in range(256) for c in EDGES)
    yield from (bytes([a, b, c, d]) for a in range(0xE0, 0x100) for b in range(0x80, 0xC0)
                for c, d in itertools.product(EDGES, repeat=2))


def test_every_short_sequence_at_every_place_in_a_block():
    """Each sequence once, between a context and ASCII padding whose lengths
    cycle, so that sequences start at each of the 16 places of a block and
    end at the data's end or before more bytes; and in the last, partial
    block (copied into a zero-padded one) as well as in whole ones."""
    for k, s in enumerate(sequences()):
        context = CONTEXTS[k % len(CONTEXTS)]
        pad = b"a" * (k % 16 + 16 * (k % 3 == 0))
        after = b"b" * ((7 * k) % 19)
        check(pad + context + s + after)


@pytest.mark.parametrize("n", range(0, 50))
def test_a_sequence_cut_off_at_the_end(n):
    text = ("x" * n + "é中😀").encode()
    for cut in range(1, 8):
        check(text[:-cut] if cut < len(text) else b"")
        check(text[:-cut] + b"z" * 16 if cut < len(text) else b"")


def test_long_valid_text_in_many_scripts():
    text = "".join(chr(c) for c in range(0x20, 0x30000, 97) if not 0xD800 <= c <= 0xDFFF).encode()
    check(text)
    for i in range(0, len(text), 101):
        check(text[:i] + b"\x80" + text[i:])  # a stray continuation byte anywhere


pieces = st.one_of(
    st.text(min_size=0, max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(min_size=0, max_size=6),
    st.sampled_from([b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\xc0\xaf", b"\xf0\x8f\xbf\xbf"]),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(pieces, max_size=24))
def test_random_mixes_of_text_and_bytes(parts):
    check(b"".join(parts))
