#include "track.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "assert.h"
#include "capture_guard.h"
#include "graph_rec.h"
#include "driver.h"
#include "err.h"
#include "tomb.h"

static atomic_uint_fast64_t threads;
static __thread uint64_t my_serial __attribute__((tls_model("initial-exec")));

uint64_t vr_track_thread(void)
{
    if (!my_serial)
        my_serial = atomic_fetch_add_explicit(&threads, 1, memory_order_relaxed) + 1;
    return my_serial;
}

bool vr_ctx_enter(CUcontext ctx)
{
    CUcontext cur = NULL;
    if (!ctx || (vr_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == ctx))
        return false;
    return vr_real.cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS;
}

void vr_ctx_leave(bool entered)
{
    CUcontext popped;
    if (entered)
        vr_real.cuCtxPopCurrent_v2(&popped);
}

void vr_track_init(struct vr_track *t, CUcontext ctx)
{
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
}

/* The stream a handle names to the driver, with NULL made explicit. */
static CUstream canon(CUstream s, bool ptsz)
{
    return s ? s : ptsz ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

static bool relative(CUstream s)
{
    return s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* The context a relative handle means in this thread (NULL: none). */
static CUcontext current(void)
{
    CUcontext c = NULL;
    return vr_real.cuCtxGetCurrent(&c) == CUDA_SUCCESS ? c : NULL;
}

/* Whether an event of the shim's recorded into `s` (canonical) now would
 * land in a program's capture (a node of its graph, or the capture
 * invalidated): s captures, or is the legacy stream while any capture the
 * shim saw runs (an implicit join the shim does not ask about: asking on
 * the legacy stream can itself end a capture). Issue 30 item 7. */
static bool capture_holds(CUstream s)
{
    if (!vr_grec_capturing())
        return false;
    return s == CU_STREAM_LEGACY || vr_capture_stream_busy(s, false);
}

/* Whether `s` (canonical), used by this thread now, is the last launch's
 * stream. */
static bool same_stream(const struct vr_track *t, CUstream s)
{
    if (t->gone || s != t->stream)
        return false;
    if (!relative(s))
        return true;
    return current() == t->sctx && (s != CU_STREAM_PER_THREAD || t->thread == vr_track_thread());
}

/* Whether this thread may record an event into the last launch's stream
 * so that it lands behind that launch. */
static bool recordable(const struct vr_track *t)
{
    return t->seq && same_stream(t, t->stream) && !capture_holds(t->stream);
}

/* A new event in the last launch's stream's context (made there when the
 * caller's current context is another), or NULL. */
static CUevent make_event(const struct vr_track *t)
{
    CUevent ev = NULL;
    bool entered = vr_ctx_enter(t->sctx);
    vr_capture_relax();
    if (vr_real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        ev = NULL;
    vr_capture_restore();
    vr_ctx_leave(entered);
    return ev;
}

/* An event of the ring standing after the last launch: the one already
 * recorded there, else one recorded now (reusing a free slot, else the
 * oldest, whose launches a newer one covers anyway), or -1. */
static int record_last(struct vr_track *t)
{
    if (!t->seq)
        return -1;
    for (int i = 0; i < VR_TRACK_EVENTS; i++)
        if (t->at[i] == t->seq)
            return i;
    if (!recordable(t))
        return -1;
    int k = 0;
    for (int i = 0; i < VR_TRACK_EVENTS; i++) {
        if (!t->at[i]) {
            k = i;
            break;
        }
        if (t->at[i] < t->at[k])
            k = i;
    }
    if (t->ev[k] && t->evctx[k] != t->sctx) {
        vr_tomb_drop_event(t->ev[k]);
        t->ev[k] = NULL;
    }
    if (!t->ev[k]) {
        t->ev[k] = make_event(t);
        t->evctx[k] = t->sctx;
        if (!t->ev[k])
            return -1;
    }
    t->at[k] = 0;
    /* cuda.h: an event is recorded only in a stream of its own context. */
    VR_ASSERT(t->evctx[k] == t->sctx);
    if (vr_real.cuEventRecord(t->ev[k], t->stream) != CUDA_SUCCESS)
        return -1;
    t->at[k] = t->seq;
    t->recorded = t->seq;
    return k;
}

static void completed(struct vr_track *t, uint64_t upto)
{
    VR_ASSERT(upto <= t->seq);
    if (upto > t->done)
        t->done = upto;
    for (int i = 0; i < VR_TRACK_EVENTS; i++)
        if (t->at[i] && t->at[i] <= t->done)
            t->at[i] = 0;
}

static bool complete(struct vr_track *t, uint64_t upto, bool rec)
{
    if (!upto || t->done >= upto)
        return true;
    VR_ASSERT(upto <= t->seq);
    if (t->asked_seq == t->seq && upto >= t->asked_upto)
        return false;
    int k = -1;
    for (int i = 0; i < VR_TRACK_EVENTS; i++)
        if (t->at[i] >= upto && (k < 0 || t->at[i] < t->at[k]))
            k = i;
    if (k < 0 && rec)
        k = record_last(t);
    /* A failed query means "not complete", never assumed otherwise. */
    if (k >= 0 && vr_real.cuEventQuery(t->ev[k]) == CUDA_SUCCESS) {
        completed(t, t->at[k]);
        return true;
    }
    t->asked_seq = t->seq;
    t->asked_upto = upto;
    return false;
}

bool vr_track_complete(struct vr_track *t, uint64_t upto)
{
    return complete(t, upto, true);
}

bool vr_track_known(struct vr_track *t, uint64_t upto)
{
    return complete(t, upto, false);
}

void vr_track_synced(struct vr_track *t)
{
    completed(t, t->seq);
}

bool vr_track_orderable(struct vr_track *t, CUstream stream, bool ptsz)
{
    return !t->seq || t->done >= t->seq || same_stream(t, canon(stream, ptsz)) ||
           record_last(t) >= 0;
}

/* During a capture: the driver refuses cuCtxSynchronize even in a relaxed
 * thread, invalidating the program's capture (measured on an H200), so only
 * the last launch's own stream is waited for, when it is one (a created
 * stream, alive, not capturing: a relaxed thread's cuStreamSynchronize of it
 * is allowed, measured); else the launch goes unordered, logged. */
static int stream_wait(struct vr_track *t)
{
    if (t->gone || relative(t->stream) || vr_capture_stream_busy(t->stream, false))
        return -EBUSY;
    vr_capture_relax();
    CUresult r = vr_real.cuStreamSynchronize(t->stream);
    vr_capture_restore();
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    vr_track_synced(t);
    return 1;
}

/* The last resort: the contexts of the last launch and of the exec
 * synchronized, so the last launch is complete. */
static int host_wait(struct vr_track *t)
{
    if (vr_grec_capturing())
        return stream_wait(t);
    CUcontext ctxs[2] = {t->sctx, t->ctx};
    for (int i = 0; i < 2; i++) {
        if (!ctxs[i] || (i == 1 && ctxs[1] == ctxs[0]))
            continue;
        bool entered = vr_ctx_enter(ctxs[i]);
        vr_capture_relax();
        CUresult r = vr_real.cuCtxSynchronize();
        vr_capture_restore();
        vr_ctx_leave(entered);
        if (r != CUDA_SUCCESS)
            return vr_err_cu(r);
    }
    vr_track_synced(t);
    return 1;
}

int vr_track_order_slow(struct vr_track *t, CUstream stream, bool ptsz)
{
    CUstream s = canon(stream, ptsz);
    if (same_stream(t, s))
        return 0;
    int k = record_last(t);
    if (k < 0)
        return host_wait(t);
    /* Waiting accepts an event of any context (cuda.h). */
    VR_ASSERT(t->at[k] == t->seq);
    CUresult r = vr_real.cuStreamWaitEvent(s, t->ev[k], 0);
    return r == CUDA_SUCCESS ? 0 : host_wait(t);
}

void vr_track_launched_slow(struct vr_track *t, uint64_t var, CUstream stream, bool ptsz,
                            enum vr_track_mode mode)
{
    CUstream s = canon(stream, ptsz);
    t->seq++;
    t->var = var;
    t->stream = s;
    t->gone = false;
    t->sctx = t->ctx;
    t->thread = 0;
    if (relative(s)) {
        /* Its identity costs a question to the driver: only asked where a
         * later call may need it; unknown, it is never "the same". */
        if (mode == VR_TRACK_QUIET) {
            t->gone = true;
            return;
        }
        t->sctx = current();
        t->thread = s == CU_STREAM_PER_THREAD ? vr_track_thread() : 0;
    }
    if (mode == VR_TRACK_QUIET)
        return;
    /* Right after VMM work the next launches are likely to need to know
     * (an event recorded only when asked is rarely complete yet); in a
     * settled state one every VR_TRACK_EVERY launches; in a relative
     * stream after every launch, as no other thread can record one. */
    if (mode == VR_TRACK_HOT)
        t->hot = t->seq + VR_TRACK_EVERY;
    if (relative(s) || t->seq <= t->hot || t->seq - t->recorded >= VR_TRACK_EVERY)
        record_last(t);
}

CUevent vr_track_event_after(struct vr_track *t)
{
    if (recordable(t)) {
        CUevent ev = make_event(t);
        if (ev && vr_real.cuEventRecord(ev, t->stream) == CUDA_SUCCESS)
            return ev;
        vr_tomb_drop_event(ev);
    }
    for (int i = 0; i < VR_TRACK_EVENTS; i++) {
        if (t->at[i] != t->seq || !t->ev[i])
            continue;
        CUevent ev = t->ev[i];
        t->ev[i] = NULL;
        t->at[i] = 0;
        return ev;
    }
    return NULL;
}

void vr_track_stream_destroyed(struct vr_track *t, CUstream stream)
{
    if (!t->seq || t->gone || relative(t->stream) || t->stream != stream)
        return;
    if (t->done < t->seq)
        record_last(t);
    t->gone = true;
}

void vr_track_free(struct vr_track *t)
{
    for (int i = 0; i < VR_TRACK_EVENTS; i++)
        if (t->ev[i])
            vr_tomb_drop_event(t->ev[i]);
    vr_track_init(t, NULL);
}
