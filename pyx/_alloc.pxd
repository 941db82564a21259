# The native core's one allocator: every native allocation (and every native
# thread and lock, which are resources too) goes through here so that tests
# can make the k-th one fail (docs/RELIABILITY.md, fault injection).
from libc.stdint cimport int64_t

cdef void *q4_malloc(size_t n) noexcept nogil
cdef void *q4_realloc(void *p, size_t n) noexcept nogil
cdef void *q4_malloc_huge(size_t n) noexcept nogil
cdef void q4_free_huge(void *p, size_t n) noexcept nogil
cdef void q4_drop_huge(void *p, size_t n) noexcept nogil
cdef void q4_free(void *p) noexcept nogil


cdef inline Py_ssize_t doubled_capacity(Py_ssize_t cap, Py_ssize_t need, Py_ssize_t first) noexcept nogil:
    """The capacity a buffer of `cap` grows to for `need` items: doubled from
    `cap` (or from `first` when empty) until it holds them."""
    cap = cap * 2 if cap else first
    while cap < need:
        cap *= 2
    return cap

ctypedef void *q4_lock
ctypedef void (*q4_thread_fn)(void *) noexcept nogil

cdef bint q4_start_thread(q4_thread_fn fn, void *arg) noexcept nogil
cdef q4_lock q4_lock_new() noexcept nogil
cdef void q4_lock_free(q4_lock lock) noexcept nogil
cdef void q4_lock_take(q4_lock lock) noexcept nogil
cdef bint q4_lock_take_for(q4_lock lock, long long microseconds) noexcept nogil
cdef void q4_lock_give(q4_lock lock) noexcept nogil
