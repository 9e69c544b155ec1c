/* simcudart: the cuda* calls graph programs make, each a thin translation to
 * the driver call NVIDIA's runtime resolves for it. A *_ptsz / *_ptds export
 * is what a program compiled with --default-stream per-thread calls; it uses
 * the driver's per-thread variant, so stream 0 means the thread's stream. */
#include "rt.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define ENTER()                                                                \
    do {                                                                       \
        cudaError_t e_ = rt_enter();                                           \
        if (e_)                                                                \
            return e_;                                                         \
    } while (0)

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

/* The flags are the driver's (cudaMemAttachGlobal == CU_MEM_ATTACH_GLOBAL,
 * cudaMemAttachHost == CU_MEM_ATTACH_HOST); size 0 is cudaErrorInvalidValue,
 * as documented (unlike cudaMalloc). */
RT_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    ENTER();
    if (!devPtr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return rt_ret(cudaErrorInvalidValue);
    CUdeviceptr p;
    CUresult r = RT_CALL(cuMemAllocManaged, (&p, size, flags));
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? rt_ret(cudaErrorMemoryAllocation) : rt_cu(r);
}

static cudaError_t malloc_async_any(void **devPtr, size_t size, cudaStream_t s, bool pt)
{
    ENTER();
    if (!devPtr)
        return rt_ret(cudaErrorInvalidValue);
    CUdeviceptr p;
    CUresult r = PICK(pt, cuMemAllocAsync, (&p, size, (CUstream)s));
    if (r == CUDA_SUCCESS)
        *devPtr = (void *)(uintptr_t)p;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? rt_ret(cudaErrorMemoryAllocation) : rt_cu(r);
}

RT_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async_any(devPtr, size, hStream, false);
}

RT_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async_any(devPtr, size, hStream, true);
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

/* The flags change nothing on simcuda (assumption above), but are checked as
 * the runtime documents them. */
RT_API cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    if (flags & ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped |
                            cudaHostAllocWriteCombined))
        return rt_ret(cudaErrorInvalidValue);
    return cudaMallocHost(ptr, size);
}

RT_API cudaError_t cudaFreeHost(void *ptr)
{
    free(ptr);
    return cudaSuccess;
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

RT_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return memcpy_impl_any(dst, src, count, kind, false);
}

RT_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind)
{
    return memcpy_impl_any(dst, src, count, kind, true);
}

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

RT_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_async_any(dst, src, count, kind, stream, false);
}

RT_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_async_any(dst, src, count, kind, stream, true);
}

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

/* cudaErrorNotReady is not sticky: it is an answer, not a failure. */
static cudaError_t query(CUresult r)
{
    return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : rt_cu(r);
}

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

/* ---- profiler ---------------------------------------------------------------------------- */

/* No profiling tool is ever attached to simcuda, so there is no collection
 * to enable or disable: cudaSuccess, the only return cuda_profiler_api.h
 * documents (after the runtime's initialization, like any call). */
RT_API cudaError_t cudaProfilerStart(void)
{
    ENTER();
    return cudaSuccess;
}

RT_API cudaError_t cudaProfilerStop(void)
{
    ENTER();
    return cudaSuccess;
}

/* ---- graphs ------------------------------------------------------------------------------ */

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

/* Enters, then converts the program's kernel node parameters p into the
 * driver's CUDA_KERNEL_NODE_PARAMS_v2 d, or returns why they are wrong. */
#define ENTER_KERNEL_PARAMS(p, d)                                              \
    ENTER();                                                                   \
    CUDA_KERNEL_NODE_PARAMS_v2 d;                                              \
    do {                                                                       \
        cudaError_t e_ = to_driver(p, &d);                                     \
        if (e_)                                                                \
            return rt_ret(e_);                                                 \
    } while (0)

RT_API cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *node, cudaGraph_t g,
                                          const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaKernelNodeParams *p)
{
    ENTER_KERNEL_PARAMS(p, d);
    return rt_cu(RT_CALL(cuGraphAddKernelNode, ((CUgraphNode *)node, (CUgraph)g,
                                                (const CUgraphNode *)deps, ndeps, &d)));
}

static CUcontext current_ctx(void)
{
    CUcontext c = NULL;
    (void)RT_CALL(cuCtxGetCurrent, (&c));
    return c;
}

/* Conditional handles belong to the current context. */
RT_API cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out,
                                                    cudaGraph_t graph,
                                                    unsigned int defaultLaunchValue,
                                                    unsigned int flags)
{
    ENTER();
    return rt_cu(RT_CALL(cuGraphConditionalHandleCreate,
                         ((CUgraphConditionalHandle *)pHandle_out, (CUgraph)graph, current_ctx(),
                          defaultLaunchValue, flags)));
}

/* Empty, kernel, memory allocation and free, and conditional nodes (the
 * allocation's address and the conditional's bodies written back, as the
 * runtime does); other types are not modelled here. */
RT_API cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                    const cudaGraphNode_t *pDependencies,
                                    const cudaGraphEdgeData *dependencyData,
                                    size_t numDependencies, struct cudaGraphNodeParams *nodeParams)
{
    ENTER();
    if (!nodeParams)
        return rt_ret(cudaErrorInvalidValue);
    CUgraphNodeParams d;
    memset(&d, 0, sizeof d);
    switch (nodeParams->type) {
    case cudaGraphNodeTypeEmpty:
        d.type = CU_GRAPH_NODE_TYPE_EMPTY;
        break;
    case cudaGraphNodeTypeConditional:
        d.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        d.conditional.handle = nodeParams->conditional.handle;
        d.conditional.type = (CUgraphConditionalNodeType)nodeParams->conditional.type;
        d.conditional.size = nodeParams->conditional.size;
        d.conditional.ctx = current_ctx();
        break;
    case cudaGraphNodeTypeKernel: {
        /* V2's leading fields are cudaKernelNodeParams' */
        const struct cudaKernelNodeParamsV2 *k = &nodeParams->kernel;
        struct cudaKernelNodeParams v1 = {k->func,           k->gridDim,      k->blockDim,
                                          k->sharedMemBytes, k->kernelParams, k->extra};
        CUDA_KERNEL_NODE_PARAMS_v2 kd;
        cudaError_t ke = to_driver(&v1, &kd);
        if (ke)
            return rt_ret(ke);
        d.type = CU_GRAPH_NODE_TYPE_KERNEL;
        d.kernel.func = kd.func;
        d.kernel.gridDimX = kd.gridDimX;
        d.kernel.gridDimY = kd.gridDimY;
        d.kernel.gridDimZ = kd.gridDimZ;
        d.kernel.blockDimX = kd.blockDimX;
        d.kernel.blockDimY = kd.blockDimY;
        d.kernel.blockDimZ = kd.blockDimZ;
        d.kernel.sharedMemBytes = kd.sharedMemBytes;
        d.kernel.kernelParams = kd.kernelParams;
        d.kernel.extra = kd.extra;
        break;
    }
    case cudaGraphNodeTypeMemAlloc:
        d.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        memcpy(&d.alloc, &nodeParams->alloc, sizeof d.alloc); /* the same layout */
        break;
    case cudaGraphNodeTypeMemFree:
        d.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
        d.free.dptr = dp(nodeParams->free.dptr);
        break;
    default:
        return rt_ret(cudaErrorNotSupported);
    }
    cudaError_t e = rt_cu(RT_CALL(cuGraphAddNode,
                                  ((CUgraphNode *)pGraphNode, (CUgraph)graph,
                                   (const CUgraphNode *)pDependencies,
                                   (const CUgraphEdgeData *)dependencyData, numDependencies, &d)));
    if (e == cudaSuccess && d.type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
        nodeParams->conditional.phGraph_out = (cudaGraph_t *)d.conditional.phGraph_out;
    if (e == cudaSuccess && d.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        nodeParams->alloc.dptr = (void *)(uintptr_t)d.alloc.dptr;
    return e;
}

RT_API cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *node, cudaGraph_t g,
                                          const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaMemsetParams *p)
{
    ENTER();
    if (!p)
        return rt_ret(cudaErrorInvalidValue);
    CUDA_MEMSET_NODE_PARAMS d = {
        .dst = dp(p->dst), .pitch = p->pitch, .value = p->value,
        .elementSize = p->elementSize, .width = p->width, .height = p->height,
    };
    return rt_cu(RT_CALL(cuGraphAddMemsetNode, ((CUgraphNode *)node, (CUgraph)g,
                                                (const CUgraphNode *)deps, ndeps, &d,
                                                current_ctx())));
}

/* One side of a copy: where the runtime's kind says the memory is (Default:
 * wherever it is, which unified addressing lets the driver tell). */
static void copy_side(enum cudaMemcpyKind kind, bool src, const void *p, CUmemorytype *type,
                      const void **host, CUdeviceptr *dev)
{
    bool on_host = src ? kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost
                       : kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
    if (kind == cudaMemcpyDefault) {
        *type = CU_MEMORYTYPE_UNIFIED;
        *dev = dp(p);
    } else if (on_host) {
        *type = CU_MEMORYTYPE_HOST;
        *host = p;
    } else {
        *type = CU_MEMORYTYPE_DEVICE;
        *dev = dp(p);
    }
}

/* Copies between pitched pointers; arrays are not modelled (simcudart has no
 * cudaMallocArray), so a copy naming one is not supported. */
RT_API cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *node, cudaGraph_t g,
                                          const cudaGraphNode_t *deps, size_t ndeps,
                                          const struct cudaMemcpy3DParms *p)
{
    ENTER();
    if (!p || (unsigned)p->kind > (unsigned)cudaMemcpyDefault)
        return rt_ret(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray)
        return rt_ret(cudaErrorNotSupported);
    CUDA_MEMCPY3D d = {
        .srcXInBytes = p->srcPos.x, .srcY = p->srcPos.y, .srcZ = p->srcPos.z,
        .srcPitch = p->srcPtr.pitch, .srcHeight = p->srcPtr.ysize,
        .dstXInBytes = p->dstPos.x, .dstY = p->dstPos.y, .dstZ = p->dstPos.z,
        .dstPitch = p->dstPtr.pitch, .dstHeight = p->dstPtr.ysize,
        .WidthInBytes = p->extent.width, .Height = p->extent.height, .Depth = p->extent.depth,
    };
    const void *src_host = NULL, *dst_host = NULL;
    copy_side(p->kind, true, p->srcPtr.ptr, &d.srcMemoryType, &src_host, &d.srcDevice);
    copy_side(p->kind, false, p->dstPtr.ptr, &d.dstMemoryType, &dst_host, &d.dstDevice);
    d.srcHost = src_host;
    d.dstHost = (void *)(uintptr_t)dst_host;
    return rt_cu(RT_CALL(cuGraphAddMemcpyNode, ((CUgraphNode *)node, (CUgraph)g,
                                                (const CUgraphNode *)deps, ndeps, &d,
                                                current_ctx())));
}

RT_API cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *node, cudaGraph_t g,
                                            const cudaGraphNode_t *deps, size_t ndeps, void *dst,
                                            const void *src, size_t count,
                                            enum cudaMemcpyKind kind)
{
    struct cudaMemcpy3DParms p = {
        .srcPtr = {(void *)(uintptr_t)src, count, count, 1},
        .dstPtr = {dst, count, count, 1},
        .extent = {count, 1, 1},
        .kind = kind,
    };
    return cudaGraphAddMemcpyNode(node, g, deps, ndeps, &p);
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
    ENTER_KERNEL_PARAMS(p, d);
    return rt_cu(RT_CALL(cuGraphKernelNodeSetParams, ((CUgraphNode)node, &d)));
}

RT_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
                                                 unsigned long long flags)
{
    return cudaGraphInstantiate(x, g, flags);
}

RT_API cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t x, cudaGraphNode_t node,
                                                    const struct cudaKernelNodeParams *p)
{
    ENTER_KERNEL_PARAMS(p, d);
    return rt_cu(RT_CALL(cuGraphExecKernelNodeSetParams, ((CUgraphExec)x, (CUgraphNode)node, &d)));
}

/* ---- the calls that are one driver call (rt_calls.def) ---------------------------------- */

/* cudaGraphAddMemAllocNode hands its parameters to the driver as they are. */
_Static_assert(sizeof(struct cudaMemAllocNodeParams) == sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) &&
                   offsetof(struct cudaMemAllocNodeParams, dptr) ==
                       offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, dptr) &&
                   sizeof(struct cudaMemPoolProps) == sizeof(CUmemPoolProps) &&
                   (int)cudaGraphMemAttrReservedMemHigh == (int)CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH,
               "the runtime's graph memory types are the driver's");
_Static_assert(sizeof(struct cudaMemAllocNodeParamsV2) == sizeof(CUDA_MEM_ALLOC_NODE_PARAMS_v2) &&
                   offsetof(struct cudaMemAllocNodeParamsV2, dptr) ==
                       offsetof(CUDA_MEM_ALLOC_NODE_PARAMS_v2, dptr),
               "cudaGraphAddNode copies the allocation's parameters as they are");

#define RT_1(name, params, answer, driver, args)                                \
    RT_API cudaError_t name params                                              \
    {                                                                           \
        ENTER();                                                                \
        return answer(RT_CALL(driver, args));                                   \
    }
#define RT_2(name, ptname, params, answer, driver, args)                        \
    RT_1(name, params, answer, driver, args)                                    \
    RT_1(ptname, params, answer, driver##_pt, args)
#include "rt_calls.def"
#undef RT_1
#undef RT_2
