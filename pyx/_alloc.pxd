# The native core's one allocator: every native allocation goes through here
# so that tests can make the k-th one fail (docs/FORMAT.md, Transactions).
from libc.stdint cimport int64_t

cdef void *q4_malloc(size_t n) noexcept nogil
cdef void *q4_realloc(void *p, size_t n) noexcept nogil
cdef void q4_free(void *p) noexcept nogil
