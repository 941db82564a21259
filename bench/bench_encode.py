"""Encode throughput and long-word growth, every peer on the same inputs.

    python -m pytest bench/ --benchmark-only -n 0
    BENCH_ROUNDS=10 python -m pytest bench/ --benchmark-only -n 0 -k multilingual

Environment: BENCH_ROUNDS (default 5) rounds per benchmark, the best (min)
is the number that matters; BENCH_LONG_WORD_BUDGET_S (default 60): a
200,000-character word is skipped for a peer whose 20,000-character time,
extrapolated quadratically, exceeds it (tiktoken on CJK).
"""

from __future__ import annotations

import os
import time

import pytest

import common
import corpora
import peers

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
LONG_WORD_BUDGET_S = float(os.environ.get("BENCH_LONG_WORD_BUDGET_S", "60"))


def _best(benchmark):
    stats = getattr(benchmark, "stats", None)
    return stats.stats.min if stats is not None else None


@pytest.mark.parametrize("peer", peers.PEER_NAMES, indirect=True)
@pytest.mark.parametrize("corpus", common.THROUGHPUT_CORPORA)
def test_encode_throughput(benchmark, peer, corpus, reference_ids, bench_results):
    text = common.corpus_text(corpus)
    nbytes = common.corpus_bytes(corpus)
    benchmark.group = f"encode {corpus} ({nbytes / 1e6:.2f} MB)"
    ids = benchmark.pedantic(peer.encode, args=(text,), rounds=ROUNDS, iterations=1)
    ref = reference_ids(corpus)
    same = list(ids) == ref
    if not same:
        first = next((i for i, (a, b) in enumerate(zip(ids, ref)) if a != b), min(len(ids), len(ref)))
        bench_results["mismatch"][(corpus, peer.name)] = (
            f"{len(ids)} ids vs {len(ref)} reference ids, first difference at id #{first}"
        )
    best = _best(benchmark)
    benchmark.extra_info.update(
        peer=peer.name, corpus=corpus, bytes=nbytes, tokens=len(ids), ids_equal_hf_reference=same
    )
    if best:
        mbs, tps = nbytes / best / 1e6, len(ids) / best
        benchmark.extra_info.update(mb_per_s=round(mbs, 3), tokens_per_s=round(tps))
        bench_results["throughput"][(corpus, peer.name)] = (mbs, tps)


@pytest.mark.parametrize("peer", peers.PEER_NAMES, indirect=True)
@pytest.mark.parametrize("n", common.LONG_WORD_SIZES)
@pytest.mark.parametrize("script", common.LONG_WORD_SCRIPTS)
def test_long_word(benchmark, peer, script, n, bench_results):
    word = corpora.long_word(n, script)
    small = common.LONG_WORD_SIZES[0]
    rounds = ROUNDS
    if n > small:
        # Decide from the small word's time whether the big one is affordable.
        t_small = bench_results["long_word"].get((script, small, peer.name))
        if t_small is None:
            w = corpora.long_word(small, script)
            t0 = time.perf_counter()
            peer.encode(w)
            t_small = time.perf_counter() - t0
        projected = t_small * (n / small) ** 2
        if projected > LONG_WORD_BUDGET_S:
            pytest.skip(
                f"{peer.name}: {n:,} chars projected at ~{projected:.0f} s (quadratic from "
                f"{t_small:.2f} s at {small:,}) > BENCH_LONG_WORD_BUDGET_S={LONG_WORD_BUDGET_S:g}"
            )
        if projected > 10:
            rounds = 1
    benchmark.group = f"long word {script} {n:,} chars"
    ids = benchmark.pedantic(peer.encode, args=(word,), rounds=rounds, iterations=1)
    best = _best(benchmark)
    benchmark.extra_info.update(peer=peer.name, script=script, chars=n, tokens=len(ids))
    if best:
        bench_results["long_word"][(script, n, peer.name)] = best
