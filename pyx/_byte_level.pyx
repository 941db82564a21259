# cython: language_level=3
"""ByteLevel's own split (tokenizers' `use_regex`, GPT-2's pattern), matched
the way Oniguruma matches it, for the vocabularies of qwen4exp.vocab.pipeline:

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

Alternatives are tried in order at each position, the first that matches wins:

1. the seven contractions, case as written (no case folding, unlike Qwen's);
2. - 4. a run of letters, of numbers, or of "other" characters (neither \\s
   nor L nor N), each optionally after one U+0020; every character that is
   not \\s is in exactly one of the three classes, so a U+0020 before any
   non-space joins the run that follows it;
5. `\\s+(?!\\S)`: a whitespace run up to the end of the text, or all but its
   last character when a non-space follows (nothing when that leaves it empty);
6. `\\s+`: then a single whitespace character.

An apostrophe inside an "other" run stays in it: contractions are only tried
where a match starts. Classes come from the tables of the Qwen scanner
(unicode_tables.h, tested against the reference per code point). Input is
UTF-8 from a str (valid by construction).
"""
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int64_t, uint32_t

from qwen4exp._native._unicode cimport q4_cclass, Q4_L, Q4_N, Q4_WS

cdef enum:
    OTHER = 0  # neither Q4_L, Q4_N nor Q4_WS
    HIGH = 255  # ASCII_CLASS: a byte >= 0x80, decoded


# The class of each ASCII byte (HIGH above): runs of ASCII text are stepped over
# one table load a byte, without decoding.
cdef unsigned char ASCII_CLASS[256]


cdef void fill_ascii_class() noexcept:
    cdef int b
    cdef unsigned char c
    for b in range(256):
        if b >= 0x80:
            ASCII_CLASS[b] = HIGH
            continue
        c = q4_cclass(<uint32_t> b)
        ASCII_CLASS[b] = Q4_WS if c & Q4_WS else Q4_L if c & Q4_L else Q4_N if c & Q4_N else OTHER


fill_ascii_class()


cdef inline Py_ssize_t char_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, unsigned char *cls) noexcept nogil:
    """The class (Q4_L, Q4_N, Q4_WS or OTHER) of the character at byte i, and its length."""
    cdef unsigned char b = s[i]
    cdef uint32_t cp
    cdef Py_ssize_t k
    cdef unsigned char c
    if b < 0x80:
        cls[0] = ASCII_CLASS[b]
        return 1
    elif b < 0xE0:
        cp = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
        k = 2
    elif b < 0xF0:
        cp = ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
        k = 3
    else:
        cp = ((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F)
        k = 4
    c = q4_cclass(cp)
    # Q4_CRLF and Q4_M ride along in the tables: \r \n are also \s; a mark is
    # neither L nor N here (GPT-2's pattern has no \p{M})
    if c & Q4_WS:
        cls[0] = Q4_WS
    elif c & Q4_L:
        cls[0] = Q4_L
    elif c & Q4_N:
        cls[0] = Q4_N
    else:
        cls[0] = OTHER
    return k


cdef extern from * nogil:
    """
    #include <string.h>
    /* Eight bytes at a time: 0x80 in each byte of w that is an ASCII letter
     * (b | 0x20 in 'a'..'z' is exactly A-Z and a-z), or a space. */
    #define Q4B_ONES 0x0101010101010101ULL
    #define Q4B_HIGH 0x8080808080808080ULL
    static inline unsigned long long q4b_load8(const unsigned char *p) {
        unsigned long long w; memcpy(&w, p, 8); return w;
    }
    static inline unsigned long long q4b_letters(unsigned long long w) {
        unsigned long long y = (w | (Q4B_ONES * 0x20)) & ~Q4B_HIGH;
        return (y + Q4B_ONES * (0x80 - 0x61)) & ~(y + Q4B_ONES * (0x7F - 0x7A)) & ~w & Q4B_HIGH;
    }
    static inline unsigned long long q4b_spaces(unsigned long long w) {
        unsigned long long x = w ^ (Q4B_ONES * 0x20);   /* 0 where a space */
        return ~(((x & ~Q4B_HIGH) + ~Q4B_HIGH) | x) & Q4B_HIGH;
    }
    static inline int q4b_ctz(unsigned long long x) { return __builtin_ctzll(x); }
    """
    unsigned long long q4b_load8(const unsigned char *p)
    unsigned long long q4b_letters(unsigned long long w)
    unsigned long long q4b_spaces(unsigned long long w)
    int q4b_ctz(unsigned long long x)
    const unsigned long long Q4B_HIGH


cdef inline Py_ssize_t ascii_run(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, unsigned char cls) noexcept nogil:
    """Past the ASCII letters (cls Q4_L) or spaces (cls Q4_WS) from byte i, eight
    bytes a step while eight remain: where the run may go on byte by byte."""
    cdef unsigned long long stop
    while i + 8 <= n:
        stop = ~(q4b_letters(q4b_load8(s + i)) if cls == Q4_L else q4b_spaces(q4b_load8(s + i))) & Q4B_HIGH
        if stop:
            return i + (q4b_ctz(stop) >> 3)
        i += 8
    return i


cdef inline Py_ssize_t run_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, unsigned char cls) noexcept nogil:
    """The end of the run of class cls that starts at byte i."""
    cdef unsigned char c
    cdef Py_ssize_t k
    if cls == Q4_L:
        i = ascii_run(s, n, i, cls)
    while i < n:
        c = ASCII_CLASS[s[i]]
        if c == cls:  # an ASCII character of the run
            i += 1
            continue
        if c != HIGH:
            break
        k = char_at(s, n, i, &c)
        if c != cls:
            break
        i += k
    return i


cdef inline Py_ssize_t contraction_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """The end of a contraction at i (s[i] is an apostrophe), or -1."""
    cdef unsigned char a, b
    if i + 1 >= n:
        return -1
    a = s[i + 1]
    if a == b's' or a == b't' or a == b'm' or a == b'd':
        return i + 2
    if i + 2 >= n:
        return -1
    b = s[i + 2]
    if (a == b'r' and b == b'e') or (a == b'v' and b == b'e') or (a == b'l' and b == b'l'):
        return i + 3
    return -1


cdef Py_ssize_t piece_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """The end of the piece that starts at byte i < n."""
    cdef unsigned char c, d
    cdef Py_ssize_t k, e, last
    if s[i] == b"'":
        e = contraction_end(s, n, i)
        if e >= 0:
            return e
    k = char_at(s, n, i, &c)
    if c != Q4_WS:
        return run_end(s, n, i + k, c)
    if s[i] == b' ' and i + 1 < n:
        char_at(s, n, i + 1, &d)
        if d != Q4_WS:  # alternatives 2 - 4 with their optional space
            return run_end(s, n, i + 1, d)
    # alternatives 5 and 6: the whitespace run [i, e), and where its last character starts
    e = i + k
    last = i
    while e < n:
        if s[e] == b' ':  # spaces (indentation) eight at a time
            e = ascii_run(s, n, e + 1, Q4_WS)
            last = e - 1
            continue
        k = char_at(s, n, e, &c)
        if c != Q4_WS:
            break
        last = e
        e += k
    if e == n or last == i:  # to the end of the text, or one whitespace character (6)
        return e
    return last  # all but the last whitespace character (5)


cdef Py_ssize_t scan(const unsigned char *s, Py_ssize_t n, int64_t *ends) noexcept nogil:
    """Fill ends with every piece's end; the number of pieces."""
    cdef Py_ssize_t i = 0, count = 0
    while i < n:
        i = piece_end(s, n, i)
        ends[count] = i
        count += 1
    return count


def byte_level_ends(str text):
    """(the UTF-8 of text, an int64 numpy array of its pieces' byte ends)."""
    import numpy

    cdef Py_ssize_t n, count
    cdef const unsigned char *s = <const unsigned char *> PyUnicode_AsUTF8AndSize(text, &n)
    out = numpy.empty(max(n, 1), dtype=numpy.int64)
    cdef int64_t[::1] view = out
    with nogil:
        count = scan(s, n, &view[0])
    return s[:n], out[:count]
