"""Where `qwen4exp batch` records come from: JSONL (optionally gzip) and
Parquet sources that yield chunks of parsed records, and the failure records
of the ones that cannot be used.

A source's `chunks(chunk_records, chunk_bytes, on_failure)` yields
(work, failures, input units consumed): the work is a `blocks.Block` of
whole JSONL lines or a `blocks.Rows` Parquet batch, which the engine parses
and encodes (`encode.encode_work`), with the record readers of this module
for the records that are read one at a time. Nothing here encodes or
writes: the pipeline (`batch`) drives sources and sinks.
"""

from __future__ import annotations

import json
import os
import stat
import sys

from qwen4exp.formats import default_format
from qwen4exp.vocab.files import NotRegularFileError, kind_of, open_regular_file
from qwen4exp.errors import RecordError
from qwen4exp.render.requests import REQUEST_KEYS, failure_name, loads_json, request_from_json, request_of_row
from qwen4exp.cli.blocks import Rows, read_blocks
from qwen4exp.cli.columns import RecordOptions, other_fields
from qwen4exp.cli.common import InputError, UsageError, need_module

__all__ = ["Record", "Failure", "JsonlSource", "ParquetSource", "open_source", "format_of", "failure_of",
           "record_of_line", "records_of_batch", "iter_jsonl", "check_input_file"]

PARQUET_EXT = (".parquet", ".pq", ".parq")
JSONL_EXT = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")


def format_of(path: str, given: str | None, what: str, default: str | None = None) -> str:
    if given:
        return given
    if what == "input" and os.path.isdir(path):
        return "parquet"  # a directory of shards (--engine ray)
    low = path.lower()
    if low.endswith(PARQUET_EXT):
        return "parquet"
    if low.endswith(JSONL_EXT) or path == "-":
        return "jsonl"
    if default:
        return default
    raise UsageError(
        f"cannot tell the {what} format from {path!r}: name it .parquet or .jsonl, "
        f"or pass --{'format' if what == 'output' else 'input-format'}"
    )


# What a record holds: a text (encoded all as DATA) or a rendered chat.
TEXT, CHAT = "text", "chat"


class Record:
    """One usable record: kind TEXT (payload: a str) or CHAT (a RenderedChat);
    `extra`, with --keep-columns, its other fields (columns.kept_of)."""

    __slots__ = ("index", "line", "kind", "payload", "nbytes", "extra")

    def __init__(self, index, line, kind, payload, nbytes, extra=None):
        self.index, self.line, self.kind, self.payload, self.nbytes, self.extra = (
            index, line, kind, payload, nbytes, extra,
        )


class Failure:
    """One record that could not be used: where it was, the error's name and message."""

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


def make_record(obj, index, line, nbytes_hint=None, options: RecordOptions = RecordOptions(),
                extra=None) -> Record:
    """Turn one decoded record into a text or rendered-chat record (or raise);
    `extra`: its other fields when options.keep (default: obj's own)."""
    from qwen4exp.render.chat import render_chat

    if options.keep and extra is None:
        extra = other_fields(obj)
    if isinstance(obj, dict) and "text" in obj and obj.get("messages") is None:
        text = obj["text"]
        if not isinstance(text, str):
            raise RecordError(f'"text" must be a string, not {type(text).__name__}')
        return Record(index, line, TEXT, text, nbytes_hint, extra)
    if isinstance(obj, dict) and "text" in obj and obj["text"] is not None:
        raise RecordError('a record has either "text" or "messages", not both')
    render = dict(options.render)
    # the run's format (--chat-format, render_chat's default without it): a record may only repeat it
    messages, request_options = request_from_json(obj, "record", render.pop("chat_format", None)
                                                  or default_format().name)
    for key, value in options.defaults:  # the model folder's defaults, for what the record left out
        request_options.setdefault(key, value)
    chat = (options.renderer or render_chat)(messages, **render, **request_options)
    return Record(index, line, CHAT, chat, len(chat.data), extra)


def _open_jsonl(path: str):
    """(binary file, what closes it or None) of a JSONL input: stdin for "-",
    gzip for .gz; a file that is not a regular one is refused (InputError)."""
    import gzip

    if path == "-":
        return sys.stdin.buffer, None
    try:
        raw = open_regular_file(path)
    except NotRegularFileError as exc:
        raise InputError(f"{exc}: give a file, or - to read a pipe on stdin") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not path.lower().endswith(".gz"):
        return raw, raw.close
    unzipped = gzip.GzipFile(fileobj=raw, mode="rb")  # closing it leaves `raw` open

    def close() -> None:
        unzipped.close()
        raw.close()

    return unzipped, close


def iter_jsonl(path: str, start_line: int = 1):
    """Yield (line number, raw line bytes) of the non-blank lines of a JSONL file."""
    import zlib

    f, close = _open_jsonl(path)
    try:
        lineno = start_line - 1
        for raw in f:
            lineno += 1
            yield lineno, raw
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, truncated or corrupt (.gz)
        raise InputError(f"cannot read {path}: {exc}") from None
    finally:
        if close:
            close()


class JsonlSource:
    def __init__(self, path: str, options: RecordOptions = RecordOptions()):
        self.path, self.options = path, options
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
        """Yield (Block, [], input bytes consumed) per chunk: whole lines, which
        the engine parses (encode.encode_work)."""
        import zlib

        f, close = _open_jsonl(self.path)
        try:
            for block, consumed in read_blocks(f, chunk_records, chunk_bytes, self.options):
                yield block, [], consumed
        except (OSError, EOFError, zlib.error) as exc:  # unreadable, truncated or corrupt (.gz)
            raise InputError(f"cannot read {self.path}: {exc}") from None
        finally:
            if close:
                close()


def record_of_line(raw: bytes, index: int, lineno: int, options: RecordOptions = RecordOptions()) -> Record:
    """The record of one non-blank JSONL line (or raise)."""
    line = raw.decode("utf-8")
    if lineno == 1 and line.startswith("\ufeff"):
        line = line[1:]  # a UTF-8 byte order mark
    rec = make_record(loads_json(line), index, lineno, options=options)
    if rec.nbytes is None:
        rec.nbytes = len(rec.payload.encode("utf-8", "surrogatepass"))
    return rec


class ParquetSource:
    COLUMNS = ("text", *REQUEST_KEYS)  # text, messages, and a column per other request key

    def __init__(self, path: str, options: RecordOptions = RecordOptions()):
        pq = need_module("pyarrow.parquet")
        self.path, self.options = path, options
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
        if options.keep:  # every column, in the file's order
            self.columns = list(self.file.schema_arrow.names)
        self.kept_schema = self.file.schema_arrow.remove_metadata()
        for name in self.COLUMNS:
            if name in names:
                self.kept_schema = self.kept_schema.remove(self.kept_schema.get_field_index(name))
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
            for batch in self.file.iter_batches(batch_size=chunk_records, columns=self.columns):
                yield Rows(batch, index, self.options), [], batch.num_rows  # parsed by the engine
                index += batch.num_rows
        except OSError as exc:
            raise InputError(f"cannot read {self.path}: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            if type(exc).__module__.startswith("pyarrow"):
                raise InputError(f"{self.path}: cannot read Parquet data ({exc})") from None
            raise


def records_of_batch(batch, index: int, options: RecordOptions = RecordOptions()):
    """(records, failures) of the rows of an Arrow batch of a Parquet input's
    columns, numbered from `index`."""
    kept = None
    if options.keep:
        import pyarrow as pa

        names = [n for n in batch.column_names if n not in ParquetSource.COLUMNS]
        kept = pa.Table.from_batches([batch]).select(names)
        batch = batch.select([n for n in batch.column_names if n in ParquetSource.COLUMNS])
    pylists = {name: batch.column(name).to_pylist() for name in batch.column_names}
    records, failures = [], []
    for r in range(batch.num_rows):
        try:
            rec = make_record(_row(pylists, r), index + r, None, options=options,
                              extra=None if kept is None else (kept, r))
            if rec.nbytes is None:
                rec.nbytes = len(rec.payload.encode("utf-8", "surrogatepass"))
            records.append(rec)
        except Exception as exc:  # noqa: BLE001 - classified by failure_of
            failures.append(failure_of(exc, index + r, None))
    return records, failures


def _row(pylists, r):
    """The request or text record of row r (columns as Python lists)."""
    text = pylists["text"][r] if "text" in pylists else None
    messages = pylists["messages"][r] if "messages" in pylists else None
    if text is not None and messages is not None:
        raise RecordError("a row has both 'text' and 'messages'")
    if text is not None:
        return {"text": text}
    if messages is None:
        raise RecordError("'text' and 'messages' are both null")
    return request_of_row(pylists, r)  # as tokenize_dataset reads its rows


def failure_of(exc: BaseException, index: int, line) -> Failure:
    """The Failure of a record `exc` made unusable (a bug is raised again)."""
    return Failure(index, line, *failure_name(exc))


def check_input_file(path: str) -> None:
    """IN must be a regular file (or - for stdin): a FIFO, a device or a
    socket is refused (InputError) instead of blocked on or read forever."""
    if path == "-":
        return
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path} is a directory: name a file (a directory of Parquet shards needs --engine ray)")
    if not stat.S_ISREG(mode):
        raise InputError(f"{path} is a {kind_of(mode)}, not a regular file: give a file, or - to read a pipe on stdin")


def open_source(path: str, fmt: str, options: RecordOptions = RecordOptions()):
    """The source reading `path` in format `fmt` ("jsonl" or "parquet")."""
    check_input_file(path)
    return ParquetSource(path, options) if fmt == "parquet" else JsonlSource(path, options)
