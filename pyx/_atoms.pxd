# The special-atom table: exact spellings of added tokens -> ids. A
# TRUSTED_CONTROL segment must be exactly a concatenation of atoms.
from libc.stdint cimport int32_t, int64_t, uint8_t
from qwen4exp._native._idvec cimport IdVec
from qwen4exp._native._faults cimport RC_OK, RC_NO_MEMORY, RC_UNKNOWN_CONTROL

cdef struct AtomTable:
    uint8_t *blob           # all spellings, concatenated (owned)
    int64_t *offsets        # n + 1 offsets into blob (owned)
    int32_t *ids            # n ids (owned)
    Py_ssize_t n

cdef int atoms_init(AtomTable *t, const uint8_t *blob, const int64_t *offsets,
                    const int32_t *ids, Py_ssize_t n) noexcept nogil
cdef void atoms_free(AtomTable *t) noexcept nogil
cdef int atoms_parse(const AtomTable *t, const uint8_t *s, Py_ssize_t n, IdVec *out,
                     Py_ssize_t *bad_offset) noexcept nogil
