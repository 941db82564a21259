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
sleeps on its `wake` lock until a poster gives it. A post is a release
store with no fence after it, so the poster goes on at once instead of
waiting for the member's core to give up the mailbox's line; a poster that
reads `sleeping` before the member's store of it is visible misses that
member falling asleep, does the whole job itself and takes the post back
in crew_collect, and the next post wakes the member. Exactly one give
answers each sleep (the side that flips `sleeping` from 1 to 0 owns it).

Members start on first need and are never stopped; a forked child starts
with no members (its parent's threads do not exist there).
"""
import os

from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from qwen4exp._native._alloc cimport q4_start_thread, q4_lock, q4_lock_new, q4_lock_free, q4_lock_take, q4_lock_give

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
    #define q4_peek(p) __atomic_load_n((p), __ATOMIC_RELAXED)
    static inline int q4_swap_if(int *p, int expect, int to) {
        return __atomic_compare_exchange_n(p, &expect, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    """
    void q4_pause() nogil
    int q4_load(int *p) nogil
    void q4_store(int *p, int v) nogil
    void q4_publish(int *p, int v) nogil
    int q4_peek(int *p) nogil
    bint q4_swap_if(int *p, int expect, int to) nogil
    int sched_yield() nogil

cdef enum:
    IDLE = 0
    POSTED = 1
    RUNNING = 2
    DONE = 3
    SPIN_NS = 150000        # a member waits this long for the next job before it sleeps
    SPIN_CHECK = 64         # pauses between two looks at the clock


cdef struct Member:
    int state
    int sleeping            # 1 while the member sleeps (or is about to) on `wake`
    int started
    crew_fn fn
    void *arg
    q4_lock wake            # held while no give is pending


cdef Member members[CREW_MAX]


cdef int crew_post(crew_fn fn, void *arg) noexcept:
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
        q4_publish(&m.state, POSTED)
        if q4_peek(&m.sleeping) and q4_swap_if(&m.sleeping, 1, 0):
            q4_lock_give(m.wake)
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


cdef bint start_member(Member *m) noexcept:
    m.wake = q4_lock_new()
    if m.wake == NULL:
        return False
    q4_lock_take(m.wake)
    m.state = IDLE
    m.sleeping = 0
    if not q4_start_thread(member_main, m):
        q4_lock_give(m.wake)
        q4_lock_free(m.wake)
        m.wake = NULL
        return False
    m.started = 1
    return True


cdef void member_main(void *arg) noexcept nogil:
    cdef Member *m = <Member *> arg
    while True:
        wait_for_post(m)
        if q4_swap_if(&m.state, POSTED, RUNNING):
            m.fn(m.arg)
            q4_store(&m.state, DONE)


cdef inline long long now_ns() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <long long> t.tv_sec * 1000000000 + t.tv_nsec


cdef void wait_for_post(Member *m) noexcept nogil:
    """Return once m's mailbox was seen POSTED (it may be taken back before
    the member claims it): spin for SPIN_NS, then sleep until given."""
    cdef long long deadline = now_ns() + SPIN_NS
    cdef int k
    while True:
        for k in range(SPIN_CHECK):
            if q4_load(&m.state) == POSTED:
                return
            q4_pause()
        if now_ns() > deadline:
            break
    q4_store(&m.sleeping, 1)
    if q4_load(&m.state) == POSTED:
        if not q4_swap_if(&m.sleeping, 1, 0):
            q4_lock_take(m.wake)  # a poster flipped it and gives: consume that give
        return
    q4_lock_take(m.wake)  # until a poster flips `sleeping` and gives


def _forget_members_after_fork():
    """In a forked child: the members' threads are gone; start afresh (their
    locks are left allocated, as they may have been held at the fork)."""
    cdef int i
    for i in range(CREW_MAX):
        members[i].started = 0
        members[i].state = IDLE
        members[i].sleeping = 0
        members[i].wake = NULL


os.register_at_fork(after_in_child=_forget_members_after_fork)
