"""The encode loop's look-ahead (docs/ARCHITECTURE.md, "Step by step"): each
piece's slot in the worker's cache is looked at 8 pieces before its turn,
and a piece found there is answered by a copy of the slot's ids. These
tests hold the cases where a slot looked at ahead could be stale or wrong:
the worker's cache emptied between the look and the turn, one-byte pieces
(answered from the tokenizer's byte table), pieces repeated within the
look-ahead window, and chunk boundaries. Every result is compared with HF."""

import random

import pytest

import qwen4exp
from helpers import novel_words


def _hf(vocab_hf, text):
    return vocab_hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("cache_size", [1, 2, 5, 8, 13])
def test_cache_emptied_between_the_look_and_the_turn(cache_size, vocab, vocab_hf):
    """A tiny worker cache is emptied by almost every store. Known words sit
    a few pieces after new ones, so their slots are looked at before the new
    words' stores empty the cache: they must be looked at again."""
    tok = qwen4exp.Tokenizer(vocab, cache_size=cache_size)
    rng = random.Random(cache_size)
    common = ["the", "and", "of", "to", "in", "is", "for", "on"]
    parts = []
    for word in novel_words(600, cache_size):
        parts.append(word)
        parts += rng.sample(common, rng.randint(1, 7))
    text = " ".join(parts)
    want = _hf(vocab_hf, text)
    assert tok.encode(text) == want
    assert tok.encode(text) == want  # again, with whatever the cache kept


def test_every_ascii_character_as_a_one_byte_piece(vocab, vocab_hf):
    """One-byte pieces come from the byte table: every ASCII character alone
    and in runs with pieces of every other length around it."""
    tok = qwen4exp.Tokenizer(vocab)
    chars = [chr(c) for c in range(128)]
    texts = ["".join(chars), " ".join(chars), "x".join(chars), "\n".join(chars),
             "".join(c + "word" + c + "1" for c in chars)]
    for text in texts:
        assert tok.encode(text) == _hf(vocab_hf, text)


@pytest.mark.parametrize("cache_size", [3, 65536])
def test_pieces_repeated_inside_the_window_and_across_chunks(cache_size, vocab, vocab_hf):
    """A new word repeated before its first occurrence's turn is looked at
    while it is not yet cached; texts of many chunks (256 pieces each) put
    every window position on a chunk boundary."""
    tok = qwen4exp.Tokenizer(vocab, cache_size=cache_size, encode_threads=1)
    rng = random.Random(7)
    words = novel_words(40, 70)
    for gap in range(1, 10):
        seq = []
        for w in words:
            seq += [w] + ["," for _ in range(gap - 1)] + [w]
        text = " ".join(seq * 5)
        assert tok.encode(text) == _hf(vocab_hf, text), gap
    pieces = [rng.choice(words + ["a", "b", " ", "\n", "é", "中文", "x" * 20, "y" * 200]) for _ in range(3000)]
    text = "".join(pieces)
    assert tok.encode(text) == _hf(vocab_hf, text)


@pytest.mark.parametrize("cache_size", [16, 100])
def test_caches_that_grow_keep_their_words(cache_size, vocab, vocab_hf):
    """A worker's cache that fills grows (its entries move to tables twice
    the size, at the start of the next chunk) up to 4 times its first size,
    then is emptied: many more new words than that, in texts long enough for
    many chunks, on one thread and split across two, and again once the
    caches hold them."""
    words = novel_words(30 * cache_size, cache_size + 7)
    words = [w + words[-1 - i] if i % 3 == 0 else w for i, w in enumerate(words)]  # long pieces too (over 15 bytes)
    texts = [" ".join(words[i:i + 700]) for i in range(0, len(words), 700)]
    want = [_hf(vocab_hf, t) for t in texts]
    for threads in (1, 2):
        tok = qwen4exp.Tokenizer(vocab, cache_size=cache_size, encode_threads=threads)
        assert [tok.encode(t) for t in texts] == want
        assert [tok.encode(t) for t in texts] == want
        assert tok.encode_batch(texts, num_threads=2) == want


def test_encode_from_a_finalizer_during_encode(tok):
    """encode() of a short text keeps its ids in a vector it reuses; a
    finalizer run by the collector from inside the call (when the ids' list
    is allocated) that encodes a text itself must not write into it."""
    import gc

    reference = qwen4exp.Tokenizer(encode_threads=1, cache_size=0)
    inner = []

    class Trap:
        def __del__(self):
            inner.append(tok.encode("inner text"))

    native_encode = tok.core.native.encode  # no Python frame between the collector and the list's allocation
    old = gc.get_threshold()
    got = []
    try:
        for i in range(50):
            hold = [[] for _ in range(200)]  # no spare list objects: the ids' list is a new allocation
            gc.collect(0)  # the youngest generation only: a full one costs seconds in a worker's large heap
            trap = Trap()
            trap.cycle = trap  # only the collector frees it
            del trap
            gc.set_threshold(1)  # the trap counted 1: the ids' list is the 2nd allocation, which collects
            got.append(native_encode("outer text %d" % i))
            gc.set_threshold(*old)
            del hold
    finally:
        gc.set_threshold(*old)
        gc.collect()
    assert got == [reference.encode("outer text %d" % i) for i in range(50)]
    assert inner == [reference.encode("inner text")] * 50


def test_a_new_tokenizer_reuses_released_tables_zeroed():
    """A released tokenizer's large tables are kept for the next one, which
    finds them zeroed: a tokenizer of another vocabulary in the first one's
    worker cache (same size) gets its own ids, not the first one's."""
    import gc

    from qwen4exp._native import _alloc

    first_vocab, second_vocab = qwen4exp.vocabularies()[:2]
    text = " ".join(novel_words(3000, 7)) + " 中文字符的句子 ελληνικά λόγια"
    want = qwen4exp.Tokenizer(second_vocab, encode_threads=1, cache_size=0).encode(text)
    first = qwen4exp.Tokenizer(first_vocab, encode_threads=1)
    first.encode(text)  # its worker cache now holds these words, with its vocabulary's ids
    del first
    gc.collect()
    kept = _alloc.spare_bytes()
    assert kept > 0
    second = qwen4exp.Tokenizer(second_vocab, encode_threads=1)
    assert second.encode(text) == want
    assert _alloc.spare_bytes() < kept  # its tables and worker cache took some of them
    assert second.encode(text) == want  # from its cache
