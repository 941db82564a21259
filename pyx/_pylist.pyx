# cython: language_level=3, boundscheck=False, wraparound=False
"""Python lists of ids: one shared int object per id (the tokenizer's
tuple), so a list costs a refcount write per item and no allocation."""
from cpython.list cimport PyList_New
from cpython.long cimport PyLong_FromLong
from cpython.ref cimport Py_INCREF, PyObject
from libc.stdint cimport int32_t, uint32_t

from qwen4exp._idvec cimport IdVec

cdef extern from "Python.h":
    ctypedef struct PyTupleObject:
        PyObject *ob_item[1]
    ctypedef struct PyListObject:
        PyObject **ob_item


cdef extern from *:
    """
    #define q4_prefetch_write(p) __builtin_prefetch((p), 1, 3)
    #define q4_prefetch_read(p) __builtin_prefetch((p), 0, 3)
    """
    void q4_prefetch_write(const void *p) nogil
    void q4_prefetch_read(const void *p) nogil


cdef enum:
    ITEM_AHEAD = 16         # idvec_to_list: tuple slots requested this many ids ahead
    OBJECT_AHEAD = 8        # and int objects (whose refcount is written) this many


cdef list idvec_to_list(IdVec *v, tuple id_objects):
    """Python list of the ids (fill_items on the new list's empty slots)."""
    cdef list out = PyList_New(v.len)
    fill_items(&(<PyListObject *> out).ob_item[0], v, id_objects)
    return out


cdef void fill_items(PyObject **dst, IdVec *v, tuple id_objects):
    """Store v's ids as new references to int objects in dst[0:v.len], sharing
    one int object per id (no allocation per item). Each item
    costs a write to its int's refcount, scattered over the vocabulary's int
    objects: the tuple slot and then the object are requested ahead, so that
    the writes do not wait on memory in turn."""
    cdef Py_ssize_t k, n = v.len, limit = len(id_objects)
    cdef PyObject **items = <PyObject **> &(<PyTupleObject *> id_objects).ob_item[0]
    cdef const int32_t *ids = v.data
    cdef PyObject *item
    cdef object fresh
    cdef int32_t t
    for k in range(n):
        if k + ITEM_AHEAD < n and <uint32_t> ids[k + ITEM_AHEAD] < <uint32_t> limit:
            q4_prefetch_read(&items[ids[k + ITEM_AHEAD]])
        if k + OBJECT_AHEAD < n and <uint32_t> ids[k + OBJECT_AHEAD] < <uint32_t> limit:
            q4_prefetch_write(items[ids[k + OBJECT_AHEAD]])
        t = ids[k]
        if <uint32_t> t < <uint32_t> limit:
            item = items[t]
            Py_INCREF(<object> item)
        else:
            fresh = PyLong_FromLong(t)
            Py_INCREF(fresh)
            item = <PyObject *> fresh
        dst[k] = item  # the reference taken above


_ID_OBJECTS = ()


def shared_id_objects(Py_ssize_t n):
    """A tuple of the ints 0..n-1 (or more), the same objects for every
    tokenizer of the process: a list of ids is built by taking a reference
    to each, a write to each int's refcount, so the ints should lie close
    together. Made once, early, they do; made again later in a heap
    fragmented by millions of freed objects, they scatter, and building
    lists measured 30% slower. A larger vocabulary extends the tuple,
    keeping the ints already made."""
    global _ID_OBJECTS
    cdef Py_ssize_t have = len(_ID_OBJECTS)
    if have < n:
        _ID_OBJECTS = _ID_OBJECTS + tuple(range(have, n))
    return _ID_OBJECTS
