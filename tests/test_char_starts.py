"""Char starts (pyx/_char_starts.pyx): merging that starts from whole characters
must give Hugging Face's ids exactly.

Tokenizers here have no piece cache (cache_size=0), so every piece is merged.
The table and rules the native code builds are compared with an independent
computation from the tokenizer.json (tests/_char_starts_reference.py), and
every 2- and 3-byte character is encoded, against HF `tokenizers`, in plain
contexts and next to every fragment token that could cross its boundary.
"""

import random
import unicodedata
from functools import lru_cache

import pytest

import corpora
import qwen4exp
from _char_starts_reference import fragment_rules, start_chars, spellings
from _hf_reference import TOKENIZER_JSON, byte_decoder

BMP_CHARS = [chr(cp) for cp in range(0x80, 0x10000) if not 0xD800 <= cp <= 0xDFFF]


def _neighbour(cp: int) -> str:
    return "x" if not 0x80 <= cp < 0x10000 or 0xD800 <= cp <= 0xDFFF else chr(cp)


CONTEXTS = {
    "alone": lambda c: c,
    "after_space": lambda c: " " + c,
    "between_latin": lambda c: "a" + c + "b",
    "same_script": lambda c: _neighbour(ord(c) - 1) + c + _neighbour(ord(c) + 1),
    "tripled": lambda c: c * 3,
    "katakana_long_vowel": lambda c: "ー" + c + "ー",
    "hangul": lambda c: "한" + c + "국",
    "cyrillic_after_space": lambda c: " д" + c + "д",
}


# qwen3.6 (its own merges, marks in letter runs) with -m slow: ~9 s of the default run
@pytest.fixture(scope="module", params=["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)])
def vocabulary(request):
    """(vocabulary name, our tokenizer without a cache, HF reference, tokenizer.json path)."""
    if request.param == "qwen3":
        return "qwen3", qwen4exp.Tokenizer(cache_size=0), request.getfixturevalue("hf_plain"), TOKENIZER_JSON
    return ("qwen3.6", qwen4exp.Tokenizer("qwen3.6", cache_size=0), request.getfixturevalue("hf_plain36"),
            request.getfixturevalue("qwen36_json"))


def assert_same(tok, hf, texts):
    ours = tok.encode_batch(texts, num_threads=2)
    ref = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    bad = [(t, a, b) for t, a, b in zip(texts, ours, ref) if a != b]
    assert not bad, f"{len(bad)} of {len(texts)} differ, first {bad[0][0]!r}: ours {bad[0][1]} ref {bad[0][2]}"


def test_table_and_rules_match_reference(vocabulary):
    name, tok, _, path = vocabulary
    native = tok.core.native.char_starts()
    assert native is not None, f"char starts are off for {name}"
    expected = start_chars(path)
    assert len(expected) > 5000
    assert native["starts"] == expected
    assert (native["prefix"], native["suffix"]) == fragment_rules(path)


# The default run takes three contexts (alone, after Latin, between neighbours of
# its own script); the others are `slow`.
DEFAULT_CONTEXTS = ("alone", "between_latin", "same_script")


@pytest.mark.parametrize("context", [c if c in DEFAULT_CONTEXTS else pytest.param(c, marks=pytest.mark.slow)
                                     for c in sorted(CONTEXTS)])
def test_every_bmp_character(vocabulary, context):
    _, tok, hf, _ = vocabulary
    assert_same(tok, hf, [CONTEXTS[context](c) for c in BMP_CHARS])


@lru_cache(maxsize=None)
def _completions() -> tuple[dict[bytes, str], dict[bytes, str]]:
    """Letters that end with (resp. start with) each byte fragment that can
    end (start) a UTF-8 character, so that a rule's X or Y can be written as
    text; letters keep the pre-tokenizer from splitting the piece."""
    ends: dict[bytes, str] = {}
    starts: dict[bytes, str] = {}
    for c in BMP_CHARS:
        if not unicodedata.category(c).startswith("L"):
            continue
        b = c.encode()
        for k in range(1, len(b)):
            ends.setdefault(b[k:], c)
            starts.setdefault(b[:k], c)
    return ends, starts


def _as_text(frag: bytes, ends: dict[bytes, str], starts: dict[bytes, str]) -> str | None:
    """frag completed into whole characters at either end (None if it cannot be)."""
    head = len(frag) - len(frag.lstrip(bytes(range(0x80, 0xC0))))
    lead = ends.get(frag[:head], "") if head else ""
    body = frag[head:]
    for cut in range(len(body), max(len(body) - 3, 0) - 1, -1):
        try:
            text = body[:cut].decode()
        except UnicodeDecodeError:
            continue
        tail = body[cut:]
        if (head and not lead) or (tail and tail not in starts):
            return None
        return lead + text + (starts[tail] if tail else "")
    return None


def _neighbours(cp: int, path: str, completions) -> tuple[list[str], list[str]]:
    """Texts ending with each X that a token X+P (P a proper prefix of the
    character) needs before it, and starting with each Y that a token Q+Y
    (Q a proper suffix) needs after it."""
    prefix, suffix = fragment_rules(path)
    b = chr(cp).encode()
    lefts = [_as_text(x, *completions) for p in (b[:1], b[:2])[: len(b) - 1] for x in prefix.get(p, ())]
    rights = [_as_text(y, *completions) for q in (b[-1:], b[-2:])[: len(b) - 1] for y in suffix.get(q, ())]
    return [t for t in lefts if t], [t for t in rights if t]


def _starts_by_block(path: str) -> dict[int, list[str]]:
    """The start characters grouped by 128-code-point block."""
    by_block: dict[int, list[str]] = {}
    for cp in start_chars(path):
        by_block.setdefault(cp >> 7, []).append(chr(cp))
    return by_block


def test_next_to_fragment_tokens(vocabulary):
    """Every start character next to every fragment token's other part that could cross
    its boundary: X + c and c + Y."""
    _, tok, hf, path = vocabulary
    completions = _completions()
    texts = []
    for cp in start_chars(path):
        lefts, rights = _neighbours(cp, path, completions)
        texts += [x + chr(cp) for x in lefts] + [chr(cp) + y for y in rights]
    assert len(texts) > 10_000
    assert_same(tok, hf, texts)


def test_starts_shorten_pieces(vocabulary):
    """Pieces start as fewer symbols than bytes, each a whole character's
    token (as HF numbers it) or a byte, spelling the piece exactly."""
    _, tok, hf, path = vocabulary
    spell = spellings(path)
    enc = {b: ch for ch, b in byte_decoder().items()}
    piece = "中文字的".encode()
    start = tok.core.native.char_starts(piece)
    assert start == [hf.token_to_id("".join(enc[b] for b in c.encode())) for c in "中文字的"]
    assert len(start) == 4 < len(piece)
    dec = byte_decoder()
    total_bytes = total_symbols = 0
    for doc in corpora.multilingual_documents()[:80]:
        for mapped, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(doc)):
            b = bytes(dec[ch] for ch in mapped)
            start = tok.core.native.char_starts(b)
            assert b"".join(spell[i] for i in start) == b
            total_bytes += len(b)
            total_symbols += len(start)
    assert total_symbols < 0.8 * total_bytes


def test_between_fragment_tokens_and_in_runs(vocabulary):
    """Both neighbours at once (X + c + Y for every pair of c's rules), and
    runs of 2 to 6 start characters of one block, the shapes of real CJK and
    Cyrillic words: 60 a block, alone and after a space (every pair of a
    block's start characters under slow)."""
    _, tok, hf, path = vocabulary
    completions = _completions()
    texts = []
    for cp in start_chars(path):
        lefts, rights = _neighbours(cp, path, completions)
        texts += [x + chr(cp) + y for x in lefts for y in rights]
    rnd = random.Random(20261130)
    for chars in _starts_by_block(path).values():
        texts += ["".join(rnd.choice(chars) for _ in range(rnd.randint(2, 6))) for _ in range(60)]
        texts += [" " + "".join(rnd.choice(chars) for _ in range(rnd.randint(2, 6))) for _ in range(60)]
    assert_same(tok, hf, texts)


@pytest.mark.slow
def test_every_pair_of_start_characters_in_a_block(vocabulary):
    """Every ordered pair of start characters of one 128-code-point block, alone and
    after a space (about a million texts per context)."""
    _, tok, hf, path = vocabulary
    pairs = [a + b for chars in _starts_by_block(path).values() for a in chars for b in chars]
    for lo in range(0, len(pairs), 1 << 17):
        assert_same(tok, hf, pairs[lo : lo + (1 << 17)])
        assert_same(tok, hf, [" " + t for t in pairs[lo : lo + (1 << 17)]])
