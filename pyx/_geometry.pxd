# Validation of caller bytes and segment geometry, before any tokenization.
from libc.stdint cimport int8_t, int64_t, uint8_t

cpdef enum GeoCode:
    GEO_OK = 0
    GEO_BAD_UTF8          # bytes are not valid UTF-8 (offset)
    GEO_NO_SEGMENTS       # data is non-empty but there are no segments
    GEO_EMPTY             # a segment with end <= start
    GEO_GAP               # starts after the previous end (or first start > 0)
    GEO_OVERLAP           # starts before the previous end (or first start < 0)
    GEO_PAST_END          # ends past len(data)
    GEO_SHORT             # the last segment ends before len(data)
    GEO_BAD_KIND          # kind is neither DATA nor TRUSTED_CONTROL
    GEO_UNMERGED          # same kind as the previous segment
    GEO_SPLIT_CHAR        # a boundary inside a UTF-8 sequence

cdef struct GeoError:
    GeoCode code
    Py_ssize_t segment      # index of the offending segment (-1: none)
    Py_ssize_t offset       # byte offset concerned

cdef Py_ssize_t utf8_invalid_at(const uint8_t *s, Py_ssize_t n) noexcept nogil
cdef int check_geometry(const uint8_t *data, Py_ssize_t n, const int64_t *starts,
                        const int64_t *ends, const int8_t *kinds, Py_ssize_t m,
                        GeoError *err) noexcept nogil
