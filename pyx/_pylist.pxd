# Python lists of ids, built from native id vectors (see _pylist.pyx).
from cpython.ref cimport PyObject
from qwen4exp._native._idvec cimport IdVec

cdef class IdInts:
    cdef char *base        # n static int objects, STRIDE bytes apart; NULL: none
    cdef Py_ssize_t n

cdef list idvec_to_list(IdVec *v, IdInts ints)
cdef void fill_items(PyObject **dst, IdVec *v, IdInts ints)
