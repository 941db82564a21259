# A growable int32 vector owned by native code (ids under construction).
from libc.stdint cimport int32_t
from libc.string cimport memcpy
from qwen4exp._native._alloc cimport q4_realloc, q4_free, doubled_capacity


cdef extern from *:
    """
    #include <string.h>
    #include <stdint.h>
    /* dst[0:n] = src[0:n] for the few ids of one piece without a call into
       libc: up to 8 ids in two overlapping 16-byte moves (or one by one
       below 4), reading and writing only the n ids; more through memcpy. */
    static inline void q4_copy_ids(int32_t *dst, const int32_t *src, Py_ssize_t n) {
        if (n >= 4 && n <= 8) {
            int32_t a[4], b[4];
            memcpy(a, src, 16);
            memcpy(b, src + n - 4, 16);
            memcpy(dst, a, 16);
            memcpy(dst + n - 4, b, 16);
        } else if (n < 4) {  /* not a loop: the compiler would make it a memcpy call */
            if (n > 0)
                dst[0] = src[0];
            if (n > 1)
                dst[1] = src[1];
            if (n > 2)
                dst[2] = src[2];
        } else {
            memcpy(dst, src, (size_t) n * sizeof(int32_t));
        }
    }
    """
    void copy_ids "q4_copy_ids" (int32_t *dst, const int32_t *src, Py_ssize_t n) nogil


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
