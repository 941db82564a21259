"""Warm-on-fresh-documents and cold throughput of two peers, alone in a process.

    PYTHONPATH=src python3 bench/bench_fresh.py [--rounds 3] [--peers qwen4exp,fastokens] [--busy N]

`qwen4exp-1thread` in --peers is qwen4exp with encode_threads=1 (no text cut
across the crew); --busy N runs it all beside N processes that spin.

The same measurement as report.py's "warm, fresh documents" and "cold"
columns (report.split_documents, common.time_documents, peers.BUILDERS), but
without report.py's other work in the process (the HF reference ids for every
corpus, the whole-corpus encodes); in two report runs qwen4exp's figures
there were about a third lower than here (README, Speed). Peers are
interleaved round by round; best of `rounds`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import peers  # noqa: E402  (first: pins the Rust thread pools)
import common  # noqa: E402
import report  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", default="qwen4exp,fastokens")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="beside N spinning processes")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.peers.split(",") if n.strip()]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    try:
        return run(names, a.rounds)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def build(name: str):
    if name == "qwen4exp-1thread":
        import qwen4exp

        tok = qwen4exp.Tokenizer(encode_threads=1)
        tok.encode("warm up")
        return tok
    return peers.BUILDERS[name]()  # builders end with a one-word encode


def run(names: list[str], rounds: int) -> int:
    split = {c: report.split_documents(c) for c in common.THROUGHPUT_CORPORA}
    split["short"] = report.split_documents("short")
    best: dict = {}
    for _ in range(rounds):
        for c in split:
            warm, docs = split[c]
            for n in names:
                fresh = build(n)
                t = common.time_documents(fresh.encode, docs)
                best[(c, n, "cold")] = min(best.get((c, n, "cold"), float("inf")), t)
                fresh = build(n)
                for d in warm:
                    fresh.encode(d)
                t = common.time_documents(fresh.encode, docs)
                best[(c, n, "warm")] = min(best.get((c, n, "warm"), float("inf")), t)
    print("| corpus | kind | " + " | ".join(f"{n} MB/s" for n in names) + f" | {names[0]} / {names[-1]} |")
    print("| --- | --- | " + " | ".join("---:" for _ in names) + " | ---: |")
    for c in split:
        nbytes = sum(len(d.encode("utf-8")) for d in split[c][1])
        for kind in ("warm", "cold"):
            rates = [nbytes / best[(c, n, kind)] / 1e6 for n in names]
            print(f"| {c} | {kind} | " + " | ".join(f"{r:.1f}" for r in rates) + f" | {rates[0] / rates[-1]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
