/*
 * simcuda's graph memory nodes (issue 32 item 4), each expectation taken
 * from cuda.h or the programming guide ("Graph Memory Nodes"): an
 * allocation node's address is fixed at its creation and its memory is
 * there from the node to its free node; the free rules; a relaunch with an
 * unfreed allocation fails unless the exec frees on launch; one exec per
 * graph; no clone; stream capture of cuMemAllocAsync / cuMemFreeAsync; and
 * the footprint the graph memory attributes report, which a launch raises,
 * an exec's destruction lowers (used) and cuDeviceGraphMemTrim returns
 * (reserved), the pages really released.
 * Criterion runs each test in a fresh process: the footprint starts at 0.
 */
#include <criterion/criterion.h>

#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_ck.h"

static size_t g_gran;

static void start(void)
{
    CUdevice d;
    CUcontext c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    CK(cuMemGetAllocationGranularity(&g_gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(size_t bytes)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.poolProps.location.id = 0;
    a.bytesize = bytes;
    return a;
}

static cuuint64_t attr(CUgraphMem_attribute a)
{
    cuuint64_t v = 12345;
    CK(cuDeviceGetGraphMemAttribute(0, a, &v));
    return v;
}

static CUcontext cur_ctx(void)
{
    CUcontext c;
    CK(cuCtxGetCurrent(&c));
    return c;
}

/* alloc -> memset(value) -> copy to host -> [free]: the graph most tests use. */
static CUdeviceptr build(CUgraph g, size_t bytes, unsigned value, void *host, bool with_free,
                         CUgraphNode *alloc_out)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(bytes);
    CUgraphNode na, ns, nc, nf;
    CK(cuGraphAddMemAllocNode(&na, g, NULL, 0, &a));
    cr_assert_neq(a.dptr, 0, "the allocation's address comes back in nodeParams.dptr");
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = a.dptr;
    m.value = value;
    m.elementSize = 4;
    m.width = bytes / 4;
    m.height = 1;
    CK(cuGraphAddMemsetNode(&ns, g, &na, 1, &m, cur_ctx()));
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = a.dptr;
    cp.dstMemoryType = CU_MEMORYTYPE_HOST;
    cp.dstHost = host;
    cp.WidthInBytes = bytes;
    cp.Height = 1;
    cp.Depth = 1;
    CK(cuGraphAddMemcpyNode(&nc, g, &ns, 1, &cp, cur_ctx()));
    if (with_free)
        CK(cuGraphAddMemFreeNode(&nf, g, &nc, 1, a.dptr));
    if (alloc_out)
        *alloc_out = na;
    return a.dptr;
}

static void check_words(const uint32_t *v, size_t n, uint32_t want)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(v[i], want, "word %zu: %#x, want %#x", i, v[i], want);
}

Test(simcuda_graph_mem, alloc_node_address_fixed_and_memory_there_until_free, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    uint32_t host[256];
    CUgraphNode na;
    CUdeviceptr d = build(g, sizeof host, 0x5a5a5a5au, host, true, &na);
    CUDA_MEM_ALLOC_NODE_PARAMS got;
    memset(&got, 0, sizeof got);
    CK(cuGraphMemAllocNodeGetParams(na, &got));
    cr_assert_eq(got.dptr, d);
    cr_assert_eq(got.bytesize, sizeof host);
    cr_assert_eq(got.poolProps.allocType, CU_MEM_ALLOCATION_TYPE_PINNED);
    cr_assert_eq(got.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    cr_assert_eq(got.accessDescCount, 0);
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(na, &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int i = 0; i < 3; i++) {
        memset(host, 0, sizeof host);
        CK(cuGraphLaunch(x, NULL));
        CK(cuCtxSynchronize());
        check_words(host, 256, 0x5a5a5a5au);
    }
    CK(cuGraphMemAllocNodeGetParams(na, &got));
    cr_assert_eq(got.dptr, d, "the address stays fixed across launches");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphMemAllocNodeGetParams(na, &got));
    cr_assert_eq(got.dptr, d, "and across instantiations");
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

Test(simcuda_graph_mem, bad_alloc_and_free_nodes, .init = start)
{
    CUgraph g, g2;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphCreate(&g2, 0));
    CUgraphNode n = NULL, nf;
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(0);
    CKE(cuGraphAddMemAllocNode(&n, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
    a = alloc_params(4096);
    a.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; /* IPC is not supported */
    CKE(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
    a = alloc_params(4096);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
    CKE(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(n, "nothing written on failure");
    /* an address not returned by an allocation node, an invalid one */
    CUdeviceptr plain;
    CK(cuMemAlloc_v2(&plain, 4096));
    CKE(cuGraphAddMemFreeNode(&nf, g, NULL, 0, plain), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphAddMemFreeNode(&nf, g, NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    a = alloc_params(4096);
    CK(cuGraphAddMemAllocNode(&n, g, NULL, 0, &a));
    CKE(cuGraphAddMemFreeNode(&nf, g, NULL, 0, a.dptr + 16), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphAddMemFreeNode(&nf, g, &n, 1, a.dptr));
    CUdeviceptr back = 0;
    CK(cuGraphMemFreeNodeGetParams(nf, &back));
    cr_assert_eq(back, a.dptr);
    CKE(cuGraphMemFreeNodeGetParams(n, &back), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphMemAllocNodeGetParams(nf, &a), CUDA_ERROR_INVALID_VALUE);
    /* twice in the same graph; freed in the owning graph, then in another */
    CKE(cuGraphAddMemFreeNode(&nf, g, &nf, 1, a.dptr), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphAddMemFreeNode(&nf, g2, NULL, 0, a.dptr), CUDA_ERROR_INVALID_VALUE);
    /* freed in another graph: no free node in the owning graph any more */
    CUDA_MEM_ALLOC_NODE_PARAMS b = alloc_params(4096);
    CUgraphNode nb;
    CK(cuGraphAddMemAllocNode(&nb, g, NULL, 0, &b));
    CK(cuGraphAddMemFreeNode(&nf, g2, NULL, 0, b.dptr));
    CKE(cuGraphAddMemFreeNode(&nf, g, &nb, 1, b.dptr), CUDA_ERROR_INVALID_VALUE);
    /* cuda.h: cloning is not supported for graphs with memory nodes */
    CUgraph c = NULL;
    cr_assert_neq(cuGraphClone(&c, g), CUDA_SUCCESS);
    cr_assert_neq(cuGraphClone(&c, g2), CUDA_SUCCESS);
    cr_assert_null(c);
    CK(cuMemFree_v2(plain));
}

Test(simcuda_graph_mem, relaunch_with_unfreed_allocation_fails, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    uint32_t host[64];
    CUdeviceptr d = build(g, sizeof host, 7, host, false, NULL);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CKE(cuGraphLaunch(x, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxSynchronize());
    check_words(host, 64, 7);
    /* not freed in the graph: stream work after the launch may use it */
    uint32_t again[64];
    CK(cuMemcpyDtoH_v2(again, d, sizeof again));
    check_words(again, 64, 7);
    /* freed in the graph's allocation only: cuMemFreeAsync frees it */
    CK(cuMemFreeAsync(d, NULL));
    CKE(cuMemFreeAsync(d, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    CK(cuMemFree_v2(d));
    CKE(cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
    /* a free node of another graph frees it too */
    CUgraph gf;
    CUgraphNode nf;
    CK(cuGraphCreate(&gf, 0));
    CK(cuGraphAddMemFreeNode(&nf, gf, NULL, 0, d));
    CUgraphExec xf;
    CK(cuGraphInstantiateWithFlags(&xf, gf, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuGraphLaunch(xf, NULL));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    check_words(host, 64, 7);
    CK(cuGraphExecDestroy(xf));
    CK(cuGraphExecDestroy(x));
}

Test(simcuda_graph_mem, auto_free_on_launch, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    uint32_t host[64];
    build(g, sizeof host, 9, host, false, NULL);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    for (int i = 0; i < 4; i++)
        CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    check_words(host, 64, 9);
    CK(cuGraphExecDestroy(x));
}

Test(simcuda_graph_mem, one_exec_per_graph, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    uint32_t host[16];
    build(g, sizeof host, 1, host, true, NULL);
    CUgraphExec x, y = NULL;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    cr_assert_neq(cuGraphInstantiateWithFlags(&y, g, 0), CUDA_SUCCESS);
    cr_assert_null(y);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphInstantiateWithFlags(&y, g, 0));
    CK(cuGraphLaunch(y, NULL));
    CK(cuCtxSynchronize());
    check_words(host, 16, 1);
    CK(cuGraphExecDestroy(y));
}

/* Resident pages in [p, p + n). */
static size_t resident(CUdeviceptr p, size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), np = (n + pg - 1) / pg, r = 0;
    unsigned char vec[1024];
    cr_assert(np <= sizeof vec);
    cr_assert_eq(mincore((void *)(uintptr_t)p, n, vec), 0);
    for (size_t i = 0; i < np; i++)
        r += vec[i] & 1;
    return r;
}

Test(simcuda_graph_mem, footprint_moves_with_launch_destroy_and_trim, .init = start)
{
    size_t n = g_gran; /* a whole granule: what the attributes count is exact */
    cr_assert(n % 4 == 0 && n <= (size_t)4 << 20);
    uint32_t *host = malloc(n);
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUdeviceptr d = build(g, n, 3, host, true, NULL);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0, "no memory before a launch");
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    check_words(host, n / 4, 3);
    /* the guide: graphs keep their physical memory mapped across launches */
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), n);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), n);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), n);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), n);
    cr_assert_gt(resident(d, n), 0, "the memset touched real pages");
    /* trim: an idle exec whose allocation is freed gives its memory back,
     * and its next launch maps memory again */
    CK(cuDeviceGraphMemTrim(0));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_assert_eq(resident(d, n), 0, "the pages went back to the system");
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), n, "a watermark stays");
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    check_words(host, n / 4, 3);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), n);
    /* the exec's destruction unmaps its memory: no longer used, still
     * reserved by the graph pool until trimmed */
    CK(cuGraphExecDestroy(x));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), n);
    CK(cuGraphDestroy(g));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), n,
                 "destroying the graph returns no memory either");
    CK(cuDeviceGraphMemTrim(0));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    /* high watermarks reset to zero only */
    cuuint64_t zero = 0, one = 1;
    CKE(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &one),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
        CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 0);
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 0);
    cuuint64_t v;
    CKE(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, NULL),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceGetGraphMemAttribute(99, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v),
        CUDA_ERROR_INVALID_DEVICE);
    CKE(cuDeviceGraphMemTrim(99), CUDA_ERROR_INVALID_DEVICE);
    free(host);
}

Test(simcuda_graph_mem, trim_keeps_unfreed_allocations, .init = start)
{
    size_t n = g_gran;
    uint32_t *host = malloc(n);
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUdeviceptr d = build(g, n, 4, host, false, NULL);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    CK(cuDeviceGraphMemTrim(0));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), n, "an unfreed allocation is in use");
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), n);
    CK(cuMemcpyDtoH_v2(host, d, n));
    check_words(host, n / 4, 4);
    /* it outlives its exec and graph until freed */
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), n);
    CK(cuMemcpyDtoH_v2(host, d, n));
    check_words(host, n / 4, 4);
    CK(cuMemFreeAsync(d, NULL));
    CK(cuCtxSynchronize());
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    CK(cuDeviceGraphMemTrim(0));
    cr_assert_eq(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    free(host);
}

Test(simcuda_graph_mem, captured_alloc_and_free_async_become_nodes, .init = start)
{
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint32_t host[128];
    CUdeviceptr plain;
    CK(cuMemAlloc_v2(&plain, 64));
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr d = 0;
    CK(cuMemAllocAsync(&d, sizeof host, s));
    cr_assert_neq(d, 0);
    CK(cuMemsetD32Async(d, 0xabcd0123u, 128, s));
    CK(cuMemcpyDtoHAsync_v2(host, d, sizeof host, s));
    /* cuda.h: during capture it must be passed a graph allocation */
    CKE(cuMemFreeAsync(plain, s), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeAsync(d, s));
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    size_t nn = 0;
    CK(cuGraphGetNodes(g, NULL, &nn));
    cr_assert_eq(nn, 4);
    CUgraphNode nodes[4];
    CK(cuGraphGetNodes(g, nodes, &nn));
    int allocs = 0, frees = 0;
    for (size_t i = 0; i < nn; i++) {
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(nodes[i], &t));
        if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            CUDA_MEM_ALLOC_NODE_PARAMS p;
            CK(cuGraphMemAllocNodeGetParams(nodes[i], &p));
            cr_assert_eq(p.dptr, d);
            cr_assert_eq(p.bytesize, sizeof host);
            allocs++;
        }
        if (t == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            CUdeviceptr f;
            CK(cuGraphMemFreeNodeGetParams(nodes[i], &f));
            cr_assert_eq(f, d);
            frees++;
        }
    }
    cr_assert_eq(allocs, 1);
    cr_assert_eq(frees, 1);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int i = 0; i < 2; i++) {
        memset(host, 0, sizeof host);
        CK(cuGraphLaunch(x, s));
        CK(cuStreamSynchronize(s));
        check_words(host, 128, 0xabcd0123u);
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(plain));
    CK(cuStreamDestroy_v2(s));
}

/* Assumption (docs/design.md): an exec updates from a graph whose memory
 * nodes are its own (the same addresses); another graph's allocation
 * nodes have other addresses, a parameter change the exec cannot take. */
Test(simcuda_graph_mem, exec_update_keeps_the_allocations, .init = start)
{
    CUgraph g, g2;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphCreate(&g2, 0));
    uint32_t host[32], host2[32];
    build(g, sizeof host, 5, host, true, NULL);
    build(g2, sizeof host2, 6, host2, true, NULL);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate_v2(x, g, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CKE(cuGraphExecUpdate_v2(x, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    check_words(host, 32, 5);
    CK(cuGraphExecDestroy(x));
}

/* ---- cuGraphAddNode: the generic entry point (cuda.h: "Adds a node of
 * arbitrary type"; nodeParams->alloc.dptr is an out parameter) ---- */

static CUgraphNodeParams node_params(CUgraphNodeType type)
{
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p); /* "All unused bytes ... must be set to zero" */
    p.type = type;
    return p;
}

static void host_fn(void *user)
{
    ++*(int *)user;
}

/* alloc -> memset -> memcpy to host -> host fn -> event record -> event
 * wait -> empty -> free, every node through cuGraphAddNode_v2. */
Test(simcuda_graph_mem, add_node_makes_every_node_type, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    uint32_t host[64];
    CUgraphNode n[8];
    CUgraphNodeParams p = node_params(CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    p.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.alloc.bytesize = sizeof host;
    CK(cuGraphAddNode_v2(&n[0], g, NULL, NULL, 0, &p));
    CUdeviceptr d = p.alloc.dptr;
    cr_assert_neq(d, 0, "the allocation's address comes back in nodeParams->alloc.dptr");
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(n[0], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    CUDA_MEM_ALLOC_NODE_PARAMS got;
    CK(cuGraphMemAllocNodeGetParams(n[0], &got));
    cr_assert_eq(got.dptr, d);
    cr_assert_eq(got.bytesize, sizeof host);

    p = node_params(CU_GRAPH_NODE_TYPE_MEMSET);
    p.memset.dst = d;
    p.memset.value = 0x3c3c3c3cu;
    p.memset.elementSize = 4;
    p.memset.width = 64;
    p.memset.height = 1;
    p.memset.ctx = cur_ctx();
    CK(cuGraphAddNode_v2(&n[1], g, &n[0], NULL, 1, &p));

    p = node_params(CU_GRAPH_NODE_TYPE_MEMCPY);
    p.memcpy.copyCtx = cur_ctx();
    p.memcpy.copyParams.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.memcpy.copyParams.srcDevice = d;
    p.memcpy.copyParams.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.memcpy.copyParams.dstHost = host;
    p.memcpy.copyParams.WidthInBytes = sizeof host;
    p.memcpy.copyParams.Height = 1;
    p.memcpy.copyParams.Depth = 1;
    CK(cuGraphAddNode_v2(&n[2], g, &n[1], NULL, 1, &p));

    int calls = 0;
    p = node_params(CU_GRAPH_NODE_TYPE_HOST);
    p.host.fn = host_fn;
    p.host.userData = &calls;
    CK(cuGraphAddNode_v2(&n[3], g, &n[2], NULL, 1, &p));

    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    p = node_params(CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    p.eventRecord.event = ev;
    CK(cuGraphAddNode_v2(&n[4], g, &n[3], NULL, 1, &p));
    p = node_params(CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    p.eventWait.event = ev;
    CK(cuGraphAddNode_v2(&n[5], g, &n[4], NULL, 1, &p));
    p = node_params(CU_GRAPH_NODE_TYPE_EMPTY);
    CK(cuGraphAddNode_v2(&n[6], g, &n[5], NULL, 1, &p));

    p = node_params(CU_GRAPH_NODE_TYPE_MEM_FREE);
    p.free.dptr = d;
    CK(cuGraphAddNode(&n[7], g, &n[6], 1, &p)); /* 12.2's flavour */
    CK(cuGraphNodeGetType(n[7], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_MEM_FREE);
    CUdeviceptr freed = 0;
    CK(cuGraphMemFreeNodeGetParams(n[7], &freed));
    cr_assert_eq(freed, d);

    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int i = 0; i < 2; i++) { /* freed in the graph: relaunching is allowed */
        memset(host, 0, sizeof host);
        CK(cuGraphLaunch(x, NULL));
        CK(cuCtxSynchronize());
        check_words(host, 64, 0x3c3c3c3cu);
    }
    cr_assert_eq(calls, 2);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuEventDestroy_v2(ev));
}

/* The rules of cuGraphAddMemAllocNode / FreeNode hold through cuGraphAddNode. */
Test(simcuda_graph_mem, add_node_keeps_the_memory_node_rules, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode na, nf;
    CUgraphNodeParams p = node_params(CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    p.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.alloc.bytesize = 0;
    CKE(cuGraphAddNode_v2(&na, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(p.alloc.dptr, 0, "written only on success");
    p.alloc.bytesize = 4096;
    p.alloc.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CKE(cuGraphAddNode_v2(&na, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE); /* no IPC */
    p.alloc.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    CK(cuGraphAddNode_v2(&na, g, NULL, NULL, 0, &p));
    CUdeviceptr d = p.alloc.dptr;

    p = node_params(CU_GRAPH_NODE_TYPE_MEM_FREE);
    p.free.dptr = d + 4096 * 1024; /* no allocation node's address */
    CKE(cuGraphAddNode_v2(&nf, g, &na, NULL, 1, &p), CUDA_ERROR_INVALID_VALUE);
    p.free.dptr = d;
    CK(cuGraphAddNode_v2(&nf, g, &na, NULL, 1, &p));
    CKE(cuGraphAddNode_v2(&nf, g, &nf, NULL, 1, &p), CUDA_ERROR_INVALID_VALUE); /* twice */
    CK(cuGraphDestroy(g));
}

/* CUDA_CHILD_GRAPH_NODE_PARAMS: "The graph must not contain conditional
 * nodes"; CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE: "memory allocation/free
 * nodes can't be present in the child graph". simcuda models no child
 * graph node: the rest is CUDA_ERROR_NOT_SUPPORTED. */
Test(simcuda_graph_mem, add_node_child_graph_refusals, .init = start)
{
    CUgraph g, child, with_mem, with_cond;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphCreate(&child, 0));
    CK(cuGraphCreate(&with_mem, 0));
    CK(cuGraphCreate(&with_cond, 0));
    CUgraphNode nd;
    CUgraphNodeParams p = node_params(CU_GRAPH_NODE_TYPE_EMPTY);
    CK(cuGraphAddNode_v2(&nd, child, NULL, NULL, 0, &p));
    CUDA_MEM_ALLOC_NODE_PARAMS a = alloc_params(4096);
    CK(cuGraphAddMemAllocNode(&nd, with_mem, NULL, 0, &a));
    CUgraphConditionalHandle h;
    CK(cuGraphConditionalHandleCreate(&h, with_cond, cur_ctx(), 0, 0));
    p = node_params(CU_GRAPH_NODE_TYPE_CONDITIONAL);
    p.conditional.handle = h;
    p.conditional.type = CU_GRAPH_COND_TYPE_IF;
    p.conditional.size = 1;
    p.conditional.ctx = cur_ctx();
    CK(cuGraphAddNode_v2(&nd, with_cond, NULL, NULL, 0, &p));

    p = node_params(CU_GRAPH_NODE_TYPE_GRAPH);
    p.graph.graph = with_mem;
    p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.graph.graph = with_cond;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.graph.graph = child;
    p.graph.ownership = (CUgraphChildGraphNodeOwnership)7;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.graph.graph = NULL;
    p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.graph.graph = child;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_NOT_SUPPORTED);
    p.graph.graph = with_mem;
    p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CKE(cuGraphAddNode_v2(&nd, g, NULL, NULL, 0, &p), CUDA_ERROR_NOT_SUPPORTED);
    size_t count = 99;
    CK(cuGraphGetNodes(g, NULL, &count));
    cr_assert_eq(count, 0, "no refused call left a node behind");
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(child));
    CK(cuGraphDestroy(with_mem));
    CK(cuGraphDestroy(with_cond));
}

/* cuGraphAddNode: "All unused bytes - that is, reserved0 and all bytes past
 * the utilized union member - must be set to zero". */
Test(simcuda_graph_mem, add_node_wants_the_unused_bytes_zero, .init = start)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode na, n;
    CUgraphNodeParams p = node_params(CU_GRAPH_NODE_TYPE_EMPTY);
    p.reserved1[28] = 1;
    CKE(cuGraphAddNode_v2(&n, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p = node_params(CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    p.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.alloc.bytesize = 4096;
    CK(cuGraphAddNode_v2(&na, g, NULL, NULL, 0, &p));
    CUdeviceptr d = p.alloc.dptr;
    p = node_params(CU_GRAPH_NODE_TYPE_MEM_FREE);
    p.free.dptr = d;
    p.reserved1[1] = 1; /* just past free.dptr */
    CKE(cuGraphAddNode_v2(&n, g, &na, NULL, 1, &p), CUDA_ERROR_INVALID_VALUE);
    p.reserved1[1] = 0;
    CK(cuGraphAddNode_v2(&n, g, &na, NULL, 1, &p));
    size_t count = 0;
    CK(cuGraphGetNodes(g, NULL, &count));
    cr_assert_eq(count, 2, "the refused calls left no node");
    CK(cuGraphDestroy(g));
}
