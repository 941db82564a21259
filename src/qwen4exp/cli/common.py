"""What the `qwen4exp` commands share: exit codes, the errors the CLI reports,
reading input files and writing stdout, and the tokenizer option. Importing
it imports neither pyarrow nor tqdm.
"""

from __future__ import annotations

import os
import sys

from qwen4exp.vocab.files import NotRegularFileError, read_regular_file
from qwen4exp.errors import Qwen4ExpError
from qwen4exp.encode.tokenizer import Tokenizer

EXIT_OK = 0
EXIT_RECORDS_FAILED = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_OUTPUT = 4  # the output could not be written: stdout (closed pipe, full disk, I/O error), OUT, the errors file
EXIT_INTERRUPTED = 130


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


class OutputError(CliError):
    code = EXIT_OUTPUT


def write_stdout(data: str | bytes) -> None:
    """Write to stdout; a failure (a closed pipe, a full disk, an I/O error) is an OutputError."""
    try:
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
    except OSError as exc:
        raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None


def flush_stdout() -> None:
    """Flush stdout (buffered writes fail only here on a full disk); OutputError if it cannot."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        raise OutputError(f"cannot write the output: {exc.strerror or exc}") from None


def silence_stdout() -> None:
    """Point stdout at /dev/null after a failed write, so that the interpreter's
    own flush at exit does not fail again and print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def read_input(path: str, what: str = "") -> bytes:
    """The bytes of an input file argument ("-": stdin). It must be a regular
    file: a FIFO, a device, a socket or a directory is refused (InputError)
    rather than blocked on or read forever; pipes come through stdin."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return read_regular_file(path)
    except NotRegularFileError as exc:
        raise InputError(f"{what}{exc}: give a file, or - to read a pipe on stdin") from None
    except OSError as exc:
        raise InputError(f"cannot read {what}{path}: {exc.strerror or exc}") from None


# How to get the optional dependencies (qwen4exp installs from a clone, not from PyPI).
CLI_EXTRA_HINT = 'pip install pyarrow tqdm (or, in a clone of qwen4exp: pip install ".[cli]")'
RAY_EXTRA_HINT = 'pip install "ray[data]" pyarrow (or, in a clone of qwen4exp: pip install ".[ray]")'

def format_vocabulary(chat_format: str) -> str:
    """The vocabulary of a chat format's models: the default of --vocab when
    --chat-format is given (README, "Formats and vocabularies")."""
    from qwen4exp.formats import chat_format as format_named

    return format_named(chat_format).vocabulary


def need_module(module: str):
    """Import an optional dependency of the CLI, or explain how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"this command needs {module.split('.')[0]}, which is not installed: {CLI_EXTRA_HINT}"
        ) from None


def add_tokenizer_arguments(sp, with_format: bool = True) -> None:
    """--vocab NAME | --tokenizer PATH, for a command that tokenizes;
    `with_format`: the command has --chat-format (and reads chat requests),
    whose models' vocabulary is the default."""
    from qwen4exp.vocab.vocabulary import ALIASES, DEFAULT_VOCABULARY, VOCABULARIES

    which = sp.add_mutually_exclusive_group()
    names = ", ".join([*VOCABULARIES, *(f"{a} (= {b})" for a, b in ALIASES.items())])
    default = ("the vocabulary of the chat format's models (--chat-format, else the request's "
               f'"chat_format"), else {DEFAULT_VOCABULARY}' if with_format else DEFAULT_VOCABULARY)
    which.add_argument("--vocab", metavar="NAME", help=f"a bundled vocabulary: {names} (default: {default})")
    which.add_argument("--tokenizer", metavar="PATH",
                       help="a Qwen-family tokenizer.json, or a model folder (its chat template picks "
                            "the chat format: Tokenizer.from_pretrained)")


def add_chat_format_argument(sp, default: str | None = None) -> None:
    """--chat-format F, for a command that renders chats; `default` says what
    the command does without it."""
    from qwen4exp.formats import chat_formats, default_format

    if default is None:
        default = f'the request\'s "chat_format", else the vocabulary\'s format ({default_format().name})'

    sp.add_argument("--chat-format", metavar="F", choices=chat_formats(), default=None,
                    help=f"the chat format to render: {', '.join(chat_formats())} (default: {default})")


def _load_path(path: str) -> Tokenizer:
    """--tokenizer PATH: a model folder with a chat template is loaded bound to
    its format (Tokenizer.from_pretrained); a tokenizer.json, or a folder with
    no template, as the file alone (Tokenizer.from_file)."""
    import os

    from qwen4exp.vocab.pretrained import read_chat_template

    if os.path.isdir(path) and read_chat_template(path) is not None:
        return Tokenizer.from_pretrained(path)
    return Tokenizer.from_file(path)


def tokenizer_of(args=None, chat_format: str | None = None):
    """The tokenizer a command uses: --tokenizer PATH, --vocab NAME, else the
    vocabulary of the chat format's models: `chat_format` (the format a
    request rendered in), else --chat-format (qwen3 without either). A
    --tokenizer or --vocab that is not that format's vocabulary is refused:
    UsageError when --chat-format named the format, InputError when the
    request did."""
    fmt = chat_format or getattr(args, "chat_format", None)
    path, name = getattr(args, "tokenizer", None), getattr(args, "vocab", None)
    tok = getattr(args, "_tokenizer", None)  # --tokenizer / --vocab, loaded once per command
    if tok is not None:
        pass
    elif path:
        try:
            tok = args._tokenizer = _load_path(path)
        except (OSError, Qwen4ExpError) as exc:
            raise UsageError(f"--tokenizer {path}: {exc}") from None
    elif name is not None:
        try:
            tok = args._tokenizer = Tokenizer(name)
        except Qwen4ExpError as exc:
            raise UsageError(f"--vocab: {exc}") from None
    else:
        return Tokenizer(format_vocabulary(fmt)) if fmt is not None else Tokenizer()
    if fmt is not None and fmt != tok.chat_format and fmt not in tok.chat_formats():
        given = f"--tokenizer {path}" if path else f"--vocab {name}"
        named_by_option = fmt == getattr(args, "chat_format", None)
        source = f"--chat-format {fmt}" if named_by_option else f'the request\'s "chat_format" {fmt!r}'
        error = UsageError if named_by_option else InputError
        raise error(f"{source} is a format of the {format_vocabulary(fmt)} vocabulary's models, and {given} is "
                    f"not that vocabulary (its formats: {', '.join(tok.chat_formats()) or 'none'}): its ids "
                    f"would be wrong for the model; leave out {given}, or name one of its formats")
    return tok


def fill_render_defaults(args, options: dict) -> dict:
    """Give the options a request left out the defaults of the --tokenizer
    model folder (Tokenizer.render_defaults: the Qwen3.5 small models' template
    turns thinking off), as `Tokenizer.from_pretrained(folder).render_chat`
    does; a request's own values and the command line's flags win. `options`
    is filled in place and returned."""
    if getattr(args, "tokenizer", None) or getattr(args, "vocab", None):
        for key, value in tokenizer_of(args).render_defaults.items():
            if options.get(key) is None:
                options[key] = value
    return options


def other_vocabulary_hint(ids, tok, args, with_format: bool, chat_format: str | None = None) -> str:
    """When `ids` hold an id past `tok`'s vocabulary: words to add to the
    error that say which option reads them (the bundled vocabularies that
    have every one of them, and the chat formats whose models use those),
    else ""."""
    from qwen4exp.encode.tokenizer import vocabularies

    top = max((int(i) for i in ids), default=-1)
    if top < tok.vocab_size:
        return ""
    if getattr(args, "tokenizer", None):
        used = f"--tokenizer {args.tokenizer}"
    elif getattr(args, "vocab", None):
        used = f"--vocab {args.vocab}"
    else:
        fmt = getattr(args, "chat_format", None)
        used = (f"{tok.vocabulary} (the vocabulary of --chat-format {fmt})" if fmt
                else f"{tok.vocabulary} (the vocabulary of the prompt's format {chat_format})" if chat_format
                else f"{tok.vocabulary} (the default vocabulary)")
    fits = [name for name in vocabularies() if Tokenizer(name).vocab_size > top]
    if not fits:
        return (f"; id {top} is past every bundled vocabulary: --tokenizer PATH reads the model's own "
                "tokenizer.json")
    how = " or ".join(f"--vocab {name}" for name in fits)
    from qwen4exp.formats import chat_formats

    formats = [f for f in chat_formats() if format_vocabulary(f) in fits] if with_format else []
    if formats:
        how += f" (or --chat-format {' / '.join(formats)}, whose models use it)"
    return f"; these ids are not of {used}: read them with {how}"
