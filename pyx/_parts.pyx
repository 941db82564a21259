# cython: language_level=3, boundscheck=False, wraparound=False
"""The cut rule of encode()'s parts: boundaries in an NFC text that are both
piece boundaries of either Qwen pattern and stable NFC boundaries, so that
the parts' ids joined are the text's ids (tests/test_parts.py checks every
cut against the reference pre-tokenizer)."""
from libc.stdint cimport int64_t, uint8_t

from qwen4exp._native._pretokenize cimport class_at, BYTE_LEVEL
from qwen4exp._native._unicode cimport Q4_L, Q4_M, Q4_N


cdef inline bint is_part_boundary(const uint8_t *s, Py_ssize_t p, unsigned char letters) noexcept nogil:
    """Whether a part may start at s[p] (0 < p, a character start): a letter
    (of the pattern's letter runs) ends before it and it is neither a letter
    nor a mark nor a digit, or it is a letter after a line end. No piece of
    either pattern holds a letter followed by a non-letter (letter runs and
    contractions end in letters, the other alternatives hold none), nor a
    CR/LF followed by a letter; the character at p is a starter, so the cut
    is also a stable NFC boundary. Under ByteLevel's own pattern (BYTE_LEVEL in
    `letters`) only the first rule holds: there a whitespace run's last
    character is a piece of its own when a non-space follows it, so a part
    ending in "\n\n" would keep the two together."""
    cdef Py_ssize_t nxt, q = p - 1
    cdef unsigned char cls = class_at(s, p, &nxt)
    if cls & Q4_L:
        return s[p - 1] == c'\n' and not (letters & BYTE_LEVEL)
    if cls & (Q4_M | Q4_N):
        return False
    while q > 0 and (s[q] & 0xC0) == 0x80:  # back to the start of the character before
        q -= 1
    return (class_at(s, q, &nxt) & letters) != 0


cdef Py_ssize_t split_points(const uint8_t *s, Py_ssize_t n, Py_ssize_t count, unsigned char letters,
                             int64_t *bounds) noexcept nogil:
    """Fill bounds[0..k] with 0 < ... < n part boundaries (see encode_parts):
    for each of count - 1 evenly spaced targets, the first is_part_boundary
    within SPLIT_SCAN bytes after it, if any. Returns k, the number of parts
    (1 when no boundary is found)."""
    cdef Py_ssize_t k = 0, i, target, p, stop
    bounds[0] = 0
    for i in range(1, count):
        target = n * i // count
        if target <= bounds[k]:
            continue
        stop = min(n, target + SPLIT_SCAN)
        p = target
        while p < stop:
            if (s[p] & 0xC0) != 0x80 and is_part_boundary(s, p, letters):
                k += 1
                bounds[k] = p
                break
            p += 1
    k += 1
    bounds[k] = n
    return k
