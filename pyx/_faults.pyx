# cython: language_level=3
"""The native result codes (declared in _faults.pxd) as Python constants, and
the plain signal of a failed NativeTokenizer build."""


class InitFault(Exception):
    """Building a NativeTokenizer failed: args are (Fault code, detail). Plain on
    purpose: qwen4exp.errors.init_error makes the exception callers see."""
