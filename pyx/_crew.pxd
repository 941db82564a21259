# The crew: native helper threads that outlive a call, so that a batch, or
# one document split in parts, gets help within microseconds instead of
# paying for a thread start. A caller posts a job to idle members and, before
# it frees what the job points to, collects them: a member that has not
# started the job yet gives it back, one that has is waited for.

ctypedef void (*crew_fn)(void *arg) noexcept nogil

cdef enum:
    CREW_MAX = 64           # members at most (one per CPU but the caller's)

# Post fn(arg) to an idle member (starting one if none is idle); returns the
# member's index, or -1 when none can take it (run it yourself). Call with the
# GIL held: it serializes posts and member starts.
cdef int crew_post(crew_fn fn, void *arg) noexcept
# Take the job back from member `i` if it has not started it, else wait for
# fn to return. Callable without the GIL.
cdef void crew_collect(int i) noexcept nogil
# Wait until *flag (set by another thread with release order) is nonzero,
# pausing up to `spins` times before each sched_yield: a helper finishing its
# part is usually a fraction of a microsecond away, a syscall is not.
# Returns once set, or after `yields` yields (0: keep waiting).
cdef bint crew_wait(int *flag, int spins, Py_ssize_t yields) noexcept nogil
