# cython: language_level=3
"""Strict UTF-8 validation and segment geometry checks (docs/FORMAT.md, "Segment geometry")."""
from libc.stdint cimport int8_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy


cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* The end of the run of ASCII bytes from i: 32 bytes at a time (SSE2),
       then a word, then a byte at a time. */
    static inline Py_ssize_t q4_ascii_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    #if defined(__SSE2__)
        while (i + 32 <= n) {
            __m128i a = _mm_loadu_si128((const __m128i *) (s + i));
            __m128i b = _mm_loadu_si128((const __m128i *) (s + i + 16));
            if (_mm_movemask_epi8(_mm_or_si128(a, b)))
                break;
            i += 32;
        }
    #endif
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        while (i < n && s[i] < 0x80)
            i++;
        return i;
    }
    """
    Py_ssize_t _ascii_end "q4_ascii_end" (const uint8_t *s, Py_ssize_t i, Py_ssize_t n) nogil


cdef Py_ssize_t utf8_invalid_at(const uint8_t *s, Py_ssize_t n) noexcept nogil:
    """Offset of the first byte that starts no valid UTF-8 sequence, or -1.

    Rejects overlong forms, surrogates (U+D800..U+DFFF) and values past
    U+10FFFF, as Python's strict codec does.
    """
    cdef Py_ssize_t i = 0
    cdef uint8_t b, b1
    while i < n:
        b = s[i]
        if b < 0x80:
            i = _ascii_end(s, i + 1, n)
        elif b < 0xC2:
            return i
        elif b < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return i
            i += 2
        elif b < 0xF0:
            if i + 2 >= n:
                return i
            b1 = s[i + 1]
            if (b1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return i
            if (b == 0xE0 and b1 < 0xA0) or (b == 0xED and b1 >= 0xA0):
                return i
            i += 3
        elif b < 0xF5:
            if i + 3 >= n:
                return i
            b1 = s[i + 1]
            if (b1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return i
            if (b == 0xF0 and b1 < 0x90) or (b == 0xF4 and b1 >= 0x90):
                return i
            i += 4
        else:
            return i
    return -1


cdef inline int fail(GeoError *err, GeoCode code, Py_ssize_t segment, Py_ssize_t offset) noexcept nogil:
    err.code = code
    err.segment = segment
    err.offset = offset
    return -1


cdef int check_geometry(const uint8_t *data, Py_ssize_t n, const int64_t *starts,
                        const int64_t *ends, const int8_t *kinds, Py_ssize_t first,
                        Py_ssize_t m, GeoError *err) noexcept nogil:
    """0 if segments first..m-1 tile data[starts[first]:n] exactly, well formed;
    else -1 with err set. Segments before `first` were checked by an earlier
    call over the same bytes (an incremental encoder's reused prefix); with
    first == 0 the whole stream is checked.

    Geometry is checked before the bytes, so the error names the first
    structural fault; UTF-8 validity of the checked bytes comes last.
    """
    cdef Py_ssize_t k, bad, origin
    cdef int64_t prev_end = 0
    err.code = GEO_OK
    err.segment = -1
    err.offset = 0
    if m == 0 and n > 0:
        return fail(err, GEO_NO_SEGMENTS, -1, 0)
    if first > 0:
        prev_end = starts[first] if first < m else n
        if prev_end < 0 or prev_end > n:
            return fail(err, GEO_PAST_END, first, prev_end)
    origin = prev_end
    for k in range(first, m):
        if kinds[k] != 0 and kinds[k] != 1:
            return fail(err, GEO_BAD_KIND, k, starts[k])
        if starts[k] > prev_end:
            return fail(err, GEO_GAP, k, prev_end)
        if starts[k] < prev_end:
            return fail(err, GEO_OVERLAP, k, starts[k])
        if ends[k] <= starts[k]:
            return fail(err, GEO_EMPTY, k, starts[k])
        if ends[k] > n:
            return fail(err, GEO_PAST_END, k, ends[k])
        if k > 0 and kinds[k] == kinds[k - 1]:
            return fail(err, GEO_UNMERGED, k, starts[k])
        if starts[k] < n and (data[starts[k]] & 0xC0) == 0x80:
            return fail(err, GEO_SPLIT_CHAR, k, starts[k])
        prev_end = ends[k]
    if prev_end < n:
        return fail(err, GEO_SHORT, m - 1, prev_end)
    bad = utf8_invalid_at(data + origin, n - origin)
    if bad >= 0:
        return fail(err, GEO_BAD_UTF8, -1, origin + bad)
    return 0
