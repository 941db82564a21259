"""Pre-tokenizer throughput alone (pyx/_pretokenize.pyx): the per-piece
`piece_end` loop against `piece_ends` filling chunks of pieces, MB/s of UTF-8
input, best of several rounds, no BPE.

    PYTHONPATH=src python bench/bench_pretokenize.py [--rounds N] [--caps 0,64]
    PYTHONPATH=src python -m pytest bench/bench_pretokenize.py --benchmark-only -n 0

cap 0 is one `piece_end` call per piece (how the encoder called it before);
cap k > 0 is one `piece_ends` call per k pieces. Both scan the text's cached
UTF-8 form without the GIL and only count pieces (`count_pieces` hook), so
the figure is the scanner's own speed.
"""

from __future__ import annotations

import argparse
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402  (puts tests/ on sys.path)

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
CAPS = (0, 64)
PATTERNS = {"qwen3": False, "qwen3.6": True}  # marks=True: the Qwen3.5/3.6 pattern


def scan(corpus: str, cap: int, marks: bool, rounds: int):
    """(MB/s, pieces) of the best round."""
    from qwen4exp._native._pretokenize import count_pieces

    text = common.corpus_text(corpus)
    nbytes = common.corpus_bytes(corpus)
    count_pieces(text, marks, cap)  # caches the UTF-8 form, warms the tables
    best, pieces = common.best_of(lambda t: count_pieces(t, marks, cap), text, rounds)
    return nbytes / best / 1e6, pieces


@pytest.mark.parametrize("cap", CAPS)
@pytest.mark.parametrize("corpus", common.THROUGHPUT_CORPORA)
def test_pretokenize_throughput(benchmark, corpus, cap):
    from qwen4exp._native._pretokenize import count_pieces

    text = common.corpus_text(corpus)
    nbytes = common.corpus_bytes(corpus)
    benchmark.group = f"pre-tokenize {corpus} ({nbytes / 1e6:.2f} MB)"
    pieces = benchmark.pedantic(count_pieces, args=(text, False, cap), rounds=ROUNDS, iterations=1)
    assert pieces == count_pieces(text, False, 0)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        benchmark.extra_info.update(cap=cap, pieces=pieces, mb_per_s=round(nbytes / stats.stats.min / 1e6, 1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--caps", default=",".join(map(str, CAPS)), help="comma-separated caps")
    args = ap.parse_args(argv)
    caps = [int(c) for c in args.caps.split(",")]
    print(f"{'corpus':<14}{'pattern':<9}{'cap':>5}{'MB/s':>9}{'pieces':>10}{'bytes/piece':>13}")
    for corpus in common.THROUGHPUT_CORPORA:
        nbytes = common.corpus_bytes(corpus)
        for pattern, marks in PATTERNS.items():
            counts = set()
            for cap in caps:
                mbs, pieces = scan(corpus, cap, marks, args.rounds)
                counts.add(pieces)
                print(f"{corpus:<14}{pattern:<9}{cap:>5}{mbs:>9.1f}{pieces:>10}{nbytes / pieces:>13.2f}")
            if len(counts) != 1:
                sys.exit(f"{corpus}/{pattern}: the caps disagree on the number of pieces: {counts}")


if __name__ == "__main__":
    main()
