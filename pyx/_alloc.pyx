# cython: language_level=3, boundscheck=False, wraparound=False
"""Allocator, native threads and locks, with a test-only failure switch
(docs/RELIABILITY.md, fault injection).

`fail_allocation(k)` arms the switch: counting from then, the k-th call of
q4_malloc/q4_realloc/q4_lock_new returns NULL (once), or the k-th
q4_start_thread does not start its thread. `fail_allocation(0)` disarms it.
`allocations_seen()` tells how many allocations were counted since arming
(arm with a huge k to only count), so a test can sweep k over every
allocation a representative call makes.

The switch is out of reach of production callers: it only works in a process
whose environment had QWEN4EXP_FAULT_INJECTION=1 when qwen4exp was first
imported (tests/conftest.py and tools/run_sanitizers.sh set it); anywhere else
both hooks raise RuntimeError and the allocator never fails on purpose.
"""
import os

from libc.stdlib cimport malloc, realloc, free
from libc.stdint cimport int64_t

cdef extern from *:
    """
    #define q4_atomic_inc(p) __atomic_add_fetch((p), 1, __ATOMIC_RELAXED)
    """
    int64_t q4_atomic_inc(int64_t *p) nogil

cdef extern from "pythread.h":
    # Python's portable native threads and locks: usable without the GIL and
    # without a Python thread state; waits restart after signals (never EINTR).
    ctypedef void *PyThread_type_lock
    unsigned long PyThread_start_new_thread(q4_thread_fn fn, void *arg) nogil
    PyThread_type_lock PyThread_allocate_lock() nogil
    void PyThread_free_lock(PyThread_type_lock lock) nogil
    int PyThread_acquire_lock(PyThread_type_lock lock, int waitflag) nogil
    int PyThread_acquire_lock_timed(PyThread_type_lock lock, long long microseconds, int intr_flag) nogil
    void PyThread_release_lock(PyThread_type_lock lock) nogil

cdef int64_t _fail_at = 0
cdef int64_t _count = 0
# Read once, at import: setting the variable later does not arm anything.
cdef bint _enabled = os.environ.get("QWEN4EXP_FAULT_INJECTION") == "1"


cdef inline bint _should_fail() noexcept nogil:
    global _count
    if _fail_at == 0:
        return False
    # Relaxed atomic increment: threaded callers may share the switch.
    return q4_atomic_inc(&_count) == _fail_at


cdef void *q4_malloc(size_t n) noexcept nogil:
    if _should_fail():
        return NULL
    return malloc(n if n else 1)


cdef extern from *:
    """
    #include <stdlib.h>
    #include <stdint.h>
    #include <string.h>
    #include <sys/mman.h>
    /* Tables probed at random (merge table, piece caches). From 1 MiB up they
       get their own mapping, 2 MiB aligned and advised as huge pages: from
       malloc, a large block is often carved out of memory freed earlier and
       already backed by 4 KiB pages, whose random probes miss the TLB.
       Smaller ones are 64-byte aligned from malloc. Either way the block
       is zeroed (a fresh mapping is, page by page as it is first touched).
       q4_huge_release needs the same n.
       A released mapping is kept (up to Q4_SPARE_BYTES, Q4_SPARE_MAX of them)
       for the next request of its size, zeroed then: in a VM the first write
       to memory the process never had costs about 2.5 ms a MiB, a rewrite of
       memory it has about 0.04, and a new tokenizer's worker caches are 5 MiB.
       The spares' lock is only ever tried: whoever finds it taken maps or
       unmaps as if there were no spares (nothing waits, not even after a
       fork). */
    #define Q4_HUGE ((size_t) 1 << 21)
    #define Q4_SPARE_MAX 16
    #define Q4_SPARE_BYTES ((size_t) 64 << 20)
    static void *q4_spare_p[Q4_SPARE_MAX];
    static size_t q4_spare_n[Q4_SPARE_MAX];
    static size_t q4_spare_total;
    static int q4_spare_lock;
    static int q4_spare_try(void) { return !__atomic_exchange_n(&q4_spare_lock, 1, __ATOMIC_ACQUIRE); }
    static void q4_spare_done(void) { __atomic_store_n(&q4_spare_lock, 0, __ATOMIC_RELEASE); }
    static void *q4_spare_take(size_t n) {
        void *p = NULL;
        if (!q4_spare_try())
            return NULL;
        for (int i = 0; i < Q4_SPARE_MAX; i++)
            if (q4_spare_p[i] != NULL && q4_spare_n[i] == n) {
                p = q4_spare_p[i];
                q4_spare_p[i] = NULL;
                q4_spare_total -= n;
                break;
            }
        q4_spare_done();
        if (p != NULL)
            memset(p, 0, n);
        return p;
    }
    static int q4_spare_keep(void *p, size_t n) {
        int kept = 0;
        if (!q4_spare_try())
            return 0;
        if (q4_spare_total + n <= Q4_SPARE_BYTES)
            for (int i = 0; i < Q4_SPARE_MAX; i++)
                if (q4_spare_p[i] == NULL) {
                    q4_spare_p[i] = p;
                    q4_spare_n[i] = n;
                    q4_spare_total += n;
                    kept = 1;
                    break;
                }
        q4_spare_done();
        return kept;
    }
    static void *q4_huge_alloc(size_t n) {
        void *p = NULL;
        if (n < (Q4_HUGE >> 1)) {
            if (posix_memalign(&p, 64, n ? n : 1) != 0)
                return NULL;
            memset(p, 0, n);
            return p;
        }
        p = q4_spare_take(n);
        if (p != NULL)
            return p;
        size_t len = n + Q4_HUGE;
        char *base = (char *) mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == (char *) MAP_FAILED)
            return NULL;
        char *aligned = (char *) (((uintptr_t) base + Q4_HUGE - 1) & ~((uintptr_t) Q4_HUGE - 1));
        size_t head = (size_t) (aligned - base), tail = len - head - n;
        if (head)
            munmap(base, head);
        if (tail)
            munmap(aligned + n, tail);
    #ifdef MADV_HUGEPAGE
        madvise(aligned, n, MADV_HUGEPAGE);
    #endif
        return aligned;
    }
    static void q4_huge_release(void *p, size_t n, int keep) {
        if (p == NULL)
            return;
        if (n < (Q4_HUGE >> 1))
            free(p);
        else if (!keep || !q4_spare_keep(p, n))
            munmap(p, n);
    }
    """
    void *q4_huge_alloc(size_t n) nogil
    void q4_huge_release(void *p, size_t n, int keep) nogil
    size_t q4_spare_total


cdef void *q4_malloc_huge(size_t n) noexcept nogil:
    """Zeroed memory for large tables with random access; free with q4_free_huge(p, n)."""
    if _should_fail():
        return NULL
    return q4_huge_alloc(n)


cdef void q4_free_huge(void *p, size_t n) noexcept nogil:
    q4_huge_release(p, n, 1)


cdef void q4_drop_huge(void *p, size_t n) noexcept nogil:
    """q4_free_huge for a table outgrown by its owner: given back at once
    (the next table of its size is not likely to come soon)."""
    q4_huge_release(p, n, 0)


cdef void *q4_realloc(void *p, size_t n) noexcept nogil:
    if _should_fail():
        return NULL
    return realloc(p, n if n else 1)


cdef void q4_free(void *p) noexcept nogil:
    free(p)


cdef bint q4_start_thread(q4_thread_fn fn, void *arg) noexcept nogil:
    """Start fn(arg) on a new native thread; False if it could not start."""
    if _should_fail():
        return False
    return PyThread_start_new_thread(fn, arg) != <unsigned long> -1


cdef q4_lock q4_lock_new() noexcept nogil:
    if _should_fail():
        return NULL
    return PyThread_allocate_lock()


cdef void q4_lock_free(q4_lock lock) noexcept nogil:
    PyThread_free_lock(lock)


cdef void q4_lock_take(q4_lock lock) noexcept nogil:
    """Acquire, waiting as long as it takes (signals do not interrupt it)."""
    PyThread_acquire_lock(lock, 1)


cdef bint q4_lock_take_for(q4_lock lock, long long microseconds) noexcept nogil:
    """Acquire, waiting at most `microseconds`; False if it timed out."""
    return PyThread_acquire_lock_timed(lock, microseconds, 0) == 1  # PY_LOCK_ACQUIRED


cdef void q4_lock_give(q4_lock lock) noexcept nogil:
    PyThread_release_lock(lock)


def _require_enabled():
    if not _enabled:
        raise RuntimeError(
            "allocation fault injection is a test hook: it is disabled unless "
            "QWEN4EXP_FAULT_INJECTION=1 is set before qwen4exp is imported"
        )


def fault_injection_enabled():
    """Whether this process may arm the switch (QWEN4EXP_FAULT_INJECTION=1 at import)."""
    return bool(_enabled)


def fail_allocation(int64_t k):
    """Test hook: make the k-th native allocation from now fail (0 disarms)."""
    global _fail_at, _count
    _require_enabled()
    if k < 0:
        raise ValueError("k must be >= 0")
    _count = 0
    _fail_at = k


def allocations_seen():
    """Test hook: native allocations counted since the switch was armed."""
    _require_enabled()
    return _count


def spare_bytes():
    """Test hook: bytes of released table mappings kept for reuse."""
    return q4_spare_total
