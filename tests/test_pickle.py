"""Tokenizer pickling: by vocabulary name (bundled) or by checksum (from_file),
so a tokenizer ships to multiprocessing and Ray workers."""

import json
import multiprocessing
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import corpora
import qwen4exp
from qwen4exp import Qwen4ExpError
from qwen4exp.vocab.loading import arrays_sha256 as _arrays_sha256
from qwen4exp.encode.core import tokenizer_by_checksum as _tokenizer_by_checksum

from conftest import TOKENIZER_JSON, run_isolated

_WORKER_TOK = None


def _init_worker(tok):
    global _WORKER_TOK
    _WORKER_TOK = tok


def _encode_in_worker(text):
    return _WORKER_TOK.encode(text)


def _encode_with(tok, text):
    return tok.encode(text), tok.core.vocab_name


@pytest.fixture(scope="module")
def file_tok(tmp_path_factory):
    """A from_file tokenizer whose tokenizer.json and cache entry are gone."""
    d = tmp_path_factory.mktemp("vocab")
    path = d / "tokenizer.json"
    shutil.copy(TOKENIZER_JSON, path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QWEN4EXP_CACHE", str(d / "cache"))
        ftok = qwen4exp.Tokenizer.from_file(path)
    path.unlink()
    shutil.rmtree(d / "cache")
    return ftok


@pytest.fixture(scope="module")
def texts():
    return list(corpora.multilingual_documents()[:24]) + [d[:3000] for d in corpora.code_documents()[:8]]


def test_bundled_pickles_by_name(tok, texts):
    data = pickle.dumps(tok)
    assert len(data) < 200  # the name and the cache size, not the vocabulary
    assert b"qwen3" in data
    back = pickle.loads(data)
    assert back.core.vocab_name == "qwen3" and back.core._compiled is None  # no arrays kept for a named one
    assert back.encode_batch(texts, num_threads=1) == tok.encode_batch(texts, num_threads=1)
    small = pickle.loads(pickle.dumps(qwen4exp.Tokenizer(cache_size=0)))
    assert small.core.cache_size == 0 and small.encode(texts[0]) == tok.encode(texts[0])


def test_from_file_pickles_by_checksum_and_loads_without_the_file(tmp_path, monkeypatch, tok, file_tok, texts):
    """A process that never saw the tokenizer.json (file gone, empty cache)
    rebuilds the tokenizer from the pickle's compiled arrays."""
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    assert file_tok.core.vocab_name is None
    data = pickle.dumps(file_tok)
    back = pickle.loads(data)
    assert back.core.vocab_name is None
    assert back.encode_batch(texts, num_threads=1) == tok.encode_batch(texts, num_threads=1)
    assert dict(back.atoms) == dict(tok.atoms)
    assert pickle.dumps(back) == data  # the same checksum and arrays again
    assert not (tmp_path / "cache").exists()


def test_damaged_pickle_is_refused(file_tok):
    """Damage the consistency checks cannot see (a flag, the source's checksum)
    is caught by the arrays' SHA-256; damage that breaks the arrays by the checks."""
    rebuild, (cls, sha, arrays, cache_size, encode_threads, _binding) = file_tok.__reduce__()
    for key, damage in (("source_sha256", 0), ("marks", 0), ("merges", 0), ("token_bytes", 5000)):
        damaged = dict(arrays)
        damaged[key] = arrays[key].copy()
        damaged[key].flat[damage] ^= 1
        with pytest.raises(Qwen4ExpError, match="SHA-256" if key in ("source_sha256", "marks") else "merge"):
            rebuild(cls, sha, damaged, cache_size, encode_threads)


@pytest.mark.parametrize("source", ["bundled", "from_file"])
def test_spawn_pool_ids_identical(tmp_path, monkeypatch, tok, file_tok, texts, source):
    """Fresh interpreters (spawn, not fork): the tokenizer as a pool
    initializer argument and as a per-task argument."""
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "empty-cache"))  # the children see no cache
    shipped = qwen4exp.Tokenizer() if source == "bundled" else file_tok
    expected = tok.encode_batch(texts, num_threads=1)
    # Spawned children rebuild sys.path from this process's: put the folder of
    # the qwen4exp this process imported first, so that a source tree without
    # built extensions (src/, added by a helper module) cannot shadow it there.
    monkeypatch.syspath_prepend(str(Path(qwen4exp.__file__).resolve().parent.parent))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2, initializer=_init_worker, initargs=(shipped,)) as pool:
        # A worker that dies in its initializer is replaced forever: bound the wait.
        assert pool.map_async(_encode_in_worker, texts, chunksize=4).get(timeout=300) == expected
        if source == "bundled":
            per_task = pool.starmap_async(_encode_with, [(shipped, t) for t in texts[:6]]).get(timeout=300)
            assert per_task == [(e, "qwen3") for e in expected[:6]]


@pytest.mark.parametrize("name", qwen4exp.vocabularies() + ("qwen3.5",))
def test_every_bundled_vocabulary_pickles_by_name(name, texts):
    tok = qwen4exp.Tokenizer(name)
    data = pickle.dumps(tok)
    assert len(data) < 200
    back = pickle.loads(data)
    assert back.core.vocab_name == tok.core.vocab_name
    assert back.atoms == tok.atoms
    assert back.encode_batch(texts, num_threads=1) == tok.encode_batch(texts, num_threads=1)


# ---------------------------------------------------------------- forged pickles
#
# The checksum travels in the same pickle as the arrays, so it only detects
# accidents: a forged pickle carries arrays that are inconsistent and a
# checksum that matches them. Unpickling runs the same consistency checks as
# loading a compiled vocabulary; every forgery below must be refused with a
# Qwen4ExpError before the arrays reach the native core. The forged pickles are
# loaded in a child process, so that one reaching the core and crashing it
# fails this test instead of killing pytest.


class _Forged:
    """Pickles as a from_file Tokenizer does: tokenizer_by_checksum(Tokenizer, sha, arrays, ...)."""

    def __init__(self, arrays, sha=None, cache_size=64, encode_threads=1):
        if sha is None:
            try:
                sha = _arrays_sha256(arrays)
            except Exception:  # noqa: BLE001 - arrays no checksum can be computed for
                sha = "0" * 64
        self.args = (qwen4exp.Tokenizer, sha, arrays, cache_size, encode_threads)

    def __reduce__(self):
        return (_tokenizer_by_checksum, self.args)


def _replace(key, fn):
    """A forgery: arrays[key] replaced by fn(a copy of it)."""
    def forge(arrays):
        arrays[key] = fn(arrays[key].copy())
        return arrays
    return forge


def _at(index, value):
    def fn(a):
        a[index] = value
        return a
    return fn


def _same_length_tokens(arrays):
    """Two multi-byte tokens of the same length (ids)."""
    lengths = np.diff(arrays["token_offsets"])
    first = int(np.flatnonzero(lengths == 3)[0])
    second = int(np.flatnonzero(lengths == 3)[1])
    return first, second


def _copy_token(arrays, src, dst):
    tb, to = arrays["token_bytes"].copy(), arrays["token_offsets"]
    tb[to[dst]:to[dst + 1]] = tb[to[src]:to[src + 1]]
    arrays["token_bytes"] = tb
    return arrays


def _atoms_spelled(arrays, spellings):
    blob = [s.encode("utf-8", "surrogatepass") if isinstance(s, str) else s for s in spellings]
    arrays["atom_bytes"] = np.frombuffer(b"".join(blob), dtype=np.uint8).copy()
    arrays["atom_offsets"] = np.concatenate(([0], np.cumsum([len(b) for b in blob]))).astype(np.int64)
    return arrays


def _atom_spellings(arrays):
    blob, offs = arrays["atom_bytes"].tobytes(), arrays["atom_offsets"]
    return [blob[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]


def _merge_result_of_other_length(arrays):
    mg = arrays["merges"].copy()
    lengths = np.diff(arrays["token_offsets"])
    mg[0, 2] = int(np.flatnonzero(lengths != lengths[mg[0, 2]])[0])
    arrays["merges"] = mg
    return arrays


def _merge_result_of_other_bytes(arrays):
    """The first merge makes a token of the right length but other bytes."""
    mg = arrays["merges"].copy()
    lengths = np.diff(arrays["token_offsets"])
    same = np.flatnonzero(lengths == lengths[mg[0, 2]])
    mg[0, 2] = int(same[same != mg[0, 2]][0])
    arrays["merges"] = mg
    return arrays


def _without(key):
    def forge(arrays):
        del arrays[key]
        return arrays
    return forge


def _with(key, value):
    def forge(arrays):
        arrays[key] = value(arrays) if callable(value) else value
        return arrays
    return forge


A_ID = 64  # the byte-level token "a" (ids 0..255 of the cut vocabulary are the real ones)

FORGERIES = {
    # atoms
    "atom id inside the BPE range": _replace("atom_ids", _at(0, A_ID)),
    "atom id negative": _replace("atom_ids", _at(0, -1)),
    "atom id past the id limit": _replace("atom_ids", _at(0, 1 << 20)),
    "atom id repeated": lambda a: _replace("atom_ids", _at(1, a["atom_ids"][0]))(a),
    "atom id that wraps to a BPE id in int32": _with(
        "atom_ids", lambda a: np.concatenate(([2**32 + A_ID], a["atom_ids"][1:])).astype(np.int64)),
    "atom spelling not UTF-8": _replace("atom_bytes", _at(0, 0xFF)),
    "atom spelling a lone surrogate": lambda a: _atoms_spelled(a, ["\ud800"] + _atom_spellings(a)[1:]),
    "two atoms with one spelling": lambda a: _atoms_spelled(a, [_atom_spellings(a)[0]] * 2 + _atom_spellings(a)[2:]),
    "atom spelling empty": lambda a: _atoms_spelled(a, [b""] + _atom_spellings(a)[1:]),
    "atom_special of another length": _replace("atom_special", lambda s: s[:-1]),
    "atom_special not flags": _replace("atom_special", lambda s: s.astype(np.float64)),
    "atom_strip of another length": _replace("atom_strip", lambda s: s[:-1]),
    "atom_strip past its flags": _replace("atom_strip", _at(0, 4)),
    # merges
    "merge result past the vocabulary": lambda a: _replace("merges", _at((0, 2), len(a["token_offsets"]) - 1))(a),
    "merge part negative": _replace("merges", _at((0, 0), -1)),
    "merge part that wraps to a valid id in int32": _replace(
        "merges", lambda m: (m.astype(np.int64) + np.array([[2**32, 0, 0]] + [[0, 0, 0]] * (len(m) - 1)))),
    "merge result of another length than its parts": _merge_result_of_other_length,
    "merge result with other bytes than its parts": _merge_result_of_other_bytes,
    "merge makes one of its own parts": lambda a: _replace("merges", _at((0, 2), a["merges"][0, 0]))(a),
    "merges flat": _replace("merges", lambda m: m.reshape(-1)),
    "merges in rows of two": _replace("merges", lambda m: np.ascontiguousarray(m[:, :2])),
    # tokens
    "token_bytes truncated": _replace("token_bytes", lambda b: b[:-1]),
    "token_offsets truncated": _replace("token_offsets", lambda o: o[:-1]),
    "token offset past the end": lambda a: _replace("token_offsets", _at(-1, len(a["token_bytes"]) + 100))(a),
    "token offset past the end, mid-table": lambda a: _replace("token_offsets", _at(500, len(a["token_bytes"]) + 5))(a),
    "token of negative length": lambda a: _replace("token_offsets", _at(300, a["token_offsets"][302]))(a),
    "empty token": lambda a: _replace("token_offsets", _at(300, a["token_offsets"][299]))(a),
    "first offset not zero": _replace("token_offsets", _at(0, 1)),
    "two tokens with the same bytes": lambda a: _copy_token(a, *_same_length_tokens(a)),
    "a byte with no token": lambda a: _copy_token(a, 1, 0),
    # atoms' offsets
    "atom_bytes truncated": _replace("atom_bytes", lambda b: b[:-1]),
    "atom_offsets truncated": _replace("atom_offsets", lambda o: o[:-1]),
    "atom_ids truncated": _replace("atom_ids", lambda i: i[:-1]),
    "atom offset past the end": lambda a: _replace("atom_offsets", _at(-1, len(a["atom_bytes"]) + 7))(a),
    "atom of negative length": lambda a: _replace("atom_offsets", _at(1, a["atom_offsets"][2] + 1))(a),
    # dtypes
    "token_offsets as int32": _replace("token_offsets", lambda o: o.astype(np.int32)),
    "token_offsets as float": _replace("token_offsets", lambda o: o.astype(np.float64)),
    "token_bytes as uint16, a byte over 255": _replace(
        "token_bytes", lambda b: b.astype(np.uint16) + np.array([256] + [0] * (len(b) - 1), dtype=np.uint16)),
    "merges as int64": _replace("merges", lambda m: m.astype(np.int64)),
    "merges as float": _replace("merges", lambda m: m.astype(np.float64)),
    "merges as objects": _replace("merges", lambda m: m.astype(object)),
    "merges as a list": lambda a: _with("merges", a["merges"].tolist())(a),
    "atom_ids as uint32": _replace("atom_ids", lambda i: i.astype(np.uint32)),
    "atom_ids as a 2-D array": _replace("atom_ids", lambda i: i.reshape(1, -1)),
    "marks as an int": _with("marks", np.array([1], dtype=np.int64)),
    "ignore_merges of two flags": _with("ignore_merges", np.array([True, False])),
    "format version unknown": _with("format_version", np.array([99], dtype=np.int64)),
    "source_sha256 of another size": _replace("source_sha256", lambda s: s[:5]),
    # the set of arrays
    "merges missing": _without("merges"),
    "an unknown array": _with("extra", np.zeros(3)),
    "self_encoding flags (a from_file vocabulary has none)": lambda a: _with(
        "self_encoding", np.ones(len(a["token_offsets"]) - 1, dtype=np.uint8))(a),
}
# (forged arguments beside the arrays)
FORGED_ARGS = {
    "arrays not a dict": lambda a: _Forged(list(a.values())),
    "checksum not a string": lambda a: _Forged(a, sha=5),
    "cache_size huge": lambda a: _Forged(a, cache_size=2**62),
    "encode_threads negative": lambda a: _Forged(a, encode_threads=-1),
}

LOAD_FORGED = r"""
import json, pickle, sys
import qwen4exp

with open(sys.argv[1], "rb") as f:
    cases = pickle.load(f)  # name -> bytes: the forged pickles themselves are loaded below
for name, data in cases.items():
    print(json.dumps({"case": name}), flush=True)  # a crash names the case it died in
    try:
        tok = pickle.loads(data)
    except qwen4exp.Qwen4ExpError as exc:
        result = {"refused": str(exc)}
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    else:
        text = "a b\u00e9 hello <|endoftext|>"
        result = {"loaded": True, "ids": tok.encode(text), "a": tok.encode("a"), "atoms": dict(tok.atoms),
                  "round trip": tok.decode(tok.encode(text)) == text}
    print(json.dumps({"case": name, **result}), flush=True)
"""


@pytest.fixture(scope="module")
def small_arrays():
    from qwen4exp.vocab.compile import compile_tokenizer_json

    from _small_vocab import small_tokenizer_json

    return compile_tokenizer_json(json.dumps(small_tokenizer_json()).encode())


def test_forged_pickles_are_refused(tmp_path, small_arrays):
    genuine = dict(small_arrays)
    cases = {"genuine": pickle.dumps(_Forged(genuine))}
    for name, forge in FORGERIES.items():
        arrays = forge(dict(small_arrays))
        cases[name] = pickle.dumps(_Forged(arrays))
    for name, forge in FORGED_ARGS.items():
        cases[name] = pickle.dumps(forge(dict(small_arrays)))
    path = tmp_path / "forged.pkl"
    path.write_bytes(pickle.dumps(cases))
    r = run_isolated(LOAD_FORGED, str(path), timeout=300)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0, f"the child died (exit {r.returncode}) in case {lines[-1]['case']!r}: {r.stderr[-1500:]}"
    results = {line["case"]: line for line in lines if len(line) > 1}
    ok = results.pop("genuine")
    assert ok.get("loaded") and ok["round trip"] and ok["a"] == [A_ID], ok
    assert set(results) == set(FORGERIES) | set(FORGED_ARGS)
    wrong = {name: res.get("error") or f"loaded, encode('a') = {res['a']}"
             for name, res in results.items() if "refused" not in res}
    assert not wrong, f"{len(wrong)} forged pickles not refused with a Qwen4ExpError: {wrong}"
    for name, res in results.items():
        assert res["refused"].startswith("unpickling a Tokenizer"), (name, res)
