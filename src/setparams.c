/* setparams: every SetParams of a known exec but the absorbed one: decoding,
 * the compare with the node's shadows, translation when active, forwarding
 * (timed on a sample), and the setters that reach the variants too. The
 * absorbed path (absorb.c) ends here when it cannot absorb.
 */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "extra.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"

/* Counts an update sent to the driver; at log level debug, says why, so a
 * low skip rate can be traced to its nodes. */
static __attribute__((noinline, cold)) void log_forward(const struct vr_exec *e,
                                                        const struct vr_node *n, const char *why)
{
    char buf[256];
    struct vr_jw w;
    vr_ex_begin_exec_event(&w, buf, sizeof buf, "setparams_forwarded", e->handle);
    if (n)
        vr_jw_u64(&w, "node", (uint64_t)(n - e->ns.v));
    vr_jw_str(&w, "reason", why);
    vr_log_emit(&w, VR_LEVEL_DEBUG);
}

/* Inline: the count and the level test are all a forwarded update pays
 * without a debug log. */
static inline void note_forward(struct vr_exec *e, const struct vr_node *n, const char *why)
{
    e->c.forwarded++;
    if (vr_log_enabled(VR_LEVEL_DEBUG))
        log_forward(e, n, why);
}

/* ---- SetParams --------------------------------------------------------- */

/* vr_forward_raw inline, for the forwarding and passing paths, where
 * `entry` is a constant: the driver's entry point called directly. */
static inline CUresult forward_raw(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                                   const void *params)
{
    switch (entry) {
    case VR_SP_V1: return vr_real.cuGraphExecKernelNodeSetParams(exec, node, params);
    case VR_SP_V2: return vr_real.cuGraphExecKernelNodeSetParams_v2(exec, node, params);
    default: return vr_real.cuGraphExecNodeSetParams(exec, node, (CUgraphNodeParams *)params);
    }
}

/* The program's new arguments (in scratch) become what it intends; a
 * profile reads the node again at its next launch. */
static void set_intended(struct vr_exec *e, struct vr_node *n)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    memcpy(n->intended, e->scratch, n->layout->bytes);
    if (e->prof)
        vr_profile_touch(e->prof, (size_t)(n - e->ns.v));
}

/* A change the variants cannot replay: they go, and none is made again. */
void vr_ex_unvary(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    if (!vr_variants_usable(e->vars))
        return;
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_drop(e->vars, &cx, true);
}

static int update_args(struct vr_exec *e, struct vr_node *n, CUgraphNode node,
                       enum vr_sp_entry entry, const void *params, const struct vr_fields *f,
                       bool same, const struct vr_extra *x);

/* One forwarded update in 32 is timed: two clock reads and a note are a
 * sizeable share of a fast driver's SetParams (230 ns on an H200); a price
 * follows the median of VR_COST_RING samples (cost.h), which a 1,000-node
 * graph whose updates go to the driver fills in two steps. sample_start's
 * 0: not timed. */
#define VR_SAMPLE_MASK 31

static inline uint64_t sample_start(const struct vr_exec *e)
{
    return (e->c.forwarded & VR_SAMPLE_MASK) == 0 ? vr_now_ns() : 0;
}

static inline void sample_end(uint64_t t0, CUresult r)
{
    if (t0 && r == CUDA_SUCCESS)
        vr_cost_note(VR_COST_SETPARAMS, t0);
}

static int setparams_slow(struct vr_exec *e, struct vr_node *n, CUgraphNode node,
                          enum vr_sp_entry entry, const void *params)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state != ST_GONE && e->scratch);
    struct vr_call c;
    bool kernel = vr_call_decode(entry, params, &c);
    CUresult r;

    if (!n && entry == VR_SP_NODE && params &&
        ((const CUgraphNodeParams *)params)->type != CU_GRAPH_NODE_TYPE_KERNEL) {
        /* Another node type's parameters: the variants get them too. */
        struct vr_set set = {.kind = VR_SET_NODE, .params = params};
        r = vr_set_issue(e->handle, node, &set);
        e->rec_stale = true; /* the exec's graph record does not model it */
        if (r == CUDA_SUCCESS && e->vars) {
            struct vr_var_ctx cx = var_ctx(e);
            vr_variants_set_node(e->vars, &cx, node, &set);
        }
        note_forward(e, n, "not_kernel");
        return vr_err_cu(r);
    }
    if (!n || !n->layout || !kernel || vr_ex_forwards_all(e->state)) {
        r = vr_forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS)
            vr_ex_unvary(e); /* what the driver holds now is not known here */
        note_forward(e, n, !n ? "unknown_node" : !kernel ? "not_kernel"
                         : vr_ex_forwards_all(e->state) ? "observe" : "opaque");
        return vr_err_cu(r);
    }
    const struct vr_layout *l = n->layout;
    /* Arguments in one `extra` buffer are read like kernelParams (extra.h). */
    struct vr_extra x = {0};
    bool via_extra = c.extra && !c.kernelParams && vr_extra_read(c.extra, l, &x);
    if ((c.extra && !via_extra) || (!c.extra && l->nparams && !c.kernelParams) ||
        !vr_same_function(&c.f, &n->f)) {
        /* The arguments can no longer be read with this layout. */
        const char *why = !vr_same_function(&c.f, &n->f) ? "function"
                          : c.extra                       ? "extra"
                                                          : "no_arguments";
        r = vr_forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS) {
            vr_node_make_opaque(&e->ns, n);
            n->f = c.f;
            e->ns.fields_moved = true;
            vr_ex_unvary(e);
        }
        note_forward(e, n, why);
        return vr_err_cu(r);
    }

    if (via_extra)
        vr_extra_pack(l, &x, e->scratch);
    else
        vr_layout_pack(l, c.kernelParams, e->scratch);
    bool same = vr_same_fields(&c.f, &n->f);
    if (vr_ex_cfg.mode == VR_MODE_OBSERVE) {
        r = vr_forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS) {
            set_intended(e, n);
            memcpy(vr_installed(&e->ns, n), e->scratch, l->bytes);
            n->f = c.f;
            e->ns.fields_moved = true;
        }
        note_forward(e, n, "observe");
        return vr_err_cu(r);
    }
    return update_args(e, n, node, entry, params, &c.f, same, via_extra ? &x : NULL);
}

/* The program's arguments, packed in scratch, against the node's shadows:
 * skipped when they are what it asked for last or (translated) what the
 * driver holds, else forwarded, translated when active. f: the call's
 * fields; same: they equal the node's; x: the call's `extra` buffer when
 * it passed its arguments that way (the update goes in the same form). */
static int update_args(struct vr_exec *e, struct vr_node *n, CUgraphNode node,
                       enum vr_sp_entry entry, const void *params, const struct vr_fields *f,
                       bool same, const struct vr_extra *x)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT_INTERNAL(n->layout && f);
    const struct vr_layout *l = n->layout;
    if (same && memcmp(e->scratch, n->intended, l->bytes) == 0)
        goto skip;

    const uint8_t *send = e->scratch;
    if (e->state == ST_ACTIVE) {
        vr_ex_translate_node(e, n, e->scratch, e->xlat, true);
        send = e->xlat;
    }
    if (same && memcmp(send, vr_installed(&e->ns, n), l->bytes) == 0) {
        set_intended(e, n);
        e->c.xabsorbed += send == e->xlat;
        goto skip;
    }
    uint64_t t0 = sample_start(e);
    CUresult r;
    if (x) {
        r = vr_forward_extra(e->handle, node, entry, params, x, l, send);
    } else {
        vr_layout_point(l, (uint8_t *)send, e->kp);
        r = vr_forward_args(e->handle, node, entry, params, e->kp);
    }
    sample_end(t0, r);
    note_forward(e, n, same ? "arguments" : "shape");
    if (r == CUDA_SUCCESS) {
        set_intended(e, n);
        memcpy(vr_installed(&e->ns, n), send, l->bytes);
        n->f = *f;
        e->ns.fields_moved |= !same;
        vr_variants_touch(e->vars, (size_t)(n - e->ns.v));
    }
    return vr_err_cu(r);

skip:
    e->c.skipped++;
    return 0;
}

/* The update of an exec without slices whose arguments changed: the
 * program's struct to the driver, then both shadows (equal without slices),
 * and the node's index only where someone keeps it (a dedup exec has
 * neither a profile nor variants). The timed call (one in 32) apart, so
 * that the untimed one keeps only what the bookkeeping after the driver's
 * call reads across it. */
static inline __attribute__((always_inline)) void forwarded(struct vr_exec *e, struct vr_node *n,
                                                            enum vr_sp_entry entry,
                                                            const void *params, CUresult r)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT_INTERNAL(!e->slices && n->layout);
    if (r == CUDA_SUCCESS) {
        vr_layout_pack2(n->layout, vr_call_v2(entry, params)->kernelParams, n->intended,
                        vr_installed(&e->ns, n));
        if (e->prof || e->vars) {
            size_t i = (size_t)(n - e->ns.v);
            if (e->prof)
                vr_profile_touch(e->prof, i);
            vr_variants_touch(e->vars, i);
        }
    }
    note_forward(e, n, "arguments");
}

static __attribute__((noinline, cold)) CUresult forward_timed(struct vr_exec *e, struct vr_node *n,
                                                             enum vr_sp_entry entry,
                                                             const void *params)
{
    uint64_t t0 = vr_now_ns();
    CUresult r = forward_raw(e->handle, n->handle, entry, params);
    sample_end(t0, r);
    forwarded(e, n, entry, params, r);
    return r;
}

static inline __attribute__((always_inline)) CUresult forward_changed(struct vr_exec *e,
                                                                     struct vr_node *n,
                                                                     enum vr_sp_entry entry,
                                                                     const void *params)
{
    if (__builtin_expect((e->c.forwarded & VR_SAMPLE_MASK) == 0, 0))
        return forward_timed(e, n, entry, params);
    CUresult r = forward_raw(e->handle, n->handle, entry, params);
    forwarded(e, n, entry, params, r);
    return r;
}

/* An exec without slices (dedup, still profiling, settled) holds what the
 * program asked for (installed == intended): the program's own struct goes
 * to the driver as it is, and both shadows take its arguments. `changed`:
 * the caller's compare was exact (no unit under 4 bytes) and found a
 * difference; else this one decides. */
static inline __attribute__((always_inline)) int forward_plain(struct vr_exec *e, struct vr_node *n,
                                                               enum vr_sp_entry entry,
                                                               const void *params, bool changed)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT_INTERNAL(!e->slices && n->layout);
    if (!changed && vr_layout_equal(n->layout, vr_call_v2(entry, params)->kernelParams, n->intended)) {
        e->c.skipped++;
        return 0;
    }
    return vr_err_cu(forward_changed(e, n, entry, params));
}

/* A direct update. `changed`: the caller's compare was exact and found a
 * difference. */
/* Inline: each entry point's copy knows its entry (no switch on it before
 * the driver's call) and needs no second frame. */
static inline __attribute__((always_inline)) int direct_args(struct vr_exec *e, struct vr_node *n,
                                                             enum vr_sp_entry entry,
                                                             const void *params, bool changed)
{
    VR_ASSERT_INTERNAL(n->layout);
    if (!e->slices)
        return forward_plain(e, n, entry, params, changed);
    vr_layout_pack(n->layout, vr_call_v2(entry, params)->kernelParams, e->scratch);
    return update_args(e, n, n->handle, entry, params, &n->f, true, NULL);
}

/* A passing exec's update (weigh_absorbed): straight to the driver, noted
 * after the call (as forward_plain's), so that only the record is kept
 * across it. */
static inline CUresult pass_update(struct vr_exec *e, CUgraphNode node, enum vr_sp_entry entry,
                                   const void *params)
{
    CUresult r = forward_raw(e->handle, node, entry, params);
    note_forward(e, NULL, "pass");
    return r;
}

/* Everything but an absorbed update. */
static __attribute__((noinline)) int setparams_rest(CUgraphExec exec, CUgraphNode node,
                                                    enum vr_sp_entry entry, const void *params)
{
    struct vr_exec *e = vr_ex_acquire(exec);
    if (!e) {
        vr_stat_inc(VR_C_setparams_seen);
        vr_stat_inc(VR_C_setparams_forwarded);
        return vr_err_cu(vr_forward_raw(exec, node, entry, params));
    }
    if (e->orphan && !e->graph_lost) {
        /* The program destroyed the graph the exec's nodes belong to: the
         * driver refuses every node then (driver-answers.txt: its own, and
         * any other graph's), and the shim, which keeps the graph, answers
         * for it. */
        e->c.seen++;
        note_forward(e, vr_nodes_find(&e->ns, node), "graph_destroyed");
        vr_ex_unlock(e);
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    }
    int rc = vr_ex_setparams_locked(e, node, entry, params);
    vr_ex_unlock(e);
    return rc;
}

int vr_ex_setparams_locked(struct vr_exec *e, CUgraphNode node, enum vr_sp_entry entry,
                           const void *params)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    e->c.seen++;
    if (e->cmp == CMP_PASS)
        return vr_err_cu(pass_update(e, node, entry, params));
    struct vr_node *n = vr_nodes_find(&e->ns, node);
    if (e->graph_lost) {
        /* The driver's own answer for a node of a destroyed graph. */
        int rc = vr_err_cu(vr_forward_raw(e->handle, node, entry, params));
        note_forward(e, n, "graph_destroyed");
        return rc;
    }
    if (n && direct(e, n, entry, params))
        return direct_args(e, n, entry, params, false);
    return setparams_slow(e, n, node, entry, params);
}

/* The absorbed path (absorb.c, in the hook layer) hands over here the
 * updates it found a node for but could not absorb: a passing exec's, a
 * direct one (same call, new arguments) and, for an exec without slices, a
 * forwarded one. Each is counted and done inside the shim's guard; the
 * exec's lock, held on entry, is dropped here. */
#define VR_SP_HANDED(fn, ntype, nname, ptype, check, call)                          \
    CUresult fn(struct vr_exec *e, ntype nname, ptype *params)                      \
    {                                                                               \
        VR_ASSERT_HELD(VR_RANK_EXEC);                                               \
        check;                                                                      \
        e->c.seen++;                                                                \
        vr_in_shim = 1;                                                             \
        CUresult r = call;                                                          \
        vr_in_shim = 0;                                                             \
        vr_ex_unlock(e);                                                            \
        return r;                                                                   \
    }
#define VR_SP_ENTRY(suffix, entry, ptype)                                           \
    VR_SP_HANDED(vr_exec_pass_##suffix, CUgraphNode, node, ptype, (void)0,          \
                 pass_update(e, node, entry, params))                               \
    /* vr_args_same is exact without units under 4 bytes */                      \
    VR_SP_HANDED(vr_exec_direct_##suffix, struct vr_node *, n, ptype, (void)0,      \
                 vr_err_to_cu(direct_args(e, n, entry, params,                      \
                                          n->layout->end4 == n->layout->end)))      \
    VR_SP_HANDED(vr_exec_forward_##suffix, struct vr_node *, n, ptype,              \
                 VR_ASSERT_INTERNAL(n->layout->end4 == n->layout->end),             \
                 forward_changed(e, n, entry, params))                              \
    int vr_exec_setparams_##suffix(CUgraphExec exec, CUgraphNode node, const void *params) \
    {                                                                               \
        return setparams_rest(exec, node, entry, params);                           \
    }
VR_SP_ENTRY(v1, VR_SP_V1, const CUDA_KERNEL_NODE_PARAMS_v1)
VR_SP_ENTRY(v2, VR_SP_V2, const CUDA_KERNEL_NODE_PARAMS_v2)
VR_SP_ENTRY(node, VR_SP_NODE, CUgraphNodeParams)
#undef VR_SP_ENTRY
#undef VR_SP_HANDED

/* The driver's answer for a call naming a node of an exec whose graph the
 * program destroyed (the shim keeps it): the call is not made. */
static bool refused(struct vr_exec *e)
{
    if (!e || !e->orphan || e->graph_lost)
        return false;
    vr_ex_unlock(e);
    return true;
}

int vr_exec_set_enabled(CUgraphExec exec, CUgraphNode node, unsigned enabled)
{
    struct vr_exec *e = vr_ex_cfg.mode == VR_MODE_OFF ? NULL : vr_ex_acquire(exec);
    if (refused(e))
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    CUresult r = vr_real.cuGraphNodeSetEnabled(exec, node, enabled);
    if (e) {
        e->rec_stale = true; /* not in the graph record: the next update is forwarded */
        if (r == CUDA_SUCCESS && e->vars) {
            struct vr_node *n = vr_nodes_find(&e->ns, node);
            struct vr_var_ctx cx = var_ctx(e);
            vr_variants_set_enabled(e->vars, &cx, n ? (size_t)(n - e->ns.v) : SIZE_MAX, node,
                                    enabled);
        }
        vr_ex_unlock(e);
    }
    return vr_err_cu(r);
}

int vr_exec_get_enabled(CUgraphExec exec, CUgraphNode node, unsigned *enabled)
{
    struct vr_exec *e = vr_ex_cfg.mode == VR_MODE_OFF ? NULL : vr_ex_acquire(exec);
    if (refused(e))
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    if (e)
        vr_ex_unlock(e);
    return vr_err_cu(vr_real.cuGraphNodeGetEnabled(exec, node, enabled));
}

int vr_exec_set_node(CUgraphExec exec, CUgraphNode node, const struct vr_set *set)
{
    struct vr_exec *e = vr_ex_cfg.mode == VR_MODE_OFF ? NULL : vr_ex_acquire(exec);
    if (refused(e))
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    CUresult r = vr_set_issue(exec, node, set);
    if (e) {
        e->rec_stale = true; /* not in the graph record: the next update is forwarded */
        if (r == CUDA_SUCCESS && e->vars) {
            struct vr_var_ctx cx = var_ctx(e);
            vr_variants_set_node(e->vars, &cx, node, set);
        }
        vr_ex_unlock(e);
    }
    return vr_err_cu(r);
}

