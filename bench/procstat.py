"""Resident memory of this process, for the load measurements. Standalone on
purpose: the fresh child processes that measure a peer's load import only this."""


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
