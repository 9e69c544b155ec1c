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
 *                                       (>= --bytes), in that order per round;
 *                                       one cuMemSetAccess over 4 adjacent
 *                                       mappings as a comment
 *   cuMemAlloc_v2, cuMemFree_v2         --bytes, native
 *   cuMemsetD32Async                    --elems words
 *   cuMemGetAllocationGranularity       the chunk's properties
 *   cuStreamBeginCapture_v2, cuLaunchKernel, cuStreamEndCapture
 *                                       the same N-kernel chain captured
 *                                       (a launch: the mean of a capture's N,
 *                                       median over rounds: what a launch
 *                                       costs while the stream captures)
 *   cuGraphExecUpdate_v2                the captured graph onto an exec of
 *                                       it: nothing changed (the figure);
 *                                       1% and all nodes' pointer changed,
 *                                       alternately, as comments
 *   cuGraphInstantiateWithFlags, cuGraphClone, cuGraphExecDestroy,
 *   cuGraphDestroy                      the captured N-node graph
 *   cuEventCreate (timing disabled, as the shim makes them), cuEventRecord,
 *   cuEventQuery (complete), cuEventSynchronize (complete),
 *   cuEventDestroy_v2, cuStreamQuery, cuStreamSynchronize, cuCtxSynchronize
 *                                       on an idle stream and context
 * The N-node graph calls take --heavy-rounds rounds (default 50): each is
 * milliseconds on a GPU.
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

/* n arrays of len samples each (one per call a section times). */
static void sample_rows(uint64_t **rows, int n, size_t len)
{
    for (int k = 0; k < n; k++)
        if (!(rows[k] = malloc(len * sizeof *rows[k])))
            die("out of memory");
}

static void free_rows(uint64_t **rows, int n)
{
    for (int k = 0; k < n; k++)
        free(rows[k]);
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

/* One capture of the N-kernel chain into `st`, each node reading `in`
 * except the nodes `moved` picks, which read `other`: Begin, the mean launch
 * and End timed into the round's slot of each array. */
struct capture_times {
    uint64_t *begin, *launch, *end;
};

static CUgraph capture_chain(CUstream st, CUfunction fn, const CUDA_KERNEL_NODE_PARAMS *p,
                             unsigned long nodes, CUdeviceptr out, CUdeviceptr in,
                             CUdeviceptr other, unsigned long moved_every,
                             const struct capture_times *ct, unsigned long r)
{
    float s = 0.5f;
    unsigned long long n = 0;
    memcpy(&n, p->kernelParams[3], sizeof n);
    CUgraph g;
    TIME(ct->begin, r, cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    uint64_t t0 = now_ns();
    for (unsigned long i = 0; i < nodes; i++) {
        CUdeviceptr src = moved_every && i % moved_every == 0 ? other : in;
        void *kp[4] = { &out, &src, &s, &n };
        check("cuLaunchKernel (capturing)",
              cuLaunchKernel(fn, p->gridDimX, 1, 1, p->blockDimX, 1, 1, 0, st, kp, NULL));
    }
    ct->launch[r] = (now_ns() - t0) / nodes;
    TIME(ct->end, r, cuStreamEndCapture(st, &g));
    return g;
}

static void update_ok(CUgraphExec ex, CUgraph g, uint64_t *t, unsigned long r)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    TIME(t, r, cuGraphExecUpdate_v2(ex, g, &info));
    if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        die("cuGraphExecUpdate_v2: update result %d", (int)info.result);
}

int main(int argc, char **argv)
{
    unsigned long rounds = 200, heavy = 50, nodes = 1000, bytes = 1ul << 20, elems = 256;
    const char *env = getenv("VR_PTX");
    const char *ptx = env && *env ? env : VR_PTX_DEFAULT;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds"))
            rounds = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--heavy-rounds"))
            heavy = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--nodes"))
            nodes = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--elems"))
            elems = parse_num(argv[i + 1]);
        else if (!strcmp(argv[i], "--ptx"))
            ptx = argv[i + 1];
        else
            die("usage: %s [--rounds R] [--heavy-rounds H] [--nodes N] [--bytes B] [--elems E] [--ptx PATH]", prog);
    }
    if (argc % 2 == 0)
        die("usage: %s [--rounds R] [--heavy-rounds H] [--nodes N] [--bytes B] [--elems E] [--ptx PATH]", prog);
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

    size_t most = rounds > heavy ? rounds : heavy;
    uint64_t *t = malloc(most * sizeof *t);
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
    sample_rows(vt, NV, rounds);
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
    /* One cuMemSetAccess over ACC_RUN adjacent chunks, each its own
     * mapping: what the shim pays for a run of slots remapped together
     * (a comment line: whether the call's cost grows with the range). */
    enum { ACC_RUN = 4 };
    for (unsigned long r = 0; r < rounds; r++) {
        CUdeviceptr va;
        CUmemGenericAllocationHandle hs[ACC_RUN];
        CK(cuMemAddressReserve(&va, ACC_RUN * sz, gran, 0, 0));
        for (int k = 0; k < ACC_RUN; k++) {
            CK(cuMemCreate(&hs[k], sz, &prop, 0));
            CK(cuMemMap(va + (CUdeviceptr)k * sz, sz, 0, hs[k], 0));
        }
        TIME(t, r, cuMemSetAccess(va, ACC_RUN * sz, &acc, 1));
        for (int k = 0; k < ACC_RUN; k++) {
            CK(cuMemUnmap(va + (CUdeviceptr)k * sz, sz));
            CK(cuMemRelease(hs[k]));
        }
        CK(cuMemAddressFree(va, ACC_RUN * sz));
    }
    uint64_t access_run_ns = median(t, rounds);
    uint64_t *at = malloc(rounds * sizeof *at);
    if (!at)
        die("out of memory");
    for (unsigned long r = 0; r < rounds; r++) {
        CUdeviceptr q;
        TIME(at, r, cuMemAlloc_v2(&q, bytes));
        TIME(t, r, cuMemFree_v2(q));
    }
    uint64_t alloc_ns = median(at, rounds), free_ns = median(t, rounds);

    uint64_t gran_ns;
    for (unsigned long r = 0; r < rounds; r++) {
        size_t gr;
        TIME(t, r, cuMemGetAllocationGranularity(&gr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    }
    gran_ns = median(t, rounds);

    /* Capture, update, instantiate, clone, destroy: the N-node graph. */
    enum { G_BEGIN, G_LAUNCH, G_END, G_SAME, G_SOME, G_ALL, G_INST, G_XDESTROY, G_CLONE,
           G_DESTROY, NG };
    uint64_t *gt[NG];
    sample_rows(gt, NG, heavy);
    const struct capture_times ct = { gt[G_BEGIN], gt[G_LAUNCH], gt[G_END] };
    CUgraph cg = capture_chain(st, fn, &p, nodes, a, b, c, 0, &ct, 0);
    CUgraphExec cx;
    CK(cuGraphInstantiateWithFlags(&cx, cg, 0));
    CK(cuGraphDestroy(cg));
    /* The 1% and all-changed updates alternate between the moved graph and
     * the original, so that each one changes what the exec holds. */
    for (unsigned long r = 0; r < heavy; r++) {
        CUgraph g = capture_chain(st, fn, &p, nodes, a, b, c, 0, &ct, r);
        update_ok(cx, g, gt[G_SAME], r);
        CUgraph k;
        TIME(gt[G_CLONE], r, cuGraphClone(&k, g));
        CUgraphExec x;
        TIME(gt[G_INST], r, cuGraphInstantiateWithFlags(&x, k, 0));
        TIME(gt[G_XDESTROY], r, cuGraphExecDestroy(x));
        CK(cuGraphDestroy(k));
        TIME(gt[G_DESTROY], r, cuGraphDestroy(g));
    }
    const struct capture_times scratch = { t, t, t };
    unsigned long every_some = nodes >= 100 ? 100 : 1;
    for (int pass = 0; pass < 2; pass++)
        for (unsigned long r = 0; r < 2 * heavy; r++) {
            CUgraph g = capture_chain(st, fn, &p, nodes, a, b, c,
                                      r % 2 ? 0 : (pass ? 1 : every_some), &scratch, 0);
            if (r % 2 == 0)
                update_ok(cx, g, gt[pass ? G_ALL : G_SOME], r / 2);
            else
                update_ok(cx, g, t, 0);
            CK(cuGraphDestroy(g));
        }
    CK(cuGraphLaunch(cx, st));
    CK(cuStreamSynchronize(st));
    CK(cuGraphExecDestroy(cx));
    uint64_t gm[NG];
    for (int k = 0; k < NG; k++)
        gm[k] = median(gt[k], heavy);

    /* Events and waits, on an idle stream: the call itself. */
    enum { E_CREATE, E_RECORD, E_QUERY, E_SYNC, E_DESTROY, S_QUERY, S_SYNC, C_SYNC, NE };
    uint64_t *et[NE];
    sample_rows(et, NE, rounds);
    for (unsigned long r = 0; r < rounds; r++) {
        CUevent ev;
        TIME(et[E_CREATE], r, cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        TIME(et[E_RECORD], r, cuEventRecord(ev, st));
        CK(cuStreamSynchronize(st));
        TIME(et[E_QUERY], r, cuEventQuery(ev));
        TIME(et[E_SYNC], r, cuEventSynchronize(ev));
        TIME(et[E_DESTROY], r, cuEventDestroy_v2(ev));
        TIME(et[S_QUERY], r, cuStreamQuery(st));
        TIME(et[S_SYNC], r, cuStreamSynchronize(st));
        TIME(et[C_SYNC], r, cuCtxSynchronize());
    }
    static const char *const ename[NE] = { "cuEventCreate", "cuEventRecord", "cuEventQuery",
                                           "cuEventSynchronize", "cuEventDestroy_v2",
                                           "cuStreamQuery", "cuStreamSynchronize",
                                           "cuCtxSynchronize" };
    static const char *const ewhat[NE] = { "CU_EVENT_DISABLE_TIMING", "idle stream",
                                           "event complete", "event complete",
                                           "event complete", "idle stream", "idle stream",
                                           "idle context" };

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
    printf("# cuMemSetAccess over %d adjacent mappings of %zu bytes, one call: %llu ns (%s: "
           "median)\n", ACC_RUN, sz, (unsigned long long)access_run_ns, src);
    printf("cuMemAlloc_v2 %llu  # %s: median, %lu bytes\n", (unsigned long long)alloc_ns, src,
           bytes);
    printf("cuMemFree_v2 %llu  # %s: median, %lu bytes\n", (unsigned long long)free_ns, src,
           bytes);
    printf("cuMemsetD32Async %llu  # %s: median, %lu words\n", (unsigned long long)memset_ns,
           src, elems);
    printf("cuMemGetAllocationGranularity %llu  # %s: median\n", (unsigned long long)gran_ns,
           src);
    printf("cuStreamBeginCapture_v2 %llu  # %s: median of %lu, global mode\n",
           (unsigned long long)gm[G_BEGIN], src, heavy);
    printf("cuLaunchKernel %llu  # %s: while the stream captures, mean of %lu launches, "
           "median of %lu captures\n",
           (unsigned long long)gm[G_LAUNCH], src, nodes, heavy);
    printf("cuStreamEndCapture %llu  # %s: median of %lu, %lu-node capture\n",
           (unsigned long long)gm[G_END], src, heavy, nodes);
    printf("cuGraphExecUpdate_v2 %llu  # %s: median of %lu, %lu-node captured graph, nothing "
           "changed; %lu of %lu pointers changed: %llu ns; all changed: %llu ns\n",
           (unsigned long long)gm[G_SAME], src, heavy, nodes, (nodes + every_some - 1) / every_some,
           nodes, (unsigned long long)gm[G_SOME], (unsigned long long)gm[G_ALL]);
    printf("cuGraphInstantiateWithFlags %llu  # %s: median of %lu, %lu-node graph\n",
           (unsigned long long)gm[G_INST], src, heavy, nodes);
    printf("cuGraphClone %llu  # %s: median of %lu, %lu-node graph\n",
           (unsigned long long)gm[G_CLONE], src, heavy, nodes);
    printf("cuGraphExecDestroy %llu  # %s: median of %lu, %lu-node exec\n",
           (unsigned long long)gm[G_XDESTROY], src, heavy, nodes);
    printf("cuGraphDestroy %llu  # %s: median of %lu, %lu-node graph\n",
           (unsigned long long)gm[G_DESTROY], src, heavy, nodes);
    for (int k = 0; k < NE; k++)
        printf("%s %llu  # %s: median, %s\n", ename[k], (unsigned long long)median(et[k], rounds),
               src, ewhat[k]);

    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    CK(cuMemFree_v2(c));
    CK(cuStreamDestroy_v2(st));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    free_rows(vt, NV);
    free_rows(gt, NG);
    free_rows(et, NE);
    free(at);
    free(t);
    free(nd);
    return 0;
}
