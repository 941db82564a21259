# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""NFC exactly as tokenizers 0.22.1's NFC normalizer, on UTF-8, in linear time.

The reference's tables (unicode-normalization-alignments, Unicode 9 era) are
probed into unicode_tables.h by tools/gen_unicode_tables.py.

The text is cut into segments, each starting at a QC=Yes starter: nothing
before such a character can reorder or compose with anything from it on, so
segments normalize independently. A segment that passes the quick check is
copied as bytes; any other one is decomposed, canonically ordered (a stable
counting sort for long runs of marks) and recomposed.
"""
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memmove, memcmp, memset
from cpython.pyport cimport PY_SSIZE_T_MAX

from qwen4exp._native._alloc cimport q4_malloc, q4_realloc, q4_free

cdef extern from "unicode_tables.h" nogil:
    ctypedef struct q4_nf_rec:
        uint8_t ccc
        uint8_t flags
        uint16_t decomp
        uint16_t comp
    enum:
        Q4_NF_QC_MASK
        Q4_NF_SECOND
    const q4_nf_rec *q4_nf_rec_of(uint32_t cp)
    unsigned q4_nf_decompose(uint32_t cp, const q4_nf_rec *rec, uint32_t *out)
    uint32_t q4_nf_compose(uint32_t a, uint32_t b)

# Work buffer entries pack a code point with what ordering and composition
# need, so those never look it up again: bits 0-20 the code point, bit 21 "may
# combine with a preceding starter", bits 24-31 its combining class.
cdef enum:
    CP_MASK = 0x1FFFFF
    SECOND_BIT = 0x200000
    CCC_SHIFT = 24
    # Runs of marks up to this length are insertion-sorted; longer ones counting-sorted.
    SHORT_RUN = 32


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* First index >= i holding a byte >= 0xCC, or n. Every byte of a code
       point below U+0300 is < 0xCC and every lead byte of one from U+0300 on
       is >= 0xCC; all code points below U+0300 are QC=Yes starters, so such
       bytes need no look-up. 32 bytes a step with SSE2, else 8. */
    static inline Py_ssize_t q4_skip_below_0300(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    #if defined(__SSE2__)
        const __m128i lead = _mm_set1_epi8((char) 0xCC);
        while (i + 32 <= n) {
            __m128i a = _mm_loadu_si128((const __m128i *) (s + i));
            __m128i b = _mm_loadu_si128((const __m128i *) (s + i + 16));
            /* x >= 0xCC (unsigned) iff max(x, 0xCC) == x */
            int hit = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(a, lead), a),
                                                     _mm_cmpeq_epi8(_mm_max_epu8(b, lead), b)));
            if (hit)
                break;
            i += 32;
        }
    #endif
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            /* Per byte b: b >= 0xCC iff its high bit is set and (b & 0x7F) + 0x34
               carries into bit 7 (no carry crosses bytes: 0x7F + 0x34 < 0x100). */
            if (((w & 0x7F7F7F7F7F7F7F7FULL) + 0x3434343434343434ULL) & w & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        while (i < n && s[i] < 0xCC)
            i++;
        return i;
    }
    """
    Py_ssize_t _skip_below_0300 "q4_skip_below_0300" (const unsigned char *s, Py_ssize_t i, Py_ssize_t n) nogil


cdef inline bint _is_stable(const q4_nf_rec *rec) noexcept nogil:
    """A QC=Yes starter: NFC neither reorders it nor composes it with what
    comes before."""
    return (rec.flags & Q4_NF_QC_MASK) == 0 and rec.ccc == 0


# Characters that are QC=Yes starters ("stable": nothing before them reorders
# or composes with them) below U+10000, for skipping runs of them without a
# record look-up: one bit per code point (8 KiB, in L1 while text streams
# past), filled once from the reference's records when the module loads. A
# bit per 64-code-point block missed every block with one mark in it
# (Devanagari, Bengali, Tamil, Thai...), whose letters then took the slow path.
cdef uint8_t _stable_bmp[0x2000]


cdef void _fill_stable() noexcept nogil:
    cdef uint32_t cp
    memset(_stable_bmp, 0, sizeof(_stable_bmp))
    for cp in range(0x10000):
        if not 0xD800 <= cp <= 0xDFFF and _is_stable(q4_nf_rec_of(cp)):
            _stable_bmp[cp >> 3] |= <uint8_t> (1 << (cp & 7))


_fill_stable()


cdef inline Py_ssize_t _skip_stable(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """First index >= i that does not start a stable character known from the
    table (or n). Bytes below 0xCC (code points below U+0300) need no look-up;
    where two come in a row (Latin text) they are skipped a word at a time,
    else one by one, so that the spaces between words of other scripts do not
    each start a vector scan that stops at the next letter."""
    cdef uint32_t cp
    cdef Py_ssize_t j
    while i < n:
        if s[i] < 0xCC:
            if i + 1 < n and s[i + 1] < 0xCC:
                i = _skip_below_0300(s, i + 2, n)
            else:
                i += 1
            continue
        if s[i] >= 0xF0:
            return i
        j = i
        cp = _decode(s, &j)
        if not (_stable_bmp[cp >> 3] >> (cp & 7)) & 1:
            return i
        i = j
    return n


cdef inline uint32_t _decode(const unsigned char *s, Py_ssize_t *pos) noexcept nogil:
    """The code point at s[pos[0]] (valid UTF-8); advances pos[0] past it."""
    cdef Py_ssize_t i = pos[0]
    cdef uint32_t b = s[i]
    if b < 0x80:
        pos[0] = i + 1
        return b
    if b < 0xE0:
        pos[0] = i + 2
        return ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
    if b < 0xF0:
        pos[0] = i + 3
        return ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
    pos[0] = i + 4
    return (((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12)
            | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F))


cdef inline unsigned char *_encode(unsigned char *o, uint32_t cp) noexcept nogil:
    if cp < 0x80:
        o[0] = <unsigned char>cp
        return o + 1
    if cp < 0x800:
        o[0] = <unsigned char>(0xC0 | (cp >> 6))
        o[1] = <unsigned char>(0x80 | (cp & 0x3F))
        return o + 2
    if cp < 0x10000:
        o[0] = <unsigned char>(0xE0 | (cp >> 12))
        o[1] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
        o[2] = <unsigned char>(0x80 | (cp & 0x3F))
        return o + 3
    o[0] = <unsigned char>(0xF0 | (cp >> 18))
    o[1] = <unsigned char>(0x80 | ((cp >> 12) & 0x3F))
    o[2] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
    o[3] = <unsigned char>(0x80 | (cp & 0x3F))
    return o + 4


cdef bint utf8_stable_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t p) noexcept nogil:
    cdef uint32_t cp
    if p >= n:
        return False
    if s[p] < 0x80:
        return True
    cp = _decode(s, &p)
    return _is_stable(q4_nf_rec_of(cp))


cdef bint utf8_is_nfc(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0, j
    cdef uint32_t cp
    cdef uint8_t last_ccc = 0
    cdef const q4_nf_rec *rec
    while True:
        j = _skip_stable(s, i, n)
        if j != i:
            last_ccc = 0
            i = j
        if i >= n:
            return True
        cp = _decode(s, &i)
        rec = q4_nf_rec_of(cp)
        if rec.flags & Q4_NF_QC_MASK:
            return False
        if rec.ccc != 0 and last_ccc > rec.ccc:
            return False
        last_ccc = rec.ccc


# ------------------------------------------------------------------ utf8_nfc

cdef struct _Work:
    unsigned char *out
    Py_ssize_t out_len
    Py_ssize_t out_cap
    uint32_t *cps        # one segment, decomposed (packed entries)
    Py_ssize_t cps_cap
    uint32_t *tmp        # scratch for counting sorts
    Py_ssize_t tmp_cap
    bint changed         # w.out holds the NFC of the input up to `emitted`


cdef bint _grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, Py_ssize_t item) noexcept nogil:
    """Make *buf hold at least need items of item bytes (geometric growth)."""
    cdef Py_ssize_t new_cap
    cdef void *p
    if need <= cap[0]:
        return True
    if need > PY_SSIZE_T_MAX // (2 * item):
        return False
    new_cap = cap[0] * 2
    if new_cap < need:
        new_cap = need
    p = q4_realloc(buf[0], <size_t>(new_cap * item))
    if p == NULL:
        return False
    buf[0] = p
    cap[0] = new_cap
    return True


cdef inline bint _append(_Work *w, const unsigned char *s, Py_ssize_t n) noexcept nogil:
    if n <= 0:
        return True
    if not _grow(<void **>&w.out, &w.out_cap, w.out_len + n, 1):
        return False
    memcpy(w.out + w.out_len, s, <size_t>n)
    w.out_len += n
    return True


cdef inline void _insertion_sort(uint32_t *a, Py_ssize_t n) noexcept nogil:
    """Stable sort by combining class (the top byte)."""
    cdef Py_ssize_t i, j
    cdef uint32_t v
    for i in range(1, n):
        v = a[i]
        j = i
        while j > 0 and (a[j - 1] >> CCC_SHIFT) > (v >> CCC_SHIFT):
            a[j] = a[j - 1]
            j -= 1
        a[j] = v


cdef inline void _counting_sort(uint32_t *a, Py_ssize_t n, uint32_t *tmp) noexcept nogil:
    """Stable sort by combining class in O(n + 256); tmp holds n entries."""
    cdef Py_ssize_t count[256]
    cdef Py_ssize_t i, total = 0, c
    memset(count, 0, sizeof(count))
    for i in range(n):
        count[a[i] >> CCC_SHIFT] += 1
    for i in range(256):
        c = count[i]
        count[i] = total
        total += c
    for i in range(n):
        c = a[i] >> CCC_SHIFT
        tmp[count[c]] = a[i]
        count[c] += 1
    memcpy(a, tmp, <size_t>n * sizeof(uint32_t))


cdef inline uint32_t _pack(uint32_t cp, const q4_nf_rec *rec) noexcept nogil:
    return cp | ((<uint32_t>rec.ccc) << CCC_SHIFT) | (SECOND_BIT if rec.flags & Q4_NF_SECOND else 0)


cdef bint _normalize_segment(_Work *w, const unsigned char *s, Py_ssize_t n) noexcept nogil:
    """Append the NFC of UTF-8 s[0:n] to w.out."""
    cdef Py_ssize_t i = 0, count = 0, run, j, k, starter
    cdef uint32_t cp, v, cc, composite
    cdef uint32_t parts[4]
    cdef unsigned nparts, t
    cdef int last_cc
    cdef const q4_nf_rec *rec
    cdef unsigned char *o
    cdef uint32_t *cps

    # Decompose (at most 3 code points per 2 input bytes: checked by the generator).
    if not _grow(<void **>&w.cps, &w.cps_cap, n + n // 2 + 1, sizeof(uint32_t)):
        return False
    cps = w.cps
    while i < n:
        cp = _decode(s, &i)
        rec = q4_nf_rec_of(cp)
        nparts = q4_nf_decompose(cp, rec, parts)
        if nparts == 1 and parts[0] == cp:
            cps[count] = _pack(cp, rec)
            count += 1
        else:
            for t in range(nparts):
                cps[count] = _pack(parts[t], q4_nf_rec_of(parts[t]))
                count += 1

    # Canonical ordering: stable sort of each maximal run of non-starters.
    j = 0
    while j < count:
        if (cps[j] >> CCC_SHIFT) == 0:
            j += 1
            continue
        k = j + 1
        while k < count and (cps[k] >> CCC_SHIFT) != 0:
            k += 1
        run = k - j
        if run <= SHORT_RUN:
            _insertion_sort(cps + j, run)
        else:
            if not _grow(<void **>&w.tmp, &w.tmp_cap, run, sizeof(uint32_t)):
                return False
            _counting_sort(cps + j, run, w.tmp)
        j = k

    # Canonical composition, in place: a character combines with the last
    # starter unless something between them has a class >= its own (or is a
    # starter). last_cc is -1 while nothing stands between them.
    k = 0
    starter = -1
    last_cc = -1
    for j in range(count):
        v = cps[j]
        cc = v >> CCC_SHIFT
        if starter >= 0 and (v & SECOND_BIT) and (last_cc < 0 or <uint32_t>last_cc < cc):
            composite = q4_nf_compose(cps[starter] & CP_MASK, v & CP_MASK)
            if composite:
                cps[starter] = composite
                continue
        if cc == 0:
            starter = k
            last_cc = -1
        else:
            last_cc = <int>cc
        cps[k] = v
        k += 1

    if not _grow(<void **>&w.out, &w.out_cap, w.out_len + 4 * k, 1):
        return False
    o = w.out + w.out_len
    for j in range(k):
        o = _encode(o, cps[j] & CP_MASK)
    w.out_len = o - w.out
    return True


cdef bint _flush(_Work *w, const unsigned char *s, Py_ssize_t *emitted, Py_ssize_t seg,
                 Py_ssize_t end) noexcept nogil:
    """Normalize the segment s[seg:end] that failed the quick check. Once any
    segment changed, w.out holds the NFC of s[0:end] (s[emitted:seg] copied
    first); before that, w.out is scratch and nothing is copied."""
    cdef Py_ssize_t m
    if w.changed:
        if not (_append(w, s + emitted[0], seg - emitted[0]) and _normalize_segment(w, s + seg, end - seg)):
            return False
        emitted[0] = end
        return True
    w.out_len = 0
    if not _normalize_segment(w, s + seg, end - seg):
        return False
    m = w.out_len
    if m == end - seg and memcmp(w.out, s + seg, <size_t> m) == 0:
        w.out_len = 0
        return True
    if not _grow(<void **>&w.out, &w.out_cap, seg + m, 1):
        return False
    memmove(w.out + seg, w.out, <size_t> m)
    memcpy(w.out, s, <size_t> seg)
    w.out_len = seg + m
    w.changed = True
    emitted[0] = end
    return True


cdef Py_ssize_t utf8_nfc(const unsigned char *s, Py_ssize_t n, unsigned char **out) noexcept nogil:
    cdef _Work w
    cdef Py_ssize_t i = 0, j, start
    cdef Py_ssize_t emitted = 0   # once w.changed: input before this is already in w.out
    cdef Py_ssize_t seg = 0       # start of the current segment
    cdef bint clean = True        # the current segment passes the quick check so far
    cdef uint8_t last_ccc = 0
    cdef uint32_t cp
    cdef const q4_nf_rec *rec
    cdef bint ok = True

    memset(&w, 0, sizeof(w))
    while ok:
        j = _skip_stable(s, i, n)
        if j != i:
            # s[i:j] is all QC=Yes starters: the current segment ends at i,
            # and the last of them starts the next one.
            if not clean:
                ok = _flush(&w, s, &emitted, seg, i)
            seg = j - 1
            while (s[seg] & 0xC0) == 0x80:
                seg -= 1
            clean = True
            last_ccc = 0
            i = j
        if i >= n or not ok:
            break
        start = i
        cp = _decode(s, &i)
        rec = q4_nf_rec_of(cp)
        if _is_stable(rec):
            if not clean:
                ok = _flush(&w, s, &emitted, seg, start)
            seg = start
            clean = True
            last_ccc = 0
        else:
            if (rec.flags & Q4_NF_QC_MASK) or (rec.ccc != 0 and last_ccc > rec.ccc):
                clean = False
            last_ccc = rec.ccc
    if ok and not clean:
        ok = _flush(&w, s, &emitted, seg, n)
    if ok and w.changed:
        ok = _append(&w, s + emitted, n - emitted)
    q4_free(w.cps)
    q4_free(w.tmp)
    if not ok:
        q4_free(w.out)
        return -1
    if not w.changed:
        q4_free(w.out)
        out[0] = NULL
        return n
    out[0] = w.out
    return w.out_len


# ------------------------------------------------------------------ test hooks

def nfc(str s):
    """NFC of s via the native code (test hook)."""
    cdef bytes b = s.encode("utf-8")
    cdef const unsigned char *p = b
    cdef Py_ssize_t n = len(b), m
    cdef unsigned char *out = NULL
    with nogil:
        m = utf8_nfc(p, n, &out)
    if m < 0:
        raise MemoryError("utf8_nfc: allocation failed")
    if out == NULL:
        return s
    try:
        return (<char *>out)[:m].decode("utf-8")
    finally:
        q4_free(out)


def is_nfc(str s):
    """utf8_is_nfc of s (test hook): True only if s is certainly NFC."""
    cdef bytes b = s.encode("utf-8")
    cdef const unsigned char *p = b
    cdef Py_ssize_t n = len(b)
    cdef bint r
    with nogil:
        r = utf8_is_nfc(p, n)
    return r


def stable_at(bytes data, const int64_t[::1] offsets):
    """utf8_stable_at of valid UTF-8 `data` at each offset (test hook): a
    numpy bool array."""
    import numpy
    cdef const unsigned char *p = data
    cdef Py_ssize_t n = len(data), k
    out = numpy.zeros(offsets.shape[0], dtype=numpy.bool_)
    cdef unsigned char[::1] view = out.view(numpy.uint8)
    with nogil:
        for k in range(offsets.shape[0]):
            view[k] = utf8_stable_at(p, n, offsets[k])
    return out
