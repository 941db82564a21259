"""Char atoms (pyx/_char_atoms.pyx): merging that starts from whole characters
must give Hugging Face's ids exactly.

Tokenizers here have no piece cache (cache_size=0), so every piece is merged.
The table and rules the native code builds are compared with an independent
computation from the tokenizer.json (tests/_char_atoms_reference.py), and
every 2- and 3-byte character is encoded, against HF `tokenizers`, in plain
contexts and next to every fragment token that could cross its boundary.
"""

import unicodedata

import pytest

import corpora
import qwen4exp
from _char_atoms_reference import atoms, fragment_rules, spellings
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


@pytest.fixture(scope="module", params=["qwen3", "qwen3.6"])
def vocab(request):
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


def test_table_and_rules_match_reference(vocab):
    name, tok, _, path = vocab
    native = tok._native.char_atoms()
    assert native is not None, f"char atoms are off for {name}"
    expected = atoms(path)
    assert len(expected) > 5000
    assert native["atoms"] == expected
    assert (native["prefix"], native["suffix"]) == fragment_rules(path)


@pytest.mark.parametrize("context", sorted(CONTEXTS))
def test_every_bmp_character(vocab, context):
    _, tok, hf, _ = vocab
    assert_same(tok, hf, [CONTEXTS[context](c) for c in BMP_CHARS])


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


def _fragment_texts(path: str) -> list[str]:
    """Every atom next to every fragment token's other part that could cross
    its boundary: X + c for the rules of c's prefixes, c + Y for its suffixes."""
    prefix, suffix = fragment_rules(path)
    ends, starts = _completions()
    texts = []
    for cp in atoms(path):
        b = chr(cp).encode()
        for p in (b[:1], b[:2])[: len(b) - 1]:
            texts += [t + chr(cp) for t in (_as_text(x, ends, starts) for x in prefix.get(p, ())) if t]
        for q in (b[-1:], b[-2:])[: len(b) - 1]:
            texts += [chr(cp) + t for t in (_as_text(y, ends, starts) for y in suffix.get(q, ())) if t]
    return texts


def test_next_to_fragment_tokens(vocab):
    _, tok, hf, path = vocab
    texts = _fragment_texts(path)
    assert len(texts) > 10_000
    assert_same(tok, hf, texts)


def test_atoms_shorten_pieces(vocab):
    """Pieces start as fewer symbols than bytes, each a whole character's
    token (as HF numbers it) or a byte, spelling the piece exactly."""
    _, tok, hf, path = vocab
    spell = spellings(path)
    enc = {b: ch for ch, b in byte_decoder().items()}
    piece = "中文字的".encode()
    start = tok._native.char_atoms(piece)
    assert start == [hf.token_to_id("".join(enc[b] for b in c.encode())) for c in "中文字的"]
    assert len(start) == 4 < len(piece)
    dec = byte_decoder()
    total_bytes = total_symbols = 0
    for doc in corpora.multilingual_documents()[:200]:
        for mapped, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(doc)):
            b = bytes(dec[ch] for ch in mapped)
            start = tok._native.char_atoms(b)
            assert b"".join(spell[i] for i in start) == b
            total_bytes += len(b)
            total_symbols += len(start)
    assert total_symbols < 0.8 * total_bytes
