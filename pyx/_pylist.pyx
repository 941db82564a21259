# cython: language_level=3, boundscheck=False, wraparound=False
"""Python lists of ids, built without an allocation or a refcount write per
item: the ids' int objects are static, made once per process in one block,
at a fixed stride, like CPython's own small ints. An item is then the block's
address plus id * STRIDE, and putting it in a list writes nothing else.

Static means the objects are never freed: their refcount starts so high
(immortal on CPython 3.12 and later, 2**62 before) that the references a
list drops when it dies, which were never counted, cannot bring it to zero.
Builds whose objects carry more than a refcount (free-threaded, trace-refs)
get a real int per item instead."""
from cpython.list cimport PyList_New
from cpython.long cimport PyLong_FromLong
from cpython.ref cimport Py_INCREF, PyObject
from libc.stdint cimport int32_t, uint32_t
from libc.string cimport memcpy

from qwen4exp._native._alloc cimport q4_malloc_huge
from qwen4exp._native._idvec cimport IdVec

cdef extern from "Python.h":
    ctypedef struct PyListObject:
        PyObject **ob_item
    void Py_SET_REFCNT(PyObject *o, Py_ssize_t n)


cdef extern from *:
    """
    #if defined(Py_GIL_DISABLED) || defined(Py_TRACE_REFS)
    #define Q4_STATIC_INTS 0
    #define Q4_STATIC_REFCNT 0
    #elif defined(_Py_IMMORTAL_INITIAL_REFCNT)
    #define Q4_STATIC_INTS 1
    #define Q4_STATIC_REFCNT _Py_IMMORTAL_INITIAL_REFCNT
    #elif defined(_Py_IMMORTAL_REFCNT)
    #define Q4_STATIC_INTS 1
    #define Q4_STATIC_REFCNT _Py_IMMORTAL_REFCNT
    #else
    #define Q4_STATIC_INTS 1
    #define Q4_STATIC_REFCNT ((Py_ssize_t)1 << 62)
    #endif
    """
    bint Q4_STATIC_INTS
    Py_ssize_t Q4_STATIC_REFCNT


cdef extern from *:
    """
    #define q4_prefetch_write(p) __builtin_prefetch((p), 1, 3)
    """
    void q4_prefetch_write(const void *p) nogil


cdef enum:
    STRIDE = 32             # bytes per static int: a one- or two-digit int object fits


cdef class IdInts:
    """The static int objects 0..n-1 (len(self) == n); base is NULL where the
    build cannot have static objects."""

    def __len__(self):
        return self.n


_SHARED = None


def shared_id_ints(Py_ssize_t n):
    """IdInts covering at least 0..n-1, the same for every tokenizer of the
    process. A larger vocabulary gets a new, larger block; the old one stays,
    since lists made from it may still hold its objects."""
    global _SHARED
    if _SHARED is None or len(_SHARED) < n:
        _SHARED = _make_id_ints(n)
    return _SHARED


cdef IdInts _make_id_ints(Py_ssize_t n):
    cdef IdInts made = IdInts.__new__(IdInts)
    cdef Py_ssize_t i, size = 0
    cdef char *base
    cdef object one
    made.n = n
    made.base = NULL
    if not Q4_STATIC_INTS or n == 0 or (n - 1).__sizeof__() > STRIDE or (0).__sizeof__() > STRIDE:
        return made
    base = <char *> q4_malloc_huge(<size_t> n * STRIDE)
    if base == NULL:
        raise MemoryError("out of memory for the ids' int objects")
    for i in range(n):
        one = PyLong_FromLong(i)
        if i & (i - 1) == 0:  # the number of digits only grows at powers of two
            size = one.__sizeof__()
        memcpy(base + i * STRIDE, <PyObject *> one, <size_t> size)
        Py_SET_REFCNT(<PyObject *> (base + i * STRIDE), Q4_STATIC_REFCNT)
    made.base = base
    return made


cdef list idvec_to_list(IdVec *v, IdInts ints):
    """Python list of the ids (fill_items on the new list's empty slots)."""
    cdef list out = PyList_New(v.len)
    fill_items((<PyListObject *> out).ob_item, v, ints)
    return out


cdef void fill_items(PyObject **dst, IdVec *v, IdInts ints):
    """Store v's ids as references to int objects in dst[0:v.len]: the static
    ones where there are, new ints for the rest."""
    cdef Py_ssize_t k = 0, n = v.len
    cdef const int32_t *ids = v.data
    cdef char *base = ints.base
    cdef uint32_t limit = <uint32_t> ints.n if base != NULL else 0
    cdef object fresh
    while k < n:
        if limit:
            k = fill_static(dst, ids, k, n, base, limit)
        if k < n:  # an id without a static object
            fresh = PyLong_FromLong(ids[k])
            Py_INCREF(fresh)  # the reference dst[k] holds
            dst[k] = <PyObject *> fresh
            k += 1


cdef inline Py_ssize_t fill_static(PyObject **dst, const int32_t *ids, Py_ssize_t k, Py_ssize_t n,
                                   char *base, uint32_t limit) noexcept nogil:
    """dst[j] = the static int of ids[j] from k on, up to the first id without
    one (or n), a block of 64 at a time whose ids are checked first, so that
    the stores run without a branch; returns where it stopped.

    Each object's line is requested as it is stored: nothing reads the
    objects here, but the list's release writes (or, on 3.12+, reads) each
    one's refcount, and a list of fresh text names lines no cache holds;
    requested now, while this loop runs on, they are at hand when the caller
    drops the list (fresh code documents one call each: +5 to +17%)."""
    cdef Py_ssize_t j, stop
    cdef uint32_t over
    while k < n:
        stop = k + 64 if k + 64 <= n else n
        over = 0
        for j in range(k, stop):
            over |= <uint32_t> (<uint32_t> ids[j] >= limit)
        if over:
            while k < n and <uint32_t> ids[k] < limit:
                dst[k] = <PyObject *> (base + <size_t> ids[k] * STRIDE)
                k += 1
            return k
        for j in range(k, stop):
            dst[j] = <PyObject *> (base + <size_t> <uint32_t> ids[j] * STRIDE)
            q4_prefetch_write(dst[j])
        k = stop
    return k


def list_of(ids, bint static=True):
    """Test hook: the list idvec_to_list makes of the int32 ids, with the
    process's static ints (ids beyond them as new ints), or with none, as
    builds without static objects make it."""
    import numpy

    cdef int32_t[::1] view = numpy.ascontiguousarray(ids, dtype=numpy.int32)
    cdef IdVec v
    cdef IdInts ints = _SHARED if static and _SHARED is not None else IdInts.__new__(IdInts)
    v.data = &view[0] if view.shape[0] else NULL
    v.len = view.shape[0]
    v.cap = v.len
    return idvec_to_list(&v, ints)
