"""`qwen4exp batch`: tokenize a JSONL/Parquet file of records into Parquet/JSONL.

Record parsing, the JSONL and Parquet sources, the sink (a temporary file beside
OUT, renamed into place on success), chunk encoding on a worker thread, the tqdm
progress bar, Ctrl-C / SIGTERM cleanup and the errors file. pyarrow and tqdm are
only imported when a run needs them; importing this module imports neither.
The command line itself (arguments, exit codes) is in `cli`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from ._cli_common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RECORDS_FAILED,
    CliError,
    InputError,
    JsonError,
    RecordError,
    UsageError,
    _tokenizer,
    loads_json,
    request_from_json,
)

# Test hooks (used by tests/test_cli.py; harmless otherwise).
_HOOK_INTERRUPT = "QWEN4EXP_TEST_INTERRUPT_AFTER_CHUNKS"  # raise KeyboardInterrupt after N chunks
_HOOK_DELAY = "QWEN4EXP_TEST_CHUNK_DELAY"  # sleep this many seconds after each chunk


class _Terminated(BaseException):
    """SIGTERM during `batch`: cleaned up like Ctrl-C."""


def _need(module: str):
    """Import an optional dependency of the CLI, or explain how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"this command needs {module.split('.')[0]}, which is not installed: "
            'pip install "qwen4exp[cli]"'
        ) from None


_PARQUET_EXT = (".parquet", ".pq", ".parq")
_JSONL_EXT = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")


def _format_of(path: str, given: str | None, what: str, default: str | None = None) -> str:
    if given:
        return given
    low = path.lower()
    if low.endswith(_PARQUET_EXT):
        return "parquet"
    if low.endswith(_JSONL_EXT) or path == "-":
        return "jsonl"
    if default:
        return default
    raise UsageError(
        f"cannot tell the {what} format from {path!r}: name it .parquet or .jsonl, "
        f"or pass --{'format' if what == 'output' else 'input-format'}"
    )


class _Record:
    __slots__ = ("index", "line", "kind", "payload", "nbytes")

    def __init__(self, index, line, kind, payload, nbytes):
        self.index, self.line, self.kind, self.payload, self.nbytes = (
            index, line, kind, payload, nbytes,
        )


class _Failure:
    __slots__ = ("index", "line", "error", "message")

    def __init__(self, index, line, error, message):
        self.index, self.line, self.error, self.message = index, line, error, message

    def where(self, source: str) -> str:
        return f"{source}:{self.line}" if self.line is not None else f"{source}: record {self.index}"

    def json(self) -> str:
        return json.dumps(
            {"line": self.line, "index": self.index, "error": self.error, "message": self.message},
            ensure_ascii=False,
        )


def _strip_none(obj):
    """Drop None-valued keys of a message / tool call / content part decoded from a
    Parquet struct (a struct column has every field of the union in every row)."""
    if isinstance(obj, dict):
        return {k: _strip_none_field(k, v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_strip_none(x) for x in obj]
    return obj


def _strip_none_field(key, value):
    # Tool arguments and tool schemas are caller JSON: keep them exactly.
    if key in ("arguments", "parameters"):
        return value
    return _strip_none(value)


def _make_record(obj, index, line, nbytes_hint=None) -> _Record:
    """Turn one decoded record into a text or rendered-chat record (or raise)."""
    from .chat import render_chat

    if isinstance(obj, dict) and "text" in obj and obj.get("messages") is None:
        text = obj["text"]
        if not isinstance(text, str):
            raise RecordError(f'"text" must be a string, not {type(text).__name__}')
        return _Record(index, line, 0, text, nbytes_hint)
    if isinstance(obj, dict) and "text" in obj and obj["text"] is not None:
        raise RecordError('a record has either "text" or "messages", not both')
    messages, options = request_from_json(obj, "record")
    chat = render_chat(messages, **options)
    return _Record(index, line, 1, chat, len(chat.data))


def _iter_jsonl(path: str, start_line: int = 1):
    """Yield (line number, raw line bytes) of the non-blank lines of a JSONL file."""
    import gzip
    import zlib

    if path == "-":
        f = sys.stdin.buffer
        close = False
    else:
        try:
            f = gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        close = True
    try:
        lineno = start_line - 1
        for raw in f:
            lineno += 1
            yield lineno, raw
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, truncated or corrupt (.gz)
        raise InputError(f"cannot read {path}: {exc}") from None
    finally:
        if close:
            f.close()


class _JsonlSource:
    def __init__(self, path: str):
        self.path = path
        self.name = "stdin" if path == "-" else path
        self.total_bytes = None
        if path != "-" and not path.lower().endswith(".gz"):
            try:
                self.total_bytes = os.path.getsize(path)
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        elif path != "-" and not os.path.exists(path):
            raise InputError(f"cannot read {path}: No such file or directory")
        self.total_records = None
        self.progress_unit = "bytes"

    def chunks(self, chunk_records: int, chunk_bytes: int, on_failure):
        """Yield (records, failures, input bytes consumed) per chunk."""
        records, failures, consumed, size = [], [], 0, 0
        index = 0
        for lineno, raw in _iter_jsonl(self.path):
            consumed += len(raw)
            if not raw.strip():
                continue  # blank lines are not records
            try:
                line = raw.decode("utf-8")
                if lineno == 1 and line.startswith("\ufeff"):
                    line = line[1:]  # a UTF-8 byte order mark
                obj = loads_json(line)
                rec = _make_record(obj, index, lineno)
                if rec.nbytes is None:
                    rec.nbytes = len(rec.payload.encode("utf-8", "surrogatepass"))
                records.append(rec)
                size += rec.nbytes
            except Exception as exc:  # noqa: BLE001 - classified below
                failures.append(on_failure(_failure(exc, index, lineno)))
            index += 1
            if len(records) + len(failures) >= chunk_records or size >= chunk_bytes:
                yield records, failures, consumed
                records, failures, consumed, size = [], [], 0, 0
        if records or failures or consumed:
            yield records, failures, consumed


class _ParquetSource:
    COLUMNS = ("text", "messages", "tools", "add_generation_prompt", "enable_thinking")

    def __init__(self, path: str):
        pq = _need("pyarrow.parquet")
        self.path = path
        self.name = path
        if path == "-":
            raise UsageError("Parquet input must be a file, not stdin")
        try:
            self.file = pq.ParquetFile(path)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid etc.
            raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
        names = set(self.file.schema_arrow.names)
        self.columns = [c for c in self.COLUMNS if c in names]
        if "text" not in names and "messages" not in names:
            raise InputError(
                f"{path}: a Parquet input needs a 'text' or a 'messages' column "
                f"(it has: {', '.join(sorted(names)) or 'none'})"
            )
        self.total_records = self.file.metadata.num_rows
        self.total_bytes = None
        self.progress_unit = "records"

    def chunks(self, chunk_records: int, chunk_bytes: int, on_failure):
        index = 0
        try:
            batches = self.file.iter_batches(batch_size=chunk_records, columns=self.columns)
            for batch in batches:
                cols = {name: batch.column(name) for name in self.columns}
                pylists = {}
                for name, col in cols.items():
                    pylists[name] = col.to_pylist()
                struct = {n: not _is_string(cols[n].type) for n in ("messages", "tools") if n in cols}
                records, failures = [], []
                for r in range(batch.num_rows):
                    try:
                        obj = self._row(pylists, r, struct)
                        rec = _make_record(obj, index, None)
                        if rec.nbytes is None:
                            rec.nbytes = len(rec.payload.encode("utf-8", "surrogatepass"))
                        records.append(rec)
                    except Exception as exc:  # noqa: BLE001
                        failures.append(on_failure(_failure(exc, index, None)))
                    index += 1
                yield records, failures, batch.num_rows
        except OSError as exc:
            raise InputError(f"cannot read {self.path}: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            if type(exc).__module__.startswith("pyarrow"):
                raise InputError(f"{self.path}: cannot read Parquet data ({exc})") from None
            raise

    @staticmethod
    def _row(pylists, r, struct):
        text = pylists["text"][r] if "text" in pylists else None
        messages = pylists["messages"][r] if "messages" in pylists else None
        if text is not None and messages is not None:
            raise RecordError("a row has both 'text' and 'messages'")
        if text is not None:
            return {"text": text}
        if messages is None:
            raise RecordError("'text' and 'messages' are both null")
        obj = {}
        for name in ("messages", "tools"):
            if name not in pylists or pylists[name][r] is None:
                continue
            value = pylists[name][r]
            if struct[name]:
                value = _strip_none(value)
            elif isinstance(value, (str, bytes)):
                value = loads_json(value)
            obj[name] = value
        if isinstance(obj["messages"], dict) and "messages" in obj["messages"]:
            obj = {**obj["messages"], **{k: v for k, v in obj.items() if k != "messages"}}
        for name in ("add_generation_prompt", "enable_thinking"):
            if name in pylists and pylists[name][r] is not None:
                obj[name] = pylists[name][r]
        return obj


def _is_string(t) -> bool:
    """A column of JSON text: any string or binary layout, plain or dictionary-encoded."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    kinds = ("is_string", "is_large_string", "is_string_view", "is_binary", "is_large_binary",
             "is_binary_view")
    return any(getattr(pa.types, k, lambda _: False)(t) for k in kinds)


def _failure(exc: BaseException, index: int, line) -> _Failure:
    from .errors import Qwen4ExpError

    if isinstance(exc, JsonError):
        return _Failure(index, line, "JSONDecodeError", f"invalid JSON: {exc}")
    if isinstance(exc, UnicodeDecodeError):
        return _Failure(index, line, "UnicodeDecodeError", f"not valid UTF-8 (byte {exc.start})")
    if isinstance(exc, (RecordError, Qwen4ExpError)):
        return _Failure(index, line, type(exc).__name__, str(exc))
    if isinstance(exc, RecursionError):
        return _Failure(index, line, "RecordError", "record is nested too deeply")
    raise exc


class _Sink:
    """Writes to a temporary file beside OUT; `commit` renames it into place."""

    def __init__(self, out: str, fmt: str):
        import tempfile

        self.out = out
        self.fmt = fmt
        directory = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(directory):
            raise UsageError(f"output directory {directory} does not exist")
        try:
            fd, self.tmp = tempfile.mkstemp(
                dir=directory, prefix=f".{os.path.basename(out)}.", suffix=".tmp"
            )
        except OSError as exc:
            raise UsageError(f"cannot write in {directory}: {exc.strerror or exc}") from None
        self.rows = 0
        self._writer = None
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; OUT gets the usual mode
            if fmt == "parquet":
                os.close(fd)
                pa = _need("pyarrow")
                pq = _need("pyarrow.parquet")
                self._pa = pa
                self.schema = pa.schema(
                    [("index", pa.int64()), ("ids", pa.list_(pa.int32())), ("length", pa.int32())]
                )
                self._writer = pq.ParquetWriter(self.tmp, self.schema)
            else:
                self._file = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        except BaseException:
            self.discard()
            raise

    def write(self, index, lengths, flat, offsets, ids_list) -> None:
        if self.fmt == "parquet":
            pa = self._pa
            ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.int32()))
            table = pa.Table.from_arrays(
                [pa.array(index, pa.int64()), ids, pa.array(lengths, pa.int32())], schema=self.schema
            )
            self._writer.write_table(table)
        else:
            f = self._file
            f.write(
                "".join(
                    '{"index":%d,"ids":[%s],"length":%d}\n' % (i, ",".join(map(str, x)), len(x))
                    for i, x in zip(
                        index.tolist(), (x.tolist() if hasattr(x, "tolist") else x for x in ids_list)
                    )
                )
            )
        self.rows += len(index)

    def commit(self) -> None:
        if self.fmt == "parquet":
            self._writer.close()
            self._writer = None
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        else:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        os.replace(self.tmp, self.out)
        self.tmp = None

    def discard(self) -> None:
        if self.tmp is None:
            return
        try:
            if self._writer is not None:
                self._writer.close()
            elif getattr(self, "_file", None) is not None:
                self._file.close()
        except Exception:  # noqa: BLE001 - we are throwing it away
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
        self.tmp = None


def _encode_chunk(tok, records, threads: int, on_failure):
    """Encode one chunk's records: texts with encode_batch, chats with encode_chats.

    Returns (ok records, their ids (lists / int32 arrays), failures).
    """
    from .errors import Qwen4ExpError

    results = [None] * len(records)
    failures = []
    for kind, call, single in (
        (0, tok.encode_batch, tok.encode),
        (1, tok.encode_chats, tok.encode_chat),
    ):
        pos = [k for k, r in enumerate(records) if r.kind == kind]
        if not pos:
            continue
        payload = [records[k].payload for k in pos]
        try:
            ids = call(payload, num_threads=threads)
        except Qwen4ExpError:
            # Someone in the chunk is bad: find who, keep the rest.
            ids = []
            for k in pos:
                try:
                    ids.append(single(records[k].payload))
                except Qwen4ExpError as exc:
                    r = records[k]
                    failures.append(on_failure(_failure(exc, r.index, r.line)))
                    ids.append(None)
        for k, x in zip(pos, ids):
            results[k] = x
    ok = [(r, x) for r, x in zip(records, results) if x is not None]
    return ok, failures


def _flatten(ok):
    import itertools

    import numpy as np

    index = np.fromiter((r.index for r, _ in ok), dtype=np.int64, count=len(ok))
    lengths = np.fromiter((len(x) for _, x in ok), dtype=np.int64, count=len(ok))
    offsets = np.zeros(len(ok) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total > 2**31 - 1:
        raise InputError("a chunk holds more than 2**31 tokens: use a smaller --chunk-size")
    ids = [x for _, x in ok]
    if ids and all(isinstance(x, np.ndarray) for x in ids):
        flat = np.concatenate(ids).astype(np.int32, copy=False)
    else:
        flat = np.fromiter(
            itertools.chain.from_iterable(x.tolist() if isinstance(x, np.ndarray) else x for x in ids),
            dtype=np.int32,
            count=total,
        )
    return index, lengths.astype(np.int32), flat, offsets.astype(np.int32), total


class _Progress:
    def __init__(self, source, enabled: bool):
        self.bar = None
        self.t0 = time.perf_counter()
        if not enabled:
            return
        tqdm = _need("tqdm").tqdm
        if source.progress_unit == "bytes":
            self.bar = tqdm(
                total=source.total_bytes, unit="B", unit_scale=True, unit_divisor=1000,
                desc="batch", file=sys.stderr, dynamic_ncols=True, smoothing=0.1,
            )
        else:
            self.bar = tqdm(
                total=source.total_records, unit="rec", unit_scale=True,
                desc="batch", file=sys.stderr, dynamic_ncols=True, smoothing=0.1,
            )
        self.unit = source.progress_unit

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


def cmd_batch(args) -> int:
    in_fmt = _format_of(args.input, args.input_format, "input", default="jsonl")
    out_fmt = _format_of(args.output, args.format, "output")
    if args.output == "-":
        raise UsageError("OUT must be a file (it is written atomically)")
    errors_path = args.errors
    if errors_path is None and args.on_error == "skip":
        errors_path = args.output + ".errors.jsonl"
    check_paths(args.input, args.output, errors_path, getattr(args, "tokenizer", None))
    show_progress = (not args.quiet) and (
        args.progress == "always" or (args.progress == "auto" and sys.stderr.isatty())
    )
    if out_fmt == "parquet":
        _need("pyarrow.parquet")
    if show_progress:
        _need("tqdm")

    tok = _tokenizer(args)
    source = _ParquetSource(args.input) if in_fmt == "parquet" else _JsonlSource(args.input)
    stop = args.on_error == "stop"
    interrupt_after = int(os.environ.get(_HOOK_INTERRUPT, "0") or 0)
    delay = float(os.environ.get(_HOOK_DELAY, "0") or 0)

    failures: list[_Failure] = []
    fatal: list[_Failure] = []
    shown = [0]

    def on_failure(f: _Failure) -> _Failure:
        if stop:
            fatal.append(f)
            raise InputError(f"{f.where(source.name)}: {f.error}: {f.message} (nothing written; "
                             "--on-error skip skips bad records)")
        if not args.quiet and shown[0] < 5:
            print(f"qwen4exp batch: skipped {f.where(source.name)}: {f.error}: {f.message}",
                  file=sys.stderr)
        shown[0] += 1
        return f

    from concurrent.futures import ThreadPoolExecutor

    sink = pool = progress = None
    old_term = None
    n_ok = n_tokens = n_bytes = 0
    committed = False
    # SIGTERM is turned into a clean stop before the temporary file exists.
    if _in_main_thread():
        old_term = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        sink = _Sink(args.output, out_fmt)
        t0 = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qwen4exp-encode")
        progress = _Progress(source, show_progress)

        def work(records):
            ok, bad = _encode_chunk(tok, records, args.threads, lambda f: f)
            return ok, bad, (_flatten(ok) if ok else None)

        pending = None  # (future, consumed, failures of the chunk)
        chunks_done = 0

        def finish(p):
            nonlocal n_ok, n_tokens, n_bytes, chunks_done
            future, consumed, parse_failures = p
            ok, bad, flat = future.result()
            for f in bad:
                on_failure(f)
            chunk_failures = sorted(parse_failures + bad, key=lambda f: f.index)
            failures.extend(chunk_failures)
            if flat is not None:
                index, lengths, ids_flat, offsets, total = flat
                sink.write(index, lengths, ids_flat, offsets, [x for _, x in ok])
                n_tokens += total
            n_ok += len(ok)
            nb = sum(r.nbytes for r, _ in ok)
            n_bytes += nb
            progress.update(consumed, n_ok, n_bytes, len(failures))
            chunks_done += 1
            if delay:
                time.sleep(delay)
            if interrupt_after and chunks_done >= interrupt_after:
                raise KeyboardInterrupt

        for records, parse_failures, consumed in source.chunks(
            args.chunk_size, args.chunk_bytes, on_failure
        ):
            future = pool.submit(work, records)
            if pending is not None:
                finish(pending)
            pending = (future, consumed, parse_failures)
        if pending is not None:
            finish(pending)
            pending = None
        progress.close()
        if failures or args.errors is not None:
            _write_errors(errors_path, failures)
        sink.commit()
        committed = True
    except KeyboardInterrupt:
        _cleanup(progress, pool, sink)
        print("qwen4exp batch: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _Terminated:
        _cleanup(progress, pool, sink)
        print("qwen4exp batch: terminated; nothing written", file=sys.stderr)
        return 128 + signal.SIGTERM
    except CliError as exc:
        _cleanup(progress, pool, sink)
        if fatal and args.errors is not None:
            _write_errors(args.errors, fatal)
        raise
    finally:
        if not committed:
            _cleanup(progress, pool, sink)
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
        if committed:
            pool.shutdown(wait=True)

    secs = time.perf_counter() - t0
    if not args.quiet:
        n_bad = len(failures)
        mb = n_bytes / 1e6
        line = f"qwen4exp batch: {n_ok + n_bad:,} records: {n_ok:,} ok, {n_bad:,} failed"
        if n_bad:
            line += f" (listed in {errors_path})"
        print(line, file=sys.stderr)
        print(
            f"  {n_tokens:,} tokens from {mb:,.2f} MB in {secs:.2f} s: "
            f"{n_ok / secs:,.0f} records/s, {mb / secs:,.2f} MB/s, {n_tokens / secs:,.0f} tokens/s",
            file=sys.stderr,
        )
        print(f"  wrote {args.output} ({out_fmt}, {sink.rows:,} rows)", file=sys.stderr)
    return EXIT_RECORDS_FAILED if failures else EXIT_OK


def same_file(a: str, b: str) -> bool:
    """True if paths a and b name one file: the same inode when both exist
    (symlinks, hard links, ./ and ../ spellings), else the same resolved path
    (a symlink to a file that does not exist yet)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def check_paths(input_path: str, output: str, errors, tokenizer=None) -> None:
    """Refuse a run that would write over one of its own inputs or outputs:
    OUT and the errors file are replaced by rename, so aliasing IN, the
    --tokenizer file or each other would destroy data."""
    writes = [("OUT", output)] + ([("the errors file", errors)] if errors else [])
    reads = [("the input file", input_path)] if input_path != "-" else []
    if tokenizer:
        reads.append(("the --tokenizer file", tokenizer))
    for k, (wname, wpath) in enumerate(writes):
        if os.path.isdir(wpath):
            raise UsageError(f"{wname} {wpath} is a directory; name a file")
        directory = os.path.dirname(os.path.abspath(wpath))
        if not os.path.isdir(directory):
            raise UsageError(f"{wname}'s directory {directory} does not exist")
        for oname, opath in reads + writes[k + 1:]:
            if same_file(wpath, opath):
                raise UsageError(f"{wname} {wpath} is {oname} ({opath}): refusing to write over it")


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _raise_terminated(signum, frame):
    raise _Terminated()


def _cleanup(progress, pool, sink) -> None:
    # Keep Ctrl-C / SIGTERM from interrupting the cleanup itself.
    old = None
    if _in_main_thread():
        old = (signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN))
    try:
        if progress is not None:
            progress.close()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if sink is not None:
            sink.discard()
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old[0])
            signal.signal(signal.SIGTERM, old[1])


def _write_errors(path: str, failures) -> None:
    """Write the errors file atomically (JSONL: line, index, error, message)."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"cannot write the errors file {path}: {exc.strerror or exc}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for fl in failures:
                f.write(fl.json() + "\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
