"""Shared fixtures: our tokenizer and the Hugging Face references."""

import os
import sys

import pytest

# Keep the bytecode of what the run imports from here on (the test modules,
# their helpers, qwen4exp: __pycache__ is git-ignored) even where
# PYTHONDONTWRITEBYTECODE is set: otherwise each xdist worker compiles and
# assertion-rewrites every test module again on every run, and each of the
# many subprocesses the tests start (CLI entry points, signals, spawn pools,
# Ray workers) compiles qwen4exp again (about 3 s a worker and 0.2 s a
# subprocess). The subprocesses keep the variable: they read, never write.
sys.dont_write_bytecode = False

# The allocation-fault switch (qwen4exp._native._alloc) only arms in a process that had
# this set when qwen4exp was first imported: conftest loads before any test.
os.environ["QWEN4EXP_FAULT_INJECTION"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
# Under xdist each worker already has a core: the references' Rayon pools (HF
# tokenizers' batches) get the worker's share of the CPUs, not all of them, or
# the workers' pools spin against each other (a 2-core run took a third longer).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").isdigit():
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, (os.cpu_count() or 1)
                                                       // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# encode() stops cutting texts across threads for a while when the machine is
# busy (pyx/_encoder.pyx, note_split; the crew's contention report): results
# are the same either way, but the tests that check the cut path and its
# counters would then depend on the machine's load (two xdist workers on two
# cores). They keep cutting; tests/test_threads.py checks the back-off itself.
from qwen4exp._native import _encoder as _native_encoder  # noqa: E402

_native_encoder._set_split_backoff(False)

import _hf_reference  # noqa: E402  (tests/ is on sys.path)
from _hf_reference import REPO, TOKENIZER_JSON  # noqa: E402

VOCAB_DIR = os.path.join(REPO, "vocab")


@pytest.fixture(scope="session")
def tok():
    import qwen4exp

    return qwen4exp.Tokenizer()


@pytest.fixture(scope="session")
def hf_plain():
    """The reference for DATA (tests/_hf_reference.py; docs/FORMAT.md invariant 3)."""
    return _hf_reference.hf_plain()


@pytest.fixture(scope="session")
def hf_full():
    """The reference tokenizer.json as shipped (added tokens included)."""
    return _hf_reference.hf_full(TOKENIZER_JSON)


@pytest.fixture(scope="session")
def hf_nfc():
    from tokenizers import normalizers

    return normalizers.NFC().normalize_str


def run_isolated(code: str, *args: str, timeout: float = 120, env: dict | None = None):
    """Run `python -c code args...` against the same qwen4exp as this process
    (installed, or src/ in-tree), so that a crash cannot take pytest down."""
    import subprocess
    import sys

    import qwen4exp

    where = os.path.dirname(os.path.dirname(os.path.abspath(qwen4exp.__file__)))
    full_env = dict(os.environ, PYTHONPATH=where + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def start_local_ray():
    """Connect to a new local Ray cluster (2 CPUs, no dashboard) whose Ray
    Data keeps row order, so that results compare row by row."""
    import logging

    import ray
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray


@pytest.fixture(scope="module")
def ray_cluster():
    """The local Ray cluster of start_local_ray, started once per module that
    needs it (test_ray.py only: it takes 10-20 s on two busy cores) and shut
    down after it, so that its idle processes do not share the cores with the
    rest of the run. A module that needs a cluster of another shape
    (test_ray_nodes.py) shuts a running one down and starts it again after itself."""
    ray = start_local_ray()
    yield ray
    ray.shutdown()


def pytest_collection_modifyitems(session, config, items):
    """The order `--dist loadgroup` hands tests out in (with
    --no-loadscope-reorder, pyproject.toml): modules that start a local Ray
    cluster lead (their xdist_group, run whole by one worker, is the longest
    unit: the cluster's start, actors, Ray Data), so that it does not start
    late and bound the run's end; then the others by number of tests, most
    first, one test at a time to whichever worker is free. Every worker sorts
    alike: the order depends on the collected items only."""
    count: dict = {}
    first: dict = {}
    for k, item in enumerate(items):
        count[item.path] = count.get(item.path, 0) + 1
        first.setdefault(item.path, k)
    ray_files = {item.path for item in items if "ray_cluster" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: (item.path not in ray_files, -count[item.path], first[item.path]))


# -- Qwen3.5/3.6: the reference tokenizer.json is derived, not shipped -------------


@pytest.fixture(scope="session")
def qwen36_json(request, tmp_path_factory):
    """The reference tokenizer.json of "qwen3.6", kept in pytest's cache (in a
    temporary folder when the cache is off, as in tools/run_sanitizers.sh)."""
    from _qwen36_reference import reference_json

    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("qwen36-reference") if cache is not None else tmp_path_factory.mktemp("qwen36-reference")
    return reference_json(str(folder))


@pytest.fixture(scope="session")
def tok36():
    import qwen4exp

    return qwen4exp.Tokenizer("qwen3.6")


@pytest.fixture(scope="session")
def hf_plain36(qwen36_json):
    return _hf_reference.hf_plain(qwen36_json)


@pytest.fixture(scope="session")
def hf_full36(qwen36_json):
    return _hf_reference.hf_full(qwen36_json)


# -- both bundled vocabularies ------------------------------------------------------
# A test that asks for `vocab` runs once per bundled vocabulary; `vocab_tok` and
# `vocab_hf` are that vocabulary's tokenizer and its DATA reference.

VOCABULARIES = ("qwen3", "qwen3.6")


@pytest.fixture(scope="module", params=VOCABULARIES)
def vocab(request):
    return request.param


@pytest.fixture(scope="module")
def vocab_tok(vocab, request):
    return request.getfixturevalue("tok36" if vocab == "qwen3.6" else "tok")


@pytest.fixture(scope="module")
def vocab_hf(vocab, request):
    return request.getfixturevalue("hf_plain36" if vocab == "qwen3.6" else "hf_plain")


@pytest.fixture(scope="module")
def vocabularies(tok, tok36, hf_full, hf_full36):
    """Per vocabulary name: (our tokenizer, HF tokenizers with its added tokens)."""
    return {"qwen3": (tok, hf_full), "qwen3.6": (tok36, hf_full36)}
