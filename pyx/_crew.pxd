# The crew: native helper threads that outlive a call, so that a batch, or
# one document split in parts, gets help within microseconds instead of
# paying for a thread start. A caller posts a job to idle members and, before
# it frees what the job points to, collects them: a member that has not
# started the job yet gives it back, one that has is waited for.

ctypedef void (*crew_fn)(void *arg) noexcept nogil

cdef enum:
    CREW_MAX = 64           # members at most (one per CPU but the caller's)
    WAIT_PAUSES = 64        # crew_wait: pauses between two yields

# Post fn(arg) to an idle member (starting one if none is idle); returns the
# member's index, or -1 when none can take it (run it yourself). Call with the
# GIL held: it serializes posts and member starts.
cdef int crew_post(crew_fn fn, void *arg) noexcept
# Take the job back from member `i` if it has not started it, else wait for
# fn to return. Callable without the GIL.
cdef void crew_collect(int i) noexcept nogil
# Wait while *p == busy (another thread changes it with release order),
# pausing WAIT_PAUSES times before each sched_yield: a helper finishing its
# part is usually a fraction of a microsecond away, a syscall is not.
# Returns once it changed, or after `yields` yields (0: no limit).
cdef void crew_wait(int *p, int busy, Py_ssize_t yields) noexcept nogil
