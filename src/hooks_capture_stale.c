/* hooks_capture_stale: the node-adding entry points of cuda.h that the graph
 * recorder (graph_rec.h) does not model: event record and wait nodes,
 * external semaphore nodes, memory alloc and free nodes, batch memory op
 * nodes, child graph nodes, and capture into an existing graph
 * (cuGraphAddNode of a type not recorded: hooks_capture.c).
 * Each forwards first and returns the driver's answer unchanged; only a
 * call the driver accepted makes the graph's record stale, so that the
 * graph's next update goes to the driver (a record missing a node cannot
 * say what changed; a node count that happens to match proves nothing:
 * issue 30 item 3).
 */
#include <stddef.h>

#include "driver.h"
#include "graph_rec.h"
#include "hook.h"

#define STALE_BODY(real, ...)                                                               \
    CUresult r = vr_real.real(__VA_ARGS__);                                                 \
    if (r == CUDA_SUCCESS)                                                                  \
        vr_grec_mark_unknown(hGraph, NULL);                                                 \
    return r;

CUresult vr_on_cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        CUgraph childGraph)
{
    STALE_BODY(cuGraphAddChildGraphNode, phGraphNode, hGraph, dependencies, numDependencies,
               childGraph)
}

CUresult vr_on_cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         CUevent event)
{
    STALE_BODY(cuGraphAddEventRecordNode, phGraphNode, hGraph, dependencies, numDependencies,
               event)
}

CUresult vr_on_cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUevent event)
{
    STALE_BODY(cuGraphAddEventWaitNode, phGraphNode, hGraph, dependencies, numDependencies,
               event)
}

CUresult vr_on_cuGraphAddExternalSemaphoresSignalNode(
    CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
    size_t numDependencies, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *nodeParams)
{
    STALE_BODY(cuGraphAddExternalSemaphoresSignalNode, phGraphNode, hGraph, dependencies,
               numDependencies, nodeParams)
}

CUresult vr_on_cuGraphAddExternalSemaphoresWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                    const CUgraphNode *dependencies,
                                                    size_t numDependencies,
                                                    const CUDA_EXT_SEM_WAIT_NODE_PARAMS *nodeParams)
{
    STALE_BODY(cuGraphAddExternalSemaphoresWaitNode, phGraphNode, hGraph, dependencies,
               numDependencies, nodeParams)
}

CUresult vr_on_cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    STALE_BODY(cuGraphAddBatchMemOpNode, phGraphNode, hGraph, dependencies, numDependencies,
               nodeParams)
}

CUresult vr_on_cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    STALE_BODY(cuGraphAddMemAllocNode, phGraphNode, hGraph, dependencies, numDependencies,
               nodeParams)
}

CUresult vr_on_cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                     const CUgraphNode *dependencies, size_t numDependencies,
                                     CUdeviceptr dptr)
{
    STALE_BODY(cuGraphAddMemFreeNode, phGraphNode, hGraph, dependencies, numDependencies, dptr)
}

/* Capture into an existing graph: the graph's record is stale, and the
 * capture is followed (so the shim knows the stream captures) into a record
 * that is unknown from the start; at its end it replaces the graph's. */
static void captures_to_graph(CUstream s, bool ptsz, CUgraph g)
{
    vr_grec_mark_unknown(g, NULL);
    vr_grec_capture_begin(s, ptsz);
    vr_grec_capture_unknown(s, ptsz);
}

CUresult vr_on_cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                           const CUgraphNode *dependencies,
                                           const CUgraphEdgeData *dependencyData,
                                           size_t numDependencies, CUstreamCaptureMode mode)
{
    CUresult r = vr_real.cuStreamBeginCaptureToGraph(hStream, hGraph, dependencies,
                                                     dependencyData, numDependencies, mode);
    if (r == CUDA_SUCCESS)
        captures_to_graph(hStream, false, hGraph);
    return r;
}

CUresult vr_on_cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                const CUgraphNode *dependencies,
                                                const CUgraphEdgeData *dependencyData,
                                                size_t numDependencies, CUstreamCaptureMode mode)
{
    CUresult r = vr_real.cuStreamBeginCaptureToGraph_ptsz(hStream, hGraph, dependencies,
                                                          dependencyData, numDependencies, mode);
    if (r == CUDA_SUCCESS)
        captures_to_graph(hStream, true, hGraph);
    return r;
}
