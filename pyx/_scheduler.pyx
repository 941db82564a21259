# cython: language_level=3
"""The batch scheduler: runs a batch of streams on the calling thread and
native helper threads, and converts finished streams in order meanwhile.

Threads claim streams one at a time (an atomic counter), so uneven streams
balance themselves. The calling thread encodes a slice, converts what is
finished (building Python objects overlaps with the others' encoding), checks
for signals, and repeats. Helpers are native threads that never run Python
code: starting and waiting for them cannot be interrupted, and a Python
exception (a signal handler raising, a MemoryError while converting) sets
`cancel` and waits for every helper before the caller frees the streams.
"""
from cpython.exc cimport PyErr_CheckSignals
from libc.string cimport memset

from qwen4exp._alloc cimport (q4_malloc, q4_free, q4_start_thread, q4_lock, q4_lock_new,
                              q4_lock_free, q4_lock_take, q4_lock_give)
from qwen4exp._idvec cimport idvec_free

cdef enum:
    CONVERT_EVERY = 65536   # bytes the calling thread encodes between two conversion passes
    WAIT_SPINS = 4096       # yields between two signal checks while waiting for a stream


cdef struct Batch:
    Stream *streams
    Py_ssize_t count
    Py_ssize_t next         # the next stream to claim
    int cancel              # set when the caller raises: nobody claims any more
    encode_fn encode
    void *ctx


cdef struct Helper:
    # One helper thread. `finished` is held by the caller and given back once
    # the helper no longer touches the batch, so the caller can wait for it
    # without the GIL.
    Batch *batch
    Worker *w
    q4_lock finished


cdef extern from *:
    """
    #include <sched.h>
    #define q4_claim(p) __atomic_fetch_add((p), 1, __ATOMIC_RELAXED)
    #define q4_mark_done(p) __atomic_store_n((p), 1, __ATOMIC_RELEASE)
    #define q4_is_done(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
    """
    Py_ssize_t q4_claim(Py_ssize_t *p) nogil
    void q4_mark_done(int *p) nogil
    int q4_is_done(int *p) nogil
    int sched_yield() nogil


cdef Stream *new_streams(Py_ssize_t count) except NULL:
    cdef Stream *streams = <Stream *> q4_malloc(<size_t> count * sizeof(Stream))
    if streams == NULL:
        raise MemoryError("out of memory preparing a batch")
    memset(streams, 0, <size_t> count * sizeof(Stream))
    return streams


cdef void free_streams(Stream *streams, Py_ssize_t count) noexcept:
    cdef Py_ssize_t k
    for k in range(count):
        idvec_free(&streams[k].ids)
    q4_free(streams)


cdef list run_streams(Stream *streams, Py_ssize_t count, Worker **workers, Py_ssize_t n_workers,
                      encode_fn encode, convert_fn convert, void *ctx):
    """Encode every stream with workers[0] on this thread and one helper thread
    per other worker (fewer if some cannot start: the others share the work);
    return the converted results in order. MemoryError if any stream ran out
    of memory. The caller owns the workers and frees the streams after."""
    cdef Batch batch
    cdef Helper *helpers = NULL
    cdef Py_ssize_t k, started = 0, converted = 0, spins
    cdef list results = [None] * count
    cdef bint out_of_memory = False, more = True
    cdef Stream *st
    batch.streams = streams
    batch.count = count
    batch.next = 0
    batch.cancel = 0
    batch.encode = encode
    batch.ctx = ctx
    try:
        if n_workers > 1:
            # No Python code runs from here to the last start.
            helpers = <Helper *> q4_malloc(<size_t> (n_workers - 1) * sizeof(Helper))
            while helpers != NULL and started < n_workers - 1:
                if not start_helper(&helpers[started], &batch, workers[started + 1]):
                    break
                started += 1
        while more:
            with nogil:
                more = claim_streams(&batch, workers[0], CONVERT_EVERY)
            while converted < count and q4_is_done(&streams[converted].done):
                out_of_memory |= convert(ctx, &streams[converted], results, converted)
                converted += 1
            PyErr_CheckSignals()  # lets Ctrl-C / a timeout handler stop a long batch
        for k in range(converted, count):
            st = &streams[k]
            while not q4_is_done(&st.done):
                with nogil:
                    spins = 0
                    while spins < WAIT_SPINS and not q4_is_done(&st.done):
                        sched_yield()
                        spins += 1
                PyErr_CheckSignals()
            out_of_memory |= convert(ctx, st, results, k)
    finally:
        q4_mark_done(&batch.cancel)  # only matters to helpers still claiming (an exception)
        with nogil:
            for k in range(started):
                q4_lock_take(helpers[k].finished)
        for k in range(started):
            q4_lock_free(helpers[k].finished)
        q4_free(helpers)
    if out_of_memory:
        raise MemoryError("out of memory while tokenizing a batch")
    return results


cdef bint start_helper(Helper *h, Batch *batch, Worker *w) noexcept:
    """Start one helper thread; False (nothing to undo) if impossible."""
    h.batch = batch
    h.w = w
    h.finished = q4_lock_new()
    if h.finished == NULL:
        return False
    q4_lock_take(h.finished)
    if q4_start_thread(run_helper, h):
        return True
    q4_lock_give(h.finished)
    q4_lock_free(h.finished)
    return False


cdef void run_helper(void *arg) noexcept nogil:
    """Body of a helper thread (no GIL, no Python thread state)."""
    cdef Helper *h = <Helper *> arg
    claim_streams(h.batch, h.w, -1)
    q4_lock_give(h.finished)  # the last touch: the caller may free h right after


cdef bint claim_streams(Batch *batch, Worker *w, Py_ssize_t budget) noexcept nogil:
    """Claim and encode streams until none is left or the batch is cancelled
    (returns False) or, when budget >= 0, until about `budget` bytes were
    encoded (returns True)."""
    cdef Py_ssize_t k
    cdef Stream *st
    while True:
        if q4_is_done(&batch.cancel):
            return False
        k = q4_claim(&batch.next)
        if k >= batch.count:
            return False
        st = &batch.streams[k]
        st.rc = batch.encode(batch.ctx, w, st)
        if st.rc < 0:
            idvec_free(&st.ids)  # a failed stream returns no partial ids
        q4_mark_done(&st.done)
        if budget >= 0:
            budget -= st.n + 64
            if budget < 0:
                return True
