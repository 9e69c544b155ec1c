/* vr_mutex under contention: every increment made under the lock is kept
 * (mutual exclusion) and no thread sleeps forever (every release from the
 * contended state wakes a sleeper), with the critical sections long enough
 * that threads do sleep in the kernel; and the release's answer (wake or
 * not) for each state. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>

#include "lock.h"

#define THREADS 8
#define ROUNDS 20000

static vr_mutex m = VR_MUTEX_INIT;
static volatile unsigned long counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        if (i % 2 || !vr_mutex_trylock(&m))
            vr_mutex_lock(&m);
        unsigned long c = counter;
        if (i % 64 == 0)
            sched_yield(); /* a holder that is descheduled: the others sleep */
        counter = c + 1;
        vr_mutex_unlock(&m);
    }
    return NULL;
}

Test(lock, contended_counter_exact_and_no_lost_wakeup, .timeout = 60)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, worker, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(counter, (unsigned long)THREADS * ROUNDS);
    cr_assert_eq(atomic_load(&m.state), 0, "the lock is free after the last release");
}

Test(lock, release_says_when_to_wake)
{
    vr_mutex a = VR_MUTEX_INIT;
    cr_assert(vr_mutex_trylock(&a));
    cr_assert(!vr_mutex_trylock(&a), "held: a second trylock fails");
    cr_assert(!vr_mutex_release(&a), "no sleeper: nothing to wake");
    cr_assert_eq(atomic_load(&a.state), 0);
    atomic_store(&a.state, 2); /* held with sleepers */
    cr_assert(vr_mutex_release(&a), "sleepers: one must be woken");
    cr_assert_eq(atomic_load(&a.state), 0, "and the lock is free for it");
    cr_assert(vr_mutex_trylock(&a));
    vr_mutex_unlock(&a);
}
