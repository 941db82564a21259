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

This module holds the argument parsing, `main` and the small commands; the
`batch` pipeline is in `batch` (its engines: `batch.LocalEngine` and
`ray_engine`), what the commands share (exit codes, errors, reading input
files and writing stdout, the tokenizer option) in `common`, and chat
requests are decoded by `qwen4exp.requests`.

File arguments (FILE, --file, IN, --tokenizer) must be regular files: a FIFO,
a device, a socket or a directory is refused with one line instead of being
blocked on or read forever; a pipe comes in through `-` (stdin).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import JsonError, Qwen4ExpError, RecordError
from ..markers import Marker
from ..requests import REQUEST_KEYS, loads_json, request_from_json
from . import gate
from .batch import cmd_batch
from .common import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    RAY_EXTRA_HINT,
    CliError,
    InputError,
    OutputError,
    UsageError,
    add_chat_format_argument,
    add_tokenizer_arguments,
    chat_format_of,
    flush_stdout,
    read_input,
    silence_stdout,
    tokenizer_of,
    write_stdout,
)

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    batch: some records failed and were skipped; gate: a check failed
  2    usage error (bad arguments, unknown format, missing optional dependency)
  3    input error (unreadable or malformed input, a rejected request or record)
  4    output error (stdout, OUT or the errors file could not be written)
  130  interrupted (Ctrl-C); batch: 128+N when stopped by signal N
File arguments must be regular files (a FIFO or a device is refused); pipe into -.
`qwen4exp COMMAND --help` shows each command's own.
"""

# Each command's --help ends with examples and that command's exit codes.
_USAGE_INPUT_CODES = """\
  0    success
  2    usage error (bad arguments)
  3    input error: {input}
  4    output error: stdout could not be written (closed pipe, full disk, I/O error)
  130  interrupted (Ctrl-C)"""
COMMAND_EPILOGS = {
    "demo": """\
examples:
  qwen4exp demo
  qwen4exp demo --vocab qwen3.6 --chat-format qwen3.6 --full

exit codes:
  0    success
  2    usage error (bad arguments)
  3    a check failed: caller text produced an atom id (never expected)
  4    output error: stdout could not be written (closed pipe, full disk, I/O error)
  130  interrupted (Ctrl-C)""",
    "render": """\
examples:
  qwen4exp render chat.json
  qwen4exp render chat.json --chat-format qwen3.6 --table
  echo '[{"role": "user", "content": "hi"}]' | qwen4exp render - --json

exit codes:
""" + _USAGE_INPUT_CODES.format(input="unreadable or malformed file, a rejected request"),
    "encode": """\
examples:
  qwen4exp encode --text "héllo wörld"
  qwen4exp encode --vocab qwen3.6 notes.txt --format space
  qwen4exp encode --chat chat.json --chat-format qwen3.6 --add-generation-prompt

exit codes:
""" + _USAGE_INPUT_CODES.format(input="unreadable or malformed input, a rejected request"),
    "decode": """\
examples:
  qwen4exp decode 14990 1879
  qwen4exp decode --vocab qwen3.6 --file ids.json

exit codes:
""" + _USAGE_INPUT_CODES.format(input="unreadable input, not integers, an id outside the vocabulary"),
    "parse": """\
examples:
  qwen4exp parse 151667 198 40 ... 151645
  qwen4exp parse --vocab qwen3.6 --file completion_ids.json --indent 2
  qwen4exp parse --prompt request.json --file completion_ids.json

exit codes:
""" + _USAGE_INPUT_CODES.format(input="unreadable input, not integers, an id outside the vocabulary"),
    "count": """\
examples:
  qwen4exp count --text "héllo wörld"
  qwen4exp count --chat chat.json --chat-format qwen3.6 --add-generation-prompt

exit codes:
""" + _USAGE_INPUT_CODES.format(input="unreadable or malformed input, a rejected request"),
    "batch": """\
examples:
  qwen4exp batch corpus.jsonl.gz ids.parquet --threads 8
  qwen4exp batch chats.jsonl sft.parquet --masks --keep-columns --on-error skip
  qwen4exp batch shards/ out.parquet --engine ray --address auto

exit codes:
  0    success
  1    finished, but some records failed and were skipped (--on-error skip)
  2    usage error (bad arguments, unknown format, missing optional dependency)
  3    input error: unreadable or malformed input, a rejected record (with
       --on-error stop: nothing is written)
  4    output error: OUT or the errors file could not be written (full disk,
       file-size limit, I/O error): neither file and no temporary file is left
  130  interrupted (Ctrl-C): no output and no temporary file
  128+N  stopped by signal N (129 SIGHUP, 143 SIGTERM, ...): likewise""",
    "gate": """\
examples:
  qwen4exp gate
  qwen4exp gate --vocab qwen3.6 --json
  qwen4exp gate --tokenizer path/to/tokenizer.json

exit codes:
  0    every check passed
  1    a check failed (each failure names the check and the atom or case)
  2    usage error (bad arguments, unknown vocabulary)
  3    unreadable tokenizer file: not a regular file, not strict JSON, entries
       of the wrong type (a well-formed file whose values are wrong fails a check: 1)
  4    output error: the report could not be written
  130  interrupted (Ctrl-C)""",
}

CHAT_INPUT_HELP = (
    'a chat request: a JSON object {"messages": [...], "tools": [...], '
    '"add_generation_prompt": bool, "enable_thinking": bool, "preserve_thinking": bool, '
    '"reasoning_effort": "xhigh"|"medium"|"low", "chat_format": F} (only "messages" is required; '
    'an option the format lacks is an error; "chat_format", if given, must be the --chat-format), '
    "or a bare JSON list of messages"
)


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------


def _read_bytes(path: str) -> bytes:
    return read_input(path)


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

def _load_request(path: str, args=None):
    where = "stdin" if path == "-" else path
    raw = _read_bytes(path)
    text = _decode_utf8(raw, where)
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark
    try:
        obj = loads_json(text)
    except JsonError as exc:
        raise InputError(f"{where}: invalid JSON: {exc}") from None
    try:  # the run's format (--chat-format) fixes the vocabulary: the request may only repeat it
        messages, options = request_from_json(obj, where, chat_format_of(args))
    except RecordError as exc:
        raise InputError(str(exc)) from None
    extra = sorted(k for k in obj if k not in REQUEST_KEYS) if isinstance(obj, dict) else []
    if extra:
        print(f"qwen4exp: warning: {where}: ignoring unknown keys {', '.join(extra)}", file=sys.stderr)
    if args is not None:
        if getattr(args, "add_generation_prompt", False):
            options["add_generation_prompt"] = True
        if getattr(args, "no_thinking", False):
            options["enable_thinking"] = False
    return messages, options


def _render(messages, options, where: str):
    from ..chat import render_chat
    try:
        return render_chat(messages, **options)
    except Qwen4ExpError as exc:
        raise InputError(f"{where}: {type(exc).__name__}: {exc}") from None

def example_path() -> str:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(package, "examples", "example_chat.json")


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
    from ..segments import Kind

    return Kind(kind).name


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
    from ..segments import Segment

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
    chat = _render(messages, options, path)
    tok = tokenizer_of(args)
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
        tok = tokenizer_of(args)
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


def _encode_input(args):
    """ids of the command's input: text, or a chat request with --chat."""
    _check_chat_options(args)
    tok = tokenizer_of(args)
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
    _check_chat_options(args)
    if args.chat:
        if args.text is not None:
            raise UsageError("--chat reads a chat request from FILE or stdin, not --text")
        tok = tokenizer_of(args)
        path = "-" if args.file is None else args.file
        messages, options = _load_request(path, args)
        n = tok.count_chat(_render(messages, options, "stdin" if path == "-" else path))
    else:
        tok = tokenizer_of(args)
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
            raise InputError(f"{where}: {tok[:40]!r} is not a token id (ASCII digits 0-9)")
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
        raise InputError(str(exc)) from None
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
        prompt = _render(messages, options, "stdin" if args.prompt == "-" else args.prompt)
        args.chat_format = args.chat_format or prompt.chat_format  # and its models' vocabulary
    tools = None if args.tools is None else _load_tools(args.tools)
    tok = tokenizer_of(args)
    try:
        message = tok.parse_completion(ids, prompt, chat_format=args.chat_format, tools=tools,
                                       in_reasoning=True if args.in_reasoning else None,
                                       calls_in_reasoning=args.calls_in_reasoning)
    except Qwen4ExpError as exc:
        raise InputError(str(exc)) from None
    _write(json.dumps(message, ensure_ascii=False, indent=args.indent) + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------------
# argument parsing
# ---------------------------------------------------------------------------


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {v}")
    return v


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
            name, help=help_, description=description, epilog=COMMAND_EPILOGS[name], formatter_class=_Formatter
        )
        sp.set_defaults(func=func)
        return sp

    tokenizer_opt = add_tokenizer_arguments

    def ids_opts(sp):
        sp.add_argument("ids", nargs="*", metavar="ID", help="token ids (default: read FILE or stdin)")
        sp.add_argument("--file", metavar="FILE|-", help="read the ids from FILE (- for stdin)")

    def text_opts(sp, verb):
        sp.add_argument("file", nargs="?", metavar="FILE|-", help="input file (default: stdin)")
        sp.add_argument("--text", "-t", help=f"the text to {verb}")
        sp.add_argument("--chat", action="store_true", help="the input is a chat request")

    def chat_opts(sp):
        sp.add_argument("--add-generation-prompt", action="store_true",
                        help="end with an open assistant turn (overrides the file)")
        sp.add_argument("--no-thinking", action="store_true",
                        help="enable_thinking=False (overrides the file)")
        add_chat_format_argument(sp)

    sp = add(
        "demo",
        "render and tokenize the bundled example conversation",
        "Render the bundled example conversation (tools, a tool call, a tool result,\n"
        f"reasoning, and a literal {Marker.IM_END} typed by the user), print its segments\n"
        f"with their token ids, and show that the user's {Marker.IM_END} stayed DATA\n"
        "(ordinary BPE ids) while the template's markers became atom ids.",
        cmd_demo,
    )
    sp.add_argument("--full", action="store_true", help="do not shorten long segments and id lists")
    add_chat_format_argument(sp)
    tokenizer_opt(sp)

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
    sp.add_argument("--table", action="store_true",
                    help="also list the segments, one a line, with their token ids (--vocab / --tokenizer)")
    sp.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                    help="colour TRUSTED_CONTROL (default: auto, when stdout is a terminal)")
    chat_opts(sp)
    tokenizer_opt(sp)

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
    text_opts(sp, "encode")
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
    ids_opts(sp)
    sp.add_argument("--bytes", action="store_true", help="write the raw bytes")
    sp.add_argument("--no-newline", "-n", action="store_true", help="no newline after the text")
    tokenizer_opt(sp)

    sp = add(
        "parse",
        "print the assistant message that generated ids spell, as JSON",
        f"Parse the ids a model generated after {Marker.IM_START}assistant\\n into an\n"
        "OpenAI-style assistant message: role, content, reasoning_content, tool_calls\n"
        "(and invalid_tool_calls / errors when the output was malformed or cut off).\n"
        f"Structure comes only from atom ids: {Marker.THINK} spelled by ordinary BPE ids is\n"
        "text. Ids as for `decode`. --prompt FILE is the chat request the ids answer\n"
        "(as for `render`; rendered with its generation prompt): it gives the chat\n"
        f"format, the tools that type the arguments, and whether {Marker.THINK} is open.",
        cmd_parse,
    )
    ids_opts(sp)
    sp.add_argument("--prompt", metavar="FILE|-", help="the chat request the ids answer (JSON)")
    sp.add_argument("--tools", metavar="FILE|-",
                    help="a JSON list of tool schemas that type the arguments (default: the prompt's)")
    add_chat_format_argument(sp)
    sp.add_argument("--in-reasoning", action="store_true",
                    help=f"the prompt already opened {Marker.THINK}: the ids start inside reasoning")
    sp.add_argument("--calls-in-reasoning", choices=("text", "call"), default="text",
                    help=f"a {Marker.TOOL_CALL} before {Marker.THINK_END}: kept as reasoning text "
                         "(default) or parsed as a call")
    sp.add_argument("--indent", type=int, default=None, metavar="N", help="indent the JSON by N spaces")
    tokenizer_opt(sp)

    sp = add(
        "count",
        "print the number of tokens of text (or of a chat request with --chat)",
        "Print the number of tokens. Input as for `encode`.\n\nChat input: " + CHAT_INPUT_HELP + ".",
        cmd_count,
    )
    text_opts(sp, "count")
    chat_opts(sp)
    tokenizer_opt(sp)

    sp = add(
        "batch",
        "tokenize a JSONL or Parquet file of records into Parquet or JSONL",
        "Tokenize every record of IN into OUT.\n\n"
        "IN: JSONL (.jsonl, .ndjson, .json, optionally .gz; - for stdin), one record a\n"
        'line: {"text": "..."} or a chat request {"messages": [...], "tools": [...],\n'
        '"add_generation_prompt": bool, "enable_thinking": bool, "preserve_thinking": bool,\n'
        '"reasoning_effort": str, "chat_format": F} (or a bare list of messages); other\n'
        "keys are ignored, blank lines skipped. A record whose \"chat_format\" is not the\n"
        "--chat-format, or that sets an option its format lacks, is a failed record.\n"
        "Or Parquet (.parquet): a 'text' column, or a 'messages' column (JSON strings or\n"
        "list<struct>), with optional columns named after the other request keys.\n\n"
        "OUT: Parquet (columns index int64 = 0-based record index, ids list<int32>,\n"
        'length int32) or JSONL ({"index": i, "ids": [...], "length": n} a line),\n'
        "by extension or --format. --masks adds assistant_mask and message_index;\n"
        "--keep-columns the input's other fields (JSONL into Parquet: each field's\n"
        "type is the one of the first chunk). OUT is written to a temporary file beside it and\n"
        "renamed at the end: on --on-error stop, Ctrl-C, SIGTERM or SIGHUP no OUT appears (an\n"
        "existing OUT is left as it was) and the temporary file is removed. OUT and the\n"
        "errors file must be regular files, new files, or symbolic links to one (the file\n"
        "linked to is replaced, the link stays): a FIFO, a device (/dev/null, /dev/stdout),\n"
        "a socket or a directory is refused before any work (exit 2), since the rename\n"
        "would replace it. If either cannot be written (full disk, file-size limit), exit\n"
        "4 and neither is left.\n\n"
        "Records are processed in chunks: chats are rendered in Python, then chunks\n"
        "are encoded with encode_batch / encode_chats on --threads native threads.\n"
        "A bad record (invalid JSON, wrong type, rejected chat) is reported with its\n"
        "line number. --on-error stop (default) stops with exit code 3; --on-error\n"
        "skip writes it to the errors file (JSONL: line, index, error, message; line\n"
        "is null for Parquet input; default OUT.errors.jsonl) and goes on, exiting\n"
        "with 1 if any failed. A summary (records ok/failed, tokens, MB, seconds,\n"
        "throughput) goes to stderr; a tqdm progress bar too when stderr is a terminal.",
        _cmd_batch,
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
    # 8 MiB: a chunk is read, parsed, encoded and written while the next one is
    # encoded; buffers of this size are also reused by the allocator, where
    # 32 MiB ones came fresh from the kernel (zeroed) every time
    sp.add_argument("--chunk-bytes", type=_positive_int, default=8 * 1024 * 1024, metavar="B",
                    help=argparse.SUPPRESS)
    sp.add_argument("--on-error", choices=("stop", "skip"), default="stop",
                    help="stop at the first bad record (default, exit 3, nothing written) or skip it")
    sp.add_argument("--errors", metavar="PATH",
                    help="errors file for skipped records (default with skip: OUT.errors.jsonl)")
    sp.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                    help="tqdm progress bar on stderr (default: auto, when stderr is a terminal)")
    sp.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary")
    sp.add_argument("--engine", choices=("local", "ray"), default="local",
                    help="local threads (default) or a Ray cluster (the ray extra): IN may then be a "
                         "directory of Parquet shards; --threads is per actor (default 1), one actor per "
                         "--threads CPUs of the cluster")
    sp.add_argument("--address", metavar="ADDR",
                    help="with --engine ray: the cluster to use (default: RAY_ADDRESS, else a local one it starts)")
    sp.add_argument("--masks", action="store_true",
                    help="add assistant_mask (list<bool>) and message_index (list<int32>) columns, token for "
                         "token as encode_chat(..., return_masks=True): what to train on")
    sp.add_argument("--keep-columns", action="store_true",
                    help="carry every other field of the input records (JSONL keys, Parquet columns) into OUT")
    add_chat_format_argument(sp)
    tokenizer_opt(sp)

    sp = add("gate", "model-free gate: check a tokenizer and the renderer before serving",
             gate.GATE_HELP, gate.cmd_gate)
    gate.add_arguments(sp)
    return p


def _cmd_batch(args) -> int:
    if args.engine == "local":
        if args.address:
            raise UsageError("--address is for --engine ray")
        return cmd_batch(args)
    try:
        from .ray_engine import RayEngine
    except ImportError:
        raise UsageError(f"--engine ray needs ray: {RAY_EXTRA_HINT}") from None
    return cmd_batch(args, engine=RayEngine)


def _version() -> str:
    from .. import __version__

    return __version__


def main(argv=None) -> int:
    parser = build_parser()
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
    except KeyboardInterrupt:
        print(f"qwen4exp {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
