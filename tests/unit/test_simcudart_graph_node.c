/*
 * simcudart's cudaGraphAddNode (issue 32 item 4): the runtime's tagged
 * union (cudaGraphNodeParams, driver_types.h) for kernel, memory
 * allocation and free nodes, handed to the driver's cuGraphAddNode. As the
 * runtime header says, "nodeParams may contain 'out parameters' ... such as
 * nodeParams->alloc.dptr". The kernel comes from a fatbin registered the
 * way nvcc's host stub does (__cudaRegisterFatBinary / Function), holding
 * PTX text.
 */
#include <criterion/criterion.h>

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#define RK(call)                                                               \
    do {                                                                       \
        cudaError_t rk_e_ = (call);                                            \
        cr_assert_eq(rk_e_, cudaSuccess, "%s -> %d", #call, (int)rk_e_);       \
    } while (0)

/* nvcc's registration entry points (crt/host_runtime.h, C++ only). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
                            const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bDim, dim3 *gDim, int *wSize);

/* put(p, v): *p = v */
static const char k_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry put(\n\t.param .u64 put_p,\n\t.param .u32 put_v\n)\n{\n"
    "\t.reg .b32 %r<2>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [put_p];\n\tld.param.u32 %r1, [put_v];\n"
    "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n";

/* fatbinary_section.h's wrapper around a fatbin container: a 16-byte
 * header, then one PTX entry with a 32-byte header (see rt_fatbin.c). */
static unsigned long long g_fatbin[(16 + 32 + sizeof k_ptx + 7) / 8 + 1];
static struct {
    int magic;
    int version;
    const unsigned long long *data;
    void *filename_or_fatbins;
} g_wrapper = {0x466243b1, 1, g_fatbin, NULL};
static const char g_put_stub = 0; /* the host function's address names the kernel */

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

static void put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

static void start(void)
{
    unsigned char *fb = (unsigned char *)g_fatbin;
    uint64_t psize = (sizeof k_ptx + 7) & ~(uint64_t)7;
    put32(fb, 0xBA55ED50u);
    fb[4] = 1;  /* version */
    fb[6] = 16; /* header size */
    put64(fb + 8, 32 + psize);
    unsigned char *e = fb + 16;
    e[0] = 1; /* PTX */
    e[2] = 1;
    put32(e + 4, 32);
    put64(e + 8, psize);
    put32(e + 28, 80); /* sm_80 */
    memcpy(e + 32, k_ptx, sizeof k_ptx);
    void **h = __cudaRegisterFatBinary(&g_wrapper);
    __cudaRegisterFunction(h, &g_put_stub, (char *)"put", "put", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaRegisterFatBinaryEnd(h);
    RK(cudaSetDevice(0));
}

static struct cudaGraphNodeParams params(enum cudaGraphNodeType type)
{
    struct cudaGraphNodeParams p;
    memset(&p, 0, sizeof p); /* unused bytes must be zero */
    p.type = type;
    return p;
}

/* alloc -> kernel put(alloc, v) -> copy to host -> free, three of them
 * through cudaGraphAddNode; relaunched, as a graph that frees its own
 * allocation may be. */
Test(simcudart_graph_node, kernel_alloc_and_free_nodes, .init = start)
{
    cudaGraph_t g;
    RK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t na, nk, nc, nf;
    struct cudaGraphNodeParams p = params(cudaGraphNodeTypeMemAlloc);
    p.alloc.poolProps.allocType = cudaMemAllocationTypePinned;
    p.alloc.poolProps.location.type = cudaMemLocationTypeDevice;
    p.alloc.poolProps.location.id = 0;
    p.alloc.bytesize = 256;
    RK(cudaGraphAddNode(&na, g, NULL, NULL, 0, &p));
    void *d = p.alloc.dptr;
    cr_assert_not_null(d, "the allocation's address comes back in alloc.dptr");
    enum cudaGraphNodeType t;
    RK(cudaGraphNodeGetType(na, &t));
    cr_assert_eq(t, cudaGraphNodeTypeMemAlloc);

    uint32_t v = 0x600dcafeu;
    void *args[] = {&d, &v};
    p = params(cudaGraphNodeTypeKernel);
    p.kernel.func = (void *)&g_put_stub;
    p.kernel.gridDim = (dim3){1, 1, 1};
    p.kernel.blockDim = (dim3){1, 1, 1};
    p.kernel.kernelParams = args;
    RK(cudaGraphAddNode(&nk, g, &na, NULL, 1, &p));
    RK(cudaGraphNodeGetType(nk, &t));
    cr_assert_eq(t, cudaGraphNodeTypeKernel);

    uint32_t host = 0;
    RK(cudaGraphAddMemcpyNode1D(&nc, g, &nk, 1, &host, d, sizeof host, cudaMemcpyDeviceToHost));
    p = params(cudaGraphNodeTypeMemFree);
    p.free.dptr = d;
    RK(cudaGraphAddNode(&nf, g, &nc, NULL, 1, &p));
    RK(cudaGraphNodeGetType(nf, &t));
    cr_assert_eq(t, cudaGraphNodeTypeMemFree);

    cudaGraphExec_t x;
    RK(cudaGraphInstantiate(&x, g, 0));
    for (int i = 0; i < 2; i++) {
        host = 0;
        RK(cudaGraphLaunch(x, 0));
        RK(cudaDeviceSynchronize());
        cr_assert_eq(host, v, "launch %d: %#x", i, host);
    }
    RK(cudaGraphExecDestroy(x));
    RK(cudaGraphDestroy(g));
}

/* The driver's refusals come back as the runtime's: a kernel no fatbin
 * registered, a zero-byte allocation, a free of no allocation's address. */
Test(simcudart_graph_node, refusals, .init = start)
{
    cudaGraph_t g;
    RK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n;
    static const char unregistered = 0;
    struct cudaGraphNodeParams p = params(cudaGraphNodeTypeKernel);
    p.kernel.func = (void *)&unregistered;
    p.kernel.gridDim = (dim3){1, 1, 1};
    p.kernel.blockDim = (dim3){1, 1, 1};
    cr_assert_eq(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p), cudaErrorInvalidDeviceFunction);
    p = params(cudaGraphNodeTypeMemAlloc);
    p.alloc.poolProps.allocType = cudaMemAllocationTypePinned;
    p.alloc.poolProps.location.type = cudaMemLocationTypeDevice;
    cr_assert_eq(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p), cudaErrorInvalidValue);
    cr_assert_null(p.alloc.dptr, "written only on success");
    p = params(cudaGraphNodeTypeMemFree);
    p.free.dptr = &p;
    cr_assert_eq(cudaGraphAddNode(&n, g, NULL, NULL, 0, &p), cudaErrorInvalidValue);
    size_t count = 9;
    RK(cudaGraphGetNodes(g, NULL, &count));
    cr_assert_eq(count, 0);
    RK(cudaGraphDestroy(g));
}
