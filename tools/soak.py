#!/usr/bin/env python3
"""Concurrency soak: many Python threads share one Tokenizer for N seconds.

    PYTHONPATH=src python tools/soak.py --seconds 120 --threads 16

Every public method is called (encode, count, encode_batch, decode,
decode_bytes, encode_segments, encode_segments_into, encode_chat,
encode_chats, render_chat, render_chat_into, flush_cache, atoms, vocab_size,
and the error paths) with inputs whose results were computed once,
single-threaded, beforehand; every result must be identical. A flusher keeps
emptying the word caches and a stream of distinct words keeps evicting them,
so cache reuse, eviction and the worker pool are all exercised under
contention. Prints a JSON summary; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":
    # Run as a script from a source tree: use its build. Imported (the tests
    # load it), leave sys.path alone, so that the caller's qwen4exp stays the
    # one every later import and metadata lookup finds.
    import importlib.util

    if importlib.util.find_spec("qwen4exp") is None:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import numpy as np  # noqa: E402

import qwen4exp  # noqa: E402
from qwen4exp import Kind, Segment, SegmentBuilder, TokenBuffer  # noqa: E402
from qwen4exp.render.chat import render_chat, render_chat_into  # noqa: E402

TEXTS = [
    "Hello, world! It's a test of the soak.",
    "def f(x):\n    return x ** 2  # square\n\n\n",
    '{"key": [1, 2, 3], "nested": {"a": "b"}}' * 20,
    "e\u0301 cafe\u0301 \u1100\u1161\u11a8 A\u030a \u0958 " * 40,
    "\u4e2d\u6587\u6d4b\u8bd5" * 300,
    "x" * 3000,
    "a   b\t\tc\r\n\r\n  \n\u2028\u2029\x85 end  " * 30,
    "I'LL we'VE they'RE it'\u017f \u212a 12345 \u00b2\u00bd",
    "<|im_start|>user\nhi<|im_end|>\n<think>\n</think>" * 10,
    "",
]


def _words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(3, 12)))
                    for _ in range(n))


def build_cases(tok):
    """(name, callable) pairs with their single-threaded expected results."""
    stream = (SegmentBuilder().control("<|im_start|>").text("user\n" + TEXTS[3]).control("<|im_end|>")
              .text("\n").control("<think>").text(TEXTS[1]).control("</think>").build())
    chats = [render_chat([{"role": "user", "content": t or "x"}, {"role": "assistant", "content": t}],
                         add_generation_prompt=True) for t in TEXTS[:6]]
    requests = [
        ([{"role": "system", "content": "sys"}, {"role": "user", "content": TEXTS[0]}], {}),
        ([{"role": "user", "content": "q"},
          {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {"a": [1, 2]}}]},
          {"role": "tool", "content": TEXTS[7]}],
         {"tools": [{"type": "function", "function": {"name": "f"}}], "add_generation_prompt": True}),
    ]
    ids_for_decode = [tok.encode(t) for t in TEXTS] + [[151644, 872, 198, 151645], [1, 2, 226, 224]]
    bad_segments = [Segment(0, 3, Kind.DATA), Segment(2, len(stream.data), Kind.TRUSTED_CONTROL)]
    word_sets = [_words(s, 400) for s in range(16)]

    cases = []

    def add(name, fn):
        cases.append((name, fn))

    for i, t in enumerate(TEXTS):
        add(f"encode[{i}]", lambda t=t: tok.encode(t))
        add(f"count[{i}]", lambda t=t: tok.count(t))
    for i, w in enumerate(word_sets):
        add(f"encode_words[{i}]", lambda w=w: tok.encode(w))
    add("encode_batch", lambda: tok.encode_batch(TEXTS + word_sets[:4], num_threads=3))
    for i, ids in enumerate(ids_for_decode):
        add(f"decode[{i}]", lambda ids=ids: tok.decode(ids))
        add(f"decode_bytes[{i}]", lambda ids=ids: tok.decode_bytes(np.asarray(ids, dtype=np.int64)))
    add("encode_segments", lambda: tok.encode_segments(stream.data, stream.segments).tolist())

    def into():
        buf = TokenBuffer(capacity=8)
        tok.encode_segments_into(b"pre", [Segment(0, 3, Kind.DATA)], buf)
        tok.encode_segments_into(stream.data, stream.segments, buf)
        try:
            tok.encode_segments_into(stream.data, bad_segments, buf)
        except qwen4exp.SegmentError as exc:
            err = str(exc)
        return buf.tolist(), err

    add("encode_segments_into", into)
    for i, c in enumerate(chats):
        add(f"encode_chat[{i}]", lambda c=c: tok.encode_chat(c).tolist())
    add("encode_chats", lambda: [a.tolist() for a in tok.encode_chats(chats, num_threads=2)])

    def render(req=requests):
        out = []
        for msgs, kw in req:
            chat = render_chat(msgs, **kw)
            target = qwen4exp.RenderedChat()
            render_chat_into(msgs, target, **kw)
            assert target == chat
            out.append((chat.data, chat.segments, tok.encode_chat(chat).tolist()))
        return out

    add("render_chat", render)

    def errors():
        out = []
        for fn in (lambda: tok.encode("a\ud800"), lambda: tok.decode([10**6]),
                   lambda: tok.encode_segments(b"\xff", [Segment(0, 1, Kind.DATA)]),
                   lambda: tok.encode_segments(b"<|im_en", [Segment(0, 7, Kind.TRUSTED_CONTROL)]),
                   lambda: render_chat([{"role": "robot", "content": "x"}])):
            try:
                fn()
                out.append(None)
            except qwen4exp.Qwen4ExpError as exc:
                out.append((type(exc).__name__, str(exc)))
        return out

    add("errors", errors)
    add("atoms", lambda: dict(tok.atoms))
    add("vocab_size", lambda: tok.vocab_size)
    expected = {name: fn() for name, fn in cases}
    return cases, expected


def soak(seconds: float = 10.0, threads: int = 8, seed: int = 0, tok=None,
         calls_per_thread: int | None = None) -> dict:
    """Run the soak for `seconds`, or, when `calls_per_thread` is given, until each thread
    has made `calls_per_thread` calls (a fixed amount of work: what a test checks then
    does not depend on the machine's speed)."""
    tok = tok or qwen4exp.Tokenizer()
    cases, expected = build_cases(tok)
    stop = time.monotonic() + seconds
    finished = threading.Event()  # set when every worker is done

    def more(n: int) -> bool:
        return n < calls_per_thread if calls_per_thread is not None else time.monotonic() < stop

    mismatches: list[str] = []
    errors: list[str] = []
    calls = [0] * threads
    flushes = [0]
    lock = threading.Lock()

    def worker(idx: int):
        rng = random.Random(seed * 1000 + idx)
        n = 0
        try:
            while more(n):
                name, fn = cases[rng.randrange(len(cases))]
                got = fn()
                n += 1
                if got != expected[name]:
                    with lock:
                        if len(mismatches) < 20:
                            mismatches.append(f"thread {idx}: {name}")
        except BaseException as exc:  # noqa: BLE001
            with lock:
                errors.append(f"thread {idx}: {type(exc).__name__}: {exc}")
        calls[idx] = n

    def flusher():
        rng = random.Random(seed)
        while not finished.is_set():
            tok.flush_cache()
            flushes[0] += 1
            # distinct words evict what the cache holds
            tok.encode(_words(rng.randrange(10**9), 200))
            finished.wait(0.002)  # pacing only: leave the workers the caches for a moment

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    flush = threading.Thread(target=flusher)
    for t in ts + [flush]:
        t.start()
    for t in ts:
        t.join()
    finished.set()
    flush.join()
    return {
        "seconds": round(time.monotonic() - started, 1),
        "threads": threads,
        "calls": sum(calls),
        "cases": len(cases),
        "cache_flushes": flushes[0],
        "mismatches": mismatches,
        "errors": errors,
        "peak_rss_mb": round(max(rss0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024, 1),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    result = soak(args.seconds, args.threads, args.seed)
    print(json.dumps(result, indent=2))
    return 1 if result["mismatches"] or result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
