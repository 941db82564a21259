#!/usr/bin/env python
"""Benchmark report: all peers, one run, best of N, printed as markdown.

    python bench/report.py                 # everything (~3-5 min on 2 cores)
    python bench/report.py --quick         # fewer rounds, no batch/load sections
    python bench/report.py --output bench/RESULTS.md

Sections: single-threaded encode throughput (all peers interleaved round by
round on the same inputs), long-word cost growth (20,000 vs 200,000
characters), batch encoding with 1 and 2 threads (one fresh process per peer
and thread count), load time and resident memory (one fresh process per
peer), and parity with the HF reference.  Progress goes to stderr, the
markdown to stdout (or --output).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import peers  # noqa: E402  (first: pins the HF thread env before tokenizers loads)
import common  # noqa: E402
from procstat import rss_kib  # noqa: E402
import corpora  # noqa: E402


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def fmt_s(x: float) -> str:
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


# --------------------------------------------------------------------------
# child processes
# --------------------------------------------------------------------------


def child_load(name: str) -> dict:
    import numpy  # noqa: F401  the baseline: python -c "import numpy"

    rss0, _ = rss_kib()
    t0 = time.perf_counter()
    peer = peers.BUILDERS[name]()  # import + construct + first encode
    t1 = time.perf_counter()
    rss1, hwm1 = rss_kib()
    return {
        "seconds": t1 - t0,
        "rss_delta_kib": rss1 - rss0,
        "peak_delta_kib": hwm1 - rss0,
        "description": peer.description,
    }


def child_batch(name: str, threads_list, rounds: int, corpus_names) -> dict:
    """Best of ``rounds`` of encode_batch for each thread count, interleaved
    round by round.  Returns {threads: {corpus: {...}}}."""
    peer = peers.BUILDERS[name]()
    if peer.encode_batch is None:
        return {"error": "no batch API"}
    docs = {c: list(corpora.DOCUMENTS[c]()) for c in corpus_names}
    best = {(t, c): float("inf") for t in threads_list for c in corpus_names}
    same = {}
    ntok = {}
    for _ in range(max(1, rounds)):
        for c in corpus_names:
            for t in threads_list:
                secs, ids = common.best_of(lambda ds: peer.encode_batch(ds, num_threads=t), docs[c], 1)
                best[(t, c)] = min(best[(t, c)], secs)
                if (t, c) not in same:
                    same[(t, c)] = [list(x) for x in ids] == [list(peer.encode(d)) for d in docs[c]]
                    ntok[(t, c)] = sum(len(x) for x in ids)
    out = {}
    for (t, c), secs in best.items():
        out.setdefault(str(t), {})[c] = {
            "seconds": secs,
            "bytes": sum(len(d.encode("utf-8")) for d in docs[c]),
            "tokens": ntok[(t, c)],
            "documents": len(docs[c]),
            "batch_equals_encode": same[(t, c)],
        }
    return out


def child_long_word(name: str, n: int, script: str) -> dict:
    peer = peers.BUILDERS[name]()
    w = corpora.long_word(n, script)
    secs, ids = common.best_of(peer.encode, w, 1)
    return {"seconds": secs, "tokens": len(ids)}


def run_child(kind: str, args: dict, threads: int = 1, timeout: float | None = None):
    env = dict(os.environ)
    env["BENCH_THREADS"] = str(threads)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps({"kind": kind, **args})]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------
# main report
# --------------------------------------------------------------------------


def environment_section(loaded, skipped) -> list[str]:
    info = corpora.corpus_info()
    lines = ["## Environment", ""]
    lines.append(f"- Python {platform.python_version()} ({platform.python_implementation()}), "
                 f"{platform.system()} {platform.machine()}, {os.cpu_count()} logical CPUs"
                 + (f", load average {os.getloadavg()[0]:.1f} at start" if hasattr(os, "getloadavg") else ""))
    for p in loaded.values():
        lines.append(f"- `{p.name}`: {p.description}")
    for name, why in skipped.items():
        lines.append(f"- `{name}`: **skipped**: {why}")
    lines.append(f"- {peers.tiktoken_ranks_check()}")
    lines.append("- corpora (all NFC: " + ("yes" if common.all_nfc() else "NO") + "): "
                 + "; ".join(f"{k} {v['bytes'] / 1e6:.2f} MB UTF-8, {v['chars']:,} chars, "
                             f"{v['documents']} documents" for k, v in info.items()))
    lines.append("")
    return lines


def throughput_section(loaded, skipped, ref_ids, rounds) -> tuple[list[str], dict]:
    names = list(loaded)
    best = {(c, n): float("inf") for c in common.THROUGHPUT_CORPORA for n in names}
    ntok, equal = {}, {}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)] if names else []
        log(f"throughput round {r + 1}/{rounds} ({', '.join(order)})")
        for c in common.THROUGHPUT_CORPORA:
            text = common.corpus_text(c)
            for n in order:
                secs, ids = common.best_of(loaded[n].encode, text, 1)
                best[(c, n)] = min(best[(c, n)], secs)
                if r == 0:
                    ntok[(c, n)] = len(ids)
                    equal[(c, n)] = list(ids) == ref_ids[c]
                del ids
    lines = [
        f"## Single-threaded encode throughput (best of {rounds}, peers interleaved)",
        "",
        "One `encode` call on the whole corpus; MB = 10^6 bytes of UTF-8 input; "
        "tokens/s counts the peer's own output.",
        "",
        "| corpus | peer | MB/s | tokens/s | qwen4exp speed-up | ids == HF reference |",
        "| --- | --- | ---: | ---: | ---: | :---: |",
    ]
    results = {}
    for c in common.THROUGHPUT_CORPORA:
        nbytes = common.corpus_bytes(c)
        q = best.get((c, "qwen4exp"))
        for n in names:
            s = best[(c, n)]
            mbs = nbytes / s / 1e6
            results[(c, n)] = mbs
            ratio = f"{s / q:.2f}×" if q is not None else "n/a"
            lines.append(f"| {c} | {n} | {mbs:.2f} | {fmt_rate(ntok[(c, n)] / s)} | {ratio} | "
                         f"{'yes' if equal[(c, n)] else '**no**'} |")
        for n in skipped:
            lines.append(f"| {c} | {n} | skipped (see below) | | | |")
    lines.append("")
    return lines, results


def long_word_section(loaded, rounds, budget) -> list[str]:
    lines = [
        f"## Cost growth on one long word (best of {rounds}; a slow 200k word runs once)",
        "",
        "A single pre-token with no spaces. A linear tokenizer shows a ratio of about 10×.",
        "",
        "| word | peer | 20,000 chars | 200,000 chars | ratio |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    small, big = common.LONG_WORD_SIZES
    for script in common.LONG_WORD_SCRIPTS:
        w_small = corpora.long_word(small, script)
        w_big = corpora.long_word(big, script)
        for n, p in loaded.items():
            log(f"long word {script}: {n}")
            t_small, _ = common.best_of(p.encode, w_small, rounds)
            projected = t_small * (big / small) ** 2  # if it were quadratic
            if projected <= budget:
                r_big = rounds if projected < 10 else 1
                t_big, _ = common.best_of(p.encode, w_big, r_big)
                big_cell, ratio = fmt_s(t_big), f"{t_big / t_small:.1f}×"
            else:
                res = run_child("long_word", {"peer": n, "n": big, "script": script}, timeout=budget)
                if "seconds" in res:
                    t_big = res["seconds"]
                    big_cell, ratio = fmt_s(t_big), f"{t_big / t_small:.1f}×"
                elif "timeout" in res:
                    big_cell = f"> {budget:.0f} s (stopped)"
                    ratio = f"> {budget / t_small:.0f}×"
                else:
                    big_cell, ratio = f"error: {res.get('error')}", "n/a"
            label = {"latin": "letters a-z (+accents)", "cjk": "CJK ideographs"}.get(script, script)
            lines.append(f"| {label} | {n} | {fmt_s(t_small)} | {big_cell} | {ratio} |")
    lines.append("")
    return lines


def batch_section(loaded, rounds) -> list[str]:
    lines = [
        f"## Batch encoding (best of {rounds}; a fresh process per peer)",
        "",
        "`encode_batch` over the corpus documents. HF: `RAYON_NUM_THREADS`=threads "
        "(`TOKENIZERS_PARALLELISM=false` for 1); tiktoken: `encode_ordinary_batch(num_threads=)`; "
        "bpe-qwen: `encode_batch_parallel(num_workers=)`; qwen4exp: `encode_batch(num_threads=)`. "
        "1 and 2 threads alternate round by round in one process, except HF (one process per "
        "thread count, as Rayon's pool is fixed per process).",
        "",
        "| corpus | peer | threads | MB/s | tokens/s | vs 1 thread | batch == encode |",
        "| --- | --- | ---: | ---: | ---: | ---: | :---: |",
    ]
    res = {}
    for n in loaded:
        if loaded[n].encode_batch is None:
            lines.append(f"| all | {n} | | no batch API | | | |")
            continue
        job = {"peer": n, "rounds": rounds, "corpora": list(common.THROUGHPUT_CORPORA)}
        if loaded[n].batch_threads_in_process:
            log(f"batch: {n} x1, x2 (one process, interleaved)")
            r = run_child("batch", {**job, "threads": [1, 2]})
            for t in (1, 2):
                res[(n, t)] = r.get(str(t), r)
        else:  # HF: Rayon's pool size is fixed per process
            for t in (1, 2):
                log(f"batch: {n} x{t} (own process)")
                r = run_child("batch", {**job, "threads": [t]}, threads=t)
                res[(n, t)] = r.get(str(t), r)
    for c in common.THROUGHPUT_CORPORA:
        for (n, threads), r in res.items():
            if c not in r:
                why = r.get("error") or (f"timeout {r['timeout']} s" if "timeout" in r else "?")
                lines.append(f"| {c} | {n} | {threads} | skipped: {why} | | | |")
                continue
            x = r[c]
            one = res.get((n, 1), {}).get(c)
            speed = f"{one['seconds'] / x['seconds']:.2f}×" if one else "n/a"
            lines.append(f"| {c} | {n} | {threads} | {x['bytes'] / x['seconds'] / 1e6:.2f} | "
                         f"{fmt_rate(x['tokens'] / x['seconds'])} | {speed} | "
                         f"{'yes' if x['batch_equals_encode'] else '**no**'} |")
    lines.append("")
    return lines


def load_section(names, skipped) -> list[str]:
    lines = [
        "## Load time and resident memory (a fresh process per peer)",
        "",
        "Time from importing the peer's package to its first `encode` returning; RSS growth "
        "over a process that has already run `import numpy` (from /proc/self/status).",
        "",
        "| peer | time to first encode | RSS delta | peak RSS delta |",
        "| --- | ---: | ---: | ---: |",
    ]
    for n in names:
        log(f"load: {n}")
        best = None
        for _ in range(2):
            r = run_child("load", {"peer": n})
            if "seconds" not in r:
                best = r
                break
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        if "seconds" not in best:
            lines.append(f"| {n} | skipped: {best.get('error', best)} | | |")
            continue
        lines.append(f"| {n} | {fmt_s(best['seconds'])} | {best['rss_delta_kib'] / 1024:.0f} MiB | "
                     f"{best['peak_delta_kib'] / 1024:.0f} MiB |")
    for n, why in skipped.items():
        lines.append(f"| {n} | skipped: {why} | | |")
    lines.append("")
    return lines


def parity_section(loaded, ref) -> list[str]:
    lines = [
        "## Parity with the HF reference (tokenizer.json with `added_tokens` emptied)",
        "",
        "Documents whose ids differ, per corpus; then the hand-picked trap inputs on which the "
        "peer differs (the last three are outside the benchmark's inputs: non-NFC text, and "
        "added-token spellings, which plain text must encode as ordinary BPE).",
        "",
        "| peer | code | multilingual | whitespace | trap inputs that differ |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for n, p in loaded.items():
        log(f"parity: {n}")
        par = common.documents_parity(p.encode, ref)
        spots = common.spot_check_failures(p.encode, ref)
        cells = [f"{b}/{t}" if b == 0 else f"**{b}/{t}**" for b, t in par.values()]
        lines.append(f"| {n} | {' | '.join(cells)} | {'; '.join(spots) or 'none'} |")
    lines.append("")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per measurement (best is kept)")
    ap.add_argument("--batch-rounds", type=int, default=3)
    ap.add_argument("--long-word-budget", type=float, default=60.0,
                    help="a 200k-character word whose time, extrapolated quadratically from "
                         "the 20k one, exceeds this runs in a subprocess stopped after this long")
    ap.add_argument("--peers", default=",".join(peers.PEER_NAMES))
    ap.add_argument("--quick", action="store_true", help="2 rounds, no batch/load sections")
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--no-load", action="store_true")
    ap.add_argument("--no-long-word", action="store_true")
    ap.add_argument("--no-parity", action="store_true")
    ap.add_argument("--output", help="write the markdown here as well")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        job = json.loads(a.child)
        if job["kind"] == "load":
            out = child_load(job["peer"])
        elif job["kind"] == "batch":
            out = child_batch(job["peer"], job["threads"], job["rounds"], job["corpora"])
        else:
            out = child_long_word(job["peer"], job["n"], job["script"])
        print(json.dumps(out))
        return 0

    if a.quick:
        a.rounds, a.no_batch, a.no_load = 2, True, True
    names = [n.strip() for n in a.peers.split(",") if n.strip()]
    t_start = time.perf_counter()
    log("building corpora ...")
    corpora.corpus_info()
    log("loading peers ...")
    peers.bpe_qwen_dir() if "bpe-qwen" in names else None
    loaded, skipped = peers.load_peers(names)
    for n, why in skipped.items():
        log(f"skipping {n}: {why}")
    log("reference ids ...")
    ref = peers.build_hf_reference()
    ref_ids = {c: list(ref(common.corpus_text(c))) for c in common.THROUGHPUT_CORPORA}

    out = ["# qwen4exp encode benchmarks", ""]
    out += environment_section(loaded, skipped)
    tp_lines, _ = throughput_section(loaded, skipped, ref_ids, a.rounds)
    out += tp_lines
    if not a.no_long_word:
        out += long_word_section(loaded, a.rounds, a.long_word_budget)
    if not a.no_batch:
        out += batch_section(loaded, a.batch_rounds)
    if not a.no_load:
        out += load_section(list(loaded), skipped)
    if not a.no_parity:
        out += parity_section(loaded, ref)
    if skipped:
        out.append("Skipped peers: " + "; ".join(f"`{k}`: {v}" for k, v in skipped.items()))
        out.append("")
    out.append(f"_Total run time {time.perf_counter() - t_start:.0f} s. Numbers from one run on "
               "one machine; rerun on yours (`python bench/report.py`)._")
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
