"""Hostile input: fuzz regressions, hypothesis fuzzing, a short soak.

* Every input that ever made a fuzz harness fail is kept under
  tests/data/fuzz_regressions/<harness>/ (raw harness bytes, or a .json case)
  and replayed here through the same oracle (fuzz/harness.py).
* The harnesses' `run_<name>(bytes)` functions are driven by hypothesis
  (`st.binary()`), so the CI slice fuzzes without atheris; the long runs are
  `python fuzz/run_all.py --seconds 600` (see fuzz/README.md).
* A short concurrency soak: many threads share one Tokenizer (tools/soak.py
  runs the long one).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "fuzz"))

import harness as fuzz_harness  # noqa: E402  (fuzz/harness.py)

import qwen4exp  # noqa: E402
from conftest import run_isolated  # noqa: E402
from qwen4exp import Kind, Segment, TokenBuffer  # noqa: E402

FUZZ_SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


# ---------------------------------------------------------------- regressions

REGRESSION_FILES = fuzz_harness.regression_files()


@pytest.mark.parametrize(
    "harness,path", REGRESSION_FILES, ids=[f"{h}/{os.path.basename(p)}" for h, p in REGRESSION_FILES]
)
def test_fuzz_regression(harness, path):
    fuzz_harness.replay_file(harness, path)


def test_regression_corpus_is_present():
    assert {h for h, _ in REGRESSION_FILES} >= {"encode", "segments", "chat", "decode"}


@pytest.mark.parametrize("harness", fuzz_harness.HARNESSES)
def test_seed_corpus_replays(harness):
    d = os.path.join(REPO, "fuzz", "corpus", harness)
    files = sorted(os.listdir(d))
    assert files
    for f in files[:40]:
        with open(os.path.join(d, f), "rb") as fh:
            fuzz_harness.RUNNERS[harness](fh.read())


# ---------------------------------------------------------------- hypothesis drivers


# Raw bytes into each harness's decoder (the most bytes each decoder usefully reads).
BINARY_SIZES = {"encode": 600, "segments": 600, "chat": 800, "decode": 400}


# Hypothesis examples a driver runs by default; ten times as many under slow.
@pytest.mark.parametrize("examples", [300, pytest.param(3000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(BINARY_SIZES))
def test_fuzz_bytes(name, examples):
    run = fuzz_harness.RUNNERS[name]

    @settings(max_examples=examples, **FUZZ_SETTINGS)
    @given(st.binary(max_size=BINARY_SIZES[name]))
    def drive(data):
        run(data)

    drive()


@settings(max_examples=300, **FUZZ_SETTINGS)
@given(st.text(max_size=300))
def test_fuzz_encode_text(text):
    fuzz_harness.check_encode(text)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "bot"])},
    optional={
        "content": st.one_of(
            st.text(max_size=40),
            st.none(),
            st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "x"]),
                                            "text": st.text(max_size=20)}), max_size=3),
            _json,
        ),
        "reasoning_content": st.one_of(st.text(max_size=30), st.none(), _json),
        "tool_calls": st.one_of(
            st.lists(st.fixed_dictionaries({"name": st.text(max_size=10),
                                             "arguments": st.one_of(st.dictionaries(st.text(max_size=5), _json,
                                                                                    max_size=3),
                                                                    st.text(max_size=20), _json)}),
                     max_size=2),
            _json,
        ),
    },
)


_chat_request = given(
    st.lists(_message, min_size=0, max_size=5) | _json,
    st.one_of(st.none(), st.lists(st.dictionaries(st.text(max_size=8), _json, max_size=3), max_size=2), _json),
    st.booleans(),
    st.booleans(),
)


def _check_chat(messages, tools, agp, thinking):
    fuzz_harness.check_chat(messages, {"tools": tools, "add_generation_prompt": agp, "enable_thinking": thinking})


test_fuzz_chat_structured = settings(max_examples=200, **FUZZ_SETTINGS)(_chat_request(_check_chat))
test_fuzz_chat_structured_long = pytest.mark.slow(
    settings(max_examples=2000, **FUZZ_SETTINGS)(_chat_request(_check_chat)))


@settings(max_examples=300, **FUZZ_SETTINGS)
@given(st.lists(st.integers(min_value=-(2**40), max_value=2**40) | st.sampled_from(range(151640, 151672)),
                max_size=40))
def test_fuzz_decode_ints(ids):
    fuzz_harness.check_decode(ids)


# ---------------------------------------------------------------- hand-picked hostile inputs

HOSTILE_TEXTS = [
    "",
    "\x00" * 100,
    "\u0301" * 5000,  # only marks: no starter at all
    "a" + "\u0301\u0316" * 3000,  # one starter, long run of marks (counting sort)
    "\u1100" * 2000 + "\u1161" * 2000,  # jamo runs
    "\U0010ffff" * 1000,
    "\ufeff" * 500 + "x",
    " " * 5000 + "x",
    "\r\n" * 3000,
    "'" * 3000 + "s",
    "'\u017f" * 1000,
    "9" * 5000,
    "<|im_start|>" * 500,
    "\u00e9" * 10000,  # one long letter word with 2-byte chars
    "\u4e2d" * 10000,
]


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
def test_hostile_texts_match_reference(text):
    fuzz_harness.check_encode(text)


@pytest.mark.parametrize(
    "segments",
    [
        [],
        [Segment(0, 2**63 - 1, Kind.DATA)],
        [Segment(-(2**63) + 1, 5, Kind.DATA)],
        [Segment(0, 1, Kind.DATA), Segment(1, 1, Kind.TRUSTED_CONTROL)],
        [(0, 5, 0)],
        [(0, 5, Kind.DATA, None)],
        [Segment(0, 5, Kind.DATA)] * 3,
        [Segment(True, 5, Kind.DATA)],
        [Segment(0, 5.0, Kind.DATA)],
        [Segment(0, 10**30, Kind.DATA)],
        "abc",
        [None],
    ],
)
def test_hostile_segments_leave_buffer_untouched(segments):
    fuzz_harness.check_segments(b"hello", segments, [1, 2, 3])


def test_hostile_data_types():
    tok = fuzz_harness.tokenizer()
    buf = TokenBuffer()
    for data in ("hello", None, 5, ["h"]):
        with pytest.raises(TypeError):
            tok.encode_segments_into(data, [Segment(0, 5, Kind.DATA)], buf)
    assert len(buf) == 0
    with pytest.raises(TypeError):
        tok.encode_segments_into(b"hello", [Segment(0, 5, Kind.DATA)], [])
    for bad in (None, b"abc", 5, ["a"]):
        with pytest.raises(TypeError):
            tok.encode(bad)


def test_control_segment_of_every_atom_pair():
    atoms = list(fuzz_harness.tokenizer().atoms)
    for a in atoms:
        for b in atoms[::5]:
            data = (a + b).encode()
            fuzz_harness.check_segments(data, [Segment(0, len(data), Kind.TRUSTED_CONTROL)])


# ---------------------------------------------------------------- short soak


def _load_soak():
    spec = importlib.util.spec_from_file_location("qwen4exp_soak", os.path.join(REPO, "tools", "soak.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_concurrency_soak_short():
    """8 threads x 2,500 calls (a fixed amount of work, not a duration) while a
    ninth keeps flushing the caches."""
    result = _load_soak().soak(threads=8, seed=1, tok=qwen4exp.Tokenizer(cache_size=64),
                                calls_per_thread=2500)
    assert not result["errors"], result["errors"]
    assert not result["mismatches"], result["mismatches"]
    assert result["calls"] == 8 * 2500


# ---------------------------------------------------------------- hostile options (crash-safe: subprocess)


@pytest.mark.parametrize(
    "cache_size,outcome",
    [("2**62", "refused"), ("2**63", "refused"), ("2**61 + 1", "refused"), ("2**40", "refused"),
     ("(1 << 22) + 1", "refused"), ("-1", "refused"), ("True", "refused"), ("0", "ok"), ("5", "ok")],
)
def test_huge_cache_size_fails_cleanly(cache_size, outcome):
    """Tokenizer(cache_size=2**62) used to overflow `cache_slots * sizeof(CacheSlot)` in
    pyx/_bpe.pyx worker_init (size_t wraps to 0, malloc(1) succeeds) and the first
    encode wrote far out of bounds (SIGSEGV). The documented range is 0 (no cache)
    to 2**22 words: anything else is a ValueError at construction (in a subprocess,
    so that a crash cannot take pytest down); inside it the ids are exact."""
    code = f"""
import qwen4exp
try:
    tok = qwen4exp.Tokenizer(cache_size={cache_size})
except ValueError as exc:
    print("refused:", exc)
else:
    ids = tok.encode("hello world, this is a test")
    assert ids == qwen4exp.Tokenizer().encode("hello world, this is a test"), ids
    print("ok")
"""
    proc = run_isolated(code)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stdout[-500:]} {proc.stderr[-1500:]}"
    assert proc.stdout.split(":")[0].strip() == outcome, proc.stdout
    if outcome == "refused":
        assert "cache_size must be an int from 0 (no cache) to 4,194,304 words" in proc.stdout


def test_huge_num_threads_is_clamped():
    """num_threads is any positive int; above 1024 it is clamped to 1024 (documented in
    encode_batch): 2**40 neither raises OverflowError nor tries to start 2**40 threads."""
    from qwen4exp.encode.core import _THREADS_MAX, thread_count as _thread_count

    tok = fuzz_harness.tokenizer()
    assert _THREADS_MAX == 1024
    assert [_thread_count(n) for n in (1, 1024, 1025, 2**40, 2**200)] == [1, 1024, 1024, 1024, 1024]
    texts = ["a b", "c", "", "\u4e2d\u6587 x"] * 8
    assert tok.encode_batch(texts, num_threads=2**40) == [tok.encode(t) for t in texts]
    chats = [qwen4exp.SegmentBuilder().text(t or "x").build() for t in texts]
    assert [a.tolist() for a in tok.encode_chats(chats, num_threads=2**40)] == [tok.encode(t or "x") for t in texts]
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError):
            tok.encode_batch(texts, num_threads=bad)