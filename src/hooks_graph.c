/* hooks_graph: the hooks of the graph, stream, context and module entry
 * points besides the hot ones (SetParams, launch and upload stay in
 * interpose.c beside their wrappers): instantiation, updates, node setters,
 * and the destroys that the exec layer must hear of.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "alloc.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "graph_rec.h"
#include "hook.h"
#include "layout.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"

/* ---- graphs ----------------------------------------------------------- */

static CUresult tracked(CUresult r, CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
    vr_hook_note_start();
    if (r == CUDA_SUCCESS && exec)
        vr_exec_track(*exec, graph, flags);
    return r;
}

/* The legacy entry points instantiate with flags 0. */
CUresult vr_on_cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                  char *log, size_t log_size)
{
    return tracked(vr_real.cuGraphInstantiate(exec, graph, error_node, log, log_size), exec, graph,
                   0);
}

CUresult vr_on_cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                     char *log, size_t log_size)
{
    return tracked(vr_real.cuGraphInstantiate_v2(exec, graph, error_node, log, log_size), exec,
                   graph, 0);
}

CUresult vr_on_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                                  unsigned long long flags)
{
    return tracked(vr_real.cuGraphInstantiateWithFlags(exec, graph, flags), exec, graph, flags);
}

CUresult vr_on_cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    return tracked(vr_real.cuGraphInstantiateWithParams(exec, graph, params), exec, graph,
                   params ? params->flags : 0);
}

CUresult vr_on_cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                                        CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    return tracked(vr_real.cuGraphInstantiateWithParams_ptsz(exec, graph, params), exec, graph,
                   params ? params->flags : 0);
}

CUresult vr_on_cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph,
                                           CUgraphExecUpdateResultInfo *info)
{
    return vr_err_to_cu(vr_exec_update(exec, graph, info));
}

/* The v1 entry reports its result in two out-parameters instead of a
 * struct; the same decision as v2's. */
CUresult vr_on_cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                                        CUgraphExecUpdateResult *result)
{
    return vr_err_to_cu(vr_exec_update_v1(exec, graph, error_node, result));
}

/* The variants of the exec must hold the same: applied to each. */
CUresult vr_on_cuGraphNodeSetEnabled(CUgraphExec exec, CUgraphNode node, unsigned int enabled)
{
    return vr_err_to_cu(vr_exec_set_enabled(exec, node, enabled));
}

CUresult vr_on_cuGraphNodeGetEnabled(CUgraphExec exec, CUgraphNode node, unsigned int *enabled)
{
    return vr_err_to_cu(vr_exec_get_enabled(exec, node, enabled));
}

/* The other node setters: made on the program's exec, then on each of its
 * variants (or the variants go); the program gets the driver's answer for
 * its own exec. */
static CUresult set_node(CUgraphExec exec, CUgraphNode node, struct vr_set s)
{
    return vr_err_to_cu(vr_exec_set_node(exec, node, &s));
}

CUresult vr_on_cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_MEMCPY, .params = p, .ctx = ctx});
}

CUresult vr_on_cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_MEMSET_NODE_PARAMS *p,
                                                     CUcontext ctx)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_MEMSET, .params = p, .ctx = ctx});
}

CUresult vr_on_cuGraphExecHostNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                   const CUDA_HOST_NODE_PARAMS *p)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_HOST, .params = p});
}

CUresult vr_on_cuGraphExecChildGraphNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                         CUgraph child)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_CHILD, .child = child});
}

CUresult vr_on_cuGraphExecEventRecordNodeSetEvent(CUgraphExec exec, CUgraphNode node,
                                                         CUevent event)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_EVENT_RECORD, .event = event});
}

CUresult vr_on_cuGraphExecEventWaitNodeSetEvent(CUgraphExec exec, CUgraphNode node,
                                                       CUevent event)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_EVENT_WAIT, .event = event});
}

CUresult vr_on_cuGraphExecExternalSemaphoresSignalNodeSetParams(
    CUgraphExec exec, CUgraphNode node, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *p)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_SEM_SIGNAL, .params = p});
}

CUresult vr_on_cuGraphExecExternalSemaphoresWaitNodeSetParams(
    CUgraphExec exec, CUgraphNode node, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *p)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_SEM_WAIT, .params = p});
}

CUresult vr_on_cuGraphExecBatchMemOpNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                         const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    return set_node(exec, node, (struct vr_set){.kind = VR_SET_BATCH, .params = p});
}

CUresult vr_on_cuGraphExecDestroy(CUgraphExec exec)
{
    return vr_err_to_cu(vr_exec_destroy(exec));
}

CUresult vr_on_cuStreamDestroy_v2(CUstream stream)
{
    vr_exec_stream_destroyed(stream);
    return vr_real.cuStreamDestroy_v2(stream);
}

CUresult vr_on_cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = vr_real.cuCtxDestroy_v2(ctx);
    if (r == CUDA_SUCCESS)
        vr_alloc_context_destroyed(ctx);
    return r;
}

/* The primary context's handle is asked first (retained and released
 * again: its count is as before), and only while it is active: an inactive
 * one holds no memory. */
CUresult vr_on_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    unsigned flags;
    int active = 0;
    CUcontext primary = NULL;
    if (vr_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active &&
        vr_real.cuDevicePrimaryCtxRetain(&primary, dev) == CUDA_SUCCESS)
        vr_real.cuDevicePrimaryCtxRelease_v2(dev);
    CUresult r = vr_real.cuDevicePrimaryCtxReset_v2(dev);
    if (r == CUDA_SUCCESS)
        vr_alloc_context_destroyed(primary);
    return r;
}

/* The nodes of a destroyed graph name nothing any more, also in the execs
 * instantiated from it (driver-answers.txt). A graph that live execs were
 * instantiated from is kept until the last of them goes (the shim names
 * their nodes by its node handles), invisible to the program: its calls
 * naming them are refused as the driver would; a second destroy of it gets
 * the driver's answer for a destroyed graph. */
CUresult vr_on_cuGraphDestroy(CUgraph graph)
{
    if (graph && vr_exec_graph_kept(graph))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    if (!vr_exec_graph_destroyed(graph))
        r = vr_real.cuGraphDestroy(graph);
    if (r == CUDA_SUCCESS)
        vr_grec_destroyed(graph);
    return r;
}

/* ---- modules ---------------------------------------------------------- */

/* After an unload the driver may hand the same function handle to another
 * function with other arguments: the cached layouts must go (layout.h says
 * why twice). */
CUresult vr_on_cuModuleUnload(CUmodule mod)
{
    vr_layout_evict_module(mod);
    CUresult r = vr_real.cuModuleUnload(mod);
    vr_layout_evict_module(mod);
    return r;
}

CUresult vr_on_cuLibraryUnload(CUlibrary lib)
{
    vr_layout_evict_library(lib);
    CUresult r = vr_real.cuLibraryUnload(lib);
    vr_layout_evict_library(lib);
    return r;
}
