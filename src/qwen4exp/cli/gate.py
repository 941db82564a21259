"""`qwen4exp gate`: the command over the model-free checks of `qwen4exp.runtimes.gate`.

Exit codes: 0 all checks pass, 1 a check failed, 2 usage, 3 unreadable files
(not a regular file, not strict JSON, not a tokenizer.json), 4 the report could
not be written.
"""

from __future__ import annotations

import json
import sys

from qwen4exp.vocab.vocabulary import DEFAULT_VOCABULARY, VOCABULARIES
from qwen4exp.errors import ChatFormatError, Qwen4ExpError
from qwen4exp.formats import chat_formats
from qwen4exp.runtimes.gate import GateInputError, gate_tokenizer_file, run_gate
from qwen4exp.encode.tokenizer import Tokenizer
from qwen4exp.cli.common import EXIT_INPUT, EXIT_OK, EXIT_USAGE, format_vocabulary, write_stdout

EXIT_FAILED = 1  # a check failed

GATE_HELP = (
    "Model-free gate: check a tokenizer and the renderer before serving them.\n"
    f"The chat checks run in every chat format of the vocabulary checked\n"
    f"({', '.join(chat_formats())}: each of its own vocabulary), or in those --chat-format names.\n"
    "Over the packaged chat oracle (accepted and rejected requests: literal controls\n"
    "in content, tool names, arguments and schemas; text spelling media tokens;\n"
    "structured media, second system, unknown roles, malformed arguments) it checks\n"
    "that every caller byte is DATA, every template marker yields exactly its atom\n"
    "id, and rejected requests leave a prior transcript and token buffer unchanged;\n"
    "and that the vocabulary is sound (256 byte tokens, atoms one id each outside\n"
    "the BPE range and unreachable from DATA, decode round trip)."
)


def add_arguments(sp) -> None:
    which = sp.add_mutually_exclusive_group()
    which.add_argument("--vocab", metavar="NAME",
                       help=f"a bundled vocabulary ({', '.join(VOCABULARIES)}; default {DEFAULT_VOCABULARY})")
    which.add_argument("--tokenizer", metavar="PATH", help="a tokenizer.json, or a directory holding one")
    sp.add_argument("--chat-format", metavar="F", choices=chat_formats(), action="append", default=None,
                    help="run the chat checks in format F (repeatable; default: every format of the "
                         "vocabulary; without --vocab, the vocabulary of F's models)")
    sp.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_gate(args) -> int:
    formats = tuple(dict.fromkeys(args.chat_format)) if args.chat_format else None
    try:
        if args.tokenizer:
            report = gate_tokenizer_file(args.tokenizer, formats)
        else:
            try:
                tok = Tokenizer(args.vocab) if args.vocab else (
                    Tokenizer(format_vocabulary(formats[0])) if formats else Tokenizer())
            except Qwen4ExpError as exc:
                print(f"qwen4exp gate: error: {exc}", file=sys.stderr)
                return EXIT_USAGE
            report = run_gate(tok, subject=f"bundled vocabulary {tok.vocabulary}", formats=formats)
    except GateInputError as exc:
        print(f"qwen4exp gate: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ChatFormatError as exc:  # --chat-format of another vocabulary
        print(f"qwen4exp gate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    write_stdout((json.dumps(report.to_json(), indent=1) if args.json else report.format()) + "\n")
    return EXIT_OK if report.ok else EXIT_FAILED
