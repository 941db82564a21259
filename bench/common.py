"""Shared by bench_encode.py (pytest-benchmark) and report.py (plain script):
corpora access, parity checks against the HF reference, timing helpers."""

from __future__ import annotations

import gc
import time
import unicodedata

import peers as _peers  # noqa: F401  (sets the thread env and sys.path first)
import corpora

THROUGHPUT_CORPORA = ("code", "multilingual")
LONG_WORD_SIZES = (20_000, 200_000)
LONG_WORD_SCRIPTS = ("latin", "cjk")

# Inputs that other re-implementations got wrong (see shared NOTES-parity.md).
# Those marked non-NFC show which peers normalise.
SPOT_CHECKS = (
    ("whitespace run before a word", "a   b"),
    ("U+0085 is \\s, not [\\r\\n]", "a\x85\x85b"),
    ("U+2029 paragraph separator", "x\u2029\u2029y"),
    ("U+001C..U+001F are not \\s", "a\x1c\x1db"),
    ("combining marks are not \\p{L}", "हिन्दी"),
    ("\\p{N} = Nd, Nl, No", "x ½ Ⅻ ①²"),
    ("ZWSP is neither \\s nor L/N", "\u200bb"),
    ("case-insensitive contractions", "IT'S it'Ll WE'VE"),
    ("'ſ folds to 's", "it'\u017f"),
    ("newline runs", "a\r\n\r\n  b\n \n"),
    ("trailing whitespace", "x  "),
    ("Unicode 16 letter (Garay, U+10D50)", "\U00010d50\U00010d51 a"),
    ("Unicode 17 ideograph (Ext. J, U+323B0)", "\U000323b0\U000323b1 a"),
    ("non-NFC: e + U+0301", "cafe\u0301"),
    ("non-NFC: Kelvin sign", "it'\u212a 5\u212a"),
    ("added-token spelling as data", "<|im_start|>user <think>"),
)


def corpus_text(name: str) -> str:
    return corpora.CORPORA[name]()


def corpus_bytes(name: str) -> int:
    return len(corpus_text(name).encode("utf-8"))


def best_of(fn, arg, rounds: int):
    """(best seconds, last result) of ``rounds`` calls; GC off while timing."""
    best = float("inf")
    out = None
    for _ in range(max(1, rounds)):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            out = fn(arg)
            dt = time.perf_counter() - t0
        finally:
            gc.enable()
        best = min(best, dt)
    return best, out


def documents_parity(encode, reference, names=("code", "multilingual", "whitespace")):
    """{corpus: (documents that differ, documents)} of ``encode`` against
    ``reference``, document by document."""
    out = {}
    for name in names:
        docs = corpora.DOCUMENTS[name]()
        bad = sum(1 for d in docs if list(encode(d)) != list(reference(d)))
        out[name] = (bad, len(docs))
    return out


def spot_check_failures(encode, reference):
    """Labels of SPOT_CHECKS on which ``encode`` differs from ``reference``."""
    bad = []
    for label, text in SPOT_CHECKS:
        try:
            same = list(encode(text)) == list(reference(text))
        except Exception as exc:  # noqa: BLE001
            bad.append(f"{label} (raised {type(exc).__name__})")
            continue
        if not same:
            bad.append(label)
    return bad


def all_nfc() -> bool:
    return all(unicodedata.is_normalized("NFC", corpus_text(n)) for n in corpora.CORPORA)
