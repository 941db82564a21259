# cython: language_level=3, boundscheck=False, wraparound=False
"""The crew: helper threads that stay for the life of the process.

A member is a native thread that never runs Python code. It owns one
mailbox (`Member.state`): a caller that holds the GIL posts a job into an
idle member's mailbox (IDLE -> POSTED), the member claims it (POSTED ->
RUNNING), runs it and reports (DONE); the caller then frees the mailbox
(IDLE). A caller that no longer needs help takes a job back that no member
claimed yet (POSTED -> IDLE), so it never waits on a member that is slow to
wake: whatever the crew does not take, the caller does itself.

After a job a member spins for SPIN_NS, so that the next post (the next
document of a loop, the next part of a text) is taken at once; then it
sleeps on its bell until a poster rings it. A post is a release store with
no fence after it, so the poster goes on at once instead of waiting for the
member's core to give up the mailbox's line; a poster that reads the bell's
`sleeping` before the member's store of it is visible misses that member
falling asleep, does the whole job itself and takes the post back in
crew_collect, and the next post wakes the member.

A woken member is put where the kernel likes, and a kernel that packs work
onto few CPUs (as on a small VM) may put it on its poster's CPU, leaving
the other idle or to another process: the poster and the member then take
turns on one CPU for the whole job, no faster than the poster alone. A
member that wakes on its poster's CPU moves itself to another one before
it claims the job: a move is two affinity changes and a migration, 56 µs
on a 2-vCPU guest, which the poster does not wait for. There, a woken
member waited 1.6 – 2.1 ms on average before it ran, queued behind its
poster on the poster's CPU; a poster with a long job that woke a sleeping
member yields its CPU once, and the member starts within about 0.1 ms
(docs/PERFORMANCE.md, "A busy machine").

Members start on first need and are never stopped; a forked child starts
with no members (its parent's threads do not exist there).
"""
import os

from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from qwen4exp._native._alloc cimport (q4_start_thread, q4_lock, q4_lock_new, q4_lock_free, q4_lock_take, q4_lock_take_for,
                                      q4_lock_give)

cdef extern from *:
    """
    #include <sched.h>
    #if defined(__x86_64__) || defined(__i386__)
    #define q4_pause() __builtin_ia32_pause()
    #elif defined(__aarch64__)
    #define q4_pause() __asm__ __volatile__("yield")
    #else
    #define q4_pause() ((void) 0)
    #endif
    #define q4_load(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
    #define q4_store(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
    #define q4_publish(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
    #define q4_load_time(p) __atomic_load_n((p), __ATOMIC_RELAXED)
    #define q4_store_time(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
    static inline int q4_swap_if(int *p, int expect, int to) {
        return __atomic_compare_exchange_n(p, &expect, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    #ifdef __linux__
    static inline int q4_cpu(void) { return sched_getcpu(); }
    /* Move the calling thread off `cpu`: narrow its affinity to the other
       allowed CPUs (the kernel migrates it before the call returns), then
       give the whole mask back (it stays where it was moved, until the
       scheduler moves it). The CPU it ran on while narrowed, or -1 if it
       did not move. */
    static int q4_move_off(int cpu) {
        cpu_set_t mask, other;
        int landed;
        if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof mask, &mask) != 0)
            return -1;
        if (!CPU_ISSET(cpu, &mask) || CPU_COUNT(&mask) < 2)
            return -1;
        other = mask;
        CPU_CLR(cpu, &other);
        if (sched_setaffinity(0, sizeof other, &other) != 0)
            return -1;
        landed = sched_getcpu();
        sched_setaffinity(0, sizeof mask, &mask);
        return landed < 0 ? cpu + 1 : landed;  /* moved, even where getcpu fails */
    }
    #else
    static inline int q4_cpu(void) { return -1; }
    static inline int q4_move_off(int cpu) { (void) cpu; return -1; }
    #endif
    """
    void q4_pause() nogil
    int q4_load(int *p) nogil
    void q4_store(int *p, int v) nogil
    void q4_publish(int *p, int v) nogil
    long long q4_load_time(long long *p) nogil
    void q4_store_time(long long *p, long long v) nogil
    bint q4_swap_if(int *p, int expect, int to) nogil
    int q4_cpu() nogil
    int q4_move_off(int cpu) nogil
    int sched_yield() nogil

cdef enum:
    IDLE = 0
    POSTED = 1
    RUNNING = 2
    DONE = 3
    SPIN_NS = 150000        # a member waits this long for the next job before it sleeps
    SPIN_CHECK = 64         # pauses between two looks at the clock
    PREEMPTED_NS = 200000   # a gap this long between two looks: the spinning member was preempted
    CONTENDED_NS = 50000000  # the crew then reports contention this long


cdef struct Member:
    int state
    int started
    crew_fn fn
    void *arg
    int poster_cpu          # the CPU the poster ran on when it posted (-1: unknown)
    Bell bell               # rung by a poster when the member sleeps


cdef Member members[CREW_MAX]
cdef long long contended_until = 0  # CLOCK_MONOTONIC ns; set by members (spin_until)


cdef long posts = 0  # jobs posted, for tests (the GIL serializes posts)


cdef int crew_post(crew_fn fn, void *arg, bint long_job) noexcept:
    global posts
    cdef int i
    cdef Member *m
    for i in range(CREW_MAX):
        m = &members[i]
        if not m.started and not start_member(m):
            return -1  # no more threads to be had
        if q4_load(&m.state) != IDLE:
            continue  # helping another caller
        m.fn = fn
        m.arg = arg
        m.poster_cpu = q4_cpu()
        q4_publish(&m.state, POSTED)
        if bell_ring(&m.bell) and long_job:
            # The member slept: the kernel may have woken it on this CPU,
            # behind the poster, for the rest of the poster's time slice.
            # Let it run now: it moves to another CPU and starts.
            with nogil:
                sched_yield()
        posts += 1
        return i
    return -1


cdef void crew_collect(int i) noexcept nogil:
    cdef Member *m = &members[i]
    if q4_swap_if(&m.state, POSTED, IDLE):
        return  # never started: nothing of the caller's was touched
    crew_wait(&m.state, RUNNING, 0)  # the member is RUNNING, then DONE
    q4_store(&m.state, IDLE)


cdef void crew_wait(int *p, int busy, Py_ssize_t yields) noexcept nogil:
    cdef Py_ssize_t y = 0
    cdef int k
    while q4_load(p) == busy:
        for k in range(WAIT_PAUSES):
            if q4_load(p) != busy:
                return
            q4_pause()
        if yields and y >= yields:
            return
        sched_yield()
        y += 1


cdef bint bell_ready(Bell *b) noexcept nogil:
    if b.lock != NULL:
        return True
    b.lock = q4_lock_new()
    if b.lock == NULL:
        return False
    q4_lock_take(b.lock)
    b.sleeping = 0
    return True


cdef void bell_free(Bell *b) noexcept nogil:
    if b.lock != NULL:
        q4_lock_free(b.lock)
        b.lock = NULL


cdef bint bell_ring(Bell *b) noexcept nogil:
    # Exactly one give answers each sleep: the side that flips `sleeping`
    # from 1 to 0 owns it.
    if q4_load(&b.sleeping) and q4_swap_if(&b.sleeping, 1, 0):
        q4_lock_give(b.lock)
        return True
    return False


cdef bint bell_sleep(Bell *b, int *p, int want, long long timeout_us) noexcept nogil:
    q4_store(&b.sleeping, 1)
    if q4_load(p) == want:
        if not q4_swap_if(&b.sleeping, 1, 0):
            q4_lock_take(b.lock)  # a ringer flipped it and gives: consume that give
        return True
    if timeout_us < 0:
        q4_lock_take(b.lock)  # until a ringer flips `sleeping` and gives
    elif not q4_lock_take_for(b.lock, timeout_us) and not q4_swap_if(&b.sleeping, 1, 0):
        q4_lock_take(b.lock)  # timed out as a ringer flipped it: its give is on the way
    return q4_load(p) == want


cdef bint spin_until(int *p, int want, long long ns, bint report_preemption) noexcept nogil:
    cdef long long t = now_ns(), deadline = t + ns, last = t
    cdef int k
    while True:
        for k in range(SPIN_CHECK):
            if q4_load(p) == want:
                return True
            q4_pause()
        t = now_ns()
        if report_preemption and t - last > PREEMPTED_NS:
            # Preempted while spinning: the machine has more runnable threads
            # than CPUs, and a spinning member is one more, taking turns from
            # its poster. Mark the crew contended (a report never shortens
            # another) and stop spinning.
            if q4_load_time(&contended_until) < t + CONTENDED_NS:
                q4_store_time(&contended_until, t + CONTENDED_NS)
            return False
        if t > deadline:
            return False
        last = t


cdef bint crew_contended() noexcept nogil:
    cdef long long until = q4_load_time(&contended_until)
    return until != 0 and now_ns() < until


def _set_contended(long long ns):
    """Test hook: report contention for the next `ns` nanoseconds (0: end
    it now), as a member does when it finds it was preempted."""
    q4_store_time(&contended_until, now_ns() + ns if ns > 0 else 0)


def _contended():
    """Test hook: whether the crew reports contention now."""
    return crew_contended()


cdef bint start_member(Member *m) noexcept:
    if not bell_ready(&m.bell):
        return False
    m.state = IDLE
    if not q4_start_thread(member_main, m):
        q4_lock_give(m.bell.lock)
        bell_free(&m.bell)
        return False
    m.started = 1
    return True


cdef void member_main(void *arg) noexcept nogil:
    cdef Member *m = <Member *> arg
    while True:
        # Wait for the next post: spin for SPIN_NS, then sleep until rung. The
        # post may be taken back before the member claims it.
        if not spin_until(&m.state, POSTED, SPIN_NS, True):
            bell_sleep(&m.bell, &m.state, POSTED, -1)
        # A woken member may be put on its poster's CPU while another is free
        # (or only shared with another process): the two would take turns on
        # one CPU for the whole job, and the member's spin after it would
        # keep taking the poster's turns. Move to another CPU before claiming
        # the job, so that the poster never waits for the move (it takes
        # the job back if it is done first); a member that keeps spinning
        # stays where it moved.
        if m.poster_cpu >= 0 and q4_cpu() == m.poster_cpu:
            q4_move_off(m.poster_cpu)
        if q4_swap_if(&m.state, POSTED, RUNNING):
            m.fn(m.arg)
            q4_store(&m.state, DONE)


cdef long long now_ns() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <long long> t.tv_sec * 1000000000 + t.tv_nsec


def _posts():
    """Test hook: how many jobs were posted to members."""
    return posts


def _move_off_here():
    """Test hook: move the calling thread off the CPU it runs on, as a member
    does; returns (CPU before, CPU it ran on while moved away: -1 if it did
    not move)."""
    cdef int before, landed
    with nogil:
        before = q4_cpu()
        landed = q4_move_off(before)
    return before, landed


def _forget_members_after_fork():
    """In a forked child: the members' threads are gone; start afresh (their
    locks are left allocated, as they may have been held at the fork)."""
    cdef int i
    for i in range(CREW_MAX):
        members[i].started = 0
        members[i].state = IDLE
        members[i].bell.sleeping = 0
        members[i].bell.lock = NULL


os.register_at_fork(after_in_child=_forget_members_after_fork)
