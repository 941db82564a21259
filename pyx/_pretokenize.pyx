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
"""
from qwen4exp._unicode cimport q4_cclass, Q4_L, Q4_N, Q4_WS, Q4_CRLF, Q4_M

cdef enum:
    NOT_OTHER = Q4_N | Q4_WS          # with `letters`: what ends an "other" run
    NOT_PREFIX = Q4_L | Q4_N | Q4_CRLF


cdef inline unsigned char class_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t *next_i) noexcept nogil:
    """Class bits of the character starting at s[i]; next_i receives its end."""
    cdef unsigned char b = s[i]
    cdef unsigned int cp
    if b < 0x80:
        next_i[0] = i + 1
        return q4_cclass(b)
    if b < 0xE0:
        cp = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
        next_i[0] = i + 2
    elif b < 0xF0:
        cp = ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
        next_i[0] = i + 3
    else:
        cp = ((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F)
        next_i[0] = i + 4
    return q4_cclass(cp)


cdef inline Py_ssize_t letters_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t j,
                                    unsigned char letters) noexcept nogil:
    cdef Py_ssize_t nj
    while j < n:
        if not (class_at(s, j, &nj) & letters):
            break
        j = nj
    return j


cdef inline Py_ssize_t others_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t j,
                                   unsigned char not_other) noexcept nogil:
    cdef Py_ssize_t nj
    while j < n:
        if class_at(s, j, &nj) & not_other:
            break
        j = nj
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


cdef Py_ssize_t piece_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                          unsigned char letters) noexcept nogil:
    """End (exclusive byte offset) of the pre-token that starts at s[i], i < n."""
    cdef unsigned char not_other = letters | NOT_OTHER
    cdef Py_ssize_t i1, j, nj, last_start, crlf_end
    cdef unsigned char c0 = class_at(s, i, &i1)
    cdef unsigned char c
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
        return i1
    j = i
    if s[i] == c' ' and i1 < n and not (class_at(s, i1, &nj) & not_other):
        j = i1
    if not (class_at(s, j, &nj) & not_other):
        j = others_end(s, n, nj, not_other)
        while j < n and (s[j] == c'\r' or s[j] == c'\n'):
            j += 1
        return j
    # Here s[i] starts a whitespace run.
    j = i
    last_start = i
    crlf_end = -1
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


cdef Py_ssize_t piece_ends(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, unsigned char letters,
                           Py_ssize_t *ends, Py_ssize_t cap) noexcept nogil:
    """Ends of the next pieces from s[i] (i < n): at most cap of them, in ends; returns how many."""
    cdef Py_ssize_t k = 0
    while k < cap and i < n:
        i = piece_end(s, n, i, letters)
        ends[k] = i
        k += 1
    return k


def split(str text, bint marks=False):
    """Test hook: the pre-tokens of `text` (no normalization), as str pieces;
    `marks` selects the Qwen3.5 pattern."""
    cdef bytes data = text.encode("utf-8")
    cdef const unsigned char *s = data
    cdef Py_ssize_t n = len(data), i = 0, e
    cdef unsigned char letters = (Q4_L | Q4_M) if marks else Q4_L
    pieces = []
    while i < n:
        e = piece_end(s, n, i, letters)
        pieces.append(data[i:e].decode("utf-8"))
        i = e
    return pieces


def char_class(int cp):
    """Test hook: the patterns' class bits of code point cp (1 L, 2 N, 4 WS, 8 CRLF, 16 M)."""
    if cp < 0 or cp > 0x10FFFF:
        raise ValueError("code point out of range")
    return q4_cclass(<unsigned int> cp)
