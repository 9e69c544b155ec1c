/* alloc_release: returning freed VMM memory to the driver, in an order that
 * never unmaps under a kernel, and queueing what cannot be returned yet.
 *
 * A release that cannot finish now (its free's event is not complete, or a
 * synchronize, unmap, release or VA free failed) goes on the waiting queue
 * (waitq.h, kind VR_WAIT_RELEASE) and is retried at later alloc and free
 * hooks and at exit. Its physical bytes count in vmm_leaked_bytes while
 * they are held, memory on its way (waiting for its stream) does not.
 */
#include "alloc_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "err.h"
#include "graph_rec.h"
#include "stats.h"
#include "waitq.h"

struct parked_wait {
    struct vr_wait w; /* first: the queue hands this back */
    struct parked p;
};

/* Errors a synchronize returns because of the program's own context or
 * stream, which the native free would return too. */
bool vr_alloc_programs_error(CUresult r)
{
    /* STREAM_CAPTURE_UNSUPPORTED: the program's call is prohibited during a
     * capture (capture_guard.h); the native one would be refused too. */
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
           r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE ||
           r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED ||
           r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* After cuCtxSynchronize failed (`r`) for a reason that is not the
 * program's: the driver's own free of a scrap allocation waits for the
 * context's work as the program's free would have. Returns r when it
 * could not be made, so the memory stays mapped until a later wait. */
CUresult vr_alloc_wait_by_native_free(CUresult r)
{
    CUdeviceptr scrap = 0;
    if (vr_alloc_programs_error(r) || vr_real.cuMemAlloc_v2(&scrap, 1) != CUDA_SUCCESS)
        return r;
    return vr_real.cuMemFree_v2(scrap) == CUDA_SUCCESS ? CUDA_SUCCESS : r;
}

/* Waits for the current context's work, as the native free does before it
 * releases. */
static CUresult wait_for_work(void)
{
    CUresult r = vr_real.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? r : vr_alloc_wait_by_native_free(r);
}

/* Physical memory a parked entry could not return (a VA alone is not
 * memory; memory waiting for its stream is on its way, not lost). */
static size_t held(const struct parked *p)
{
    if (p->steps & STEP_EVENT)
        return 0;
    return (p->steps & (STEP_UNMAP | STEP_RELEASE)) ? p->rec.padded : 0;
}

static void step_failed(unsigned bit, const char *step, CUresult r, const struct parked *p)
{
    char reason[192];
    snprintf(reason, sizeof reason, "%s: %s; %zu bytes kept, released later", step,
             vr_cu_name(r), p->rec.padded);
    vr_alloc_fallback_once(bit, "cuMemFree", reason);
}

/* Does what is left of a release, in an order that never unmaps under a
 * kernel: synchronize (only when allowed to block), unmap, release the
 * handle, free the VA (only once unmapped). Returns the steps still left. */
static unsigned release_steps(struct parked *p, bool may_sync)
{
    const struct vr_alloc_info *rec = &p->rec;
    CUresult r;
    /* No blocking wait while a capture runs: the driver refuses a relaxed
     * thread's cuCtxSynchronize then, invalidating the capture (measured on
     * an H200); the release waits for a later hook. */
    if (may_sync && vr_grec_capturing())
        may_sync = false;
    if (p->steps & STEP_EVENT) {
        r = vr_real.cuEventQuery(p->done);
        if (r == CUDA_ERROR_NOT_READY && may_sync)
            r = vr_real.cuEventSynchronize(p->done);
        if (r == CUDA_ERROR_NOT_READY)
            return p->steps;
        /* Done; or the event cannot tell, and the context must (STEP_SYNC). */
        p->steps &= ~(unsigned)STEP_EVENT;
        if (r != CUDA_SUCCESS)
            p->steps |= STEP_SYNC;
    }
    if (p->steps & STEP_EVENT_DESTROY) {
        r = vr_real.cuEventDestroy_v2(p->done);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_EVENT_DESTROY;
        else
            vr_alloc_fallback_once(FB_EVENT, "cuMemFreeAsync", "cuEventDestroy failed; retried later");
    }
    if (p->steps & STEP_SYNC) {
        if (!may_sync)
            return p->steps;
        /* Without its context (a failed query at free) the current one. */
        r = p->ctx ? vr_real.cuCtxPushCurrent_v2(p->ctx) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) {
            CUcontext popped;
            r = wait_for_work();
            if (p->ctx)
                vr_real.cuCtxPopCurrent_v2(&popped);
        }
        /* A context that is gone runs no kernel any more. */
        if (r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_CONTEXT ||
            r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
            p->steps &= ~(unsigned)STEP_SYNC;
        else
            return p->steps;
    }
    if (p->steps & STEP_UNMAP) {
        r = vr_real.cuMemUnmap(rec->base, rec->padded);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_UNMAP;
        else
            step_failed(FB_UNMAP, "cuMemUnmap", r, p);
    }
    if (p->steps & STEP_RELEASE) {
        r = vr_real.cuMemRelease(rec->handle);
        if (r == CUDA_SUCCESS) {
            p->steps &= ~(unsigned)STEP_RELEASE;
            vr_ipc_released(rec->handle);
        }
        else
            step_failed(FB_RELEASE, "cuMemRelease", r, p);
    }
    if ((p->steps & STEP_ADDRESS_FREE) && !(p->steps & STEP_UNMAP)) {
        r = vr_real.cuMemAddressFree(rec->base - rec->lead, rec->lead + rec->reserved);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_ADDRESS_FREE;
        else
            step_failed(FB_ADDRESS_FREE, "cuMemAddressFree", r, p);
    }
    return p->steps;
}

static bool retry(struct vr_wait *w, enum vr_wait_how how)
{
    struct parked_wait *pw = (struct parked_wait *)w;
    size_t counted = held(&pw->p);
    VR_ASSERT(pw->p.steps != 0);
    vr_capture_relax();
    release_steps(&pw->p, how != VR_WAIT_QUERY);
    vr_capture_restore();
    size_t now = pw->p.steps ? held(&pw->p) : 0;
    vr_stat_add(VR_C_vmm_leaked_bytes, (int64_t)now - (int64_t)counted);
    if (pw->p.steps)
        return false;
    free(pw);
    return true;
}

/* A child's copy is the parent's to release and was never counted in the
 * child's totals as the child's own loss. */
static void forget(struct vr_wait *w, bool fork)
{
    struct parked_wait *pw = (struct parked_wait *)w;
    if (!fork)
        vr_stat_add(VR_C_vmm_leaked_bytes, -(int64_t)held(&pw->p));
    free(pw);
}

static const struct vr_wait_ops ops = { retry, forget };

static void park(const struct parked *p)
{
    VR_ASSERT(p->steps != 0);
    struct parked_wait *pw = malloc(sizeof *pw);
    if (!pw)
        return; /* lost for good: it stays counted */
    pw->w = (struct vr_wait){ .ops = &ops, .kind = VR_WAIT_RELEASE };
    pw->p = *p;
    vr_waitq_push(&pw->w);
}

void vr_park_release(struct parked *p, bool may_sync, size_t counted)
{
    /* The shim's own: a release deferred or undone, whatever call runs it. */
    vr_capture_relax();
    release_steps(p, may_sync);
    vr_capture_restore();
    size_t now = p->steps ? held(p) : 0;
    vr_stat_add(VR_C_vmm_leaked_bytes, (int64_t)now - (int64_t)counted);
    if (p->steps)
        park(p);
}

void vr_park_drain(bool may_sync)
{
    vr_waitq_drain(VR_WAIT_MASK(VR_WAIT_RELEASE), may_sync ? VR_WAIT_MAY_SYNC : VR_WAIT_QUERY);
}
