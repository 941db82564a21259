"""TokenBuffer: the transactional output of `Tokenizer.encode_segments_into`."""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["TokenBuffer"]


class TokenBuffer:
    """A growable int32 token buffer that only changes when a call fully succeeds.

    `.array` is a read-only view of the committed tokens. One buffer may be
    shared between threads: each append (and clear) is atomic, so appends from
    several threads are all kept, each one whole, in some order.
    `copy.copy`, `copy.deepcopy` and pickling give an independent buffer with
    the same committed tokens (its own storage and lock): appending to either
    never changes the other.
    """

    __slots__ = ("_buf", "_len", "_lock")

    def __init__(self, capacity: int = 1024) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 0:
            raise ValueError(f"capacity must be a non-negative int, not {capacity!r}")
        self._buf = np.empty(max(int(capacity), 16), dtype=np.int32)
        self._len = 0
        self._lock = threading.Lock()

    @property
    def array(self) -> np.ndarray:
        with self._lock:
            view = self._buf[: self._len]
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        return self._len

    def clear(self) -> None:
        with self._lock:
            self._len = 0

    def tolist(self) -> list[int]:
        with self._lock:
            return self._buf[: self._len].tolist()

    def _append(self, ids: np.ndarray) -> None:
        """Commit ids at the end. Anything that can fail happens before the commit."""
        with self._lock:
            need = self._len + len(ids)
            buf = self._buf
            if need > len(buf):
                buf = np.empty(max(need, 2 * len(buf)), dtype=np.int32)  # may raise MemoryError
                buf[: self._len] = self._buf[: self._len]
            buf[self._len : need] = ids
            self._buf, self._len = buf, need

    def __copy__(self) -> "TokenBuffer":
        with self._lock:
            committed = self._buf[: self._len].copy()
        return TokenBuffer._of(committed)

    def __deepcopy__(self, memo) -> "TokenBuffer":
        return self.__copy__()  # int32 values: nothing deeper to copy

    def __reduce__(self):
        with self._lock:
            committed = self._buf[: self._len].copy()
        return TokenBuffer._of, (committed,)

    @staticmethod
    def _of(committed: np.ndarray) -> "TokenBuffer":
        """A new buffer whose committed tokens are `committed` (its own copy)."""
        committed = np.asarray(committed, dtype=np.int32)
        buf = TokenBuffer(len(committed))
        buf._append(committed)
        return buf

    def __repr__(self) -> str:
        head = self._buf[: min(self._len, 8)].tolist()
        more = ", ..." if self._len > 8 else ""
        return f"TokenBuffer({self._len} tokens: [{', '.join(map(str, head))}{more}])"
