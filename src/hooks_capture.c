/* hooks_capture: the hooks that feed the graph recorder (graph_rec.h): stream
 * capture (begin, end, kernel launches, event joins) and the explicit graph
 * API (memsets, copies and host nodes: hooks_capture_nodes.c). Each
 * forwards first, returns the driver's answer unchanged, and records only
 * what the driver accepted.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "driver.h"
#include "graph_rec.h"
#include "hook.h"

/* ---- capture ------------------------------------------------------------ */

CUresult vr_on_cuStreamBeginCapture(CUstream s)
{
    CUresult r = vr_real.cuStreamBeginCapture(s);
    if (r == CUDA_SUCCESS)
        vr_grec_capture_begin(s, false);
    return r;
}

CUresult vr_on_cuStreamBeginCapture_ptsz(CUstream s)
{
    CUresult r = vr_real.cuStreamBeginCapture_ptsz(s);
    if (r == CUDA_SUCCESS)
        vr_grec_capture_begin(s, true);
    return r;
}

CUresult vr_on_cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    CUresult r = vr_real.cuStreamBeginCapture_v2(s, mode);
    if (r == CUDA_SUCCESS)
        vr_grec_capture_begin(s, false);
    return r;
}

CUresult vr_on_cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    CUresult r = vr_real.cuStreamBeginCapture_v2_ptsz(s, mode);
    if (r == CUDA_SUCCESS)
        vr_grec_capture_begin(s, true);
    return r;
}

CUresult vr_on_cuStreamEndCapture(CUstream s, CUgraph *graph)
{
    CUresult r = vr_real.cuStreamEndCapture(s, graph);
    vr_grec_capture_end(s, false, r, r == CUDA_SUCCESS && graph ? *graph : NULL);
    return r;
}

CUresult vr_on_cuStreamEndCapture_ptsz(CUstream s, CUgraph *graph)
{
    CUresult r = vr_real.cuStreamEndCapture_ptsz(s, graph);
    vr_grec_capture_end(s, true, r, r == CUDA_SUCCESS && graph ? *graph : NULL);
    return r;
}

/* The dependency set replaced by node handles the recorder does not keep
 * for captured nodes: not modelled. */
CUresult vr_on_cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *deps, size_t n,
                                                 unsigned flags)
{
    CUresult r = vr_real.cuStreamUpdateCaptureDependencies(s, deps, n, flags);
    vr_grec_capture_unknown(s, false);
    return r;
}

CUresult vr_on_cuStreamUpdateCaptureDependencies_ptsz(CUstream s, CUgraphNode *deps, size_t n,
                                                      unsigned flags)
{
    CUresult r = vr_real.cuStreamUpdateCaptureDependencies_ptsz(s, deps, n, flags);
    vr_grec_capture_unknown(s, true);
    return r;
}

CUresult vr_on_cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps,
                                                    const CUgraphEdgeData *data, size_t n,
                                                    unsigned flags)
{
    CUresult r = vr_real.cuStreamUpdateCaptureDependencies_v2(s, deps, data, n, flags);
    vr_grec_capture_unknown(s, false);
    return r;
}

/* cuLaunchKernel and its _ptsz form: interpose.c, beside their wrappers. */

static void launch_ex(const CUlaunchConfig *c, bool ptsz, CUresult r, CUfunction f, void **kp,
                      void **extra)
{
    if (!vr_grec_capturing() || !c)
        return;
    const unsigned dims[7] = {c->gridDimX,  c->gridDimY,  c->gridDimZ,     c->blockDimX,
                              c->blockDimY, c->blockDimZ, c->sharedMemBytes};
    /* Attributes (clusters, priorities, ...) are recorded as bytes beside
     * the node (graph_rec_attrs.c): the plain launch keeps its fast path. */
    if (c->numAttrs)
        vr_grec_launch_attrs(c->hStream, ptsz, r, f, dims, kp, extra, c->attrs, c->numAttrs);
    else
        vr_grec_launch(c->hStream, ptsz, r, f, dims, kp, extra, false);
}

CUresult vr_on_cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra)
{
    CUresult r = vr_real.cuLaunchKernelEx(c, f, kp, extra);
    launch_ex(c, false, r, f, kp, extra);
    return r;
}

CUresult vr_on_cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **kp,
                                     void **extra)
{
    CUresult r = vr_real.cuLaunchKernelEx_ptsz(c, f, kp, extra);
    launch_ex(c, true, r, f, kp, extra);
    return r;
}

#define EVENT_RECORD(name, ptsz, ...)                                                       \
    CUresult r = vr_real.name(__VA_ARGS__);                                                 \
    if (r == CUDA_SUCCESS && vr_grec_capturing())                                           \
        vr_grec_event_record(ev, s, ptsz);                                                  \
    return r;

CUresult vr_on_cuEventRecord(CUevent ev, CUstream s)
{
    EVENT_RECORD(cuEventRecord, false, ev, s)
}

CUresult vr_on_cuEventRecord_ptsz(CUevent ev, CUstream s)
{
    EVENT_RECORD(cuEventRecord_ptsz, true, ev, s)
}

/* An external record or wait in a capture is a node of its own (cuda.h:
 * CU_EVENT_RECORD_EXTERNAL, CU_EVENT_WAIT_EXTERNAL), not modelled: the
 * capture's record goes UNKNOWN. */
CUresult vr_on_cuEventRecordWithFlags(CUevent ev, CUstream s, unsigned flags)
{
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
        CUresult r = vr_real.cuEventRecordWithFlags(ev, s, flags);
        if (vr_grec_capturing())
            vr_grec_capture_unknown(s, false);
        return r;
    }
    EVENT_RECORD(cuEventRecordWithFlags, false, ev, s, flags)
}

CUresult vr_on_cuEventRecordWithFlags_ptsz(CUevent ev, CUstream s, unsigned flags)
{
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
        CUresult r = vr_real.cuEventRecordWithFlags_ptsz(ev, s, flags);
        if (vr_grec_capturing())
            vr_grec_capture_unknown(s, true);
        return r;
    }
    EVENT_RECORD(cuEventRecordWithFlags_ptsz, true, ev, s, flags)
}

CUresult vr_on_cuStreamWaitEvent(CUstream s, CUevent ev, unsigned flags)
{
    CUresult r = vr_real.cuStreamWaitEvent(s, ev, flags);
    if (vr_grec_capturing() && (flags & CU_EVENT_WAIT_EXTERNAL))
        vr_grec_capture_unknown(s, false);
    else if (r == CUDA_SUCCESS && vr_grec_capturing())
        vr_grec_stream_wait(s, false, ev);
    return r;
}

CUresult vr_on_cuStreamWaitEvent_ptsz(CUstream s, CUevent ev, unsigned flags)
{
    CUresult r = vr_real.cuStreamWaitEvent_ptsz(s, ev, flags);
    if (vr_grec_capturing() && (flags & CU_EVENT_WAIT_EXTERNAL))
        vr_grec_capture_unknown(s, true);
    else if (r == CUDA_SUCCESS && vr_grec_capturing())
        vr_grec_stream_wait(s, true, ev);
    return r;
}

/* ---- explicit graphs ------------------------------------------------------- */

CUresult vr_on_cuGraphCreate(CUgraph *graph, unsigned flags)
{
    CUresult r = vr_real.cuGraphCreate(graph, flags);
    if (r == CUDA_SUCCESS && graph)
        vr_grec_created(*graph);
    return r;
}

/* The fields as node.c reads them back: kern and ctx only without func. */
static struct vr_fields fields_of(CUfunction func, CUkernel kern, CUcontext ctx, const unsigned *dims)
{
    struct vr_fields f = {.func = func, .kern = func ? NULL : kern, .ctx = func ? NULL : ctx};
    memcpy(f.dims, dims, sizeof f.dims);
    return f;
}

CUresult vr_on_cuGraphAddKernelNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                    size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUresult r = vr_real.cuGraphAddKernelNode(node, g, deps, n, p);
    if (r == CUDA_SUCCESS && node && p) {
        struct vr_fields f = fields_of(p->func, NULL, NULL, &p->gridDimX);
        vr_grec_add_kernel(g, *node, deps, n, &f, p->kernelParams, p->extra);
    }
    return r;
}

CUresult vr_on_cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                       size_t n, const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    CUresult r = vr_real.cuGraphAddKernelNode_v2(node, g, deps, n, p);
    if (r == CUDA_SUCCESS && node && p) {
        struct vr_fields f = fields_of(p->func, p->kern, p->ctx, &p->gridDimX);
        vr_grec_add_kernel(g, *node, deps, n, &f, p->kernelParams, p->extra);
    }
    return r;
}

CUresult vr_on_cuGraphAddEmptyNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n)
{
    CUresult r = vr_real.cuGraphAddEmptyNode(node, g, deps, n);
    if (r == CUDA_SUCCESS && node)
        vr_grec_add_plain(g, *node, deps, n, CU_GRAPH_NODE_TYPE_EMPTY, NULL, 0, NULL);
    return r;
}

CUresult vr_on_cuGraphAddMemsetNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                    size_t n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    CUresult r = vr_real.cuGraphAddMemsetNode(node, g, deps, n, p, ctx);
    if (r == CUDA_SUCCESS && node)
        vr_grec_add_plain(g, *node, deps, n, CU_GRAPH_NODE_TYPE_MEMSET, p, sizeof *p, ctx);
    return r;
}

CUresult vr_on_cuGraphAddMemcpyNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                    size_t n, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    CUresult r = vr_real.cuGraphAddMemcpyNode(node, g, deps, n, p, ctx);
    if (r == CUDA_SUCCESS && node)
        vr_grec_add_plain(g, *node, deps, n, CU_GRAPH_NODE_TYPE_MEMCPY, p, sizeof *p, ctx);
    return r;
}

/* Edge data other than the default (all zero) is not modelled. */
static bool plain_edges(const CUgraphEdgeData *data, size_t n)
{
    static const CUgraphEdgeData zero;
    for (size_t i = 0; data && i < n; i++)
        if (memcmp(&data[i], &zero, sizeof zero) != 0)
            return false;
    return true;
}

static void edges(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                  const CUgraphEdgeData *data, size_t n, bool add)
{
    if (!plain_edges(data, n) || (n && (!from || !to)))
        vr_grec_mark_unknown(g, NULL);
    else
        vr_grec_edges(g, from, to, n, add);
}

CUresult vr_on_cuGraphAddDependencies(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                      size_t n)
{
    CUresult r = vr_real.cuGraphAddDependencies(g, from, to, n);
    if (r == CUDA_SUCCESS)
        edges(g, from, to, NULL, n, true);
    return r;
}

CUresult vr_on_cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from,
                                         const CUgraphNode *to, const CUgraphEdgeData *data,
                                         size_t n)
{
    CUresult r = vr_real.cuGraphAddDependencies_v2(g, from, to, data, n);
    if (r == CUDA_SUCCESS)
        edges(g, from, to, data, n, true);
    return r;
}

CUresult vr_on_cuGraphRemoveDependencies(CUgraph g, const CUgraphNode *from,
                                         const CUgraphNode *to, size_t n)
{
    CUresult r = vr_real.cuGraphRemoveDependencies(g, from, to, n);
    if (r == CUDA_SUCCESS)
        edges(g, from, to, NULL, n, false);
    return r;
}

CUresult vr_on_cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
                                            const CUgraphNode *to, const CUgraphEdgeData *data,
                                            size_t n)
{
    CUresult r = vr_real.cuGraphRemoveDependencies_v2(g, from, to, data, n);
    if (r == CUDA_SUCCESS)
        edges(g, from, to, data, n, false);
    return r;
}

CUresult vr_on_cuGraphKernelNodeSetParams(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUresult r = vr_real.cuGraphKernelNodeSetParams(node, p);
    if (r == CUDA_SUCCESS && p) {
        struct vr_fields f = fields_of(p->func, NULL, NULL, &p->gridDimX);
        vr_grec_set_kernel(node, &f, p->kernelParams, p->extra);
    }
    return r;
}

CUresult vr_on_cuGraphKernelNodeSetParams_v2(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    CUresult r = vr_real.cuGraphKernelNodeSetParams_v2(node, p);
    if (r == CUDA_SUCCESS && p) {
        struct vr_fields f = fields_of(p->func, p->kern, p->ctx, &p->gridDimX);
        vr_grec_set_kernel(node, &f, p->kernelParams, p->extra);
    }
    return r;
}

CUresult vr_on_cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p)
{
    CUresult r = vr_real.cuGraphNodeSetParams(node, p);
    if (r != CUDA_SUCCESS)
        return r;
    if (p && p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        const CUDA_KERNEL_NODE_PARAMS_v2 *k = (const CUDA_KERNEL_NODE_PARAMS_v2 *)(const void *)&p->kernel;
        struct vr_fields f = fields_of(k->func, k->kern, k->ctx, &k->gridDimX);
        vr_grec_set_kernel(node, &f, k->kernelParams, k->extra);
    } else {
        vr_grec_mark_unknown(NULL, node);
    }
    return r;
}

/* cuGraphAddNode: kernel and empty nodes recorded as cuGraphAddKernelNode
 * and cuGraphAddEmptyNode record them; any other type (conditional nodes
 * and the rest), or edge data, makes the graph's record stale. */
static void add_node(CUgraph g, const CUgraphNode *node, const CUgraphNode *deps,
                     const CUgraphEdgeData *data, size_t n, const CUgraphNodeParams *p)
{
    if (!node || !p || !plain_edges(data, n)) {
        vr_grec_mark_unknown(g, NULL);
    } else if (p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        const CUDA_KERNEL_NODE_PARAMS_v2 *k = (const CUDA_KERNEL_NODE_PARAMS_v2 *)(const void *)&p->kernel;
        struct vr_fields f = fields_of(k->func, k->kern, k->ctx, &k->gridDimX);
        vr_grec_add_kernel(g, *node, deps, n, &f, k->kernelParams, k->extra);
    } else if (p->type == CU_GRAPH_NODE_TYPE_EMPTY) {
        vr_grec_add_plain(g, *node, deps, n, CU_GRAPH_NODE_TYPE_EMPTY, NULL, 0, NULL);
    } else {
        vr_grec_mark_unknown(g, NULL);
    }
}

CUresult vr_on_cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                              CUgraphNodeParams *p)
{
    CUresult r = vr_real.cuGraphAddNode(node, g, deps, n, p);
    if (r == CUDA_SUCCESS)
        add_node(g, node, deps, NULL, n, p);
    return r;
}

CUresult vr_on_cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                 const CUgraphEdgeData *data, size_t n, CUgraphNodeParams *p)
{
    CUresult r = vr_real.cuGraphAddNode_v2(node, g, deps, data, n, p);
    if (r == CUDA_SUCCESS)
        add_node(g, node, deps, data, n, p);
    return r;
}

/* Setters the recorder does not model: the graph's record is dropped to
 * UNKNOWN (its next update is read through the getters). */
CUresult vr_on_cuGraphMemsetNodeSetParams(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p)
{
    CUresult r = vr_real.cuGraphMemsetNodeSetParams(node, p);
    vr_grec_mark_unknown(NULL, node);
    return r;
}

CUresult vr_on_cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *p)
{
    CUresult r = vr_real.cuGraphMemcpyNodeSetParams(node, p);
    vr_grec_mark_unknown(NULL, node);
    return r;
}

CUresult vr_on_cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                             const CUkernelNodeAttrValue *value)
{
    CUresult r = vr_real.cuGraphKernelNodeSetAttribute(node, attr, value);
    vr_grec_mark_unknown(NULL, node);
    return r;
}

CUresult vr_on_cuGraphDestroyNode(CUgraphNode node)
{
    vr_grec_mark_unknown(NULL, node); /* before: the handle names nothing after */
    return vr_real.cuGraphDestroyNode(node);
}
