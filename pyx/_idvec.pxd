# A growable int32 vector owned by native code (ids under construction).
from libc.stdint cimport int32_t
from libc.string cimport memcpy
from qwen4exp._alloc cimport q4_realloc, q4_free, doubled_capacity


cdef struct IdVec:
    int32_t *data
    Py_ssize_t len
    Py_ssize_t cap


cdef inline int idvec_reserve(IdVec *v, Py_ssize_t extra) noexcept nogil:
    """Make room for `extra` more ids; -1 (nothing changed) if allocation fails."""
    cdef Py_ssize_t need = v.len + extra
    cdef Py_ssize_t cap
    cdef int32_t *grown
    if need <= v.cap:
        return 0
    cap = doubled_capacity(v.cap, need, 64)
    grown = <int32_t *> q4_realloc(v.data, <size_t> cap * sizeof(int32_t))
    if grown == NULL:
        return -1
    v.data = grown
    v.cap = cap
    return 0


cdef inline int idvec_extend(IdVec *v, const int32_t *ids, Py_ssize_t n) noexcept nogil:
    if idvec_reserve(v, n) < 0:
        return -1
    memcpy(v.data + v.len, ids, <size_t> n * sizeof(int32_t))
    v.len += n
    return 0


cdef inline void idvec_free(IdVec *v) noexcept nogil:
    q4_free(v.data)
    v.data = NULL
    v.len = 0
    v.cap = 0
