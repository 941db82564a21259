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
from qwen4exp._native._crew cimport (crew_post, crew_collect, crew_wait, Bell, bell_ready, bell_free, bell_ring,
                                     bell_sleep, spin_until, now_ns)
from qwen4exp._native._idvec cimport idvec_free

cdef enum:
    WAIT_SPINS = 4096       # yields between two signal checks while waiting for a stream (no bell)
    TAIL_SPIN_NS = 30000    # the caller spins this long for a helper's stream before it sleeps
    TAIL_SLEEP_US = 10000   # and sleeps at most this long between two signal checks
    TAIL_SHARE = 16         # streams over 1/(TAIL_SHARE * threads) of a batch's bytes go first
    LONG_JOB = 131072       # bytes a thread at least: a long job for the crew (crew_post)


cdef struct Batch:
    Stream *streams
    Py_ssize_t count
    Py_ssize_t next         # the next stream to claim: order[next], or next when order is NULL
    Py_ssize_t *order
    int cancel              # set when the caller raises: nobody claims any more
    encode_fn encode
    void *ctx
    Bell caller             # rung when a stream is done, for a caller that sleeps waiting for one


cdef struct Helper:
    # What one crew member works with; `member` is where it was posted.
    Batch *batch
    Worker *w
    int member


cdef extern from *:
    """
    #include <sched.h>
    #define q4_claim(p) __atomic_fetch_add((p), 1, __ATOMIC_RELAXED)
    #define q4_mark_done(p) __atomic_store_n((p), 1, __ATOMIC_SEQ_CST)
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
                      encode_fn encode, convert_fn convert, void *ctx, Py_ssize_t convert_every,
                      bint largest_first, RunTimes *times):
    """Encode every stream with workers[0] on this thread and one crew member
    per other worker (fewer if the crew has no more: the others share the work),
    this thread converting finished streams after about every `convert_every`
    bytes it encoded;
    return the converted results in order. MemoryError if any stream ran out
    of memory. The caller owns the workers and frees the streams after.

    largest_first: streams too big to be left for the end are claimed
    first, largest first (claim_order), and converted in the order they are
    claimed; else both go in order (a convert callback that relies on the
    streams before k being converted). times: NULL, or where the caller's
    time went (filled when no exception is raised)."""
    cdef Batch batch
    cdef Helper *helpers = NULL
    cdef Py_ssize_t j, k, started = 0, converted = 0, total = 0
    cdef list results = [None] * count
    cdef bint out_of_memory = False, more = True
    cdef Stream *st
    cdef long long t_start = now_ns() if times != NULL else 0, t_tail = 0
    batch.streams = streams
    batch.count = count
    batch.next = 0
    batch.order = NULL
    batch.cancel = 0
    batch.encode = encode
    batch.ctx = ctx
    memset(&batch.caller, 0, sizeof(Bell))
    try:
        if n_workers > 1:
            for k in range(count):
                total += streams[k].n
            if largest_first:
                batch.order = claim_order(streams, count, total, n_workers)  # NULL: in order (also out of memory)
            # No Python code runs from here to the last start.
            helpers = <Helper *> q4_malloc(<size_t> (n_workers - 1) * sizeof(Helper))
            while helpers != NULL and started < n_workers - 1:
                helpers[started].batch = &batch
                helpers[started].w = workers[started + 1]
                helpers[started].member = crew_post(run_helper, &helpers[started], total >= LONG_JOB * n_workers)
                if helpers[started].member < 0:
                    break
                started += 1
        while more:
            with nogil:
                more = claim_streams(&batch, workers[0], convert_every)
            while converted < count:
                k = batch.order[converted] if batch.order != NULL else converted
                if not q4_is_done(&streams[k].done):
                    break
                out_of_memory |= convert(ctx, &streams[k], results, k)
                converted += 1
            PyErr_CheckSignals()  # lets Ctrl-C / a timeout handler stop a long batch
        if times != NULL:
            t_tail = now_ns()
        for j in range(converted, count):
            k = batch.order[j] if batch.order != NULL else j
            st = &streams[k]
            while not q4_is_done(&st.done):
                with nogil:
                    wait_for_stream(&batch, st)
                PyErr_CheckSignals()
            out_of_memory |= convert(ctx, st, results, k)
    finally:
        q4_mark_done(&batch.cancel)  # only matters to helpers still claiming (an exception)
        with nogil:
            for k in range(started):
                crew_collect(helpers[k].member)
        q4_free(helpers)
        q4_free(batch.order)
        bell_free(&batch.caller)  # no helper rings any more
    if times != NULL:
        times.working_ns = t_tail - t_start
        times.waiting_ns = now_ns() - t_tail
    if out_of_memory:
        raise MemoryError("out of memory while tokenizing a batch")
    return results


cdef Py_ssize_t *claim_order(Stream *streams, Py_ssize_t count, Py_ssize_t total,
                             Py_ssize_t n_workers) noexcept nogil:
    """NULL when no stream exceeds 1/(TAIL_SHARE * n_workers) of the batch's
    `total` bytes, else an order that puts those first, largest first, the rest after
    in their order. A thread that claims a big stream last keeps the others
    waiting for it (longer on a busy machine, where it may be preempted);
    claimed first, the small ones after it even the threads out. Only the big
    ones are sorted, and there are at most TAIL_SHARE * n_workers of them."""
    cdef Py_ssize_t big = 0, limit = total // (TAIL_SHARE * n_workers), k, j, at, nk
    cdef Py_ssize_t *order
    for k in range(count):
        big += streams[k].n > limit
    if big == 0 or big == count:
        return NULL
    order = <Py_ssize_t *> q4_malloc(<size_t> count * sizeof(Py_ssize_t))
    if order == NULL:
        return NULL  # in order: as fast on a quiet machine, mostly
    at = 0
    for k in range(count):  # the big ones, each inserted by size (largest first, stable)
        nk = streams[k].n
        if nk > limit:
            j = at
            while j > 0 and streams[order[j - 1]].n < nk:
                order[j] = order[j - 1]
                j -= 1
            order[j] = k
            at += 1
    for k in range(count):
        if streams[k].n <= limit:
            order[at] = k
            at += 1
    return order


def _claim_order(sizes, Py_ssize_t n_workers):
    """Test hook: claim_order for streams of these byte sizes (None: in order)."""
    cdef Py_ssize_t count = len(sizes), k
    cdef Stream *streams = new_streams(max(count, 1))
    cdef Py_ssize_t *order = NULL
    try:
        for k in range(count):
            streams[k].n = sizes[k]
        order = claim_order(streams, count, sum(sizes), n_workers)
        return None if order == NULL else [order[k] for k in range(count)]
    finally:
        q4_free(order)
        q4_free(streams)


cdef void wait_for_stream(Batch *batch, Stream *st) noexcept nogil:
    """The caller, with nothing left to claim, waits for a helper's stream:
    a short spin (it is often about done), then asleep until a helper rings,
    giving up the CPU: on a busy machine the helper may be waiting for one
    (a spinning caller would keep it), and the kernel can move it here.
    Returns after TAIL_SLEEP_US at most, for the caller to check signals."""
    if spin_until(&st.done, 1, TAIL_SPIN_NS, False):
        return
    if bell_ready(&batch.caller):
        bell_sleep(&batch.caller, &st.done, 1, TAIL_SLEEP_US)
    else:
        crew_wait(&st.done, 0, WAIT_SPINS)  # no lock to be had: spin and yield


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
        st = &batch.streams[batch.order[k] if batch.order != NULL else k]
        st.rc = batch.encode(batch.ctx, w, st)
        if st.rc < 0:
            idvec_free(&st.ids)  # a failed stream returns no partial ids
        q4_mark_done(&st.done)
        bell_ring(&batch.caller)
        if budget >= 0:
            budget -= st.n + 64
            if budget < 0:
                return True
