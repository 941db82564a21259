"""Tokenize a Ray Data dataset: one Tokenizer per worker actor, Arrow batches
in and out, the native batch threads inside each actor.

    import qwen4exp.ray
    out = qwen4exp.ray.tokenize_dataset(ds, column="messages", kind="chat", masks=True)

Also the `--engine ray` of `qwen4exp batch` (`run_batch`): the same records,
output and errors file as the local engine, with the records tokenized by a
Ray actor pool and written in order by the driver. This module imports `ray`,
so `import qwen4exp` never does; install the `ray` extra to use it.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data

from .errors import ChatFormatError, Qwen4ExpError
from .segments import SegmentBuilder
from .tokenizer import CACHE_SIZE_DEFAULT, Tokenizer, _tokenizer_by_name

__all__ = ["tokenize_dataset"]

_KINDS = ("chat", "text")


def tokenize_dataset(
    ds: "ray.data.Dataset",
    *,
    column: str,
    kind: str = "chat",
    masks: bool = False,
    on_error: str = "raise",
    vocab: "str | Tokenizer" = "qwen3",
    batch_size: int = 256,
    concurrency: "int | tuple[int, int] | None" = None,
    num_threads: int = 1,
) -> "ray.data.Dataset":
    """Tokenize `column` of `ds`; returns the input columns plus `ids`
    (list<int32>), `length` (int32), `assistant_mask` (list<bool>, with
    masks=True) and, with on_error="skip", `error` (string, null when the row
    is fine; a bad row keeps its place with empty ids and the message).

    kind="text": a string column. kind="chat": request JSON strings
    ({"messages": [...], "tools": [...], "add_generation_prompt": ...} or a bare
    message list), Arrow list<struct> messages (as SFT datasets store them) or
    a struct column holding whole requests.

    on_error="raise": a bad row raises its error (ChatFormatError for a bad
    request, the tokenizer's error otherwise) naming the column and the row's
    start; Ray wraps it in its UserCodeException unless
    `ray.data.DataContext.get_current().raise_original_map_exception` is set.

    vocab: a bundled vocabulary name or a Tokenizer (it pickles by name or by
    checksum). Each actor encodes a batch of `batch_size` rows with
    `num_threads` native threads and reserves that many CPUs; `concurrency`
    is the actor count (n, or (min, max) to autoscale; default 1 to as many
    as the cluster fits).
    """
    if kind not in _KINDS:
        raise ValueError(f'kind must be "chat" or "text", not {kind!r}')
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip", not {on_error!r}')
    if masks and kind != "chat":
        raise ValueError("masks=True needs kind=\"chat\" (plain text has no assistant turns)")
    if not isinstance(column, str):
        raise TypeError(f"column must be a column name (str), not {type(column).__name__}")
    for name, value in (("batch_size", batch_size), ("num_threads", num_threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, not {value!r}")
    tok = vocab if isinstance(vocab, Tokenizer) else _tokenizer_by_name(vocab, CACHE_SIZE_DEFAULT)
    return ds.map_batches(
        _TokenizeColumn,
        fn_constructor_kwargs=dict(
            tokenizer=tok, num_threads=num_threads, column=column, kind=kind,
            masks=bool(masks), skip=on_error == "skip",
        ),
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=_actor_pool(concurrency),
        num_cpus=num_threads,
        udf_modifying_row_count=False,
    )


def _actor_pool(concurrency):
    if concurrency is None:
        return ray.data.ActorPoolStrategy(min_size=1, max_size=None)
    if isinstance(concurrency, tuple) and len(concurrency) == 2:
        return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive int, a (min, max) pair or None, not {concurrency!r}")
    return ray.data.ActorPoolStrategy(size=concurrency)


# ---------------------------------------------------------------------------
# the actors
# ---------------------------------------------------------------------------


class _Worker:
    """One tokenizer per actor; encodes a batch's rows with the native threads."""

    def __init__(self, tokenizer: Tokenizer, num_threads: int):
        self.tok = tokenizer
        self.threads = num_threads

    def _encode(self, kinds, payloads, errors, masks: bool):
        """ids (and assistant masks) of every row whose errors[k] is None.

        kinds[k]: 0 text, 1 rendered chat. A batch call first; if it fails,
        row by row so only the bad rows fail (their exception goes to errors).
        """
        tok, n = self.tok, len(payloads)
        ids, amask = [None] * n, [None] * n
        opts = dict(return_masks=True) if masks else {}
        calls = (
            (0, self._encode_texts, tok.encode),
            (1, lambda xs: tok.encode_chats(xs, num_threads=self.threads, **opts),
             lambda x: tok.encode_chat(x, **opts)),
        )
        for kind, many, one in calls:
            pos = [k for k in range(n) if errors[k] is None and kinds[k] == kind]
            if not pos:
                continue
            try:
                results = many([payloads[k] for k in pos])
            except Qwen4ExpError:
                results = []
                for k in pos:
                    try:
                        results.append(one(payloads[k]))
                    except Qwen4ExpError as exc:
                        errors[k] = exc
                        results.append(None)
            for k, r in zip(pos, results):
                if r is None:
                    continue
                if masks:
                    ids[k], amask[k] = r.ids, r.assistant_mask
                else:
                    ids[k] = r
        return ids, amask


    def _encode_texts(self, texts):
        """encode_batch(texts) as int32 arrays: each text a one-DATA-segment
        stream through encode_chats (the same ids), which skips building
        Python int lists only to turn them into Arrow again."""
        streams = [SegmentBuilder().text(t).build() for t in texts]
        return self.tok.encode_chats(streams, num_threads=self.threads)


class _TokenizeColumn(_Worker):
    """`tokenize_dataset`'s batch function."""

    def __init__(self, tokenizer, num_threads, column, kind, masks, skip):
        super().__init__(tokenizer, num_threads)
        self.column, self.kind, self.masks, self.skip = column, kind, masks, skip

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self.column not in batch.column_names:
            raise KeyError(f"tokenize_dataset: no column {self.column!r} (columns: {batch.column_names})")
        added = ["ids", "length"] + ["assistant_mask"] * self.masks + ["error"] * self.skip
        taken = [c for c in added if c in batch.column_names]
        if taken:
            raise ValueError(f"tokenize_dataset: the dataset already has a column named {taken[0]!r}")
        col = batch.column(self.column)
        values = col.to_pylist()
        n = len(values)
        errors = [None] * n
        payloads = [None] * n
        if self.kind == "text":
            if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                raise TypeError(f"tokenize_dataset: kind=\"text\" needs a string column; {self.column!r} is {col.type}")
            for k, v in enumerate(values):
                if v is None:
                    errors[k] = Qwen4ExpError("the text is null")
                payloads[k] = v
            kinds = [0] * n
        else:
            for k, v in enumerate(values):
                try:
                    payloads[k] = _render(v)
                except Exception as exc:  # noqa: BLE001 - classified (or raised again) by _describe
                    _describe(exc)
                    errors[k] = exc
            kinds = [1] * n
        ids, amask = self._encode(kinds, payloads, errors, self.masks)
        if not self.skip:
            for k, exc in enumerate(errors):
                if exc is not None:
                    cls = _library_error(exc, self.kind)
                    raise cls(
                        f"tokenize_dataset: column {self.column!r}, row {k} of a batch of {n} "
                        f"({_preview(values[k])}): {exc if type(exc) is cls else _describe(exc)}"
                    ) from None
        out = batch
        out = out.append_column("ids", _list_array(ids, np.int32, pa.int32()))
        out = out.append_column("length", pa.array([0 if x is None else len(x) for x in ids], pa.int32()))
        if self.masks:
            out = out.append_column("assistant_mask", _list_array(amask, np.bool_, pa.bool_()))
        if self.skip:
            out = out.append_column("error", pa.array([None if e is None else _describe(e) for e in errors], pa.string()))
        return out


class _TokenizeRecords(_Worker):
    """`qwen4exp batch --engine ray`: parse batch records exactly as the local
    engine does (qwen4exp.batch), encode, and yield ids, length, nbytes and
    the failure (error type and message; null when fine) of every row.

    JSONL: a batch holds the lines (`line`, `raw`). Parquet: a batch holds
    (`file`, `row_group`) work items; the actor reads each row group itself,
    `chunk` rows at a time (the files must be reachable from every node)."""

    def __init__(self, tokenizer, num_threads, fmt, columns=(), chunk=4096):
        super().__init__(tokenizer, num_threads)
        self.fmt, self.columns, self.chunk = fmt, list(columns), chunk

    def __call__(self, batch: pa.Table):
        if self.fmt == "jsonl":
            yield self._tokenize(batch)
            return
        import pyarrow.parquet as pq

        for item in batch.to_pylist():
            f = pq.ParquetFile(item["file"])
            for rb in f.iter_batches(batch_size=self.chunk, row_groups=[item["row_group"]], columns=self.columns):
                yield self._tokenize(pa.Table.from_batches([rb]))

    def _tokenize(self, batch: pa.Table) -> pa.Table:
        from . import _batch_sources as S
        from ._cli_common import loads_json

        n = batch.num_rows
        records, errors = [None] * n, [None] * n
        if self.fmt == "jsonl":
            lines = batch.column("line").to_pylist()
            for k, raw in enumerate(batch.column("raw").to_pylist()):
                try:
                    records[k] = S.make_record(loads_json(raw.decode("utf-8")), k, lines[k])
                except Exception as exc:  # noqa: BLE001 - classified by _describe
                    errors[k] = exc
        else:
            pylists = {name: batch.column(name).to_pylist() for name in batch.column_names}
            struct = {c: not S._is_string(batch.column(c).type) for c in ("messages", "tools") if c in pylists}
            for k in range(n):
                try:
                    records[k] = S.make_record(S.ParquetSource._row(pylists, k, struct), k, None)
                except Exception as exc:  # noqa: BLE001
                    errors[k] = exc
        kinds = [None if r is None else r.kind for r in records]
        payloads = [None if r is None else r.payload for r in records]
        ids, _ = self._encode(kinds, payloads, errors, False)
        nbytes = [
            0 if x is None else r.nbytes if r.nbytes is not None else len(r.payload.encode("utf-8", "surrogatepass"))
            for r, x in zip(records, ids)
        ]
        failed = [None if e is None else S.failure_of(e, k, None) for k, e in enumerate(errors)]
        line = batch.column("line") if self.fmt == "jsonl" else pa.nulls(n, pa.int64())
        return pa.table({
            "line": line,
            "ids": _list_array(ids, np.int32, pa.int32()),
            "length": pa.array([0 if x is None else len(x) for x in ids], pa.int32()),
            "nbytes": pa.array(nbytes, pa.int64()),
            "error_type": pa.array([f and f.error for f in failed], pa.string()),
            "error": pa.array([f and f.message for f in failed], pa.string()),
        })


def _render(value):
    """A chat column's value -> RenderedChat (raises on a bad request)."""
    from ._batch_sources import _strip_none
    from ._cli_common import loads_json, request_from_json
    from .chat import render_chat

    if value is None:
        raise ChatFormatError("the chat is null")
    if isinstance(value, (str, bytes)):
        obj = loads_json(value)
    else:  # list<struct> messages or a struct request, decoded by Arrow
        obj = _strip_none(value)
    messages, options = request_from_json(obj, "record")
    return render_chat(messages, **options)


def _describe(exc: BaseException) -> str:
    """'ErrorType: message', as the batch command names failures; anything
    that is not a bad row (a bug) is raised again, as the local engine does."""
    from ._batch_sources import failure_of

    f = failure_of(exc, 0, None)
    return f"{f.error}: {f.message}"


def _library_error(exc, kind):
    if isinstance(exc, Qwen4ExpError):
        return type(exc)
    return ChatFormatError if kind == "chat" else Qwen4ExpError


def _preview(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:60] + "...") if len(text) > 60 else repr(text)


def _list_array(rows, dtype, value_type):
    """Arrow list array of per-row numpy/list values; None rows are empty lists."""
    lengths = np.fromiter((0 if x is None else len(x) for x in rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > 2**31 - 1:
        raise Qwen4ExpError("a batch holds more than 2**31 tokens: use a smaller batch_size")
    parts = [np.asarray(x, dtype=dtype) for x in rows if x is not None and len(x)]
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(flat, value_type))


# ---------------------------------------------------------------------------
# qwen4exp batch --engine ray
# ---------------------------------------------------------------------------


def run_batch(args, in_fmt: str, out_fmt: str, errors_path, show_progress: bool) -> int:
    """The `--engine ray` body of `qwen4exp batch` (arguments already checked by
    qwen4exp.batch.cmd_batch): JSONL lines are read here and shipped to the
    actors; Parquet files (IN may be a directory of shards, taken in sorted
    order) are read by the actors, a row group each. The driver writes the
    rows in input order; output, errors file, summary and exit code are those
    of the local engine (its failure policy, progress bar, signals, summary)."""
    import types

    from . import batch as B
    from ._batch_sinks import Sink
    from ._batch_sources import Failure
    from ._cli_common import EXIT_OK, EXIT_RECORDS_FAILED, InputError, _tokenizer

    tok = _tokenizer(args)
    started = _connect(args.address)
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars)
    ctx.execution_options.preserve_order = True  # rows come back in input order
    ctx.enable_progress_bars = False
    sink = progress = policy = None
    stats = B.Stats()
    try:
        with B.StopSignals() as signals:
            try:
                if os.path.isdir(args.input) or in_fmt == "parquet":
                    name, ds, total, columns = _parquet_dataset(args.input, args.input_format)
                    fmt = "parquet"
                else:
                    name, ds, total = _jsonl_dataset(args.input, args.chunk_size)
                    fmt, columns = "jsonl", ()
                policy = B.FailurePolicy(name, args.on_error == "stop", args.quiet)
                out = _records_pipeline(ds, tok, args.threads or 1, fmt, columns, args.chunk_size)
                sink = Sink(args.output, out_fmt)
                progress = B.Progress(
                    types.SimpleNamespace(progress_unit="records", total_records=total), show_progress
                )
                t0 = time.perf_counter()
                for b in out.iter_batches(batch_format="pyarrow", batch_size=None):
                    _take_batch(b, sink, stats, policy, Failure)
                    progress.update(b.num_rows, stats.ok, stats.bytes, len(stats.failures))
                    signals.check()
                stats.seconds = time.perf_counter() - t0
                B.commit_run(stats, sink, progress, args.errors, errors_path, signals.check)
            except ray.exceptions.RayError as exc:  # a worker failed (e.g. an unreadable row group)
                failed = InputError(f"{args.input}: the Ray job failed: {_last_error_line(exc)}")
                return B.abandon_run(failed, signals, progress, sink, None, policy, args.errors)
            except BaseException as exc:
                return B.abandon_run(exc, signals, progress, sink, None, policy, args.errors)
    finally:
        ctx.execution_options.preserve_order, ctx.enable_progress_bars = saved
        if started:
            ray.shutdown()
    if not args.quiet:
        B._summary(stats, args.output, out_fmt, sink.rows, errors_path)
    return EXIT_RECORDS_FAILED if stats.failures else EXIT_OK


def _records_pipeline(ds, tok, threads: int, fmt: str, columns, chunk: int):
    """ds mapped through a pool of _TokenizeRecords actors: `threads` native
    threads and CPUs each (never more than the largest node has), as many
    actors as the cluster's CPUs allow."""
    node_cpus = max([n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]] or [1])
    threads = max(1, min(threads, int(node_cpus)))
    actors = max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
    return ds.map_batches(
        _TokenizeRecords,
        fn_constructor_kwargs=dict(tokenizer=tok, num_threads=threads, fmt=fmt, columns=columns, chunk=chunk),
        batch_format="pyarrow",
        batch_size=1 if fmt == "parquet" else chunk,  # Parquet: one row group per call
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=actors),
        num_cpus=threads,
    )


def _take_batch(b: pa.Table, sink, stats, policy, Failure) -> None:
    """Write one output batch's good rows, hand its bad ones to the policy."""
    n, index = b.num_rows, stats.ok + len(stats.failures)
    bad = b.column("error_type").is_valid().to_numpy(zero_copy_only=False)
    for k in np.flatnonzero(bad).tolist():
        row = b.slice(k, 1).select(["line", "error_type", "error"]).to_pylist()[0]
        stats.failures.append(policy(Failure(index + k, row["line"], row["error_type"], row["error"])))
    ok = b.filter(pa.array(~bad))
    if ok.num_rows:
        _write_ok(sink, ok, np.arange(index, index + n, dtype=np.int64)[~bad])
        stats.ok += ok.num_rows
        stats.tokens += int(pc.sum(ok.column("length")).as_py() or 0)
        stats.bytes += int(pc.sum(ok.column("nbytes")).as_py() or 0)


def _last_error_line(exc) -> str:
    """The 'SomeError: message' line of a Ray error's remote traceback."""
    import re

    found = [x for x in str(exc).splitlines() if re.match(r"[\w.]+(Error|Exception): ", x)]
    return found[-1] if found else str(exc).strip().splitlines()[-1]


def _connect(address) -> bool:
    """ray.init unless this process is already connected; True if we did."""
    import logging

    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if ray.is_initialized():
        return False
    local = address is None and not os.environ.get("RAY_ADDRESS")
    extra = dict(include_dashboard=False) if local else {}
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **extra)
    return True


def _parquet_dataset(path: str, input_format):
    """(name, dataset, rows) of a Parquet file or a directory of shards."""
    from ._batch_sources import _PARQUET_EXT, ParquetSource
    from ._cli_common import InputError, UsageError

    if os.path.isdir(path):
        if input_format == "jsonl":
            raise UsageError(f"{path} is a directory: only Parquet shards can be read from a directory")
        files = sorted(
            os.path.join(d, f)
            for d, _, names in os.walk(path)
            for f in names
            if f.lower().endswith(_PARQUET_EXT) and not f.startswith((".", "_"))
        )
        if not files:
            raise InputError(f"{path}: the directory holds no Parquet files ({', '.join(_PARQUET_EXT)})")
    else:
        files = [path]
    columns, items, total = None, [], 0
    for f in files:
        src = ParquetSource(f)  # checks the file as the local engine does
        total += src.total_records
        if columns is None:
            columns = src.columns
        elif src.columns != columns:
            raise InputError(
                f"{f}: its columns ({', '.join(src.columns)}) differ from {files[0]}'s "
                f"({', '.join(columns)}); the shards of one input must agree"
            )
        items += [{"file": os.path.abspath(f), "row_group": g} for g in range(src.file.metadata.num_row_groups)]
    # One work item (and block) per row group: the actors read them in parallel.
    ds = ray.data.from_arrow([pa.Table.from_pylist([item]) for item in items] or pa.table({"file": [], "row_group": []}))
    return path, ds, total, columns


def _jsonl_dataset(path: str, chunk: int):
    """(name, dataset, rows) of a JSONL file: its non-blank lines, with their
    line numbers, in Arrow tables of `chunk` rows (read here, by the driver)."""
    from ._batch_sources import JsonlSource, _iter_jsonl

    src = JsonlSource(path)  # checks the file as the local engine does
    tables, lines, raws = [], [], []

    def flush():
        tables.append(pa.table({"line": pa.array(lines, pa.int64()), "raw": pa.array(raws, pa.binary())}))
        lines.clear()
        raws.clear()

    for lineno, raw in _iter_jsonl(path):
        if not raw.strip():
            continue  # blank lines are not records
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte order mark
        lines.append(lineno)
        raws.append(raw)
        if len(raws) >= chunk:
            flush()
    if raws or not tables:
        flush()
    return src.name, ray.data.from_arrow(tables), sum(t.num_rows for t in tables)


def _write_ok(sink, ok: pa.Table, index: np.ndarray) -> None:
    ids = ok.column("ids").combine_chunks()
    lengths = ok.column("length").to_numpy().astype(np.int32)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = pc.list_flatten(ids).to_numpy()
    sink.write(index, lengths, flat, offsets, ids.to_pylist() if sink.fmt == "jsonl" else None)
