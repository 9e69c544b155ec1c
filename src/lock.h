/* lock: the two locks on the SetParams hot path, cheaper than pthread's.
 *
 * vr_mutex is a futex mutex: one compare-exchange to take it uncontended,
 * one decrement to drop it; waiters sleep in the kernel, so a thread holding it
 * across a blocking driver call costs the others nothing.
 * vr_rwlock is a reader-biased lock for tables that change rarely (execs are
 * instantiated and destroyed far less often than they are updated): a reader
 * pays one atomic add each way; a writer waits, yielding, until readers
 * drain. Both keep errno.
 */
#ifndef VR_LOCK_H
#define VR_LOCK_H

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    _Atomic int state; /* 0 free, 1 held, 2 held with sleepers */
} vr_mutex;

#define VR_MUTEX_INIT {0}

static inline void vr_futex(_Atomic int *addr, int op, int val)
{
    int saved = errno;
    syscall(SYS_futex, (int *)addr, op, val, NULL, NULL, 0);
    errno = saved;
}

/* The contended halves, out of line: the fast paths stay call-free, so a
 * caller needs no stack frame for them. */
static __attribute__((noinline, cold, unused)) void vr_mutex_wait(vr_mutex *m, int c)
{
    if (c != 2)
        c = atomic_exchange_explicit(&m->state, 2, memory_order_acquire);
    while (c != 0) {
        vr_futex(&m->state, FUTEX_WAIT_PRIVATE, 2);
        c = atomic_exchange_explicit(&m->state, 2, memory_order_acquire);
    }
}

static __attribute__((noinline, cold, unused)) void vr_mutex_wake(vr_mutex *m)
{
    vr_futex(&m->state, FUTEX_WAKE_PRIVATE, 1);
}

/* True when m was free and is now held by the caller. */
static inline bool vr_mutex_trylock(vr_mutex *m)
{
    int c = 0;
    return atomic_compare_exchange_strong_explicit(&m->state, &c, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void vr_mutex_lock(vr_mutex *m)
{
    int c = 0;
    if (!atomic_compare_exchange_strong_explicit(&m->state, &c, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        vr_mutex_wait(m, c);
}

/* Drops m; true when a sleeper must be woken (vr_mutex_wake), which a
 * caller may do on a path of its own (a tail call needs no saved register).
 * Uncontended, one decrement from 1 to 0 (a flag test, no compare); from 2
 * it leaves 1, which no trylock takes and every waiter's exchange turns
 * back into 2, until the store of 0 frees it for the woken one. */
static inline bool vr_mutex_release(vr_mutex *m)
{
    if (__builtin_expect(atomic_fetch_sub_explicit(&m->state, 1, memory_order_release) == 1, 1))
        return false;
    atomic_store_explicit(&m->state, 0, memory_order_release);
    return true;
}

static inline void vr_mutex_unlock(vr_mutex *m)
{
    if (vr_mutex_release(m))
        vr_mutex_wake(m);
}

typedef struct {
    _Atomic int readers;
    _Atomic int writer;
} vr_rwlock;

#define VR_RWLOCK_INIT {0, 0}

static inline void vr_read_lock(vr_rwlock *l)
{
    for (;;) {
        atomic_fetch_add(&l->readers, 1);
        if (!atomic_load(&l->writer))
            return;
        atomic_fetch_sub(&l->readers, 1);
        while (atomic_load_explicit(&l->writer, memory_order_relaxed))
            sched_yield();
    }
}

static inline void vr_read_unlock(vr_rwlock *l)
{
    atomic_fetch_sub_explicit(&l->readers, 1, memory_order_release);
}

static inline void vr_write_lock(vr_rwlock *l)
{
    while (atomic_exchange(&l->writer, 1))
        sched_yield();
    while (atomic_load(&l->readers))
        sched_yield();
}

static inline void vr_write_unlock(vr_rwlock *l)
{
    atomic_store(&l->writer, 0);
}

#endif
