"""Tokenizer pickling: by vocabulary name (bundled) or by checksum (from_file),
so a tokenizer ships to multiprocessing and Ray workers."""

import multiprocessing
import pickle
import shutil
from pathlib import Path

import pytest

import corpora
import qwen4exp
from qwen4exp import Qwen4ExpError

from conftest import TOKENIZER_JSON

_WORKER_TOK = None


def _init_worker(tok):
    global _WORKER_TOK
    _WORKER_TOK = tok


def _encode_in_worker(text):
    return _WORKER_TOK.encode(text)


def _encode_with(tok, text):
    return tok.encode(text), tok._vocab_name


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
    assert back._vocab_name == "qwen3" and back._compiled is None  # no arrays kept for a named one
    assert back.encode_batch(texts, num_threads=1) == tok.encode_batch(texts, num_threads=1)
    small = pickle.loads(pickle.dumps(qwen4exp.Tokenizer(cache_size=0)))
    assert small._cache_size == 0 and small.encode(texts[0]) == tok.encode(texts[0])


def test_from_file_pickles_by_checksum_and_loads_without_the_file(tmp_path, monkeypatch, tok, file_tok, texts):
    """A process that never saw the tokenizer.json (file gone, empty cache)
    rebuilds the tokenizer from the pickle's compiled arrays."""
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    assert file_tok._vocab_name is None
    data = pickle.dumps(file_tok)
    back = pickle.loads(data)
    assert back._vocab_name is None
    assert back.encode_batch(texts, num_threads=1) == tok.encode_batch(texts, num_threads=1)
    assert dict(back.atoms) == dict(tok.atoms)
    assert pickle.dumps(back) == data  # the same checksum and arrays again
    assert not (tmp_path / "cache").exists()


def test_damaged_pickle_is_refused(file_tok):
    rebuild, (sha, arrays, cache_size, encode_threads) = file_tok.__reduce__()
    arrays = dict(arrays)
    merges = arrays["merges"].copy()
    merges.flat[0] ^= 1
    arrays["merges"] = merges
    with pytest.raises(Qwen4ExpError, match="SHA-256"):
        rebuild(sha, arrays, cache_size, encode_threads)


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
    assert back._vocab_name == tok._vocab_name
    assert back.atoms == tok.atoms
    assert back.encode_batch(texts, num_threads=1) == tok.encode_batch(texts, num_threads=1)
