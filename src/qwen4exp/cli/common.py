"""What the `qwen4exp` commands share: exit codes, the errors the CLI reports,
reading input files and writing stdout, and the tokenizer option. Importing
it imports neither pyarrow nor tqdm.
"""

from __future__ import annotations

import os
import sys

from .._files import NotRegularFileError, read_regular_file
from ..errors import Qwen4ExpError
from ..tokenizer import Tokenizer

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

# The vocabulary of each chat format's models: the default of --vocab when
# --chat-format is given (README, "Formats and vocabularies").
FORMAT_VOCAB = {"qwen3": "qwen3", "qwen3-2507": "qwen3", "qwen3.5": "qwen3.6", "qwen3.6": "qwen3.6",
                "qwen3.8": "qwen3.6"}


def need_module(module: str):
    """Import an optional dependency of the CLI, or explain how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"this command needs {module.split('.')[0]}, which is not installed: {CLI_EXTRA_HINT}"
        ) from None


def add_tokenizer_arguments(sp) -> None:
    """--vocab NAME | --tokenizer PATH, for a command that tokenizes."""
    from .._vocab_compile import ALIASES, BUNDLED

    which = sp.add_mutually_exclusive_group()
    names = ", ".join([*BUNDLED, *(f"{a} (= {b})" for a, b in ALIASES.items())])
    which.add_argument("--vocab", metavar="NAME",
                       help=f"a bundled vocabulary: {names} (default: the --chat-format's models' "
                            "vocabulary, else qwen3)")
    which.add_argument("--tokenizer", metavar="PATH",
                       help="a Qwen-family tokenizer.json, or a directory holding one")


def add_chat_format_argument(sp) -> None:
    """--chat-format F, for a command that renders chats."""
    from ..formats import chat_formats

    sp.add_argument("--chat-format", metavar="F", choices=chat_formats(), default=None,
                    help=f"the chat format to render: {', '.join(chat_formats())} (default: qwen3)")


def chat_format_of(args) -> str:
    return getattr(args, "chat_format", None) or "qwen3"


def tokenizer_of(args=None):
    """The tokenizer a command uses: --tokenizer PATH, --vocab NAME, else the
    vocabulary of the --chat-format's models (qwen3 without one)."""
    path = getattr(args, "tokenizer", None)
    if path:
        try:
            return Tokenizer.from_file(path)
        except (OSError, Qwen4ExpError) as exc:
            raise UsageError(f"--tokenizer {path}: {exc}") from None
    name = getattr(args, "vocab", None)
    if name is None:
        return Tokenizer(FORMAT_VOCAB.get(chat_format_of(args), "qwen3"))
    try:
        return Tokenizer(name)
    except Qwen4ExpError as exc:
        raise UsageError(f"--vocab: {exc}") from None
