"""The `qwen4exp` command line (also `python -m qwen4exp`).

    qwen4exp demo                     render + tokenize the bundled example conversation
    qwen4exp render FILE|-            a chat request's bytes with their segments
    qwen4exp encode [FILE|-]          token ids of text (or, with --chat, of a chat request)
    qwen4exp decode [ID ...]          text of token ids
    qwen4exp count [FILE|-]           number of tokens of text or a chat request
    qwen4exp batch IN OUT             tokenize a JSONL/Parquet file of records into Parquet/JSONL

Exit codes (the same for every command):

    0    success
    1    finished, but some records failed and were skipped (batch --on-error skip)
    2    usage error: bad arguments, unknown format, missing optional dependency
    3    input error: unreadable or malformed input file, a rejected request or record
         (batch --on-error stop: nothing is written)
    130  interrupted (Ctrl-C; batch leaves no output and no temporary file)

pyarrow and tqdm (the `cli` extra) are only imported by `batch`, and only when
it needs them; `import qwen4exp` never imports this module.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

EXIT_OK = 0
EXIT_RECORDS_FAILED = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    finished, but some records failed and were skipped (batch --on-error skip)
  2    usage error (bad arguments, unknown format, missing optional dependency)
  3    input error (unreadable/malformed input, a rejected request or record;
       batch --on-error stop writes nothing)
  130  interrupted (Ctrl-C): batch leaves no output and no temporary file
"""

CHAT_INPUT_HELP = (
    'a chat request: a JSON object {"messages": [...], "tools": [...], '
    '"add_generation_prompt": bool, "enable_thinking": bool} (only "messages" is required), '
    "or a bare JSON list of messages"
)

# Test hooks (used by tests/test_cli.py; harmless otherwise).
_HOOK_INTERRUPT = "QWEN4EXP_TEST_INTERRUPT_AFTER_CHUNKS"  # raise KeyboardInterrupt after N chunks
_HOOK_DELAY = "QWEN4EXP_TEST_CHUNK_DELAY"  # sleep this many seconds after each chunk


class CliError(Exception):
    """An error the CLI reports as one line on stderr, exiting with `code`."""

    code = EXIT_INPUT

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(CliError):
    code = EXIT_USAGE


class InputError(CliError):
    code = EXIT_INPUT


class RecordError(Exception):
    """A batch record of the wrong shape or type (reported as `RecordError`)."""


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


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------


def _read_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _decode_utf8(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: not valid UTF-8 (byte {exc.start})") from None


def _read_text(args) -> str:
    if args.text is not None:
        if args.file is not None:
            raise UsageError("give either --text or FILE, not both")
        return args.text
    path = "-" if args.file is None else args.file
    return _decode_utf8(_read_bytes(path), "stdin" if path == "-" else path)


_REQUEST_KEYS = ("messages", "tools", "add_generation_prompt", "enable_thinking")


def request_from_json(obj, where: str, *, warn_unknown: bool = False):
    """(messages, options) of a decoded chat request: an object or a bare message list."""
    if isinstance(obj, list):
        return obj, {}
    if not isinstance(obj, dict):
        raise RecordError(
            f"{where}: a chat request must be a JSON object with \"messages\" or a list of "
            f"messages, not {type(obj).__name__}"
        )
    if "messages" not in obj:
        raise RecordError(f'{where}: a chat request needs a "messages" list')
    if warn_unknown:
        extra = sorted(k for k in obj if k not in _REQUEST_KEYS)
        if extra:
            print(f"qwen4exp: warning: {where}: ignoring unknown keys {', '.join(extra)}",
                  file=sys.stderr)
    options = {k: obj[k] for k in _REQUEST_KEYS[1:] if k in obj and obj[k] is not None}
    return obj["messages"], options


def _load_request(path: str, args=None):
    where = "stdin" if path == "-" else path
    raw = _read_bytes(path)
    text = _decode_utf8(raw, where)
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: invalid JSON: {exc}") from None
    try:
        messages, options = request_from_json(obj, where, warn_unknown=True)
    except RecordError as exc:
        raise InputError(str(exc)) from None
    if args is not None:
        if getattr(args, "add_generation_prompt", False):
            options["add_generation_prompt"] = True
        if getattr(args, "no_thinking", False):
            options["enable_thinking"] = False
    return messages, options


def _render(messages, options, where: str):
    from .chat import render_chat
    from .errors import Qwen4ExpError

    try:
        return render_chat(messages, **options)
    except Qwen4ExpError as exc:
        raise InputError(f"{where}: {type(exc).__name__}: {exc}") from None


def _tokenizer(args=None):
    from .tokenizer import Tokenizer

    path = getattr(args, "tokenizer", None)
    if path:
        from .errors import Qwen4ExpError

        try:
            return Tokenizer.from_file(path)
        except (OSError, Qwen4ExpError) as exc:
            raise UsageError(f"--tokenizer {path}: {exc}") from None
    return Tokenizer()


def example_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "examples", "example_chat.json")


# ---------------------------------------------------------------------------
# output helpers
# ---------------------------------------------------------------------------


def _write(text: str) -> None:
    sys.stdout.write(text)


def _use_color(mode: str) -> bool:
    if mode == "always":
        return True
    if mode == "never":
        return False
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


_CONTROL_STYLE = "\x1b[1;7;36m"  # bold, reverse, cyan
_RESET = "\x1b[0m"
_OPEN, _CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧


def _kind_name(kind) -> str:
    return "TRUSTED_CONTROL" if int(kind) == 1 else "DATA"


def _short(text: str, width: int) -> str:
    r = repr(text)
    return r if len(r) <= width else r[: width - 4] + "...'"


def _short_ids(ids, width: int) -> str:
    ids = [int(i) for i in ids]
    shown = []
    used = 1
    for k, i in enumerate(ids):
        s = str(i)
        if used + len(s) + 2 > width and k < len(ids) - 1:
            return "[" + ", ".join(shown) + f", ... +{len(ids) - k}]"
        shown.append(s)
        used += len(s) + 2
    return "[" + ", ".join(shown) + "]"


def _segment_ids(tok, chat):
    """Token ids of each segment on its own (their concatenation is encode_chat)."""
    from .segments import Segment

    out = []
    for seg in chat.segments:
        piece = chat.data[seg.start : seg.end]
        out.append(tok.encode_segments(piece, [Segment(0, len(piece), seg.kind)]))
    return out


# ---------------------------------------------------------------------------
# demo
# ---------------------------------------------------------------------------


def cmd_demo(args) -> int:
    import numpy as np

    path = example_path()
    messages, options = _load_request(path)
    chat = _render(messages, options, path)
    tok = _tokenizer()
    ids = tok.encode_chat(chat)
    per_segment = _segment_ids(tok, chat)
    assert np.array_equal(np.concatenate(per_segment), ids)  # each segment stands alone
    atom_ids = set(tok.atoms.values())
    full = args.full
    tw, iw = (10**9, 10**9) if full else (44, 40)

    w = _write
    w(f"qwen4exp demo: the bundled example conversation ({os.path.basename(path)})\n")
    w(f"{len(messages)} messages, {len(options.get('tools') or [])} tool; rendered to "
      f"{len(chat.data)} bytes in {len(chat.segments)} segments -> {len(ids)} tokens\n\n")
    w(f"{'bytes':>11}  {'kind':<7}  {'text':<{min(tw, 44)}}  token ids\n")
    for seg, seg_ids in zip(chat.segments, per_segment):
        text = chat.data[seg.start : seg.end].decode("utf-8")
        kind = "CONTROL" if int(seg.kind) == 1 else "DATA"
        w(f"{seg.start:>5}..{seg.end:<4}  {kind:<7}  {_short(text, tw):<{min(tw, 44)}}  "
          f"{_short_ids(seg_ids, iw)}\n")

    # The point of the format: the same spelling, two authorities.
    spelling = "<|im_end|>"
    atom = tok.atoms[spelling]
    w("\n")
    for seg, seg_ids in zip(chat.segments, per_segment):
        if int(seg.kind) != 0:
            continue
        piece = chat.data[seg.start : seg.end]
        at = piece.find(spelling.encode())
        while at >= 0:
            cover = _covering_ids(tok, seg_ids, at, at + len(spelling))
            leaked = [i for i in cover if i in atom_ids]
            verdict = "none is an atom id" if not leaked else f"ERROR: atom ids {leaked}"
            w(f"The {spelling} the user typed (byte {seg.start + at}) stayed DATA: ordinary BPE "
              f"ids {cover}, {verdict}.\n")
            at = piece.find(spelling.encode(), at + 1)
    n_markers = sum(
        chat.data[s.start : s.end].count(spelling.encode()) for s in chat.segments if int(s.kind) == 1
    )
    n_atom = int(np.count_nonzero(ids == atom))
    w(f"The template's {n_markers} {spelling} markers are TRUSTED_CONTROL: each became the atom id "
      f"{atom} ({n_atom} in the output).\n")
    in_data = sum(
        1 for seg, seg_ids in zip(chat.segments, per_segment)
        if int(seg.kind) == 0 for i in seg_ids.tolist() if i in atom_ids
    )
    in_control = sum(
        len(seg_ids) for seg, seg_ids in zip(chat.segments, per_segment) if int(seg.kind) == 1
    )
    if in_data == 0:
        w(f"All {in_control} atom ids of the {len(ids)} tokens come from template markers; "
          "caller text never becomes one.\n")
    else:  # cannot happen: DATA never yields an atom id
        w(f"ERROR: {in_data} atom ids came from DATA segments\n")
    if full:
        w(f"\ntoken ids ({len(ids)}):\n{_short_ids(ids, 10**9)}\n")
    else:
        w("\n(--full: every segment and id in full; `qwen4exp render FILE` shows a transcript)\n")
    return EXIT_OK if in_data == 0 else EXIT_INPUT


def _covering_ids(tok, seg_ids, start: int, end: int) -> list[int]:
    """The ids of a segment whose bytes overlap [start, end) of that segment."""
    out = []
    pos = 0
    for i in seg_ids.tolist():
        n = len(tok.decode_bytes([i]))
        if pos < end and pos + n > start:
            out.append(i)
        pos += n
        if pos >= end:
            break
    return out


# ---------------------------------------------------------------------------
# render / encode / decode / count
# ---------------------------------------------------------------------------


def cmd_render(args) -> int:
    where = "stdin" if args.file == "-" else args.file
    messages, options = _load_request(args.file, args)
    chat = _render(messages, options, where)
    if args.json:
        doc = {
            "text": chat.text,
            "segments": [[s.start, s.end, _kind_name(s.kind)] for s in chat.segments],
        }
        _write(json.dumps(doc, ensure_ascii=False) + "\n")
        return EXIT_OK
    color = _use_color(args.color)
    parts = []
    for seg in chat.segments:
        text = chat.data[seg.start : seg.end].decode("utf-8")
        if int(seg.kind) == 1:
            parts.append(f"{_CONTROL_STYLE}{text}{_RESET}" if color else f"{_OPEN}{text}{_CLOSE}")
        else:
            parts.append(text)
    out = "".join(parts)
    _write(out if out.endswith("\n") else out + "\n")
    if args.table:
        _write("\n")
        for seg in chat.segments:
            text = chat.data[seg.start : seg.end].decode("utf-8")
            _write(f"{seg.start:>6}..{seg.end:<6} {_kind_name(seg.kind):<15} {_short(text, 60)}\n")
    return EXIT_OK


def _format_ids(ids, fmt: str) -> str:
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    if fmt == "space":
        return " ".join(map(str, ids))
    return json.dumps(ids)


def _encode_input(args):
    """ids of the command's input: text, or a chat request with --chat."""
    from .errors import Qwen4ExpError

    tok = _tokenizer(args)
    if args.chat:
        if args.text is not None:
            raise UsageError("--chat reads a chat request from FILE or stdin, not --text")
        path = "-" if args.file is None else args.file
        messages, options = _load_request(path, args)
        chat = _render(messages, options, "stdin" if path == "-" else path)
        return tok, tok.encode_chat(chat)
    text = _read_text(args)
    try:
        return tok, tok.encode(text)
    except Qwen4ExpError as exc:
        raise InputError(f"{type(exc).__name__}: {exc}") from None


def cmd_encode(args) -> int:
    _, ids = _encode_input(args)
    _write(_format_ids(ids, args.format) + "\n")
    return EXIT_OK


def cmd_count(args) -> int:
    from .errors import Qwen4ExpError

    if args.chat:
        _, ids = _encode_input(args)
        n = len(ids)
    else:
        tok = _tokenizer(args)
        text = _read_text(args)
        try:
            n = tok.count(text)
        except Qwen4ExpError as exc:
            raise InputError(f"{type(exc).__name__}: {exc}") from None
    _write(f"{n}\n")
    return EXIT_OK


def _parse_ids(text: str, where: str) -> list[int]:
    s = text.strip()
    if s.startswith("["):
        try:
            ids = json.loads(s)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: invalid JSON list of ids: {exc}") from None
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            raise InputError(f"{where}: expected a JSON list of integers")
        return ids
    out = []
    for tok in s.replace(",", " ").split():
        try:
            out.append(int(tok))
        except ValueError:
            raise InputError(f"{where}: {tok!r} is not an integer token id") from None
    return out


def cmd_decode(args) -> int:
    from .errors import Qwen4ExpError

    if args.ids:
        ids = _parse_ids(" ".join(args.ids), "arguments")
    else:
        path = "-" if args.file is None else args.file
        where = "stdin" if path == "-" else path
        ids = _parse_ids(_decode_utf8(_read_bytes(path), where), where)
    tok = _tokenizer(args)
    try:
        data = tok.decode_bytes(ids)
    except Qwen4ExpError as exc:
        raise InputError(str(exc)) from None
    end = b"" if args.no_newline else b"\n"
    if args.bytes:
        sys.stdout.flush()
        sys.stdout.buffer.write(data + end)
    else:
        _write(data.decode("utf-8", errors="replace") + end.decode())
    return EXIT_OK


# ---------------------------------------------------------------------------
# batch
# ---------------------------------------------------------------------------

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
    except (OSError, EOFError) as exc:
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
                obj = json.loads(line)
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
                value = json.loads(value)
            obj[name] = value
        if isinstance(obj["messages"], dict) and "messages" in obj["messages"]:
            obj = {**obj["messages"], **{k: v for k, v in obj.items() if k != "messages"}}
        for name in ("add_generation_prompt", "enable_thinking"):
            if name in pylists and pylists[name][r] is not None:
                obj[name] = pylists[name][r]
        return obj


def _is_string(t) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or (
        pa.types.is_large_binary(t)
    )


def _failure(exc: BaseException, index: int, line) -> _Failure:
    from .errors import Qwen4ExpError

    if isinstance(exc, json.JSONDecodeError):
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


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {v}")
    return v


def cmd_batch(args) -> int:
    in_fmt = _format_of(args.input, args.input_format, "input", default="jsonl")
    out_fmt = _format_of(args.output, args.format, "output")
    if args.output == "-":
        raise UsageError("OUT must be a file (it is written atomically)")
    if args.input != "-" and os.path.exists(args.output) and os.path.exists(args.input):
        if os.path.samefile(args.input, args.output):
            raise UsageError("OUT must not be the input file")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise UsageError(f"output directory {out_dir} does not exist")
    errors_path = args.errors
    if errors_path is None and args.on_error == "skip":
        errors_path = args.output + ".errors.jsonl"
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


# ---------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qwen4exp",
        description=(
            "Provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE.\n"
            "Start with `qwen4exp demo`."
        ),
        epilog=EXIT_CODES_HELP,
        formatter_class=_Formatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def add(name, help_, description, func):
        sp = sub.add_parser(
            name, help=help_, description=description, epilog=EXIT_CODES_HELP, formatter_class=_Formatter
        )
        sp.set_defaults(func=func)
        return sp

    def tokenizer_opt(sp):
        sp.add_argument(
            "--tokenizer", metavar="PATH",
            help="a Qwen-family tokenizer.json (or a directory holding one); default: the bundled Qwen3 vocabulary",
        )

    def chat_opts(sp):
        sp.add_argument("--add-generation-prompt", action="store_true",
                        help="end with an open assistant turn (overrides the file)")
        sp.add_argument("--no-thinking", action="store_true",
                        help="enable_thinking=False (overrides the file)")

    sp = add(
        "demo",
        "render and tokenize the bundled example conversation",
        "Render the bundled example conversation (tools, a tool call, a tool result,\n"
        "reasoning, and a literal <|im_end|> typed by the user), print its segments\n"
        "with their token ids, and show that the user's <|im_end|> stayed DATA\n"
        "(ordinary BPE ids) while the template's markers became atom ids.",
        cmd_demo,
    )
    sp.add_argument("--full", action="store_true", help="do not shorten long segments and id lists")

    sp = add(
        "render",
        "show a chat request's rendered bytes and segments",
        "Render a chat request and show its bytes with their segments. On a terminal\n"
        "TRUSTED_CONTROL segments are coloured; otherwise they are wrapped in \u27e6...\u27e7\n"
        "(the brackets are not part of the bytes). --json prints the exact form:\n"
        '{"text": ..., "segments": [[start, end, "DATA"|"TRUSTED_CONTROL"], ...]}\n'
        "with byte offsets into the UTF-8 text.\n\nInput: " + CHAT_INPUT_HELP + ".",
        cmd_render,
    )
    sp.add_argument("file", metavar="FILE|-", help="the chat request (JSON); - reads stdin")
    sp.add_argument("--json", action="store_true", help="print text and segments as JSON")
    sp.add_argument("--table", action="store_true", help="also list the segments, one a line")
    sp.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                    help="colour TRUSTED_CONTROL (default: auto, when stdout is a terminal)")
    chat_opts(sp)

    sp = add(
        "encode",
        "print the token ids of text (or of a chat request with --chat)",
        "Print token ids. Text comes from --text, FILE, or stdin, and is used exactly\n"
        "(a final newline is tokenized too: use --text or printf to avoid one). All of\n"
        "it is DATA: an atom spelling in it gets ordinary BPE ids. With --chat, the\n"
        "input is a chat request, rendered and tokenized segment by segment.\n\n"
        "Chat input: " + CHAT_INPUT_HELP + ".",
        cmd_encode,
    )
    sp.add_argument("file", nargs="?", metavar="FILE|-", help="input file (default: stdin)")
    sp.add_argument("--text", "-t", help="the text to encode")
    sp.add_argument("--chat", action="store_true", help="the input is a chat request")
    sp.add_argument("--format", "-f", choices=("json", "space"), default="json",
                    help="a JSON list (default) or space-separated ids")
    chat_opts(sp)
    tokenizer_opt(sp)

    sp = add(
        "decode",
        "print the text of token ids",
        "Print the text that token ids spell (atoms spell themselves). Ids come from\n"
        "the arguments, FILE, or stdin, as a JSON list or separated by spaces/commas.\n"
        "Bytes that do not form UTF-8 print as U+FFFD unless --bytes.",
        cmd_decode,
    )
    sp.add_argument("ids", nargs="*", metavar="ID", help="token ids (default: read FILE or stdin)")
    sp.add_argument("--file", metavar="FILE|-", help="read the ids from FILE (- for stdin)")
    sp.add_argument("--bytes", action="store_true", help="write the raw bytes")
    sp.add_argument("--no-newline", "-n", action="store_true", help="no newline after the text")
    tokenizer_opt(sp)

    sp = add(
        "count",
        "print the number of tokens of text (or of a chat request with --chat)",
        "Print the number of tokens. Input as for `encode`.\n\nChat input: " + CHAT_INPUT_HELP + ".",
        cmd_count,
    )
    sp.add_argument("file", nargs="?", metavar="FILE|-", help="input file (default: stdin)")
    sp.add_argument("--text", "-t", help="the text to count")
    sp.add_argument("--chat", action="store_true", help="the input is a chat request")
    chat_opts(sp)
    tokenizer_opt(sp)

    sp = add(
        "batch",
        "tokenize a JSONL or Parquet file of records into Parquet or JSONL",
        "Tokenize every record of IN into OUT.\n\n"
        "IN: JSONL (.jsonl, .ndjson, .json, optionally .gz; - for stdin), one record a\n"
        'line: {"text": "..."} or a chat request {"messages": [...], "tools": [...],\n'
        '"add_generation_prompt": bool, "enable_thinking": bool} (or a bare list of\n'
        "messages); other keys are ignored, blank lines skipped. Or Parquet (.parquet):\n"
        "a 'text' column, or a 'messages' column (JSON strings or list<struct>), with\n"
        "optional 'tools', 'add_generation_prompt', 'enable_thinking' columns.\n\n"
        "OUT: Parquet (columns index int64 = 0-based record index, ids list<int32>,\n"
        'length int32) or JSONL ({"index": i, "ids": [...], "length": n} a line),\n'
        "by extension or --format. OUT is written to a temporary file beside it and\n"
        "renamed at the end: on --on-error stop, Ctrl-C or SIGTERM no OUT appears (an\n"
        "existing OUT is left as it was) and the temporary file is removed.\n\n"
        "Records are processed in chunks: chats are rendered in Python, then chunks\n"
        "are encoded with encode_batch / encode_chats on --threads native threads.\n"
        "A bad record (invalid JSON, wrong type, rejected chat) is reported with its\n"
        "line number. --on-error stop (default) stops with exit code 3; --on-error\n"
        "skip writes it to the errors file (JSONL: line, index, error, message; line\n"
        "is null for Parquet input; default OUT.errors.jsonl) and goes on, exiting\n"
        "with 1 if any failed. A summary (records ok/failed, tokens, MB, seconds,\n"
        "throughput) goes to stderr; a tqdm progress bar too when stderr is a terminal.",
        cmd_batch,
    )
    sp.add_argument("input", metavar="IN", help="input JSONL or Parquet file (- for JSONL on stdin)")
    sp.add_argument("output", metavar="OUT", help="output .parquet or .jsonl file")
    sp.add_argument("--format", choices=("parquet", "jsonl"), help="output format (default: from OUT's extension)")
    sp.add_argument("--input-format", choices=("parquet", "jsonl"),
                    help="input format (default: from IN's extension; JSONL if unknown)")
    sp.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                    help="native encoding threads (default: all available CPUs)")
    sp.add_argument("--chunk-size", type=_positive_int, default=4096, metavar="N",
                    help="records per chunk (default: 4096)")
    sp.add_argument("--chunk-bytes", type=_positive_int, default=32 * 1024 * 1024, metavar="B",
                    help=argparse.SUPPRESS)
    sp.add_argument("--on-error", choices=("stop", "skip"), default="stop",
                    help="stop at the first bad record (default, exit 3, nothing written) or skip it")
    sp.add_argument("--errors", metavar="PATH",
                    help="errors file for skipped records (default with skip: OUT.errors.jsonl)")
    sp.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                    help="tqdm progress bar on stderr (default: auto, when stderr is a terminal)")
    sp.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary")
    tokenizer_opt(sp)
    return p


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("qwen4exp")
    except Exception:  # noqa: BLE001 - not installed (PYTHONPATH=src)
        return "0.1.0 (source tree)"


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except CliError as exc:
        print(f"qwen4exp {args.command}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"qwen4exp {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
