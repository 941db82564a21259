"""Cost of the pieces the piece cache cannot answer ("misses"), per piece.

The pieces of a corpus's measured documents (report.split_documents) that
are not among the warm-up documents' pieces and are not themselves one
token are encoded one call each: with no cache (cache_size=0: pure merging,
pyx/_bpe.pyx) and with the default cache (merging plus storing). The cost of
a call on a one-byte piece is printed for reference.

    PYTHONPATH=src python3 bench/bench_misses.py [multilingual|code] [--rounds N]
"""

from __future__ import annotations

import argparse
import time
import unicodedata

import report  # noqa: F401  (bench/ and tests/ on sys.path, thread settings)
from _hf_reference import reference_tables

import qwen4exp
from qwen4exp._native._pretokenize import split


def misses(corpus: str) -> list[str]:
    warm, docs = report.split_documents(corpus)
    tokens = set(reference_tables()[0])
    seen = {p for d in warm for p in split(unicodedata.normalize("NFC", d))}
    out = []
    for d in docs:
        for p in split(unicodedata.normalize("NFC", d)):
            if len(p.encode()) >= 2 and p not in seen and p.encode() not in tokens:
                seen.add(p)
                out.append(p)
    return out


def per_call_ns(pieces: list[str], cache_size: int | None, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        tok = qwen4exp.Tokenizer() if cache_size is None else qwen4exp.Tokenizer(cache_size=cache_size)
        tok.encode("x")
        t0 = time.thread_time()
        for p in pieces:
            tok.encode(p)
        best = min(best, time.thread_time() - t0)
    return best / len(pieces) * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default="multilingual", choices=["multilingual", "code"])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    pieces = misses(args.corpus)
    n_bytes = sum(len(p.encode()) for p in pieces)
    print(f"{args.corpus}: {len(pieces)} misses, {n_bytes} bytes ({n_bytes / len(pieces):.1f} per miss)")
    for label, size in (("no cache (cache_size=0)", 0), ("default cache", None)):
        ns = per_call_ns(pieces, size, args.rounds)
        print(f"{label}: {ns:.0f} ns per miss, {n_bytes / len(pieces) / ns * 1e3:.1f} MB/s")
    print(f"call on a one-byte piece: {per_call_ns(['a'] * len(pieces), 0, args.rounds):.0f} ns")


if __name__ == "__main__":
    main()
