# Stub for the compiled module qwen4exp._native._stream (pyx/_stream.pyx): streaming
# decode and the completion parser's per-id state machine.
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from typing_extensions import Self

from qwen4exp.shapes import OpenAIDelta, ParsedCompletion

#: What each structural atom does to the parser: action name -> code.
ATOM_ACTIONS: dict[str, int]

class Delta:
    """New output of one channel (docs/FORMAT.md, section 11)."""

    @property
    def kind(self) -> str: ...  # "reasoning", "content" or "tool_call"
    @property
    def text(self) -> str: ...
    @property
    def index(self) -> int | None: ...  # the tool call's place for "tool_call"
    @property
    def name(self) -> str | None: ...  # a call's first delta: the function name
    @property
    def call_id(self) -> str | None: ...  # a call's first delta: its id
    def __init__(
        self, kind: str, text: str, index: int | None = None, *, name: str | None = None, call_id: str | None = None
    ) -> None: ...
    def __iter__(self) -> Any: ...  # (kind, text, index)
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def openai(self) -> OpenAIDelta: ...

class Utf8Stream:
    """Incremental UTF-8 decoding that holds only bytes that can still complete."""

    def decode(self, data: bytes) -> str: ...
    def flush(self) -> str: ...

class DecodeStreamCore(Utf8Stream):
    def __init__(self, table: list[bytes | None]) -> None: ...
    def step(self, id: int) -> str: ...

# What feed() accepts: one id, a sequence of ids or a 1-D integer array.
_Ids = int | Iterable[int] | NDArray[np.integer[Any]]

class ParserCore:
    _where: str  # names the caller in errors
    def __init__(
        self,
        tables: Any,
        actions: dict[int, int],
        decode_run: Callable[[NDArray[np.int32]], tuple[bytes | None, int]],
        decode_text: Callable[[list[int]], str],
        open_call: Callable[[int, int], Any],
        in_reasoning: bool,
        lead: int,
        first_call_newlines: int,
        reasoning_calls: bool,
    ) -> None: ...
    @property
    def scanned(self) -> int: ...
    def feed(self, ids: _Ids) -> list[Delta]: ...
    def finish(self) -> ParsedCompletion: ...
    def written_bytes(self) -> bytes: ...  # the ids fed up to the message's end, atoms spelled
    # hooks for a subclass: finish() calls _finish_message once; _report adds an error
    def _finish_message(self, msg: dict[str, Any], position: int) -> None: ...
    def _report(self, position: int, message: str, text: str) -> None: ...
    def __copy__(self) -> Self: ...
    def __deepcopy__(self, memo: Any) -> Self: ...
