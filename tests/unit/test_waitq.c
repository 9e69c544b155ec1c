/* The waiting queue: kinds drained apart, entries kept until their retry
 * says done, oldest first, abandon and after-fork by kind; and tombs over it
 * (an event the driver refused to destroy waits until it can be). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "driver.h"
#include "tomb.h"
#include "waitq.h"

struct item {
    struct vr_wait w;
    int id;
    int tries_left;   /* retries that say "not yet" */
    bool *forgotten;
    bool *forked;
};

static int order[16], norder;
static enum vr_wait_how last_how;

static bool retry(struct vr_wait *w, enum vr_wait_how how)
{
    struct item *it = (struct item *)w;
    last_how = how;
    if (norder < 16)
        order[norder++] = it->id;
    if (it->tries_left > 0 && how != VR_WAIT_FINAL) {
        it->tries_left--;
        return false;
    }
    free(it);
    return true;
}

static void forget(struct vr_wait *w, bool fork)
{
    struct item *it = (struct item *)w;
    if (it->forgotten)
        *it->forgotten = true;
    if (it->forked)
        *it->forked = fork;
    free(it);
}

static const struct vr_wait_ops ops = { retry, forget };

static void push(enum vr_wait_kind kind, int id, int tries, bool *forgotten, bool *forked)
{
    struct item *it = calloc(1, sizeof *it);
    cr_assert(it);
    it->w = (struct vr_wait){ .ops = &ops, .kind = kind };
    it->id = id;
    it->tries_left = tries;
    it->forgotten = forgotten;
    it->forked = forked;
    vr_waitq_push(&it->w);
}

static void reset(void)
{
    vr_waitq_abandon(~0u);
    norder = 0;
}

TestSuite(waitq, .init = reset);

#define REL VR_WAIT_MASK(VR_WAIT_RELEASE)
#define TEAR VR_WAIT_MASK(VR_WAIT_TEARDOWN)

Test(waitq, drains_only_the_kinds_asked_for)
{
    push(VR_WAIT_RELEASE, 1, 0, NULL, NULL);
    push(VR_WAIT_TEARDOWN, 2, 0, NULL, NULL);
    cr_assert_eq(vr_waitq_count(REL), 1);
    cr_assert_eq(vr_waitq_count(REL | TEAR), 2);
    vr_waitq_drain(REL, VR_WAIT_QUERY);
    cr_assert_eq(norder, 1);
    cr_assert_eq(order[0], 1);
    cr_assert_eq(vr_waitq_count(REL), 0);
    cr_assert_eq(vr_waitq_count(TEAR), 1);
    vr_waitq_drain(TEAR, VR_WAIT_MAY_SYNC);
    cr_assert_eq(last_how, VR_WAIT_MAY_SYNC);
    cr_assert_eq(vr_waitq_count(~0u), 0);
    cr_assert(vr_waitq_valid());
}

static bool odd_id(const struct vr_wait *w, const void *arg)
{
    cr_assert_eq(arg, &order, "the caller's argument");
    return ((const struct item *)w)->id % 2 == 1;
}

/* The cache's settle drains only the reminders of one size. */
Test(waitq, a_drain_can_take_only_the_entries_it_matches)
{
    push(VR_WAIT_CACHE, 1, 0, NULL, NULL);
    push(VR_WAIT_CACHE, 2, 0, NULL, NULL);
    push(VR_WAIT_CACHE, 3, 0, NULL, NULL);
    push(VR_WAIT_RELEASE, 5, 0, NULL, NULL);
    vr_waitq_drain_if(VR_WAIT_MASK(VR_WAIT_CACHE), VR_WAIT_QUERY, odd_id, &order);
    cr_assert_eq(norder, 2, "1 and 3; not 2, not the release");
    cr_assert_eq(order[0], 1);
    cr_assert_eq(order[1], 3);
    cr_assert_eq(vr_waitq_count(VR_WAIT_MASK(VR_WAIT_CACHE)), 1);
    cr_assert_eq(vr_waitq_count(REL), 1);
    vr_waitq_drain(~0u, VR_WAIT_QUERY);
    cr_assert_eq(norder, 4);
    cr_assert_eq(order[2] + order[3], 7, "the rest");
    cr_assert(vr_waitq_valid());
}

Test(waitq, keeps_what_is_not_done_and_retries_oldest_first)
{
    push(VR_WAIT_RELEASE, 1, 2, NULL, NULL);
    push(VR_WAIT_RELEASE, 2, 0, NULL, NULL);
    push(VR_WAIT_RELEASE, 3, 1, NULL, NULL);
    vr_waitq_drain(REL, VR_WAIT_QUERY);
    cr_assert_eq(norder, 3);
    cr_assert_eq(order[0], 1);
    cr_assert_eq(order[1], 2);
    cr_assert_eq(order[2], 3);
    cr_assert_eq(vr_waitq_count(REL), 2);
    vr_waitq_drain(REL, VR_WAIT_QUERY);
    cr_assert_eq(vr_waitq_count(REL), 1);
    vr_waitq_drain(REL, VR_WAIT_FINAL);
    cr_assert_eq(last_how, VR_WAIT_FINAL);
    cr_assert_eq(vr_waitq_count(REL), 0);
}

Test(waitq, abandon_and_fork_forget_by_kind)
{
    bool f1 = false, f2 = false, k1 = true, k2 = true;
    push(VR_WAIT_RELEASE, 1, 5, &f1, &k1);
    push(VR_WAIT_TEARDOWN, 2, 5, &f2, &k2);
    vr_waitq_after_fork(REL);
    cr_assert(f1);
    cr_assert(k1, "forgotten as a forked child's copy");
    cr_assert_not(f2, "a kind not named is kept across a fork");
    cr_assert_eq(vr_waitq_count(TEAR), 1);
    vr_waitq_abandon(TEAR);
    cr_assert(f2);
    cr_assert_not(k2);
    cr_assert_eq(vr_waitq_count(~0u), 0);
    cr_assert_eq(norder, 0, "no retry: forgetting makes no driver call");
}

/* ---- tombs over the queue ---- */

static int destroys, refusals;
static CUresult CUDAAPI f_event_destroy(CUevent ev)
{
    (void)ev;
    destroys++;
    return refusals-- > 0 ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

Test(waitq, an_event_the_driver_refused_waits_for_a_later_drain)
{
    vr_real.cuEventDestroy_v2 = f_event_destroy;
    destroys = 0;
    refusals = 2;
    vr_tomb_drop_event((CUevent)0x10);
    cr_assert_eq(destroys, 1);
    cr_assert_eq(vr_waitq_count(TEAR), 1);
    vr_waitq_drain(REL, VR_WAIT_QUERY); /* the memory kinds leave it alone */
    cr_assert_eq(destroys, 1);
    vr_tomb_drain(false);
    cr_assert_eq(destroys, 2);
    cr_assert_eq(vr_waitq_count(TEAR), 1);
    vr_tomb_drain(false);
    cr_assert_eq(destroys, 3);
    cr_assert_eq(vr_waitq_count(TEAR), 0);
}
