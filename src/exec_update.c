/* exec_update: cuGraphExecUpdate (v2 and v1) decided against the exec's
 * own view of its graph (graph_rec.h), so that an update changing nothing
 * costs no driver call and one changing kernel arguments only costs their
 * SetParams (issue 19; docs/design.md, "The update decision").
 *
 * Contract: the program gets what the driver would give. Nothing changed:
 * CU_GRAPH_EXEC_UPDATE_SUCCESS, no error node, no driver call, the exec keeps
 * its state. Kernel arguments changed only: each changed node takes the
 * exec's SetParams path under its instantiate-graph handle (absorbed where
 * slices or variants serve it). Anything else, or any doubt: the update is
 * forwarded and its answer returned unchanged; on success the exec resets
 * (vr_ex_reset) and takes the update graph's record. Called under no lock;
 * takes the exec's.
 */
#include "exec_internal.h"

#include <stdlib.h>

#include "driver.h"
#include "err.h"
#include "graph_rec.h"
#include "jw.h"
#include "log.h"
#include "stats.h"

/* The program's update entry point and its out-parameters: v2 fills info,
 * v1 the error node and result. */
struct update_call {
    CUgraphExec exec;
    CUgraph graph;
    CUgraphExecUpdateResultInfo *info;
    CUgraphNode *error_node;
    CUgraphExecUpdateResult *result;
};

static CUresult forward_update(const struct update_call *u)
{
    return u->info ? vr_real.cuGraphExecUpdate_v2(u->exec, u->graph, u->info)
                   : vr_real.cuGraphExecUpdate(u->exec, u->graph, u->error_node, u->result);
}

/* What the driver gives for an update that changes nothing. */
static void update_succeeded(const struct update_call *u)
{
    if (u->info) {
        u->info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
        u->info->errorNode = NULL;
        u->info->errorFromNode = NULL;
    } else {
        *u->error_node = NULL;
        *u->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    }
}

/* Applies upd to e without cuGraphExecUpdate when it differs from the
 * exec's graph in kernel arguments at most: NULL when done (*nchanged
 * nodes differed, *nset SetParams of theirs reached the driver; the rest
 * were absorbed), else why the
 * update must be forwarded (nothing was changed then, except where a
 * SetParams failed midway: the forwarded update sets every node anyway). */
static const char *absorb_update(struct vr_exec *e, CUgraph graph, struct vr_grec **updp,
                                 size_t *nodes, size_t *nchanged, size_t *nset)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    *nodes = *nchanged = *nset = 0;
    if (vr_ex_cfg.mode == VR_MODE_OBSERVE)
        return "observe";
    if (atomic_load(&vr_ex_degraded))
        return "degraded";
    if (vr_ex_forwards_all(e->state))
        return "opaque_exec";
    if (e->rec_stale)
        return "stale";
    /* A passing exec's SetParams go straight to the driver and leave the
     * shadows behind: they cannot say what the driver holds. */
    if (e->cmp == CMP_PASS)
        return "passing";
    if (!e->rec)
        return "unknown";
    /* The common no-change update: no allocation, no walk over the nodes
     * (an allocation here can consolidate the heap the program's last
     * graph was freed into: tens of us at 8,192 nodes). */
    if (vr_grec_same_graph(e->rec, graph, &e->ns, nodes))
        return NULL;
    uint32_t *changed = malloc((e->ns.n ? e->ns.n : 1) * sizeof *changed);
    void **kp = malloc(e->ns.max_params * sizeof *kp);
    if (!changed || !kp) {
        free(changed);
        free(kp);
        return "no_memory";
    }
    /* The recorder's record is compared in place: the common case (nothing
     * changed) copies nothing. A copy is taken where the changed nodes'
     * arguments are needed, or the getters read where the recorder has no
     * record it trusts. */
    bool known;
    const char *why = vr_grec_diff_graph(e->rec, graph, &e->ns, changed, nchanged, nodes, &known);
    if (!known || (!why && *nchanged && !e->graph_lost)) {
        *updp = vr_grec_take(graph);
        *nodes = vr_grec_nodes(*updp);
        why = *updp ? vr_grec_diff(e->rec, *updp, &e->ns, changed, nchanged) : "unknown";
    }
    const struct vr_grec *upd = *updp;
    /* The nodes of an exec whose graph could not be kept can no longer be
     * named (driver-answers.txt): an update that changes nothing still needs
     * no driver call (the driver applies updates to such an exec), any
     * other goes to the driver. A kept graph's nodes are named as ever. */
    if (!why && e->graph_lost && *nchanged)
        why = "graph_destroyed";
    /* The program's SetParams counters (setparams_seen and the rest) count
     * the program's calls only: these are the update's, counted apart. */
    struct counters before = e->c;
    for (size_t i = 0; !why && i < *nchanged; i++) {
        CUDA_KERNEL_NODE_PARAMS_v2 p;
        vr_grec_kernel_params(upd, changed[i], &p, kp);
        /* The exec's own node: the driver knows no other. */
        if (vr_ex_setparams_locked(e, e->ns.v[changed[i]].handle, VR_SP_V2, &p) != 0)
            why = "setparams_failed";
    }
    *nset = e->c.forwarded - before.forwarded;
    e->c.seen = before.seen;
    e->c.skipped = before.skipped;
    e->c.forwarded = before.forwarded;
    e->c.xabsorbed = before.xabsorbed;
    free(changed);
    free(kp);
    return why;
}

static void log_update(const struct vr_exec *e, const char *event, const char *why, size_t nodes,
                       size_t changed, size_t set)
{
    int level = why ? VR_LEVEL_DEBUG : VR_LEVEL_INFO;
    if (!vr_log_enabled(level))
        return;
    char buf[256];
    struct vr_jw w;
    vr_ex_begin_exec_event(&w, buf, sizeof buf, event, e->handle);
    vr_jw_u64(&w, "nodes", nodes);
    vr_jw_u64(&w, "changed", changed);
    vr_jw_u64(&w, "setparams", set);
    if (why)
        vr_jw_str(&w, "reason", why);
    vr_log_emit(&w, level);
}

static int update(const struct update_call *u)
{
    vr_stat_inc(VR_C_updates_seen);
    bool valid = u->info || (u->error_node && u->result);
    struct vr_exec *e = vr_ex_cfg.mode == VR_MODE_OFF || !valid ? NULL : vr_ex_acquire(u->exec);
    if (!e)
        return vr_err_cu(forward_update(u));
    struct vr_grec *upd = NULL;
    size_t nodes, nchanged, nset;
    const char *why = absorb_update(e, u->graph, &upd, &nodes, &nchanged, &nset);
    if (!why) {
        update_succeeded(u);
        vr_stat_inc(VR_C_updates_absorbed);
        log_update(e, "update_absorbed", NULL, nodes, nchanged, nset);
        vr_ex_unlock(e);
        vr_grec_free(upd);
        return 0;
    }
    CUresult r = forward_update(u);
    log_update(e, "update_forwarded", why, nodes, nchanged, nset);
    if (r == CUDA_SUCCESS) {
        vr_ex_reset(e, u->graph);
        if (!upd)
            upd = vr_grec_take(u->graph);
        /* The update graph is the exec's graph now (the driver paired it
         * node by node, so its kernels pair with ns's). */
        vr_grec_free(e->rec);
        e->rec = upd && vr_grec_kernels(upd) == e->ns.n ? upd : NULL;
        if (e->rec != upd)
            vr_grec_free(upd);
        e->rec_stale = false;
    } else {
        vr_grec_free(upd);
    }
    vr_ex_unlock(e);
    return vr_err_cu(r);
}

int vr_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    return update(&(struct update_call){.exec = exec, .graph = graph, .info = info});
}

int vr_exec_update_v1(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                      CUgraphExecUpdateResult *result)
{
    return update(&(struct update_call){
        .exec = exec, .graph = graph, .error_node = error_node, .result = result});
}
