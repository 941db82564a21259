#!/usr/bin/env python
"""Benchmark report: all peers, one run, best of N, printed as markdown.

    python bench/report.py                 # everything (~3-5 min on 2 cores)
    python bench/report.py --quick         # fewer rounds, no batch/load sections
    python bench/report.py --output bench/RESULTS.md
    python bench/report.py --peers qwen4exp,fastokens --no-long-word --no-parity   # the targets only

Sections: qwen4exp against fastokens (the speed targets); single-
threaded encode throughput (all peers interleaved round by round: the whole
corpus in one call, fresh documents on a warm object, and cold objects);
long-word cost growth (20,000 vs 200,000 characters); batch encoding with 1
and 2 threads (CPU use, the work split's critical path, qwen4exp's 1 -> 2
scaling target); the batch job (bench/batch_job.py: a JSONL file of tens of
MB to Parquet in whole processes against gigatoken's file API, and
encode_arrow against gigatoken's encode_batch); the batch job's peak memory
at 1x, 4x and 16x its corpus (bench/batch_memory.py); load time and resident
memory (one fresh process per peer, qwen4exp's load target); with --cli the
`qwen4exp batch` command on code and chats end to end; with --chat the chat
rows (bench/chat_rows.py: render + encode against apply_chat_template,
renderers and tml-renderers);
parity with the HF reference. Progress goes to stderr, the markdown to
stdout (or --output). This is the one driver for these measurements.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import subprocess
import tempfile
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


HEAVY_MODULES = ("pyarrow", "tqdm", "pandas", "tokenizers", "transformers", "qwen4exp.cli", "jinja2")
LOAD_TARGET_S, LOAD_TARGET_MB = 0.1, 60      # qwen4exp: import + construct + first encode
SCALING_REQUIRED = 1.7                       # qwen4exp batch, 1 -> 2 threads
BATCH_CORPORA = ("code", "multilingual", "mixed")


def _heavy(before) -> list:
    return sorted(m for m in set(sys.modules) - before
                  if m.split(".")[0] in HEAVY_MODULES or m in HEAVY_MODULES)


def child_load(name: str) -> dict:
    import numpy  # noqa: F401  the baseline: python -c "import numpy"

    before = set(sys.modules)
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
        "heavy": _heavy(before) if name == "qwen4exp" else [],
    }


def child_import_only() -> dict:
    import numpy  # noqa: F401

    before = set(sys.modules)
    rss0, _ = rss_kib()
    t0 = time.perf_counter()
    import qwen4exp  # noqa: F401

    t1 = time.perf_counter()
    rss1, _ = rss_kib()
    return {"seconds": t1 - t0, "rss_delta_kib": rss1 - rss0, "heavy": _heavy(before)}


def batch_documents(name: str) -> list:
    if name == "mixed":  # both, in order: cheap code first, then costly multilingual
        return list(corpora.DOCUMENTS["code"]()) + list(corpora.DOCUMENTS["multilingual"]())
    return list(corpora.DOCUMENTS[name]())


def child_batch(name: str, threads_list, corpus_names) -> None:
    """A batch child that stays up for the whole section, so that every
    peer's rounds interleave in time (the machine's speed drifts over
    seconds; peers timed one after another would each meet a different
    machine). It builds the peer, makes one untimed call per corpus and
    thread count (batch workers stay warm between calls), checks batch ==
    encode, and replies with a `ready` line; then each `round` line gets one
    timed encode_batch per corpus and thread count, interleaved. Per call:
    wall, process CPU and the calling thread's CPU; with several threads the
    busiest thread's CPU (the critical path) is max(calling thread,
    everything else). Commands come on stdin; replies are JSON lines."""

    def reply(obj):
        print(json.dumps(obj), flush=True)

    peer = peers.BUILDERS[name]()
    if peer.encode_batch is None:
        reply({"error": "no batch API"})
        return
    docs = {c: batch_documents(c) for c in corpus_names}
    ready = {}
    for c in corpus_names:
        for t in threads_list:
            ids = peer.encode_batch(docs[c], num_threads=t)
            ready.setdefault(str(t), {})[c] = {
                "bytes": sum(len(d.encode("utf-8")) for d in docs[c]),
                "tokens": sum(len(x) for x in ids), "documents": len(docs[c]),
                "batch_equals_encode": [list(x) for x in ids] == [list(peer.encode(d)) for d in docs[c]],
            }
            del ids
    reply({"ready": ready})
    for line in sys.stdin:
        if line.strip() != "round":
            break
        timings = {}
        for c in corpus_names:
            for t in threads_list:
                gc.collect()
                gc.disable()
                try:
                    cpu0, main0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
                    ids = peer.encode_batch(docs[c], num_threads=t)
                    wall = time.perf_counter() - w0
                    cpu, main_cpu = time.process_time() - cpu0, time.thread_time() - main0
                finally:
                    gc.enable()
                del ids
                crit = max(main_cpu, cpu - main_cpu) if t > 1 else cpu
                timings.setdefault(str(t), {})[c] = {"seconds": wall, "cpu_seconds": cpu,
                                                     "critical_cpu_seconds": crit}
        reply({"round": timings})


class BatchChild(common.RoundChild):
    """A child_batch process, driven one round at a time."""

    def __init__(self, peer: str, threads_list, corpus_names):
        cmd, env = child_command("batch", {"peer": peer, "threads": list(threads_list),
                                           "corpora": list(corpus_names)}, max(threads_list))
        self.peer, self.threads = peer, list(threads_list)
        super().__init__(cmd, env)

    def ready(self) -> dict | None:
        return self.read()


def child_long_word(name: str, n: int, script: str) -> dict:
    peer = peers.BUILDERS[name]()
    w = corpora.long_word(n, script)
    secs, ids = common.best_of(peer.encode, w, 1)
    return {"seconds": secs, "tokens": len(ids)}


def child_reference(path: str) -> dict:
    """The HF reference's ids of each corpus, whole and per measured document,
    pickled to `path` as int32 arrays. It runs in a process of its own: HF
    `tokenizers` leaves some 300 MB of freed memory in glibc's heap after
    the corpora, and a large malloc in the measuring process then searches
    it (docs/PERFORMANCE.md, "A heap left fragmented")."""
    import pickle

    import numpy as np

    ref = peers.build_hf_reference()
    out = {c: (np.asarray(ref(corpus_text(c)), dtype=np.int32),
               [np.asarray(ref(d), dtype=np.int32) for d in split_documents(c)[1]]) for c in THROUGHPUT}
    with open(path, "wb") as f:
        pickle.dump(out, f)
    return {"corpora": len(out)}


def reference_ids() -> dict:
    """corpus -> (whole corpus ids, [measured document ids]) from child_reference."""
    import pickle

    with tempfile.TemporaryDirectory(prefix="qwen4exp-bench-ref-") as tmp:
        path = Path(tmp) / "reference.pickle"
        got = run_child("reference", {"path": str(path)})
        if "error" in got:
            raise SystemExit(f"the HF reference ids could not be computed: {got['error']}")
        with open(path, "rb") as f:
            ref = pickle.load(f)
    for c in THROUGHPUT:
        if len(ref[c][1]) != len(split_documents(c)[1]):
            raise SystemExit(f"the reference process split corpus {c!r} differently")
    return ref


def child_command(kind: str, args: dict, threads: int) -> tuple[list, dict]:
    """The command line and environment of a child job of this script."""
    env = dict(os.environ)
    env["BENCH_THREADS"] = str(threads)
    return [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps({"kind": kind, **args})], env


def run_child(kind: str, args: dict, threads: int = 1, timeout: float | None = None):
    cmd, env = child_command(kind, args, threads)
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
    lines.append(f"- CPU: {common.cpu_model()}")
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


THROUGHPUT = (*common.THROUGHPUT_CORPORA, "short")  # the throughput corpora, and short documents


def corpus_text(name: str) -> str:
    """A throughput corpus as one text (the short documents joined)."""
    return "".join(short_documents()) if name == "short" else common.corpus_text(name)


def short_documents() -> list:
    """Short documents in many locales: each non-blank line of the multilingual
    corpus (a paragraph or a record, about 310 bytes on average), as the short
    texts of chat and retrieval workloads; one thread encodes each."""
    return [p + "\n" for d in corpora.DOCUMENTS["multilingual"]() for p in d.split("\n") if p.strip()]


def split_documents(corpus: str) -> tuple[list, list]:
    """(warm-up documents, measured documents): every fourth document warms a
    tokenizer up, the other three quarters are measured, fresh to it."""
    return common.warm_and_measured(short_documents() if corpus == "short" else list(corpora.DOCUMENTS[corpus]()))



def ids_check(loaded, reference) -> dict:
    """{(corpus, peer): what differs from the HF reference} before any timing:
    the whole corpus in one call, and each measured document (an empty list:
    the same ids). A peer that differs is shown as such; its speed is not
    compared with qwen4exp's as if it did the same work. `reference`:
    reference_ids()."""
    import numpy as np

    def same(ids, want) -> bool:
        got = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64)
        return got.shape == want.shape and bool((got == want).all())

    out = {}
    for c in THROUGHPUT:
        docs = split_documents(c)[1]
        whole, want = reference[c]
        for n, p in loaded.items():
            log(f"ids check: {c}, {n}")
            bad = []
            if not same(p.encode(corpus_text(c)), whole):
                bad.append("whole corpus")
            k = sum(not same(p.encode(d), w) for d, w in zip(docs, want))
            if k:
                bad.append(f"{k}/{len(docs)} documents")
            out[(c, n)] = bad
    return out


def differ_cell(bad) -> str:
    return "yes" if not bad else f"**no** ({', '.join(bad)})"


def warm_fresh_seconds(name: str, warm_docs: list[str], docs: list[str]) -> float:
    """A new `name` tokenizer warmed on warm_docs, timed on docs (one call each)."""
    fresh = peers.BUILDERS[name]()
    for d in warm_docs:
        fresh.encode(d)
    return common.time_documents(fresh.encode, docs)


def throughput_section(loaded, skipped, differ, rounds) -> tuple[list[str], dict]:
    """Single-threaded encode, three ways, all peers interleaved round by round:
    `whole`: one call on the whole corpus (the same text each round, so caches
    are warm on it); `warm`: a fresh object warmed on a quarter of the
    documents, timed on the other three quarters, one call per document;
    `cold`: a fresh object after a one-word warm-up, on those same documents."""
    names = list(loaded)
    kinds = ("whole", "warm", "cold")
    best = {(c, n, k): float("inf") for c in THROUGHPUT for n in names for k in kinds}
    ntok = {}
    split = {c: split_documents(c) for c in THROUGHPUT}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)] if names else []
        log(f"throughput round {r + 1}/{rounds} ({', '.join(order)})")
        for c in THROUGHPUT:
            text = corpus_text(c)
            warm_docs, docs = split[c]
            for n in order:
                secs, ids = common.best_of(loaded[n].encode, text, 1)
                best[(c, n, "whole")] = min(best[(c, n, "whole")], secs)
                ntok[(c, n)] = len(ids)
                del ids
                fresh = peers.BUILDERS[n]()  # builders end with a one-word encode
                best[(c, n, "cold")] = min(best[(c, n, "cold")], common.time_documents(fresh.encode, docs))
                best[(c, n, "warm")] = min(best[(c, n, "warm")], warm_fresh_seconds(n, warm_docs, docs))
    lines = [
        f"## Single-threaded encode throughput (best of {rounds}, peers interleaved)",
        "",
        "MB = 10^6 bytes of UTF-8 input. **whole**: one `encode` call on the whole corpus, "
        "the same text every round (tokens/s counts the peer's own output). **warm, fresh "
        "documents**: a new tokenizer object encodes every fourth document, then is timed on "
        "the other three quarters, one call per document, texts it has not seen. **cold**: a "
        "new object after a one-word warm-up, timed on those same documents. **short**: each "
        "non-blank line of the multilingual corpus as a document (about 310 bytes; whole: joined). "
        "`×` columns: qwen4exp's speed over the peer's (above 1 = qwen4exp faster). Every peer's ids are "
        "checked against the HF reference before any timing (the whole corpus, and each measured document); "
        "where they differ the `×` cells say so instead of a ratio: that peer did other work.",
        "",
        "| corpus | peer | whole MB/s | tokens/s | warm, fresh documents MB/s | cold MB/s "
        "| × whole | × warm, fresh | × cold | ids == HF reference |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    results = {}
    for c in THROUGHPUT:
        nbytes = len(corpus_text(c).encode("utf-8"))
        dbytes = sum(len(d.encode("utf-8")) for d in split[c][1])
        for n in names:
            size = {"whole": nbytes, "warm": dbytes, "cold": dbytes}
            mbs = {k: size[k] / best[(c, n, k)] / 1e6 for k in kinds}
            results[(c, n)] = mbs
            same = not differ[(c, n)] and not differ[(c, "qwen4exp")] if "qwen4exp" in names else False
            ratios = [f"{best[(c, n, k)] / best[(c, 'qwen4exp', k)]:.2f}×" if same
                      else ("ids differ" if "qwen4exp" in names else "n/a") for k in kinds]
            lines.append(f"| {c} | {n} | {mbs['whole']:.2f} | {fmt_rate(ntok[(c, n)] / best[(c, n, 'whole')])} | "
                         f"{mbs['warm']:.2f} | {mbs['cold']:.2f} | {' | '.join(ratios)} | "
                         f"{differ_cell(differ[(c, n)])} |")
        for n in skipped:
            lines.append(f"| {c} | {n} | skipped (see below) | | | | | | | |")
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


def run_batch_children(loaded, rounds) -> dict:
    """{(peer, threads): {corpus: best figures} or {"error": why}}: every
    peer's batch child started and warmed first, then `rounds` rounds in
    which each child times one call per corpus and thread count in turn
    (the order rotating each round), best wall and best critical path kept."""
    children = []
    for n in loaded:
        if loaded[n].encode_batch is None:
            continue
        if loaded[n].batch_threads_in_process:
            children.append(BatchChild(n, [1, 2], BATCH_CORPORA))
        else:
            children += [BatchChild(n, [t], BATCH_CORPORA) for t in (1, 2)]
    res = {}
    try:
        for ch in children:
            log(f"batch: {ch.peer} x{','.join(map(str, ch.threads))} (own process, warming up)")
            ready = ch.ready()
            for t in ch.threads:
                res[(ch.peer, t)] = {c: dict(v) for c, v in ready["ready"][str(t)].items()} if ready else {}
        for r in range(max(1, rounds)):
            log(f"batch: round {r + 1} of {rounds}")
            k = r % max(1, len(children))
            for ch in children[k:] + children[:k]:
                got = ch.round()
                if got is None:
                    continue
                for t, per in got["round"].items():
                    for c, x in per.items():
                        b = res[(ch.peer, int(t))][c]
                        if x["seconds"] < b.get("seconds", float("inf")):
                            b["seconds"], b["cpu_wall"] = x["seconds"], x["cpu_seconds"] / x["seconds"]
                        if x["critical_cpu_seconds"] < b.get("critical_cpu_seconds", float("inf")):
                            b["critical_cpu_seconds"], b["cpu_seconds"] = x["critical_cpu_seconds"], x["cpu_seconds"]
    finally:
        for ch in children:
            ch.close()
    for ch in children:
        for t in ch.threads:
            if ch.error or not all("seconds" in v for v in res[(ch.peer, t)].values()):
                res[(ch.peer, t)] = {"error": ch.error or "no round finished"}
    return res


def busy_single_section(loaded, rounds, differ, busy: int) -> list[str]:
    """One call per fresh document (the `warm, fresh documents` measurement)
    while `busy` other processes spin: qwen4exp's encode() cuts a document of
    a few KB across the crew, which a loaded machine may not run."""
    names = list(loaded)
    corpora_ = ("code", "multilingual")
    split = {c: split_documents(c) for c in corpora_}
    best = {(c, n): float("inf") for c in corpora_ for n in names}
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            log(f"busy one-call round {r + 1}/{rounds} ({', '.join(order)})")
            for c in corpora_:
                for n in order:
                    best[(c, n)] = min(best[(c, n)], warm_fresh_seconds(n, *split[c]))
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    plural = "es" if busy > 1 else ""
    lines = [f"## One call per fresh document beside {busy} busy process{plural} (best of {rounds})", "",
             f"The `warm, fresh documents` measurement above, while {busy} other process{plural} spun on the "
             "CPUs. qwen4exp's `encode()` cuts a text from 2 KB (1.5 KB if not ASCII) across its crew; "
             "the peers' `encode` runs on the calling thread.", "",
             "| corpus | peer | MB/s | × qwen4exp |", "| --- | --- | ---: | ---: |"]
    for c in corpora_:
        dbytes = sum(len(d.encode("utf-8")) for d in split[c][1])
        for n in names:
            same = "qwen4exp" in names and not differ[(c, n)] and not differ[(c, "qwen4exp")]
            ratio = f"{best[(c, n)] / best[(c, 'qwen4exp')]:.2f}×" if same else "n/a"
            lines.append(f"| {c} | {n} | {dbytes / best[(c, n)] / 1e6:.2f} | {ratio} |")
    return lines + [""]


def busy_batch_section(loaded, rounds, differ, busy: int) -> list[str]:
    """The batch section run again while `busy` other processes spin (each one
    core's worth of demand), so that every peer's pool meets a loaded machine."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        lines, _ = batch_section(loaded, rounds, differ)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    title = lines[0].replace("## Batch encoding", f"## Batch encoding beside {busy} busy process"
                             + ("es" if busy > 1 else ""), 1)
    return [title, "", f"The section above, while {busy} other process{'es' if busy > 1 else ''} "
            "spun on the CPUs (`python -c 'while True: pass'`), started before the peers' children "
            "and stopped after them."] + lines[1:]


def batch_section(loaded, rounds, differ) -> tuple[list[str], list[str]]:
    lines = [
        f"## Batch encoding, 1 and 2 threads (best of {rounds}, after one untimed call)",
        "",
        "`encode_batch` over the corpus documents (`mixed`: code then multilingual, cheap first, "
        "costly last). HF, fastokens, kitoken: Rayon's pool is fixed per process, so one "
        "process per thread count (`RAYON_NUM_THREADS`); tiktoken: `encode_ordinary_batch("
        "num_threads=)`; bpe-qwen: `encode_batch_parallel(num_workers=)`; qwen4exp: "
        "`encode_batch(num_threads=)`, 1 and 2 threads alternating in one process. Every "
        "peer's process stays up for the whole section and the rounds interleave: in each "
        "round every process times its calls in turn, so that all peers meet the same "
        "machine (it drifts over seconds).",
        "",
        "CPU/wall: process CPU seconds over wall seconds (about `threads` when the threads really "
        "ran in parallel; much less means the machine did not give this process the cores). "
        "`1 -> 2 CPU path` (qwen4exp): CPU seconds with 1 thread over the busiest thread's CPU "
        "seconds with 2, the speed-up its work split allows on two idle cores. "
        "`× qwen4exp`: qwen4exp's wall-clock speed over the peer's at the same thread count.",
        "",
        "| corpus | peer | threads | MB/s | tokens/s | CPU/wall | 1 -> 2 wall | 1 -> 2 CPU path "
        "| × qwen4exp | batch == encode |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    for n in loaded:
        if loaded[n].encode_batch is None:
            lines.append(f"| all | {n} | | no batch API | | | | | | |")
    res = run_batch_children(loaded, rounds)
    verdicts = []
    for c in BATCH_CORPORA:
        for (n, threads), r in res.items():
            if c not in r:
                why = r.get("error") or (f"timeout {r['timeout']} s" if "timeout" in r else "?")
                lines.append(f"| {c} | {n} | {threads} | skipped: {why} | | | | | | |")
                continue
            x = r[c]
            one = res.get((n, 1), {}).get(c)
            wall = path = ""
            if threads == 2 and one:
                wall = f"{one['seconds'] / x['seconds']:.2f}×"
                if n == "qwen4exp":
                    path = f"{one['cpu_seconds'] / x['critical_cpu_seconds']:.2f}×"
                    verdicts.append(scaling_verdict(c, one["seconds"] / x["seconds"],
                                                    one["cpu_seconds"] / x["critical_cpu_seconds"],
                                                    x["cpu_wall"]))
            q = res.get(("qwen4exp", threads), {}).get(c)
            vs = f"{x['seconds'] / q['seconds']:.2f}×" if q else "n/a"
            parts = ("code", "multilingual") if c == "mixed" else (c,)
            if any(differ.get((p, n)) or differ.get((p, "qwen4exp")) for p in parts):
                vs = "ids differ"
            lines.append(f"| {c} | {n} | {threads} | {x['bytes'] / x['seconds'] / 1e6:.2f} | "
                         f"{fmt_rate(x['tokens'] / x['seconds'])} | {x['cpu_wall']:.2f} | {wall} | {path} | "
                         f"{vs} | {'yes' if x['batch_equals_encode'] else '**no**'} |")
    lines.append("")
    lines += verdicts
    lines.append("")
    ratios = {}
    for c in BATCH_CORPORA:
        q, f = res.get(("qwen4exp", 2), {}).get(c), res.get(("fastokens", 2), {}).get(c)
        if q and f:
            ratios[c] = f["seconds"] / q["seconds"]
    return lines, ratios


def scaling_verdict(corpus, wall, path, cpu_wall) -> str:
    if cpu_wall >= 1.5:
        return (f"- qwen4exp {corpus}: 1 -> 2 threads wall {wall:.2f}× (required {SCALING_REQUIRED}×): "
                f"**{'met' if wall >= SCALING_REQUIRED else 'NOT met'}** (CPU path {path:.2f}×)")
    return (f"- qwen4exp {corpus}: the 2-thread run got {cpu_wall:.2f} CPUs (busy machine), so wall "
            f"{wall:.2f}× means nothing; CPU path {path:.2f}× (required {SCALING_REQUIRED}×): "
            f"**{'met' if path >= SCALING_REQUIRED else 'NOT met'}**")


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
    q = None
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
        if n == "qwen4exp":
            q = best
    for n, why in skipped.items():
        lines.append(f"| {n} | skipped: {why} | | |")
    lines.append("")
    imp = min((run_child("import", {}) for _ in range(2)), key=lambda r: r.get("seconds", 1e9))
    if "seconds" in imp:
        lines.append(f"`import qwen4exp` alone: {fmt_s(imp['seconds'])}, {imp['rss_delta_kib'] / 1024:.1f} MiB; "
                     f"heavy modules imported: {', '.join(imp['heavy']) or 'none'}.")
    if q is not None:
        met = (q["seconds"] < LOAD_TARGET_S and q["rss_delta_kib"] / 1024 < LOAD_TARGET_MB and not q["heavy"])
        lines.append(f"qwen4exp target (< {LOAD_TARGET_S * 1e3:.0f} ms, < {LOAD_TARGET_MB} MB beyond numpy, "
                     f"no heavy imports): **{'met' if met else 'NOT met'}**"
                     + (f" (heavy modules: {', '.join(q['heavy'])})" if q["heavy"] else ""))
    lines.append("")
    return lines


def cli_section() -> list[str]:
    lines = [
        "## CLI end to end: `python -m qwen4exp batch IN.jsonl OUT.parquet --threads N`",
        "",
        "IN: every code and multilingual document as a {\"text\"} record and again as a "
        "one-turn chat request. Throughput from the command's own summary (excludes process "
        "start and tokenizer load).",
        "",
        "| threads | records/s | MB/s | tokens/s | wall incl. start |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    docs = batch_documents("mixed")
    with tempfile.TemporaryDirectory(prefix="qwen4exp-bench-") as d:
        src = Path(d) / "in.jsonl"
        with open(src, "w", encoding="utf-8") as f:
            for doc in docs:
                f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
                f.write(json.dumps({"messages": [{"role": "user", "content": doc}],
                                    "add_generation_prompt": True}, ensure_ascii=False) + "\n")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src")]
                                            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        for threads in (1, 2):
            log(f"cli batch x{threads}")
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "qwen4exp", "batch", str(src), str(Path(d) / "out.parquet"),
                                "--threads", str(threads), "--progress", "never"],
                               env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            m = re.search(r"in ([\d.]+) s: ([\d,]+) records/s, ([\d.,]+) MB/s, ([\d,]+) tokens/s", p.stderr)
            if p.returncode != 0 or not m:
                lines.append(f"| {threads} | failed: {p.stderr.strip().splitlines()[-1:]} | | | |")
                continue
            lines.append(f"| {threads} | {m.group(2)} | {m.group(3)} | {m.group(4)} | {wall:.2f} s |")
    lines.append("")
    return lines


def chat_section(rounds: int, tml_python: str | None) -> list[str]:
    """bench/chat_rows.py's section (qwen4exp, apply_chat_template, renderers and
    tml-renderers on the same conversations), in a process of its own: it loads
    transformers and the chat peers. Its progress goes to this stderr."""
    cmd = [sys.executable, str(HERE / "chat_rows.py"), "--rounds", str(rounds)]
    p = subprocess.run(cmd + (["--tml-python", tml_python] if tml_python else []), stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return ["## Chat rows", "", f"bench/chat_rows.py failed (exit status {p.returncode}, see stderr)", ""]
    return p.stdout.splitlines()


def targets_section(single, batch_ratios) -> list[str]:
    """The speed targets, from this run's numbers: qwen4exp against fastokens,
    and one call on fresh code documents against gigatoken's encode."""
    lines = ["## qwen4exp against fastokens and gigatoken (the targets)", "",
             "| measurement | corpus | peer | qwen4exp / peer speed | target | |",
             "| --- | --- | --- | ---: | ---: | :---: |"]
    rows = []
    for c in THROUGHPUT:
        q, f = single.get((c, "qwen4exp")), single.get((c, "fastokens"))
        if q and f:
            rows.append(("warm, fresh documents, 1 thread", c, "fastokens", q["warm"] / f["warm"], 1.25))
            rows.append(("cold, 1 thread", c, "fastokens", q["cold"] / f["cold"], 1.0))
    q, g = single.get(("code", "qwen4exp")), single.get(("code", "gigatoken"))
    if q and g:
        rows.append(("warm, fresh documents, one call each", "code", "gigatoken", q["warm"] / g["warm"], 1.25))
    for c, r in batch_ratios.items():
        rows.append(("encode_batch, 2 threads", c, "fastokens", r, 1.25))
    if not rows:
        return []
    for what, c, peer, r, target in rows:
        lines.append(f"| {what} | {c} | {peer} | {r:.2f}× | {target:.2f}× | "
                     f"{'met' if r >= target else '**not met**'} |")
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
    ap.add_argument("--batch-rounds", type=int, default=5)
    ap.add_argument("--long-word-budget", type=float, default=60.0,
                    help="a 200k-character word whose time, extrapolated quadratically from "
                         "the 20k one, exceeds this runs in a subprocess stopped after this long")
    ap.add_argument("--peers", default=",".join(peers.PEER_NAMES))
    ap.add_argument("--quick", action="store_true", help="2 rounds, no batch/load sections")
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="the batch section and one call per fresh document again beside N busy processes "
                         "(a spinning loop each): "
                         "a user's machine is rarely idle, and thread pools degrade differently")
    ap.add_argument("--no-load", action="store_true")
    ap.add_argument("--no-long-word", action="store_true")
    ap.add_argument("--no-parity", action="store_true")
    ap.add_argument("--no-batch-job", action="store_true",
                    help="skip the batch job (JSONL to Parquet, and the Arrow / file APIs; bench/batch_job.py)")
    ap.add_argument("--no-memory", action="store_true",
                    help="skip the batch job's memory at 1x, 4x and 16x its corpus (bench/batch_memory.py)")
    ap.add_argument("--memory-rounds", type=int, default=1)
    ap.add_argument("--cli", action="store_true", help="also time the `qwen4exp batch` command end to end")
    ap.add_argument("--chat", action="store_true",
                    help="also the chat rows (bench/chat_rows.py): render + encode against apply_chat_template, "
                         "renderers and tml-renderers")
    ap.add_argument("--tml-python", default=os.environ.get("BENCH_TML_PYTHON"),
                    help="with --chat: an interpreter with tml-renderers (torch >= 2.10); default $BENCH_TML_PYTHON")
    ap.add_argument("--output", help="write the markdown here as well")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        job = json.loads(a.child)
        if job["kind"] == "load":
            out = child_load(job["peer"])
        elif job["kind"] == "import":
            out = child_import_only()
        elif job["kind"] == "batch":
            child_batch(job["peer"], job["threads"], job["corpora"])
            return 0
        elif job["kind"] == "reference":
            out = child_reference(job["path"])
        else:
            out = child_long_word(job["peer"], job["n"], job["script"])
        print(json.dumps(out))
        return 0

    if a.quick:
        a.rounds, a.no_batch, a.no_load, a.no_batch_job, a.no_memory = 2, True, True, True, True
    names = [n.strip() for n in a.peers.split(",") if n.strip()]
    t_start = time.perf_counter()
    log("building corpora ...")
    corpora.corpus_info()
    log("loading peers ...")
    for n, prepare in (("bpe-qwen", peers.bpe_qwen_dir), ("quicktok", peers.quicktok_dir),
                       ("tuetoken", peers.tuetoken_hub_cache)):
        if n in names:  # made once, before the child processes that use them
            try:
                prepare()
            except peers.PeerUnavailable:
                pass  # load_peers says why
    loaded, skipped = peers.load_peers(names)
    for n, why in skipped.items():
        log(f"skipping {n}: {why}")
    log("reference ids (in a child process) ...")
    reference = reference_ids()

    out = ["# qwen4exp encode benchmarks", ""]
    out += environment_section(loaded, skipped)
    differ = ids_check(loaded, reference)
    tp_lines, single = throughput_section(loaded, skipped, differ, a.rounds)
    batch_lines, batch_ratios = batch_section(loaded, a.batch_rounds, differ) if not a.no_batch else ([], {})
    out += targets_section(single, batch_ratios)
    out += tp_lines
    if not a.no_long_word:
        out += long_word_section(loaded, a.rounds, a.long_word_budget)
    out += batch_lines
    if a.busy:
        out += busy_single_section(loaded, a.rounds, differ, a.busy)
    if a.busy and not a.no_batch:
        out += busy_batch_section(loaded, a.batch_rounds, differ, a.busy)
    if not a.no_batch_job:
        import batch_job

        out += batch_job.section(a.batch_rounds, log)
    if not a.no_memory:
        import batch_memory

        out += batch_memory.section(a.memory_rounds, log=log)
    if not a.no_load:
        out += load_section(list(loaded), skipped)
    if a.cli:
        out += cli_section()
    if a.chat:
        out += chat_section(a.rounds, a.tml_python)
    if not a.no_parity:
        out += parity_section(loaded, peers.build_hf_reference())  # after every timing
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
