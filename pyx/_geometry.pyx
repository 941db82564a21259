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
    /* Whole-buffer validation, 16 bytes a step (32 with AVX2), after Keiser and Lemire,
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
    #define Q4_CONT_2 (Q4_TOO_LONG | Q4_OVERLONG_2 | Q4_TWO_CONTS)
    /* By the high nibble of the byte before, its low nibble, and the high
       nibble of this byte: the errors each allows. */
    static const unsigned char q4_utf8_b1_high[16] = {
        Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG, Q4_TOO_LONG,
        Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS, Q4_TWO_CONTS,
        Q4_TOO_SHORT | Q4_OVERLONG_2, Q4_TOO_SHORT, Q4_TOO_SHORT | Q4_OVERLONG_3 | Q4_SURROGATE,
        Q4_TOO_SHORT | Q4_TOO_LARGE | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4};
    static const unsigned char q4_utf8_b1_low[16] = {
        Q4_CARRY | Q4_OVERLONG_3 | Q4_OVERLONG_2 | Q4_OVERLONG_4, Q4_CARRY | Q4_OVERLONG_2, Q4_CARRY, Q4_CARRY,
        Q4_CARRY | Q4_TOO_LARGE, Q4_LARGE, Q4_LARGE, Q4_LARGE, Q4_LARGE, Q4_LARGE, Q4_LARGE, Q4_LARGE, Q4_LARGE,
        Q4_LARGE | Q4_SURROGATE, Q4_LARGE, Q4_LARGE};
    static const unsigned char q4_utf8_b2_high[16] = {
        Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT,
        Q4_CONT_2 | Q4_OVERLONG_3 | Q4_TOO_LARGE_1000 | Q4_OVERLONG_4, Q4_CONT_2 | Q4_OVERLONG_3 | Q4_TOO_LARGE,
        Q4_CONT_2 | Q4_SURROGATE | Q4_TOO_LARGE, Q4_CONT_2 | Q4_SURROGATE | Q4_TOO_LARGE,
        Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT, Q4_TOO_SHORT};

    /* One block's errors (any bit set in the result), given the block before:
       the same steps at both widths, V the vector type, P its intrinsics'
       prefix, W its bits. */
    #define Q4_UTF8_BLOCK_ERRORS(V, P, W, input, before, t1h, t1l, t2h) ({                                \
        V nib_ = P##_set1_epi8(0x0F);                                                                 \
        V prev1_ = P##_alignr_epi8(input, before, 15);                                                \
        V special_ = P##_and_si##W(                                                               \
            P##_and_si##W(P##_shuffle_epi8(t1h, P##_and_si##W(P##_srli_epi16(prev1_, 4), nib_)), \
                              P##_shuffle_epi8(t1l, P##_and_si##W(prev1_, nib_))),                \
            P##_shuffle_epi8(t2h, P##_and_si##W(P##_srli_epi16(input, 4), nib_)));                \
        V third_ = P##_subs_epu8(P##_alignr_epi8(input, before, 14), P##_set1_epi8((char) (0xE0 - 0x80))); \
        V fourth_ = P##_subs_epu8(P##_alignr_epi8(input, before, 13), P##_set1_epi8((char) (0xF0 - 0x80))); \
        P##_xor_si##W(P##_and_si##W(P##_or_si##W(third_, fourth_), P##_set1_epi8((char) 0x80)), special_); \
    })

    /* The whole buffer, a block of W bytes a step (then the last bytes in a
       zero-padded block, then a zero block), skipping ASCII after ASCII,
       which cannot be wrong. LOAD(p) loads a block; BEFORE(prev, input) is
       the vector whose top bytes are the ones before input's. */
    #define Q4_UTF8_VALID_BODY(V, P, W, LOAD, BEFORE, TABLE)                                           \
        const V t1h = TABLE(q4_utf8_b1_high), t1l = TABLE(q4_utf8_b1_low), t2h = TABLE(q4_utf8_b2_high); \
        V prev = P##_setzero_si##W(), err = P##_setzero_si##W(), input;                               \
        unsigned char tail[W / 8];                                                                    \
        int prev_ascii = 1, last = 0;                                                                 \
        Py_ssize_t i = 0;                                                                             \
        for (;;) {                                                                                    \
            if (i + W / 8 <= n) {                                                                     \
                input = LOAD(s + i);                                                                  \
                i += W / 8;                                                                           \
            } else if (i < n) {                                                                       \
                memset(tail, 0, W / 8);                                                               \
                memcpy(tail, s + i, (size_t) (n - i));                                                \
                input = LOAD(tail);                                                                   \
                i = n;                                                                                \
                prev_ascii = 0;                                                                       \
            } else if (!last) {                                                                       \
                input = P##_setzero_si##W(); /* a sequence cut off at the end */                     \
                last = 1;                                                                             \
                prev_ascii = 0;                                                                       \
            } else {                                                                                  \
                break;                                                                                \
            }                                                                                         \
            int ascii = P##_movemask_epi8(input) == 0;                                                \
            if (!(ascii && prev_ascii))                                                               \
                err = P##_or_si##W(err, Q4_UTF8_BLOCK_ERRORS(V, P, W, input, BEFORE(prev, input), t1h, t1l, t2h)); \
            prev = input;                                                                             \
            prev_ascii = ascii;                                                                       \
        }

    #define Q4_LOAD128(p) _mm_loadu_si128((const __m128i *) (p))
    #define Q4_LOAD256(p) _mm256_loadu_si256((const __m256i *) (p))
    #define Q4_TABLE128(t) Q4_LOAD128(t)
    #define Q4_TABLE256(t) _mm256_broadcastsi128_si256(Q4_LOAD128(t))
    #define Q4_BEFORE128(prev, input) (prev)
    /* palignr works within 128-bit lanes: each lane's bytes before it come
       from the lane before (the high lane of the last block for the low one) */
    #define Q4_BEFORE256(prev, input) _mm256_permute2x128_si256(prev, input, 0x21)

    __attribute__((target("ssse3")))
    static int q4_utf8_valid_ssse3(const unsigned char *s, Py_ssize_t n) {
        Q4_UTF8_VALID_BODY(__m128i, _mm, 128, Q4_LOAD128, Q4_BEFORE128, Q4_TABLE128)
        return _mm_movemask_epi8(_mm_cmpeq_epi8(err, _mm_setzero_si128())) == 0xFFFF;
    }

    __attribute__((target("avx2")))
    static int q4_utf8_valid_avx2(const unsigned char *s, Py_ssize_t n) {
        Q4_UTF8_VALID_BODY(__m256i, _mm256, 256, Q4_LOAD256, Q4_BEFORE256, Q4_TABLE256)
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
    """utf8_invalid_at, a character at a time (runs of ASCII a word at a time),
    by the Unicode standard's table of well-formed sequences (Table 3-7): a
    lead byte C2..F4 sets the length and the range of the second byte, every
    other byte of the sequence is 80..BF."""
    cdef Py_ssize_t i = 0, j, k
    cdef uint8_t b, b1, lo, hi
    while i < n:
        b = s[i]
        if b < 0x80:
            i = _ascii_end(s, i + 1, n)
            continue
        if b < 0xC2 or b > 0xF4:
            return i
        k = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        if i + k > n:
            return i
        lo = 0xA0 if b == 0xE0 else 0x90 if b == 0xF0 else 0x80  # no overlong forms
        hi = 0x9F if b == 0xED else 0x8F if b == 0xF4 else 0xBF  # no surrogates, nothing past U+10FFFF
        b1 = s[i + 1]
        if b1 < lo or b1 > hi:
            return i
        for j in range(2, k):
            if (s[i + j] & 0xC0) != 0x80:
                return i
        i += k
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
