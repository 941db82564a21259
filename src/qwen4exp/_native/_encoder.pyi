# Stub for the compiled module qwen4exp._native._encoder (pyx/_encoder.pyx): the native BPE tokenizer.
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

# (Fault code, GeoCode or 0, segment, offset): what qwen4exp.errors.fault_error reads.
_FaultTuple = tuple[int, int, int, int]

class NativeTokenizer:
    """The compiled vocabulary's BPE model, atom table and worker pool."""

    @property
    def n_vocab(self) -> int: ...
    @property
    def cache_size(self) -> int: ...
    @property
    def encode_threads(self) -> int: ...
    @property
    def parts_redone(self) -> int: ...
    @property
    def shared_cache_words(self) -> int: ...
    def __init__(
        self,
        token_bytes: ArrayLike,
        token_offsets: ArrayLike,
        merges: ArrayLike,
        atom_bytes: ArrayLike,
        atom_offsets: ArrayLike,
        atom_ids: ArrayLike,
        cache_size: int = 65536,
        *,
        marks: bool = False,
        ignore_merges: bool = False,
        encode_threads: int = 0,
        self_encoding: ArrayLike | None = None,
        missing_bytes: bool = False,
        digit_runs: bool = False,
        nfc: bool = True,
        byte_level: bool = False,
    ) -> None: ...
    def char_starts(self, piece: bytes | None = None) -> Any: ...
    def shared_cache_published(self) -> tuple[int, int]: ...
    def flush_cache(self) -> None: ...
    def encode(self, text: str) -> list[int]: ...
    def part_bounds(self, data: bytes, count: int) -> list[int]: ...
    def count(self, text: str) -> int: ...
    def encode_split(
        self, data: bytes, ends: NDArray[np.int64], groups: NDArray[np.int64]
    ) -> tuple[NDArray[np.int32], NDArray[np.int64]]: ...
    def encode_segments(
        self, data: bytes, starts: NDArray[np.int64], ends: NDArray[np.int64], kinds: NDArray[np.int8]
    ) -> tuple[NDArray[np.int32], None] | tuple[None, _FaultTuple]: ...
    def encode_bounds(
        self, data: bytes, bounds: tuple[int, ...], first_control: bool, first: int, want_ends: bool
    ) -> tuple[NDArray[np.int32], NDArray[np.int64] | None, None] | tuple[None, None, _FaultTuple]: ...
    def encode_batch(self, texts: list[str], num_threads: int) -> list[list[int]]: ...
    def encode_streams(self, items: list[tuple[Any, ...]], num_threads: int) -> list[NDArray[np.int32] | _FaultTuple]: ...
    def decode_bytes(self, ids: NDArray[np.int32]) -> tuple[bytes, int] | tuple[None, int]: ...
    def token_lengths(self) -> NDArray[np.int32]: ...

def utf8_cached(text: str) -> bytes:
    """text's UTF-8 bytes through the UTF-8 form CPython caches with the str."""

def common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of a and b."""
