# Stub for the compiled module qwen4exp._native._jsonl (pyx/_jsonl.pyx): JSONL line scanning and writing.
from typing import Any

import numpy as np
from numpy.typing import NDArray

from typing_extensions import Buffer

def scan_lines(
    buf: Buffer, max_records: int, max_bytes: int, eof: bool
) -> tuple[int, NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_], int]:
    """(end, starts, ends, line numbers, slow, longest) of buf's records."""

def gather_lines(buf: Buffer, starts: NDArray[np.int64], ends: NDArray[np.int64]) -> bytes:
    """The lines buf[starts[k]:ends[k]] joined, each followed by a newline."""

def write_jsonl_rows(
    f: Any,
    index: NDArray[np.int64],
    offsets: NDArray[np.int32],
    values: NDArray[np.int32],
    suffixes: list[bytes] | None = None,
) -> int:
    """Write `{"index":I,"ids":[...],"length":N}` lines, one per row, to f; the bytes written."""
