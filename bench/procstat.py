"""Memory of a process, for the load and batch-job measurements. Standalone on
purpose: the fresh child processes that measure a peer's load import only this."""

from __future__ import annotations

import os
import subprocess
import time


def rss_kib():
    """(VmRSS, VmHWM) in KiB from /proc, or (ru_maxrss, ru_maxrss) elsewhere."""
    try:
        vals = {}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":", 1)
                    vals[k] = int(v.split()[0])
        return vals["VmRSS"], vals["VmHWM"]
    except (OSError, KeyError, ValueError):
        import resource

        m = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return m, m


def _anon_kib(pid: int) -> int | None:
    """RssAnon of process pid in KiB (None once it is gone, or off Linux)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def run_measured(cmd, env=None, interval: float = 0.005) -> dict:
    """Run cmd to its end: its wall time, its peak anonymous memory (RssAnon,
    polled every `interval` seconds: heap, arenas and anonymous mappings, not
    the mapped files such as the shared libraries, which a peak RSS counts),
    and its peak RSS (the kernel's ru_maxrss). The anonymous peak is a lower
    bound: a spike shorter than the interval can be missed."""
    import tempfile

    err_file = tempfile.TemporaryFile()  # not a pipe: nobody reads it while the child runs
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err_file)
    peak = 0
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        anon = _anon_kib(p.pid)
        if anon is not None:
            peak = max(peak, anon)
        time.sleep(interval)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err_file.seek(0)
    err = err_file.read().decode("utf-8", "replace")
    err_file.close()
    return {"returncode": p.returncode, "seconds": wall, "peak_anon_kib": peak,
            "peak_rss_kib": usage.ru_maxrss, "stderr": err}
