/* tomb: teardowns waiting for the GPU, as entries of the waiting queue
 * (waitq.h, kind VR_WAIT_TEARDOWN); tomb.h is the contract. */
#include "tomb.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "graph_rec.h"
#include "log.h"
#include "waitq.h"

struct tomb {
    struct vr_wait w;      /* first: the queue hands this back */
    CUevent done;          /* NULL: completion unknown, retired at exit */
    CUcontext ctx;         /* the exec's, synchronized at exit when completion is unknown */
    bool unused;           /* no launch ever read the slices */
    size_t n;              /* reservations left; 0: only the event is left to destroy */
    struct vr_slices *slices[];
};

static bool retry(struct vr_wait *w, enum vr_wait_how how);
static void forget(struct vr_wait *w, bool fork);
static const struct vr_wait_ops ops = { retry, forget };

/* A torn-down reservation whose launches are complete, some slots still
 * mapping buffers the program has not freed (kind VR_WAIT_LINGER). */
struct linger {
    struct vr_wait w;
    struct vr_slices *s;
    uint64_t seq;  /* its place in the order they came */
    bool evict;    /* one of the oldest past VR_LINGER_MAX: every slot goes */
};

/* At most this many torn-down reservations linger: past it the oldest go
 * now, their slots with them (logged once), so that execs made and
 * destroyed over long-lived buffers (a cache of execs, re-instantiation
 * after a failed update) cannot grow them without end. */
#define VR_LINGER_MAX 256
static _Atomic uint64_t linger_seq;
static atomic_bool linger_evicted;

static bool older_than(const struct vr_wait *w, const void *arg)
{
    struct linger *l = (struct linger *)w;
    bool old = l->seq < *(const uint64_t *)arg;
    if (old)
        l->evict = true; /* the entry is the queue's alone until handed to retry */
    return old;
}

static bool linger_retry(struct vr_wait *w, enum vr_wait_how how);
static void linger_forget(struct vr_wait *w, bool fork);
static const struct vr_wait_ops linger_ops = { linger_retry, linger_forget };

/* Whether a slot's binding is still its allocation's (not freed, nor kept
 * by the cache: the program's address no longer maps it either). */
static bool still_allocated(const struct vr_slice_bind *b)
{
    struct vr_alloc_info info;
    return vr_alloc_find(b->base, &info) == 0 && info.id == b->id && info.base == b->base;
}

/* The slots of freed buffers go; true when the reservation is gone (or
 * kept for a later retry: *kept). */
static bool retire_now(struct vr_slices *s, bool *kept)
{
    int rc;
    *kept = false;
    size_t left = vr_slices_unmap_gone(s, still_allocated, &rc);
    if (rc != 0)
        return false;
    if (left == 0)
        return vr_slices_destroy(s) == 0;
    struct linger *l = malloc(sizeof *l);
    if (!l)
        return false; /* the tomb keeps it: retried at the next drain */
    uint64_t seq = atomic_fetch_add(&linger_seq, 1);
    *l = (struct linger){ .w = { .ops = &linger_ops, .kind = VR_WAIT_LINGER }, .s = s,
                          .seq = seq };
    vr_waitq_push(&l->w);
    *kept = true;
    if (seq >= VR_LINGER_MAX &&
        vr_waitq_count(VR_WAIT_MASK(VR_WAIT_LINGER)) > VR_LINGER_MAX) {
        uint64_t below = seq + 1 - VR_LINGER_MAX;
        if (!atomic_exchange(&linger_evicted, true))
            vr_log_fallback("teardown", "more than 256 torn-down reservations map live "
                                        "buffers: the oldest are unmapped (a pointer a "
                                        "kernel stored there no longer reads them)");
        vr_waitq_drain_if(VR_WAIT_MASK(VR_WAIT_LINGER), VR_WAIT_QUERY, older_than, &below);
    }
    return true;
}

void vr_tomb_retire(struct vr_slices *s, CUcontext ctx)
{
    bool kept;
    vr_capture_relax();
    bool done = retire_now(s, &kept);
    vr_capture_restore();
    if (!done)
        vr_tomb_bury(s, NULL, ctx, true);
}

static bool linger_retry(struct vr_wait *w, enum vr_wait_how how)
{
    struct linger *l = (struct linger *)w;
    vr_capture_relax();
    int rc = 0;
    /* At exit every slot goes: the program's buffers go with it. */
    bool gone = how == VR_WAIT_FINAL || l->evict ? vr_slices_destroy(l->s) == 0
                                     : vr_slices_unmap_gone(l->s, still_allocated, &rc) == 0 &&
                                           rc == 0 && vr_slices_destroy(l->s) == 0;
    vr_capture_restore();
    if (!gone && how == VR_WAIT_FINAL) {
        vr_log_fallback("teardown", "a reservation could not be returned at exit");
        vr_slices_forget(l->s);
        gone = true;
    }
    if (gone)
        free(l);
    return gone;
}

static void linger_forget(struct vr_wait *w, bool fork)
{
    (void)fork;
    struct linger *l = (struct linger *)w;
    vr_slices_forget(l->s);
    free(l);
}

static bool maps_id(const struct vr_wait *w, const void *arg)
{
    const struct linger *l = (const struct linger *)w;
    uint64_t id = *(const uint64_t *)arg;
    for (size_t i = 0; i < vr_slices_count(l->s); i++)
        if (vr_slices_current(l->s, i)->id == id)
            return true;
    return false;
}

void vr_tomb_buffer_freed(uint64_t id)
{
    if (vr_waitq_none(VR_WAIT_LINGER))
        return;
    vr_waitq_drain_if(VR_WAIT_MASK(VR_WAIT_LINGER), VR_WAIT_QUERY, maps_id, &id);
}

void vr_tomb_bury_many(struct vr_slices *const *s, size_t n, CUevent done, CUcontext ctx,
                       bool unused)
{
    struct tomb *t = malloc(sizeof *t + n * sizeof *s);
    if (!t) {
        vr_warn("out of memory: %zu reservations are kept until exit", n);
        return;
    }
    VR_ASSERT(n > 0 || done);
    for (size_t i = 0; i < n; i++)
        VR_ASSERT(s[i]);
    memcpy(t->slices, s, n * sizeof *s);
    t->w = (struct vr_wait){ .ops = &ops, .kind = VR_WAIT_TEARDOWN };
    t->n = n;
    t->done = done;
    t->ctx = ctx;
    t->unused = unused;
    vr_waitq_push(&t->w);
}

void vr_tomb_bury(struct vr_slices *s, CUevent done, CUcontext ctx, bool unused)
{
    vr_tomb_bury_many(&s, s ? 1 : 0, done, ctx, unused);
}

void vr_tomb_drop_event(CUevent ev)
{
    if (!ev)
        return;
    vr_capture_relax();
    CUresult r = vr_real.cuEventDestroy_v2(ev);
    vr_capture_restore();
    if (r != CUDA_SUCCESS)
        vr_tomb_bury(NULL, ev, NULL, true);
}

/* At exit, for a reservation whose last launch was never seen complete:
 * true once the exec's context finished its work, or is gone (and its work
 * with it). Without the context, only the current one can be asked. */
static bool ctx_finished(CUcontext ctx)
{
    CUcontext popped;
    /* A capture still running: the driver would refuse the synchronize and
     * invalidate it (measured on an H200); the reservation stays. */
    if (vr_grec_capturing())
        return false;
    CUresult r = ctx ? vr_real.cuCtxPushCurrent_v2(ctx) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) {
        r = vr_real.cuCtxSynchronize();
        if (ctx)
            vr_real.cuCtxPopCurrent_v2(&popped);
        /* With ctx pushed, an invalid current context is ctx, gone (a
         * released primary context reads so). */
        return r == CUDA_SUCCESS ||
               (ctx && (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED));
    }
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* Drops t's bookkeeping; its reservation, if any, is the driver's now. */
static void forget(struct vr_wait *w, bool fork)
{
    struct tomb *t = (struct tomb *)w;
    (void)fork;
    for (size_t i = 0; i < t->n; i++)
        vr_slices_forget(t->slices[i]);
    free(t);
}

/* Teardown of execs the program destroyed: the shim's own work, made at
 * whichever of the program's calls comes next (queries, a synchronize at
 * exit, unmaps): never a reason for the program's capture to fail. */
static bool retry(struct vr_wait *w, enum vr_wait_how how)
{
    struct tomb *t = (struct tomb *)w;
    bool final = how == VR_WAIT_FINAL;
    vr_capture_relax();
    if (t->n) {
        bool idle = t->unused || (t->done && vr_real.cuEventQuery(t->done) == CUDA_SUCCESS);
        /* The program is exiting: nothing it does can gate this any more. */
        if (!idle && final)
            idle = ctx_finished(t->ctx);
        size_t left = 0;
        bool kept;
        for (size_t i = 0; i < t->n; i++)
            if (!idle || !(t->unused || final ? vr_slices_destroy(t->slices[i]) == 0
                                              : retire_now(t->slices[i], &kept)))
                t->slices[left++] = t->slices[i];
        t->n = left;
    }
    if (!t->n && t->done && vr_real.cuEventDestroy_v2(t->done) == CUDA_SUCCESS)
        t->done = NULL;
    vr_capture_restore();
    if (!t->n && !t->done) {
        forget(w, false);
        return true;
    }
    if (final) {
        vr_log_fallback("teardown", t->n ? "a reservation could not be returned at exit"
                                           : "an event could not be destroyed at exit");
        forget(w, false);
        return true;
    }
    return false;
}

void vr_tomb_drain(bool final)
{
    vr_waitq_drain(VR_WAIT_MASK(VR_WAIT_TEARDOWN), final ? VR_WAIT_FINAL : VR_WAIT_QUERY);
}

void vr_tomb_drain_lingering(void)
{
    /* Slots of buffers released meanwhile (the allocator's drain at exit
     * tells of them) went at those frees, their failures are retried once
     * here; what is left goes now. */
    vr_waitq_drain(VR_WAIT_MASK(VR_WAIT_LINGER), VR_WAIT_QUERY);
    vr_waitq_drain(VR_WAIT_MASK(VR_WAIT_LINGER), VR_WAIT_FINAL);
}

void vr_tomb_abandon(void)
{
    vr_waitq_abandon(VR_WAIT_MASK(VR_WAIT_TEARDOWN) | VR_WAIT_MASK(VR_WAIT_LINGER));
}

/* A forked child keeps the parent's teardowns: they are retried (and fail
 * harmlessly) as they were before the queue. */
void vr_tomb_after_fork(void)
{
    vr_waitq_after_fork(0);
}
