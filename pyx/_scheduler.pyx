# cython: language_level=3
"""The batch scheduler: runs a batch of streams on the calling thread and
members of the crew (pyx/_crew.pyx), and converts finished streams in order
meanwhile.

Threads claim streams one at a time (an atomic counter), so uneven streams
balance themselves, and a member that is slow to come finds nothing left to
claim. The calling thread encodes a slice, converts what is finished
(building Python lists overlaps with the others' encoding), checks for
signals, and repeats. Members never run Python code: posting to them and
collecting them cannot be interrupted, and a Python exception (a signal
handler raising, a MemoryError while converting) sets `cancel` and collects
every member before the caller frees the streams.
"""
from cpython.exc cimport PyErr_CheckSignals
from libc.string cimport memset

from qwen4exp._native._alloc cimport q4_malloc, q4_free
from qwen4exp._native._crew cimport crew_post, crew_collect, crew_wait
from qwen4exp._native._idvec cimport idvec_free

cdef enum:
    WAIT_SPINS = 4096       # yields between two signal checks while waiting for a stream


cdef struct Batch:
    Stream *streams
    Py_ssize_t count
    Py_ssize_t next         # the next stream to claim
    int cancel              # set when the caller raises: nobody claims any more
    encode_fn encode
    void *ctx


cdef struct Helper:
    # What one crew member works with; `member` is where it was posted.
    Batch *batch
    Worker *w
    int member


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


cdef void free_streams(Stream *streams, Py_ssize_t count) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(count):
        idvec_free(&streams[k].ids)
    q4_free(streams)


cdef list run_streams(Stream *streams, Py_ssize_t count, Worker **workers, Py_ssize_t n_workers,
                      encode_fn encode, convert_fn convert, void *ctx, Py_ssize_t convert_every):
    """Encode every stream with workers[0] on this thread and one crew member
    per other worker (fewer if the crew has no more: the others share the work),
    this thread converting finished streams after about every `convert_every`
    bytes it encoded;
    return the converted results in order. MemoryError if any stream ran out
    of memory. The caller owns the workers and frees the streams after."""
    cdef Batch batch
    cdef Helper *helpers = NULL
    cdef Py_ssize_t k, started = 0, converted = 0
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
                helpers[started].batch = &batch
                helpers[started].w = workers[started + 1]
                helpers[started].member = crew_post(run_helper, &helpers[started])
                if helpers[started].member < 0:
                    break
                started += 1
        while more:
            with nogil:
                more = claim_streams(&batch, workers[0], convert_every)
            while converted < count and q4_is_done(&streams[converted].done):
                out_of_memory |= convert(ctx, &streams[converted], results, converted)
                converted += 1
            PyErr_CheckSignals()  # lets Ctrl-C / a timeout handler stop a long batch
        for k in range(converted, count):
            st = &streams[k]
            while not q4_is_done(&st.done):
                with nogil:
                    crew_wait(&st.done, 0, WAIT_SPINS)
                PyErr_CheckSignals()
            out_of_memory |= convert(ctx, st, results, k)
    finally:
        q4_mark_done(&batch.cancel)  # only matters to helpers still claiming (an exception)
        with nogil:
            for k in range(started):
                crew_collect(helpers[k].member)
        q4_free(helpers)
    if out_of_memory:
        raise MemoryError("out of memory while tokenizing a batch")
    return results


cdef void run_helper(void *arg) noexcept nogil:
    """A crew member's job: claim streams until none is left."""
    cdef Helper *h = <Helper *> arg
    claim_streams(h.batch, h.w, -1)


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
