#!/usr/bin/env python
"""Local vs Ray: records/s and MB/s on this machine, as markdown.

    PYTHONPATH=src python bench/bench_ray.py            # ~2-4 min on 2 cores
    PYTHONPATH=src python bench/bench_ray.py --rounds 1

Input: every code and multilingual document of tests/corpora.py as a
{"text"} record and again as a one-turn chat request (the input of
bench_batch.py's CLI section), repeated --scale times (default 2: ~18 MB).

1. `qwen4exp batch`: the local engine (--threads 2) against --engine ray
   (a local Ray cluster the command starts: 2 actors of 1 thread), JSONL in
   and Parquet in, Parquet out. Throughput from the command's own summary
   (from the first record read to the last row written: Ray's actor start
   included, cluster start excluded); "wall" adds process start and, for Ray,
   the cluster start.
2. One actor's work without Ray: tokenize_dataset's batch function (Arrow
   batch in, Arrow batch out) called here, 1 thread, against the bare calls.
3. `qwen4exp.runtimes.ray.tokenize_dataset` on a running 2-CPU cluster against the
   same work in one process (text: encode_batch with 2 threads; chat:
   render_chat + encode_chats with 2 threads). Best of --rounds; the Ray time
   is a whole dataset execution (actor start, scheduling, Arrow transfers);
   an identity UDF over the same blocks measures Ray's own share.

MB are UTF-8 bytes of the texts and of the rendered chats. On a machine with
2 cores Ray can only add overhead; the point of the engine is more machines
(README: "Scaling out with Ray").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

SUMMARY = re.compile(r"in ([\d.]+) s: ([\d,]+) records/s, ([\d.,]+) MB/s, ([\d,]+) tokens/s")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def _records(scale: int):
    import corpora

    docs = (list(corpora.code_documents()) + list(corpora.multilingual_documents())) * scale
    texts = [{"text": d} for d in docs]
    chats = [{"messages": [{"role": "user", "content": d}], "add_generation_prompt": True} for d in docs]
    return texts, chats


def cli_section(texts, chats, d: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = d / "in.jsonl"
    with open(jsonl, "w", encoding="utf-8") as f:
        for t, c in zip(texts, chats):
            f.write(json.dumps(t, ensure_ascii=False) + "\n" + json.dumps(c, ensure_ascii=False) + "\n")
    parquet = d / "in.parquet"
    pq.write_table(pa.table({"text": [t["text"] for t in texts]}), parquet, row_group_size=256)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    lines = [
        "## `qwen4exp batch`: local engine vs `--engine ray`",
        "",
        "| input | engine | records/s | MB/s | tokens/s | wall |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for src, what in ((jsonl, "JSONL, texts + chats"), (parquet, "Parquet, texts")):
        for engine, extra in (("local", ["--threads", "2"]), ("ray", ["--engine", "ray"])):
            log(f"cli {src.name} {engine}")
            t0 = time.perf_counter()
            p = subprocess.run(
                [sys.executable, "-m", "qwen4exp", "batch", str(src), str(d / "out.parquet"),
                 "--progress", "never", *extra],
                env=env, capture_output=True, text=True, timeout=900,
            )
            wall = time.perf_counter() - t0
            m = SUMMARY.search(p.stderr)
            if p.returncode != 0 or not m:
                lines.append(f"| {what} | {engine} | failed: {p.stderr.strip().splitlines()[-1:]} | | | |")
                continue
            lines.append(f"| {what} | {engine} | {m.group(2)} | {m.group(3)} | {m.group(4)} | {wall:.1f} s |")
    return lines + [""]


def worker_section(texts, chats, rounds: int) -> list[str]:
    """The actors' batch function called in this process, 1 thread, against
    the bare library calls: what one actor does per CPU, without Ray."""
    import pyarrow as pa

    import qwen4exp
    from qwen4exp.render.chat import render_chat
    from qwen4exp.runtimes.ray import _TokenizeColumn

    tok = qwen4exp.Tokenizer()
    text_col = [t["text"] for t in texts]
    chat_col = [json.dumps(c, ensure_ascii=False) for c in chats]
    blocks = {k: [pa.table({"x": col[i : i + 256]}) for i in range(0, len(col), 256)]
              for k, col in (("text", text_col), ("chat", chat_col))}
    text_mb = sum(len(t.encode("utf-8")) for t in text_col) / 1e6
    chat_mb = sum(len(render_chat(c["messages"], add_generation_prompt=True).data) for c in chats) / 1e6
    bare = {
        "text": lambda: tok.encode_batch(text_col, num_threads=1),
        "chat": lambda: tok.encode_chats([render_chat(c["messages"], add_generation_prompt=True) for c in chats],
                                         num_threads=1),
    }
    lines = [
        f"## One actor's work without Ray: the batch function vs the bare calls (1 thread, best of {rounds})",
        "",
        "MB/s of the bare call (encode_batch; render_chat + encode_chats) and of the batch function over",
        "blocks of 256 rows (JSON parsing, rendering, encoding, Arrow output); ratio = bare time / its time.",
        "",
        "| column | path | MB/s | ratio |",
        "| --- | --- | ---: | ---: |",
    ]
    for kind, mb in (("text", text_mb), ("chat", chat_mb)):
        fn = _TokenizeColumn(tok, 1, "x", kind, False, True)
        t_bare = min(_timed(bare[kind]) for _ in range(rounds))
        t_fn = min(_timed(lambda: [fn(b) for b in blocks[kind]]) for _ in range(rounds))
        lines.append(f"| {kind} | bare call | {mb / t_bare:,.2f} | |")
        lines.append(f"| {kind} | tokenize_dataset's batch function | {mb / t_fn:,.2f} | {t_bare / t_fn:.2f}x |")
    return lines + [""]


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class _Identity:
    def __call__(self, batch):
        return batch


def library_section(texts, chats, rounds: int) -> list[str]:
    import logging

    import pyarrow as pa
    import ray
    import ray.data

    import qwen4exp
    import qwen4exp.runtimes.ray
    from qwen4exp.render.chat import render_chat

    tok = qwen4exp.Tokenizer()
    text_col = [t["text"] for t in texts]
    chat_col = [json.dumps(c, ensure_ascii=False) for c in chats]

    def local_text():
        return tok.encode_batch(text_col, num_threads=2)

    def local_chat():
        rendered = [render_chat(c["messages"], add_generation_prompt=True) for c in chats]
        return tok.encode_chats(rendered, num_threads=2), sum(len(r.data) for r in rendered)

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)

    def on_ray(column, kind, identity=False):
        # Blocks of 256 rows, so that both actors get work.
        ds = ray.data.from_arrow([pa.table({"x": column[i : i + 256]}) for i in range(0, len(column), 256)])
        if identity:  # the same pipeline with a UDF that returns its batch: Ray's own cost
            out = ds.map_batches(_Identity, batch_format="pyarrow", batch_size=256,
                                 compute=ray.data.ActorPoolStrategy(size=2), num_cpus=1)
            return sum(t.num_rows for t in ray.get(out.to_arrow_refs()))
        out = qwen4exp.runtimes.ray.tokenize_dataset(ds, column="x", kind=kind, batch_size=256, concurrency=2)
        tables = ray.get(out.select_columns(["length"]).to_arrow_refs())
        return int(sum(t.column("length").to_numpy().sum() for t in tables))

    text_mb = sum(len(t.encode("utf-8")) for t in text_col) / 1e6
    n_tokens_text = sum(len(x) for x in local_text())
    ids, nbytes = local_chat()
    chat_mb, n_tokens_chat = nbytes / 1e6, sum(len(x) for x in ids)
    lines = [
        f"## `tokenize_dataset` (2-CPU local cluster, 2 actors x 1 thread) vs one process (2 threads), best of {rounds}",
        "",
        "\"ray, identity UDF\": the same pipeline (Arrow blocks of 256 rows, 2 actors) with a UDF that",
        "returns its batch: what Ray itself costs (actor start, scheduling, transfers). \"ray less",
        "identity\": the time the tokenizing adds to it.",
        "",
        "| column | path | records/s | MB/s | tokens/s | seconds |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]

    def best_of(fn):
        best, got = float("inf"), None
        for _ in range(rounds):
            t0 = time.perf_counter()
            got = fn()
            best = min(best, time.perf_counter() - t0)
        return best, got

    def row(kind, path, n, mb, n_tok, secs):
        return f"| {kind} | {path} | {n / secs:,.0f} | {mb / secs:,.2f} | {n_tok / secs:,.0f} | {secs:.2f} |"

    try:
        for kind, local, col, mb, n_tok in (("text", local_text, text_col, text_mb, n_tokens_text),
                                               ("chat", local_chat, chat_col, chat_mb, n_tokens_chat)):
            log(f"library {kind}")
            secs, _ = best_of(local)
            lines.append(row(kind, "local", len(col), mb, n_tok, secs))
            fixed, _ = best_of(lambda: on_ray(col, kind, identity=True))
            secs, got = best_of(lambda: on_ray(col, kind))
            assert got == n_tok, (got, n_tok)  # the same tokens
            lines.append(row(kind, "ray", len(col), mb, n_tok, secs))
            lines.append(f"| {kind} | ray, identity UDF | | | | {fixed:.2f} |")
            if secs > fixed:
                lines.append(row(kind, "ray less identity", len(col), mb, n_tok, secs - fixed))
            else:  # within the noise of a busy machine
                lines.append(f"| {kind} | ray less identity | not measurable: ray <= identity | | | |")
    finally:
        ray.shutdown()
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=int, default=2, help="repeat the documents this many times (default 2)")
    ap.add_argument("--no-cli", action="store_true")
    args = ap.parse_args(argv)
    texts, chats = _records(args.scale)
    out = [f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)", ""]
    with tempfile.TemporaryDirectory(prefix="qwen4exp-bench-ray-") as d:
        if not args.no_cli:
            out += cli_section(texts, chats, Path(d))
    out += worker_section(texts, chats, max(args.rounds, 7))  # cheap: more rounds against noise
    out += library_section(texts, chats, args.rounds)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
