"""Plain-text parity with Hugging Face `tokenizers` (docs/FORMAT.md, invariant 3).

The reference is tokenizers==0.22.1 with the added tokens removed, on the
bundled tokenizer.json ("qwen3") and on the tokenizer.json transformers'
TikTokenConverter makes from the Qwen3.5/3.6 ranks ("qwen3.6": other pattern,
every split a merge, ignore_merges). Every test runs on both vocabularies.
Nothing here compares qwen4exp with itself.
"""

import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpora
from _hf_reference import token_texts
from helpers import SCALAR_SAMPLE, SCALARS






# Contexts that exercise every alternative of the pattern around one character.
CONTEXTS = {
    "alone": "{c}",
    "after_letter": "a{c}",
    "after_space": " {c}",
    "before_space": "{c} x",
    "between_digits": "1{c}2",
    "after_apostrophe": "'{c}b",
    "doubled_in_word": "a{c}{c}a",
    "after_newline": "\n{c}",
}


def assert_same(tok, hf, texts, threads=2):
    ours = tok.encode_batch(texts, num_threads=threads)
    ref = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    bad = [(t, a, b) for t, a, b in zip(texts, ours, ref) if a != b]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0][0]!r}: ours {bad[0][1]} ref {bad[0][2]}"


# The exhaustive scalar sweeps are `slow`; the default run takes every context
# over SCALAR_SAMPLE, and every mark (where Qwen3.6's pattern differs).


def test_sampled_scalar_values_in_every_context(vocab_tok, vocab_hf):
    for pattern in CONTEXTS.values():
        assert_same(vocab_tok, vocab_hf, [pattern.format(c=chr(cp)) for cp in SCALAR_SAMPLE])


@pytest.mark.slow
@pytest.mark.parametrize("context", ["alone", "after_letter", "after_space"])
def test_every_scalar_value(vocab_tok, vocab_hf, context):
    pattern = CONTEXTS[context]
    for lo in range(0, len(SCALARS), 1 << 16):
        assert_same(vocab_tok, vocab_hf, [pattern.format(c=chr(cp)) for cp in SCALARS[lo : lo + (1 << 16)]])


@pytest.mark.slow
@pytest.mark.parametrize("context", sorted(set(CONTEXTS) - {"alone", "after_letter", "after_space"}))
def test_every_scalar_value_more_contexts(vocab_tok, vocab_hf, context):
    pattern = CONTEXTS[context]
    for lo in range(0, len(SCALARS), 1 << 16):
        assert_same(vocab_tok, vocab_hf, [pattern.format(c=chr(cp)) for cp in SCALARS[lo : lo + (1 << 16)]])


@pytest.mark.slow
def test_non_ascii_scalars_in_every_context(vocab_tok, vocab_hf):
    # Every context, every code point outside the large uniform CJK / Hangul /
    # private-use blocks, plus a sample of those.
    picked = [cp for cp in SCALARS if cp < 0x3400 or 0xA000 <= cp < 0xAC00 or 0xD7B0 <= cp < 0xE000
              or 0xF900 <= cp < 0x20000]
    picked += SCALARS[::97]
    for pattern in CONTEXTS.values():
        assert_same(vocab_tok, vocab_hf, [pattern.format(c=chr(cp)) for cp in picked])


def test_every_mark_in_every_context(vocab_tok, vocab_hf):
    from qwen4exp._native._pretokenize import char_class

    picked = [cp for cp in SCALARS if char_class(cp) & 16] + SCALARS[::211]  # 16: \p{M}
    assert len(picked) > 2500
    for pattern in CONTEXTS.values():
        assert_same(vocab_tok, vocab_hf, [pattern.format(c=chr(cp)) for cp in picked])


NOTES_TRAPS = [
    "a\x85\x85b", "a\u2028\u2028b", "x\u2029y", "a\x1c\x1d\x1e\x1fb", "a   b", "a   ", "   ",
    "\u200bb", "a\u200db", "\ufeffhello", "हिन्दी", "²½Ⅻ①", "it'ſ", "IT'S 'Ll 'VE 'rE 'D 'M",
    "'\u212a", "'K", "foo\r\n\r\n  bar", "\r\r\n\n", " \t\n \t", "\u3000\u3000x",
    "\u00a0\u00a0b", "a\u00a0", "1234567890", "-" * 100, "((((x))))", "a\n\n\nb  \n c",
    "\U000323b0\U00033479", "<|im_end|>", "<think>x</think>", "<|endoftext|>",
    "e\u0301\u0301", "\u1100\u1161\u11a8", "\U00011935\U00011930", "a\u07fd\u0301",
    "Ａｂｃ１２３", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "👨‍👩‍👧‍👦 🇫🇷 👍🏽", "مرحبا بالعالم", "שלום עולם",
]


def test_notes_traps(vocab_tok, vocab_hf):
    assert_same(vocab_tok, vocab_hf, NOTES_TRAPS, threads=1)


@pytest.mark.parametrize("vocab", ["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)], indirect=True)  # 3.6: test_sampled_* and the slow run
@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_corpus_lines(vocab_tok, vocab_hf, name):
    """Every line of the corpora; of the 3 MB code corpus, the lines of every
    other document (all of them under slow; the default run also encodes the
    whole code corpus in one call, test_long_text_parts)."""
    docs = corpora.DOCUMENTS[name]()
    if name == "code":
        docs = docs[::2]
    assert_same(vocab_tok, vocab_hf, "".join(docs).splitlines(keepends=True))


@pytest.mark.slow
def test_code_corpus_lines_every_document(vocab_tok, vocab_hf):
    assert_same(vocab_tok, vocab_hf, corpora.code_corpus().splitlines(keepends=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_corpus_in_64k_pieces(vocab_tok, vocab_hf, name):
    """The corpora whole, cut every 64 KiB (the default run's test_long_text_parts
    encodes them in one call)."""
    text = getattr(corpora, f"{name}_corpus")()
    assert_same(vocab_tok, vocab_hf, [text[i : i + 65536] for i in range(0, len(text), 65536)])


@pytest.mark.parametrize("vocab", ["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)], indirect=True)
@pytest.mark.parametrize("cache_size", [4, 64, 2048])
def test_small_caches_fill_and_empty(vocab_hf, vocab, cache_size):
    """Word caches far smaller than the text, so they fill and are emptied again
    and again; words around every storage boundary (bytes kept in the slot or
    in the pool, few or many ids, too long to cache), each seen twice so that
    the second one is answered from the cache."""
    import qwen4exp

    tok = qwen4exp.Tokenizer(vocab, cache_size=cache_size)
    words = [" " + "".join(chr(0x61 + (i * 7 + j * 3) % 26) for j in range(n)) for i, n in
             enumerate(range(1, 140))]
    words += [" " + "中文字" * k for k in range(1, 50)]        # 3-byte letters, many ids
    words += [" " + "क्ष" * k for k in range(1, 20)]        # Devanagari with a virama
    docs = ["".join(words[i::7]) for i in range(7)] + list(corpora.multilingual_documents()[:40])
    assert_same(tok, vocab_hf, docs + docs, threads=1)


@pytest.mark.parametrize("n", [20_000, pytest.param(200_000, marks=pytest.mark.slow)])
def test_long_words(vocab_tok, vocab_hf, n):
    """Pieces far longer than any word cache or heap method takes (20,000
    characters already use the bucket method; 200,000 under slow)."""
    assert_same(vocab_tok, vocab_hf, [corpora.long_word(n), "x" * n, "-" * n, "中" * n, " " * n, "\n" * n, "1" * n,
                                "e" + "\u0301" * n])


ALPHABET = st.sampled_from(
    list("aZ'sStTlLeEvVmMdDrR 0123456789\t\n\r.,;-_()<>|/\\\"") +
    ["\x85", "\u2028", "\u2029", "\u00a0", "\u3000", "\u200b", "\u200d", "\ufeff", "\u017f", "\u212a",
     "\u0301", "\u0308", "\u093f", "\u094d", "é", "ß", "中", "文", "가", "\u1100", "\u1161", "\u11a8",
     "²", "½", "Ⅻ", "①", "😀", "\U0001f3fd", "<|im_end|>", "<think>", "\U000323b0"]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_hypothesis_structured(vocab_tok, vocab_hf, text):
    assert vocab_tok.encode(text) == vocab_hf.encode(text, add_special_tokens=False).ids


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_hypothesis_any_text(vocab_tok, vocab_hf, text):
    assert vocab_tok.encode(text) == vocab_hf.encode(text, add_special_tokens=False).ids


def test_long_words_with_runs(vocab_tok, vocab_hf):
    """Long pieces (heap and rank-bucket methods) with runs of identical symbols of every parity."""
    import random

    rng = random.Random(7)
    texts = []
    for target in [100, 200, 500, 1000, 3000] * 8:  # the heap (96..1023 bytes) and bucket methods
        parts = []
        while sum(map(len, parts)) < target:
            c = rng.choice("aabxyzéß中ー")
            parts.append(c * rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 33]))
        texts.append("".join(parts))
    texts += ["x" * n for n in (1023, 1024, 1025, 4097)] + ["ab" * 700, "aab" * 500, "-=" * 999]
    assert_same(vocab_tok, vocab_hf, texts)


@pytest.mark.parametrize("vocab", [pytest.param("qwen3", marks=pytest.mark.slow), "qwen3.6"], indirect=True)
@pytest.mark.slow
def test_every_token_spelling(vocab_tok, vocab_hf):
    """Each vocabulary token's text alone: with ignore_merges ("qwen3.6") a
    pre-token that is a token is that token, whatever the merges would make."""
    texts = token_texts(vocab_hf)
    assert len(texts) > 100_000
    assert_same(vocab_tok, vocab_hf, texts)
    assert_same(vocab_tok, vocab_hf, ["x" + t + "\u0301" for t in texts[::7]])


def test_sampled_token_spellings(vocab_tok, vocab_hf):
    """The default run's share of the test above: every 13th token by id."""
    texts = token_texts(vocab_hf)[::13]
    assert len(texts) > 100_000 // 13
    assert_same(vocab_tok, vocab_hf, texts)
    assert_same(vocab_tok, vocab_hf, ["x" + t + "\u0301" for t in texts[::7]])


MARK_TRAPS = [
    "हिन्दी भाषा", "e\u0301t\u00e9 ", " \u0301\u0301x", "!\u0301!", "a!\u0301b", "\u0301", " \u0301",
    "\n\u0301", "1\u0301", "'\u0301s", "x \u20dd\u20dd", "\u0e01\u0e34\u0e19", "\u1abf\u1ac0",
    "نَصٌّ عَرَبِيٌّ", "a\u200d\u0301b", "\U0001f44d\U0001f3fd\u20e3",
]


def test_mark_traps(vocab_tok, vocab_hf):
    # Qwen3.5's pattern: marks join letter runs and never join punctuation runs.
    assert_same(vocab_tok, vocab_hf, MARK_TRAPS, threads=1)


# -- long texts: encode() cuts them into many parts and encodes the parts on
# several threads (pyx/_encoder.pyx, encode_parts; tests/test_parts.py checks
# the cut rule itself); the ids must not change.

PART_MIN_CHARS = 1 << 18  # long enough for the most parts a text is cut into


def _line_starts():
    """Lines whose first characters test the boundary rule: letters of many
    scripts (a split may fall before them), and everything else (it may not):
    marks, jamo, apostrophes, digits, spaces, CR/LF, symbols, 4-byte letters."""
    heads = ["a", "Z", "é", "ß", "中", "文", "가", "Ж", "ω", "ب", "ก", "क", "\u1100\u1161", "\u1161", "\u11a8",
             "\u0301a", "\u093fक", "'s", "'S", "'ll", "\u017f", "1a", "²", " a", "  a", "\ta", "\u3000中",
             "\r\nb", "\ra", ".a", "—a", "😀a", "\U00020000a", "\u00a0a", "\u200ba", "<|im_end|>a"]
    return [h + "bc def" + ("\u0301" if i % 5 == 0 else "") + " x" * (i % 4) for i, h in enumerate(heads)]


@pytest.mark.parametrize("vocab", ["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)], indirect=True)
@pytest.mark.parametrize("name", ["code", "multilingual"])
def test_long_text_parts(vocab_tok, vocab_hf, name):
    """A whole corpus in one encode() call (long enough to be split) equals the
    reference, and count() (never split) agrees (Qwen3.6 under slow; the
    default run compares its corpora line by line). Of the 3 MB code corpus,
    every other document (1.5 MB; all of it under slow)."""
    docs = corpora.DOCUMENTS[name]()
    check_long_text(vocab_tok, vocab_hf, "".join(docs[::2] if name == "code" else docs))


@pytest.mark.slow
def test_long_text_parts_whole_code_corpus(vocab_tok, vocab_hf):
    check_long_text(vocab_tok, vocab_hf, corpora.code_corpus())


def check_long_text(vocab_tok, vocab_hf, text):
    if len(text) < PART_MIN_CHARS:
        text = (text + "\n") * (PART_MIN_CHARS // len(text) + 1)
    ids = vocab_tok.encode(text)
    assert ids == vocab_hf.encode(text, add_special_tokens=False).ids
    assert len(ids) == vocab_tok.count(text)


@pytest.mark.parametrize("vocab", ["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)], indirect=True)
def test_long_text_parts_line_starts(vocab_tok, vocab_hf):
    """Lines starting with every kind of character, in a text long enough to be
    split, with and without CR, NFC and not (NFC runs over the whole text first)."""
    lines = _line_starts()
    body = "\n".join(lines[i % len(lines)] * (1 + i % 3) for i in range(30000))
    assert len(body) >= PART_MIN_CHARS
    for text in (body, body.replace("\n", "\r\n"), unicodedata.normalize("NFD", body)):
        assert vocab_tok.encode(text) == vocab_hf.encode(text, add_special_tokens=False).ids
