"""A batch job's memory against the length of its input: report.py's
`qwen4exp batch` corpus (bench/batch_job.py) repeated 1x, 4x and 16x, through
`python -m qwen4exp batch IN OUT --threads 2`, Parquet out and JSONL out, each
a whole process: its wall time, its peak anonymous memory (RssAnon polled
every 5 ms: what the process allocated, not the libraries it maps) and its
peak RSS. The job's memory is bounded by its chunk window (--chunk-bytes,
--chunk-size): the target is a peak at 16x within 10% of the peak at 4x.

    PYTHONPATH=src python3 bench/batch_memory.py [--rounds 1] [--scales 1,4,16]

The repeated files (46 MB, 185 MB and 739 MB) are made once in the temp dir.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import batch_job  # noqa: E402
from procstat import run_measured  # noqa: E402

SCALES = (1, 4, 16)
FORMATS = ("parquet", "jsonl")
TARGET = 1.10  # peak at 16x over peak at 4x, at most


def repeated(path: Path, times: int) -> Path:
    """path's records `times` times over, in one file beside it (made once)."""
    if times == 1:
        return path
    out = path.with_name(f"{path.stem}-x{times}.jsonl")
    if out.is_file() and out.stat().st_size == times * path.stat().st_size:
        return out
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    data = path.read_bytes()
    with open(tmp, "wb") as f:
        for _ in range(times):
            f.write(data)
    os.replace(tmp, out)
    return out


def measure(scales=SCALES, rounds: int = 1, log=print) -> dict:
    """{(scale, format): {"seconds", "peak_anon_kib", "peak_rss_kib", "bytes",
    "records"} (the least of `rounds` runs each) or {"error"}}."""
    base = batch_job.batch_corpus()
    records = sum(1 for _ in open(base, "rb"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src" / "qwen4exp")], check=False,
                   capture_output=True)
    files = {k: repeated(base, k) for k in scales}
    out = {}
    with tempfile.TemporaryDirectory(prefix="qwen4exp-bench-memory-") as d:
        for r in range(rounds):
            for k in scales:
                for fmt in FORMATS:
                    log(f"batch memory: x{k}, {fmt} out, round {r + 1} of {rounds}")
                    cmd = [sys.executable, "-m", "qwen4exp", "batch", str(files[k]), str(Path(d) / f"out.{fmt}"),
                           "--threads", "2", "--progress", "never", "-q"]
                    got = run_measured(cmd, env)
                    if got["returncode"] != 0:
                        out[(k, fmt)] = {"error": (got["stderr"].strip().splitlines() or ["failed"])[-1]}
                        continue
                    best = out.setdefault((k, fmt), {"bytes": files[k].stat().st_size, "records": k * records})
                    if "error" in best:
                        continue
                    for key in ("seconds", "peak_anon_kib", "peak_rss_kib"):
                        best[key] = min(best.get(key, float("inf")), got[key])
    return out


def section(rounds: int = 1, scales=SCALES, log=print) -> list:
    """report.py's markdown section."""
    res = measure(scales, rounds, log)
    lines = [
        "## A batch job's memory against its input's length",
        "",
        "The batch job's corpus repeated 1x, 4x and 16x through `python -m qwen4exp batch IN OUT --threads 2` "
        f"(best of {rounds}): the whole process's wall time, its peak anonymous memory (RssAnon polled every "
        "5 ms: heap, arenas, anonymous mappings) and its peak RSS (ru_maxrss, with the mapped libraries). "
        f"Target: the peak at 16x within {TARGET - 1:.0%} of the peak at 4x (the job's memory is set by its "
        "chunk window, `--chunk-bytes` / `--chunk-size`, not by its input).",
        "",
        "| input | records | OUT | seconds | MB/s | peak anonymous | peak RSS |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for k in scales:
        for fmt in FORMATS:
            r = res[(k, fmt)]
            if "error" in r:
                lines.append(f"| x{k} | | {fmt} | failed: {r['error']} | | | |")
                continue
            lines.append(f"| x{k} ({r['bytes'] / 1e6:.0f} MB) | {r['records']:,} | {fmt} | {r['seconds']:.2f} | "
                         f"{r['bytes'] / r['seconds'] / 1e6:.1f} | {r['peak_anon_kib'] / 1024:.0f} MiB | "
                         f"{r['peak_rss_kib'] / 1024:.0f} MiB |")
    lines.append("")
    if 4 in scales and 16 in scales:
        for fmt in FORMATS:
            a, b = res[(4, fmt)], res[(16, fmt)]
            if "error" in a or "error" in b:
                continue
            ratio = b["peak_anon_kib"] / a["peak_anon_kib"]
            lines.append(f"- {fmt} OUT: peak anonymous memory at 16x / at 4x = {ratio:.3f} (at most {TARGET:.2f}): "
                         f"**{'met' if ratio <= TARGET else 'NOT met'}**")
        lines.append("")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scales", default=",".join(map(str, SCALES)))
    a = ap.parse_args(argv)
    scales = tuple(int(x) for x in a.scales.split(","))
    print("\n".join(section(a.rounds, scales, log=lambda *x: print(*x, file=sys.stderr))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
