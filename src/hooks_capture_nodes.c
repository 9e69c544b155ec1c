/* hooks_capture_nodes: the hooks that feed the graph recorder (graph_rec.h)
 * with the nodes that are not kernels: async memsets (D8, D16, D32, 2-D),
 * async copies (1-D, unified addressing included) and host functions into
 * a capturing stream, and host nodes added or set in a graph. Each forwards
 * first, returns the driver's answer unchanged, and records only what the
 * driver accepted. Outside a capture a hook costs one relaxed load.
 *
 * What is recorded is the call's own parameters, in a fixed form per kind
 * of call: two captures (or additions) with equal parameters make equal
 * nodes, so equal records mean equal graphs. Which form the driver's getter
 * would return does not matter: records are compared with records only (a
 * graph read through the getters keeps these nodes unmodelled).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "driver.h"
#include "graph_rec.h"
#include "hook.h"

/* ---- async memsets and copies into a capture --------------------------- */

/* The context is the stream's, asked only while capturing. */
static void capture_plain(CUstream s, bool ptsz, CUresult r, CUgraphNodeType type,
                          const void *p, size_t bytes)
{
    CUcontext ctx = NULL;
    if ((ptsz ? vr_real.cuStreamGetCtx_ptsz(s, &ctx) : vr_real.cuStreamGetCtx(s, &ctx)) !=
        CUDA_SUCCESS)
        ctx = NULL;
    vr_grec_capture_plain(s, ptsz, r, type, p, bytes, ctx);
}

/* A memset node: `height` rows of `width` elements of `elem` bytes, `pitch`
 * apart (0 for the one-row calls); the value's meaningful bytes only, every
 * other byte zero. */
static void capture_memset(CUstream s, bool ptsz, CUresult r, CUdeviceptr dst, size_t pitch,
                           unsigned value, unsigned elem, size_t width, size_t height)
{
    CUDA_MEMSET_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.dst = dst;
    p.pitch = pitch;
    p.value = elem == 1 ? value & 0xffu : elem == 2 ? value & 0xffffu : value;
    p.elementSize = elem;
    p.width = width;
    p.height = height;
    capture_plain(s, ptsz, r, CU_GRAPH_NODE_TYPE_MEMSET, &p, sizeof p);
}

/* A zero-byte call adds no node (docs/design.md, "Zero-byte memsets and
 * copies"): recorded only when it failed (the capture's record is then
 * unknown, as for any failed call into a capture). */
#define MEMSET_BODY(real, ptsz, elem)                                                       \
    CUresult r = vr_real.real(dst, value, n, s);                                            \
    if (vr_grec_capturing() && (n || r != CUDA_SUCCESS))                                    \
        capture_memset(s, ptsz, r, dst, 0, value, elem, n, 1);                              \
    return r;

CUresult vr_on_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s)
{
    MEMSET_BODY(cuMemsetD8Async, false, 1)
}

CUresult vr_on_cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char value, size_t n, CUstream s)
{
    MEMSET_BODY(cuMemsetD8Async_ptsz, true, 1)
}

CUresult vr_on_cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n, CUstream s)
{
    MEMSET_BODY(cuMemsetD16Async, false, 2)
}

CUresult vr_on_cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short value, size_t n, CUstream s)
{
    MEMSET_BODY(cuMemsetD16Async_ptsz, true, 2)
}

CUresult vr_on_cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t n, CUstream s)
{
    MEMSET_BODY(cuMemsetD32Async, false, 4)
}

CUresult vr_on_cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned value, size_t n, CUstream s)
{
    MEMSET_BODY(cuMemsetD32Async_ptsz, true, 4)
}

#define MEMSET2D_BODY(real, ptsz, elem)                                                     \
    CUresult r = vr_real.real(dst, pitch, value, w, h, s);                                  \
    if (vr_grec_capturing() && ((w && h) || r != CUDA_SUCCESS))                             \
        capture_memset(s, ptsz, r, dst, pitch, value, elem, w, h);                          \
    return r;

CUresult vr_on_cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char value, size_t w,
                                 size_t h, CUstream s)
{
    MEMSET2D_BODY(cuMemsetD2D8Async, false, 1)
}

CUresult vr_on_cuMemsetD2D8Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned char value,
                                      size_t w, size_t h, CUstream s)
{
    MEMSET2D_BODY(cuMemsetD2D8Async_ptsz, true, 1)
}

CUresult vr_on_cuMemsetD2D16Async(CUdeviceptr dst, size_t pitch, unsigned short value, size_t w,
                                  size_t h, CUstream s)
{
    MEMSET2D_BODY(cuMemsetD2D16Async, false, 2)
}

CUresult vr_on_cuMemsetD2D16Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned short value,
                                       size_t w, size_t h, CUstream s)
{
    MEMSET2D_BODY(cuMemsetD2D16Async_ptsz, true, 2)
}

CUresult vr_on_cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned value, size_t w,
                                  size_t h, CUstream s)
{
    MEMSET2D_BODY(cuMemsetD2D32Async, false, 4)
}

CUresult vr_on_cuMemsetD2D32Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned value, size_t w,
                                       size_t h, CUstream s)
{
    MEMSET2D_BODY(cuMemsetD2D32Async_ptsz, true, 4)
}

/* A one-dimensional copy node. `type`s: host, device, or (cuMemcpyAsync)
 * unified: the call's own statement that the driver tells each side from
 * the pointer. Equal parameters make equal copies. Assumption: a pointer
 * keeps its kind of memory between the captures compared (an address that
 * was host memory at one capture and device memory at the next would make
 * nodes that differ while their records are equal). */
static void capture_copy(CUstream s, bool ptsz, CUresult r, CUmemorytype dst_type, uintptr_t dst,
                         CUmemorytype src_type, uintptr_t src, size_t n)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = src_type;
    p.dstMemoryType = dst_type;
    if (src_type == CU_MEMORYTYPE_HOST)
        p.srcHost = (const void *)src;
    else
        p.srcDevice = (CUdeviceptr)src;
    if (dst_type == CU_MEMORYTYPE_HOST)
        p.dstHost = (void *)dst;
    else
        p.dstDevice = (CUdeviceptr)dst;
    p.WidthInBytes = n;
    p.Height = 1;
    p.Depth = 1;
    capture_plain(s, ptsz, r, CU_GRAPH_NODE_TYPE_MEMCPY, &p, sizeof p);
}

#define COPY_BODY(real, ptsz, dst_type, src_type)                                           \
    CUresult r = vr_real.real(dst, src, n, s);                                              \
    if (vr_grec_capturing() && (n || r != CUDA_SUCCESS))                                    \
        capture_copy(s, ptsz, r, dst_type, (uintptr_t)dst, src_type, (uintptr_t)src, n);    \
    return r;

CUresult vr_on_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyAsync, false, CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED)
}

CUresult vr_on_cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyAsync_ptsz, true, CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED)
}

CUresult vr_on_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyHtoDAsync_v2, false, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST)
}

CUresult vr_on_cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyHtoDAsync_v2_ptsz, true, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST)
}

CUresult vr_on_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyDtoHAsync_v2, false, CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE)
}

CUresult vr_on_cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyDtoHAsync_v2_ptsz, true, CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_DEVICE)
}

CUresult vr_on_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyDtoDAsync_v2, false, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE)
}

CUresult vr_on_cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY_BODY(cuMemcpyDtoDAsync_v2_ptsz, true, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE)
}

/* ---- host functions and host nodes -------------------------------------- */

/* A host node: fn and userData, nothing else (no context). */
static CUDA_HOST_NODE_PARAMS host_params(CUhostFn fn, void *arg)
{
    CUDA_HOST_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.fn = fn;
    p.userData = arg;
    return p;
}

#define HOST_FUNC_BODY(real, ptsz)                                                          \
    CUresult r = vr_real.real(s, fn, arg);                                                  \
    if (vr_grec_capturing()) {                                                              \
        CUDA_HOST_NODE_PARAMS p = host_params(fn, arg);                                     \
        vr_grec_capture_plain(s, ptsz, r, CU_GRAPH_NODE_TYPE_HOST, &p, sizeof p, NULL);     \
    }                                                                                       \
    return r;

CUresult vr_on_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg)
{
    HOST_FUNC_BODY(cuLaunchHostFunc, false)
}

CUresult vr_on_cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *arg)
{
    HOST_FUNC_BODY(cuLaunchHostFunc_ptsz, true)
}

CUresult vr_on_cuGraphAddHostNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                  const CUDA_HOST_NODE_PARAMS *hp)
{
    CUresult r = vr_real.cuGraphAddHostNode(node, g, deps, n, hp);
    if (r == CUDA_SUCCESS && node && hp) {
        CUDA_HOST_NODE_PARAMS p = host_params(hp->fn, hp->userData);
        vr_grec_add_plain(g, *node, deps, n, CU_GRAPH_NODE_TYPE_HOST, &p, sizeof p, NULL);
    }
    return r;
}

/* Not modelled: the graph's record goes UNKNOWN (read through the getters
 * at the next update). */
CUresult vr_on_cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
    CUresult r = vr_real.cuGraphHostNodeSetParams(node, p);
    vr_grec_mark_unknown(NULL, node);
    return r;
}
