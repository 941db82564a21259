"""`qwen4exp batch`: the pipeline from a source of records to a sink.

    source.chunks()  ->  engine.submit(chunk)  ->  sink.write(...)  ->  commit
    (sources)            (LocalEngine here)        (sinks)

The pipeline reads chunks, hands each to an engine, writes the encoded chunks
in order and commits OUT (and the errors file) only at the end. An engine is
a class with `open_source(path, fmt)` (the source whose chunks it takes) and,
once built as `Engine(tok, args)`, `window` (chunks it may hold in flight),
`submit(chunk)` returning an object whose `result()` is an `EncodedChunk`, and
`close(cancel)`. `LocalEngine` parses and encodes each chunk in this process
(`encode.encode_work`: text records through Arrow, the others one at a
time), one chunk ahead on a worker thread; `ray_engine.RayEngine` ships raw
lines or Parquet row groups to actors that do the same. Both share the
sources, sinks, failure policy, signals and this loop.

A fatal signal (Ctrl-C, SIGTERM, SIGHUP, ...) stops the run cleanly: no OUT,
no temporary file, exit 128 + the signal number. The command line itself
(arguments, exit codes) is in `main`.
"""

from __future__ import annotations

import signal
import sys
import time
from collections import deque
from typing import Any

from qwen4exp.cli.common import EXIT_OK, EXIT_RECORDS_FAILED, InputError, UsageError, need_module, tokenizer_of
from qwen4exp.cli.encode import encode_work
from qwen4exp.cli.sinks import ErrorsFile, check_paths, sink_for, write_errors
from qwen4exp.cli.columns import ExtraColumns, check_kept_names, record_options
from qwen4exp.cli.sources import Failure, format_of, open_source

__all__ = ["LocalEngine", "run_pipeline", "cmd_batch", "STOP_SIGNALS"]

# Catchable signals whose default action ends the process: each stops a run
# cleanly with exit 128 + its number (SIGINT: 130, as Ctrl-C).
STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
                 "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGPWR", "SIGIO", "SIGSTKFLT")
    if hasattr(signal, name)
)


class Stopped(BaseException):
    """A stop signal arrived: the run is abandoned and cleaned up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class LocalEngine:
    """Parses and encodes chunks in this process: one chunk on a worker
    thread while the pipeline reads the next and writes the one before
    (window 2)."""

    window = 2
    open_source = staticmethod(open_source)

    def __init__(self, tok, args) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.tok, self.threads, self.masks = tok, args.threads, args.masks
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qwen4exp-encode")

    def submit(self, work):
        return self.pool.submit(encode_work, self.tok, work, self.threads, self.masks)

    def close(self, cancel: bool = False) -> None:
        self.pool.shutdown(wait=True, cancel_futures=cancel)


class Stats:
    __slots__ = ("ok", "tokens", "bytes", "failures", "seconds")

    def __init__(self) -> None:
        self.ok = self.tokens = self.bytes = 0
        self.failures: list[Failure] = []
        self.seconds = 0.0


class FailurePolicy:
    """--on-error: `stop` turns the first failure into an InputError; `skip`
    reports the first few on stderr and keeps them for the errors file."""

    def __init__(self, source_name: str, stop: bool, quiet: bool) -> None:
        self.source_name, self.stop, self.quiet = source_name, stop, quiet
        self.fatal: list[Failure] = []
        self.shown = 0

    def __call__(self, f: Failure) -> Failure:
        where = f.where(self.source_name)
        if self.stop:
            self.fatal.append(f)
            raise InputError(f"{where}: {f.error}: {f.message} (nothing written; "
                             "--on-error skip skips bad records)")
        if not self.quiet and self.shown < 5:
            print(f"qwen4exp batch: skipped {where}: {f.error}: {f.message}", file=sys.stderr)
        self.shown += 1
        return f


def run_pipeline(source, sink, engine, on_failure, progress, chunk_records: int, chunk_bytes: int,
                 check=None) -> Stats:
    """Encode every chunk of `source` on `engine` and write it to `sink`, in
    order; `check()`, when given, runs after each chunk (StopSignals.check).
    Writes run on a thread of their own, one at a time, so that reading the
    next chunk overlaps writing the last (pyarrow's Parquet writer and the
    native JSONL writer release the GIL); a write's error comes out here, and
    no write is left running when this returns or raises. Does not commit:
    the caller commits or discards the sink."""
    from concurrent.futures import ThreadPoolExecutor

    stats = Stats()
    t0 = time.perf_counter()
    pending: deque = deque()  # (handle, units consumed, parse failures), oldest first
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qwen4exp-write")
    writing = None  # the write in flight

    def finish(handle, consumed, parse_failures):
        nonlocal writing
        chunk = handle.result()
        for f in chunk.failures:
            on_failure(f)
        stats.failures.extend(sorted(parse_failures + chunk.failures, key=lambda f: f.index))
        if chunk.columns is not None:
            index, lengths, flat, offsets, total = chunk.columns
            if writing is not None:
                writing.result()
            writing = writer.submit(sink.write, index, lengths, flat, offsets, chunk.ids, chunk.masks, chunk.kept)
            stats.tokens += total
        stats.ok += 0 if chunk.columns is None else len(chunk.columns[0])
        stats.bytes += chunk.nbytes
        progress.update(consumed, stats.ok, stats.bytes, len(stats.failures))
        if check is not None:
            check()

    try:
        for records, parse_failures, consumed in source.chunks(chunk_records, chunk_bytes, on_failure):
            pending.append((engine.submit(records), consumed, parse_failures))
            while len(pending) >= engine.window:
                finish(*pending.popleft())
        while pending:
            finish(*pending.popleft())
        if writing is not None:
            writing.result()
    finally:
        writer.shutdown(wait=True)
    stats.seconds = time.perf_counter() - t0
    return stats


class Progress:
    """The tqdm bar on stderr (bytes for JSONL, records for Parquet), or nothing."""

    def __init__(self, source, enabled: bool):
        self.bar = None
        self.t0 = time.perf_counter()
        if not enabled:
            return
        tqdm = need_module("tqdm").tqdm
        self.unit = source.progress_unit
        by_bytes = self.unit == "bytes"
        self.bar = tqdm(
            total=source.total_bytes if by_bytes else source.total_records,
            unit="B" if by_bytes else "rec", unit_scale=True,
            desc="batch", file=sys.stderr, dynamic_ncols=True, smoothing=0.1,
            **({"unit_divisor": 1000} if by_bytes else {}),
        )

    def update(self, consumed: int, records: int, nbytes: int, failed: int) -> None:
        if self.bar is None:
            return
        dt = max(time.perf_counter() - self.t0, 1e-9)
        if self.unit == "bytes":
            post = f"{records:,} rec, {records / dt:,.0f} rec/s"
        else:
            post = f"{nbytes / dt / 1e6:.2f} MB/s"
        if failed:
            post += f", {failed:,} failed"
        self.bar.set_postfix_str(post, refresh=False)
        self.bar.update(consumed)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class StopSignals:
    """While active (main thread only), every stop signal raises Stopped, or
    KeyboardInterrupt for SIGINT, and is remembered. Python prints and drops
    an exception raised where it cannot propagate (a weakref callback or a
    __del__, such as importlib's module-lock callback, which runs during
    imports): check() raises the remembered stop again at the run's safe
    points (each finished chunk, and before OUT is committed), and while
    active such a drop is not printed. `hold()` ignores every stop signal
    during cleanup."""

    def __enter__(self):
        import threading

        self.saved = {}
        self.received = None
        self.saved_hook: Any = None  # sys.unraisablehook, replaced in the main thread only
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                if s == signal.SIGINT and signal.getsignal(s) is not signal.default_int_handler:
                    continue  # SIGINT ignored (a background job) or handled by the caller
                self.saved[s] = signal.signal(s, self._stop)
            self.saved_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
        return self

    def _stop(self, signum, frame):
        if self.received is None:
            self.received = signum
        raise _stop_exception(signum)

    def _unraisable(self, unraisable) -> None:
        if self.received is not None and isinstance(unraisable.exc_value, (Stopped, KeyboardInterrupt)):
            return  # check() raises it again where it propagates
        self.saved_hook(unraisable)

    def check(self) -> None:
        """Raise the stop signal received, if any (see the class doc)."""
        if self.received is not None:
            raise _stop_exception(self.received)

    def hold(self) -> None:
        for s in list(self.saved) + ([signal.SIGINT] if self.saved else []):
            prev = signal.signal(s, signal.SIG_IGN)
            self.saved.setdefault(s, prev)

    def __exit__(self, *exc) -> None:
        for s, handler in self.saved.items():
            signal.signal(s, handler)
        if self.saved_hook is not None:
            sys.unraisablehook = self.saved_hook


def _stop_exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Stopped(signum)


def use_returning_arrow_pool() -> None:
    """Make pyarrow's jemalloc pool the default for this run, where pyarrow
    has one and ARROW_DEFAULT_MEMORY_POOL does not name a pool: as pyarrow
    sets it up (decay time 0) it gives freed pages back to the system at
    once, whichever thread freed them, so a job's peak memory is set by its
    chunk window (a decay time of 1 s: 4x / 16x the corpus 300 / 323 MiB
    instead of 274 / 287). pyarrow's default, mimalloc, kept what the JSON
    reader's threads had allocated and the pipeline freed: the peak went on
    growing with the input (docs/PERFORMANCE.md, "A batch job's memory")."""
    import os

    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    try:
        import pyarrow as pa

        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except (ImportError, NotImplementedError):  # no pyarrow (JSONL to JSONL), or built without jemalloc
        pass


def cmd_batch(args, engine=None) -> int:
    """`qwen4exp batch` on `engine`, an engine class (see the module doc;
    default LocalEngine)."""
    engine_class = engine or LocalEngine
    in_fmt = format_of(args.input, args.input_format, "input", default="jsonl")
    sink_class = sink_for(args.output, args.format)
    if args.output == "-":
        raise UsageError("OUT must be a file (it is written atomically)")
    errors_path = args.errors
    if errors_path is None and args.on_error == "skip":
        errors_path = args.output + ".errors.jsonl"
    check_paths(args.input, args.output, errors_path, getattr(args, "tokenizer", None))
    show_progress = (not args.quiet) and (
        args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    )
    sink_class.require()
    use_returning_arrow_pool()
    if show_progress:
        need_module("tqdm")

    tok = tokenizer_of(args)
    options = record_options(args, tok)
    source = engine_class.open_source(args.input, in_fmt, options)
    kept_schema = getattr(source, "kept_schema", None) if args.keep_columns else None
    if kept_schema is not None:
        check_kept_names(kept_schema.names, args.masks)
    extra = ExtraColumns(args.masks, args.keep_columns, kept_schema)
    policy = FailurePolicy(source.name, args.on_error == "stop", args.quiet)
    sink = progress = engine = None
    with StopSignals() as signals:
        try:
            sink = sink_class(args.output, extra)
            engine = engine_class(tok, args)
            progress = Progress(source, show_progress)
            stats = run_pipeline(source, sink, engine, policy, progress, args.chunk_size, args.chunk_bytes,
                                 signals.check)
            commit_run(stats, sink, progress, args.errors, errors_path, signals.check)
        except BaseException as exc:
            return abandon_run(exc, signals, progress, sink, engine, policy, args.errors)
        engine.close()
    if not args.quiet:
        _summary(stats, args.output, sink_class.name, sink.rows, errors_path, extra.nulled)
    return EXIT_RECORDS_FAILED if stats.failures else EXIT_OK


def commit_run(stats: Stats, sink, progress, errors_option, errors_path, check) -> None:
    """The end of a good run: a last check() for a stop signal whose
    exception was dropped (StopSignals), then the errors file (when there are
    failures or --errors was given) and OUT. The errors file is written in
    full before OUT is committed and renamed after it: a failure to write
    either leaves neither."""
    check()
    progress.close()
    errors = None
    if stats.failures or errors_option is not None:
        errors = ErrorsFile(errors_path)
        errors.write(stats.failures)
    try:
        sink.commit()
    except BaseException:
        if errors is not None:
            errors.discard()
        raise
    if errors is not None:
        errors.commit()


def abandon_run(exc: BaseException, signals, progress, sink, engine, policy, errors_option) -> int:
    """Clean up a run that `exc` ended (nothing written); the exit code of a
    stop signal, else `exc` raised again (after the --errors file of a stop
    on a bad record)."""
    signals.hold()  # the cleanup itself cannot be interrupted
    if signals.received is not None and not isinstance(exc, (Stopped, KeyboardInterrupt)):
        # The signal's exception, raised inside a blocking wait, can surface as
        # another one (a Condition whose lock it left released raises
        # RuntimeError on the way out): the stop is what ended the run.
        exc = _stop_exception(signals.received)
    for part in (progress, sink):
        if part is not None:
            (part.close if part is progress else part.discard)()
    if engine is not None:
        engine.close(cancel=True)
    if isinstance(exc, KeyboardInterrupt):
        print("qwen4exp batch: interrupted; nothing written", file=sys.stderr)
        return 128 + signal.SIGINT
    if isinstance(exc, Stopped):
        name = signal.Signals(exc.signum).name
        print(f"qwen4exp batch: stopped by {name}; nothing written", file=sys.stderr)
        return 128 + exc.signum
    if policy is not None and policy.fatal and errors_option is not None:
        write_errors(errors_option, policy.fatal)
    raise exc


def _summary(stats: Stats, output: str, out_fmt: str, rows: int, errors_path, nulled) -> None:
    n_bad = len(stats.failures)
    secs = max(stats.seconds, 1e-9)
    mb = stats.bytes / 1e6
    line = f"qwen4exp batch: {stats.ok + n_bad:,} records: {stats.ok:,} ok, {n_bad:,} failed"
    if n_bad:
        line += f" (listed in {errors_path})"
    print(line, file=sys.stderr)
    print(
        f"  {stats.tokens:,} tokens from {mb:,.2f} MB in {secs:.2f} s: "
        f"{stats.ok / secs:,.0f} records/s, {mb / secs:,.2f} MB/s, {stats.tokens / secs:,.0f} tokens/s",
        file=sys.stderr,
    )
    print(f"  wrote {output} ({out_fmt}, {rows:,} rows)", file=sys.stderr)
    for name, count in nulled.items():  # JSONL has no NaN or Infinity
        print(f"  {count:,} NaN/Infinity value{'s' * (count != 1)} of {name!r} written as null (JSON has no "
              "such numbers; Parquet OUT keeps them)", file=sys.stderr)
