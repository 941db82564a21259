"""Allocation-failure injection (docs/FORMAT.md, "Transactions").

`qwen4exp._native._alloc.fail_allocation(k)` makes the k-th native allocation from
then on fail (a test hook: it only arms in a process started with
QWEN4EXP_FAULT_INJECTION=1, which tests/conftest.py sets). For each
representative call we count the allocations it makes
(arming with a huge k only counts), then fail each one in turn and check:

* the call raises MemoryError, or succeeds with exactly the right result
  (when the k-th allocation was never reached because threads reused a warm
  worker, or was an optional one with an exact fallback, such as the rank
  buckets of long pieces or the merge-table monotonicity check);
* a TokenBuffer given to encode_segments_into is exactly as before;
* the tokenizer still gives the right answer afterwards (no poisoned cache
  or scratch state);
* nothing leaks: after thousands of injected failures the C heap in use
  (glibc mallinfo2) has not grown.

Calls run both on a fresh Tokenizer (cold: caches empty, scratch not grown,
so the pool, cache and scratch allocations are reached) and on a warm one.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import qwen4exp
from qwen4exp import SegmentBuilder, TokenBuffer, Tokenizer
from qwen4exp._native import _alloc
from qwen4exp.render.chat import render_chat

from conftest import run_isolated

HUGE = 10**15

NON_NFC = ("e\u0301 cafe\u0301 \u1100\u1161\u11a8 A\u030a \u0958 \u212b " * 300)[:6000]
WORD_300 = "x" * 150 + "y" * 100 + "z" * 50
LONG_WORD = "ab" * 2500  # 5,000-byte piece: heap path with big scratch
NFC_PARTS = "hello world, it's me. \u4e2d\u6587 caf\u00e9 " * 400  # NFC, cut in parts each thread checks
TEXTS = [NON_NFC, WORD_300, "hello world, it's me. " * 50, "abc", "", "\u4e2d\u6587" * 200]


def _stream():
    b = SegmentBuilder()
    b.control("<|im_start|>").text("user\nhello e\u0301 " + "z" * 200 + NON_NFC[:300])
    b.control("<|im_end|>").text("\n").control("<|im_start|>").text("assistant\n")
    b.control("<think>").text("\n" + WORD_300 + "\n").control("</think>").text("\n\nok")
    b.control("<|im_end|><|im_start|>")
    return b.build()


STREAM = _stream()
CHATS = [
    render_chat([{"role": "user", "content": t or "x"}], add_generation_prompt=True) for t in TEXTS
] + [STREAM]


def _call_encode_nfc(tok):
    return tok.encode(NON_NFC)


def _call_encode_word(tok):
    return tok.encode(WORD_300)


def _call_encode_nfc_parts(tok):
    return tok.encode(NFC_PARTS)


def _call_encode_long_word(tok):
    return tok.encode(LONG_WORD)


def _call_count(tok):
    return tok.count(NON_NFC + WORD_300)


def _call_segments(tok):
    return tok.encode_segments(STREAM.data, STREAM.segments).tolist()


def _call_batch(tok):
    return tok.encode_batch(TEXTS, num_threads=2)


def _call_chats(tok):
    return [a.tolist() for a in tok.encode_chats(CHATS, num_threads=2)]


def _call_chat(tok):
    return tok.encode_chat(CHATS[0]).tolist()


def _call_arrow(tok):
    import pyarrow as pa

    # three chunks, so that columns are joined while later ones are encoded
    chunks = [pa.array(t, pa.large_string()) for t in (TEXTS[:2], TEXTS[2:4] + [None], TEXTS[4:] * 40)]
    return tok.encode_arrow(pa.chunked_array(chunks, pa.large_string()), num_threads=2).to_pylist()


CALLS = {
    "encode_non_nfc": _call_encode_nfc,
    "encode_nfc_parts": _call_encode_nfc_parts,
    "encode_300_byte_word": _call_encode_word,
    "encode_5000_byte_word": _call_encode_long_word,
    "count": _call_count,
    "encode_segments_with_controls": _call_segments,
    "encode_batch_2_threads": _call_batch,
    "encode_chats_2_threads": _call_chats,
    "encode_chat": _call_chat,
    "encode_arrow_2_threads": _call_arrow,
}


def _allocations(fn) -> int:
    _alloc.fail_allocation(HUGE)
    try:
        fn()
    finally:
        n = _alloc.allocations_seen()
        _alloc.fail_allocation(0)
    return n


def _armed(k: int, fn):
    """Run fn with the k-th allocation failing: ("ok", result, seen) or ("oom", None, seen)."""
    _alloc.fail_allocation(k)
    try:
        result = fn()
    except MemoryError:
        return "oom", None, _alloc.allocations_seen()
    finally:
        seen = _alloc.allocations_seen()
        _alloc.fail_allocation(0)
    return "ok", result, seen


@pytest.fixture(autouse=True)
def _always_disarm():
    yield
    _alloc.fail_allocation(0)


@pytest.fixture(scope="module")
def expected():
    tok = Tokenizer()
    return {name: fn(tok) for name, fn in CALLS.items()}


# The cold sweep builds a Tokenizer per failed allocation. The calls with the
# most allocations (threads, parts, Arrow) fail every 4th one by default, the
# first and last always, and every one under slow; the others every one always.
COLD_SAMPLED = ("count", "encode_arrow_2_threads", "encode_batch_2_threads", "encode_chats_2_threads",
                "encode_non_nfc")


@pytest.mark.parametrize("name,stride", [(name, 4 if name in COLD_SAMPLED else 1) for name in sorted(CALLS)])
def test_every_allocation_failure_cold(name, stride, expected):
    check_cold_failures(name, stride, expected)


@pytest.mark.slow
@pytest.mark.parametrize("name", COLD_SAMPLED)
def test_every_allocation_failure_cold_all(name, expected):
    check_cold_failures(name, 1, expected)


def check_cold_failures(name, stride, expected):
    fn = CALLS[name]
    n = _allocations(lambda: fn(Tokenizer()))  # includes construction: subtract it
    n_ctor = _allocations(Tokenizer)
    n_call = n - n_ctor
    assert n_call >= 1
    sample = sorted(set(range(1, n_call + 1, stride)) | {n_call})
    failures = 0
    for k in sample:
        tok = Tokenizer()
        status, result, seen = _armed(k, lambda: fn(tok))
        if status == "oom":
            failures += 1
        else:
            # Either the k-th allocation never happened (threads may reuse a
            # warm worker), or it was an optional one with a fallback (e.g. the
            # rank buckets of long pieces: the heap method is used instead).
            # Either way the result must be exactly right.
            assert result == expected[name], f"{name}: wrong result with allocation {k} failing"
        # the same tokenizer is still correct afterwards
        assert fn(tok) == expected[name], f"{name}: wrong result after failing allocation {k}"
    assert failures >= 1 and failures >= len(sample) // 2, (
        f"{name}: only {failures} of {len(sample)} (of {n_call}) raised MemoryError")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_allocation_failure_warm(name, expected):
    fn = CALLS[name]
    tok = Tokenizer()
    fn(tok)
    n = _allocations(lambda: fn(tok))
    for k in range(1, n + 1):
        status, result, seen = _armed(k, lambda: fn(tok))
        if status == "ok":
            assert result == expected[name]
        assert fn(tok) == expected[name]


def test_constructor_allocation_failures():
    n = _allocations(Tokenizer)
    assert n >= 3  # merge table, atom table, worker pool
    want = {t: Tokenizer().encode(t) for t in ("hello world", LONG_WORD, NON_NFC[:500])}
    raised = 0
    for k in range(1, n + 1):
        _alloc.fail_allocation(k)
        try:
            tok = Tokenizer()
        except MemoryError:
            raised += 1
            continue
        finally:
            _alloc.fail_allocation(0)
        # an optional allocation (e.g. the merge-table monotonicity check) may
        # fail without failing construction: the tokenizer must still be exact
        for t, ids in want.items():
            assert tok.encode(t) == ids, f"constructor allocation {k} failed: wrong ids"
    assert raised >= n - 1
    assert Tokenizer().encode("hello world") == [14990, 1879]


def _buffer_state(buf: TokenBuffer):
    return len(buf), buf.tolist(), buf._buf.copy()


@pytest.mark.parametrize("cold", [True, False])
def test_encode_segments_into_is_transactional_under_oom(cold, expected):
    want = expected["encode_segments_with_controls"]
    warm_tok = Tokenizer()
    buf = TokenBuffer(capacity=4)
    warm_tok.encode_segments_into(b"prefix", [qwen4exp.Segment(0, 6, qwen4exp.Kind.DATA)], buf)
    call = lambda t: t.encode_segments_into(STREAM.data, STREAM.segments, buf)  # noqa: E731
    n = _allocations(lambda: Tokenizer().encode_segments(STREAM.data, STREAM.segments)) - _allocations(Tokenizer)
    for k in range(1, n + 1):
        tok = Tokenizer() if cold else warm_tok
        before = _buffer_state(buf)
        status, _, seen = _armed(k, lambda: call(tok))
        if status == "oom":
            after = _buffer_state(buf)
            assert after[0] == before[0] and after[1] == before[1]
            assert np.array_equal(after[2][: before[0]], before[2][: before[0]])
        else:
            assert buf.tolist() == before[1] + want
            buf._len = before[0]  # drop the appended ids for the next round
    call(warm_tok)
    assert buf.tolist()[-len(want):] == want


# ---------------------------------------------------------------- leaks

try:
    _libc = ctypes.CDLL("libc.so.6")

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")]

    _libc.mallinfo2.restype = _MallInfo2
    _libc.mallinfo2.argtypes = []
except (OSError, AttributeError):  # not glibc >= 2.33
    _libc = None


def heap_in_use() -> int:
    """Bytes of C heap in use (glibc): small chunks plus mmapped blocks."""
    gc.collect()
    info = _libc.mallinfo2()
    return info.uordblks + info.hblkhd


LEAK_CALLS = ["encode_non_nfc", "encode_5000_byte_word", "encode_segments_with_controls",
              "encode_batch_2_threads", "encode_chats_2_threads"]


@pytest.mark.skipif(_libc is None, reason="needs glibc mallinfo2")
@pytest.mark.parametrize("name", ["encode_non_nfc", "encode_chats_2_threads"])
def test_sampled_injected_failures_leak_nothing(name):
    """The default run's share of the sweep below: the two calls with the most
    native paths (NFC in parallel parts; chats on two threads), every 24th
    allocation failing."""
    check_leaks(name, stride=24)


@pytest.mark.slow
@pytest.mark.skipif(_libc is None, reason="needs glibc mallinfo2")
@pytest.mark.parametrize("name", LEAK_CALLS)
def test_injected_failures_leak_nothing(name):
    """Each allocation of the call failing in turn, warm and cold."""
    check_leaks(name, stride=1)


def check_leaks(name: str, stride: int) -> None:
    fn = CALLS[name]
    tok = Tokenizer()
    fn(tok)
    n_warm = _allocations(lambda: fn(tok))
    # cold failures too: a fresh tokenizer per round, dropped after
    n_cold = _allocations(lambda: fn(Tokenizer())) - _allocations(Tokenizer)

    def warm_round():
        for k in range(1, n_warm + 1, stride):
            _armed(k, lambda: fn(tok))

    def cold_round():
        for k in range(1, n_cold + 1, stride):
            t = Tokenizer()
            _armed(k, lambda: fn(t))
            del t

    warm_round()
    cold_round()
    # A leak grows the heap in every window; a one-off step (a helper thread's
    # malloc arena reaching its size) shows in one window only, so the least
    # growth over three windows is what a leak would raise.
    grown = []
    for _ in range(3):
        base = heap_in_use()
        cold_round()
        for _ in range(14):
            warm_round()
        grown.append(heap_in_use() - base)
    injected = 14 * len(range(1, n_warm + 1, stride)) + len(range(1, n_cold + 1, stride))
    # a leak of even one small buffer per failure would show as >= 64 bytes each
    assert min(grown) < max(256 * 1024, 64 * injected), (
        f"{name}: C heap grew by {grown} bytes over {injected} injected failures per window"
    )


def test_fault_switch_counts_and_disarms():
    tok = Tokenizer()
    tok.encode("warm up")
    _alloc.fail_allocation(HUGE)
    tok.encode("e\u0301" * 10)
    assert _alloc.allocations_seen() >= 1
    _alloc.fail_allocation(0)
    assert tok.encode("e\u0301") == tok.encode("\u00e9")


def test_fault_switch_is_out_of_reach_without_the_test_environment():
    """A production process (no QWEN4EXP_FAULT_INJECTION=1 at import) cannot arm the
    switch, even by setting the variable later; the allocator never fails on purpose."""
    code = (
        "import os, qwen4exp\n"
        "from qwen4exp._native import _alloc\n"
        "assert not _alloc.fault_injection_enabled()\n"
        "os.environ['QWEN4EXP_FAULT_INJECTION'] = '1'\n"
        "for hook, args in ((_alloc.fail_allocation, (1,)), (_alloc.allocations_seen, ())):\n"
        "    try:\n"
        "        hook(*args)\n"
        "    except RuntimeError as exc:\n"
        "        assert 'QWEN4EXP_FAULT_INJECTION' in str(exc)\n"
        "    else:\n"
        "        raise SystemExit(hook.__name__ + ' worked outside tests')\n"
        "print(qwen4exp.Tokenizer().encode('e\\u0301 ok'))\n"
    )
    r = run_isolated(code, env={"QWEN4EXP_FAULT_INJECTION": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(Tokenizer().encode("e\u0301 ok"))
    assert _alloc.fault_injection_enabled()  # this test process: conftest set it
