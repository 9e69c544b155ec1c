/* hook: what the files of the hook layer share (interpose.c holds the
 * exported wrappers and init, absorb.c the SetParams wrappers and their
 * absorbed path, route.c the resolvers (cuGetProcAddress, the dlsym stub's
 * lookups) with the table of every wrapper they hand out, the top of the
 * layer; hooks_start.c the log's start event;
 * hooks_mem.c and hooks_graph.c the bodies of most hooks). Every hook of hooks.def has a body vr_on_<name>,
 * called by its wrapper under the shim's guard with the shim initialized;
 * hidden like everything but the exports.
 */
#ifndef VR_HOOK_H
#define VR_HOOK_H

#include <stdbool.h>
#include <cuda.h>

/* The exported wrappers (interpose.c defines them, absorb.c the SetParams
 * ones, route.c the resolvers, which hand them all out). */
#define VR_EXPORT __attribute__((visibility("default")))

#define VR_HOOK(name, base, off, params, args) CUresult vr_on_##name params;
#include "hooks.def"

/* The absorbed path (absorb.c), which the exported SetParams wrapper tries
 * before anything else: CUDA_SUCCESS when the update was absorbed (and counted).
 * An update it found the node for is finished by the exec layer (its result
 * the driver's when forwarded); otherwise nothing was done and the result is
 * vr_hook_setparams_*'s for the same arguments, reached by a tail call. */
CUresult vr_absorb_v1(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *params);
CUresult vr_absorb_v2(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 *params);
CUresult vr_absorb_node(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *params);

/* A SetParams through the wrapper's complete path (interpose.c): guard,
 * init, the hook. */
CUresult vr_hook_setparams_v1(CUgraphExec exec, CUgraphNode node,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *params);
CUresult vr_hook_setparams_v2(CUgraphExec exec, CUgraphNode node,
                              const CUDA_KERNEL_NODE_PARAMS_v2 *params);
CUresult vr_hook_setparams_node(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *params);

/* The log's `start` event, once, at the first hook that runs with a
 * context (it asks the device whether VMM is supported); hooks_start.c. */
void vr_hook_note_start(void);
/* The event now, at exit: ask_device false without a context. */
void vr_hook_emit_start(bool ask_device);
struct vr_config;
void vr_hook_start_configure(const struct vr_config *c);
void vr_hook_start_forget(void);

/* The shim initialized, once (interpose.c): for a wrapper exported outside
 * interpose.c that calls its hook body (route.c's resolvers). */
void vr_hook_ready(void);

#endif
