"""Plain-text parity with Hugging Face `tokenizers` (docs/FORMAT.md, invariant 3).

The reference is tokenizers==0.22.1 on the bundled tokenizer.json with its
added tokens removed. Nothing here compares qwen4exp with itself.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpora

SCALARS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]

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


def assert_same(tok, hf_plain, texts, threads=2):
    ours = tok.encode_batch(texts, num_threads=threads)
    ref = [e.ids for e in hf_plain.encode_batch(texts, add_special_tokens=False)]
    bad = [(t, a, b) for t, a, b in zip(texts, ours, ref) if a != b]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0][0]!r}: ours {bad[0][1]} ref {bad[0][2]}"


@pytest.mark.parametrize("context", ["alone", "after_letter", "after_space"])
def test_every_scalar_value(tok, hf_plain, context):
    pattern = CONTEXTS[context]
    for lo in range(0, len(SCALARS), 1 << 16):
        assert_same(tok, hf_plain, [pattern.format(c=chr(cp)) for cp in SCALARS[lo : lo + (1 << 16)]])


@pytest.mark.slow
@pytest.mark.parametrize("context", sorted(set(CONTEXTS) - {"alone", "after_letter", "after_space"}))
def test_every_scalar_value_more_contexts(tok, hf_plain, context):
    pattern = CONTEXTS[context]
    for lo in range(0, len(SCALARS), 1 << 16):
        assert_same(tok, hf_plain, [pattern.format(c=chr(cp)) for cp in SCALARS[lo : lo + (1 << 16)]])


def test_non_ascii_scalars_in_every_context(tok, hf_plain):
    # The fast default run: every context, every code point outside the
    # large uniform CJK / Hangul / private-use blocks, plus a sample of those.
    picked = [cp for cp in SCALARS if cp < 0x3400 or 0xA000 <= cp < 0xAC00 or 0xD7B0 <= cp < 0xE000
              or 0xF900 <= cp < 0x20000]
    picked += SCALARS[::97]
    for pattern in CONTEXTS.values():
        assert_same(tok, hf_plain, [pattern.format(c=chr(cp)) for cp in picked])


NOTES_TRAPS = [
    "a\x85\x85b", "a\u2028\u2028b", "x\u2029y", "a\x1c\x1d\x1e\x1fb", "a   b", "a   ", "   ",
    "\u200bb", "a\u200db", "\ufeffhello", "हिन्दी", "²½Ⅻ①", "it'ſ", "IT'S 'Ll 'VE 'rE 'D 'M",
    "'\u212a", "'K", "foo\r\n\r\n  bar", "\r\r\n\n", " \t\n \t", "\u3000\u3000x",
    "\u00a0\u00a0b", "a\u00a0", "1234567890", "-" * 100, "((((x))))", "a\n\n\nb  \n c",
    "\U000323b0\U00033479", "<|im_end|>", "<think>x</think>", "<|endoftext|>",
    "e\u0301\u0301", "\u1100\u1161\u11a8", "\U00011935\U00011930", "a\u07fd\u0301",
    "Ａｂｃ１２３", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "👨‍👩‍👧‍👦 🇫🇷 👍🏽", "مرحبا بالعالم", "שלום עולם",
]


def test_notes_traps(tok, hf_plain):
    assert_same(tok, hf_plain, NOTES_TRAPS, threads=1)


@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_corpus_lines_and_whole(tok, hf_plain, name):
    text = getattr(corpora, f"{name}_corpus")()
    lines = text.splitlines(keepends=True)
    assert_same(tok, hf_plain, lines)
    assert_same(tok, hf_plain, [text[i : i + 65536] for i in range(0, len(text), 65536)])


@pytest.mark.parametrize("cache_size", [4, 64, 2048])
def test_small_caches_fill_and_empty(hf_plain, cache_size):
    """Word caches far smaller than the text, so they fill and are emptied again
    and again; words around every storage boundary (bytes kept in the slot or
    in the pool, few or many ids, too long to cache), each seen twice so that
    the second one is answered from the cache."""
    import qwen4exp

    tok = qwen4exp.Tokenizer(cache_size=cache_size)
    words = [" " + "".join(chr(0x61 + (i * 7 + j * 3) % 26) for j in range(n)) for i, n in
             enumerate(range(1, 140))]
    words += [" " + "中文字" * k for k in range(1, 50)]        # 3-byte letters, many ids
    words += [" " + "क्ष" * k for k in range(1, 20)]        # Devanagari with a virama
    docs = ["".join(words[i::7]) for i in range(7)] + list(corpora.multilingual_documents()[:40])
    assert_same(tok, hf_plain, docs + docs, threads=1)


@pytest.mark.parametrize("n", [20_000, 200_000])
def test_long_words(tok, hf_plain, n):
    assert_same(tok, hf_plain, [corpora.long_word(n), "x" * n, "-" * n, "中" * n, " " * n, "\n" * n, "1" * n,
                                "e" + "\u0301" * n])


ALPHABET = st.sampled_from(
    list("aZ'sStTlLeEvVmMdDrR 0123456789\t\n\r.,;-_()<>|/\\\"") +
    ["\x85", "\u2028", "\u2029", "\u00a0", "\u3000", "\u200b", "\u200d", "\ufeff", "\u017f", "\u212a",
     "\u0301", "\u0308", "\u093f", "\u094d", "é", "ß", "中", "文", "가", "\u1100", "\u1161", "\u11a8",
     "²", "½", "Ⅻ", "①", "😀", "\U0001f3fd", "<|im_end|>", "<think>", "\U000323b0"]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_hypothesis_structured(tok, hf_plain, text):
    assert tok.encode(text) == hf_plain.encode(text, add_special_tokens=False).ids


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_hypothesis_any_text(tok, hf_plain, text):
    assert tok.encode(text) == hf_plain.encode(text, add_special_tokens=False).ids


def test_long_words_with_runs(tok, hf_plain):
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
    assert_same(tok, hf_plain, texts)
