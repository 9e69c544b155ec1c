/* track: the order and completion of one exec's launches, in every state.
 *
 * The driver orders every launch of an exec behind its previous launch,
 * even across streams. The shim's variants are other execs to the driver,
 * so between launches of different variants the order is the shim's to
 * keep: a launch whose variant differs from the previous launch's waits, in
 * its stream, for an event after that launch, unless both run in one
 * stream. Every launch of the exec is tracked, whatever its state, so a
 * launch of the program's exec after its variants were dropped (an update,
 * a fallback) is still ordered behind the variants' launches.
 *
 * Invariants (asserted in debug builds where they can be):
 * - "One stream" means one stream to the driver: a handle compared with
 *   its context and, for the per-thread default stream, its thread. NULL
 *   becomes CU_STREAM_LEGACY or CU_STREAM_PER_THREAD by its entry point.
 *   A stream the program destroyed, or one whose identity was not
 *   recorded, is never "the same" again (its handle may be reused).
 * - An event is recorded in a stream only where it lands behind the
 *   launch it stands for: in an ordinary stream from any thread (until the
 *   stream is destroyed), in a legacy or per-thread stream only from the
 *   launching thread in the launching context. So a launch into a
 *   per-thread or legacy stream gets its event at once, from its own
 *   thread, whenever anyone may ask later (every state but the quiet one).
 * - Events are made in the context of the stream they are recorded in
 *   (cuda.h: an event and a stream of different contexts are refused).
 * - Completion is queried, never assumed: a failed query means "not yet".
 * - The only host wait is the last resort of ordering (no event could be
 *   made or recorded): vr_track_order says so, and the caller counts it.
 *
 * Not thread-safe: the owning exec's lock serializes every call, except
 * vr_track_thread(), which is the calling thread's own.
 */
#ifndef VR_TRACK_H
#define VR_TRACK_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#define VR_TRACK_EVENTS 8
#define VR_TRACK_EVERY 16

enum vr_track_mode {
    VR_TRACK_QUIET,  /* bookkeeping only: no state of the exec asks later */
    VR_TRACK_NORMAL, /* an event now and then, and at once in a legacy or per-thread stream */
    VR_TRACK_HOT,    /* after VMM work: an event after every launch for a while */
};

struct vr_track {
    CUevent ev[VR_TRACK_EVENTS];
    CUcontext evctx[VR_TRACK_EVENTS]; /* the context each event was made in */
    uint64_t at[VR_TRACK_EVENTS]; /* launch the event was recorded after; 0: free */
    uint64_t seq;                 /* successful launches */
    uint64_t done;                /* every launch <= done is complete */
    uint64_t recorded;            /* newest launch an event was recorded after */
    uint64_t hot;                 /* every launch up to this one gets an event */
    uint64_t asked_seq, asked_upto; /* a query said "not yet" then: not asked again */
    CUcontext ctx;                /* the exec's: its ordinary streams' context */
    CUstream stream;              /* the last launch's, NULL made explicit */
    CUcontext sctx;               /* that stream's context */
    uint64_t thread;              /* a per-thread stream's thread (vr_track_thread) */
    bool gone;                    /* destroyed since, or its identity unknown */
    uint64_t var;                 /* its variant's id (0: the program's exec) */
};

/* A track for an exec of context ctx (zeroes the rest). */
void vr_track_init(struct vr_track *t, CUcontext ctx);

/* True when launches up to `upto` are known complete; queries at most one
 * event, records one after the last launch when none covers `upto` yet
 * (where one may be recorded). */
bool vr_track_complete(struct vr_track *t, uint64_t upto);
/* The same without recording: only an event already recorded is asked. */
bool vr_track_known(struct vr_track *t, uint64_t upto);
/* The context was synchronized: every launch made so far is complete. */
void vr_track_synced(struct vr_track *t);

/* Whether a launch of another variant than the last one, in (stream,
 * ptsz), can be ordered behind the last launch without a host wait. */
bool vr_track_orderable(struct vr_track *t, CUstream stream, bool ptsz);
/* Before launching variant `var` in (stream, ptsz): orders it after the
 * previous launch. Returns 0, 1 when it had to wait on the host (no event
 * could be had), or a negative code when not even that worked. */
int vr_track_order_slow(struct vr_track *t, CUstream stream, bool ptsz);
static inline int vr_track_order(struct vr_track *t, uint64_t var, CUstream stream, bool ptsz)
{
    /* The launch path's common case, inline: nothing launched yet, all of it
     * complete, or the same variant again (the driver orders those). */
    if (!t->seq || t->done >= t->seq || var == t->var)
        return 0;
    return vr_track_order_slow(t, stream, ptsz);
}
/* After a successful launch of variant `var` in (stream, ptsz). */
void vr_track_launched_slow(struct vr_track *t, uint64_t var, CUstream stream, bool ptsz,
                            enum vr_track_mode mode);
static inline void vr_track_launched(struct vr_track *t, uint64_t var, CUstream stream, bool ptsz,
                                     enum vr_track_mode mode)
{
    /* The common case, inline: an ordinary stream (not NULL, not a relative
     * handle) and no event due: the same fields to the same values as
     * vr_track_launched_slow. */
    if (stream && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD &&
        (mode == VR_TRACK_QUIET ||
         (mode == VR_TRACK_NORMAL && t->seq + 1 > t->hot &&
          t->seq + 1 - t->recorded < VR_TRACK_EVERY))) {
        t->seq++;
        t->var = var;
        t->stream = stream;
        t->gone = false;
        t->sctx = t->ctx;
        t->thread = 0;
        return;
    }
    vr_track_launched_slow(t, var, stream, ptsz, mode);
}

/* An event after the last launch, for a caller that keeps it (a tomb):
 * recorded now where that is allowed, else the track's own event after the
 * last launch handed over; NULL when neither exists. */
CUevent vr_track_event_after(struct vr_track *t);
/* The program is destroying `stream`: an event after the last launch is
 * recorded while the stream still exists, and the stream is gone. */
void vr_track_stream_destroyed(struct vr_track *t, CUstream stream);
/* Destroys the track's events (vr_tomb_drop_event). */
void vr_track_free(struct vr_track *t);

/* The calling thread's serial (never 0, never reused). */
uint64_t vr_track_thread(void);

/* Makes ctx current for a call the shim makes on an exec's behalf when it
 * is not; returns whether vr_ctx_leave must restore the caller's. */
bool vr_ctx_enter(CUcontext ctx);
void vr_ctx_leave(bool entered);

#endif
