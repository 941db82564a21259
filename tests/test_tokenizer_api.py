"""The Tokenizer's plain-text API: decode, atoms, loading, bad input."""

import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qwen4exp
from qwen4exp import Qwen4ExpError, TextEncodingError

from conftest import TOKENIZER_JSON


def test_version_and_public_names():
    """`__version__` is the distribution's (or the tree's pyproject) and dir() lists the API only."""
    import re
    from importlib import metadata

    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", qwen4exp.__version__)
    with open(os.path.join(os.path.dirname(TOKENIZER_JSON), os.pardir, "pyproject.toml"), encoding="utf-8") as f:
        pyproject = f.read()
    assert f'version = "{qwen4exp.__version__}"' in pyproject
    try:
        dist = metadata.distribution("qwen4exp")
    except metadata.PackageNotFoundError:
        dist = None
    here = os.path.realpath(qwen4exp.__file__)
    if dist is not None and os.path.realpath(dist.locate_file("qwen4exp/__init__.py")) == here:
        assert qwen4exp.__version__ == dist.version  # imported from the installed copy
    public = dir(qwen4exp)
    assert public == sorted([*qwen4exp.__all__, "__version__"])
    assert not [n for n in public if n.startswith("_") and n != "__version__"]
    assert "chat" not in public and "tokenizer" not in public  # submodules are not the API
    for name in qwen4exp.__all__:
        assert getattr(qwen4exp, name) is not None


def test_atoms_table_matches_tokenizer_json(tok, hf_full):
    ref = {t.content: i for i, t in hf_full.get_added_tokens_decoder().items()}
    assert dict(tok.atoms) == ref
    assert len(tok.atoms) == 26
    assert tok.atoms["<|endoftext|>"] == 151643 and tok.atoms["</think>"] == 151668
    with pytest.raises(TypeError):
        tok.atoms["x"] = 1  # read-only mapping


def test_decode_roundtrip_is_reference_nfc(tok, hf_nfc):
    for text in ["e\u0301 cafe\u0301", "Hello, world!", "\u1100\u1161\u11a8", "한국어 텍스트", "a\u0308\u0301",
                 "\U00011935\U00011930", "\u212b", "x" * 1000]:
        assert tok.decode(tok.encode(text)) == hf_nfc(text)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_decode_roundtrip_hypothesis(tok, hf_nfc, text):
    assert tok.decode(tok.encode(text)) == hf_nfc(text)


def test_decode_matches_hf_on_split_utf8(tok, hf_full):
    ids = tok.encode("€😀中é")
    for cut in range(len(ids) + 1):
        for part in (ids[:cut], ids[cut:], ids[::-1]):
            assert tok.decode(part) == hf_full.decode(part, skip_special_tokens=False)
    # single byte tokens of a 4-byte character, alone and shuffled
    for seq in ([tok.encode("😀")[0]], tok.encode("😀")[:1] * 3):
        assert tok.decode(seq) == hf_full.decode(seq, skip_special_tokens=False)


def test_decode_atoms_spell_themselves(tok, hf_full):
    ids = [151644] + tok.encode("user\nhi") + [151645]
    assert tok.decode(ids) == "<|im_start|>user\nhi<|im_end|>"
    assert tok.decode(ids) == hf_full.decode(ids, skip_special_tokens=False)
    assert tok.decode(np.array(ids, dtype=np.int64)) == tok.decode(ids)


@pytest.mark.parametrize("bad", [[-1], [151669], [2**31], [10, 2**40], [0, 151642, 999999]])
def test_decode_out_of_range(tok, bad):
    with pytest.raises(Qwen4ExpError, match="index"):
        tok.decode(bad)


def test_decode_rejects_non_ids(tok):
    with pytest.raises(TypeError):
        tok.decode("abc")
    with pytest.raises(TypeError):
        tok.decode([1.5])
    with pytest.raises(TypeError):
        tok.decode(np.zeros(3, dtype=np.float32))


@pytest.mark.parametrize("text", ["\ud800", "ok \udfff", "a\ud83d"])
def test_lone_surrogates(tok, text):
    with pytest.raises(TextEncodingError, match="surrogate"):
        tok.encode(text)
    with pytest.raises(TextEncodingError, match=r"texts\[1\]"):
        tok.encode_batch(["fine", text])


@pytest.mark.parametrize("value", [b"bytes", 12, None, ["x"]])
def test_non_str(tok, value):
    with pytest.raises(TypeError):
        tok.encode(value)


def test_encode_batch_matches_encode(tok):
    texts = ["alpha beta", "", "中文 text", "x" * 5000, "\n\n", "e\u0301"] * 20
    expect = [tok.encode(t) for t in texts]
    for threads in (1, 2, 3, 16):
        assert tok.encode_batch(texts, num_threads=threads) == expect
    assert tok.encode_batch([]) == []
    with pytest.raises(ValueError):
        tok.encode_batch(texts, num_threads=0)


COUNT_TEXTS = [
    "",
    "hello world",
    "中文" * 100,
    "it's <|im_end|> text <think>\n</think>",  # atom spellings are DATA: BPE counted
    "e\u0301 cafe\u0301 \u1100\u1161\u11a8 A\u030a",  # NFC changes the count
    "  \n\n\t x 12345 \u3000\u00a0",
    "x" * 5000,  # one long piece
]


def test_count_equals_hf(tok, hf_plain):
    """count() is len() of the reference's ids, on hand cases and real documents."""
    import corpora

    docs = [*COUNT_TEXTS, *corpora.multilingual_documents()[:40], *corpora.code_documents()[:10]]
    for t in docs:
        assert tok.count(t) == len(hf_plain.encode(t, add_special_tokens=False).ids), t[:80]


def test_from_file_and_directory(tmp_path, monkeypatch, tok):
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "model"
    d.mkdir()
    shutil.copy(TOKENIZER_JSON, d / "tokenizer.json")
    text = "from_file works: 中文 ünïcode 12345"
    a = qwen4exp.Tokenizer.from_file(d)
    assert a.encode(text) == tok.encode(text)
    assert len(os.listdir(tmp_path / "cache")) == 1
    b = qwen4exp.Tokenizer.from_file(d / "tokenizer.json")  # from the checksum-keyed cache
    assert b.encode(text) == tok.encode(text)
    assert dict(b.atoms) == dict(tok.atoms)


def test_from_file_other_pipelines(tmp_path):
    """Another split pattern runs through the generic pre-tokenizer (ids as HF's,
    tests/test_other_vocabularies.py); another model type is refused by name."""
    import json

    from tokenizers import Tokenizer as HFTokenizer

    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        raw = json.load(f)
    raw["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\w+"
    raw["added_tokens"] = []
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(raw))
    text = "other pattern: x_1 + y2 = 中文 ?"
    assert qwen4exp.Tokenizer.from_file(p).encode(text) == HFTokenizer.from_file(str(p)).encode(text).ids
    raw["model"]["type"] = "WordPiece"
    p.write_text(json.dumps(raw))
    with pytest.raises(Qwen4ExpError, match="WordPiece"):
        qwen4exp.Tokenizer.from_file(p)
    with pytest.raises(FileNotFoundError):
        qwen4exp.Tokenizer.from_file(tmp_path / "missing")


def test_cache_off_and_flush_give_same_ids():
    text = "the cache must never change results: the the the 中文中文"
    a = qwen4exp.Tokenizer(cache_size=0)
    b = qwen4exp.Tokenizer(cache_size=4)
    ref = a.encode(text)
    assert b.encode(text) == ref
    b.flush_cache()
    assert b.encode(text) == ref


def test_byte_level_alphabet_matches_the_reference():
    """The vocabulary compiler's ByteLevel table equals the test side's restatement of
    GPT-2's rule (tests/_hf_reference.py), which the decode oracle uses."""
    import _hf_reference
    from qwen4exp.vocab.compile import byte_level_alphabet

    assert byte_level_alphabet() == _hf_reference.byte_decoder()


def test_one_return_type_per_family(tok, hf_plain):
    """docs/FORMAT.md, section 7: plain text gives lists of Python ints, streams and
    chats give 1-D int32 arrays; decode takes either."""
    text = "it's <|im_end|> 中文"
    ids = tok.encode(text)
    assert type(ids) is list and all(type(i) is int for i in ids)
    assert ids == hf_plain.encode(text, add_special_tokens=False).ids
    batch = tok.encode_batch([text, ""], num_threads=2)
    assert type(batch) is list and batch == [ids, []]
    chat = qwen4exp.SegmentBuilder().text(text).build()
    arrays = [tok.encode_chat(chat), tok.encode_segments(chat.data, chat.segments),
              *tok.encode_chats([chat, chat], num_threads=2)]
    buf = qwen4exp.TokenBuffer()
    tok.encode_segments_into(chat.data, chat.segments, buf)
    arrays.append(buf.array)
    for arr in arrays:
        assert isinstance(arr, np.ndarray) and arr.dtype == np.int32 and arr.ndim == 1
        assert arr.tolist() == ids
    assert not buf.array.flags.writeable
    assert tok.decode(ids) == tok.decode(arrays[0]) == text


def test_version_reads_the_metadata_beside_the_package(tmp_path):
    """An installed copy reports its own dist-info's version even when another
    `qwen4exp` metadata folder comes first on sys.path (a source tree's
    src/qwen4exp.egg-info once a script put src/ first: the fresh-clone CI
    failure); a source tree with only egg-info reads its pyproject."""
    import subprocess
    import sys

    site = tmp_path / "site"
    (site / "qwen4exp").mkdir(parents=True)
    (site / "qwen4exp" / "vocab").mkdir(parents=True)
    (site / "qwen4exp" / "__init__.py").write_text("")
    (site / "qwen4exp" / "vocab" / "__init__.py").write_text("")
    with open(os.path.join(os.path.dirname(qwen4exp.__file__), "vocab", "_version.py"), encoding="utf-8") as f:
        (site / "qwen4exp" / "vocab" / "_version.py").write_text(f.read())
    info = site / "qwen4exp-7.7.7.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: qwen4exp\nVersion: 7.7.7\n")
    (info / "RECORD").write_text("qwen4exp/__init__.py,,\nqwen4exp/vocab/_version.py,,\n")
    decoy = tmp_path / "tree" / "src"
    (decoy / "qwen4exp.egg-info").mkdir(parents=True)
    (decoy / "qwen4exp.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: qwen4exp\nVersion: 9.9.9\n")
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; "
            "from qwen4exp.vocab._version import package_version; print(package_version())")
    run = subprocess.run([sys.executable, "-I", "-c", code, str(decoy), str(site)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["7.7.7"]
    # the same package as a source tree: egg-info beside it is not an install
    (info / "RECORD").unlink()
    (info / "METADATA").unlink()
    info.rmdir()
    (site / "qwen4exp.egg-info").mkdir()
    (site / "qwen4exp.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: qwen4exp\nVersion: 9.9.9\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "qwen4exp"\nversion = "1.2.3"\n')
    run = subprocess.run([sys.executable, "-I", "-c", code, str(decoy), str(site)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1.2.3"]
