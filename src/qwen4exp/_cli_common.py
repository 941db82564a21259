"""What the `qwen4exp` commands share: exit codes, the errors the CLI reports,
chat-request decoding and the tokenizer option.

Used by `cli` (argument parsing and the small commands) and `batch`; importing it
imports neither pyarrow nor tqdm.
"""

from __future__ import annotations

import sys

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


class RecordError(Exception):
    """A batch record of the wrong shape or type (reported as `RecordError`)."""


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
