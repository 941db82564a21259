# Python lists of ids, built from native id vectors (see _pylist.pyx).
from cpython.ref cimport PyObject
from qwen4exp._idvec cimport IdVec

cdef list idvec_to_list(IdVec *v, tuple id_objects)
cdef void fill_items(PyObject **dst, IdVec *v, tuple id_objects)
