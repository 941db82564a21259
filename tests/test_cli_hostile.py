"""Hostile JSON in every command that reads JSON, corrupt inputs of every
format and compression, and tokenizer files tampered in each field.

Every case must end in one `qwen4exp CMD: error: ...` line with the documented
exit code (3: input error; 2: a bad --tokenizer; batch --on-error skip: 1 with
the record in the errors file), never a traceback, and leave no output and no
temporary file behind. The commands run in-process through `cli.main` (the
subprocess runs in test_cli.py cover the process-level behaviour).
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _small_vocab import SMALL_N, small_tokenizer_json
from qwen4exp.cli.main import main

# Each is spliced where a JSON value goes; all are refused by the strict decoder.
HOSTILE = {
    "huge_int": "9" * 5000,
    "huge_negative_int": "-" + "7" * 4301,
    "huge_float": "1e999",
    "nan": "NaN",
    "infinity": "Infinity",
    "minus_infinity": "-Infinity",
    "deep_list": "[" * 100_000 + "]" * 100_000,
    "deep_object": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "duplicate_keys": '{"role": "user", "role": "system"}',
    "truncated": '{"a": [1, 2',
    "trailing_garbage": "1 2",
    "bad_escape": '"\\x41"',
}


def _request(value: str) -> str:
    """A chat request with `value` in a nested position."""
    return '{"messages": [{"role": "user", "content": "hi", "meta": %s}]}' % value


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("command", [["render"], ["encode", "--chat"], ["count", "--chat"]])
def test_hostile_json_chat_requests(tmp_path, capsys, command, name):
    path = tmp_path / "request.json"
    path.write_text(_request(HOSTILE[name]))
    code, err = _run(capsys, *command, path)
    assert code == 3, err
    assert f"qwen4exp {command[0]}: error: {path}: invalid JSON" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_json_decode_file(tmp_path, capsys, name):
    path = tmp_path / "ids.json"
    path.write_text("[1, 2, %s]" % HOSTILE[name])
    code, err = _run(capsys, "decode", "--file", path)
    assert code == 3, err
    assert "invalid JSON list of ids" in err or "expected a JSON list of integers" in err


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_hostile_json_batch_records_are_skipped(tmp_path, capsys, name, fmt):
    """A hostile record is one skipped record (JSONDecodeError), not the end of the run."""
    good = '{"messages": [{"role": "user", "content": "hi"}]}'
    rows = [good, _request(HOSTILE[name]), good]
    if fmt == "jsonl":
        src = tmp_path / "in.jsonl"
        src.write_text("\n".join(rows) + "\n")
    else:  # a Parquet column of JSON text
        src = tmp_path / "in.parquet"
        pq.write_table(pa.table({"messages": rows}), src)
    out = tmp_path / "out.jsonl"
    code, err = _run(capsys, "batch", src, out, "--on-error", "skip")
    assert code == 1, err
    assert [json.loads(x)["index"] for x in out.read_text().splitlines()] == [0, 2]
    (failure,) = [json.loads(x) for x in open(f"{out}.errors.jsonl")]
    assert failure["index"] == 1 and failure["error"] == "JSONDecodeError"
    code, err = _run(capsys, "batch", src, tmp_path / "stop.jsonl")
    assert code == 3 and "JSONDecodeError" in err
    assert not (tmp_path / "stop.jsonl").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


# ---------------------------------------------------------------- corrupt inputs


def _jsonl_bytes(n=400):
    return b"".join(b'{"text": "hello world %d"}\n' % i for i in range(n))


def _flip(data: bytes, at: int) -> bytes:
    b = bytearray(data)
    b[at] ^= 0xA5
    return bytes(b)


def _corrupt_gzips():
    good = gzip.compress(_jsonl_bytes())
    return {
        "gz_bad_magic": _flip(good, 0),
        "gz_bad_method": _flip(good, 2),
        "gz_body_flip": _flip(good, len(good) // 2),
        "gz_crc_flip": _flip(good, len(good) - 6),
        "gz_size_flip": _flip(good, len(good) - 2),
        "gz_truncated": good[: len(good) // 2],
        "gz_header_only": good[:10],
        "gz_garbage_after": good + b"garbage",
    }


@pytest.mark.parametrize("name", sorted(_corrupt_gzips()))
def test_corrupt_gzip_input(tmp_path, capsys, name):
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(_corrupt_gzips()[name])
    out = tmp_path / "out.parquet"
    code, err = _run(capsys, "batch", src, out, "--on-error", "skip")
    assert code == 3, err
    assert "cannot read" in err
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl.gz"]


@pytest.mark.parametrize("how", ["binary_garbage", "invalid_utf8", "nul_bytes", "lone_cr"])
def test_corrupt_plain_jsonl_records_are_skipped(tmp_path, capsys, how):
    body = {
        "binary_garbage": bytes(range(256)),
        "invalid_utf8": b'{"text": "\xff\xfe"}',
        "nul_bytes": b'{"text": "a"}\x00\x00',
        "lone_cr": b'{"text": "a"\r}',
    }[how]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"text": "ok"}\n' + body + b"\n" + b'{"text": "ok"}\n')
    out = tmp_path / "out.jsonl"
    code, err = _run(capsys, "batch", src, out, "--on-error", "skip")
    assert code in (0, 1), err  # "lone_cr" is JSON whitespace: a valid record
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[0]["index"] == 0 and rows[-1]["ids"] == rows[0]["ids"]


PARQUET_CODECS = ["NONE", "SNAPPY", "GZIP", "ZSTD", "BROTLI", "LZ4"]


def _parquet_bytes(codec: str) -> bytes:
    sink = io.BytesIO()
    table = pa.table({"text": [f"hello world {i} " * 20 for i in range(2000)]})
    pq.write_table(table, sink, compression=codec, row_group_size=500)
    return sink.getvalue()


CORRUPTIONS = ["footer", "magic", "page_data", "truncated", "empty"]


@pytest.mark.parametrize("codec", ["NONE", "ZSTD"])
@pytest.mark.parametrize("where", CORRUPTIONS)
def test_corrupt_parquet_input(tmp_path, capsys, codec, where):
    _check_corrupt_parquet(tmp_path, capsys, codec, where)


@pytest.mark.slow
@pytest.mark.parametrize("codec", [c for c in PARQUET_CODECS if c not in ("NONE", "ZSTD")])
@pytest.mark.parametrize("where", CORRUPTIONS)
def test_corrupt_parquet_input_other_codecs(tmp_path, capsys, codec, where):
    _check_corrupt_parquet(tmp_path, capsys, codec, where)


def _check_corrupt_parquet(tmp_path, capsys, codec, where):
    good = _parquet_bytes(codec)
    bad = {
        "footer": _flip(good, len(good) - 12),
        "magic": _flip(good, len(good) - 1),
        "page_data": b"".join(_flip(good, at)[at : at + 1] if at % 97 == 0 else good[at : at + 1]
                              for at in range(len(good) // 3))
        + good[len(good) // 3 :],
        "truncated": good[: len(good) * 2 // 3],
        "empty": b"",
    }[where]
    src = tmp_path / "in.parquet"
    src.write_bytes(bad)
    out = tmp_path / "out.jsonl"
    code, err = _run(capsys, "batch", src, out, "--on-error", "skip")
    if code == 0:  # a flip inside a string value is still a valid file
        assert len(out.read_text().splitlines()) == 2000
        return
    assert code == 3, err
    assert "Parquet" in err or "cannot read" in err
    assert sorted(os.listdir(tmp_path)) == ["in.parquet"]


@pytest.mark.parametrize("layout", ["dictionary", "string_view", "large_string", "binary",
                                    "dictionary_large"])
def test_parquet_messages_column_layouts(tmp_path, capsys, layout, tok):
    """A `messages` column of JSON text in any string layout."""
    from qwen4exp.render.chat import render_chat

    conv = [[{"role": "user", "content": f"hello {i}"}] for i in range(3)]
    texts = [json.dumps(c) for c in conv] * 2
    col = {
        "dictionary": pa.array(texts).dictionary_encode(),
        "string_view": pa.array(texts, pa.string_view()),
        "large_string": pa.array(texts, pa.large_string()),
        "binary": pa.array([t.encode() for t in texts], pa.binary()),
        "dictionary_large": pa.array(texts, pa.large_string()).dictionary_encode(),
    }[layout]
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"messages": col}), src)
    out = tmp_path / "out.jsonl"
    code, err = _run(capsys, "batch", src, out)
    assert code == 0, err
    got = [json.loads(x)["ids"] for x in out.read_text().splitlines()]
    assert got == [tok.encode_chat(render_chat(c)).tolist() for c in conv] * 2


# ---------------------------------------------------------------- tampered tokenizer.json


@pytest.fixture(scope="module")
def vocab_json():
    """A 1,000-token tokenizer.json cut from the real one (tests/_small_vocab.py)."""
    return small_tokenizer_json()


@pytest.fixture()
def small_vocab(tmp_path, vocab_json):
    path = tmp_path / "small.json"
    path.write_text(json.dumps(vocab_json), encoding="utf-8")
    return path


def _tamper(raw: dict, field: str, value):
    """Set a dotted field path ("model.vocab", "added_tokens.0.id") to value (None: delete)."""
    obj = copy.deepcopy(raw)
    *parents, last = field.split(".")
    node = obj
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        last = int(last)
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value(node[last]) if callable(value) else value
    return obj


_DELETE = object()
# Each field Tokenizer.from_file reads, and ways to break it.
TAMPERED = [
    ("model", [_DELETE, None, [], "BPE", 5]),
    ("model.type", [_DELETE, "WordPiece", 3]),
    ("model.ignore_merges", ["yes", 2, [True]]),
    ("model.vocab", [_DELETE, None, [], "x", {}, {"a": 0}]),
    ("model.vocab.!", [_DELETE, -1, 10**9, "0", 1.5, True, None]),
    ("model.merges", [5, "x", {"a": 1}, [[1, 2]], ["Ġ"], [["a", "b", "c"]], ["zz qq"]]),
    # (none, None and NFKC load now: test_other_normalizers_load_as_hf_reads_them)
    ("normalizer", [[], {"type": "Replace", "pattern": {"String": "a"}, "content": "b"}, {"type": "NoSuch"}]),
    ("pre_tokenizer", [_DELETE, None, {"type": "Sequence", "pretokenizers": [1, 2]},
                       {"type": "Sequence", "pretokenizers": "xy"}]),
    ("added_tokens", [5, "x", {"a": 1}, [1], [None]]),
    ("added_tokens.0.id", [_DELETE, None, 5, 0, 255, SMALL_N - 1, -1, 2**31, str(SMALL_N), True, 1.5]),
    ("added_tokens.0.content", [_DELETE, None, "", 5, ["<|x|>"], "\ud800"]),
    ("added_tokens.1.id", [lambda _: SMALL_N]),  # the same id twice
    ("added_tokens.1.content", [lambda _: "<|endoftext|>"]),  # the same spelling twice
]
TAMPER_CASES = [(f, i) for f, values in TAMPERED for i in range(len(values))]


@pytest.mark.parametrize("field,which", TAMPER_CASES)
def test_tampered_tokenizer_json_is_refused(tmp_path, monkeypatch, vocab_json, field, which):
    """from_file names the problem (Qwen4ExpError), never KeyError/TypeError or a
    crash, and never loads a vocabulary that breaks provenance."""
    from qwen4exp import Qwen4ExpError, Tokenizer

    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    value = dict(TAMPERED)[field][which]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_tamper(vocab_json, field, value)), encoding="utf-8", errors="surrogatepass")
    with pytest.raises(Qwen4ExpError, match=str(path).replace("\\", "\\\\")[:20]):
        Tokenizer.from_file(path)


def test_added_token_inside_bpe_range_is_refused(tmp_path, monkeypatch, vocab_json):
    """A tampered added token {"id": 5, "content": "<|im_end|>"} would make DATA text yield an atom id."""
    from qwen4exp import Qwen4ExpError, Tokenizer

    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    raw = copy.deepcopy(vocab_json)
    end = next(t for t in raw["added_tokens"] if t["content"] == "<|im_end|>")
    end["id"] = 5
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(Qwen4ExpError, match="is BPE token 5, which is spelled otherwise"):
        Tokenizer.from_file(path)


@pytest.mark.parametrize("normalizer", [_DELETE, None, {"type": "NFKC"}])
def test_other_normalizers_load_as_hf_reads_them(tmp_path, monkeypatch, vocab_json, normalizer):
    """A tokenizer.json without a normalizer, or with NFKC, is another
    vocabulary now (docs/FORMAT.md, "Other vocabularies"): its ids are HF's."""
    from tokenizers import Tokenizer as HFTokenizer

    from qwen4exp import Tokenizer

    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    raw = _tamper(vocab_json, "normalizer", normalizer)
    raw["added_tokens"] = []  # DATA's reference: no added tokens to cut out of the text
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    text = "ﬁne ① Ｗｉｄｅ café e\u0301 it's 12345 <|im_end|>"
    assert Tokenizer.from_file(path).encode(text) == HFTokenizer.from_file(str(path)).encode(
        text, add_special_tokens=False).ids


@pytest.mark.parametrize("array", ["token_offsets", "token_bytes", "merges", "atom_ids", "atom_offsets"])
def test_tampered_compiled_cache_is_recompiled(tmp_path, monkeypatch, array, small_vocab):
    """A damaged or tampered cache entry is never loaded: from_file recompiles."""
    import numpy as np

    from qwen4exp import Tokenizer

    cache = tmp_path / "cache"
    monkeypatch.setenv("QWEN4EXP_CACHE", str(cache))
    text = "hello <|im_end|> world " * 3
    want = Tokenizer.from_file(small_vocab).encode(text)
    (entry,) = cache.iterdir()
    with np.load(entry) as z:
        arrays = {k: z[k].copy() for k in z.files}
    a = arrays[array]
    a.reshape(-1)[len(a.reshape(-1)) // 2] = 2**30 if a.dtype.kind == "i" else 7
    with open(entry, "wb") as f:
        np.savez(f, **arrays)
    assert Tokenizer.from_file(small_vocab).encode(text) == want
    entry.write_bytes(b"PK\x03\x04 not a zip")
    assert Tokenizer.from_file(small_vocab).encode(text) == want


@pytest.mark.parametrize("field,which", TAMPER_CASES[::5])
def test_tampered_tokenizer_via_cli(tmp_path, capsys, monkeypatch, vocab_json, field, which):
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tokenizer.json"
    value = dict(TAMPERED)[field][which]
    path.write_text(json.dumps(_tamper(vocab_json, field, value)), encoding="utf-8", errors="surrogatepass")
    code, err = _run(capsys, "encode", "-t", "hi", "--tokenizer", path)
    assert code == 2 and f"--tokenizer {path}" in err


@pytest.mark.parametrize("out_name", ["out.jsonl", "out.parquet"])
def test_output_write_failure_is_one_line(tmp_path, out_name):
    """A full disk / file-size limit while writing OUT (RLIMIT_FSIZE: EFBIG):
    exit 4 (output could not be written) with one line, no traceback, no OUT
    and no temporary file."""
    import resource
    import subprocess
    import sys

    from helpers import cli_env

    src = tmp_path / "in.jsonl"
    src.write_bytes(_jsonl_bytes(3_000))
    limit = 16 * 1024
    r = subprocess.run(
        [sys.executable, "-m", "qwen4exp", "batch", str(src), str(tmp_path / out_name), "--chunk-size", "500"],
        capture_output=True, text=True, env=cli_env(), timeout=300,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
    )
    assert r.returncode == 4, r.stderr
    assert f"cannot write {tmp_path / out_name}" in r.stderr and "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]
