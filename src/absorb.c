/* absorb: the absorbed SetParams path, the first thing an exported
 * SetParams wrapper tries (both at the end of this file), in the hook layer
 * so that it hands what it cannot absorb to the hook's full path
 * (interpose.c, below it) by a direct tail call.
 *
 * The exported wrapper's only work: so the first tests are
 * the exec this thread used last, which mode off never caches (it misses
 * at once, to the full path's mode test), and vr_in_shim (a call from inside
 * the driver goes to the driver). Then the node that followed the last one
 * updated, one compare with what the program last asked for. No global
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

#define VR_ABSORB(suffix, entry, ptype, real)                                       \
    static __attribute__((noinline, cold)) CUresult absorb_wake_##suffix(           \
        struct vr_exec *e, bool ok, CUgraphExec exec, CUgraphNode node, ptype *params) \
    {                                                                               \
        vr_mutex_wake(&e->lock);                                                    \
        return ok ? CUDA_SUCCESS : vr_hook_setparams_##suffix(exec, node, params);  \
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
            return absorb_wake_##suffix(e, false, exec, node, params);              \
        return vr_hook_setparams_##suffix(exec, node, params);                      \
    }                                                                               \
    /* The same call with new arguments (same_call held): a direct update,     \
     * finished by the exec layer, unless the exec forwards everything. */      \
    static __attribute__((noinline)) CUresult changed_##suffix(struct vr_exec *e, \
                                                                ptype *params)  \
    {                                                                               \
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
                return absorb_wake_##suffix(e, false, exec, node, params);          \
            return vr_hook_setparams_##suffix(exec, node, params);                  \
        }                                                                           \
        /* The same call with the same arguments as the program last asked   \
         * for: what the driver holds already means the same bytes (the         \
         * invariant). vr_args_same is false for units under 4 bytes (then     \
         * direct_args decides). */                                             \
        if (__builtin_expect(!same_call(n, entry, params), 0))                      \
            return other_##suffix(e, params);                                       \
        if (__builtin_expect(vr_args_same(n->layout, vr_call_v2(entry, params)->kernelParams, \
                                          n->intended), 1)) {                       \
            e->c.absorbed++;                                                        \
            if (__builtin_expect((vr_rank_drop(VR_RANK_EXEC),                       \
                                  vr_mutex_release(&e->lock)), 0))                  \
                return absorb_wake_##suffix(e, true, NULL, NULL, NULL);             \
            return CUDA_SUCCESS;                                                    \
        }                                                                           \
        return changed_##suffix(e, params);                                         \
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
