/* launch: every launch and upload of a known exec: the window's weighing,
 * the decision once profiled, the pending remaps or a variant when active,
 * then the ordered launch behind the exec's last one.
 */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "capture_guard.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"

/* ---- launch ------------------------------------------------------------ */

/* Every launch of a known exec, in every state: ordered behind the last
 * one (a variant's, perhaps, which the driver does not order), then
 * tracked. The ordering's failure is the shim's own and never the
 * program's: it only ever leaves a host wait, counted. Inline: as a call
 * it cost the launch path a frame of its own and the moves of six arguments
 * (23 of its instructions, scripts/bench-instr). */
static inline __attribute__((always_inline)) int launch_ordered(struct vr_exec *e, CUgraphExec h,
                                                               uint64_t var, CUstream stream,
                                                               bool per_thread,
                                                               enum vr_track_mode mode)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT_INTERNAL(var || h == e->handle);
    int rc = vr_track_order(&e->t, var, stream, per_thread);
    if (rc > 0)
        e->c.rebind_waits++;
    else if (rc < 0)
        vr_log_fallback("launch", "a launch could not be ordered behind the exec's last "
                                  "one (the context failed to synchronize)");
    CUresult r = per_thread ? vr_real.cuGraphLaunch_ptsz(h, stream)
                            : vr_real.cuGraphLaunch(h, stream);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    vr_track_launched(&e->t, var, stream, per_thread, mode);
    if (!var)
        e->v0_last = e->t.seq;
    return 0;
}

/* Active: the program's exec, or a variant holding the slots' targets. The
 * variant is made ready (remapped, its nodes brought up to date) before
 * anything is launched; the program's exec applies its own pending remaps. */
static int launch_active(struct vr_exec *e, CUstream stream, bool per_thread)
{
    VR_ASSERT_INTERNAL(e->state == ST_ACTIVE && e->slices);
    unsigned peers = vr_alloc_peer_generation();
    /* The steady state (nothing moved, nothing to fix, no variant held
     * back): the program's exec as it is, with the constants the general
     * path below would reach (no variant, no VMM call). */
    if (__builtin_expect(peers == e->peers && !e->ndirty && !vr_slices_pending(e->slices) &&
                             !e->stuck, 1))
        return launch_ordered(e, e->handle, 0, stream, per_thread, VR_TRACK_NORMAL);
    if (peers != e->peers) {
        vr_slices_reaccess(e->slices);
        vr_variants_reaccess(e->vars);
        e->peers = peers;
    }
    int var = 0;
    bool vmm = false;
    /* A freed buffer's slot may have been unmapped at once (the exec was
     * idle), leaving nothing pending, while nodes still point into it (a
     * new buffer at the same address makes the program's next update
     * identical, so it is absorbed): no node launches pointing at an
     * unmapped slot. */
    if (e->ndirty && !vr_slices_pending(e->slices)) {
        int rc = vr_ex_fix_nodes(e);
        if (rc != 0)
            return rc; /* the graph would read an unmapped slot */
    }
    if (vr_slices_pending(e->slices)) {
        if (e->retargeted && may_vary(e) && vr_ex_fix_nodes(e) != 0)
            vr_ex_unvary(e);
        e->retargeted = false;
        struct vr_var_ctx cx = var_ctx(e);
        /* A variant is another exec to the driver: only where its launch can
         * be ordered behind the last one without a host wait, and made in
         * the exec's context, whatever the calling thread's. */
        if (!atomic_load_explicit(&vr_ex_degraded, memory_order_relaxed) &&
            vr_track_orderable(&e->t, stream, per_thread)) {
            var = vr_variants_ready(e->vars, &cx);
            if (!var) {
                bool entered = vr_ctx_enter(e->ctx);
                var = vr_variants_pick(e->vars, &e->t, &cx, e->v0_last, &vmm);
                vr_ctx_leave(entered);
            }
        }
        if (var == 0) {
            vmm = true;
            /* Nothing could run the targets (the program's exec and every
             * variant still running): the moved nodes pass through now and
             * would come back at the next SetParams, to pass through again
             * while the GPU stays behind. For a few launches SetParams pass
             * them through at once, as dedup would; then variants are tried
             * again. */
            if (may_vary(e) && !exec_idle(e))
                e->stuck = VR_STUCK_LAUNCHES;
            int rc = vr_ex_apply_pending(e);
            if (rc != 0)
                return rc; /* the graph would read what the program did not ask for */
        } else if (e->stuck) {
            e->stuck--;
        }
    } else if (e->stuck) {
        e->stuck--;
    }
    CUgraphExec h = var ? vr_variants_handle(e->vars, var) : e->handle;
    uint64_t id = var ? vr_variants_id(e->vars, var) : 0;
    int rc = launch_ordered(e, h, id, stream, per_thread, vmm ? VR_TRACK_HOT : VR_TRACK_NORMAL);
    if (rc == 0 && var)
        vr_variants_launched(e->vars, var, e->t.seq);
    return rc;
}

/* Never worse than dedup, judged on what happened: what the slices cost
 * since the last look (the shim's own updates re-pointing nodes, remaps)
 * against what they saved (the updates absorbed only because the slices
 * made them identical to what the driver holds: dedup absorbs the others
 * as well). A pipeline bound by the GPU keeps the exec and every variant
 * busy: a new buffer can then only be passed as written and re-pointed
 * later, twice the updates dedup sends (seen on an H200: fanout 0.66x of
 * dedup). Slices that saved nothing while updates still went to the driver
 * (the moving buffers were not worth a slice) only add the translation to
 * each of those. */
static void weigh_slices(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_ACTIVE && !e->settled);
    uint64_t transition = e->c.transition - e->weighed.transition;
    uint64_t rebinds = e->c.rebinds - e->weighed.rebinds;
    uint64_t kept = e->c.xabsorbed - e->weighed.xabsorbed;
    uint64_t forwarded = e->c.forwarded - e->weighed.forwarded;
    uint64_t mapped = e->c.remaps.slots - e->weighed.remaps.slots;
    uint64_t grants = e->c.remaps.calls - e->weighed.remaps.calls;
    e->weighed = e->c;
    /* A price is read only when a count multiplies it: the estimates are
     * medians over a ring (a sort each), and a steady window (nothing
     * moved, nothing rebound) would pay four sorts for two zeros. A
     * rebind's access is priced at the window's share of cuMemSetAccess
     * calls per slot mapped (adjacent slots share one). */
    uint64_t remap = rebinds ? vr_cost_get(VR_COST_MAP) + vr_cost_get(VR_COST_UNMAP) +
                                   vr_policy_share(vr_cost_get(VR_COST_ACCESS), grants, mapped)
                             : 0;
    uint64_t sp = transition || kept ? vr_cost_get(VR_COST_SETPARAMS) : 0;
    uint64_t cost = transition * sp + rebinds * remap, saved = kept * sp;
    /* The ledger, not one window: one busy stretch (a loaded machine, a
     * burst of new buffers) is no verdict. */
    if (!vr_policy_slices_settle(&e->ledger, cost, saved))
        return;
    vr_ex_settle(e);
    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char why[288];
        snprintf(why, sizeof why,
                 "slices cost %llu us (%llu updates, %llu remaps) for %llu us saved, %llu "
                 "updates forwarded, in the last %d launches; %llu us for %llu us saved over "
                 "%u windows, discounted: the exec goes on without slices",
                 (unsigned long long)(cost / 1000), (unsigned long long)transition,
                 (unsigned long long)rebinds, (unsigned long long)(saved / 1000),
                 (unsigned long long)forwarded, VR_WEIGH_EVERY,
                 (unsigned long long)(e->ledger.cost / 1000),
                 (unsigned long long)(e->ledger.saved / 1000), e->ledger.windows);
        vr_log_fallback("rebind", why);
    }
}

/* An exec without slices whose every update changes (each node pointed at
 * a new buffer every step) gains nothing from comparing and shadowing its
 * updates and pays for both on each: after two windows in which it absorbed
 * fewer than one update in 8, its updates go straight to the driver, as in
 * mode off, until it compares again (reprobe) or cuGraphExecUpdate reads its
 * nodes again. The shadows go stale meanwhile, so nothing is absorbed (the
 * absorbed path finds no node of a passing exec). */
static void weigh_absorbed(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT((e->state == ST_DEDUP || e->state == ST_DISABLED) && e->cmp != CMP_PASS);
    uint64_t seen = e->c.seen + e->c.absorbed - e->weighed.seen - e->weighed.absorbed;
    uint64_t kept = e->c.skipped + e->c.absorbed - e->weighed.skipped - e->weighed.absorbed;
    e->weighed = e->c;
    /* An absorbed update saves one SetParams (230 ns on an H200, 1 us in the
     * cost model); a forwarded one costs about 220 instructions more than
     * passing it (scripts/bench-instr: 294 against 72): under one in eight
     * absorbed, passing costs less on any of them. */
    bool probing = e->cmp == CMP_PROBE;
    vr_ex_set_cmp(e, CMP_COMPARE);
    e->losing = vr_policy_absorb_losing(e->losing, seen, kept);
    if (!e->losing)
        e->reprobe_after = 0; /* absorbing: a later pass backs off from the start */
    if (!vr_policy_passes(e->losing, probing))
        return;
    vr_ex_set_cmp(e, CMP_PASS);
    e->pass_since = e->c.launches;
    e->reprobe_after = vr_policy_backoff(e->reprobe_after);
    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char why[160];
        snprintf(why, sizeof why,
                 "%llu of %llu updates absorbed in the last %d launches: the exec's updates "
                 "pass straight through",
                 (unsigned long long)kept, (unsigned long long)seen,
                 probing ? VR_REPROBE_WINDOW : VR_WEIGH_EVERY);
        vr_log_fallback("setparams", why);
    }
}

/* A passing exec's shadows are stale, and the driver has no query for an
 * exec node's arguments: its nodes are forgotten, so that each one's next
 * update goes to the driver whole and is recorded again, and the windows
 * weigh the updates from there (weigh_absorbed). */
static void reprobe(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->cmp == CMP_PASS && !e->slices);
    vr_nodes_forget(&e->ns);
    vr_ex_set_cmp(e, CMP_PROBE);
    e->losing = 0;
    e->weighed = e->c;
    vr_ex_log_exec_event("exec_reprobe", e);
    VR_ASSERT(e->cmp == CMP_PROBE);
}

static int launch_locked(struct vr_exec *e, CUstream stream, bool per_thread)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    e->c.launches++;
    if (vr_ex_ledger_due(e))
        vr_ex_ledger_launch(e);
    if (vr_policy_window_closed(e->c.launches - e->weighed.launches, e->cmp == CMP_PROBE)) {
        if (e->state == ST_ACTIVE && !e->settled)
            weigh_slices(e);
        else if (e->cmp == CMP_PASS &&
                 vr_policy_reprobe_due(e->c.launches - e->pass_since, e->reprobe_after))
            reprobe(e);
        else if ((e->state == ST_DEDUP || e->state == ST_DISABLED) && e->cmp != CMP_PASS &&
                 !vr_variants_usable(e->vars) && !e->orphan) /* no variant to update */
            weigh_absorbed(e);
    }
    if (e->state == ST_PROFILING && vr_ex_profile_done(e)) {
        if (atomic_load_explicit(&vr_ex_degraded, memory_order_relaxed)) {
            vr_profile_free(e->prof);
            e->prof = NULL;
            vr_ex_set_state(e, ST_DEDUP);
        } else {
            vr_ex_decide(e);
        }
    }
    if (e->state == ST_ACTIVE)
        return launch_active(e, stream, per_thread);
    /* No slice, no variant: nothing will ask about this launch but the
     * order of a later variant's, which it gets from a new event then. */
    int rc = launch_ordered(e, e->handle, 0, stream, per_thread, VR_TRACK_QUIET);
    if (rc != 0)
        return rc;
    if (e->state == ST_PROFILING)
        vr_profile_observe(e->prof, &e->ns);
    return 0;
}

int vr_exec_launch(CUgraphExec exec, CUstream stream, bool per_thread)
{
    /* Into a capture: the program's launch as it is (the driver refuses it
     * or makes it a node); the shim's ordering would put its own waits,
     * events or host waits into the program's capture. */
    struct vr_exec *e = vr_capture_stream_busy(stream, per_thread) ? NULL : vr_ex_acquire(exec);
    if (!e) {
        vr_stat_inc(VR_C_launches);
        CUresult r = per_thread ? vr_real.cuGraphLaunch_ptsz(exec, stream)
                                : vr_real.cuGraphLaunch(exec, stream);
        return vr_err_cu(r);
    }
    int rc = launch_locked(e, stream, per_thread);
    vr_ex_unlock(e);
    vr_tomb_drain_some();
    return rc;
}

static CUresult upload(CUgraphExec h, CUstream stream, bool per_thread)
{
    return per_thread ? vr_real.cuGraphUpload_ptsz(h, stream) : vr_real.cuGraphUpload(h, stream);
}

/* The driver orders an upload behind the exec's earlier launches, some of
 * which ran as variants: ordered as a launch of the program's exec is. The
 * variants are uploaded too, so their next launches are as ready as the
 * program's exec's would be. */
int vr_exec_upload(CUgraphExec exec, CUstream stream, bool per_thread)
{
    struct vr_exec *e = vr_ex_cfg.mode == VR_MODE_OFF || vr_capture_stream_busy(stream, per_thread)
                            ? NULL
                            : vr_ex_acquire(exec);
    if (!e)
        return vr_err_cu(upload(exec, stream, per_thread));
    /* The shim's own ordering never fails the program's call. */
    if (vr_track_order(&e->t, 0, stream, per_thread) > 0)
        e->c.rebind_waits++;
    CUresult r = upload(e->handle, stream, per_thread);
    if (r == CUDA_SUCCESS)
        vr_variants_upload(e->vars, stream, per_thread);
    int rc = vr_err_cu(r);
    vr_ex_unlock(e);
    return rc;
}

static void stream_destroyed_in(struct vr_exec *e, void *stream)
{
    vr_track_stream_destroyed(&e->t, stream);
}

void vr_exec_stream_destroyed(CUstream stream)
{
    if (vr_ex_cfg.mode == VR_MODE_OFF || !stream || stream == CU_STREAM_LEGACY ||
        stream == CU_STREAM_PER_THREAD)
        return;
    vr_ex_each_exec(stream_destroyed_in, stream);
}
