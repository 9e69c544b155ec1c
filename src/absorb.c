/* absorb: the absorbed SetParams path, the first thing an exported
 * SetParams wrapper tries (both at the end of this file), in the hook layer
 * so that it hands what it cannot absorb to the hook's full path
 * (interpose.c, below it) by a direct tail call.
 *
 * The exported wrapper's only work: so the first tests are
 * the exec this thread used last, which mode off never caches (it misses
 * at once, to the full path's mode test), and vr_in_shim (a call from inside
 * the driver goes to the driver). Then the node that followed the last one
 * updated, one compare with what the program last asked for (by the
 * layout's plan: one function per plan, below, which ends the path). No global
 * atomic, no allocation, no call but: the tail call of the full path when
 * the update is not absorbed (another exec or node order, a busy lock:
 * nothing was done), of the exec layer's vr_exec_direct_* / vr_exec_pass_*
 * when it found the node but the arguments changed or the exec passes its
 * updates through, and the wake of a sleeper. Observe mode never absorbs
 * (the exec table keeps its execs out of the first cache entry). Every exit
 * is a return or a tail call, so few registers need saving; once the node
 * is found the record holds the exec's and the node's handles, and the full
 * path gets them from there (the same values), which keeps the compare's
 * registers free. The exec layer's lock and hot tests come from its private
 * header (exec_internal.h), the one place that states them.
 */
#include "driver.h"
#include "exec_internal.h"
#include "hook.h"
#include "log.h"

/* ---- the compare, one function per plan (layout.h) ---- */

/* What an update found different goes to: the entry point's changed_*,
 * with e's lock held. */
typedef CUresult (*changed_fn)(struct vr_exec *e, const void *params);

static __attribute__((noinline, cold)) CUresult absorbed_wake(struct vr_exec *e)
{
    vr_mutex_wake(&e->lock);
    return CUDA_SUCCESS;
}

/* The end of the absorbed path once the node and the call are the same:
 * the layout's units against what the program last asked for (the same
 * call with the same arguments: what the driver holds already means the
 * same bytes, the invariant), counted and unlocked; else the tail call of
 * `changed`. Reached through plans[] by one indirect jump from the entry
 * point, so a plan's function has its arguments in registers, no frame and
 * no saved register; each unit is its three loads and a compare. */
static inline __attribute__((always_inline)) CUresult finish(struct vr_exec *e,
                                                             const struct vr_arg *a,
                                                             const void *params, void *const *kp,
                                                             const uint8_t *buf, changed_fn changed,
                                                             unsigned n8, unsigned n4)
{
    if (!vr_plan_same(VR_PLAN(n8, n4), a, kp, buf))
        return changed(e, params);
    e->c.absorbed++;
    if (__builtin_expect((vr_rank_drop(VR_RANK_EXEC), vr_mutex_release(&e->lock)), 0))
        return absorbed_wake(e);
    return CUDA_SUCCESS;
}

/* The arguments in the order that keeps params in the register it came in
 * (the entry point's miss path needs it there too). */
typedef CUresult (*plan_fn)(struct vr_exec *e, const struct vr_arg *a, const void *params,
                            void *const *kp, const uint8_t *buf, changed_fn changed);

/* One level of macro, one function per plan (no code is generated inside
 * another macro). */
#define VR_PLAN_FN(n8, n4)                                                          \
    static CUresult plan_##n8##_##n4(struct vr_exec *e, const struct vr_arg *a,     \
                                     const void *params, void *const *kp,           \
                                     const uint8_t *buf, changed_fn changed)        \
    {                                                                               \
        return finish(e, a, params, kp, buf, changed, n8, n4);                      \
    }
VR_PLAN_FN(0, 0) VR_PLAN_FN(0, 1) VR_PLAN_FN(0, 2) VR_PLAN_FN(0, 3)
VR_PLAN_FN(1, 0) VR_PLAN_FN(1, 1) VR_PLAN_FN(1, 2) VR_PLAN_FN(1, 3)
VR_PLAN_FN(2, 0) VR_PLAN_FN(2, 1) VR_PLAN_FN(2, 2) VR_PLAN_FN(2, 3)
VR_PLAN_FN(3, 0) VR_PLAN_FN(3, 1) VR_PLAN_FN(3, 2) VR_PLAN_FN(3, 3)
VR_PLAN_FN(4, 0) VR_PLAN_FN(4, 1) VR_PLAN_FN(4, 2) VR_PLAN_FN(4, 3)
VR_PLAN_FN(5, 0) VR_PLAN_FN(5, 1) VR_PLAN_FN(5, 2) VR_PLAN_FN(5, 3)
VR_PLAN_FN(6, 0) VR_PLAN_FN(6, 1) VR_PLAN_FN(6, 2) VR_PLAN_FN(6, 3)
#undef VR_PLAN_FN

/* More units than a plan covers: the loop, over the layout of the node
 * found (a is its first unit). */
static CUresult plan_loop(struct vr_exec *e, const struct vr_arg *a, const void *params,
                          void *const *kp, const uint8_t *buf, changed_fn changed)
{
    if (!vr_args_same_loop(e->ns.cur->layout, kp, buf))
        return changed(e, params);
    return finish(e, a, params, kp, buf, changed, 0, 0);
}

/* Units under 4 bytes: the exec layer's direct path decides (exactly). */
static CUresult plan_odd(struct vr_exec *e, const struct vr_arg *a, const void *params,
                         void *const *kp, const uint8_t *buf, changed_fn changed)
{
    (void)a, (void)kp, (void)buf;
    return changed(e, params);
}

static const plan_fn plans[VR_PLANS] = {
    [VR_PLAN(0, 0)] = plan_0_0, [VR_PLAN(0, 1)] = plan_0_1,
    [VR_PLAN(0, 2)] = plan_0_2, [VR_PLAN(0, 3)] = plan_0_3,
    [VR_PLAN(1, 0)] = plan_1_0, [VR_PLAN(1, 1)] = plan_1_1,
    [VR_PLAN(1, 2)] = plan_1_2, [VR_PLAN(1, 3)] = plan_1_3,
    [VR_PLAN(2, 0)] = plan_2_0, [VR_PLAN(2, 1)] = plan_2_1,
    [VR_PLAN(2, 2)] = plan_2_2, [VR_PLAN(2, 3)] = plan_2_3,
    [VR_PLAN(3, 0)] = plan_3_0, [VR_PLAN(3, 1)] = plan_3_1,
    [VR_PLAN(3, 2)] = plan_3_2, [VR_PLAN(3, 3)] = plan_3_3,
    [VR_PLAN(4, 0)] = plan_4_0, [VR_PLAN(4, 1)] = plan_4_1,
    [VR_PLAN(4, 2)] = plan_4_2, [VR_PLAN(4, 3)] = plan_4_3,
    [VR_PLAN(5, 0)] = plan_5_0, [VR_PLAN(5, 1)] = plan_5_1,
    [VR_PLAN(5, 2)] = plan_5_2, [VR_PLAN(5, 3)] = plan_5_3,
    [VR_PLAN(6, 0)] = plan_6_0, [VR_PLAN(6, 1)] = plan_6_1,
    [VR_PLAN(6, 2)] = plan_6_2, [VR_PLAN(6, 3)] = plan_6_3,
    [VR_PLAN_LOOP] = plan_loop,
    [VR_PLAN_ODD] = plan_odd,
};

#define VR_ABSORB(suffix, entry, ptype, real)                                       \
    static __attribute__((noinline, cold)) CUresult absorb_wake_##suffix(           \
        struct vr_exec *e, CUgraphExec exec, CUgraphNode node, ptype *params)       \
    {                                                                               \
        vr_mutex_wake(&e->lock);                                                    \
        return vr_hook_setparams_##suffix(exec, node, params);                      \
    }                                                                               \
    static __attribute__((noinline, cold)) CUresult pass_wake_##suffix(             \
        struct vr_exec *e, CUgraphExec exec, CUgraphNode node, ptype *params)       \
    {                                                                               \
        vr_mutex_wake(&e->lock);                                                    \
        return vr_real.real(exec, node, params);                                    \
    }                                                                               \
    /* A node found, not absorbed: the full path, with the handles from the   \
     * record. */                                                               \
    static __attribute__((noinline)) CUresult other_##suffix(struct vr_exec *e, \
                                                              ptype *params)    \
    {                                                                               \
        struct vr_node *n = e->ns.cur;                                              \
        CUgraphExec exec = e->handle;                                               \
        CUgraphNode node = n->handle;                                               \
        if ((vr_rank_drop(VR_RANK_EXEC), vr_mutex_release(&e->lock)))               \
            return absorb_wake_##suffix(e, exec, node, params);                     \
        return vr_hook_setparams_##suffix(exec, node, params);                      \
    }                                                                               \
    /* The same call with new arguments (same_call held): a direct update,     \
     * finished by the exec layer, unless the exec forwards everything. */      \
    static __attribute__((noinline)) CUresult changed_##suffix(struct vr_exec *e, \
                                                                const void *p)  \
    {                                                                               \
        ptype *params = (ptype *)(uintptr_t)p;                                      \
        if (!direct_same_call(e))                                                   \
            return other_##suffix(e, params);                                       \
        struct vr_node *n = e->ns.cur;                                              \
        if (!e->slices && n->layout->end4 == n->layout->end)                        \
            return vr_exec_forward_##suffix(e, n, params);                          \
        return vr_exec_direct_##suffix(e, n, params);                               \
    }                                                                               \
    CUresult vr_absorb_##suffix(CUgraphExec exec, CUgraphNode node, ptype *params)  \
    {                                                                               \
        if (__builtin_expect(vr_ex_last_exec[0].handle != exec, 0))                 \
            return vr_hook_setparams_##suffix(exec, node, params);                  \
        struct vr_exec *e = vr_ex_last_exec[0].e;                                   \
        if (__builtin_expect(vr_in_shim || !vr_mutex_trylock(&e->lock), 0))         \
            return vr_hook_setparams_##suffix(exec, node, params);                  \
        vr_rank_take(VR_RANK_EXEC);                                                 \
        /* The cached serial current and the exec comparing: one test. */        \
        uint64_t serial = vr_ex_last_exec[0].serial;                                \
        struct vr_node *n = e->absorb_key == serial ? vr_nodes_next(&e->ns, node) : NULL; \
        if (__builtin_expect(!n, 0)) {                                              \
            /* The serial current and the exec passing (CMP_PASS): counted, and  \
             * straight to the driver with no lock held, as in mode off (the     \
             * record is not read again, so nothing needs it held); at log level \
             * debug, the exec layer's path, which logs why. */                     \
            if (e->absorb_key == ~serial) {                                         \
                if (__builtin_expect(vr_log_enabled(VR_LEVEL_DEBUG), 0))            \
                    return vr_exec_pass_##suffix(e, node, params);                  \
                e->c.seen++;                                                        \
                e->c.forwarded++;                                                   \
                if ((vr_rank_drop(VR_RANK_EXEC), vr_mutex_release(&e->lock)))       \
                    return pass_wake_##suffix(e, exec, node, params);               \
                return vr_real.real(exec, node, params);                            \
            }                                                                       \
            if ((vr_rank_drop(VR_RANK_EXEC), vr_mutex_release(&e->lock)))           \
                return absorb_wake_##suffix(e, exec, node, params);                 \
            return vr_hook_setparams_##suffix(exec, node, params);                  \
        }                                                                           \
        /* The same call with the same arguments as the program last asked   \
         * for: what the driver holds already means the same bytes (the         \
         * invariant). vr_args_same is false for units under 4 bytes (then     \
         * direct_args decides). */                                             \
        if (__builtin_expect(!same_call(n, entry, params), 0))                      \
            return other_##suffix(e, params);                                       \
        const struct vr_layout *l = n->layout;                                      \
        return plans[l->plan](e, l->args, params, vr_call_v2(entry, params)->kernelParams, \
                              n->intended, changed_##suffix);                       \
    }
VR_ABSORB(v1, VR_SP_V1, const CUDA_KERNEL_NODE_PARAMS_v1, cuGraphExecKernelNodeSetParams)
VR_ABSORB(v2, VR_SP_V2, const CUDA_KERNEL_NODE_PARAMS_v2, cuGraphExecKernelNodeSetParams_v2)
VR_ABSORB(node, VR_SP_NODE, CUgraphNodeParams, cuGraphExecNodeSetParams)
#undef VR_ABSORB

/* ---- the exported SetParams wrappers ---------------------------------- */

/* hooks.def's SEEN entries, exported here rather than in interpose.c: a
 * SetParams goes straight to the absorbed path, which makes no driver call,
 * needs no guard and tests vr_in_shim itself; mode off keeps no exec in its
 * cache, so there it misses at once and tail-calls the complete path
 * (vr_hook_setparams_*, interpose.c), which starts with mode off's test.
 * The common case pays no second call, no stack frame and no mode test. */
#define absorb_cuGraphExecKernelNodeSetParams vr_absorb_v1
#define absorb_cuGraphExecKernelNodeSetParams_v2 vr_absorb_v2
#define absorb_cuGraphExecNodeSetParams vr_absorb_node

#define VR_EXPORT_SEEN(name, params, args)                                      \
    VR_EXPORT CUresult CUDAAPI name params                                      \
    {                                                                           \
        return absorb_##name args;                                              \
    }
#define VR_EXPORT_FWD(name, params, args)
#define VR_EXPORT_LAUNCH(name, params, args)
#define VR_EXPORT_FULL(name, params, args)
#define VR_EXPORT_PROC(name, params, args)
#define VR_EXPORT_ALLOC(name, params, args)
#define VR_HOOK(name, base, off, params, args) VR_EXPORT_##off(name, params, args)
#include "hooks.def"
