"""Loading compiled vocabularies: the bundled ones, tokenizer.json files
(compiled once and cached by checksum), and the checksum pickles carry.

The Tokenizer facade (tokenizer.py) builds its native core from what these
return; model-folder loading (pretrained.py) compares them without building one.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Mapping

import numpy as np

from qwen4exp.vocab import compile as _vocab_compile
from qwen4exp.vocab import pipeline as _pipeline
from qwen4exp.vocab.files import read_regular_file
from qwen4exp.errors import VocabularyError
from qwen4exp.vocab.vocabulary import Vocabulary

__all__ = ["DATA_DIR", "TOKENIZER_JSON_LIMIT", "bundled_arrays", "compiled_file", "arrays_sha256"]

#: The largest tokenizer.json read (a bound on what parsing it allocates): Qwen's
#: are 7 - 20 MB, and 2**20 tokens with as many merges fit in well under this.
TOKENIZER_JSON_LIMIT = 256 << 20

#: Where setup.py puts the compiled bundled vocabularies.
DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_data")


def bundled_arrays(vocab: Vocabulary) -> dict[str, np.ndarray]:
    """The compiled arrays of a bundled vocabulary, checked."""
    path = os.path.join(DATA_DIR, vocab.compiled)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"compiled vocabulary {path!r} is missing: reinstall qwen4exp (pip install .) "
            "so that its build step compiles the vocabularies under vocab/"
        )
    try:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        _vocab_compile.check_compiled(arrays, self_encoding=True)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:  # VocabFormatError is a ValueError
        raise VocabularyError(f"{path}: a damaged compiled vocabulary ({exc})") from None
    return arrays


def compiled_file(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The compiled arrays of a tokenizer.json (or a directory holding one), from
    the cache under $QWEN4EXP_CACHE (default ~/.cache/qwen4exp, keyed by the
    file's SHA-256) or compiled and cached (see Tokenizer.from_file)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no tokenizer.json at {path!r}")
    raw = read_regular_file(path, TOKENIZER_JSON_LIMIT)  # a FIFO or a device is refused, never read
    digest = hashlib.sha256(raw).hexdigest()
    cache_dir = os.environ.get("QWEN4EXP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "qwen4exp")
    cached = os.path.join(cache_dir, f"{digest}.v{_vocab_compile.FORMAT_VERSION}.npz")
    if os.path.isfile(cached):
        try:
            with np.load(cached) as z:
                arrays = {k: z[k] for k in z.files}
            # a cache entry is compiled from a tokenizer.json: it has no self_encoding flags
            _vocab_compile.check_compiled(arrays, self_encoding=False)
            if arrays["source_sha256"].tobytes().hex() == digest:
                return arrays
        except Exception:  # noqa: BLE001 - any damaged cache entry (bad zip, bad arrays): recompile
            pass
    try:
        arrays = _vocab_compile.compile_tokenizer_json(raw, where=path, generic=_pipeline)
    except _vocab_compile.VocabFormatError as exc:
        raise VocabularyError(str(exc)) from None
    try:
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{cached}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub: a key could be allow_pickle
        os.replace(tmp, cached)
    except OSError:
        pass  # caching is an optimisation only
    return arrays


def arrays_sha256(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 over the compiled arrays: names, dtypes, shapes and bytes."""
    h = hashlib.sha256()
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.data)
    return h.hexdigest()
