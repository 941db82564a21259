# Stub for the compiled module qwen4exp._native._normalize (pyx/_normalize.pyx): NFC with
# the tables of tokenizers 0.22.1's NFC normalizer.
import numpy as np
from numpy.typing import NDArray

def nfc(s: str) -> str:
    """NFC of s, as tokenizers' NFC normalizer makes it."""

def is_nfc(s: str) -> bool:
    """Whether s certainly is NFC already (the quick check)."""

def stable_at(data: bytes, offsets: NDArray[np.int64]) -> NDArray[np.bool_]:
    """For each byte offset of UTF-8 data, whether NFC is stable there."""
