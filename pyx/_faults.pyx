# cython: language_level=3
"""The native result codes (declared in _faults.pxd) as Python constants."""
