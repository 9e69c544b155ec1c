#include "tomb.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "lock.h"
#include "log.h"

struct tomb {
    CUevent done;          /* NULL: completion unknown, retired at exit */
    CUcontext ctx;         /* the exec's, synchronized at exit when completion is unknown */
    bool unused;           /* no launch ever read the slices */
    struct tomb *next;
    size_t n;              /* reservations left; 0: only the event is left to destroy */
    struct vr_slices *slices[];
};

static vr_mutex tomb_lock = VR_MUTEX_INIT;
static struct tomb *tombs;
static atomic_size_t ntombs;

void vr_tomb_bury_many(struct vr_slices *const *s, size_t n, CUevent done, CUcontext ctx,
                       bool unused)
{
    struct tomb *t = malloc(sizeof *t + n * sizeof *s);
    if (!t) {
        vr_warn("out of memory: %zu reservations are kept until exit", n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        VR_ASSERT(s[i]);
    memcpy(t->slices, s, n * sizeof *s);
    t->n = n;
    t->done = done;
    t->ctx = ctx;
    t->unused = unused;
    vr_mutex_lock(&tomb_lock);
    t->next = tombs;
    tombs = t;
    vr_mutex_unlock(&tomb_lock);
    atomic_fetch_add(&ntombs, 1);
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

/* The whole list, taken out so that no lock is held across a driver call. */
static struct tomb *take_tombs(void)
{
    vr_mutex_lock(&tomb_lock);
    struct tomb *list = tombs;
    tombs = NULL;
    vr_mutex_unlock(&tomb_lock);
    return list;
}

/* Drops t's bookkeeping; its reservation, if any, is the driver's now. */
static void forget_tomb(struct tomb *t)
{
    for (size_t i = 0; i < t->n; i++)
        vr_slices_forget(t->slices[i]);
    free(t);
    atomic_fetch_sub(&ntombs, 1);
}

void vr_tomb_drain(bool final)
{
    if (atomic_load_explicit(&ntombs, memory_order_relaxed) == 0)
        return;
    struct tomb *list = take_tombs();
    /* Teardown of execs the program destroyed: the shim's own work, made at
     * whichever of the program's calls comes next (queries, a synchronize
     * at exit, unmaps): never a reason for the program's capture to fail. */
    vr_capture_relax();
    while (list) {
        struct tomb *t = list;
        list = t->next;
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
        if (!t->n && !t->done) {
            forget_tomb(t);
            continue;
        }
        if (final) {
            vr_log_fallback("teardown", t->n ? "a reservation could not be returned at exit"
                                               : "an event could not be destroyed at exit");
            forget_tomb(t);
            continue;
        }
        vr_mutex_lock(&tomb_lock);
        t->next = tombs;
        tombs = t;
        vr_mutex_unlock(&tomb_lock);
    }
    vr_capture_restore();
}

void vr_tomb_abandon(void)
{
    struct tomb *list = take_tombs();
    while (list) {
        struct tomb *t = list;
        list = t->next;
        forget_tomb(t);
    }
}

void vr_tomb_after_fork(void)
{
    tomb_lock = (vr_mutex)VR_MUTEX_INIT;
}
