/* exec: the per-exec state machine and the exec's lifecycle (instantiate,
 * decide, settle, update, orphan, destroy, degrade). The rooms around it:
 * exec_table.c finds records, setparams.c and launch.c are the hot paths,
 * remap.c keeps the slots and the words pointing into them, policy.c holds
 * every rule that moves an exec from one state to another.
 *
 *            instantiate, or cuGraphExecUpdate (restart)
 *                 |                             |
 *   mode profiled |                             | mode dedup, degraded,
 *     or observe  v                             v no profile
 *             PROFILING ------ degraded ------> DEDUP
 *              |   |   \
 *  decide:     |   |    \ graph lost before the decision;
 *  slices pay  |   |     \ decide: no slices
 *              v   |      v
 *           ACTIVE |    DISABLED <-- cuGraphExecUpdate (churning, orphan)
 *              |   |      ^
 *              |   +------|------ mode observe ------> OBSERVED
 *              +----------+ weigh_slices: the ledger short (settle)
 *
 *   DISABLED -> PROFILING (a profile again, exec_reprofile.c): the
 *   forwarded updates since the decision would have paid for slices.
 *
 *   cuGraphExecUpdate whose nodes cannot be paired: any state -> OPAQUE.
 *   destroy, or a stale handle: any state -> GONE (contents freed, record
 *   pooled; new_record clears it back to PROFILING).
 *
 * In DEDUP and DISABLED the updates are compared (CMP_COMPARE) until two
 * windows absorb under one in eight (CMP_PASS: straight to the driver); a
 * passing exec reprobes after a back-off (CMP_PROBE), one losing short window
 * sends it back to passing. `settled` (sticky: a node could not be re-issued
 * off the slices, which stay, binding nothing new) and `orphan` (the program
 * destroyed the graph: the shim keeps it until the exec goes and refuses the
 * program's calls naming its nodes, as the driver would) are conditions, not
 * states: they hold across the states above. `graph_lost` (an orphan whose
 * graph could not be kept: no node can change) sends a profiled exec to
 * DISABLED.
 */
#include "exec_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "driver.h"
#include "graph_rec.h"
#include "err.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"

void vr_exec_configure(const struct vr_config *c)
{
    vr_ex_cfg = *c;
    vr_profile_configure(vr_ex_cfg.variants > 1, vr_ex_cfg.slice_still);
    /* The allocator below tells this layer of frees through its one
     * observer: it never calls up. */
    vr_alloc_observe_free(vr_exec_forget_alloc);
}

/* ---- record contents ---------------------------------------------------- */

static int alloc_scratch(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    free(e->scratch);
    free(e->xlat);
    free(e->kp);
    e->scratch = calloc(1, e->ns.max_bytes);
    e->xlat = calloc(1, e->ns.max_bytes);
    e->kp = calloc(e->ns.max_params, sizeof *e->kp);
    return e->scratch && e->xlat && e->kp ? 0 : -ENOMEM;
}

static void free_contents(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    vr_ex_set_state(e, ST_GONE);
    vr_ex_drop_slices(e, true);
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_free(e->vars, &cx);
    e->vars = NULL;
    vr_track_free(&e->t);
    vr_profile_free(e->prof);
    e->prof = NULL;
    vr_nodes_free(&e->ns);
    vr_grec_free(e->rec);
    e->rec = NULL;
    e->rec_stale = false;
    free(e->scratch);
    free(e->xlat);
    free(e->kp);
    e->scratch = e->xlat = NULL;
    e->kp = NULL;
    VR_ASSERT(e->state == ST_GONE && !e->vars && !e->prof && !e->slices);
}

/* Starts (again) where a new exec starts: profiling, or dedup. */
static void restart(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(!e->prof && !e->slices);
    bool dedup = vr_ex_cfg.mode == VR_MODE_DEDUP || atomic_load(&vr_ex_degraded);
    if (!dedup && vr_profile_new(&e->prof, e->ns.nwords) != 0)
        dedup = true;
    vr_ex_set_state(e, dedup ? ST_DEDUP : ST_PROFILING);
    VR_ASSERT(e->state == ST_DEDUP || e->prof);
}

/* e is going: the graph kept for it goes with its last exec. */
static void release_graph(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    if (e->orphan && !e->graph_lost && e->graph && vr_ex_unkeep_graph(e->graph))
        vr_real.cuGraphDestroy(e->graph);
    e->graph = NULL;
    e->orphan = e->graph_lost = false;
}

void vr_exec_track(CUgraphExec handle, CUgraph graph, unsigned long long flags)
{
    if (vr_ex_cfg.mode == VR_MODE_OFF)
        return;
    vr_tomb_drain(false);
    struct vr_exec *e = vr_ex_new_record();
    if (!e)
        return;
    vr_rank_take(VR_RANK_EXEC);
    int rc = vr_nodes_read(&e->ns, graph);
    if (rc == 0)
        rc = alloc_scratch(e);
    if (rc != 0) {
        vr_warn("cannot read graph %p (%d): exec %p passes through", (void *)graph, rc,
                (void *)handle);
        free_contents(e);
        vr_ex_unlock(e);
        vr_ex_recycle(e);
        return;
    }
    /* The exec's current graph is the one it is instantiated from; its
     * kernel nodes must pair with ns's, or no update is judged here. */
    e->rec = vr_grec_take(graph);
    if (e->rec && vr_grec_kernels(e->rec) != e->ns.n) {
        vr_grec_free(e->rec);
        e->rec = NULL;
    }
    e->rec_stale = false;
    vr_real.cuCtxGetCurrent(&e->ctx);
    vr_track_init(&e->t, e->ctx);
    e->handle = handle;
    VR_ASSERT(e->state == ST_PROFILING && !e->slices);
    e->graph = graph;
    e->orphan = e->graph_lost = false;
    e->reset_at = 0;
    e->brief = 0;
    e->settled = false;
    e->losing = 0;
    restart(e);
    if (e->state == ST_PROFILING && vr_ex_cfg.mode == VR_MODE_PROFILED &&
        vr_variants_new(&e->vars, graph, &e->ns, vr_ex_cfg.variants, flags) != 0)
        vr_warn("exec %p: its graph could not be cloned; it is not varied", (void *)handle);

    /* e is in no table yet: no thread that holds the table lock (none ever
     * waits on an exec's) can wait on it, so the table is taken under it;
     * out of the witness from here, which would see a rank taken
     * backwards, and a second exec lock below. */
    vr_rank_drop(VR_RANK_EXEC);
    /* An exec handle the driver reuses after a destroy we did not see. */
    struct vr_exec *stale = vr_ex_unlink_exec(handle);
    if (stale) {
        vr_ex_lock(stale);
        stale->serial++;
        vr_ex_rekey(stale);
        release_graph(stale);
        free_contents(stale);
        vr_ex_retire_record(stale);
        vr_ex_unlock(stale);
        vr_ex_recycle(stale);
    }
    vr_ex_insert_exec(e, handle);
    vr_mutex_unlock(&e->lock);

    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char buf[256];
        struct vr_jw w;
        vr_ex_begin_exec_event(&w, buf, sizeof buf, "exec_instantiated", handle);
        vr_jw_u64(&w, "kernel_nodes", e->ns.n);
        vr_jw_u64(&w, "opaque_nodes", e->ns.nopaque);
        vr_log_emit(&w, VR_LEVEL_INFO);
    }
}

static void no_variants(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_free(e->vars, &cx);
    e->vars = NULL;
}

void vr_ex_decide(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_PROFILING && e->prof && !e->slices);
    bool observe = vr_ex_cfg.mode == VR_MODE_OBSERVE;
    struct vr_decision d;
    vr_profile_decide(e->prof, &e->ns, e->handle, observe, &d);
    e->movers = d.moving > UINT_MAX ? UINT_MAX : (unsigned)d.moving;
    vr_profile_free(e->prof);
    e->prof = NULL;
    if (observe) {
        vr_ex_set_state(e, ST_OBSERVED);
        return;
    }
    if (d.active) {
        e->anchor_slot = d.anchor_slot;
        if (vr_ex_index_anchors(e, vr_slices_count(d.slices)) != 0) {
            d.active = false;
            vr_ex_drop_slices(e, false); /* frees what index_anchors made, and d.anchor_slot */
            d.anchor_slot = NULL;
        }
    }
    if (!d.active) {
        no_variants(e); /* they need slices */
        free(d.anchor_slot);
        free(d.slot_back);
        /* No node points into the slices yet: nothing can be reading them. */
        if (d.slices && vr_slices_destroy(d.slices) != 0)
            vr_tomb_bury(d.slices, NULL, e->ctx, true);
        vr_ex_set_state(e, ST_DISABLED);
        vr_ex_ledger_decided(e, e->reprofiling);
        return;
    }
    vr_ex_ledger_decided(e, false);
    /* Every selected buffer stayed put while profiled: remaps at an idle
     * launch serve the rare rebind, and variants would only cost memory. */
    if (!d.moved)
        no_variants(e);
    e->slices = d.slices;
    e->slot_back = d.slot_back;
    vr_ex_set_state(e, ST_ACTIVE);
    /* Rebinds are most likely right after the decision: the next launches
     * get completion events (variant.h). */
    e->t.hot = e->t.seq + VR_TRACK_EVERY + 1;
    e->peers = vr_alloc_peer_generation();
    vr_ex_transition(e);
    e->weighed = e->c; /* the transition is paid once; what follows is weighed */
    e->ledger = (struct vr_slice_ledger){0};
    /* Needed by the transition only: 4 bytes per node less from here on. */
    free(e->anchored);
    e->anchored = NULL;
    e->nanchored = 0;
    VR_ASSERT(e->state == ST_ACTIVE && e->slices && e->anchor_slot);
    VR_ASSERT_EXPENSIVE(vr_ex_check(e) && vr_variants_check(e->vars));
}

/* No slot takes a new buffer from now on: the variants go, pending rebinds
 * are given up and their nodes re-issued as the program set them. The slots
 * keep what they hold (a node still pointing there reads the right memory);
 * a new buffer reaches the driver as the program wrote it, as in dedup. */
static void stop_rebinding(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    if (e->vars) {
        struct vr_var_ctx cx = var_ctx(e);
        vr_variants_drop(e->vars, &cx, true);
    }
    if (e->state == ST_ACTIVE) {
        vr_ex_cancel_all(e);
        if (vr_ex_fix_nodes(e) != 0)
            vr_log_fallback("degrade", "a node could not be re-issued off a pending slot");
    }
    e->retargeted = false;
}

/* The exec goes on as in dedup: every node that reads a slice is re-issued
 * as the program set it (once, O(nodes)), then the slices and variants go
 * once their last launches are done. If a node cannot be re-issued, the
 * slices stay and only stop taking new buffers. */
void vr_ex_settle(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_ACTIVE && e->slices);
    stop_rebinding(e);
    for (size_t i = 0; i < e->ns.n; i++) {
        struct vr_node *n = &e->ns.v[i];
        if (!n->layout || memcmp(vr_installed(&e->ns, n), n->intended, n->layout->bytes) == 0)
            continue;
        memcpy(e->xlat, n->intended, n->layout->bytes);
        if (vr_ex_reissue(e, n) != CUDA_SUCCESS) {
            e->settled = true; /* a node still reads a slice: keep them */
            return;
        }
    }
    vr_ex_drop_slices(e, true);
    vr_ex_set_state(e, ST_DISABLED);
    e->losing = 0; /* weigh_absorbed starts afresh */
    vr_ex_ledger_decided(e, true); /* slices given up: a profile again waits longer */
    VR_ASSERT(!e->slices && e->state == ST_DISABLED);
}

/* ---- lifecycle --------------------------------------------------------- */

void vr_ex_reset(struct vr_exec *e, CUgraph graph)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    /* The driver now holds the update graph's parameters: no node reads a
     * slice; the slices go once the last launch is done. */
    vr_ex_drop_slices(e, true);
    VR_ASSERT(!e->slices && !e->anchor_slot);
    vr_profile_free(e->prof);
    e->prof = NULL;
    vr_ex_log_exec_event("exec_reset", e);
    if (e->graph_lost) {
        /* Its nodes cannot be named, but its shadows must follow the
         * driver: an update that changes nothing is answered from them. */
        vr_ex_set_state(e, ST_DISABLED);
        if (vr_nodes_refresh(&e->ns, graph) != 0 || alloc_scratch(e) != 0) {
            vr_ex_set_state(e, ST_OPAQUE);
            for (size_t i = 0; i < e->ns.n; i++)
                vr_node_make_opaque(&e->ns, &e->ns.v[i]);
        }
        return;
    }
    /* Each update undoes the decision: its slices are made again (a map and
     * a set-access per buffer, 20 us on an H200) and the nodes re-pointed.
     * An exec updated every few launches never earns that back, and dedup
     * absorbs its repeated updates without slices: after two decisions that
     * lived less than VR_BRIEF_DECISION launches, it stays there. */
    uint64_t lived = e->c.launches - e->reset_at;
    e->reset_at = e->c.launches;
    e->brief = vr_policy_brief(e->brief, lived);
    bool churning = vr_policy_churns(e->brief);
    /* The shadows are read again, or the exec passes through anyway. */
    vr_ex_set_cmp(e, CMP_COMPARE);
    e->reprobe_after = 0;
    e->losing = 0;
    e->weighed = e->c;
    e->reprofile_wait = 0; /* a new graph: its first decision is its own */
    e->reprofiles = 0;
    vr_ex_ledger_decided(e, false);
    if (vr_nodes_refresh(&e->ns, graph) != 0 || alloc_scratch(e) != 0) {
        vr_warn("exec %p: cannot pair the update graph's nodes; the exec passes through",
                (void *)e->handle);
        vr_ex_set_state(e, ST_OPAQUE);
        for (size_t i = 0; i < e->ns.n; i++)
            vr_node_make_opaque(&e->ns, &e->ns.v[i]);
        return;
    }
    if (churning && e->state != ST_DEDUP) {
        no_variants(e);
        vr_ex_set_state(e, ST_DISABLED);
        if (e->brief == 2)
            vr_log_fallback("cuGraphExecUpdate", "updated again within a few launches of each "
                                              "decision: the exec keeps no slices");
        return;
    }
    restart(e);
    VR_ASSERT_EXPENSIVE(vr_variants_check(e->vars));
}

int vr_exec_destroy(CUgraphExec exec)
{
    struct vr_exec *e = vr_ex_cfg.mode == VR_MODE_OFF ? NULL : vr_ex_unlink_exec(exec);
    CUresult r = vr_real.cuGraphExecDestroy(exec);
    if (e) {
        vr_ex_lock(e);
        e->serial++;
        vr_ex_rekey(e);
        VR_ASSERT(e->handle == exec);
        vr_ex_log_exec_event("exec_destroyed", e);
        free_contents(e);
        release_graph(e); /* after the exec: the driver's own order */
        vr_ex_retire_record(e);
        vr_ex_unlock(e);
        vr_ex_recycle(e);
    }
    vr_tomb_drain(false);
    return vr_err_cu(r);
}

/* The program destroyed the graph e names its nodes by (vr_exec_graph_destroyed). */
struct destroyed {
    CUgraph graph;
    bool keep; /* false: the scan could not hold it, nothing is kept */
    size_t execs;
};

static void orphan_if_of(struct vr_exec *e, void *arg)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    struct destroyed *d = arg;
    if (e->graph != d->graph || e->orphan)
        return;
    e->orphan = true;
    e->serial++; /* out of every thread's absorbed path: the program's calls are refused */
    vr_ex_rekey(e);
    if (d->keep && vr_ex_keep_graph(d->graph) == 0) {
        d->execs++;
        return;
    }
    /* Not kept: the driver destroys it and no node of e can change. */
    e->graph_lost = true;
    e->graph = NULL; /* the handle may name a new graph later */
    if (e->state == ST_PROFILING) {
        /* Going active needs its nodes re-pointed at the slices. */
        vr_profile_free(e->prof);
        e->prof = NULL;
        no_variants(e);
        vr_ex_set_state(e, ST_DISABLED);
    }
    vr_log_fallback("cuGraphDestroy", "the exec's graph could not be kept (no memory): its "
                                   "nodes cannot be re-pointed; it passes through");
}

bool vr_exec_graph_destroyed(CUgraph graph)
{
    if (vr_ex_cfg.mode == VR_MODE_OFF || !graph)
        return false;
    /* The scan holds the graph itself, so that an exec destroyed meanwhile
     * cannot take its last hold and destroy it under the scan. */
    struct destroyed d = {graph, vr_ex_keep_graph(graph) == 0, 0};
    vr_ex_each_exec(orphan_if_of, &d);
    if (!d.keep)
        return false;
    if (vr_ex_unkeep_graph(graph))
        return false; /* no exec needs it (any more): the driver destroys it now */
    return true;
}

bool vr_exec_graph_kept(CUgraph graph)
{
    return vr_ex_cfg.mode != VR_MODE_OFF && vr_ex_graph_kept(graph);
}

void vr_exec_release_graphs(void)
{
    CUgraph *v;
    size_t n = vr_ex_take_kept(&v);
    for (size_t i = 0; i < n; i++)
        vr_real.cuGraphDestroy(v[i]);
    free(v);
}

/* From now on the program's exec may be launched behind the shim's back: a
 * variant launch could not be ordered against such a launch, and a slot
 * retargeted for a variant would never be remapped before it. So every
 * exec's variants go (none is made again) and its pending retargets are
 * given up now, its nodes re-issued to mean what the program asked for
 * (dedup from here on; degraded keeps later SetParams off pending slots).
 * A variant launch still running cannot be ordered before an unseen
 * launch of the program's exec: programs resolve entry points up front. */
static void stop_rebinding_of(struct vr_exec *e, void *unused)
{
    (void)unused;
    stop_rebinding(e);
}

void vr_exec_degrade(const char *why)
{
    VR_ASSERT(why);
    if (atomic_exchange(&vr_ex_degraded, true))
        return;
    vr_log_fallback("launch_tracking", why);
    vr_ex_each_exec(stop_rebinding_of, NULL);
}

