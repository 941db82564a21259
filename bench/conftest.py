"""pytest-benchmark setup for bench/ (run: python -m pytest bench/ --benchmark-only -n 0).

Collects ``bench_*.py`` (not matched by pytest's default ``test_*.py``),
builds every peer once per session, and prints a summary at the end: skipped
peers and why, MB/s and tokens/s, long-word growth ratios, and peers whose
ids differ from the HF reference.
"""

from __future__ import annotations

import sys
from pathlib import Path

import importlib.util

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
# qwen4exp not installed: use the in-tree build (src/), as PYTHONPATH=src would.
if importlib.util.find_spec("qwen4exp") is None:
    sys.path.insert(0, str(HERE.parent / "src"))

import peers  # noqa: E402  (first: pins the HF thread env before tokenizers loads)
import pytest  # noqa: E402

import common  # noqa: E402

# Filled by the benchmarks, printed by pytest_terminal_summary.
RESULTS = {"throughput": {}, "long_word": {}, "mismatch": {}, "skipped": {}}


def pytest_collect_file(file_path, parent):
    # Files named on the command line are collected by pytest itself.
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture(scope="session")
def bench_peers():
    loaded, skipped = peers.load_peers()
    RESULTS["skipped"].update(skipped)
    return loaded, skipped


@pytest.fixture(scope="session")
def reference_ids():
    """HF reference ids (added tokens emptied) per corpus, computed lazily."""
    ref = peers.build_hf_reference()
    cache = {}

    def get(corpus):
        if corpus not in cache:
            cache[corpus] = list(ref(common.corpus_text(corpus)))
        return cache[corpus]

    return get


@pytest.fixture
def peer(request, bench_peers):
    loaded, skipped = bench_peers
    name = request.param
    if name in skipped:
        pytest.skip(f"{name}: {skipped[name]}")
    return loaded[name]


@pytest.fixture(scope="session")
def bench_results():
    return RESULTS


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    if not any(RESULTS[k] for k in ("throughput", "long_word", "skipped")):
        return
    tr.section("qwen4exp bench summary")
    for name, why in RESULTS["skipped"].items():
        tr.write_line(f"skipped peer {name}: {why}")
    if RESULTS["throughput"]:
        tr.write_line("")
        tr.write_line(f"{'corpus':<14}{'peer':<10}{'MB/s':>9}{'tokens/s':>14}"
                      f"{'qwen4exp x':>12}{'ids == HF ref':>15}")
        tp = RESULTS["throughput"]
        for corpus in common.THROUGHPUT_CORPORA:
            q = tp.get((corpus, "qwen4exp"))
            for name in peers.PEER_NAMES:
                if (corpus, name) not in tp:
                    continue
                mbs, tps = tp[(corpus, name)]
                ok = RESULTS["mismatch"].get((corpus, name)) is None
                ratio = "ids differ" if not ok else (f"{q[0] / mbs:.2f}" if q else "n/a")
                tr.write_line(f"{corpus:<14}{name:<10}{mbs:>9.2f}{tps:>14,.0f}{ratio:>12}"
                              f"{'yes' if ok else 'NO':>15}")
    lw = RESULTS["long_word"]
    if lw:
        small, big = common.LONG_WORD_SIZES
        tr.write_line("")
        tr.write_line(f"long word growth ({small:,} -> {big:,} chars; ~10x is linear):")
        for script in common.LONG_WORD_SCRIPTS:
            for name in peers.PEER_NAMES:
                a, b = lw.get((script, small, name)), lw.get((script, big, name))
                if a is None:
                    continue
                tail = f"{b:.3f} s  ratio {b / a:.1f}x" if b is not None else "not run"
                tr.write_line(f"  {script:<6}{name:<10}{a:.4f} s -> {tail}")
    for (corpus, name), detail in sorted(RESULTS["mismatch"].items()):
        tr.write_line(f"MISMATCH {name} on {corpus}: {detail}")
