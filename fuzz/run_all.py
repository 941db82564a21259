#!/usr/bin/env python3
"""Run every fuzz harness for a while and keep what fails.

    python fuzz/run_all.py --seconds 600                # each harness 10 min, atheris
    python fuzz/run_all.py --seconds 300 --native       # + native coverage and ASan (clang)
    python fuzz/run_all.py --seconds 60 --harness chat  # one harness
    python fuzz/run_all.py --make-seeds                 # (re)write fuzz/corpus/

With atheris installed each harness runs under libFuzzer (fuzz/fuzz_<name>.py);
without it, a plain random/mutation loop drives the same `run_<name>` function
of fuzz/harness.py. `--native` first builds a copy of the tree with clang-14 and
`-fsanitize=fuzzer-no-link,address` (in the work dir, never over the in-place
.so files) and runs the harnesses from it with atheris' ASan runtime
preloaded, so libFuzzer sees the Cython core's coverage and ASan watches its
memory.

Every failing input (crash, timeout, out-of-memory) is copied to
tests/data/fuzz_regressions/<name>/, where tests/test_hostile.py replays it.
A summary (executions per harness, failures) is printed and written to
<workdir>/summary.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
HARNESSES = ("encode", "segments", "chat", "decode")
REGRESSIONS = os.path.join(REPO, "tests", "data", "fuzz_regressions")
SEEDS = os.path.join(HERE, "corpus")


def have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def make_seeds() -> None:
    """Write the seed corpus: texts for encode, the chat oracle's requests for chat."""
    texts = [
        "Hello, world! It's a test.",
        "def f(x):\n    return x ** 2  # square\n\n\n",
        '{"key": [1, 2, 3], "nested": {"a": "b"}}',
        "Ünïcödé naïve café — “quotes” ‘single’",
        "\u4e2d\u6587\u6d4b\u8bd5\uff0c\u6ca1\u6709\u7a7a\u683c\u7684\u957f\u53e5\u5b50\u3002",
        "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8 \u1100\u1161\u11a8",
        "\u0939\u093f\u0928\u094d\u0926\u0940 \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
        "a   b\t\tc\r\n\r\n  \n\u2028\u2029\x85 end  ",
        "<|im_start|>user\nhi<|im_end|>\n<think>\n</think>",
        "e\u0301\u0316\u0300 \u212b \u2126 \u00c5 A\u030a \u0958 \U0001d160",
        "1234567890 \u00b2\u00bd\u216b\u2460 3.14159e-10",
        "x" * 300,
        "-" * 200 + "=" * 100,
        "I'LL we'VE they'RE it'\u017f \u212a",
        "\U0001f469\u200d\U0001f4bb \U0001f600\ufe0f \u200b\u200d\ufeff",
    ]
    out = os.path.join(SEEDS, "encode")
    os.makedirs(out, exist_ok=True)
    for i, t in enumerate(texts):
        with open(os.path.join(out, f"text-{i:02d}"), "wb") as f:
            f.write(b"\x00" + t.encode("utf-8"))
    oracle = os.path.join(REPO, "tests", "data", "chat_oracle.json")
    out = os.path.join(SEEDS, "chat")
    os.makedirs(out, exist_ok=True)
    if os.path.exists(oracle):
        with open(oracle, encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        for case in cases:
            req = {k: v for k, v in case["request"].items() if v is not None}
            with open(os.path.join(out, f"oracle-{case['name']}"), "wb") as f:
                f.write(b"\xff" + json.dumps(req, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    rng = random.Random(6)
    for name in ("segments", "decode", "chat"):
        out = os.path.join(SEEDS, name)
        os.makedirs(out, exist_ok=True)
        for i in range(12):
            with open(os.path.join(out, f"random-{i:02d}"), "wb") as f:
                f.write(bytes(rng.randrange(256) for _ in range(rng.randrange(16, 400))))


def keep_failure(name: str, data: bytes, why: str) -> str:
    d = os.path.join(REGRESSIONS, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{why}-{hashlib.sha1(data).hexdigest()[:16]}")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)
    return path


def build_native(workdir: str) -> str:
    """Copy the tree (tracked + untracked, not ignored) and build it with clang coverage + ASan."""
    tree = os.path.join(workdir, "tree")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                           check=True, capture_output=True).stdout.split(b"\0")
    for rel in files:
        if not rel:
            continue
        src = os.path.join(REPO, os.fsdecode(rel))
        if not os.path.isfile(src):
            continue
        dst = os.path.join(tree, os.fsdecode(rel))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
    clang = shutil.which("clang-14") or shutil.which("clang")
    if not clang:
        raise SystemExit("--native needs clang (apt-get install clang-14 libclang-rt-14-dev)")
    env = dict(os.environ, CC=clang, LDSHARED=f"{clang} -shared",
               CFLAGS="-fsanitize=fuzzer-no-link,address -g",
               LDFLAGS="-fsanitize=fuzzer-no-link,address")
    log = os.path.join(workdir, "build-native.log")
    with open(log, "wb") as f:
        rc = subprocess.call([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                             env=env, stdout=f, stderr=subprocess.STDOUT)
    if rc:
        raise SystemExit(f"native build failed, see {log}")
    return tree


def run_atheris(name: str, seconds: float, workdir: str, tree: str | None, max_len: int) -> dict:
    import atheris

    corpus = os.path.join(workdir, "corpus", name)
    crashes = os.path.join(workdir, "crashes", name)
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    root = tree or REPO
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "src"), ASAN_OPTIONS="detect_leaks=0")
    if tree:
        env["LD_PRELOAD"] = os.path.join(atheris.path(), "asan_with_fuzzer.so")
    seeds = os.path.join(SEEDS, name)
    deadline = time.time() + seconds
    execs = 0
    failures = []
    restarts = 0
    log_path = os.path.join(workdir, f"{name}.log")
    with open(log_path, "w") as log:
        while time.time() < deadline - 5 and restarts < 25:
            left = int(deadline - time.time())
            cmd = [sys.executable, os.path.join(root, "fuzz", f"fuzz_{name}.py"),
                   f"-max_total_time={left}", "-print_final_stats=1", "-timeout=60",
                   "-rss_limit_mb=6144", f"-max_len={max_len}",
                   f"-artifact_prefix={crashes}/", corpus]
            if os.path.isdir(seeds):
                cmd.append(seeds)
            before = set(os.listdir(crashes))
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, errors="replace")
            log.write(proc.stdout + proc.stderr)
            log.flush()
            m = re.findall(r"stat::number_of_executed_units:\s*(\d+)", proc.stderr)
            if m:
                execs += int(m[-1])
            else:
                # a crash: count the runs libFuzzer reported before it
                runs = re.findall(r"^#(\d+)\s", proc.stderr, re.M)
                execs += int(runs[-1]) if runs else 0
            new = sorted(set(os.listdir(crashes)) - before)
            for art in new:
                with open(os.path.join(crashes, art), "rb") as f:
                    data = f.read()
                why = art.split("-")[0]
                kept = keep_failure(name, data, why)
                tail = proc.stderr[-3000:]
                failures.append({"kind": why, "kept": os.path.relpath(kept, REPO), "log_tail": tail})
            if proc.returncode == 0 or not new:
                if proc.returncode != 0 and not new:
                    failures.append({"kind": f"exit {proc.returncode}", "log_tail": proc.stderr[-3000:]})
                break
            restarts += 1
    return {"harness": name, "driver": "atheris" + ("+native+asan" if tree else ""), "executions": execs,
            "seconds": seconds, "failures": failures, "log": log_path}


def run_plain(name: str, seconds: float, max_len: int) -> dict:
    """Fallback without atheris: random bytes and byte mutations of the seeds."""
    sys.path.insert(0, HERE)
    import harness

    run = harness.RUNNERS[name]
    seeds = []
    d = os.path.join(SEEDS, name)
    if os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            with open(os.path.join(d, f), "rb") as fh:
                seeds.append(fh.read())
    rng = random.Random()
    deadline = time.time() + seconds
    execs = 0
    failures = []
    while time.time() < deadline:
        if seeds and rng.random() < 0.5:
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 8)):
                if data and rng.random() < 0.7:
                    data[rng.randrange(len(data))] = rng.randrange(256)
                else:
                    data[rng.randrange(len(data) + 1):0] = os.urandom(rng.randrange(1, 8))
            data = bytes(data[:max_len])
        else:
            data = os.urandom(rng.randrange(max_len))
        execs += 1
        try:
            run(data)
        except Exception:  # noqa: BLE001
            kept = keep_failure(name, data, "crash")
            failures.append({"kind": "crash", "kept": os.path.relpath(kept, REPO),
                             "log_tail": traceback.format_exc()[-3000:]})
            if len(failures) >= 20:
                break
    return {"harness": name, "driver": "random", "executions": execs, "seconds": seconds,
            "failures": failures}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="per harness (default 60)")
    ap.add_argument("--harness", action="append", choices=HARNESSES, help="default: all")
    ap.add_argument("--native", action="store_true", help="clang coverage + ASan build of the core")
    ap.add_argument("--jobs", type=int, default=1, help="harnesses run at once (default 1)")
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--workdir", default=None, help="default: a temporary folder")
    ap.add_argument("--no-atheris", action="store_true", help="use the plain random driver")
    ap.add_argument("--make-seeds", action="store_true", help="(re)write fuzz/corpus/ and exit")
    args = ap.parse_args(argv)
    if args.make_seeds:
        make_seeds()
        return 0
    names = args.harness or list(HARNESSES)
    workdir = args.workdir or tempfile.mkdtemp(prefix="qwen4exp-fuzz-")
    os.makedirs(workdir, exist_ok=True)
    use_atheris = have_atheris() and not args.no_atheris
    if args.native and not use_atheris:
        raise SystemExit("--native needs atheris (pip install atheris)")
    tree = build_native(workdir) if args.native else None
    started = time.time()
    results = []
    if use_atheris:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(run_atheris, n, args.seconds, workdir, tree, args.max_len) for n in names]
            results = [f.result() for f in futures]
    else:
        results = [run_plain(n, args.seconds, args.max_len) for n in names]
    summary = {"wall_seconds": round(time.time() - started, 1), "workdir": workdir, "results": results}
    with open(os.path.join(workdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    bad = 0
    for r in results:
        print(f"{r['harness']:9s} {r['driver']:22s} {r['executions']:>10d} executions in "
              f"{r['seconds']:.0f} s, {len(r['failures'])} failure(s)")
        for fl in r["failures"]:
            bad += 1
            print(f"    {fl['kind']}: {fl.get('kept', '')}")
            print("      " + "\n      ".join(fl["log_tail"].strip().splitlines()[-12:]))
    print(f"summary: {os.path.join(workdir, 'summary.json')}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
