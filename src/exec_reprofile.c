/* exec_reprofile: a decision against slices is not final. A DISABLED exec
 * keeps a ledger of what its forwarded updates cost since the decision
 * (policy.h); when that would have paid for slices it profiles again, and
 * each profile again that decides against them (or slices given up again)
 * doubles the wait before the next (`exec_reprofile` in the decision log,
 * then the usual `profile_decision`).
 */
#include "exec_internal.h"

#include <stdio.h>

#include "log.h"

/* Where a profile again could lead to slices: a profiled exec whose nodes
 * can change and be re-pointed, not churning through cuGraphExecUpdate,
 * holding no slice (settled keeps them), with no variant to keep up to
 * date. */
static bool may_reprofile(const struct vr_exec *e)
{
    return vr_ex_cfg.mode == VR_MODE_PROFILED &&
           !atomic_load_explicit(&vr_ex_degraded, memory_order_relaxed) && !e->settled &&
           !e->orphan && !e->graph_lost && !e->slices && !vr_policy_churns(e->brief) &&
           !vr_variants_usable(e->vars);
}

/* Every kernel node's shadows hold what the program last asked for: a
 * reprobe forgets them, and a node the program has not re-set since would
 * show the profile (and the transition) arguments the driver no longer
 * holds. */
static bool all_remembered(const struct vr_exec *e)
{
    for (size_t i = 0; i < e->ns.n; i++)
        if (e->ns.v[i].layout && e->ns.v[i].f.dims[0] == 0)
            return false;
    return true;
}

static void ledger_restart(struct vr_exec *e, bool doubles)
{
    e->dledger = (struct vr_dedup_ledger){.movers = e->movers};
    e->noted = e->c.forwarded;
    e->decided_at = e->c.launches;
    if (doubles)
        e->reprofile_wait = vr_policy_reprofile_backoff(e->reprofile_wait);
}

void vr_ex_ledger_decided(struct vr_exec *e, bool doubles)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    ledger_restart(e, doubles);
    e->reprofiling = false;
}

static void log_reprofile(const struct vr_exec *e)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    const struct vr_dedup_ledger *l = &e->dledger;
    char buf[640], why[224];
    struct vr_jw w;
    vr_ex_begin_exec_event(&w, buf, sizeof buf, "exec_reprofile", e->handle);
    vr_jw_u64(&w, "forwarded", l->forwarded);
    vr_jw_u64(&w, "forwarded_ns", l->forwarded_ns);
    vr_jw_u64(&w, "moves", l->moves);
    vr_jw_u64(&w, "slice_ns", l->slice_ns);
    vr_jw_u64(&w, "movers", l->movers ? l->movers : 1);
    vr_jw_u64(&w, "launches", e->c.launches - e->decided_at);
    vr_jw_u64(&w, "backoff", e->reprofile_wait);
    vr_jw_u64(&w, "reprofiles", e->reprofiles);
    snprintf(why, sizeof why,
             "%llu updates forwarded at %llu launches since the decision cost %llu us; slices "
             "would have cost at least %llu us",
             (unsigned long long)l->forwarded, (unsigned long long)l->moves,
             (unsigned long long)(l->forwarded_ns / 1000),
             (unsigned long long)(l->slice_ns / 1000));
    vr_jw_str(&w, "reason", why);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

void vr_ex_ledger_launch(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_DISABLED);
    uint64_t forwarded = e->c.forwarded - e->noted;
    e->noted = e->c.forwarded;
    if (!may_reprofile(e))
        return;
    struct vr_prices pr = vr_profile_prices();
    vr_policy_ledger_note(&e->dledger, forwarded, &pr);
    if (!vr_policy_reprofile_due(&e->dledger, e->c.launches - e->decided_at,
                                 e->reprofile_wait))
        return;
    if (e->cmp == CMP_PASS) {
        /* Passing: the shadows are stale. Forgotten, each node's next
         * update is recorded whole again (as at a reprobe); the profile
         * starts once they all were. */
        vr_nodes_forget(&e->ns);
        vr_ex_set_cmp(e, CMP_COMPARE);
        e->losing = 0;
        e->weighed = e->c;
        return;
    }
    if (e->cmp != CMP_COMPARE)
        return; /* a reprobe's window decides first */
    if (!all_remembered(e)) {
        /* Some node the program does not re-set: not now. */
        ledger_restart(e, true);
        return;
    }
    if (vr_profile_new(&e->prof, e->ns.nwords) != 0) {
        ledger_restart(e, true);
        return;
    }
    vr_profile_again(e->prof);
    e->reprofiles++;
    log_reprofile(e);
    e->reprofiling = true;
    vr_ex_set_state(e, ST_PROFILING);
    VR_ASSERT(e->state == ST_PROFILING && e->prof && !e->slices);
}
