# cython: language_level=3
"""Native helpers of `qwen4exp batch`'s JSONL path (src/qwen4exp/cli): where
the records of a block of input are (scan_lines), a block of some of them
(gather_lines), and the JSONL rows of list<int32> ids (write_jsonl_rows).
"""
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.buffer cimport PyBUF_READ
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy

import numpy as np

from qwen4exp._native._alloc cimport q4_malloc, q4_free

cdef extern from *:
    """
    /* The bytes bytes.strip() removes: a line of only these is blank. */
    static inline int q4_blank_byte(unsigned char b) {
        return b == ' ' || b == '\\t' || b == '\\n' || b == '\\r' || b == 0x0b || b == 0x0c;
    }
    """
    bint q4_blank_byte(uint8_t b) nogil


cdef bint holds_messages_key(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Whether p[0:n] holds the bytes "messages" (with the quotes)."""
    cdef const uint8_t *q
    cdef const uint8_t *end = p + n
    while end - p >= 10:
        q = <const uint8_t *> memchr(p, b'"', <size_t> (end - p - 9))
        if q == NULL:
            return False
        if memcmp(q + 1, b'messages"', 9) == 0:
            return True
        p = q + 1
    return False


def scan_lines(const uint8_t[::1] buf, Py_ssize_t max_records, Py_ssize_t max_bytes, bint eof):
    """The records of buf from its start: its non-blank lines (a blank line
    holds only the bytes bytes.strip() removes), up to max_records of them or
    up to the line that reaches max_bytes, and only whole lines (ending in a
    newline) unless eof. Returns (end, starts, ends, lines, slow, longest):
    end, the bytes taken (blank lines included); per record its start, its
    end (newline excluded), its line number counted from 0 and whether it
    takes the per-line path (its first byte that is not blank is not `{`, or
    it holds the bytes "messages" with the quotes: chats, and lines the
    Arrow JSON reader would treat otherwise than the strict decoder, such as
    one starting with a byte order mark); and the longest record's length."""
    cdef Py_ssize_t n = buf.shape[0], pos = 0, line = 0, count = 0, cap = 0, start, stop, i, longest = 0
    cdef const uint8_t *s = &buf[0] if n else NULL
    cdef const uint8_t *nl
    cdef int64_t[::1] sv
    cdef int64_t[::1] ev
    cdef int64_t[::1] lv
    cdef uint8_t[::1] slv
    with nogil:
        i = 0
        while i < n:  # an upper bound of the records: the lines
            nl = <const uint8_t *> memchr(s + i, b'\n', <size_t> (n - i))
            cap += 1
            if nl == NULL:
                break
            i = nl - s + 1
    cap = min(cap, max(max_records, 0))
    starts = np.empty(cap, dtype=np.int64)
    ends = np.empty(cap, dtype=np.int64)
    lines = np.empty(cap, dtype=np.int64)
    slow = np.empty(cap, dtype=np.uint8)
    if cap:
        sv, ev, lv, slv = starts, ends, lines, slow
    with nogil:
        while pos < n and count < cap and pos < max_bytes:
            nl = <const uint8_t *> memchr(s + pos, b'\n', <size_t> (n - pos))
            if nl == NULL and not eof:
                break
            stop = nl - s if nl != NULL else n
            start = pos
            i = start
            while i < stop and q4_blank_byte(s[i]):
                i += 1
            if i < stop:
                sv[count] = start
                ev[count] = stop
                lv[count] = line
                slv[count] = s[i] != b'{' or holds_messages_key(s + i, stop - i)
                longest = max(longest, stop - start)
                count += 1
            line += 1
            pos = stop + 1 if nl != NULL else n
        if count == cap and pos < n:  # blank lines right after the last record are taken with it
            while pos < n:
                nl = <const uint8_t *> memchr(s + pos, b'\n', <size_t> (n - pos))
                if nl == NULL and not eof:
                    break
                stop = nl - s if nl != NULL else n
                i = pos
                while i < stop and q4_blank_byte(s[i]):
                    i += 1
                if i < stop:
                    break
                pos = stop + 1 if nl != NULL else n
    return pos, starts[:count], ends[:count], lines[:count], slow[:count].astype(bool), longest


def gather_lines(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] ends):
    """The lines buf[starts[k]:ends[k]] joined, each followed by a newline."""
    cdef Py_ssize_t k, m = starts.shape[0], total = 0, at = 0
    for k in range(m):
        if not 0 <= starts[k] <= ends[k] <= buf.shape[0]:
            raise ValueError("a line lies outside the buffer")
        total += ends[k] - starts[k] + 1
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char *dst = PyBytes_AS_STRING(out)
    with nogil:
        for k in range(m):
            memcpy(dst + at, &buf[0] + starts[k], <size_t> (ends[k] - starts[k]))
            at += ends[k] - starts[k]
            dst[at] = b'\n'
            at += 1
    return out


cdef inline char *write_int(char *p, int64_t v) noexcept nogil:
    """v in decimal at p; returns the end."""
    cdef char tmp[24]
    cdef int k = 0
    cdef uint64_t u
    if v < 0:
        p[0] = b'-'
        p += 1
        u = <uint64_t> (-(v + 1)) + 1
    else:
        u = <uint64_t> v
    while True:
        tmp[k] = <char> (48 + u % 10)
        k += 1
        u //= 10
        if u == 0:
            break
    while k:
        k -= 1
        p[0] = tmp[k]
        p += 1
    return p



cdef enum:
    WRITE_PIECE = 1 << 20   # write_jsonl_rows fills and writes this many bytes at a time
    ROW_FIXED = 72          # a row's bytes besides its ids: keys, brackets, index, length, "}\n"
    ID_MAX = 12             # an id's bytes at most: sign, 10 digits, comma


cdef inline Py_ssize_t row_bound(const int32_t *offsets, Py_ssize_t k, Py_ssize_t extra) noexcept nogil:
    return ROW_FIXED + <Py_ssize_t> (offsets[k + 1] - offsets[k]) * ID_MAX + extra


def write_jsonl_rows(f, const int64_t[::1] index, const int32_t[::1] offsets, const int32_t[::1] values,
                     list suffixes=None):
    """Write `{"index":I,"ids":[...],"length":N}` lines, one per row, to the
    binary file f: row k is index[k] and ids values[offsets[k]:offsets[k + 1]]
    (offsets as a list<int32> array's, its first entry where its rows
    start); suffixes (bytes, one per row) go before each closing brace.
    The rows go through one buffer of WRITE_PIECE bytes, written each time
    it is full (a longer row through a buffer of its own), so a chunk's
    text is never held whole: a batch job's memory does not swing by the
    size of its JSONL output. Returns the number of bytes written."""
    cdef Py_ssize_t m = index.shape[0], k = 0, j, written = 0, extra
    cdef const int32_t *ids = &values[0] if values.shape[0] else NULL
    cdef char *buf
    cdef char *p
    cdef bytes suffix
    if offsets.shape[0] != m + 1:
        raise ValueError("offsets must have one entry more than index")
    if m and not (0 <= offsets[0] and offsets[m] <= values.shape[0]):
        raise ValueError("offsets lie outside values")
    for j in range(m):
        if offsets[j + 1] < offsets[j]:
            raise ValueError("offsets must not decrease")
    if suffixes is not None and len(suffixes) != m:
        raise ValueError("suffixes must have one entry per row")
    buf = <char *> q4_malloc(WRITE_PIECE)
    if buf == NULL:
        raise MemoryError("out of memory writing JSONL rows")
    try:
        while k < m:
            p = buf
            if suffixes is None:
                with nogil:
                    while k < m and (p - buf) + row_bound(&offsets[0], k, 0) <= WRITE_PIECE:
                        p = write_plain_row(p, index[k], ids, offsets[k], offsets[k + 1])
                        k += 1
            else:
                while k < m:
                    suffix = suffixes[k]
                    extra = len(suffix)
                    if (p - buf) + row_bound(&offsets[0], k, extra) > WRITE_PIECE:
                        break
                    p = write_suffixed_row(p, index[k], ids, offsets[k], offsets[k + 1], suffix)
                    k += 1
            if p != buf:
                written += write_out(f, buf, p - buf)
            else:  # row k alone does not fit the buffer
                written += write_long_row(f, index[k], ids, &offsets[0], k,
                                          None if suffixes is None else suffixes[k])
                k += 1
        return written
    finally:
        q4_free(buf)


cdef inline char *write_plain_row(char *p, int64_t index, const int32_t *ids, int32_t a, int32_t b) noexcept nogil:
    p = write_row(p, index, ids, a, b)
    memcpy(p, b'}\n', 2)
    return p + 2


cdef inline char *write_suffixed_row(char *p, int64_t index, const int32_t *ids, int32_t a, int32_t b,
                                     bytes suffix):
    p = write_row(p, index, ids, a, b)
    memcpy(p, PyBytes_AS_STRING(suffix), <size_t> len(suffix))
    p += len(suffix)
    memcpy(p, b'}\n', 2)
    return p + 2


cdef Py_ssize_t write_long_row(f, int64_t index, const int32_t *ids, const int32_t *offsets, Py_ssize_t k,
                               bytes suffix) except -1:
    """One row longer than the shared buffer, through a buffer of its own."""
    cdef Py_ssize_t extra = len(suffix) if suffix is not None else 0
    cdef char *own = <char *> q4_malloc(<size_t> row_bound(offsets, k, extra))
    cdef char *p
    if own == NULL:
        raise MemoryError("out of memory writing a JSONL row")
    try:
        if suffix is None:
            p = write_plain_row(own, index, ids, offsets[k], offsets[k + 1])
        else:
            p = write_suffixed_row(own, index, ids, offsets[k], offsets[k + 1], suffix)
        return write_out(f, own, p - own)
    finally:
        q4_free(own)


cdef Py_ssize_t write_out(f, char *p, Py_ssize_t n) except -1:
    """f.write of p[0:n] without copying it into a bytes object first; the
    view is released after, so nothing can read the buffer once it is freed."""
    view = PyMemoryView_FromMemory(p, n, PyBUF_READ)
    try:
        f.write(view)
    finally:
        view.release()
    return n


cdef inline char *write_row(char *p, int64_t index, const int32_t *values, int32_t a, int32_t b) noexcept nogil:
    """One row up to its closing brace: index, ids values[a:b], length."""
    cdef int32_t j
    memcpy(p, b'{"index":', 9)
    p = write_int(p + 9, index)
    memcpy(p, b',"ids":[', 8)
    p += 8
    for j in range(a, b):
        if j > a:
            p[0] = b','
            p += 1
        p = write_int(p, values[j])
    memcpy(p, b'],"length":', 11)
    return write_int(p + 11, b - a)
