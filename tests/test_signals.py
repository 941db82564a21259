"""Signals and exceptions at every point of the native batch (issue 13).

A signal handler that raises (Ctrl-C's KeyboardInterrupt, a SIGALRM timeout)
used to land in `threading.Thread.start()` / `join()` inside the batch, which
freed the streams under a still-running helper thread: a segfault. The batch
now runs native helper threads that never run Python code, checks for
signals between slices, and on any exception cancels and waits for every
helper before freeing anything.

Each run storms one batch kind with one signal source at one period, so the
handler fires at the start, in the middle (between slices, while waiting for a
stream, while converting) and at the end of batches of several sizes. Every
batch that completes must be exactly right, every interrupted one must raise
the handler's exception, and the tokenizer must still be right afterwards.
The long variant (`slow`) sweeps more periods for longer.
"""

from __future__ import annotations

import pytest

from conftest import run_isolated

STORM = r"""
import os, random, signal, sys, threading, time
import qwen4exp
from qwen4exp.chat import render_chat

kind, source, period, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
tok = qwen4exp.Tokenizer()
rng = random.Random(period)
base = ["hello world " * 300 + str(i) for i in range(64)] + ["\u4e2d\u6587 e\u0301 " * 200, "", "x" * 3000]
if kind == "texts":
    items = base
    run = lambda xs, n: tok.encode_batch(xs, num_threads=n)
    want = {i: tok.encode(t) for i, t in enumerate(items)}
    same = lambda a, b: a == b
else:
    items = [render_chat([{"role": "user", "content": t or "x"}], add_generation_prompt=True) for t in base]
    run = lambda xs, n: tok.encode_chats(xs, num_threads=n)
    want = {i: tok.encode_chat(c) for i, c in enumerate(items)}
    same = lambda a, b: a.tolist() == b.tolist()

class Timeout(Exception):
    pass

armed = False

def on_signal(signum, frame):
    # Raise only inside the batch call, so the harness's own bookkeeping is never hit;
    # disarming first means a second signal cannot escape the except clause.
    global armed
    if armed:
        armed = False
        raise KeyboardInterrupt() if signum == signal.SIGINT else Timeout()

signal.signal(signal.SIGALRM, on_signal)
signal.signal(signal.SIGINT, on_signal)
stop = threading.Event()

def ctrl_c():
    while not stop.is_set():
        time.sleep(period * rng.uniform(0.5, 1.5))
        os.kill(os.getpid(), signal.SIGINT)

done = interrupted = 0
deadline = time.monotonic() + seconds
if source == "sigint":
    threading.Thread(target=ctrl_c, daemon=True).start()
else:
    signal.setitimer(signal.ITIMER_REAL, period, period)
while time.monotonic() < deadline:
    idx = rng.sample(range(len(items)), rng.randint(1, len(items)))
    batch = [items[i] for i in idx]
    try:
        armed = True
        out = run(batch, rng.choice([2, 3, 4, 8]))
        armed = False
    except (KeyboardInterrupt, Timeout):
        interrupted += 1
        continue
    assert all(same(o, want[i]) for o, i in zip(out, idx)), "a completed batch is wrong"
    done += 1
stop.set()
signal.setitimer(signal.ITIMER_REAL, 0, 0)
time.sleep(period * 2)
out = run(items, 4)
assert all(same(o, want[i]) for i, o in enumerate(out)), "wrong after the storm"
print(done, interrupted)
"""


def _storm(kind, source, period, seconds):
    r = run_isolated(STORM, kind, source, str(period), str(seconds), timeout=seconds + 120)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    done, interrupted = map(int, r.stdout.split())
    assert interrupted > 0, "the storm never hit a batch"
    return done, interrupted


@pytest.mark.parametrize("kind", ["texts", "chats"])
@pytest.mark.parametrize("source", ["sigint", "sigalrm"])
@pytest.mark.parametrize("period", [0.0004, 0.003])
def test_signal_storm_during_native_batch(kind, source, period):
    _storm(kind, source, period, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["texts", "chats"])
@pytest.mark.parametrize("source", ["sigint", "sigalrm"])
@pytest.mark.parametrize("period", [0.0001, 0.0005, 0.0009, 0.0021, 0.004, 0.011, 0.03])
def test_signal_storm_during_native_batch_long(kind, source, period):
    done, interrupted = _storm(kind, source, period, 15.0)
    assert done > 0 or period < 0.001
