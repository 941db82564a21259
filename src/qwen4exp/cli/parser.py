"""The `qwen4exp` command line's arguments: the parser of every command, its
help texts and the exit codes they document. The commands themselves are in
`main` (and `batch`, `gate`), which hands them to `build_parser`."""

from __future__ import annotations

import argparse
from typing import Callable, Mapping

from qwen4exp.formats import default_format
from qwen4exp.markers import Marker
from qwen4exp.cli import folder, gate
from qwen4exp.cli.common import add_chat_format_argument, add_tokenizer_arguments

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
    "folder": folder.EPILOG,
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
    'an option the format lacks is an error; "chat_format" picks the format, and with --chat-format '
    'it must name that one), '
    "or a bare JSON list of messages"
)


# ---------------------------------------------------------------------------
# inputs
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


def build_parser(commands: Mapping[str, Callable]) -> argparse.ArgumentParser:
    """The argument parser; `commands` maps each command's name to the function
    that runs it (args -> exit code), which parse_args leaves in `args.func`."""
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

    def add(name, help_, description):
        sp = sub.add_parser(
            name, help=help_, description=description, epilog=COMMAND_EPILOGS[name], formatter_class=_Formatter
        )
        sp.set_defaults(func=commands[name])
        return sp

    tokenizer_opt = add_tokenizer_arguments
    from qwen4exp.cli.sinks import SINKS  # batch's output formats (imported here: the parser of every command is built)

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
    )
    sp.add_argument("--full", action="store_true", help="do not shorten long segments and id lists")
    add_chat_format_argument(sp, f"the vocabulary's format ({default_format().name} without --vocab)")
    tokenizer_opt(sp)

    sp = add(
        "render",
        "show a chat request's rendered bytes and segments",
        "Render a chat request and show its bytes with their segments. On a terminal\n"
        "TRUSTED_CONTROL segments are coloured; otherwise they are wrapped in \u27e6...\u27e7\n"
        "(the brackets are not part of the bytes). --json prints the exact form:\n"
        '{"text": ..., "segments": [[start, end, "DATA"|"TRUSTED_CONTROL"], ...]}\n'
        "with byte offsets into the UTF-8 text.\n\nInput: " + CHAT_INPUT_HELP + ".",
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
    )
    ids_opts(sp)
    sp.add_argument("--bytes", action="store_true", help="write the raw bytes")
    sp.add_argument("--no-newline", "-n", action="store_true", help="no newline after the text")
    tokenizer_opt(sp, with_format=False)  # decode renders nothing: no --chat-format

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
    )
    ids_opts(sp)
    sp.add_argument("--prompt", metavar="FILE|-", help="the chat request the ids answer (JSON)")
    sp.add_argument("--tools", metavar="FILE|-",
                    help="a JSON list of tool schemas that type the arguments (default: the prompt's)")
    add_chat_format_argument(sp, "the --prompt's format, else the vocabulary's format "
                                 f"({default_format().name} without --vocab)")
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
        "OUT: Parquet (.parquet; columns index int64 = 0-based record index, ids\n"
        'list<int32>, length int32) or JSONL (.jsonl, gzip-compressed as .jsonl.gz;\n'
        '{"index": i, "ids": [...], "length": n} a line), by extension or --format: the\n'
        "columns of qwen4exp.runtimes.ray.tokenize_dataset. --masks adds assistant_mask\n"
        "(list<bool>) and message_index (list<int32>); --keep-columns the input's other\n"
        "fields (JSONL into Parquet: each field's type is the one of the first chunk; an\n"
        "integer outside int64 or an object with no keys is an input error, exit 3;\n"
        "Parquet into JSONL: a NaN or infinite float is written as null, and the summary\n"
        "counts them). OUT is written to a temporary file beside it and\n"
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
    )
    sp.add_argument("input", metavar="IN", help="input JSONL or Parquet file (- for JSONL on stdin)")
    sp.add_argument("output", metavar="OUT", help="output .parquet or .jsonl file")
    sp.add_argument("--format", choices=tuple(SINKS), help="output format (default: from OUT's extension)")
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
                    help="input bytes per chunk (default: 8 MiB); the run's memory is about "
                         "190 MiB + 10 x B, whatever the input's length")
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
    add_chat_format_argument(sp, f"the vocabulary's format ({default_format().name} without --vocab); every "
                                 'record is rendered in it, and one whose "chat_format" names another fails')
    tokenizer_opt(sp)

    sp = add("gate", "model-free gate: check a tokenizer and the renderer before serving",
             gate.GATE_HELP)
    gate.add_arguments(sp)

    sp = add("folder", "write a tiny model folder (no weights) to try vLLM or transformers",
             folder.FOLDER_HELP)
    folder.add_arguments(sp)
    return p


def _version() -> str:
    from qwen4exp import __version__

    return __version__
