# Stub for the compiled module qwen4exp._native._geometry (pyx/_geometry.pyx, pyx/_geometry.pxd).
import enum

class GeoCode(enum.IntFlag):
    """Why a segmented stream's geometry is wrong (a Cython cpdef enum)."""

    GEO_OK = 0
    GEO_BAD_UTF8 = 1
    GEO_NO_SEGMENTS = 2
    GEO_EMPTY = 3
    GEO_GAP = 4
    GEO_OVERLAP = 5
    GEO_PAST_END = 6
    GEO_SHORT = 7
    GEO_BAD_KIND = 8
    GEO_UNMERGED = 9
    GEO_SPLIT_CHAR = 10


def utf8_simd_level(want: int = ...) -> int: ...
def utf8_checks(data: bytes) -> tuple[int, int]: ...
