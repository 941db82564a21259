# Stub for the compiled module qwen4exp._native._faults (pyx/_faults.pyx, pyx/_faults.pxd).
import enum

class Fault(enum.IntFlag):
    """The native return codes (a Cython cpdef enum)."""

    RC_OK = 0
    RC_NO_MEMORY = -1
    RC_GEOMETRY = -2
    RC_UNKNOWN_CONTROL = -3
    RC_TOO_LARGE = -4
    RC_NO_BYTE_TOKEN = -5

class InitFault(Exception):
    """Building a NativeTokenizer failed: args are (Fault code, detail)."""
