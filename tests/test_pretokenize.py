"""The pre-tokenizer alone (pyx/_pretokenize.pyx) against the reference's
Split (tokenizers 0.22.1, Oniguruma) on both patterns, and its chunking: the
pieces piece_ends gives do not depend on how many it is asked for at a time.

`split` (cap 7 by default, so chunk boundaries fall everywhere) and `ends`
are the module's test hooks; `ends(..., cap=0)` is the one-piece-at-a-time
`piece_end`. ASCII text goes through 64-byte blocks whose pieces come from
bit masks, so the texts below put every shape at every offset of a block.
"""

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpora
from _hf_reference import hf_split
from qwen4exp._native._pretokenize import block_masks, byte_class, char_class, ends, split

PATTERNS = {"qwen3": False, "qwen3.6": True}  # True: the Qwen3.5/3.6 pattern (\p{M} joins letters)

# Characters on which the alternatives disagree: contraction letters, both
# apostrophes' neighbours, every ASCII whitespace, CR/LF, digits, "other"
# bytes; and non-ASCII letters, marks, numbers, spaces, U+017F (a contraction),
# NEL and LS (\s, not [\r\n]), a format character.
ASCII_TRAPS = list("stmdrevlSTMDREVLaxZ09''' \t\n\r\x0b\x0c!(.,=_\"#\x00\x1c\x7f")
TRAPS = ASCII_TRAPS + ["\u00e9", "\u00aa", "\u017f", "\u00a0", "\u0085", "\u2028", "\u3000", "\u0301", "\u093f",
                       "\u0660", "\u00b2", "\u4e2d", "\U0001f600", "\u200b", "\u2019"]


def reference(text, marks):
    return [p for p, _ in hf_split(marks).pre_tokenize_str(text)]


def assert_pieces(texts, marks, cap=7):
    for text in texts:
        got, want = split(text, marks, cap), reference(text, marks)
        if got != want:
            k = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise AssertionError(f"cap {cap}, text {text[:200]!r}: piece {k}: ours {got[k:k + 3]} "
                                 f"reference {want[k:k + 3]}")


@pytest.fixture(params=list(PATTERNS))
def marks(request):
    return PATTERNS[request.param]


@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_corpus_documents(name, marks):
    """Every document; of the 3 MB code corpus every other one (all under slow)."""
    docs = corpora.DOCUMENTS[name]()
    assert_pieces(docs[::2] if name == "code" else docs, marks)


@pytest.mark.slow
def test_every_code_document(marks):
    assert_pieces(corpora.DOCUMENTS["code"](), marks)


@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_every_cap_gives_the_same_pieces(name, marks):
    text = corpora.CORPORA[name]()
    want = ends(text, marks, 64)
    assert len(want) > 10_000 and want[-1] == len(text.encode("utf-8"))
    assert np.all(np.diff(want) > 0)
    for cap in [0, *range(1, 10), 256]:
        assert np.array_equal(ends(text, marks, cap), want), cap


def shapes():
    """Short texts, each a shape the block masks decide, in several variants."""
    out = ["\n \n", "\n \n  x", " \n\t \n y", "  \n\t  ", "a  \n\n  b", "x\r\n\r\n   (", "!!\n\n", "!\n  x",
           "!\n\n1", "( x", " ( x", "  (x", "\t(x", "\t\tx", " \tx", "'s", "'sx", "don't", "'ll", "'LLama",
           "'re", "'rex", "'r", "a'vE", "!'s", " 's", "\t's", "1'd", "'\u017f", "x'\u017fy", "x\u00a0 y",
           "a\u0085 b", "\u3000x", "  \u00e9", "(\u00e9", "''x", "x\n", "x   ", " ", "\n", "'", "a"]
    return out + [s + "1" for s in out] + [s + "x" for s in out] + [s + " !" for s in out]


@pytest.mark.parametrize("filler", ["1", "ab ", " ", "x", "\n", "é"])
def test_shapes_at_every_offset_of_a_block(filler, marks):
    texts = [(filler * 70)[:k] + shape for shape in shapes() for k in range(0, 70)]
    texts += [(filler * 70)[:k] + shape + (filler * 70)[:k] for shape in shapes()[::5] for k in range(50, 70)]
    assert_pieces(texts, marks, cap=64)


def random_text(rnd, n, alphabet):
    return "".join(rnd.choice(alphabet) for _ in range(n))


def test_random_texts(marks):
    rnd = random.Random(20261130)
    texts = [random_text(rnd, rnd.choice([1, 2, 5, 20, 63, 64, 65, 130, 400]), rnd.choice([ASCII_TRAPS, TRAPS]))
             for _ in range(600)]
    texts.append(random_text(rnd, 200_000, ASCII_TRAPS))
    texts.append(random_text(rnd, 50_000, TRAPS))
    for cap in (1, 3, 64):
        assert_pieces(texts, marks, cap)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(TRAPS), max_size=300) | st.text(max_size=100),
       st.integers(min_value=1, max_value=9))
def test_hypothesis_texts(text, cap):
    for marks in PATTERNS.values():
        assert_pieces([text], marks, cap)
        assert np.array_equal(ends(text, marks, cap), ends(text, marks, 64))


def test_byte_class_table():
    """q4_byte_class: the code point classes for ASCII (proven against the
    reference in test_unicode_tables.py), 128 for every byte >= 0x80."""
    assert [byte_class(b) for b in range(256)] == [char_class(b) for b in range(128)] + [128] * 128


def test_sse2_and_portable_block_masks_agree():
    rnd = random.Random(7)
    blocks = [bytes(rnd.randrange(256) for _ in range(64)) for _ in range(300)]
    blocks += [bytes(rnd.choice(b"az AZ09'\t\n\r\x0b\x0c!(\x00\x7f\x80\xff") for _ in range(64)) for _ in range(300)]
    blocks.append(bytes(range(64)) + b"")
    blocks += [bytes(range(k, k + 64)) for k in range(64, 193, 64)]
    for data in blocks:
        masks = block_masks(data)
        assert masks == block_masks(data, portable=True)
        letter, digit, space, crlf, other, blank, apos, hi = masks
        for k, b in enumerate(data):
            c = byte_class(b)
            bits = [letter, digit, space, crlf, other, blank, apos, hi]
            want = [c == 1, c == 2, c in (4, 12), c == 12, c == 0, b == 0x20, b == 0x27, b >= 0x80]
            assert [bool(m >> k & 1) for m in bits] == want, (data, k)


def test_hook_arguments():
    with pytest.raises(ValueError):
        ends("x", cap=-1)
    with pytest.raises(ValueError):
        split("x", cap=257)
    with pytest.raises(ValueError):
        block_masks(b"x" * 63)
    assert split("") == [] and len(ends("")) == 0
