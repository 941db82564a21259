"""What the `qwen4exp` commands share: exit codes, the errors the CLI reports
and the tokenizer option. Importing it imports neither pyarrow nor tqdm.
"""

from __future__ import annotations

from ..errors import Qwen4ExpError
from ..tokenizer import Tokenizer

EXIT_OK = 0
EXIT_RECORDS_FAILED = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
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
