"""Speed on the Qwen3.5/3.6 vocabulary: qwen4exp against fastokens on the same file.

    python3 bench/bench_qwen36.py [--rounds 5]

Both load the reference tokenizer.json (TikTokenConverter on the shipped ranks,
tests/_qwen36_reference.py; qwen4exp as `Tokenizer("qwen3.6")`, compiled from
the same ranks at build time, fastokens `Tokenizer.from_file`). One thread
each (RAYON_NUM_THREADS=1, set by peers.py before any Rust tokenizer loads),
the same NFC corpora, best of `rounds` whole-corpus encodes (wall and process CPU time); fastokens through
`encode_ordinary` (text only, no added-token matching: what qwen4exp's encode
does). Then warm on fresh documents as report.py measures it (a new object
warmed on every fourth document, timed on the others), `rounds` times, best
of. Parity of both against HF tokenizers is checked document by document
first, and a peer that differs is reported as such.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import peers  # noqa: F401  (pins the Rust thread pools to BENCH_THREADS, default 1)
import common
import report

from _qwen36_reference import reference_json

CACHE = os.path.join(tempfile.gettempdir(), "qwen4exp-bench", "qwen36-reference")


def load(rounds: int):
    import json

    import fastokens
    import qwen4exp
    from tokenizers import Tokenizer

    path = reference_json(CACHE)
    t0 = time.perf_counter()
    ours = qwen4exp.Tokenizer("qwen3.6")
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = fastokens.Tokenizer.from_file(path)
    t_fast = time.perf_counter() - t0
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    raw["added_tokens"] = []
    hf = Tokenizer.from_str(json.dumps(raw))
    builders = {
        "qwen4exp": lambda: qwen4exp.Tokenizer("qwen3.6").encode,
        "fastokens": lambda: (lambda s, t=fastokens.Tokenizer.from_file(path): t.encode_ordinary(s).ids),
    }
    return {
        "qwen4exp": (ours.encode, t_ours),
        "fastokens": (lambda s: fast.encode_ordinary(s).ids, t_fast),
    }, (lambda s: hf.encode(s, add_special_tokens=False).ids), builders


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    tokenizers, reference, builders = load(args.rounds)
    print(f"load: " + ", ".join(f"{n} {t * 1000:.0f} ms" for n, (_, t) in tokenizers.items()))
    for name, (encode, _) in tokenizers.items():
        bad = common.documents_parity(encode, reference)
        print(f"parity {name}: " + ", ".join(f"{c} {b}/{n} documents differ" for c, (b, n) in bad.items()))
    # Wall and CPU time: on a shared machine the process's CPU time is the steadier figure.
    print("\n| corpus | clock | qwen4exp | fastokens | qwen4exp / fastokens |\n| --- | --- | ---: | ---: | ---: |")
    for corpus in common.THROUGHPUT_CORPORA:
        text = common.corpus_text(corpus)
        mb = len(text.encode("utf-8")) / 1e6
        rates = {}
        for _ in range(args.rounds):  # interleaved, best of rounds each
            for name, (encode, _) in tokenizers.items():
                cpu = time.process_time()
                secs, _ids = common.best_of(encode, text, 1)
                cpu = time.process_time() - cpu
                for clock, t in (("wall", secs), ("cpu", cpu)):
                    rates[name, clock] = max(rates.get((name, clock), 0.0), mb / t)
        for clock in ("wall", "cpu"):
            ours, theirs = rates["qwen4exp", clock], rates["fastokens", clock]
            print(f"| {corpus} ({mb:.1f} MB) | {clock} | {ours:.1f} MB/s | {theirs:.1f} MB/s | {ours / theirs:.2f}x |")
    print("\n| corpus | warm, fresh documents | qwen4exp | fastokens | qwen4exp / fastokens |\n| --- | --- | ---: | ---: | ---: |")
    for corpus in common.THROUGHPUT_CORPORA:
        warm, docs = report.split_documents(corpus)
        mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
        rates = {}
        for _ in range(args.rounds):
            for name, build in builders.items():
                encode = build()
                for d in warm:
                    encode(d)
                rates[name] = max(rates.get(name, 0.0), mb / common.time_documents(encode, docs))
        ours, theirs = rates["qwen4exp"], rates["fastokens"]
        print(f"| {corpus} ({mb:.1f} MB) | wall | {ours:.1f} MB/s | {theirs:.1f} MB/s | {ours / theirs:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
