# cython: language_level=3
"""The Qwen split patterns, matched the way Oniguruma matches them.

Alternatives are tried in order at each position and the first that matches
wins (leftmost, ordered, with backtracking only where the pattern needs it):

1. `(?i:'s|'t|'re|'ve|'m|'ll|'d)`   apostrophe contractions, case-folded
   (so `'ſ` counts: U+017F folds to s);
2. `[^\r\n\p{L}\p{N}]?\p{L}+`        a letter run with one optional prefix
   character that is not CR/LF, letter or number (a space, a mark, ...);
3. `\p{N}`                           one number character;
4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`       a run of "other" characters, optionally
   after one U+0020, then any CR/LF;
5. `\s*[\r\n]+`                      whitespace up to and including the last
   CR/LF of the run;
6. `\s+(?!\S)`                       whitespace at the end of text, or all but
   the last whitespace character before a non-space;
7. `\s+`                             a single whitespace character before a
   non-space.

The Qwen3.5 pattern differs only by `\p{M}`: alternative 2 is
`[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+` and alternative 4 excludes marks from the
"other" run. Both are one scanner: `letters` is the class of a letter run,
Q4_L (Qwen3) or Q4_L | Q4_M (Qwen3.5). A mark may still be the optional
prefix of alternative 2, but with Q4_M in `letters` it already starts a run.

Input must be valid UTF-8 (the callers validate it); classes come from the
generated tables in unicode_tables.h.

Two scanners give the same pieces. `next_end` (behind `piece_end`) finds one
piece's end from its first characters, decoding only bytes >= 0x80.
`piece_ends` fills a caller's array with the ends of many pieces: where the
next 16 bytes are ASCII it classifies 64 bytes at once into bit masks and
reads off every piece start the masks prove (`block_starts`), a few bit
operations for the whole block instead of a chain of loads and hard-to-predict
branches per piece; elsewhere it calls `next_end`.
"""
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memset

from qwen4exp._native._unicode cimport q4_cclass, q4_byte_class, Q4_L, Q4_N, Q4_WS, Q4_CRLF, Q4_M, Q4_HI
from qwen4exp._native._byte_level cimport piece_end as byte_level_piece_end

cdef enum:
    NOT_OTHER = Q4_N | Q4_WS          # with `letters`: what ends an "other" run
    NOT_PREFIX = Q4_L | Q4_N | Q4_CRLF
    MAX_HOOK_CAP = 256                # the test hooks' chunk buffer


# The run scanners look ASCII bytes up in q4_byte_class and decode only bytes
# >= 0x80, so a run may cross between ASCII and any code point.

cdef inline Py_ssize_t letters_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t j,
                                    unsigned char letters) noexcept nogil:
    """End of the letter run that continues at j."""
    cdef Py_ssize_t nj
    while j < n:
        if s[j] < 0x80:
            if not (q4_byte_class[s[j]] & Q4_L):
                break
            j += 1
        else:
            if not (class_hi(s, j, &nj) & letters):
                break
            j = nj
    return j


cdef inline Py_ssize_t others_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t j,
                                   unsigned char not_other) noexcept nogil:
    """End of the "other" run that continues at j, with the CR/LF after it."""
    cdef Py_ssize_t nj
    while j < n:
        if s[j] < 0x80:
            if q4_byte_class[s[j]]:
                break
            j += 1
        else:
            if class_hi(s, j, &nj) & not_other:
                break
            j = nj
    while j < n and q4_byte_class[s[j]] & Q4_CRLF:
        j += 1
    return j


cdef inline Py_ssize_t spaces_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """End of the piece that s[i], a whitespace character, starts when no letter
    run or "other" run takes it: alternatives 5, 6 and 7."""
    cdef Py_ssize_t j = i, nj, last_start = i, crlf_end = -1
    cdef unsigned char c
    while j < n:
        c = class_at(s, j, &nj)
        if not (c & Q4_WS):
            break
        if c & Q4_CRLF:
            crlf_end = nj
        last_start = j
        j = nj
    if crlf_end > 0:
        return crlf_end
    if j == n or last_start == i:
        return j
    return last_start


cdef inline Py_ssize_t digits_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t j,
                                   unsigned char letters) noexcept nogil:
    """End of the number piece whose first character ends at j: that one
    character (`\\p{N}`), or with DIGIT_RUNS in `letters` up to two more
    (Llama 3's `\\p{N}{1,3}`)."""
    cdef Py_ssize_t nj, more = 2 if letters & DIGIT_RUNS else 0
    while more > 0 and j < n:
        if s[j] < 0x80:
            if not (q4_byte_class[s[j]] & Q4_N):
                break
            j += 1
        else:
            if not (class_hi(s, j, &nj) & Q4_N):
                break
            j = nj
        more -= 1
    return j


cdef inline bint is_ci(unsigned char b, unsigned char lower) noexcept nogil:
    return (b | 0x20) == lower


cdef inline Py_ssize_t contraction_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t j) noexcept nogil:
    """End of a contraction whose apostrophe ends at j, or -1."""
    cdef unsigned char b = s[j]
    if is_ci(b, c's') or is_ci(b, c't') or is_ci(b, c'm') or is_ci(b, c'd'):
        return j + 1
    if b == 0xC5 and j + 1 < n and s[j + 1] == 0xBF:  # U+017F LATIN SMALL LETTER LONG S
        return j + 2
    if j + 1 < n:
        if (is_ci(b, c'r') or is_ci(b, c'v')) and is_ci(s[j + 1], c'e'):
            return j + 2
        if is_ci(b, c'l') and is_ci(s[j + 1], c'l'):
            return j + 2
    return -1


cdef Py_ssize_t any_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                        unsigned char letters) noexcept nogil:
    """End of the pre-token at s[i] for any first two characters: the
    alternatives in order. Kept out of line: next_end handles ASCII itself."""
    cdef unsigned char not_other = letters | NOT_OTHER
    cdef Py_ssize_t i1, j, nj
    cdef unsigned char c0 = class_at(s, i, &i1)
    cdef Py_ssize_t r
    if s[i] == c"'" and i1 < n:
        r = contraction_end(s, n, i1)
        if r > 0:
            return r
    if c0 & letters:
        return letters_end(s, n, i1, letters)
    if not (c0 & NOT_PREFIX) and i1 < n:
        if class_at(s, i1, &nj) & letters:
            return letters_end(s, n, nj, letters)
    if c0 & Q4_N:
        return digits_end(s, n, i1, letters)
    j = i
    if s[i] == c' ' and i1 < n and not (class_at(s, i1, &nj) & not_other):
        j = i1
    if not (class_at(s, j, &nj) & not_other):
        return others_end(s, n, nj, not_other)
    return spaces_end(s, n, i)


cdef inline Py_ssize_t next_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                                unsigned char letters) noexcept nogil:
    """End of the pre-token at s[i]: the shapes of ASCII text decided from its
    first two bytes (each branch is what any_end concludes for them), the rest
    through any_end."""
    cdef unsigned char b = s[i], c = q4_byte_class[b], c1
    cdef Py_ssize_t r, j
    if c & Q4_L:                      # [a-zA-Z]: a letter run
        return letters_end(s, n, i + 1, letters)
    if c & Q4_N:                      # a digit is a piece (Llama 3: up to 3 digits)
        return digits_end(s, n, i + 1, letters)
    if c & Q4_HI:                     # another script: a word, a digit, punctuation
        c = class_hi(s, i, &j)
        if c & letters:
            return letters_end(s, n, j, letters)
        if c & Q4_N:
            return digits_end(s, n, j, letters)
        if not (c & (letters | NOT_OTHER)):
            if j < n and class_at(s, j, &r) & letters:     # "«слово": a prefix
                return letters_end(s, n, r, letters)
            return others_end(s, n, j, letters | NOT_OTHER)
        return any_end(s, n, i, letters)
    if i + 1 == n:                    # a last character is a piece whatever it is
        return n
    c1 = q4_byte_class[s[i + 1]]
    if c1 & Q4_HI:                    # " слово", "(слово"; "'ſ" is a contraction
        if b != c"'" and not (c & Q4_CRLF) and class_hi(s, i + 1, &j) & letters:
            return letters_end(s, n, j, letters)
        return any_end(s, n, i, letters)
    if c == 0:                        # punctuation or a control character
        if b == c"'":
            r = contraction_end(s, n, i + 1)
            if r > 0:
                return r
        if c1 & Q4_L:                 # ".word": the prefix of a letter run
            return letters_end(s, n, i + 2, letters)
        return others_end(s, n, i + 1, letters | NOT_OTHER)
    if c1 & Q4_L and not (c & Q4_CRLF):   # " word", "\tword"
        return letters_end(s, n, i + 2, letters)
    if b == c' ' and c1 == 0:         # " (", " +="
        return others_end(s, n, i + 2, letters | NOT_OTHER)
    return spaces_end(s, n, i)


# -- ASCII blocks ------------------------------------------------------------------
# Scanning piece by piece, each piece's end waits on loads and table look-ups of
# its bytes, and on code the branch predictor misses a run's end about once per
# piece (4 bytes). A block classifies 64 bytes at once into one bit mask per
# class (SSE2 compares, or 64-bit word arithmetic elsewhere), from which block_starts computes
# every piece start with whole-word bit operations. Byte 63, bytes past the text
# and every byte >= 0x80 are "unknown" (the hi mask); what depends on them is
# left to the next block or to next_end.
cdef extern from * nogil:
    """
    #include <string.h>
    typedef struct {
        uint64_t letter, digit, space, crlf, other, blank, apos, hi;
    } q4_block;

    /* Eight bytes per step in a 64-bit word (SWAR), for targets without SSE2;
     * the tests compare it with the SSE2 one. Q4_IN: 0x80 in each byte of y
     * (all bytes < 0x80) within lo..hi, no carry crossing bytes; Q4_PACK: the
     * 0x80 bits of a word's 8 bytes as 8 bits, byte k to bit k. */
    #define Q4_ONES 0x0101010101010101ULL
    #define Q4_HIGH 0x8080808080808080ULL
    #define Q4_IN(y, lo, hi) (((y) + Q4_ONES * (0x80 - (lo))) & ~((y) + Q4_ONES * (0x7F - (hi))) & Q4_HIGH)
    #define Q4_PACK(x) (((((x) >> 7) * 0x0102040810204080ULL) >> 56) & 0xFF)
    static void q4_classify_words(const unsigned char *p, q4_block *m) {
        int k, j;
        memset(m, 0, sizeof *m);
        for (k = 0; k < 64; k += 8) {
            uint64_t w = 0, y, ascii, blank;
            for (j = 7; j >= 0; j--)  /* byte k + j to bits 8j.., whatever the byte order */
                w = (w << 8) | p[k + j];
            y = w & ~Q4_HIGH;
            ascii = ~w & Q4_HIGH;
            blank = Q4_IN(y, 0x20, 0x20) & ascii;
            m->letter |= Q4_PACK(Q4_IN(y | (Q4_ONES * 0x20), 'a', 'z') & ascii) << k;
            m->digit |= Q4_PACK(Q4_IN(y, '0', '9') & ascii) << k;
            m->space |= Q4_PACK((Q4_IN(y, 0x09, 0x0D) & ascii) | blank) << k;
            m->crlf |= Q4_PACK((Q4_IN(y, 0x0A, 0x0A) | Q4_IN(y, 0x0D, 0x0D)) & ascii) << k;
            m->blank |= Q4_PACK(blank) << k;
            m->apos |= Q4_PACK(Q4_IN(y, 0x27, 0x27) & ascii) << k;
            m->hi |= Q4_PACK(w & Q4_HIGH) << k;
        }
        m->other = ~(m->letter | m->digit | m->space | m->hi);
    }

    #if defined(__GNUC__)
    #define q4_ctz64(x) __builtin_ctzll(x)
    #define q4_clz64(x) __builtin_clzll(x)
    #else
    static int q4_ctz64(uint64_t x) { int k = 0; while (!(x & 1)) { x >>= 1; k++; } return k; }
    static int q4_clz64(uint64_t x) { int k = 0; while (!(x >> 63)) { x <<= 1; k++; } return k; }
    #endif

    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define Q4_MASK(e) ((uint64_t)(uint16_t)_mm_movemask_epi8(e))
    static inline void q4_classify(const unsigned char *p, q4_block *m) {
        int k;
        memset(m, 0, sizeof *m);
        for (k = 0; k < 64; k += 16) {
            /* signed compares: bytes >= 0x80 are negative, in no ASCII range */
            __m128i v = _mm_loadu_si128((const __m128i *)(p + k));
            __m128i lc = _mm_or_si128(v, _mm_set1_epi8(0x20));
            __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(lc, _mm_set1_epi8('a' - 1)),
                                           _mm_cmplt_epi8(lc, _mm_set1_epi8('z' + 1)));
            __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                          _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
            __m128i blank = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x20));
            __m128i space = _mm_or_si128(blank, _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(0x08)),
                                                              _mm_cmplt_epi8(v, _mm_set1_epi8(0x0E))));
            __m128i crlf = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x0A)),
                                        _mm_cmpeq_epi8(v, _mm_set1_epi8(0x0D)));
            m->letter |= Q4_MASK(letter) << k;
            m->digit |= Q4_MASK(digit) << k;
            m->space |= Q4_MASK(space) << k;
            m->crlf |= Q4_MASK(crlf) << k;
            m->blank |= Q4_MASK(blank) << k;
            m->apos |= Q4_MASK(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x27))) << k;
            m->hi |= Q4_MASK(v) << k;
        }
        m->other = ~(m->letter | m->digit | m->space | m->hi);
    }
    #else
    #define q4_classify q4_classify_words
    #endif
    """
    ctypedef struct q4_block:
        uint64_t letter, digit, space, crlf, other, blank, apos, hi
    void q4_classify(const unsigned char *p, q4_block *m)
    void q4_classify_words(const unsigned char *p, q4_block *m)
    int q4_ctz64(uint64_t x)      # x != 0
    int q4_clz64(uint64_t x)      # x != 0

cdef enum:
    BLOCK = 64


cdef inline Py_ssize_t classify_block(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                                      q4_block *m) noexcept nogil:
    """Masks of the 64 bytes from s[i] (past the text: unknown); returns the
    block's limit, the first unknown position (at most 63)."""
    cdef unsigned char tail[BLOCK]
    cdef uint64_t known
    if i + BLOCK <= n:
        q4_classify(s + i, m)
    else:
        memcpy(tail, s + i, n - i)
        memset(tail + (n - i), 0x80, BLOCK - (n - i))
        q4_classify(tail, m)
    m.hi |= (<uint64_t> 1) << 63
    known = ~m.hi
    m.letter &= known
    m.digit &= known
    m.space &= known
    m.crlf &= known
    m.other &= known
    return q4_ctz64(m.hi)


cdef inline uint64_t below(Py_ssize_t q) noexcept nogil:
    """Bits 0..q-1 (q <= 63)."""
    return ((<uint64_t> 1) << q) - 1


cdef inline uint64_t block_starts(const unsigned char *s, Py_ssize_t n, Py_ssize_t base,
                                  bint digit_runs) noexcept nogil:
    """The pre-tokens that start in the 64 bytes from s[base], a piece start
    whose byte is ASCII, as a bit mask: bit x set iff a piece starts at
    s[base + x]; only bits of positions the masks prove are set (none at or
    after the first unknown byte, nor in a whitespace run that reaches it).

    In ASCII text whether a piece starts at x depends on its neighbours only
    (bits shifted in at position 0 are as if a digit came before the block,
    which ends every piece, as the block's start does):
    * a digit: always (alternative 3); with digit_runs (Llama 3's \\p{N}{1,3}),
      the first of a run and every third after it;
    * an "other" byte: unless the byte before is "other" (the run goes on) or
      U+0020 (alternative 4 takes the space along);
    * a letter: when the byte before is a digit, CR/LF, or an "other" byte that
      does not start a piece (the "other" run ends here), or a letter ending a
      contraction; not after other whitespace (it is the letters' prefix) nor
      after an "other" byte that starts a piece (prefix, or a contraction);
    * whitespace: the CR/LF right after an "other" run belong to it; of the
      rest of a run, its first byte, the byte after its last CR/LF, and its
      last byte unless that is a CR/LF (given back by \\s+(?!\\S), or alone)."""
    cdef q4_block m
    cdef Py_ssize_t lim = classify_block(s, n, base, &m), cut, e, c, y
    cdef uint64_t last, nonspace, absorbed, spaces, plain, after_cr, landing, bad
    cdef uint64_t other_starts, starts, cands, digit_starts
    # a whitespace run that reaches lim may go on: nothing in it is proven
    cut = lim
    last = (<uint64_t> 1) << (lim - 1)
    if m.space & last:
        nonspace = ~m.space & (last - 1)
        cut = 64 - q4_clz64(nonspace) if nonspace else 0
    # CR/LF taken by an "other" run ([\r\n]* after the run), by carry propagation
    absorbed = m.crlf & ~(m.crlf + (((m.other & ~(m.other >> 1)) << 1) & m.crlf))
    spaces = m.space & ~absorbed
    plain = spaces & ~m.crlf
    after_cr = ((m.crlf & spaces) << 1) & plain & below(cut)
    if after_cr:
        # a run with CR/LF after non-CR/LF whitespace ("\n \n"): only its last
        # CR/LF ends a piece, which the masks do not tell; stop before the run
        landing = (plain + after_cr) & ~plain
        bad = landing & m.crlf
        if bad:
            c = 63 - q4_clz64(after_cr & below(q4_ctz64(bad)))
            cut = c if c < cut else cut
    other_starts = m.other & ~(m.other << 1) & ~(m.blank << 1)
    digit_starts = m.digit
    if digit_runs:
        # a run's groups of three from its first digit; a run at bit 0 starts
        # there (the block starts at a piece start)
        digit_starts = 0
        cands = m.digit & ~(m.digit << 1)
        while cands:
            y = q4_ctz64(cands)
            cands &= cands - 1
            e = y + q4_ctz64(~(m.digit >> y))  # the run's end (bit 63 is never a digit)
            while y < e:
                digit_starts |= (<uint64_t> 1) << y
                y += 3
    starts = (digit_starts | other_starts
              | (m.letter & ~((m.letter | (m.space & ~m.crlf) | other_starts) << 1))
              | (spaces & ~(spaces << 1)) | after_cr | (plain & ~(spaces >> 1)))
    # contractions: the letter right after one starts a piece
    cands = m.apos & other_starts & (m.letter >> 1) & below(cut)
    while cands:
        y = q4_ctz64(cands)
        cands &= cands - 1
        e = contraction_end(s, n, base + y + 1) - base
        if 0 < e < 63:
            starts |= m.letter & ((<uint64_t> 1) << e)
    return starts & below(cut)


cdef Py_ssize_t piece_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                          unsigned char letters) noexcept nogil:
    """End (exclusive byte offset) of the pre-token that starts at s[i], i < n."""
    if letters & BYTE_LEVEL:
        return byte_level_piece_end(s, n, i)
    return next_end(s, n, i, letters)


cdef inline bint ascii_ahead(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """Whether a block from s[i] is likely to prove a few pieces: its first
    16 bytes (those there are, near the end) are ASCII. In other scripts a
    block would stop at the first byte >= 0x80 and prove nothing."""
    cdef uint64_t w[2]
    if i + 16 <= n:
        memcpy(w, s + i, 16)
        return ((w[0] | w[1]) & 0x8080808080808080ULL) == 0
    while i < n:
        if s[i] >= 0x80:
            return False
        i += 1
    return True


cdef Py_ssize_t piece_ends(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, unsigned char letters,
                           Py_ssize_t *ends, Py_ssize_t cap) noexcept nogil:
    """Ends of the next pre-tokens from s[i] (i < n, cap >= 1) into ends[0..k),
    k <= cap, stopping early only at the end of the text; returns k >= 1."""
    cdef Py_ssize_t k = 0, last
    cdef uint64_t starts
    if letters & BYTE_LEVEL:  # GPT-2's pattern: one piece at a time (pyx/_byte_level.pyx)
        while True:
            i = byte_level_piece_end(s, n, i)
            ends[k] = i
            k += 1
            if i >= n or k >= cap:
                return k
    while True:
        # ASCII text: every piece a block proves; the block after starts at
        # the last of them, whose end it could not see.
        if ascii_ahead(s, n, i):
            starts = block_starts(s, n, i, letters & DIGIT_RUNS) & ~(<uint64_t> 1)
            if starts:
                last = i + 63 - q4_clz64(starts)
                while starts:
                    ends[k] = i + q4_ctz64(starts)
                    starts &= starts - 1
                    k += 1
                    if k >= cap:
                        return k
                i = last
                continue
        i = next_end(s, n, i, letters)
        ends[k] = i
        k += 1
        if i >= n or k >= cap:
            return k


# -- test and benchmark hooks ----------------------------------------------------

cdef Py_ssize_t scan_all(const unsigned char *s, Py_ssize_t n, unsigned char letters, Py_ssize_t cap,
                         int64_t *out) noexcept nogil:
    """Every piece end of s[0..n) into out (unless NULL): piece_end one piece
    at a time when cap is 0, else piece_ends cap at a time; returns how many."""
    cdef Py_ssize_t i = 0, count = 0, m, k
    cdef Py_ssize_t chunk[MAX_HOOK_CAP]
    while i < n:
        if cap == 0:
            i = piece_end(s, n, i, letters)
            chunk[0] = i
            m = 1
        else:
            m = piece_ends(s, n, i, letters, chunk, cap)
            i = chunk[m - 1]
        if out != NULL:
            for k in range(m):
                out[count + k] = chunk[k]
        count += m
    return count


cdef const unsigned char *hook_input(str text, Py_ssize_t cap, Py_ssize_t *n) except NULL:
    """The text's UTF-8 form (cached in the str object by CPython), cap checked."""
    if not 0 <= cap <= MAX_HOOK_CAP:
        raise ValueError(f"cap must be in 0..{MAX_HOOK_CAP}, got {cap}")
    return <const unsigned char *> PyUnicode_AsUTF8AndSize(text, n)


def ends(str text, bint marks=False, Py_ssize_t cap=64, bint digit_runs=False):
    """Test hook: the end offsets in the UTF-8 of `text` (no normalization) of
    its pre-tokens, as an int64 numpy array, found by piece_ends `cap` at a
    time (cap 0: piece_end one at a time); `marks` selects the Qwen3.5 pattern,
    `digit_runs` Llama 3's (numbers in runs of up to 3)."""
    import numpy

    cdef Py_ssize_t n, count
    cdef const unsigned char *s = hook_input(text, cap, &n)
    cdef unsigned char letters = ((Q4_L | Q4_M) if marks else Q4_L) | (DIGIT_RUNS if digit_runs else 0)
    out = numpy.empty(max(n, 1), dtype=numpy.int64)
    cdef int64_t[::1] view = out
    with nogil:
        count = scan_all(s, n, letters, cap, &view[0])
    return out[:count]


def split(str text, bint marks=False, Py_ssize_t cap=7, bint digit_runs=False):
    """Test hook: the pre-tokens of `text` as str pieces (see ends(); the small
    default cap puts chunk boundaries everywhere)."""
    data = text.encode("utf-8")
    pieces, start = [], 0
    for end in ends(text, marks, cap, digit_runs).tolist():
        pieces.append(data[start:end].decode("utf-8"))
        start = end
    return pieces


def count_pieces(str text, bint marks=False, Py_ssize_t cap=64):
    """Benchmark hook: the number of pre-tokens of `text` (see ends()), scanned
    without the GIL and without storing them."""
    cdef Py_ssize_t n, count
    cdef const unsigned char *s = hook_input(text, cap, &n)
    cdef unsigned char letters = (Q4_L | Q4_M) if marks else Q4_L
    with nogil:
        count = scan_all(s, n, letters, cap, NULL)
    return count


def block_masks(bytes data, bint portable=False):
    """Test hook: the class masks of 64 bytes (letter, digit, space, crlf,
    other, blank, apos, hi), by the SSE2 classifier where there is one, or by
    the 64-bit word one of other targets (`portable`)."""
    cdef q4_block m
    if len(data) != BLOCK:
        raise ValueError(f"need {BLOCK} bytes, got {len(data)}")
    if portable:
        q4_classify_words(data, &m)
    else:
        q4_classify(data, &m)
    return (m.letter, m.digit, m.space, m.crlf, m.other, m.blank, m.apos, m.hi)


def char_class(int cp):
    """Test hook: the patterns' class bits of code point cp (1 L, 2 N, 4 WS, 8 CRLF, 16 M)."""
    if cp < 0 or cp > 0x10FFFF:
        raise ValueError("code point out of range")
    return q4_cclass(<unsigned int> cp)


def byte_class(int b):
    """Test hook: q4_byte_class[b], the pre-tokenizer's per-byte table (128: b >= 0x80)."""
    if b < 0 or b > 0xFF:
        raise ValueError("byte out of range")
    return q4_byte_class[b]
