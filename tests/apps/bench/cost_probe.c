/* cost_probe: measures the host cost of the driver calls the cost model
 * (conf/cost-model.conf) prices, one entry point at a time, and prints them
 * in that file's format:
 *     name ns  # measured: median of R calls, ...
 *
 * Run it without the shim on the machine whose driver is to be modelled
 * (scripts/gpu-check does). Each figure is the median wall time of one call,
 * measured around that call alone:
 *   cuGraphExecKernelNodeSetParams_v2   node of an N-node chain graph, the
 *                                       same parameters as installed (what a
 *                                       naive framework re-sets every step);
 *                                       the cost with a changed pointer is
 *                                       printed as a comment
 *   cuGraphExecKernelNodeSetParams      v1 struct, same parameters
 *   cuGraphExecNodeSetParams            same parameters
 *   cuGraphLaunch                       the N-node graph, stream synchronized
 *                                       between launches (not timed)
 *   cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
 *   cuMemRelease, cuMemAddressFree      one recommended-granularity chunk
 *                                       (>= --bytes), in that order per round
 *   cuMemAlloc_v2, cuMemFree_v2         --bytes, native
 *   cuMemsetD32Async                    --elems words
 *   cuCtxSynchronize                    an idle context (what the shim's
 *                                       cuMemFree of VMM memory adds to
 *                                       each free: churn makes 8 a step)
 */
#include <cuda.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ptx_text.h"

#ifndef VR_PTX_DEFAULT
#define VR_PTX_DEFAULT "vr_kernels.ptx"
#endif

static const char *prog = "cost_probe";

__attribute__((format(printf, 1, 2))) static _Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void check(const char *what, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        return;
    const char *name = NULL;
    if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL)
        name = "CUDA_ERROR_UNKNOWN_CODE";
    die("%s: %s (%d)", what, name, (int)rc);
}

#define CK(call) check(#call, (call))

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Time one call expression into samples[i]. */
#define TIME(arr, i, call)                                                     \
    do {                                                                       \
        uint64_t t0_ = now_ns();                                               \
        CUresult rc_ = (call);                                                 \
        (arr)[i] = now_ns() - t0_;                                             \
        check(#call, rc_);                                                     \
    } while (0)

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned long parse_num(const char *s)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > 100000000ul)
        die("bad number '%s'", s);
    return v;
}

int main(int argc, char **argv)
{
    unsigned long rounds = 200, nodes = 1000, bytes = 1ul << 20, elems = 256;
    const char *env = getenv("VR_PTX");
    const char *ptx = env && *env ? env : VR_PTX_DEFAULT;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds"))
            rounds = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--nodes"))
            nodes = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--elems"))
            elems = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--ptx"))
            ptx = argv[i + 1];
        else
            die("usage: %s [--rounds R] [--nodes N] [--bytes B] [--elems E] [--ptx PATH]", prog);
    }
    if (argc % 2 == 0)
        die("usage: %s [--rounds R] [--nodes N] [--bytes B] [--elems E] [--ptx PATH]", prog);
    if (elems * 4 > bytes)
        die("--elems must be <= --bytes / 4");

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream st;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    char name[256] = "?";
    CK(cuDeviceGetName(name, (int)sizeof name, dev));
    int drv = 0;
    CK(cuDriverGetVersion(&drv));
    char *image = vr_read_text(ptx);
    if (!image)
        die("cannot open kernels '%s': %s (set --ptx or VR_PTX)", ptx, strerror(errno));
    CK(cuModuleLoadData(&mod, image));
    free(image);
    CK(cuModuleGetFunction(&fn, mod, "vr_scale_f32"));
    CK(cuStreamCreate(&st, 0));

    uint64_t *t = malloc(rounds * sizeof *t);
    CUgraphNode *nd = malloc(nodes * sizeof *nd);
    if (!t || !nd)
        die("out of memory");

    CUdeviceptr a, b, c;
    CK(cuMemAlloc_v2(&a, bytes));
    CK(cuMemAlloc_v2(&b, bytes));
    CK(cuMemAlloc_v2(&c, bytes));
    CK(cuMemsetD32Async(a, 0, bytes / 4, st));
    CK(cuMemsetD32Async(b, 0, bytes / 4, st));
    CK(cuMemsetD32Async(c, 0, bytes / 4, st));

    /* scale(out=a, in=b, 0.5, elems) on every node of a chain */
    CUdeviceptr out = a, in = b;
    float s = 0.5f;
    unsigned long long n = elems;
    void *kp[4] = { &out, &in, &s, &n };
    CUDA_KERNEL_NODE_PARAMS p = { .func = fn, .gridDimX = (unsigned)((elems + 127) / 128),
                                  .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
                                  .blockDimY = 1, .blockDimZ = 1, .kernelParams = kp };
    CUgraph g;
    CUgraphExec ex;
    CK(cuGraphCreate(&g, 0));
    for (unsigned long i = 0; i < nodes; i++)
        CK(cuGraphAddKernelNode_v2(&nd[i], g, i ? &nd[i - 1] : NULL, i ? 1 : 0, &p));
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    CK(cuGraphLaunch(ex, st));
    CK(cuStreamSynchronize(st));

    printf("# cost_probe: %s, driver %d, %lu rounds, graph of %lu nodes, %lu-byte buffers\n",
           name, drv, rounds, nodes, bytes);

    /* SetParams with the installed parameters */
    for (unsigned long r = 0; r < rounds; r++)
        TIME(t, r, cuGraphExecKernelNodeSetParams_v2(ex, nd[r % nodes], &p));
    uint64_t sp_same = median(t, rounds);
    /* SetParams with a pointer that changes every call */
    for (unsigned long r = 0; r < rounds; r++) {
        in = r % 2 ? c : b;
        TIME(t, r, cuGraphExecKernelNodeSetParams_v2(ex, nd[r % nodes], &p));
    }
    uint64_t sp_changed = median(t, rounds);
    in = b;
    for (unsigned long r = 0; r < rounds; r++)
        CK(cuGraphExecKernelNodeSetParams_v2(ex, nd[r % nodes], &p));
    CUDA_KERNEL_NODE_PARAMS_v1 p1 = { .func = p.func, .gridDimX = p.gridDimX, .gridDimY = 1,
                                      .gridDimZ = 1, .blockDimX = p.blockDimX, .blockDimY = 1,
                                      .blockDimZ = 1, .kernelParams = kp };
    for (unsigned long r = 0; r < rounds; r++)
        TIME(t, r, cuGraphExecKernelNodeSetParams(ex, nd[r % nodes], &p1));
    uint64_t sp_v1 = median(t, rounds);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    np.kernel.func = p.func;
    np.kernel.gridDimX = p.gridDimX;
    np.kernel.gridDimY = np.kernel.gridDimZ = 1;
    np.kernel.blockDimX = p.blockDimX;
    np.kernel.blockDimY = np.kernel.blockDimZ = 1;
    np.kernel.kernelParams = kp;
    for (unsigned long r = 0; r < rounds; r++)
        TIME(t, r, cuGraphExecNodeSetParams(ex, nd[r % nodes], &np));
    uint64_t sp_node = median(t, rounds);

    /* launches, each one on an idle stream */
    for (unsigned long r = 0; r < rounds; r++) {
        TIME(t, r, cuGraphLaunch(ex, st));
        CK(cuStreamSynchronize(st));
    }
    uint64_t launch = median(t, rounds);

    for (unsigned long r = 0; r < rounds; r++)
        TIME(t, r, cuMemsetD32Async(a, (unsigned)r, elems, st));
    uint64_t memset_ns = median(t, rounds);
    CK(cuStreamSynchronize(st));

    /* VMM, one chunk per round; each call timed on its own */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    size_t sz = (bytes + gran - 1) / gran * gran;
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    enum { V_RES, V_CREATE, V_MAP, V_ACCESS, V_UNMAP, V_RELEASE, V_FREE, NV };
    static const char *const vname[NV] = { "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                                           "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                           "cuMemAddressFree" };
    uint64_t *vt[NV];
    for (int k = 0; k < NV; k++)
        if (!(vt[k] = malloc(rounds * sizeof *vt[k])))
            die("out of memory");
    for (unsigned long r = 0; r < rounds; r++) {
        CUdeviceptr va;
        CUmemGenericAllocationHandle h;
        TIME(vt[V_RES], r, cuMemAddressReserve(&va, sz, gran, 0, 0));
        TIME(vt[V_CREATE], r, cuMemCreate(&h, sz, &prop, 0));
        TIME(vt[V_MAP], r, cuMemMap(va, sz, 0, h, 0));
        TIME(vt[V_ACCESS], r, cuMemSetAccess(va, sz, &acc, 1));
        TIME(vt[V_UNMAP], r, cuMemUnmap(va, sz));
        TIME(vt[V_RELEASE], r, cuMemRelease(h));
        TIME(vt[V_FREE], r, cuMemAddressFree(va, sz));
    }
    uint64_t *at = malloc(rounds * sizeof *at);
    if (!at)
        die("out of memory");
    for (unsigned long r = 0; r < rounds; r++) {
        CUdeviceptr q;
        TIME(at, r, cuMemAlloc_v2(&q, bytes));
        TIME(t, r, cuMemFree_v2(q));
    }
    uint64_t alloc_ns = median(at, rounds), free_ns = median(t, rounds);
    CK(cuCtxSynchronize());
    for (unsigned long r = 0; r < rounds; r++)
        TIME(t, r, cuCtxSynchronize());
    uint64_t sync_ns = median(t, rounds);

    const char *src = "measured by cost_probe (scripts/gpu-check)";
    printf("cuGraphExecKernelNodeSetParams_v2 %llu  # %s: median, installed parameters; "
           "changed pointer: %llu ns\n",
           (unsigned long long)sp_same, src, (unsigned long long)sp_changed);
    printf("cuGraphExecKernelNodeSetParams %llu  # %s: median, v1 struct\n",
           (unsigned long long)sp_v1, src);
    printf("cuGraphExecNodeSetParams %llu  # %s: median\n", (unsigned long long)sp_node, src);
    printf("cuGraphLaunch %llu  # %s: median, %lu-node graph, idle stream\n",
           (unsigned long long)launch, src, nodes);
    printf("cuGraphLaunch_ptsz %llu  # same figure as cuGraphLaunch\n",
           (unsigned long long)launch);
    for (int k = 0; k < NV; k++)
        printf("%s %llu  # %s: median, %zu bytes\n", vname[k],
               (unsigned long long)median(vt[k], rounds), src, sz);
    printf("cuMemAlloc_v2 %llu  # %s: median, %lu bytes\n", (unsigned long long)alloc_ns, src,
           bytes);
    printf("cuMemFree_v2 %llu  # %s: median, %lu bytes\n", (unsigned long long)free_ns, src,
           bytes);
    printf("cuMemsetD32Async %llu  # %s: median, %lu words\n", (unsigned long long)memset_ns,
           src, elems);
    printf("cuCtxSynchronize %llu  # %s: median, idle context\n", (unsigned long long)sync_ns,
           src);

    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    CK(cuMemFree_v2(c));
    CK(cuStreamDestroy_v2(st));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    for (int k = 0; k < NV; k++)
        free(vt[k]);
    free(at);
    free(t);
    free(nd);
    return 0;
}
