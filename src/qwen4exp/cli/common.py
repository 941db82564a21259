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


def need_module(module: str):
    """Import an optional dependency of the CLI, or explain how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UsageError(
            f"this command needs {module.split('.')[0]}, which is not installed: "
            'pip install "qwen4exp[cli]"'
        ) from None


def tokenizer_of(args=None):
    """The tokenizer a command uses: --tokenizer PATH, else the bundled Qwen3."""
    path = getattr(args, "tokenizer", None)
    if path:
        try:
            return Tokenizer.from_file(path)
        except (OSError, Qwen4ExpError) as exc:
            raise UsageError(f"--tokenizer {path}: {exc}") from None
    return Tokenizer()
