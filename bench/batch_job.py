"""The offline batch job of report.py: a JSONL file of tens of MB of code and
multilingual prose, tokenized by whole processes, and the same documents
tokenized in memory through the Arrow / file APIs.

    PYTHONPATH=src python3 bench/batch_job.py --rounds 3    # the table alone

* **file job**: JSONL in, a Parquet file of ids out, the whole process timed
  (start, imports, tokenizer load, reading, tokenizing, writing):
  `python -m qwen4exp batch IN OUT.parquet --threads 2` against a script
  running gigatoken's `JsonlFileSource` + `encode_files` and a pyarrow
  Parquet write of the ids (`ak.to_arrow`). Both outputs are read back and
  checked equal, row by row.
* **in memory**: the documents as a pyarrow large_string ChunkedArray through
  `Tokenizer.encode_arrow`, against gigatoken's `encode_batch` on the same
  documents as a list of bytes (its ids stay an awkward array), 2 threads
  each, in processes of their own; the first call of each is untimed.

The corpus (`batch_corpus`): stdlib `.py` files (site-packages excluded, in
a fixed order by hash of the path) up to CODE_BYTES, then Faker prose and
records in the corpora's locales, with seeds of their own (not the test
corpora's documents), up to PROSE_BYTES; one `{"text": ...}` record per
document, code and prose interleaved. Built once and kept in the temp dir.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))

CODE_BYTES = 25_000_000
PROSE_BYTES = 20_000_000
CORPUS_VERSION = 1


def _code_documents(limit: int) -> list:
    import corpora

    root = corpora._stdlib_dir()
    rels = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__")
                             and not d.startswith("config-"))
        rels += [Path(dirpath, f).relative_to(root).as_posix() for f in filenames if f.endswith(".py")]
    rels.sort(key=lambda r: (hashlib.sha1(r.encode()).hexdigest(), r))
    docs, total = [], 0
    for rel in rels:
        try:
            text = (root / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text and "\x00" not in text and not corpora._ATOM_RE.search(text):
            docs.append(text)
            total += len(text.encode("utf-8"))
            if total >= limit:
                break
    return docs


def _prose_documents(limit: int) -> list:
    import corpora

    Faker = corpora._faker()
    emojis = corpora._emoji_list()
    makers = [(loc, corpora._lorem_document) for loc in corpora._LOREM_LOCALES]
    makers += [(loc, corpora._record_document) for loc, _ in corpora._RECORD_LOCALES]
    fakers = []
    for loc, make in makers:
        fake = Faker(loc)
        fake.seed_instance(corpora._seed(f"batch-job/{loc}/{make.__name__}"))
        fakers.append((fake, random.Random(corpora._seed(f"batch-job/{loc}/{make.__name__}/mix")), make))
    docs, total, k = [], 0, 0
    while total < limit:
        fake, rnd, make = fakers[k % len(fakers)]
        d = make(fake, rnd, emojis)
        docs.append(d)
        total += len(d.encode("utf-8"))
        k += 1
    return docs


def batch_corpus() -> Path:
    """The JSONL corpus (built on first use, kept in the temp dir)."""
    key = hashlib.sha256(f"{CORPUS_VERSION}/{CODE_BYTES}/{PROSE_BYTES}/{sys.version_info[:2]}".encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"qwen4exp-bench-batch-{key}.jsonl"
    if path.is_file():
        return path
    code, prose = _code_documents(CODE_BYTES), _prose_documents(PROSE_BYTES)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(max(len(code), len(prose))):
            for part in (code, prose):
                if i < len(part):
                    f.write(json.dumps({"text": part[i]}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def corpus_texts(path: Path) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


# -- the file job: whole processes -------------------------------------------------

GIGATOKEN_FILE_JOB = """
import sys
import awkward as ak, gigatoken, pyarrow as pa, pyarrow.parquet as pq
tok = gigatoken.Tokenizer(sys.argv[1])
ids = tok.encode_files(gigatoken.JsonlFileSource([sys.argv[2]], field="text"))
pq.write_table(pa.table({"ids": ak.to_arrow(ids, extensionarray=False)}), sys.argv[3])
"""


def file_jobs(path: Path, out_dir: Path, threads: int = 2) -> dict:
    """name -> (command, environment, output) of each whole-process job."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["RAYON_NUM_THREADS"] = str(threads)
    jobs = {
        "qwen4exp": ([sys.executable, "-m", "qwen4exp", "batch", str(path), str(out_dir / "qwen4exp.parquet"),
                      "--threads", str(threads), "--progress", "never", "-q"], env, out_dir / "qwen4exp.parquet"),
    }
    try:
        import gigatoken  # noqa: F401
    except ImportError:
        return jobs
    jobs["gigatoken"] = ([sys.executable, "-c", GIGATOKEN_FILE_JOB, str(ROOT / "vocab" / "tokenizer.json"), str(path),
                          str(out_dir / "gigatoken.parquet")], env, out_dir / "gigatoken.parquet")
    return jobs


def time_file_jobs(path: Path, rounds: int, log=print) -> dict:
    """name -> {"seconds": best wall, ...} of the whole-process jobs, their
    rounds interleaved; "same_ids": whether each job's ids equal qwen4exp's."""
    import pyarrow.parquet as pq

    out = {}
    # The tree's modules compiled once, as pip does when it installs a package
    # (the peers are installed ones); PYTHONDONTWRITEBYTECODE would otherwise
    # make every qwen4exp run compile its modules from source.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "qwen4exp")], check=False,
                   capture_output=True)
    with tempfile.TemporaryDirectory(prefix="qwen4exp-bench-job-") as d:
        jobs = file_jobs(path, Path(d))
        for r in range(rounds):
            names = list(jobs)[r % len(jobs):] + list(jobs)[: r % len(jobs)]
            for name in names:
                cmd, env, _ = jobs[name]
                log(f"batch job: {name}, round {r + 1} of {rounds}")
                t0 = time.perf_counter()
                p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if p.returncode != 0:
                    out[name] = {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
                    continue
                best = out.setdefault(name, {"seconds": float("inf")})
                if "seconds" in best:
                    best["seconds"] = min(best["seconds"], wall)
        ref = None
        for name, (_, _, result) in jobs.items():
            if "seconds" not in out.get(name, {}):
                continue
            ids = pq.read_table(result, columns=["ids"]).column("ids").combine_chunks()
            flat = ids.values.to_numpy().astype("int64")
            if ref is None:
                ref = (ids.offsets.to_numpy(), flat)
            out[name]["same_ids"] = (len(ids.offsets) == len(ref[0]) and (ids.offsets.to_numpy() == ref[0]).all()
                                     and len(flat) == len(ref[1]) and (flat == ref[1]).all())
    return out


# -- in memory: the Arrow and list APIs --------------------------------------------


def child_in_memory(peer: str, path: str, rounds: int, threads: int, mode: str) -> dict:
    """One peer's in-memory batch on three quarters of the corpus' documents
    in a new process. mode "fresh": the tokenizer first encodes the other
    quarter, then is timed on these documents, which it has not seen; mode
    "cold": timed on its first call, then (as "repeated") best of `rounds`
    calls on the same documents again."""
    texts = corpus_texts(Path(path))
    warm, rest = texts[::4], [t for i, t in enumerate(texts) if i % 4]
    if peer == "qwen4exp":
        import pyarrow as pa

        import qwen4exp

        tok = qwen4exp.Tokenizer()

        def prepared(docs):
            return pa.chunked_array([pa.array(docs[i:i + 1024], type=pa.large_string())
                                     for i in range(0, len(docs), 1024)])

        run = lambda data: tok.encode_arrow(data, num_threads=threads)  # noqa: E731
        tokens = lambda ids: len(ids.combine_chunks().values)  # noqa: E731
    else:
        import gigatoken

        tok = gigatoken.Tokenizer(str(ROOT / "vocab" / "tokenizer.json"))
        prepared = lambda docs: [t.encode("utf-8") for t in docs]  # noqa: E731
        run = tok.encode_batch
        tokens = lambda ids: int(len(ids.layout.content))  # noqa: E731
    data = prepared(rest)
    out = {"bytes": sum(len(t.encode("utf-8")) for t in rest)}
    if mode == "fresh":
        run(prepared(warm))
    t0 = time.perf_counter()
    ids = run(data)
    out[mode] = time.perf_counter() - t0
    out["tokens"] = tokens(ids)
    del ids
    if mode == "cold":
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            ids = run(data)
            best = min(best, time.perf_counter() - t0)
            del ids
        out["repeated"] = best
    return out


IN_MEMORY_KINDS = (("fresh", "warm tokenizer, documents it has not seen"), ("cold", "a new object's first call"),
                   ("repeated", "the same documents again"))


def time_in_memory(path: Path, rounds: int, threads: int = 2, log=print) -> dict:
    """peer -> {kind: best seconds, "bytes", "tokens"} of child_in_memory,
    each peer in processes of its own (gigatoken's thread pool is fixed per
    process), peers alternating, two processes per peer and mode."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["RAYON_NUM_THREADS"] = str(threads)
    peers = ["qwen4exp"]
    try:
        import gigatoken  # noqa: F401

        peers.append("gigatoken")
    except ImportError:
        pass
    out = {}
    for turn in range(2):
        for mode in ("fresh", "cold"):
            for peer in (peers if turn == 0 else peers[::-1]):
                log(f"in memory: {peer}, {mode}, turn {turn + 1} of 2")
                p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", peer, str(path),
                                    str(max(1, rounds)), str(threads), mode], env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    out[peer] = {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
                    continue
                got = json.loads(p.stdout.strip().splitlines()[-1])
                best = out.setdefault(peer, {})
                if "error" in best:
                    continue
                best["bytes"], best["tokens"] = got["bytes"], got["tokens"]
                for kind, _ in IN_MEMORY_KINDS:
                    if kind in got:
                        best[kind] = min(best.get(kind, float("inf")), got[kind])
    return out


def section(rounds: int = 3, log=print) -> list:
    """report.py's markdown section for the batch job."""
    path = batch_corpus()
    size = path.stat().st_size
    files = time_file_jobs(path, rounds, log)
    memory = time_in_memory(path, rounds, 2, log)
    lines = [
        "## The batch job: JSONL to Parquet, and the Arrow / file APIs (2 threads)",
        "",
        f"Corpus: {size / 1e6:.1f} MB of JSONL, {sum(1 for _ in open(path, 'rb'))} `{{\"text\"}}` records "
        f"(stdlib code and Faker prose in {len(_locales())} locales). **File job**: the whole process, from start "
        "to the Parquet file written (best of the interleaved rounds): `python -m qwen4exp batch IN OUT.parquet "
        "--threads 2` against gigatoken's `JsonlFileSource` + `encode_files` + a pyarrow Parquet write "
        "(RAYON_NUM_THREADS=2). **In memory**: three quarters of the documents as a large_string ChunkedArray "
        "through `Tokenizer.encode_arrow` against gigatoken's `encode_batch` on them as a list of bytes, each in "
        "new processes (best of two): a warm tokenizer (it encoded the other quarter first) on documents it has "
        f"not seen, which the target is for; a new object's first call; and the same documents again (best of "
        f"{rounds} calls, where the caches know every word).",
        "",
        "| job | peer | seconds | MB/s | qwen4exp / peer speed | target | same ids |",
        "| --- | --- | ---: | ---: | ---: | ---: | :---: |",
    ]

    def row(title, peer, seconds, q_seconds, nbytes, target, same):
        if seconds is None:
            return f"| {title} | {peer} | failed | | | | |"
        ratio = f"{seconds / q_seconds:.2f}×" if q_seconds else "n/a"
        verdict = ""
        if peer != "qwen4exp" and target and q_seconds:
            verdict = f"{target:.2f}× ({'met' if seconds / q_seconds >= target else '**not met**'})"
        return (f"| {title} | {peer} | {seconds:.2f} | {nbytes / seconds / 1e6:.1f} | "
                f"{ratio if peer != 'qwen4exp' else '1.00×'} | {verdict} | "
                f"{'' if same is None else ('yes' if same else '**no**')} |")

    q = files.get("qwen4exp", {})
    for peer, r in files.items():
        lines.append(row("file job", peer, r.get("seconds"), q.get("seconds"), size, 1.5, r.get("same_ids")))
    q = memory.get("qwen4exp", {})
    for kind, title in IN_MEMORY_KINDS:
        for peer, r in memory.items():
            lines.append(row(f"in memory: {title}", peer, r.get(kind), q.get(kind), r.get("bytes", size),
                             1.25 if kind == "fresh" else None, None))
    lines.append("")
    return lines


def _locales():
    import corpora

    return set(corpora._LOREM_LOCALES) | {loc for loc, _ in corpora._RECORD_LOCALES}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        peer, path, rounds, threads, mode = a.child
        print(json.dumps(child_in_memory(peer, path, int(rounds), int(threads), mode)))
        return 0
    print("\n".join(section(a.rounds, log=lambda *x: print(*x, file=sys.stderr))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
