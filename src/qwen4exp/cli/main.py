"""The `qwen4exp` command line (also `python -m qwen4exp`).

    qwen4exp demo                     render + tokenize the bundled example conversation
    qwen4exp render FILE|-            a chat request's bytes with their segments
    qwen4exp encode [FILE|-]          token ids of text (or, with --chat, of a chat request)
    qwen4exp decode [ID ...]          text of token ids
    qwen4exp parse [ID ...]           the assistant message that generated ids spell (JSON)
    qwen4exp count [FILE|-]           number of tokens of text or a chat request
    qwen4exp batch IN OUT             tokenize a JSONL/Parquet file of records into Parquet/JSONL

Exit codes (the same for every command):

    0    success
    1    finished, but some records failed and were skipped (batch --on-error skip)
    2    usage error: bad arguments, unknown format, missing optional dependency
    3    input error: unreadable or malformed input file, a rejected request or record
         (batch --on-error stop: nothing is written)
    4    output error: stdout, OUT or the errors file could not be written (a closed
         pipe, a full disk, a file-size limit, an I/O error); batch leaves neither
         file and no temporary file
    130  interrupted (Ctrl-C; batch leaves no output and no temporary file)
    128+N  batch stopped by signal N (129 SIGHUP, 131 SIGQUIT, 143 SIGTERM, ...):
         no output, no temporary file

pyarrow and tqdm (the `cli` extra) are only imported by `batch`, and only when
it needs them; `import qwen4exp` never imports this module.

This module holds `main` and the small commands; their arguments and help
texts are in `parser`; the
`batch` pipeline is in `batch` (its engines: `batch.LocalEngine` and
`ray_engine`), what the commands share (exit codes, errors, reading input
files and writing stdout, the tokenizer option) in `common`, and chat
requests are decoded by `qwen4exp.render.requests`.

File arguments (FILE, --file, IN, --tokenizer) must be regular files: a FIFO,
a device, a socket or a directory is refused with one line instead of being
blocked on or read forever; a pipe comes in through `-` (stdin).
"""

from __future__ import annotations

import json
import os
import shlex
import sys

from qwen4exp.errors import JsonError, Qwen4ExpError, RecordError
from qwen4exp.markers import Marker
from qwen4exp.render.requests import REQUEST_KEYS, loads_json, request_from_json
from qwen4exp.cli import folder, gate
from qwen4exp.cli.batch import cmd_batch
from qwen4exp.cli.common import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    RAY_EXTRA_HINT,
    CliError,
    InputError,
    OutputError,
    UsageError,
    fill_render_defaults,
    flush_stdout,
    other_vocabulary_hint,
    read_input,
    silence_stdout,
    tokenizer_of,
    write_stdout,
)
from qwen4exp.cli.parser import build_parser

def _read_bytes(path: str, hint: str = "") -> bytes:
    """The bytes of an input file argument; `hint` is added to the error when
    no such file exists (a positional meant as something else)."""
    try:
        return read_input(path)
    except InputError as exc:
        if hint and path != "-" and not os.path.lexists(path):
            raise InputError(f"{exc} ({hint})") from None
        raise


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
    hint = (f"FILE names a file to read; to {args.command} this text itself: "
            f"qwen4exp {args.command} --text {shlex.quote(path)}")
    return _decode_utf8(_read_bytes(path, hint), "stdin" if path == "-" else path)

_REQUEST_HINT = ("a chat request is a JSON file (or - for stdin): "
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]} or the bare list of messages")


def _load_request(path: str, args=None):
    where = "stdin" if path == "-" else path
    raw = _read_bytes(path, _REQUEST_HINT)
    text = _decode_utf8(raw, where)
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark
    try:
        obj = loads_json(text)
    except JsonError as exc:
        raise InputError(f"{where}: invalid JSON: {exc}") from None
    # --chat-format, when given, fixes the format and its vocabulary: the request may only repeat it;
    # without it the request's own "chat_format" (else render_chat's default) is used
    try:
        messages, options = request_from_json(obj, where, getattr(args, "chat_format", None))
    except RecordError as exc:
        raise InputError(str(exc)) from None
    if "chat_format" not in options and (getattr(args, "vocab", None) or getattr(args, "tokenizer", None)):
        options["chat_format"] = tokenizer_of(args).chat_format  # no format named: the vocabulary's own
    fill_render_defaults(args, options)  # a model folder's template defaults (thinking off, ...)
    extra = sorted(k for k in obj if k not in REQUEST_KEYS) if isinstance(obj, dict) else []
    if extra:
        print(f"qwen4exp: warning: {where}: ignoring unknown keys {', '.join(extra)}", file=sys.stderr)
    if args is not None:
        if getattr(args, "add_generation_prompt", False):
            options["add_generation_prompt"] = True
        if getattr(args, "no_thinking", False):
            options["enable_thinking"] = False
    return messages, options


def _render(messages, options, where: str, args=None):
    from qwen4exp.render.chat import render_chat
    try:
        if options.get("chat_format") == "template":  # --tokenizer FOLDER with its own template
            return tokenizer_of(args).render_chat(messages, **options)
        return render_chat(messages, **options)
    except Qwen4ExpError as exc:
        raise InputError(f"{where}: {type(exc).__name__}: {exc}") from None

def example_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "example_chat.json")


# ---------------------------------------------------------------------------
# output helpers
# ---------------------------------------------------------------------------


def _write(text: str) -> None:
    write_stdout(text)


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
    from qwen4exp.render.segments import Kind

    return Kind(kind).name


def _short(text: str, width: int) -> str:
    r = repr(text)
    return r if len(r) <= width else r[: width - 4] + "...'"


def _short_ids(ids, width: int) -> str:
    ids = [int(i) for i in ids]
    shown: list[str] = []
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
    from qwen4exp.render.segments import Segment

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
    messages, options = _load_request(path, args)
    chat = _render(messages, options, path, args)
    tok = tokenizer_of(args, chat.chat_format)
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
    w(f"{'bytes':>11}  {'kind':<15}  {'text':<{min(tw, 44)}}  token ids\n")
    for seg, seg_ids in zip(chat.segments, per_segment):
        text = chat.data[seg.start : seg.end].decode("utf-8")
        kind = _kind_name(seg.kind)  # the names of the docs and of `render --table`
        w(f"{seg.start:>5}..{seg.end:<4}  {kind:<15}  {_short(text, tw):<{min(tw, 44)}}  "
          f"{_short_ids(seg_ids, iw)}\n")

    # The point of the format: the same spelling, two authorities.
    spelling = Marker.IM_END.value
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
    chat = _render(messages, options, where, args)
    tok = tokenizer_of(args, chat.chat_format) if args.table else None  # refused before anything is written
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
        for seg, seg_ids in zip(chat.segments, _segment_ids(tok, chat)):
            text = chat.data[seg.start : seg.end].decode("utf-8")
            _write(f"{seg.start:>6}..{seg.end:<6} {_kind_name(seg.kind):<15} {_short(text, 44):<44}  "
                   f"{_short_ids(seg_ids, 40)}\n")
    return EXIT_OK


def _format_ids(ids, fmt: str) -> str:
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    if fmt == "space":
        return " ".join(map(str, ids))
    return json.dumps(ids)


def _on_input(args, on_chat, on_text):
    """`on_chat(tok, chat)` of the command's chat request (--chat), else
    `on_text(tok, text)` of its text, with the tokenizer that reads it."""
    _check_chat_options(args)
    if args.chat:
        if args.text is not None:
            raise UsageError("--chat reads a chat request from FILE or stdin, not --text")
        path = "-" if args.file is None else args.file
        messages, options = _load_request(path, args)
        chat = _render(messages, options, "stdin" if path == "-" else path, args)
        tok = tokenizer_of(args, chat.chat_format)
        return tok, on_chat(tok, chat)
    tok = tokenizer_of(args)
    text = _read_text(args)
    try:
        return tok, on_text(tok, text)
    except Qwen4ExpError as exc:
        raise InputError(f"{type(exc).__name__}: {exc}") from None


def _encode_input(args):
    """ids of the command's input: text, or a chat request with --chat."""
    return _on_input(args, lambda tok, chat: tok.encode_chat(chat), lambda tok, text: tok.encode(text))


def _check_chat_options(args) -> None:
    if not args.chat:
        given = [o for o, v in (("--chat-format", args.chat_format), ("--no-thinking", args.no_thinking),
                                ("--add-generation-prompt", args.add_generation_prompt)) if v]
        if given:
            raise UsageError(f"{given[0]} is for a chat request: add --chat")


def cmd_encode(args) -> int:
    _, ids = _encode_input(args)
    _write(_format_ids(ids, args.format) + "\n")
    return EXIT_OK


def cmd_count(args) -> int:
    _, n = _on_input(args, lambda tok, chat: tok.count_chat(chat), lambda tok, text: tok.count(text))
    _write(f"{n}\n")
    return EXIT_OK


def _parse_ids(text: str, where: str) -> list[int]:
    s = text.strip()
    if s.startswith("["):
        try:
            ids = loads_json(s)
        except JsonError as exc:
            raise InputError(f"{where}: invalid JSON list of ids: {exc}") from None
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            raise InputError(f"{where}: expected a JSON list of integers")
        return ids
    out = []
    for tok in s.replace(",", " ").split():
        # ASCII digits only: int() also takes "1_000", "+5" and other scripts' digits ("١٢")
        if not (tok.isascii() and tok.isdigit()):
            raise InputError(f"{where}: {tok[:40]!r} is not a token id (ASCII digits 0-9; the ids of text: "
                             "qwen4exp encode --text TEXT)")
        if len(tok.lstrip("0")) > 10:  # past any id (and int()'s digit limit)
            raise InputError(f"{where}: token id {tok[:40]}{'...' if len(tok) > 40 else ''} is out of range")
        out.append(int(tok))
    return out


def _read_ids(args) -> list[int]:
    """Ids from the arguments, or from --file / stdin (decode and parse)."""
    if args.ids:
        return _parse_ids(" ".join(args.ids), "arguments")
    path = "-" if args.file is None else args.file
    where = "stdin" if path == "-" else path
    return _parse_ids(_decode_utf8(_read_bytes(path), where), where)


def cmd_decode(args) -> int:
    ids = _read_ids(args)
    tok = tokenizer_of(args)
    try:
        data = tok.decode_bytes(ids)
    except Qwen4ExpError as exc:
        raise InputError(f"{exc}{other_vocabulary_hint(ids, tok, args, with_format=False)}") from None
    end = b"" if args.no_newline else b"\n"
    if args.bytes:
        write_stdout(data + end)
    else:
        _write(data.decode("utf-8", errors="replace") + end.decode())
    return EXIT_OK


def _load_tools(path: str) -> list:
    """--tools FILE: a JSON list of tool schemas (or a request object's "tools")."""
    where = "stdin" if path == "-" else path
    try:
        tools = loads_json(_decode_utf8(_read_bytes(path), where).removeprefix("\ufeff"))
    except JsonError as exc:
        raise InputError(f"{where}: invalid JSON: {exc}") from None
    if isinstance(tools, dict) and "tools" in tools:
        tools = tools["tools"]
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise InputError(f"{where}: expected a JSON list of tool schemas (objects)")
    return tools


def cmd_parse(args) -> int:
    ids = _read_ids(args)
    prompt = None
    if args.prompt is not None:  # the chat request the ids answer, with its generation prompt
        messages, options = _load_request(args.prompt, args)
        options["add_generation_prompt"] = True
        prompt = _render(messages, options, "stdin" if args.prompt == "-" else args.prompt, args)
    fmt = args.chat_format or (prompt.chat_format if prompt is not None else None)  # and its models' vocabulary
    tools = None if args.tools is None else _load_tools(args.tools)
    tok = tokenizer_of(args, fmt)
    try:
        message = tok.parse_completion(ids, prompt, chat_format=fmt, tools=tools,
                                       in_reasoning=True if args.in_reasoning else None,
                                       calls_in_reasoning=args.calls_in_reasoning)
    except Qwen4ExpError as exc:
        raise InputError(f"{exc}{other_vocabulary_hint(ids, tok, args, True, fmt)}") from None
    _write(json.dumps(message, ensure_ascii=False, indent=args.indent) + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------


def _cmd_batch(args) -> int:
    if args.engine == "local":
        if args.address:
            raise UsageError("--address is for --engine ray")
        return cmd_batch(args)
    try:
        from qwen4exp.cli.ray_engine import RayEngine
    except ImportError:
        raise UsageError(f"--engine ray needs ray: {RAY_EXTRA_HINT}") from None
    return cmd_batch(args, engine=RayEngine)


COMMANDS = {"demo": cmd_demo, "render": cmd_render, "encode": cmd_encode, "decode": cmd_decode,
            "parse": cmd_parse, "count": cmd_count, "batch": _cmd_batch, "gate": gate.cmd_gate,
            "folder": folder.cmd_folder}


def main(argv=None) -> int:
    parser = build_parser(COMMANDS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a usage error: argparse printed and exits
        try:
            flush_stdout()
        except OutputError as error:
            print(f"qwen4exp: error: {error}", file=sys.stderr)
            silence_stdout()
            return error.code
        raise exc
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code = args.func(args)
        flush_stdout()  # a full disk shows only here, when the buffered output goes out
        return code
    except CliError as exc:
        print(f"qwen4exp {args.command}: error: {exc}", file=sys.stderr)
        if isinstance(exc, OutputError):
            silence_stdout()
        return exc.code
    except Qwen4ExpError as exc:  # bad input the command did not name itself: still one line, exit 3
        print(f"qwen4exp {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print(f"qwen4exp {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
