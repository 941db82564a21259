# cython: language_level=3
"""Exact atom resolution for TRUSTED_CONTROL segments.

A control segment is accepted only if it splits exactly into atom spellings;
the split is found by dynamic programming over byte positions (so it is exact
even for atom sets where one spelling is a prefix of another) and is linear
in the segment length for a fixed table.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp, memcpy, memset
from qwen4exp._native._alloc cimport q4_malloc, q4_free
from qwen4exp._native._idvec cimport IdVec, idvec_reserve


cdef int atoms_init(AtomTable *t, const uint8_t *blob, const int64_t *offsets,
                    const int32_t *ids, Py_ssize_t n) noexcept nogil:
    memset(t, 0, sizeof(AtomTable))
    cdef size_t blob_len = <size_t> offsets[n]
    t.blob = <uint8_t *> q4_malloc(blob_len)
    t.offsets = <int64_t *> q4_malloc(<size_t> (n + 1) * sizeof(int64_t))
    t.ids = <int32_t *> q4_malloc(<size_t> n * sizeof(int32_t))
    if t.blob == NULL or t.offsets == NULL or t.ids == NULL:
        atoms_free(t)
        return -1
    memcpy(t.blob, blob, blob_len)
    memcpy(t.offsets, offsets, <size_t> (n + 1) * sizeof(int64_t))
    memcpy(t.ids, ids, <size_t> n * sizeof(int32_t))
    t.n = n
    return 0


cdef void atoms_free(AtomTable *t) noexcept nogil:
    q4_free(t.blob)
    q4_free(t.offsets)
    q4_free(t.ids)
    memset(t, 0, sizeof(AtomTable))


cdef inline bint atom_at(const AtomTable *t, Py_ssize_t a, const uint8_t *s, Py_ssize_t n,
                         Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t length = t.offsets[a + 1] - t.offsets[a]
    return length > 0 and p + length <= n and memcmp(s + p, t.blob + t.offsets[a], <size_t> length) == 0


cdef inline bint atom_at_quick(const AtomTable *t, Py_ssize_t a, const uint8_t *s, Py_ssize_t n,
                               Py_ssize_t p) noexcept nogil:
    # atom_at, rejecting on the second and last bytes before a memcmp (the
    # spellings share their first byte)
    cdef Py_ssize_t length = t.offsets[a + 1] - t.offsets[a]
    cdef const uint8_t *spelling = t.blob + t.offsets[a]
    if length < 2 or p + length > n:
        return atom_at(t, a, s, n, p)
    return (s[p + 1] == spelling[1] and s[p + length - 1] == spelling[length - 1]
            and memcmp(s + p, spelling, <size_t> length) == 0)


cdef int atoms_parse_forced(const AtomTable *t, const uint8_t *s, Py_ssize_t n,
                            IdVec *out) noexcept nogil:
    """The common case: exactly one atom matches at each step and they end at n.
    Then that split is the only one, so it is the answer. Returns 1 if it
    applied (ids appended), 0 if the general parse must decide (out as it
    was), RC_NO_MEMORY."""
    cdef Py_ssize_t p = 0, a, found, start = out.len
    while p < n:
        found = -1
        for a in range(t.n):
            if atom_at_quick(t, a, s, n, p):
                if found >= 0:
                    out.len = start
                    return 0  # two spellings match here: ambiguous prefix
                found = a
        if found < 0:
            out.len = start
            return 0
        if idvec_reserve(out, 1) < 0:
            return RC_NO_MEMORY
        out.data[out.len] = t.ids[found]
        out.len += 1
        p += t.offsets[found + 1] - t.offsets[found]
    return 1


cdef int atoms_parse(const AtomTable *t, const uint8_t *s, Py_ssize_t n, IdVec *out,
                     Py_ssize_t *bad_offset) noexcept nogil:
    """Append the atom ids spelling s[0:n] exactly.

    RC_UNKNOWN_CONTROL with *bad_offset = the first byte no parse can get past
    when s is not a concatenation of atoms; RC_NO_MEMORY if allocation
    failed (then `out` may hold a partial result: callers discard it).
    """
    cdef uint8_t *tail_ok   # tail_ok[p]: s[p:n] splits into atoms
    cdef Py_ssize_t p, a, reach = 0
    cdef int forced = atoms_parse_forced(t, s, n, out)
    if forced != 0:
        return RC_OK if forced > 0 else forced
    tail_ok = <uint8_t *> q4_malloc(<size_t> n + 1)
    if tail_ok == NULL:
        return RC_NO_MEMORY
    memset(tail_ok, 0, <size_t> n + 1)
    tail_ok[n] = 1
    p = n - 1
    while p >= 0:
        for a in range(t.n):
            if atom_at(t, a, s, n, p) and tail_ok[p + t.offsets[a + 1] - t.offsets[a]]:
                tail_ok[p] = 1
                break
        p -= 1
    if not tail_ok[0]:
        # Report the furthest position a forward parse of atoms reaches.
        p = 0
        while p < n:
            for a in range(t.n):
                if atom_at(t, a, s, n, p):
                    reach = p + t.offsets[a + 1] - t.offsets[a]
                    break
            else:
                break
            p = reach
        bad_offset[0] = p
        q4_free(tail_ok)
        return RC_UNKNOWN_CONTROL
    # Forward walk choosing, at each step, an atom whose tail is parseable.
    p = 0
    while p < n:
        for a in range(t.n):
            if atom_at(t, a, s, n, p) and tail_ok[p + t.offsets[a + 1] - t.offsets[a]]:
                if idvec_reserve(out, 1) < 0:
                    q4_free(tail_ok)
                    return RC_NO_MEMORY
                out.data[out.len] = t.ids[a]
                out.len += 1
                p += t.offsets[a + 1] - t.offsets[a]
                break
    q4_free(tail_ok)
    return RC_OK
