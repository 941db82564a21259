# The crew: native helper threads that outlive a call, so that a batch, or
# one document split in parts, gets help within microseconds instead of
# paying for a thread start. A caller posts a job to idle members and, before
# it frees what the job points to, collects them: a member that has not
# started the job yet gives it back, one that has is waited for.
from qwen4exp._native._alloc cimport q4_lock

ctypedef void (*crew_fn)(void *arg) noexcept nogil

cdef enum:
    CREW_MAX = 64           # members at most (one per CPU but the caller's)
    WAIT_PAUSES = 64        # crew_wait: pauses between two yields

# Post fn(arg) to an idle member (starting one if none is idle); returns the
# member's index, or -1 when none can take it (run it yourself). Call with the
# GIL held: it serializes posts and member starts. long_job: the job is worth
# a yield of the poster's CPU (microseconds) if that gets a sleeping member
# going sooner.
cdef int crew_post(crew_fn fn, void *arg, bint long_job) noexcept
# Take the job back from member `i` if it has not started it, else wait for
# fn to return. Callable without the GIL.
cdef void crew_collect(int i) noexcept nogil
# Wait while *p == busy (another thread changes it with release order),
# pausing WAIT_PAUSES times before each sched_yield: a helper finishing its
# part is usually a fraction of a microsecond away, a syscall is not.
# Returns once it changed, or after `yields` yields (0: no limit).
cdef void crew_wait(int *p, int busy, Py_ssize_t yields) noexcept nogil


# A bell: one thread sleeps until a flag it watches is set, another rings
# after setting it. Sleeping, not spinning, matters on a busy machine: a
# waiting thread that spins keeps its CPU, so the kernel cannot move the
# thread it waits for (preempted on another CPU) there.
cdef struct Bell:
    int sleeping            # 1 while the sleeper sleeps (or is about to) on `lock`
    q4_lock lock            # held while no ring is pending; NULL until bell_ready

# Make the bell usable; False if no lock could be had (then spin instead).
cdef bint bell_ready(Bell *b) noexcept nogil
cdef void bell_free(Bell *b) noexcept nogil
# Wake the sleeper, if one sleeps (True then). Set the watched flag first,
# with a sequentially consistent store (or accept a ring that comes late).
cdef bint bell_ring(Bell *b) noexcept nogil
# Sleep until *p == want, a ring, or `timeout_us` microseconds (< 0: no
# limit); True if *p == want was seen.
cdef bint bell_sleep(Bell *b, int *p, int want, long long timeout_us) noexcept nogil
# Spin (pauses and a look at the clock) for up to `ns` nanoseconds while
# *p != want; True once *p == want. report_preemption (a member waiting for
# a post): a gap of PREEMPTED_NS between two looks at the clock means the
# thread was preempted; it reports contention (crew_contended) and stops.
cdef bint spin_until(int *p, int want, long long ns, bint report_preemption) noexcept nogil
# CLOCK_MONOTONIC in nanoseconds.
cdef long long now_ns() noexcept nogil
# Whether a member found, in the last CONTENDED_NS, that it was preempted
# while it spun waiting for a post: the machine has more runnable threads
# than CPUs, and a job handed to a member may wait for a time slice.
cdef bint crew_contended() noexcept nogil
