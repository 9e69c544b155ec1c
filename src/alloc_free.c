/* alloc_free: cuMemFree, cuMemFreeAsync and a destroyed context's memory.
 *
 * The program's memory is gone once the registry lost it: the cache keeps
 * it (alloc_cache.c: still mapped, the observer told when it goes), or the
 * observer (vr_alloc_observe_free) is told, so no slice maps it any more,
 * and the shim's own release follows (alloc_release.c). alloc.h states what the program sees.
 */
#include "alloc_int.h"

#include <stdio.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "err.h"
#include "graph_rec.h"
#include "log.h"
#include "stats.h"

/* The program's memory is gone once the registry lost it: from here on the
 * program's call succeeds, whatever the shim's own calls say. Unless
 * `synced`, the memory is unmapped only once `done` completed (when given)
 * or the context was synchronized. Memory whose last use is known (synced,
 * or an event) goes to the cache when it fits: still mapped, but free as
 * far as the program and the free-memory estimate can tell. */
static void forget_and_release(const struct vr_alloc_info *rec, CUcontext ctx, bool synced,
                               CUevent done, unsigned gen)
{
    VR_ASSERT(rec->vmm && rec->padded >= rec->size && rec->id != 0);
    vr_stat_add(VR_C_vmm_bytes, -(int64_t)rec->padded);
    vr_stat_add(VR_C_padding_bytes, -(int64_t)(rec->padded - rec->size));
    vr_alloc_memory_used(rec->device, -(long long)rec->padded);
    /* Kept: still mapped at its address with its handle, so a slot bound
     * to it maps the same bytes; the observer hears of it when the cache
     * lets it go (alloc_cache.c). */
    if ((synced || done) && vr_cache_put(rec, ctx, done, gen))
        return;
    vr_alloc_tell_freed(rec->id, synced);
    struct parked p = { .rec = *rec, .ctx = ctx, .done = done,
                        .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
    if (done)
        p.steps |= STEP_EVENT | STEP_EVENT_DESTROY;
    else if (!synced)
        p.steps |= STEP_SYNC;
    /* After the exit work no later hook retries: wait now. */
    vr_park_release(&p, atomic_load_explicit(&vr_alloc_closed, memory_order_acquire), 0);
}

/* A VMM-backed allocation, already detached: the native free waits for the
 * device; so does this one, before any slice or mapping of this memory goes
 * away under running work.
 *
 * Every free syncs, even one right after another with nothing between: a
 * second sync could be skipped only if no work reached the context since
 * the first began, and the shim cannot know that. It sees only the entry
 * points it hooks; the program (or cudart, or a library) may submit
 * through others: cuMemsetD16Async, the synchronous cuMemset and
 * cuMemcpyDtoD forms (asynchronous for device memory), cuMemcpy2D/3D,
 * cuLaunchHostFunc, cuStreamWriteValue32, cuStreamBatchMemOp, ...: route_proc
 * hands out the driver's own pointer for exports it does not hook, a
 * direct call to one never passes here, cudart's cuGetExportTable tables
 * are opaque, and a newer driver adds entry points. An epoch counted over
 * the hooked ones would let a free return before such work finished. */
/* During a capture the shim's cuCtxSynchronize is refused even in a relaxed
 * thread, and the refusal invalidates the program's capture (measured on an
 * H200), where the native cuMemFree of a relaxed thread succeeds. So no
 * synchronize: the driver's verdict on the program's call is asked of a
 * scrap native allocation in the program's own mode (cuMemAlloc and cuMemFree
 * are refused alike: measured), and an allowed free returns at once, its
 * release parked until a synchronize is safe again (alloc_release.c), so
 * nothing is unmapped under running work. */
static int free_in_capture(const struct vr_alloc_info *rec, CUcontext ctx, unsigned gen)
{
    if (!vr_capture_thread_relaxed()) {
        CUdeviceptr scrap = 0;
        CUresult r = vr_real.cuMemAlloc_v2(&scrap, 1);
        if (r == CUDA_SUCCESS)
            vr_real.cuMemFree_v2(scrap);
        else if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
            vr_reg_reattach(rec); /* the native free is refused the same way */
            return vr_err_cu(r);
        }
    }
    forget_and_release(rec, ctx, false, NULL, gen);
    return 0;
}

static int free_vmm(const struct vr_alloc_info *rec, CUcontext ctx, unsigned gen)
{
    if (vr_grec_capturing())
        return free_in_capture(rec, ctx, gen);
    CUresult r = vr_real.cuCtxSynchronize();
    if (r != CUDA_SUCCESS && vr_alloc_programs_error(r)) {
        vr_reg_reattach(rec); /* the native free would have failed the same way */
        return vr_err_cu(r);
    }
    if (r != CUDA_SUCCESS) {
        CUresult w = vr_alloc_wait_by_native_free(r);
        char reason[192];
        snprintf(reason, sizeof reason, "cuCtxSynchronize: %s; %s", vr_cu_name(r),
                 w == CUDA_SUCCESS ? "waited through a native free instead"
                                   : "memory kept mapped, released later");
        vr_alloc_fallback_once(FB_SYNC, "cuMemFree", reason);
        r = w;
    }
    forget_and_release(rec, ctx, r == CUDA_SUCCESS, NULL, gen);
    return 0;
}

/* Nothing of a destroyed context runs any more: nothing to wait for, and
 * its events went with it. */
void vr_alloc_context_destroyed(CUcontext ctx)
{
    if (!ctx || vr_alloc_cfg.mode != VR_MODE_PROFILED)
        return;
    for (;;) {
        CUdeviceptr base = vr_reg_vmm_of_context(ctx);
        struct vr_alloc_info rec;
        if (!base)
            break;
        if (vr_reg_detach(base, &rec) != 0)
            continue; /* freed by another thread meanwhile */
        vr_stat_add(VR_C_vmm_bytes, -(int64_t)rec.padded);
        vr_stat_add(VR_C_padding_bytes, -(int64_t)(rec.padded - rec.size));
        vr_alloc_memory_used(rec.device, -(long long)rec.padded);
        vr_alloc_tell_freed(rec.id, false);
        struct parked p = { .rec = rec, .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
        vr_park_release(&p, false, 0);
    }
    for (;;) {
        struct kept k;
        if (!vr_cache_take_context(ctx, &k))
            break;
        k.done = NULL;
        vr_cache_release_kept(&k, false);
    }
}

int vr_alloc_free(CUdeviceptr dptr)
{
    struct vr_alloc_info rec;
    CUcontext ctx = NULL;
    /* Read before the record leaves the registry: see vr_alloc_enable_peer. */
    unsigned gen = vr_alloc_peer_generation();
    int rc;

    /* Unknown or interior: the driver's own answer. */
    if (dptr == 0 || vr_alloc_find(dptr, &rec) != 0 || rec.base != dptr) {
        rc = vr_err_cu(vr_real.cuMemFree_v2(dptr));
    } else if ((rc = vr_alloc_need_context(&ctx)) != 0) {
        /* the driver's answer, and nothing freed */
    } else if (vr_reg_detach(dptr, &rec) != 0) {
        rc = vr_err_cu(vr_real.cuMemFree_v2(dptr)); /* freed by another thread meanwhile */
    } else if (!rec.vmm) {
        CUresult r = vr_real.cuMemFree_v2(dptr);
        if (r != CUDA_SUCCESS)
            vr_reg_reattach(&rec);
        else
            vr_alloc_memory_used(rec.device, -(long long)rec.size);
        rc = vr_err_cu(r);
    } else {
        rc = free_vmm(&rec, ctx, gen);
    }
    vr_park_drain(true); /* a free may block on the device, as the native one does */
    return rc;
}

static CUresult record_in(CUevent ev, CUstream stream, bool per_thread)
{
    return per_thread && vr_real.cuEventRecord_ptsz ? vr_real.cuEventRecord_ptsz(ev, stream)
                                                    : vr_real.cuEventRecord(ev, stream);
}

static void drop_event(CUevent ev)
{
    if (ev && vr_real.cuEventDestroy_v2(ev) != CUDA_SUCCESS)
        vr_warn("an event of a failed cuMemFreeAsync could not be destroyed");
}

/* A new event recorded on the program's stream. cuEventRecord takes only an
 * event of the stream's own context, and the program may free in stream
 * order on a stream of another context than its current one (the native
 * call allows it): refused so, the event is made again in the stream's
 * context. */
static CUresult event_on_stream(CUstream stream, bool per_thread, CUevent *out)
{
    CUevent ev = NULL;
    CUresult r = vr_real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return r;
    r = record_in(ev, stream, per_thread);
    CUresult (*get_ctx)(CUstream, CUcontext *) =
        per_thread && vr_real.cuStreamGetCtx_ptsz ? vr_real.cuStreamGetCtx_ptsz
                                                  : vr_real.cuStreamGetCtx;
    CUcontext sctx = NULL, popped;
    if (r == CUDA_ERROR_INVALID_HANDLE && get_ctx && get_ctx(stream, &sctx) == CUDA_SUCCESS &&
        sctx && vr_real.cuCtxPushCurrent_v2(sctx) == CUDA_SUCCESS) {
        CUevent again = NULL;
        if (vr_real.cuEventCreate(&again, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
            r = record_in(again, stream, per_thread);
            if (r == CUDA_SUCCESS) {
                drop_event(ev);
                ev = again;
            } else {
                drop_event(again);
            }
        }
        vr_real.cuCtxPopCurrent_v2(&popped);
    }
    if (r != CUDA_SUCCESS) {
        drop_event(ev);
        return r;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

/* The driver never saw varemap's VMM allocations as cuMemAlloc memory, so a
 * stream-ordered free of one is done here, without blocking the host (the
 * driver's does not): an event recorded on the stream now, and the memory
 * unmapped and released once it completed, at a later hook or at exit.
 * Anything else is the driver's. */
int vr_alloc_free_async(CUdeviceptr dptr, CUstream stream, bool per_thread)
{
    struct vr_alloc_info rec;
    CUcontext ctx = NULL;
    int rc;
    bool known = vr_alloc_find(dptr, &rec) == 0 && rec.base == dptr;
    if (!known || !rec.vmm) {
        rc = vr_err_cu(per_thread ? vr_real.cuMemFreeAsync_ptsz(dptr, stream)
                                  : vr_real.cuMemFreeAsync(dptr, stream));
        /* Native cuMemAlloc memory freed in stream order: gone for the
         * program now, so no later lookup may name it. */
        if (rc == 0 && known && vr_reg_detach(dptr, &rec) == 0)
            vr_alloc_memory_used(rec.device, -(long long)rec.size);
        vr_park_drain(false);
        return rc;
    }
    /* Into a capture: the driver's own answer (an H200 refuses a free of
     * memory not allocated in the graph with CUDA_ERROR_INVALID_VALUE and
     * the capture goes on), and the memory stays the program's; no event of
     * the shim's goes into the program's graph (issue 30 item 7). */
    if (vr_capture_stream_busy(stream, per_thread))
        return vr_err_cu(per_thread ? vr_real.cuMemFreeAsync_ptsz(dptr, stream)
                                    : vr_real.cuMemFreeAsync(dptr, stream));
    if ((rc = vr_alloc_need_context(&ctx)) != 0)
        return rc;
    unsigned gen = vr_alloc_peer_generation(); /* before detach: see vr_alloc_enable_peer */
    CUevent done = NULL;
    CUresult r = event_on_stream(stream, per_thread, &done);
    /* The stream is the program's: its errors are the native call's. */
    if (r != CUDA_SUCCESS && vr_alloc_programs_error(r))
        return vr_err_cu(r);
    if (vr_reg_detach(dptr, &rec) != 0) {
        drop_event(done);
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE); /* freed by another thread meanwhile */
    }
    if (!done) {
        char reason[160];
        snprintf(reason, sizeof reason,
                 "cuEventCreate/cuEventRecord: %s; memory kept mapped until a later "
                 "synchronizing call", vr_cu_name(r));
        vr_alloc_fallback_once(FB_SYNC, "cuMemFreeAsync", reason);
    }
    forget_and_release(&rec, ctx, false, done, gen);
    vr_park_drain(false);
    return 0;
}

