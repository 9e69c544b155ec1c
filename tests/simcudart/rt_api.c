/* simcudart: the cuda* calls graph programs make, each a thin translation to
 * the driver call NVIDIA's runtime resolves for it. A *_ptsz / *_ptds export
 * is what a program compiled with --default-stream per-thread calls; it uses
 * the driver's per-thread variant, so stream 0 means the thread's stream. */
#include "rt.h"

#include <stdlib.h>
#include <string.h>

#define ENTER()                                                                \
    do {                                                                       \
        cudaError_t e_ = rt_enter();                                           \
        if (e_)                                                                \
            return e_;                                                         \
    } while (0)

/* Both exports of an API that has a per-thread flavour. */
#define PT_PAIR(name, ptname, params, args)                                    \
    RT_API cudaError_t name params { return name##_impl args; }                \
    RT_API cudaError_t ptname params { return name##_impl_pt args; }

#define PICK(pt, fn, args) ((pt) ? RT_CALL(fn##_pt, args) : RT_CALL(fn, args))

static CUdeviceptr dp(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

/* ---- memory ------------------------------------------------------------------ */

RT_API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    ENTER();
    if (!devPtr)
        return rt_ret(cudaErrorInvalidValue);
    if (size == 0) { /* documented: NULL and success */
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p;
    CUresult r = RT_CALL(cuMemAlloc, (&p, size));
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? rt_ret(cudaErrorMemoryAllocation) : rt_cu(r);
}

RT_API cudaError_t cudaFree(void *devPtr)
{
    ENTER(); /* cudaFree(NULL): the customary way to initialize */
    if (!devPtr)
        return cudaSuccess;
    return rt_cu(RT_CALL(cuMemFree, (dp(devPtr))));
}

/* Assumption: pinned host memory is ordinary host memory on simcuda. */
RT_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    if (!ptr)
        return rt_ret(cudaErrorInvalidValue);
    void *p = NULL;
    if (posix_memalign(&p, 4096, size ? size : 1))
        return rt_ret(cudaErrorMemoryAllocation);
    *ptr = p;
    return cudaSuccess;
}

RT_API cudaError_t cudaFreeHost(void *ptr)
{
    free(ptr);
    return cudaSuccess;
}

RT_API cudaError_t cudaMemGetInfo(size_t *free_, size_t *total)
{
    ENTER();
    return rt_cu(RT_CALL(cuMemGetInfo, (free_, total)));
}

static cudaError_t memcpy_impl_any(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                   bool pt)
{
    ENTER();
    CUresult r;
    switch (kind) {
    case cudaMemcpyHostToHost: memmove(dst, src, n); return cudaSuccess;
    case cudaMemcpyHostToDevice: r = PICK(pt, cuMemcpyHtoD, (dp(dst), src, n)); break;
    case cudaMemcpyDeviceToHost: r = PICK(pt, cuMemcpyDtoH, (dst, dp(src), n)); break;
    case cudaMemcpyDeviceToDevice: r = PICK(pt, cuMemcpyDtoD, (dp(dst), dp(src), n)); break;
    case cudaMemcpyDefault: r = PICK(pt, cuMemcpy, (dp(dst), dp(src), n)); break;
    default: return rt_ret(cudaErrorInvalidMemcpyDirection);
    }
    return rt_cu(r);
}

static cudaError_t cudaMemcpy_impl(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    return memcpy_impl_any(d, s, n, k, false);
}
static cudaError_t cudaMemcpy_impl_pt(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    return memcpy_impl_any(d, s, n, k, true);
}
PT_PAIR(cudaMemcpy, cudaMemcpy_ptds, (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),
        (dst, src, count, kind))

static cudaError_t memcpy_async_any(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                    cudaStream_t s, bool pt)
{
    ENTER();
    CUstream cs = (CUstream)s;
    CUresult r;
    switch (kind) {
    case cudaMemcpyHostToHost: /* ordered after the stream's work, as documented */
        r = PICK(pt, cuStreamSynchronize, (cs));
        if (r == CUDA_SUCCESS)
            memmove(dst, src, n);
        break;
    case cudaMemcpyHostToDevice: r = PICK(pt, cuMemcpyHtoDAsync, (dp(dst), src, n, cs)); break;
    case cudaMemcpyDeviceToHost: r = PICK(pt, cuMemcpyDtoHAsync, (dst, dp(src), n, cs)); break;
    case cudaMemcpyDeviceToDevice: r = PICK(pt, cuMemcpyDtoDAsync, (dp(dst), dp(src), n, cs)); break;
    case cudaMemcpyDefault: r = PICK(pt, cuMemcpyAsync, (dp(dst), dp(src), n, cs)); break;
    default: return rt_ret(cudaErrorInvalidMemcpyDirection);
    }
    return rt_cu(r);
}

static cudaError_t cudaMemcpyAsync_impl(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                                        cudaStream_t st)
{
    return memcpy_async_any(d, s, n, k, st, false);
}
static cudaError_t cudaMemcpyAsync_impl_pt(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                                           cudaStream_t st)
{
    return memcpy_async_any(d, s, n, k, st, true);
}
PT_PAIR(cudaMemcpyAsync, cudaMemcpyAsync_ptsz,
        (void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream),
        (dst, src, count, kind, stream))

static cudaError_t cudaMemset_impl(void *p, int v, size_t n)
{
    ENTER();
    return rt_cu(RT_CALL(cuMemsetD8, (dp(p), (unsigned char)v, n)));
}
static cudaError_t cudaMemset_impl_pt(void *p, int v, size_t n)
{
    ENTER();
    return rt_cu(RT_CALL(cuMemsetD8_pt, (dp(p), (unsigned char)v, n)));
}
PT_PAIR(cudaMemset, cudaMemset_ptds, (void *devPtr, int value, size_t count), (devPtr, value, count))

static cudaError_t cudaMemsetAsync_impl(void *p, int v, size_t n, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuMemsetD8Async, (dp(p), (unsigned char)v, n, (CUstream)s)));
}
static cudaError_t cudaMemsetAsync_impl_pt(void *p, int v, size_t n, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuMemsetD8Async_pt, (dp(p), (unsigned char)v, n, (CUstream)s)));
}
PT_PAIR(cudaMemsetAsync, cudaMemsetAsync_ptsz,
        (void *devPtr, int value, size_t count, cudaStream_t stream), (devPtr, value, count, stream))

/* ---- streams and events ---------------------------------------------------------- */

RT_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    ENTER();
    if (!s)
        return rt_ret(cudaErrorInvalidValue);
    return rt_cu(RT_CALL(cuStreamCreate, ((CUstream *)s, flags)));
}

RT_API cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

RT_API cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamDestroy, ((CUstream)s)));
}

static cudaError_t cudaStreamSynchronize_impl(cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamSynchronize, ((CUstream)s)));
}
static cudaError_t cudaStreamSynchronize_impl_pt(cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamSynchronize_pt, ((CUstream)s)));
}
PT_PAIR(cudaStreamSynchronize, cudaStreamSynchronize_ptsz, (cudaStream_t stream), (stream))

/* cudaErrorNotReady is not sticky: it is an answer, not a failure. */
static cudaError_t query(CUresult r)
{
    return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : rt_cu(r);
}

static cudaError_t cudaStreamQuery_impl(cudaStream_t s)
{
    ENTER();
    return query(RT_CALL(cuStreamQuery, ((CUstream)s)));
}
static cudaError_t cudaStreamQuery_impl_pt(cudaStream_t s)
{
    ENTER();
    return query(RT_CALL(cuStreamQuery_pt, ((CUstream)s)));
}
PT_PAIR(cudaStreamQuery, cudaStreamQuery_ptsz, (cudaStream_t stream), (stream))

static cudaError_t cudaStreamWaitEvent_impl(cudaStream_t s, cudaEvent_t ev, unsigned flags)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamWaitEvent, ((CUstream)s, (CUevent)ev, flags)));
}
static cudaError_t cudaStreamWaitEvent_impl_pt(cudaStream_t s, cudaEvent_t ev, unsigned flags)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamWaitEvent_pt, ((CUstream)s, (CUevent)ev, flags)));
}
PT_PAIR(cudaStreamWaitEvent, cudaStreamWaitEvent_ptsz,
        (cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags))

RT_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    ENTER();
    if (!ev)
        return rt_ret(cudaErrorInvalidValue);
    return rt_cu(RT_CALL(cuEventCreate, ((CUevent *)ev, flags)));
}

RT_API cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    return cudaEventCreateWithFlags(ev, cudaEventDefault);
}

static cudaError_t cudaEventRecord_impl(cudaEvent_t ev, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuEventRecord, ((CUevent)ev, (CUstream)s)));
}
static cudaError_t cudaEventRecord_impl_pt(cudaEvent_t ev, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuEventRecord_pt, ((CUevent)ev, (CUstream)s)));
}
PT_PAIR(cudaEventRecord, cudaEventRecord_ptsz, (cudaEvent_t event, cudaStream_t stream), (event, stream))

RT_API cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    ENTER();
    return query(RT_CALL(cuEventQuery, ((CUevent)ev)));
}

RT_API cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    ENTER();
    return rt_cu(RT_CALL(cuEventSynchronize, ((CUevent)ev)));
}

RT_API cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    ENTER();
    return rt_cu(RT_CALL(cuEventDestroy, ((CUevent)ev)));
}

RT_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER();
    return rt_cu(RT_CALL(cuEventElapsedTime, (ms, (CUevent)start, (CUevent)end)));
}

/* ---- stream capture ------------------------------------------------------------------ */

static cudaError_t cudaStreamBeginCapture_impl(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamBeginCapture, ((CUstream)s, (CUstreamCaptureMode)mode)));
}
static cudaError_t cudaStreamBeginCapture_impl_pt(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamBeginCapture_pt, ((CUstream)s, (CUstreamCaptureMode)mode)));
}
PT_PAIR(cudaStreamBeginCapture, cudaStreamBeginCapture_ptsz,
        (cudaStream_t stream, enum cudaStreamCaptureMode mode), (stream, mode))

static cudaError_t cudaStreamEndCapture_impl(cudaStream_t s, cudaGraph_t *g)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamEndCapture, ((CUstream)s, (CUgraph *)g)));
}
static cudaError_t cudaStreamEndCapture_impl_pt(cudaStream_t s, cudaGraph_t *g)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamEndCapture_pt, ((CUstream)s, (CUgraph *)g)));
}
PT_PAIR(cudaStreamEndCapture, cudaStreamEndCapture_ptsz, (cudaStream_t stream, cudaGraph_t *pGraph),
        (stream, pGraph))

static cudaError_t cudaStreamIsCapturing_impl(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamIsCapturing, ((CUstream)s, (CUstreamCaptureStatus *)st)));
}
static cudaError_t cudaStreamIsCapturing_impl_pt(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    ENTER();
    return rt_cu(RT_CALL(cuStreamIsCapturing_pt, ((CUstream)s, (CUstreamCaptureStatus *)st)));
}
PT_PAIR(cudaStreamIsCapturing, cudaStreamIsCapturing_ptsz,
        (cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus), (stream, pCaptureStatus))

/* ---- graphs ------------------------------------------------------------------------------ */

RT_API cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphCreate, ((CUgraph *)g, flags)));
}

RT_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphDestroy, ((CUgraph)g)));
}

/* The runtime's kernel node parameters name the kernel by its host stub. */
static cudaError_t to_driver(const struct cudaKernelNodeParams *p, CUDA_KERNEL_NODE_PARAMS_v2 *d)
{
    if (!p)
        return cudaErrorInvalidValue;
    cudaError_t e;
    CUfunction f = rt_function(p->func, &e);
    if (!f)
        return e;
    *d = (CUDA_KERNEL_NODE_PARAMS_v2){
        .func = f,
        .gridDimX = p->gridDim.x, .gridDimY = p->gridDim.y, .gridDimZ = p->gridDim.z,
        .blockDimX = p->blockDim.x, .blockDimY = p->blockDim.y, .blockDimZ = p->blockDim.z,
        .sharedMemBytes = p->sharedMemBytes,
        .kernelParams = p->kernelParams,
        .extra = p->extra,
    };
    return cudaSuccess;
}

RT_API cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *node, cudaGraph_t g,
                                          const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaKernelNodeParams *p)
{
    ENTER();
    CUDA_KERNEL_NODE_PARAMS_v2 d;
    cudaError_t e = to_driver(p, &d);
    if (e)
        return rt_ret(e);
    return rt_cu(RT_CALL(cuGraphAddKernelNode, ((CUgraphNode *)node, (CUgraph)g,
                                                (const CUgraphNode *)deps, ndeps, &d)));
}

RT_API cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *node, cudaGraph_t g,
                                         const cudaGraphNode_t *deps, size_t ndeps)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphAddEmptyNode, ((CUgraphNode *)node, (CUgraph)g,
                                               (const CUgraphNode *)deps, ndeps)));
}

RT_API cudaError_t cudaGraphAddDependencies(cudaGraph_t g, const cudaGraphNode_t *from,
                                            const cudaGraphNode_t *to,
                                            const cudaGraphEdgeData *edgeData, size_t n)
{
    ENTER();
    /* The runtime's edge data is the driver's, field for field. */
    return rt_cu(RT_CALL(cuGraphAddDependencies, ((CUgraph)g, (const CUgraphNode *)from,
                                                  (const CUgraphNode *)to,
                                                  (const CUgraphEdgeData *)edgeData, n)));
}

RT_API cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphGetNodes, ((CUgraph)g, (CUgraphNode *)nodes, n)));
}

RT_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
    ENTER();
    if (!type)
        return rt_ret(cudaErrorInvalidValue);
    CUgraphNodeType t;
    CUresult r = RT_CALL(cuGraphNodeGetType, ((CUgraphNode)node, &t));
    if (r == CUDA_SUCCESS)
        *type = (enum cudaGraphNodeType)t; /* same numbering */
    return rt_cu(r);
}

RT_API cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, struct cudaKernelNodeParams *p)
{
    ENTER();
    if (!p)
        return rt_ret(cudaErrorInvalidValue);
    CUDA_KERNEL_NODE_PARAMS_v2 d;
    CUresult r = RT_CALL(cuGraphKernelNodeGetParams, ((CUgraphNode)node, &d));
    if (r != CUDA_SUCCESS)
        return rt_cu(r);
    void *host = rt_host_of(d.func);
    *p = (struct cudaKernelNodeParams){
        .func = host ? host : (void *)d.func,
        .gridDim = { d.gridDimX, d.gridDimY, d.gridDimZ },
        .blockDim = { d.blockDimX, d.blockDimY, d.blockDimZ },
        .sharedMemBytes = d.sharedMemBytes,
        .kernelParams = d.kernelParams,
        .extra = d.extra,
    };
    return cudaSuccess;
}

RT_API cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                                const struct cudaKernelNodeParams *p)
{
    ENTER();
    CUDA_KERNEL_NODE_PARAMS_v2 d;
    cudaError_t e = to_driver(p, &d);
    if (e)
        return rt_ret(e);
    return rt_cu(RT_CALL(cuGraphKernelNodeSetParams, ((CUgraphNode)node, &d)));
}

RT_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphInstantiateWithFlags, ((CUgraphExec *)x, (CUgraph)g, flags)));
}

RT_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
                                                 unsigned long long flags)
{
    return cudaGraphInstantiate(x, g, flags);
}

static cudaError_t cudaGraphInstantiateWithParams_impl(cudaGraphExec_t *x, cudaGraph_t g,
                                                       cudaGraphInstantiateParams *p)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphInstantiateWithParams,
                         ((CUgraphExec *)x, (CUgraph)g, (CUDA_GRAPH_INSTANTIATE_PARAMS *)p)));
}
static cudaError_t cudaGraphInstantiateWithParams_impl_pt(cudaGraphExec_t *x, cudaGraph_t g,
                                                          cudaGraphInstantiateParams *p)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphInstantiateWithParams_pt,
                         ((CUgraphExec *)x, (CUgraph)g, (CUDA_GRAPH_INSTANTIATE_PARAMS *)p)));
}
PT_PAIR(cudaGraphInstantiateWithParams, cudaGraphInstantiateWithParams_ptsz,
        (cudaGraphExec_t *pGraphExec, cudaGraph_t graph, cudaGraphInstantiateParams *params),
        (pGraphExec, graph, params))

RT_API cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                                    const struct cudaKernelNodeParams *p)
{
    ENTER();
    CUDA_KERNEL_NODE_PARAMS_v2 d;
    cudaError_t e = to_driver(p, &d);
    if (e)
        return rt_ret(e);
    return rt_cu(RT_CALL(cuGraphExecKernelNodeSetParams, ((CUgraphExec)x, (CUgraphNode)node, &d)));
}

static cudaError_t cudaGraphLaunch_impl(cudaGraphExec_t x, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphLaunch, ((CUgraphExec)x, (CUstream)s)));
}
static cudaError_t cudaGraphLaunch_impl_pt(cudaGraphExec_t x, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphLaunch_pt, ((CUgraphExec)x, (CUstream)s)));
}
PT_PAIR(cudaGraphLaunch, cudaGraphLaunch_ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream),
        (graphExec, stream))

static cudaError_t cudaGraphUpload_impl(cudaGraphExec_t x, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphUpload, ((CUgraphExec)x, (CUstream)s)));
}
static cudaError_t cudaGraphUpload_impl_pt(cudaGraphExec_t x, cudaStream_t s)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphUpload_pt, ((CUgraphExec)x, (CUstream)s)));
}
PT_PAIR(cudaGraphUpload, cudaGraphUpload_ptsz, (cudaGraphExec_t graphExec, cudaStream_t stream),
        (graphExec, stream))

RT_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g,
                                       cudaGraphExecUpdateResultInfo *info)
{
    ENTER();
    /* The result info is the driver's, field for field. */
    return rt_cu(RT_CALL(cuGraphExecUpdate,
                         ((CUgraphExec)x, (CUgraph)g, (CUgraphExecUpdateResultInfo *)info)));
}

RT_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphExecDestroy, ((CUgraphExec)x)));
}
