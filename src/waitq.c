/* waitq: the one queue of things waiting for the GPU (waitq.h). */
#include "waitq.h"

#include <stdatomic.h>

#include "assert.h"
#include "lock.h"
#include "lockrank.h"

static vr_mutex lock = VR_MUTEX_INIT;
static struct vr_wait *head;                  /* under lock */
atomic_size_t vr_waitq_counts[VR_WAIT_KINDS]; /* entries per kind, read without it */

static void take(void)
{
    vr_rank_take(VR_RANK_WAIT);
    vr_mutex_lock(&lock);
}

static void drop(void)
{
    vr_mutex_unlock(&lock);
    vr_rank_drop(VR_RANK_WAIT);
}

static void push_locked(struct vr_wait *w)
{
    VR_ASSERT_HELD(VR_RANK_WAIT);
    w->next = head;
    head = w;
}

void vr_waitq_push(struct vr_wait *w)
{
    VR_ASSERT(w && w->ops && w->ops->retry && w->ops->forget);
    VR_ASSERT((unsigned)w->kind < VR_WAIT_KINDS);
    atomic_fetch_add(&vr_waitq_counts[w->kind], 1);
    take();
    push_locked(w);
    drop();
    VR_ASSERT_EXPENSIVE(vr_waitq_valid());
}

size_t vr_waitq_count(unsigned mask)
{
    size_t n = 0;
    for (unsigned m = mask & (VR_WAIT_MASK(VR_WAIT_KINDS) - 1); m; m &= m - 1)
        n += atomic_load_explicit(&vr_waitq_counts[__builtin_ctz(m)], memory_order_relaxed);
    return n;
}

/* The entries of the kinds in mask that match accepts (NULL: all), out of
 * the queue, oldest first (head is newest first, so prepending each
 * reverses them). */
static struct vr_wait *take_kinds(unsigned mask, vr_wait_match *match, const void *arg)
{
    struct vr_wait *mine = NULL;
    take();
    struct vr_wait **at = &head;
    while (*at) {
        struct vr_wait *w = *at;
        if ((mask & VR_WAIT_MASK(w->kind)) && (!match || match(w, arg))) {
            *at = w->next;
            w->next = mine;
            mine = w;
        } else {
            at = &w->next;
        }
    }
    drop();
    return mine;
}

static __attribute__((noinline)) void drain(unsigned mask, enum vr_wait_how how,
                                            vr_wait_match *match, const void *arg)
{
    struct vr_wait *list = take_kinds(mask, match, arg);
    while (list) {
        struct vr_wait *w = list;
        list = w->next;
        enum vr_wait_kind kind = w->kind;
        if (w->ops->retry(w, how)) {
            atomic_fetch_sub(&vr_waitq_counts[kind], 1);
            continue;
        }
        VR_ASSERT(how != VR_WAIT_FINAL);
        take();
        push_locked(w);
        drop();
    }
    VR_ASSERT_EXPENSIVE(vr_waitq_valid());
}

/* Every launch asks (tomb.h): an empty queue costs a load per kind and no
 * stack frame. */
void vr_waitq_drain(unsigned mask, enum vr_wait_how how)
{
    if (vr_waitq_count(mask) != 0)
        drain(mask, how, NULL, NULL);
}

void vr_waitq_drain_if(unsigned mask, enum vr_wait_how how, vr_wait_match *match,
                       const void *arg)
{
    if (vr_waitq_count(mask) != 0)
        drain(mask, how, match, arg);
}

void vr_waitq_abandon(unsigned mask)
{
    struct vr_wait *list = take_kinds(mask, NULL, NULL);
    while (list) {
        struct vr_wait *w = list;
        list = w->next;
        atomic_fetch_sub(&vr_waitq_counts[w->kind], 1);
        w->ops->forget(w, false);
    }
}

void vr_waitq_after_fork(unsigned forget)
{
    lock = (vr_mutex)VR_MUTEX_INIT;
    struct vr_wait *list = take_kinds(forget, NULL, NULL);
    while (list) {
        struct vr_wait *w = list;
        list = w->next;
        atomic_fetch_sub(&vr_waitq_counts[w->kind], 1);
        w->ops->forget(w, true);
    }
}

bool vr_waitq_valid(void)
{
    size_t seen[VR_WAIT_KINDS] = {0};
    bool ok = true;
    take();
    for (struct vr_wait *w = head; w; w = w->next) {
        if ((unsigned)w->kind >= VR_WAIT_KINDS || !w->ops) {
            ok = false;
            break;
        }
        seen[w->kind]++;
    }
    drop();
    /* Counts move outside the lock around a drain's retries: an entry out
     * for a retry is counted but not listed, never the other way round. */
    for (unsigned k = 0; ok && k < VR_WAIT_KINDS; k++)
        ok = seen[k] <= atomic_load(&vr_waitq_counts[k]);
    return ok;
}
