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


cdef extern from *:
    """
    /* Whole-buffer validation, 16 bytes a step, after Keiser and Lemire,
       "Validating UTF-8 in less than one instruction per byte" (2021): each
       byte with the one before it is classified by three 16-entry tables
       (the high nibble of the byte before, its low nibble, the high nibble
       of this byte), whose AND flags every error that two bytes show (a
       missing or stray continuation, overlong 2-, 3- and 4-byte forms,
       surrogates, values past U+10FFFF); a third or fourth byte is required
       where the byte two or three back is a 3- or 4-byte lead, and the one
       bit left is XORed with that requirement. A zero block after the data
       catches a sequence cut off at the end. Needs SSSE3 (pshufb, palignr),
       so it is compiled for it and used only where the CPU has it
       (q4_simd.h). */
    #include <string.h>
    #include "q4_simd.h"
    #if Q4_SIMD_X86
    #define Q4_TOO_SHORT (1 << 0)
    #define Q4_TOO_LONG (1 << 1)
    #define Q4_OVERLONG_3 (1 << 2)
    #define Q4_TOO_LARGE (1 << 3)
    #define Q4_SURROGATE (1 << 4)
    #define Q4_OVERLONG_2 (1 << 5)
    #define Q4_TOO_LARGE_1000 (1 << 6)
    #define Q4_OVERLONG_4 (1 << 6)
    #define Q4_TWO_CONTS (1 << 7)
    #define Q4_CARRY (Q4_TOO_SHORT | Q4_TOO_LONG | Q4_TWO_CONTS)
    #define Q4_LARGE (Q4_CARRY | Q4_TOO_LARGE | Q4_TOO_LARGE_1000)

    __attribute__((target("ssse3")))
    static inline __m128i q4_utf8_block_errors(__m128i input, __m128i prev_input) {
        const __m128i nib = _mm_set1_epi8(0x0F);
        const __m128i byte_1_high_tbl = _mm_setr_epi8(
            Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG,
            Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS,
            Q4_TOO_SHORT | Q4_OVERLONG_2, Q4_TOO_SHORT, Q4_TOO_SHORT | Q4_OVERLONG_3 | Q4_SURROGATE,
            (char) (Q4_TOO_SHORT | Q4_TOO_LARGE | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4));
        const __m128i byte_1_low_tbl = _mm_setr_epi8(
            (char) (Q4_CARRY | Q4_OVERLONG_3 | Q4_OVERLONG_2 | Q4_OVERLONG_4), (char) (Q4_CARRY | Q4_OVERLONG_2),
            (char) Q4_CARRY, (char) Q4_CARRY, (char) (Q4_CARRY | Q4_TOO_LARGE), (char) Q4_LARGE, (char) Q4_LARGE,
            (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE,
            (char) (Q4_LARGE | Q4_SURROGATE), (char) Q4_LARGE, (char) Q4_LARGE);
        const __m128i byte_2_high_tbl = _mm_setr_epi8(
            Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT,
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_OVERLONG_3 | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_OVERLONG_3 | Q4_TOO_LARGE),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_SURROGATE | Q4_TOO_LARGE),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_SURROGATE | Q4_TOO_LARGE),
            Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT);
        __m128i prev1 = _mm_alignr_epi8(input, prev_input, 15);
        __m128i b1h = _mm_shuffle_epi8(byte_1_high_tbl, _mm_and_si128(_mm_srli_epi16(prev1, 4), nib));
        __m128i b1l = _mm_shuffle_epi8(byte_1_low_tbl, _mm_and_si128(prev1, nib));
        __m128i b2h = _mm_shuffle_epi8(byte_2_high_tbl, _mm_and_si128(_mm_srli_epi16(input, 4), nib));
        __m128i special = _mm_and_si128(_mm_and_si128(b1h, b1l), b2h);
        __m128i prev2 = _mm_alignr_epi8(input, prev_input, 14);
        __m128i prev3 = _mm_alignr_epi8(input, prev_input, 13);
        __m128i third = _mm_subs_epu8(prev2, _mm_set1_epi8((char) (0xE0 - 0x80)));
        __m128i fourth = _mm_subs_epu8(prev3, _mm_set1_epi8((char) (0xF0 - 0x80)));
        __m128i must23 = _mm_and_si128(_mm_or_si128(third, fourth), _mm_set1_epi8((char) 0x80));
        return _mm_xor_si128(must23, special);
    }

    __attribute__((target("ssse3")))
    static int q4_utf8_valid_ssse3(const unsigned char *s, Py_ssize_t n) {
        __m128i prev = _mm_setzero_si128(), err = _mm_setzero_si128(), input;
        int prev_ascii = 1;
        unsigned char tail[16];
        Py_ssize_t i = 0;
        for (; i + 16 <= n; i += 16) {
            input = _mm_loadu_si128((const __m128i *) (s + i));
            int ascii = _mm_movemask_epi8(input) == 0;
            if (!(ascii && prev_ascii))  /* ASCII after ASCII cannot be wrong */
                err = _mm_or_si128(err, q4_utf8_block_errors(input, prev));
            prev = input;
            prev_ascii = ascii;
        }
        if (i < n) {
            memset(tail, 0, 16);
            memcpy(tail, s + i, (size_t) (n - i));
            input = _mm_loadu_si128((const __m128i *) tail);
            err = _mm_or_si128(err, q4_utf8_block_errors(input, prev));
            prev = input;
        }
        err = _mm_or_si128(err, q4_utf8_block_errors(_mm_setzero_si128(), prev));
        return _mm_movemask_epi8(_mm_cmpeq_epi8(err, _mm_setzero_si128())) == 0xFFFF;
    }

    /* The same 32 bytes a step with AVX2: the tables repeat in both 128-bit
       lanes, and the bytes before each lane come from the lane before it. */
    __attribute__((target("avx2")))
    static int q4_utf8_valid_avx2(const unsigned char *s, Py_ssize_t n) {
        const __m256i nib = _mm256_set1_epi8(0x0F);
        const __m256i byte_1_high_tbl = _mm256_setr_epi8(
            Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG,
            Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS,
            Q4_TOO_SHORT | Q4_OVERLONG_2, Q4_TOO_SHORT, Q4_TOO_SHORT | Q4_OVERLONG_3 | Q4_SURROGATE,
            (char) (Q4_TOO_SHORT | Q4_TOO_LARGE | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4),
            Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG,
            Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS,
            Q4_TOO_SHORT | Q4_OVERLONG_2, Q4_TOO_SHORT, Q4_TOO_SHORT | Q4_OVERLONG_3 | Q4_SURROGATE,
            (char) (Q4_TOO_SHORT | Q4_TOO_LARGE | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4));
        const __m256i byte_1_low_tbl = _mm256_setr_epi8(
            (char) (Q4_CARRY | Q4_OVERLONG_3 | Q4_OVERLONG_2 | Q4_OVERLONG_4), (char) (Q4_CARRY | Q4_OVERLONG_2),
            (char) Q4_CARRY, (char) Q4_CARRY, (char) (Q4_CARRY | Q4_TOO_LARGE), (char) Q4_LARGE, (char) Q4_LARGE,
            (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE,
            (char) (Q4_LARGE | Q4_SURROGATE), (char) Q4_LARGE, (char) Q4_LARGE,
            (char) (Q4_CARRY | Q4_OVERLONG_3 | Q4_OVERLONG_2 | Q4_OVERLONG_4), (char) (Q4_CARRY | Q4_OVERLONG_2),
            (char) Q4_CARRY, (char) Q4_CARRY, (char) (Q4_CARRY | Q4_TOO_LARGE), (char) Q4_LARGE, (char) Q4_LARGE,
            (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE, (char) Q4_LARGE,
            (char) (Q4_LARGE | Q4_SURROGATE), (char) Q4_LARGE, (char) Q4_LARGE);
        const __m256i byte_2_high_tbl = _mm256_setr_epi8(
            Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT,
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_OVERLONG_3 | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_OVERLONG_3 | Q4_TOO_LARGE),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_SURROGATE | Q4_TOO_LARGE),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_SURROGATE | Q4_TOO_LARGE),
            Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT,
            Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT,
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_OVERLONG_3 | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_OVERLONG_3 | Q4_TOO_LARGE),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_SURROGATE | Q4_TOO_LARGE),
            (char) (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS | Q4_SURROGATE | Q4_TOO_LARGE),
            Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT);
        const __m256i third_min = _mm256_set1_epi8((char) (0xE0 - 0x80));
        const __m256i fourth_min = _mm256_set1_epi8((char) (0xF0 - 0x80));
        const __m256i high = _mm256_set1_epi8((char) 0x80);
        __m256i prev = _mm256_setzero_si256(), err = _mm256_setzero_si256(), input;
        unsigned char tail[32];
        int prev_ascii = 1, last = 0;
        Py_ssize_t i = 0;
        for (;;) {
            if (i + 32 <= n) {
                input = _mm256_loadu_si256((const __m256i *) (s + i));
                i += 32;
            } else if (i < n) {
                memset(tail, 0, 32);
                memcpy(tail, s + i, (size_t) (n - i));
                input = _mm256_loadu_si256((const __m256i *) tail);
                i = n;
                prev_ascii = 0;
            } else if (!last) {
                input = _mm256_setzero_si256();  /* catches a sequence cut off at the end */
                last = 1;
                prev_ascii = 0;
            } else {
                break;
            }
            int ascii = _mm256_movemask_epi8(input) == 0;
            if (!(ascii && prev_ascii)) {
                __m256i before = _mm256_permute2x128_si256(prev, input, 0x21);
                __m256i prev1 = _mm256_alignr_epi8(input, before, 15);
                __m256i b1h = _mm256_shuffle_epi8(byte_1_high_tbl, _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nib));
                __m256i b1l = _mm256_shuffle_epi8(byte_1_low_tbl, _mm256_and_si256(prev1, nib));
                __m256i b2h = _mm256_shuffle_epi8(byte_2_high_tbl, _mm256_and_si256(_mm256_srli_epi16(input, 4), nib));
                __m256i special = _mm256_and_si256(_mm256_and_si256(b1h, b1l), b2h);
                __m256i third = _mm256_subs_epu8(_mm256_alignr_epi8(input, before, 14), third_min);
                __m256i fourth = _mm256_subs_epu8(_mm256_alignr_epi8(input, before, 13), fourth_min);
                __m256i must23 = _mm256_and_si256(_mm256_or_si256(third, fourth), high);
                err = _mm256_or_si256(err, _mm256_xor_si256(must23, special));
            }
            prev = input;
            prev_ascii = ascii;
        }
        return _mm256_testz_si256(err, err);
    }

    /* 1: s[0:n] is valid UTF-8; 0: it is not; -1: not checked here (no SSSE3). */
    static int q4_utf8_valid_fast(const unsigned char *s, Py_ssize_t n) {
        int level = q4_simd_level();
        if (level == 2)
            return q4_utf8_valid_avx2(s, n);
        return level ? q4_utf8_valid_ssse3(s, n) : -1;
    }
    #else
    static int q4_utf8_valid_fast(const unsigned char *s, Py_ssize_t n) { (void) s; (void) n; return -1; }
    #endif
    """
    int q4_utf8_valid_fast(const uint8_t *s, Py_ssize_t n) nogil
    int q4_simd_force(int want) nogil


cdef Py_ssize_t utf8_invalid_at(const uint8_t *s, Py_ssize_t n) noexcept nogil:
    """Offset of the first byte that starts no valid UTF-8 sequence, or -1.

    Rejects overlong forms, surrogates (U+D800..U+DFFF) and values past
    U+10FFFF, as Python's strict codec does. Valid text, the usual case, is
    checked 16 bytes a step (q4_utf8_valid_fast) where the CPU allows; the
    byte loop then only runs to find where invalid text goes wrong.
    """
    if n >= 16 and q4_utf8_valid_fast(s, n) == 1:
        return -1
    return utf8_invalid_at_bytewise(s, n)


cdef Py_ssize_t utf8_invalid_at_bytewise(const uint8_t *s, Py_ssize_t n) noexcept nogil:
    """utf8_invalid_at, a character at a time (runs of ASCII a word at a time)."""
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


def utf8_simd_level(int want=-1):
    """Test hook: the vector width the UTF-8 check uses (2: AVX2, 1: SSSE3,
    0: none); want >= 0 selects a lower one (never above the CPU's)."""
    return q4_simd_force(want)


def utf8_checks(bytes data):
    """Test hook: (the 16-byte-step check's verdict on data: 1 valid, 0
    not, -1 not available here; the byte loop's first bad offset or -1)."""
    cdef const uint8_t *p = <const uint8_t *> data
    cdef Py_ssize_t n = len(data)
    return q4_utf8_valid_fast(p, n), utf8_invalid_at_bytewise(p, n)
