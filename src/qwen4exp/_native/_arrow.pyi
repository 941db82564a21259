# Stub for the compiled module qwen4exp._native._arrow (pyx/_arrow.pyx): Arrow string arrays to ids.
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._encoder import NativeTokenizer

# (validity, offsets, data, offset, length, large): an Arrow string array's
# buffers (objects with the buffer protocol; validity or data may be None),
# its slice, and whether its offsets are int64.
_ArrayBuffers = tuple[Any, Any, Any, int, int, bool]
# Per array: its validity bitmap (uint8, None without nulls), int32 offsets and values.
_ListColumn = tuple[NDArray[np.uint8] | None, NDArray[np.int32], NDArray[np.int32]]

class OpenArrays:
    """The arrays' buffers, held open until the object is freed."""

    def __init__(self, arrays: list[_ArrayBuffers]) -> None: ...

def encode_string_arrays(
    tok: NativeTokenizer, arrays: list[_ArrayBuffers], num_threads: int
) -> tuple[list[_ListColumn], None] | tuple[None, tuple[int, int, int]]:
    """(results, None), or (None, (array, row, byte)) for the first row that is not UTF-8."""

def invalid_utf8_rows(arrays: list[_ArrayBuffers]) -> NDArray[np.int64]:
    """The rows (numbered over all the arrays) that are not null and not valid UTF-8."""
