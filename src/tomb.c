/* tomb: teardowns waiting for the GPU, as entries of the waiting queue
 * (waitq.h, kind VR_WAIT_TEARDOWN); tomb.h is the contract. */
#include "tomb.h"

#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
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
        for (size_t i = 0; i < t->n; i++)
            if (!idle || vr_slices_destroy(t->slices[i]) != 0)
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

void vr_tomb_abandon(void)
{
    vr_waitq_abandon(VR_WAIT_MASK(VR_WAIT_TEARDOWN));
}

/* A forked child keeps the parent's teardowns: they are retried (and fail
 * harmlessly) as they were before the queue. */
void vr_tomb_after_fork(void)
{
    vr_waitq_after_fork(0);
}
