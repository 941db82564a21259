"""What the `qwen4exp` commands share: exit codes, the errors the CLI reports,
chat-request decoding and the tokenizer option.

Used by `cli` (argument parsing and the small commands) and `batch`; importing it
imports neither pyarrow nor tqdm.
"""

from __future__ import annotations

import json
import math
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


class JsonError(RecordError):
    """Input that is not strict JSON (reported as `JSONDecodeError`)."""


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:24]} is out of range")
    return value


def _unique_keys(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup[:40]!r} in an object")
    return obj


def loads_json(text):
    """Strict JSON, the one decoder of every command that reads JSON: no NaN or
    Infinity, no out-of-range numbers, no duplicate keys (parsers disagree on
    which one wins), and a one-line JsonError for anything else that fails
    (bad syntax, integers past Python's digit limit, nesting too deep)."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                          object_pairs_hook=_unique_keys)
    except RecursionError:
        raise JsonError("nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, the int digit limit, the hooks above
        raise JsonError(str(exc).split("; use sys.set_int_max_str_digits")[0]) from None


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
