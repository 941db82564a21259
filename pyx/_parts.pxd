# Where encode() may cut a text into parts that encode on their own (see
# _parts.pyx and docs/ARCHITECTURE.md, "Texts across threads").
from libc.stdint cimport int64_t, uint8_t

cdef enum:
    SPLIT_SCAN = 1 << 16    # how far past a target a part boundary is looked for

cdef Py_ssize_t split_points(const uint8_t *s, Py_ssize_t n, Py_ssize_t count, unsigned char letters,
                             int64_t *bounds) noexcept nogil
