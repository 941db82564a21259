"""Other byte-level BPE vocabularies: `Tokenizer.from_file` on GPT-2, Llama 3,
StarCoder, Refact, Falcon, DeepSeek LLM and Coder, MPT and Command-R files
(tests/data/vocabs, converted from llama.cpp's vocabulary GGUFs, see NOTICE
there) against Hugging Face `tokenizers` 0.22.1 on the same file with its
added tokens removed (the DATA reference, as for Qwen: _hf_reference.hf_plain).

The generic pre-tokenizer runs the files' regexes with the `regex` package,
whose Unicode (17) is newer than tokenizers' Oniguruma (16): code points
assigned after CPython's unicodedata (Unicode 14 on 3.11), which include
Unicode 17's, are left out of the code point sweeps (qwen4exp.vocab.pipeline,
"Known gaps").
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import unicodedata
from itertools import accumulate

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwen4exp
from qwen4exp import Kind, Segment, VocabularyError
from _hf_reference import hf_plain

HERE = os.path.dirname(os.path.abspath(__file__))
VOCABS = os.path.join(HERE, "data", "vocabs")
NAMES = ["gpt-2", "llama-bpe", "starcoder", "refact", "falcon", "deepseek-llm", "deepseek-coder", "mpt",
         "command-r"]
# the small ones run in the default run; the others are slow to compile (a few seconds each)
FAST = ["gpt-2", "deepseek-coder", "falcon", "starcoder"]
_ASSIGNED = regex.compile(r"\P{Cn}")

TEXTS = [
    "", " ", "  ", "\n", "\n\n\n", "\t\t x", "a   b", "hello world", "Hello World!", "it's I'M we'LL they'RE",
    "1 12 123 1234 12345 123456", "3.14159 -42 1e10 0x1F", "٣٤٥ ١٢ ²½Ⅻ①", "ǅungla ǈ ﬁ ﬆ ß ẞ İ ı Σ σ ς",
    "    def f(x):\n        return x ** 2  # comment\n\n", "if (a<b && c>=d) { x += 1; }\r\n",
    "中文字符串测试，标点。日本語のテキスト、カタカナ。한국어 텍스트입니다.",
    "العربية עברית हिन्दी नमस्ते ไทย ภาษา", "e\u0301t\u00e9 n\u0303 \u212b \u2126 \u1e9b\u0323",
    "emoji 👍🏽 👨‍👩‍👧 🇫🇷 ✌️", "zero\u200bwidth\u200d\ufeffbom", "\x00\x01\x03\x1b[31m\x7f", "a\x85b\u2028c\u2029d",
    "<|endoftext|> <fim_prefix> >>TITLE<< <|begin_of_text|>", "'''\"\"\"```", "!!!??? ... ---- ____ ====",
    "   leading and trailing   ", "x" * 300, "ab" * 200 + " " + "123" * 100, "\u00a0\u3000\u2003 spaces",
    "MixedCASE camelCase snake_case kebab-case SCREAMING", "$100 + 20% = ~€120 <tag attr=\"v\">",
]


def _json(name: str) -> str:
    with gzip.open(os.path.join(VOCABS, name, "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="session")
def vocab_files(tmp_path_factory):
    """Each vocabulary's tokenizer.json unpacked once (a path per name)."""
    root = tmp_path_factory.mktemp("vocabs")
    paths = {}
    for name in NAMES:
        path = root / name / "tokenizer.json"
        path.parent.mkdir()
        path.write_text(_json(name), encoding="utf-8")
        paths[name] = str(path)
    return paths


_LOADED: dict = {}


def load(vocab_files, name):
    if name not in _LOADED:
        _LOADED[name] = (qwen4exp.Tokenizer.from_file(vocab_files[name]), hf_plain(vocab_files[name]))
    return _LOADED[name]


def assert_same(tok, hf, texts):
    ours = tok.encode_batch(texts)
    ref = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    bad = [(t, a, b) for t, a, b in zip(texts, ours, ref) if a != b]
    assert not bad, f"{len(bad)} mismatches, first: {bad[0][0]!r:.200}: ours {bad[0][1][:20]} ref {bad[0][2][:20]}"


def llama_cpp_texts(name):
    with open(os.path.join(VOCABS, name, "llama-cpp.inp"), encoding="utf-8") as f:
        return f.read().split("\n__ggml_vocab_test__\n")


def scalar_sample(step):
    return [chr(cp) for cp in range(0, 0x110000, step)
            if not 0xD800 <= cp < 0xE000 and not _newer_than_unicodedata(chr(cp))]


def _newer_than_unicodedata(c: str) -> bool:
    return bool(_ASSIGNED.match(c)) and unicodedata.category(c) == "Cn"


@pytest.mark.parametrize("name", FAST)
def test_texts_match_hf(vocab_files, name):
    tok, hf = load(vocab_files, name)
    assert_same(tok, hf, TEXTS + llama_cpp_texts(name))
    assert [tok.encode(t) for t in TEXTS[:8]] == [hf.encode(t, add_special_tokens=False).ids for t in TEXTS[:8]]
    assert [tok.count(t) for t in TEXTS[:8]] == [len(hf.encode(t, add_special_tokens=False).ids) for t in TEXTS[:8]]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(NAMES) - set(FAST)))
def test_texts_match_hf_large_vocabularies(vocab_files, name):
    tok, hf = load(vocab_files, name)
    assert_same(tok, hf, TEXTS + llama_cpp_texts(name))


@pytest.mark.parametrize("name", ["gpt-2", "falcon"])
def test_sampled_code_points_in_contexts(vocab_files, name):
    tok, hf = load(vocab_files, name)
    chars = scalar_sample(251)
    for context in ("{c}", "a{c}", " {c}", "1{c}2", "'{c}b", "\n{c}", "{c}{c} x"):
        assert_same(tok, hf, [context.format(c=c) for c in chars])


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_code_point(vocab_files, name):
    tok, hf = load(vocab_files, name)
    chars = scalar_sample(1)
    for context in ("{c}", "a{c}", " {c}", "1{c}2"):
        for lo in range(0, len(chars), 1 << 16):
            assert_same(tok, hf, [context.format(c=c) for c in chars[lo:lo + (1 << 16)]])


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_corpora(vocab_files, name):
    import corpora

    tok, hf = load(vocab_files, name)
    docs = list(corpora.multilingual_documents())[:300] + list(corpora.code_documents())[:100]
    assert_same(tok, hf, docs)


ALPHABET = "aZ '\n\r\t 1234567890 .,;:!?-_()[]{}<>\"/\\|ſKéß中文한ा्\u0301\u00a0\u2028\u0085😀"


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_hypothesis_texts(vocab_files, text):
    for name in ("gpt-2", "deepseek-coder", "falcon"):
        tok, hf = load(vocab_files, name)
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids, (name, text)


# -- DATA and TRUSTED_CONTROL --------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt-2", "starcoder", "falcon"])
def test_data_never_yields_an_added_token(vocab_files, name):
    tok, hf = load(vocab_files, name)
    atoms = dict(tok.atoms)
    assert atoms, "these files have added tokens"
    spelled = "".join(f" {a}x{a}" for a in list(atoms)[:40])
    data = spelled.encode("utf-8")
    ids = tok.encode_segments(data, [Segment(0, len(data), Kind.DATA)])
    assert not set(ids.tolist()) & set(atoms.values())
    assert ids.tolist() == hf.encode(spelled, add_special_tokens=False).ids
    # the same spellings as TRUSTED_CONTROL are the atoms, between DATA segments
    first, second = (list(atoms) * 2)[:2]
    data = f"ab {first}{second} cd".encode("utf-8")
    cut = [3, 3 + len(first.encode()) + len(second.encode())]
    got = tok.encode_segments(data, [Segment(0, cut[0], Kind.DATA), Segment(cut[0], cut[1], Kind.TRUSTED_CONTROL),
                                     Segment(cut[1], len(data), Kind.DATA)])
    want = (hf.encode("ab ", add_special_tokens=False).ids + [atoms[first], atoms[second]]
            + hf.encode(" cd", add_special_tokens=False).ids)
    assert got.tolist() == want


def test_unknown_control_is_refused(vocab_files):
    tok, _ = load(vocab_files, "gpt-2")
    data = b"x<|im_start|>"
    with pytest.raises(qwen4exp.Qwen4ExpError):
        tok.encode_segments(data, [Segment(0, 1, Kind.DATA), Segment(1, len(data), Kind.TRUSTED_CONTROL)])


def test_decode_round_trip_and_pickle(vocab_files):
    import pickle

    tok, hf = load(vocab_files, "deepseek-coder")
    text = TEXTS[16] + TEXTS[14]
    ids = tok.encode(text)
    assert tok.decode(ids) == hf.decode(ids) == text
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode(text) == ids


# -- pipelines on a small vocabulary ------------------------------------------------------------


@pytest.fixture(scope="module")
def small_gpt2():
    """GPT-2's first 3,000 tokens and the merges among them: any pipeline compiles fast."""
    doc = json.loads(_json("gpt-2"))
    keep = 3000
    vocab = {t: i for t, i in doc["model"]["vocab"].items() if i < keep}
    merges = [m for m in doc["model"]["merges"]
              if all(p in vocab for p in m.split(" ", 1)) and m.replace(" ", "", 1) in vocab]
    doc["model"]["vocab"], doc["model"]["merges"] = vocab, merges
    doc["added_tokens"] = [{"id": keep, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}]
    return doc


def _split(rx, behavior="Isolated", invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: rx}, "behavior": behavior, "invert": invert}


def _bl(prefix=False, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": use_regex}


def _seq(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}


PIPELINES = {
    **{f"split_{b}_{inv}": (None, _seq(_split(r"\s+|[.,!?]", b, inv), _bl(use_regex=False)))
       for b in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
       for inv in (False, True)},
    "string_pattern": (None, _seq(_split("ab", "MergedWithNext", kind="String"), _bl())),
    "prefix_space": (None, _bl(prefix=True)),
    "prefix_space_after_split": (None, _seq(_split(r",", "Isolated"), _bl(prefix=True, use_regex=False))),
    "digits": (None, _seq({"type": "Digits", "individual_digits": False}, _bl())),
    "punctuation": (None, _seq({"type": "Punctuation", "behavior": "Contiguous"}, _bl())),
    "nfkc_lowercase": ({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}, _bl()),
    "nfc_llama3": ({"type": "NFC"}, _seq(_split(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                                                r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                                         _bl(use_regex=False))),
    "anchors": (None, _seq(_split(r"\s+$|^\s+|a.b|\d\Z"), _bl(use_regex=False))),
    "empty_matches": (None, _seq(_split(r"a*", "MergedWithNext"), _bl(use_regex=False))),
}


@pytest.mark.parametrize("what", sorted(PIPELINES))
def test_pipelines(small_gpt2, tmp_path, what):
    from tokenizers import Tokenizer as HFTokenizer

    doc = copy.deepcopy(small_gpt2)
    doc["normalizer"], doc["pre_tokenizer"] = PIPELINES[what]
    doc["added_tokens"] = []
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok = qwen4exp.Tokenizer.from_file(path)
    hf = HFTokenizer.from_file(str(path))
    rng = random.Random(what)
    texts = TEXTS + ["".join(rng.choice(ALPHABET + "aaab..., ") for _ in range(rng.randrange(30)))
                     for _ in range(200)]
    assert_same(tok, hf, texts)


def test_ignore_merges_with_a_generic_pipeline(small_gpt2, tmp_path):
    from tokenizers import Tokenizer as HFTokenizer

    doc = copy.deepcopy(small_gpt2)
    doc["model"]["ignore_merges"] = True
    doc["added_tokens"] = []
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert_same(qwen4exp.Tokenizer.from_file(path), HFTokenizer.from_file(str(path)), TEXTS)


# -- what is refused ---------------------------------------------------------------------------


def _write(tmp_path, tok) -> str:
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return str(path)


@pytest.mark.parametrize("model", ["Unigram", "WordPiece", "WordLevel", "byte_fallback"])
def test_other_models_are_refused_by_name(tmp_path, model):
    from tokenizers import Tokenizer as HFTokenizer, models

    if model == "Unigram":
        tok = HFTokenizer(models.Unigram([("<unk>", 0.0), ("a", -1.0), ("b", -2.0)], 0, False))
    elif model == "WordPiece":
        tok = HFTokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    elif model == "WordLevel":
        tok = HFTokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    else:
        tok = HFTokenizer(models.BPE({"<unk>": 0, "a": 1, "b": 2, "ab": 3}, [("a", "b")], byte_fallback=True))
    match = {"Unigram": "Unigram", "WordPiece": "WordPiece", "WordLevel": "word-level",
             "byte_fallback": "byte_fallback"}[model]
    with pytest.raises(VocabularyError, match=match):
        qwen4exp.Tokenizer.from_file(_write(tmp_path, tok))


@pytest.mark.parametrize("pre, match", [
    ({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}, "ByteLevel"),
    (_seq({"type": "Whitespace"}, _bl()), "Whitespace"),
    (_seq(_split("(?~abc)"), _bl()), "absent"),
    (None, "ByteLevel"),
    (_seq(_bl(), _bl()), "exactly one ByteLevel"),
])
def test_unsupported_pre_tokenizers_are_named(small_gpt2, tmp_path, pre, match):
    doc = copy.deepcopy(small_gpt2)
    doc["pre_tokenizer"] = pre
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(VocabularyError, match=match):
        qwen4exp.Tokenizer.from_file(path)


def test_unsupported_normalizer_is_named(small_gpt2, tmp_path):
    doc = copy.deepcopy(small_gpt2)
    doc["normalizer"] = {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(VocabularyError, match="Replace"):
        qwen4exp.Tokenizer.from_file(path)


# -- Llama 3 on the native scanner ------------------------------------------------------------


DIGIT_TEXTS = [
    "1", "12", "123", "1234", "12345", "1234567", "a1234b", " 1234 ", "x" * 60 + "1234567890" * 3,
    "1" * 200, " " * 61 + "12345678", "٣٤٥٦٧ ²½Ⅻ①⑴", "12٣4５6", "3.14159265358979", "2024-12-04T16:30:00Z",
    "a" * 63 + "9999", "'1234'", "\n123\n4567\r\n", "€1234567€", "1 22 333 4444 55555 666666 7777777",
]


def test_llama3_scanner_matches_hf_split():
    from tokenizers import Regex, pre_tokenizers

    from qwen4exp._native._pretokenize import split
    from qwen4exp.vocab.compile import LLAMA3_PATTERN

    hf = pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated")
    rng = random.Random(3)
    texts = DIGIT_TEXTS + TEXTS + ["".join(rng.choice("0123456789 a.,\n٣²") for _ in range(rng.randrange(200)))
                                   for _ in range(300)]
    for text in texts:
        want = [p for p, _ in hf.pre_tokenize_str(text)]
        for cap in (1, 7, 64):
            assert split(text, cap=cap, digit_runs=True) == want, (text, cap)


def test_llama3_runs_natively(vocab_files):
    from qwen4exp.encode.generic import GenericNative

    tok, hf = load(vocab_files, "llama-bpe")
    assert not isinstance(tok.core.native, GenericNative)  # the native scanner, no Python pre-tokenizer
    assert_same(tok, hf, DIGIT_TEXTS + TEXTS + llama_cpp_texts("llama-bpe"))
    long = " ".join(DIGIT_TEXTS) * 50  # long enough to be cut into parts across threads
    assert tok.encode(long) == hf.encode(long, add_special_tokens=False).ids


@pytest.mark.parametrize("normalizer", [None, {"type": "NFC"}])
def test_byte_level_pattern_runs_natively(vocab_files, tmp_path, normalizer):
    """ByteLevel's own split alone (GPT-2's file, and with an NFC normalizer) runs
    on the native scanner: documents, one batch, a text cut into parts across
    threads, against HF. (MPT's file has the same steps but tokens no byte-level
    text spells: the generic pipeline, with the same split, drops them.)"""
    import corpora
    from qwen4exp.encode.generic import GenericNative

    doc = json.loads(_json("gpt-2"))
    doc["normalizer"] = normalizer
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok, hf = qwen4exp.Tokenizer.from_file(path), hf_plain(str(path))
    assert not isinstance(tok.core.native, GenericNative)
    docs = list(corpora.code_documents())[:20] + list(corpora.multilingual_documents())[:60]
    assert_same(tok, hf, TEXTS + docs + ["cafe\u0301 e\u0301\u0327 \u212b"])  # not NFC
    assert tok.encode_batch(docs, num_threads=2) == [hf.encode(d, add_special_tokens=False).ids for d in docs]
    long = "\n".join(docs)  # long enough to be cut into parts across threads
    assert tok.encode(long) == hf.encode(long, add_special_tokens=False).ids


def test_byte_level_part_cuts_are_piece_boundaries(vocab_files):
    """Where encode() cuts a text across threads under GPT-2's pattern, HF's
    ByteLevel split has a piece boundary: a text whose only candidates were
    letters after a blank line ("\n\n" + letter: one piece "\n\n" at a part's
    end, "\n" + "\n" before the letter), and the multilingual documents."""
    import corpora
    from tokenizers import pre_tokenizers

    tok, hf = load(vocab_files, "gpt-2")
    ref = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    texts = ["\U0001f600\n\nB1" * 1000, "x \n\n\u00e9t\u00e9 2" * 800] + list(corpora.multilingual_documents())[:200]
    for text in texts:
        data = text.encode("utf-8")
        ends = set(accumulate(len(p) for p, _ in ref.pre_tokenize_str(text)))  # one stand-in per byte
        for count in (2, 3, 8):
            cuts = tok.core.native.part_bounds(data, count)[1:-1]
            assert all(c in ends for c in cuts), (text[:40], count)
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids


# -- chats, batches of streams and Arrow on a generic pipeline --------------------------------


@pytest.fixture(scope="module", params=["falcon", "gpt-2"])
def chat_vocab(request, small_gpt2, tmp_path_factory):
    """The small GPT-2 vocabulary under Falcon's pipeline (generic: Punctuation, ByteLevel,
    Digits, Split) or its own (ByteLevel alone: the native scanner), with the Qwen3 atoms
    as its added tokens."""
    doc = copy.deepcopy(small_gpt2)
    if request.param == "falcon":
        doc["pre_tokenizer"] = json.loads(_json("falcon"))["pre_tokenizer"]
    qwen = qwen4exp.Tokenizer()
    doc["added_tokens"] = [{"id": 3000 + i, "content": a, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, a in enumerate(qwen.atoms)]
    path = tmp_path_factory.mktemp("chat_vocab") / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok = qwen4exp.Tokenizer.from_file(path)
    assert tok.core.generic == (request.param == "falcon")
    return tok, hf_plain(str(path))


def test_chats_on_a_generic_pipeline(chat_vocab):
    from qwen4exp.encode.generic import GenericNative

    tok, hf = chat_vocab
    assert isinstance(tok.core.native, GenericNative) == tok.core.generic  # Falcon's; GPT-2's own runs natively
    chats = [tok.render_chat([{"role": "system", "content": "Be brief: 1234 + 5678?"},
                              {"role": "user", "content": f"Hi #{i}! <|im_end|> isn't special here, 12,345.6"}])
             for i in range(3)]
    for chat in chats:
        want = []
        for seg in chat.segments:
            text = chat.data[seg.start:seg.end].decode("utf-8")
            want += (hf.encode(text, add_special_tokens=False).ids if seg.kind == Kind.DATA
                     else [tok.atoms[text]] if text in tok.atoms else None)
        assert tok.encode_chat(chat).tolist() == want
        masked = tok.encode_chat(chat, return_masks=True)
        assert masked.ids.tolist() == want and len(masked.control_mask) == len(want)
        assert tok.count_chat(chat) == len(want)
    batch = tok.encode_chats(chats, num_threads=2)
    assert [b.tolist() for b in batch] == [tok.encode_chat(c).tolist() for c in chats]
    masked = tok.encode_chats(chats, return_masks=True)
    assert [m.ids.tolist() for m in masked] == [b.tolist() for b in batch]


def test_arrow_on_a_generic_pipeline(chat_vocab):
    import pyarrow as pa

    tok, hf = chat_vocab
    rows = ["a 1234 b", None, "x, y! 99", ""]
    got = tok.encode_arrow(pa.array(rows, type=pa.string())).to_pylist()
    assert got == [None if r is None else hf.encode(r, add_special_tokens=False).ids for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("step", [{"type": "Punctuation", "behavior": "Isolated"},
                                  {"type": "Digits", "individual_digits": True}])
def test_character_classes_over_every_code_point(step):
    """Punctuation's and Digits' classes against tokenizers' over every code point
    (Punctuation's tables are older than any Unicode at hand: qwen4exp.vocab.pipeline)."""
    from tokenizers import pre_tokenizers

    from qwen4exp.vocab.pipeline import Pipeline

    spec = {"type": "Sequence", "pretokenizers": [step, _bl(use_regex=False)]}
    ref = pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation("isolated") if step["type"] == "Punctuation" else pre_tokenizers.Digits(True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    text = "x".join(scalar_sample(1))
    want = [p for p, _ in ref.pre_tokenize_str(text)]
    assert Pipeline({"normalizer": None, "pre_tokenizer": spec}).pieces(text) == want


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["NFKC", "Lowercase", "NFC"])
def test_normalizers_over_every_code_point(kind):
    """NFKC and Lowercase (CPython's tables, corrected to tokenizers' where they
    differ: qwen4exp.vocab.pipeline) and NFC against tokenizers' on every code point."""
    from tokenizers import normalizers

    from qwen4exp.vocab.pipeline import Pipeline

    ref = getattr(normalizers, kind)()
    ours = Pipeline({"normalizer": {"type": kind}, "pre_tokenizer": _bl(use_regex=False)}).normalize
    chars = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    assert [c for c in chars if ours(c) != ref.normalize_str(c)] == []


# -- ByteLevel's own split, natively (pyx/_byte_level.pyx) -------------------------------

# Every scalar value between two of each joiner: after and before a letter, a
# digit, a space, two spaces, an apostrophe (contractions), a newline, CR LF.
BYTE_LEVEL_JOINERS = ("x", "1", " ", "  ", "'", "\n", "\r\n ", "'s ")


def _byte_level_pieces_match_hf(step: int) -> None:
    from tokenizers import pre_tokenizers

    from qwen4exp._native._byte_level import byte_level_ends
    from qwen4exp.vocab.pipeline import Pipeline

    ref = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    ours = Pipeline({"normalizer": None, "pre_tokenizer": _bl(use_regex=True)})
    assert ours.byte_level_only
    chars = scalar_sample(step)
    for joiner in BYTE_LEVEL_JOINERS:
        text = joiner.join(chars) + joiner
        want = [p for p, _ in ref.pre_tokenize_str(text)]
        assert ours.pieces(text) == want, joiner  # the pipeline's ByteLevel step
        data, ends = byte_level_ends(text)  # the fast path's (split_array)
        assert data == text.encode("utf-8")
        assert ends.tolist() == list(accumulate(len(p) for p in want)), joiner  # one stand-in per byte


def test_byte_level_split_matches_hf_on_sampled_code_points():
    _byte_level_pieces_match_hf(61)


@pytest.mark.slow
def test_byte_level_split_matches_hf_on_every_code_point():
    _byte_level_pieces_match_hf(1)
