"""Thread safety and batch equivalence on real corpora.

* `encode_batch` / `encode_chats` on any number of native threads equal the
  single-threaded, one-at-a-time results;
* many Python threads sharing one Tokenizer (and its word cache, including a
  tiny cache that evicts constantly) calling encode / count / encode_batch /
  encode_chat / encode_chats / decode concurrently get exactly the results
  precomputed on one thread.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time

import numpy as np
import pytest

import corpora
import qwen4exp
from qwen4exp.render.chat import render_chat

from helpers import ORACLE_ACCEPTED, ORACLE_CASES, render_oracle

EXAMPLE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "src", "qwen4exp", "cli", "example_chat.json",
)

N_PY_THREADS = 8


def _docs(name: str, limit_bytes: int | None = None) -> list[str]:
    docs = list(corpora.DOCUMENTS[name]())
    if limit_bytes is None:
        return docs
    out, size = [], 0
    for d in docs:
        out.append(d)
        size += len(d)
        if size >= limit_bytes:
            break
    return out


@pytest.fixture(scope="module")
def code_docs():
    return _docs("code")


@pytest.fixture(scope="module")
def ml_docs():
    return _docs("multilingual")


@pytest.fixture(scope="module")
def ws_docs():
    return _docs("whitespace")


@pytest.fixture(scope="module")
def reference(tok, code_docs, ml_docs, ws_docs):
    """Single-threaded, one-text-at-a-time ids of every document."""
    return {
        "code": [tok.encode(d) for d in code_docs],
        "multilingual": [tok.encode(d) for d in ml_docs],
        "whitespace": [tok.encode(d) for d in ws_docs],
    }


# ---------------------------------------------------------------------------
# native threads
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_encode_batch_threads_equal_single(tok, reference, name, threads, request):
    docs = request.getfixturevalue({"code": "code_docs", "multilingual": "ml_docs",
                                    "whitespace": "ws_docs"}[name])
    got = tok.encode_batch(docs, num_threads=threads)
    assert len(got) == len(docs)
    bad = [i for i, (a, b) in enumerate(zip(got, reference[name])) if a != b]
    assert not bad, f"{name}, {threads} threads: documents {bad[:10]} differ"


def test_encode_batch_default_threads_and_whole_corpus(tok, reference, ml_docs):
    assert tok.encode_batch(ml_docs) == reference["multilingual"]
    # More threads than texts, and texts of very different sizes.
    mixed = [ml_docs[0], "", "x", "".join(ml_docs[:50]), " \n\n "]
    assert tok.encode_batch(mixed, num_threads=16) == [tok.encode(t) for t in mixed]
    assert tok.encode_batch([], num_threads=4) == []


def test_encode_batch_count_agree(tok, reference, code_docs):
    for d, ids in zip(code_docs[:40], reference["code"]):
        assert tok.count(d) == len(ids)


def _chats(ml_docs, code_docs):
    """Real conversations built from corpus documents, plus the bundled example."""
    rnd = random.Random(5)
    with open(EXAMPLE, encoding="utf-8") as f:
        ex = json.load(f)
    out = [render_chat(ex["messages"], tools=ex["tools"])]
    tools = ex["tools"]
    for i in range(120):
        a, b = rnd.choice(ml_docs), rnd.choice(code_docs)[:4000]
        msgs = [
            {"role": "system", "content": "You review code and answer in the user's language."},
            {"role": "user", "content": a + "\n<|im_end|> typed by the user"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": a[:300],
                "tool_calls": [{"type": "function", "function": {
                    "name": "get_weather", "arguments": {"city": a[:20], "unit": "celsius"}}}],
            },
            {"role": "tool", "content": b},
            {"role": "assistant", "content": a[::-1][:500]},
        ]
        if i % 3 == 0:
            msgs.append({"role": "user", "content": b[:800]})
        out.append(
            render_chat(
                msgs,
                tools=tools if i % 2 else None,
                add_generation_prompt=bool(i % 3 == 0),
                enable_thinking=bool(i % 4),
            )
        )
    return out


@pytest.fixture(scope="module")
def chats(ml_docs, code_docs):
    return _chats(ml_docs, code_docs)


@pytest.fixture(scope="module")
def chat_reference(tok, chats):
    return [tok.encode_chat(c) for c in chats]


@pytest.mark.parametrize(("threads", "masks"), [(1, False), (2, False), (4, False), (8, False), (2, True)])
@pytest.mark.parametrize("source", ["corpora", "oracle"])
def test_encode_chats_equals_encode_chat(tok, chats, source, threads, masks):
    """encode_chats(chats) is [encode_chat(c) for c in chats], whatever the
    thread count: the ids, and with return_masks every mask. Chats of the
    corpora, and the chat oracle's accepted requests (typed atoms included)."""
    if source == "oracle":
        chats = [render_oracle(ORACLE_CASES[n]["request"]) for n in ORACLE_ACCEPTED] * 3
    options = {"return_masks": True} if masks else {}
    got = tok.encode_chats(chats, num_threads=threads, **options)
    assert len(got) == len(chats)
    for i, (chat, batch) in enumerate(zip(chats, got)):
        single = tok.encode_chat(chat, **options)
        if not masks:
            batch, single = (batch,), (single,)
        assert batch[0].dtype == np.int32
        for a, b in zip(batch, single, strict=True):
            assert np.array_equal(a, b), f"chat {i} differs with {threads} threads"


def test_encode_chats_all_or_nothing_on_threads(tok, chats):
    bad = qwen4exp.SegmentBuilder().text("hi ").control("<|not_an_atom|>").build()
    batch = list(chats[:20]) + [bad] + list(chats[20:40])
    with pytest.raises(qwen4exp.UnknownControlError, match=r"chats\[20\]"):
        tok.encode_chats(batch, num_threads=4)


def test_chat_atoms_only_from_controls(tok, chats, chat_reference):
    """The literal <|im_end|> typed by the user never becomes the atom id."""
    im_end = tok.atoms["<|im_end|>"]
    for chat, ids in zip(chats, chat_reference):
        markers = sum(
            chat.data[s.start : s.end].count(b"<|im_end|>")
            for s in chat.segments
            if s.kind is qwen4exp.Kind.TRUSTED_CONTROL
        )
        assert int(np.count_nonzero(ids == im_end)) == markers


# ---------------------------------------------------------------------------
# Python threads sharing one Tokenizer
# ---------------------------------------------------------------------------


def _run_threads(n, target):
    barrier = threading.Barrier(n)
    errors = []

    def run(k):
        try:
            barrier.wait()
            target(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append((k, exc))

    threads = [threading.Thread(target=run, args=(k,), name=f"t{k}") for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        k, exc = errors[0]
        raise AssertionError(f"{len(errors)} threads failed; thread {k}: {exc!r}") from exc


def _mixed_workload(tok, texts, text_ids, chats, chat_ids, rounds):
    # Decoded on this thread first (reversed text in the chats is not NFC, so
    # decode gives its NFC form, not chat.data).
    chat_bytes = [tok.decode_bytes(i) for i in chat_ids]

    def work(k):
        rnd = random.Random(1000 + k)
        for r in range(rounds):
            op = (k + r) % 6
            if op == 0:
                for i in rnd.sample(range(len(texts)), min(30, len(texts))):
                    assert tok.encode(texts[i]) == text_ids[i], f"encode text {i}"
            elif op == 1:
                sel = rnd.sample(range(len(texts)), min(40, len(texts)))
                got = tok.encode_batch([texts[i] for i in sel], num_threads=rnd.choice([1, 2, 3]))
                assert got == [text_ids[i] for i in sel], "encode_batch"
            elif op == 2:
                for i in rnd.sample(range(len(chats)), min(10, len(chats))):
                    assert np.array_equal(tok.encode_chat(chats[i]), chat_ids[i]), f"chat {i}"
            elif op == 3:
                sel = rnd.sample(range(len(chats)), min(12, len(chats)))
                got = tok.encode_chats([chats[i] for i in sel], num_threads=rnd.choice([1, 2]))
                for g, i in zip(got, sel):
                    assert np.array_equal(g, chat_ids[i]), f"encode_chats {i}"
            elif op == 4:
                for i in rnd.sample(range(len(texts)), min(30, len(texts))):
                    assert tok.decode(text_ids[i]) == texts[i], f"decode {i}"
                for i in rnd.sample(range(len(chats)), min(5, len(chats))):
                    assert tok.decode_bytes(chat_ids[i]) == chat_bytes[i], f"decode chat {i}"
            else:
                for i in rnd.sample(range(len(texts)), min(30, len(texts))):
                    assert tok.count(texts[i]) == len(text_ids[i]), f"count {i}"

    return work


def _workload_inputs(code_docs, ml_docs, ws_docs, chats):
    rnd = random.Random(7)
    texts = (
        [d[:6000] for d in rnd.sample(code_docs, 60)]
        + rnd.sample(ml_docs, 120)
        + list(ws_docs[:40])
    )
    return texts, chats[:40]


def test_python_threads_share_one_tokenizer(tok, code_docs, ml_docs, ws_docs, chats):
    texts, some_chats = _workload_inputs(code_docs, ml_docs, ws_docs, chats)
    # Precomputed on this thread, before any concurrency, on a separate tokenizer
    # (a fresh cache) so the shared one starts cold.
    ref_tok = qwen4exp.Tokenizer()
    text_ids = [ref_tok.encode(t) for t in texts]
    chat_ids = [ref_tok.encode_chat(c) for c in some_chats]
    # NFC-normalised corpora round-trip exactly through decode.
    assert all(ref_tok.decode(i) == t for i, t in zip(text_ids, texts))
    shared = qwen4exp.Tokenizer()
    _run_threads(N_PY_THREADS, _mixed_workload(shared, texts, text_ids, some_chats, chat_ids, 12))


@pytest.mark.parametrize("cache_size", [0, 64])
def test_python_threads_small_or_no_cache(cache_size, code_docs, ml_docs, ws_docs, chats):
    """A tiny cache evicts constantly under concurrency: results must not change."""
    texts, some_chats = _workload_inputs(code_docs, ml_docs, ws_docs, chats)
    ref_tok = qwen4exp.Tokenizer()
    text_ids = [ref_tok.encode(t) for t in texts]
    chat_ids = [ref_tok.encode_chat(c) for c in some_chats]
    shared = qwen4exp.Tokenizer(cache_size=cache_size)
    _run_threads(N_PY_THREADS, _mixed_workload(shared, texts, text_ids, some_chats, chat_ids, 6))


def test_python_threads_with_flush_cache(tok, ml_docs):
    """flush_cache() from one thread while others encode."""
    texts = ml_docs[:150]
    ref = [tok.encode(t) for t in texts]
    shared = qwen4exp.Tokenizer(cache_size=256)
    stop = threading.Event()

    def flusher():
        while not stop.is_set():
            shared.flush_cache()

    f = threading.Thread(target=flusher)
    f.start()
    try:
        def work(k):
            for r in range(4):
                if (k + r) % 2:
                    assert shared.encode_batch(texts, num_threads=2) == ref
                else:
                    assert [shared.encode(t) for t in texts] == ref
        _run_threads(4, work)
    finally:
        stop.set()
        f.join()


def test_encode_batch_releases_the_gil(tok, code_docs):
    """While encode_batch runs, another Python thread can run. With the
    switch interval made so long that the interpreter never takes the GIL
    from a thread, an observer waiting for it can only get it when the
    batch gives it up: it must see the batch still in progress. (A batch
    that kept the GIL would let it in only at the join, after the batch,
    on every try.)"""
    docs = code_docs * 2
    seen = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e6)
    try:
        for _ in range(5):  # the batch gives the GIL up for most of its run: one try is enough
            inside = [False]
            gate = threading.Lock()
            gate.acquire()
            observer = threading.Thread(target=lambda: (gate.acquire(), seen.append(inside[0])))
            observer.start()
            inside[0] = True
            gate.release()  # the observer now waits for the GIL
            tok.encode_batch(docs, num_threads=1)
            inside[0] = False
            observer.join()
            if seen[-1]:
                break
    finally:
        sys.setswitchinterval(interval)
    assert seen[-1], f"the observer never ran during a batch ({len(seen)} batches)"


# ---------------------------------------------------------------------------
# the scheduler on a busy machine (pyx/_scheduler.pyx, pyx/_crew.pyx;
# docs/PERFORMANCE.md, "A busy machine")
# ---------------------------------------------------------------------------


def test_claim_order_puts_big_streams_first():
    """Streams over 1/(16 * threads) of the batch's bytes are claimed first,
    largest first (ties in their order), the rest after in their order; with
    none, or all, of them big, the batch goes in order."""
    from qwen4exp._native import _scheduler

    sizes = [10, 500, 10, 900, 10, 500, 10] + [10] * 40
    # total 2,330: the limit for 2 threads is 72 bytes
    assert _scheduler._claim_order(sizes, 2) == [3, 1, 5, 0, 2, 4, 6] + list(range(7, 47))
    assert _scheduler._claim_order([10] * 50, 2) is None
    assert _scheduler._claim_order([100, 200], 2) is None  # all big: nothing to reorder
    assert _scheduler._claim_order([], 2) is None


@pytest.mark.parametrize("threads", [2, 3])
def test_batches_with_big_documents_keep_their_order(tok, reference, code_docs, threads):
    """Big documents are claimed first and converted as they are claimed:
    every result still lands at its own index, for encode_batch and for
    encode_chats (segmented streams)."""
    big = sorted(range(len(code_docs)), key=lambda k: -len(code_docs[k]))[:3]
    small = [k for k in range(len(code_docs)) if k not in big][:60]
    order = small[:20] + [big[2]] + small[20:40] + [big[0], big[1]] + small[40:]
    docs = [code_docs[k] for k in order]
    assert tok.encode_batch(docs, num_threads=threads) == [reference["code"][k] for k in order]
    chats = [render_chat([{"role": "user", "content": d}]) for d in docs]
    got = tok.encode_chats(chats, num_threads=threads)
    assert [a.tolist() for a in got] == [tok.encode_chat(c).tolist() for c in chats]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux affinity and two CPUs")
def test_member_moves_off_a_cpu_and_keeps_its_affinity():
    """A crew member that starts on its poster's CPU moves itself: the move
    (the member's own code, run here on a Python thread) lands on another CPU
    and leaves the thread's affinity as it was; with one CPU allowed, there
    is nowhere to go and nothing changes."""
    from qwen4exp._native import _crew

    results = {}

    def work():
        mask = os.sched_getaffinity(0)
        results["free"] = _crew._move_off_here(), mask, os.sched_getaffinity(0)
        one = {min(mask)}
        os.sched_setaffinity(0, one)
        results["pinned"] = _crew._move_off_here(), os.sched_getaffinity(0)

    t = threading.Thread(target=work)  # its affinity is its own: the test's thread keeps its own
    t.start()
    t.join()
    (before, landed), mask, mask_after = results["free"]
    assert landed >= 0 and landed != before and landed in mask
    assert mask_after == mask
    (before, landed), pinned = results["pinned"]
    assert landed == -1
    assert len(pinned) == 1


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_crew_threads_keep_the_process_affinity(tok, code_docs):
    """After batches and split texts (members moved or not), every thread of
    the process may still run on every CPU the process may: a move never
    narrows a member for good."""

    def allowed(task, gone=None):
        try:
            with open(f"/proc/self/task/{task}/status") as f:
                return next(line.split(":", 1)[1].strip() for line in f if line.startswith("Cpus_allowed_list"))
        except FileNotFoundError:  # a thread (not the crew's: members never end) that just ended
            return gone

    main = allowed(os.getpid())
    for _ in range(5):
        tok.encode_batch(code_docs[:40], num_threads=2)
        tok.encode(code_docs[0] * 4)
    # A member woken late may be moving right now (its mask narrowed for the
    # two system calls of a move): look until every thread is seen whole.
    for _ in range(200):
        narrowed = {task: allowed(task, main) for task in os.listdir("/proc/self/task")}
        narrowed = {task: cpus for task, cpus in narrowed.items() if cpus != main}
        if not narrowed:
            break
        time.sleep(0.01)
    assert not narrowed, f"threads whose affinity stayed narrowed: {narrowed} (the process's: {main})"


@pytest.fixture(scope="module")
def long_text(code_docs):
    """A text encode() cuts across the crew, and its ids on one thread."""
    text = "".join(code_docs[:8])
    assert len(text.encode()) > 8 * 2048
    return text, qwen4exp.Tokenizer(encode_threads=1).encode(text)


def test_split_texts_and_batches_post_to_the_crew(tok, reference, code_docs, long_text):
    """encode() of a long text and encode_batch on 2 threads hand work to
    the crew (a post each; whether the member takes it is up to the
    machine), and the ids are those of one thread."""
    from qwen4exp._native import _crew, _encoder

    text, want = long_text
    assert not _encoder._set_split_backoff(False)  # tests/conftest.py turned it off
    before = _crew._posts()
    assert tok.encode(text) == want
    after_encode = _crew._posts()
    assert tok.encode_batch(code_docs[:20], num_threads=2) == reference["code"][:20]
    after_batch = _crew._posts()
    assert after_encode > before
    assert after_batch > after_encode


@pytest.fixture
def split_backoff():
    from qwen4exp._native import _crew, _encoder

    old = _encoder._set_split_backoff(True)
    _crew._set_contended(0)
    try:
        yield
    finally:
        _encoder._set_split_backoff(old)
        _crew._set_contended(0)


def test_split_backoff_after_a_split_that_did_not_pay(split_backoff, long_text):
    """A split text whose caller waited long for a helper, and longer than it
    worked, did not pay: encode() keeps texts on one thread for 1 ms, twice
    as long after each such split (up to 64 ms), and a split that paid ends
    it. Texts kept on one thread get the same ids."""
    from qwen4exp._native import _crew

    tok = qwen4exp.Tokenizer()
    native = tok.core.native
    assert native._note_split(30_000, 1_000) == 0  # waited little
    assert native._note_split(5_000, 15_000) == 0  # waited longer than it worked, but 15 µs only
    assert native._note_split(500_000, 300_000) == 0  # waited long, but less than it worked
    first = native._note_split(10_000, 300_000)
    assert 0 < first <= 1_000_000
    second = native._note_split(10_000, 300_000)
    assert 1_000_000 < second <= 2_000_000
    for _ in range(10):
        last = native._note_split(10_000, 300_000)
    assert 32_000_000 < last <= 64_000_000
    text, want = long_text
    skipped, posts = native.splits_skipped, _crew._posts()
    start = time.monotonic()
    assert tok.encode(text) == want
    if time.monotonic() - start < last / 1e9:  # still backing off when the call ended, so when it began
        assert native.splits_skipped == skipped + 1 and _crew._posts() == posts
    assert native._note_split(30_000, 1_000) == 0  # a split that paid
    assert 0 < native._note_split(10_000, 300_000) <= 1_000_000  # the next back-off: from 1 ms again
    assert native._note_split(30_000, 1_000) == 0
    assert tok.encode(text) == want


def test_no_split_while_the_crew_reports_contention(split_backoff, code_docs, long_text):
    """While a member reports that it was preempted as it spun (more runnable
    threads than CPUs), encode() keeps texts on one thread; batches still
    use the crew."""
    from qwen4exp._native import _crew

    from qwen4exp._native import _encoder

    tok = qwen4exp.Tokenizer()
    native = tok.core.native
    text, want = long_text
    _crew._set_contended(10**12)  # a member's own report (50 ms from its time) never shortens it
    assert _crew._contended()
    skipped, posts = native.splits_skipped, _crew._posts()
    assert tok.encode(text) == want
    assert native.splits_skipped == skipped + 1 and _crew._posts() == posts
    tok.encode_batch(code_docs[:20], num_threads=2)
    assert _crew._posts() > posts
    _encoder._set_split_backoff(False)  # the switch covers contention too: split all the same
    posts = _crew._posts()
    assert tok.encode(text) == want
    assert native.splits_skipped == skipped + 1 and _crew._posts() > posts
