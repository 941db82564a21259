"""Signals and exceptions at every point of the native batch.

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
Each run is a fixed number of batches, one in fifty a "sure hit" that the
signal reaches whatever the machine's speed, so what is checked never depends
on timing. The long variant (`slow`) sweeps more periods, ten times as many
batches.
"""

from __future__ import annotations

import pytest

from conftest import run_isolated

STORM = r"""
import os, random, signal, sys, threading, time
import qwen4exp
from qwen4exp.render.chat import render_chat

kind, source, period, batches = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
signum = signal.SIGINT if source == "sigint" else signal.SIGALRM
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
    # the storm: signals at random moments (their timing is the point, not a synchronization)
    while not stop.wait(period * rng.uniform(0.5, 1.5)):
        os.kill(os.getpid(), signum)

def sure_hit(batch, n):
    # A batch the signal is certain to reach while armed, however fast the machine:
    # a sender thread waits for the GIL, and with the switch interval made huge
    # only a thread that gives the GIL up lets it in. The batch does while its
    # native threads work (there, usually, the handler runs between slices);
    # joining the sender is the latest point the handler can run.
    global armed
    gate = threading.Lock()
    gate.acquire()
    sender = threading.Thread(target=lambda: (gate.acquire(), os.kill(os.getpid(), signum)))
    sender.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e6)
    try:
        armed = True
        gate.release()
        out = run(batch, n)
        sender.join()
        armed = False
        return out
    finally:
        armed = False
        sys.setswitchinterval(interval)
        sender.join()

done = interrupted = sure = 0
if source == "sigint":
    storm = threading.Thread(target=ctrl_c, daemon=True)
    storm.start()
else:
    signal.setitimer(signal.ITIMER_REAL, period, period)
for k in range(batches):
    idx = rng.sample(range(len(items)), rng.randint(1, len(items)))
    batch = [items[i] for i in idx]
    try:
        if k % 50 == 0:
            sure += 1
            out = sure_hit(items, rng.choice([1, 2, 4]))
            raise AssertionError("the sure hit did not interrupt its batch")
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
if source == "sigint":
    storm.join()
armed = False  # a signal still pending now is handled without raising
out = run(items, 4)
assert all(same(o, want[i]) for i, o in enumerate(out)), "wrong after the storm"
print(done, interrupted, sure)
"""


def _storm(kind, source, period, batches):
    r = run_isolated(STORM, kind, source, str(period), str(batches), timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}"
    done, interrupted, sure = map(int, r.stdout.split())
    assert done + interrupted == batches and interrupted >= sure > 0
    return done, interrupted


@pytest.mark.parametrize("kind,source", [("texts", "sigint"), ("chats", "sigalrm"),  # the others with -m slow
                                         pytest.param("chats", "sigint", marks=pytest.mark.slow),
                                         pytest.param("texts", "sigalrm", marks=pytest.mark.slow)])
def test_signal_storm_during_native_batch(kind, source):
    _storm(kind, source, 0.001, 1200)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["texts", "chats"])
@pytest.mark.parametrize("source", ["sigint", "sigalrm"])
@pytest.mark.parametrize("period", [0.0001, 0.0005, 0.0009, 0.0021, 0.004, 0.011, 0.03])
def test_signal_storm_during_native_batch_long(kind, source, period):
    _storm(kind, source, period, 12000)


# ---------------------------------------------------------------- every stop signal in `qwen4exp batch`

import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from qwen4exp.cli.batch import STOP_SIGNALS  # noqa: E402
from helpers import cli_env  # noqa: E402

RECORD = b'{"messages": [{"role": "user", "content": "hello world"}]}\n{"text": "plain text"}\n'


def _stop_mid_run(tmp_path, signum, out_name):
    """Start `batch - OUT` reading a pipe we hold open, wait until it has written
    a chunk to its temporary file, send `signum`; returns (exit code, stderr)."""
    out = tmp_path / out_name
    p = subprocess.Popen(
        [sys.executable, "-m", "qwen4exp", "batch", "-", str(out), "--chunk-size", "4"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
        # a child of a background job may start with SIGINT ignored: restore defaults
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGQUIT)],
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            p.stdin.write(RECORD * 8)
            p.stdin.flush()
            tmps = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
            if tmps and os.path.getsize(tmp_path / tmps[0]) > 0:
                break  # mid-run: OUT's temporary file holds written chunks
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read()
            time.sleep(0.05)
        p.send_signal(signum)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err.decode()


COMMON_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)


@pytest.mark.parametrize("signum", COMMON_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_stop_signal_mid_batch_leaves_nothing(tmp_path, signum):
    _check_stopped(tmp_path, signum)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [s for s in STOP_SIGNALS if s not in COMMON_SIGNALS],
                         ids=lambda s: signal.Signals(s).name)
def test_every_other_stop_signal_mid_batch_leaves_nothing(tmp_path, signum):
    _check_stopped(tmp_path, signum)


def _check_stopped(tmp_path, signum):
    code, err = _stop_mid_run(tmp_path, signum, "out.parquet")
    assert code == 128 + signum, err
    assert ("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}") in err
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == []  # no OUT, no errors file, no temporary file


@pytest.mark.parametrize("signum,out_name", [(signal.SIGHUP, "out.jsonl"), (signal.SIGTERM, "out.parquet")],
                         ids=["SIGHUP-jsonl", "SIGTERM-parquet"])
def test_stop_signal_keeps_an_existing_out(tmp_path, signum, out_name):
    (tmp_path / out_name).write_bytes(b"previous run")
    code, err = _stop_mid_run(tmp_path, signum, out_name)
    assert code == 128 + signum, err
    assert os.listdir(tmp_path) == [out_name]
    assert (tmp_path / out_name).read_bytes() == b"previous run"


@pytest.mark.parametrize("signum", COMMON_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_stop_dropped_inside_a_callback_is_raised_again(signum, capsys):
    """A stop signal whose handler runs inside a weakref callback (as
    importlib's module-lock callback is, during an import) raises where
    Python drops the exception. StopSignals remembers it: nothing is printed,
    and check(), which the batch runs after each chunk and before committing
    OUT, raises it again. (CI once saw `batch` finish and write OUT after a
    SIGTERM dropped that way.)"""
    import gc
    import weakref

    from qwen4exp.cli.batch import Stopped, StopSignals

    class Target:
        pass

    def callback(_ref):
        # raise_signal delivers to this thread and runs the Python handler
        # before it returns, so the handler runs inside the callback on any
        # machine (os.kill may land on another thread that runs it later).
        signal.raise_signal(signum)

    expected = KeyboardInterrupt if signum == signal.SIGINT else Stopped
    before = {s: signal.getsignal(s) for s in COMMON_SIGNALS}
    hook = sys.unraisablehook
    with StopSignals() as signals:
        target = Target()
        ref = weakref.ref(target, callback)
        del target  # the callback runs here; its exception is dropped
        gc.collect()
        assert ref() is None and signals.received == signum
        with pytest.raises(expected):
            signals.check()
    assert sys.unraisablehook is hook
    assert {s: signal.getsignal(s) for s in COMMON_SIGNALS} == before
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_stop_wins_over_the_error_it_caused(capsys):
    """A stop signal's exception raised inside a blocking wait can surface as
    another error (a Condition's lock released twice: RuntimeError); the run
    is still reported as stopped by that signal, with nothing written."""
    import signal as signals_module

    from qwen4exp.cli import batch

    class Received:  # StopSignals after a SIGTERM
        received = signals_module.SIGTERM

        def hold(self):
            pass

    code = batch.abandon_run(RuntimeError("cannot release un-acquired lock"), Received(), None, None, None,
                             None, None)
    assert code == 128 + signals_module.SIGTERM
    assert "stopped by SIGTERM; nothing written" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="not a stop"):  # without a stop, the error is raised again
        Received.received = None
        batch.abandon_run(RuntimeError("not a stop"), Received(), None, None, None, None, None)
