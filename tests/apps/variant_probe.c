/* variant_probe: an exec whose input alternates between two buffers
 * (pingpong), launched alternately on two streams, so the shim serves it
 * with variants; each case checks its own result against a host replay and
 * prints "ok CASE" plus the final values, or names the first wrong value and
 * exits 1.
 *
 * The graph: T = 0.5 * A (vr_scale_f32), then A = T + C[step % 2]
 * (vr_add_f32). Launches do not commute (C0 != C1), so any two launches run
 * out of order change A.
 *
 *   --case order    after the warm-up, stream 0 is held by a host function
 *                   the program opens only after it has queued a launch on
 *                   stream 0 and then one on stream 1: the driver orders
 *                   launches of one exec even across streams, so must the
 *                   shim (its variants are other execs)
 *   --case enable   after the warm-up, the add node is disabled for a few
 *                   launches (cuGraphNodeSetEnabled on the program's exec),
 *                   then enabled again: every launch, whichever variant runs
 *                   it, must see it
 *   --case degrade  after the warm-up the program resolves cuGraphLaunch
 *                   through cuGetProcAddress_v2; under
 *                   SIMCUDA_PROC_INTERNAL=1 the answer is an entry the shim
 *                   cannot name, so launches through it bypass the shim.
 *                   The next steps launch through it and through the
 *                   exported cuGraphLaunch (one in four). The exec is left alive
 *                   at exit, so the shim's summary still counts its variants.
 *   --case upload   after the warm-up, twice: stream[step % 2] is held by a
 *                   host function, a step is launched there, and the exec is
 *                   uploaded in a third stream followed by an event: the
 *                   driver orders an upload behind the exec's earlier
 *                   launches, so the event must not complete while the
 *                   launch is held (whichever variant ran it); prints
 *                   whether it was pending each time
 *   --case range    another graph: S = sum of [X + N - n, X + N), n the floats
 *                   the kernels cover (vr_sum_range_f32, the end pointer is
 *                   X's end), then Y[step % 2] = 2 * X over n floats;
 *                   X fills its slice exactly, so its end equals the start of
 *                   Y's slice, which changes at every step. `--steps N`.
 *   --case nodes    another graph, with nodes of other types: memset
 *                   T = m[step]; A += 0.5 * T; A += C[step % 2]; memcpy 16
 *                   bytes of (step % 3 ? A : T) into H row `step`; a host
 *                   node notes the step in notes[step]. Every step changes
 *                   the memset's value, the memcpy's source and destination
 *                   and the host node's userData with cuGraphExec*SetParams
 *                   on the program's exec, and launches on stream[step % 2]:
 *                   every variant must hold every change. `--steps N`.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include <cuda.h>
#include <varemap/varemap.h>

#include "ptx_text.h"

#define N (1u << 19) /* floats: 2 MiB buffers, VMM-backed at the default granularity */
#define BYTES ((size_t)N * 4)
#define WARM 12

static const char *case_name = "";
#define VR_PROG "variant_probe"
#define VR_PROG_DETAIL case_name
#include "vr_check.h"

static _Noreturn void die(const char *what, CUresult r)
{
    vr_check_fail(what, __FILE__, __LINE__, r);
}

static CUmodule mod;
static CUstream st[2];
static atomic_int released;
typedef CUresult (*launch_fn)(CUgraphExec, CUstream);
static launch_fn launch = cuGraphLaunch;

/* Under the shim, its count of live variants on stderr (the output must not
 * differ from a run without it). */
static void say_variants(const char *when)
{
    int (*get)(struct varemap_stats *, size_t);
    void *sym = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    struct varemap_stats vs;
    if (!sym)
        return;
    memcpy(&get, &sym, sizeof sym);
    if (get(&vs, sizeof vs) == 0)
        fprintf(stderr, "variants_%s=%llu\n", when, (unsigned long long)vs.variants);
}

static CUdeviceptr buffer(float value)
{
    return vr_buffer_f32(N, value);
}

static float read1(CUdeviceptr p, size_t i)
{
    return vr_read_f32(p, i);
}

struct node {
    CUgraphNode h;
    CUfunction f;
    void **kp;
};

static CUDA_KERNEL_NODE_PARAMS params(const struct node *n)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = n->f;
    p.gridDimX = 64, p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256, p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = n->kp;
    return p;
}

static int note_clock;

static void CUDA_CB note(void *p)
{
    *(int *)p = ++note_clock;
}

static int nodes(unsigned steps)
{
    CUfunction axpy, add;
    CK(cuModuleGetFunction(&axpy, mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&add, mod, "vr_add_f32"));
    const float cval[2] = {0.5f, -0.25f};
    CUdeviceptr a = buffer(1.0f), t = buffer(0.0f), c[2] = {buffer(cval[0]), buffer(cval[1])};
    CUdeviceptr h;
    size_t hbytes = (size_t)steps * 16;
    CK(cuMemAlloc_v2(&h, hbytes)); /* small: never a slice */
    CK(cuMemsetD8_v2(h, 0, hbytes));
    int *notes = calloc(steps, sizeof *notes);
    float *want_h = calloc((size_t)steps * 4, sizeof *want_h);
    if (!notes || !want_h)
        die("calloc", CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr cin = c[0];
    float half = 0.5f;
    unsigned long long n = vr_extent_f32(N); /* the floats the kernels cover */
    void *kp0[] = {&a, &t, &half, &n};
    void *kp1[] = {&a, &a, &cin, &n};
    struct node nd[2] = {{NULL, axpy, kp0}, {NULL, add, kp1}};
    CUcontext ctx;
    CK(cuCtxGetCurrent(&ctx));

    CUDA_MEMSET_NODE_PARAMS ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = t, ms.elementSize = 4, ms.width = N, ms.height = 1;
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = a, cp.dstDevice = h, cp.WidthInBytes = 16, cp.Height = cp.Depth = 1;
    CUDA_HOST_NODE_PARAMS hp = {note, &notes[0]};

    CUgraph g;
    CUgraphNode m, k0, k1, p, hn;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddMemsetNode(&m, g, NULL, 0, &ms, ctx));
    CUDA_KERNEL_NODE_PARAMS kp = params(&nd[0]);
    CK(cuGraphAddKernelNode_v2(&k0, g, &m, 1, &kp));
    kp = params(&nd[1]);
    CK(cuGraphAddKernelNode_v2(&k1, g, &k0, 1, &kp));
    CK(cuGraphAddMemcpyNode(&p, g, &k1, 1, &cp, ctx));
    CK(cuGraphAddHostNode(&hn, g, &p, 1, &hp));
    nd[0].h = k0, nd[1].h = k1;
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));

    float ha = 1.0f;
    for (unsigned s = 0; s < steps; s++) {
        float mval = (float)((s * 7) % 5);
        union { float f; unsigned u; } mv = {mval};
        ms.value = mv.u;
        CK(cuGraphExecMemsetNodeSetParams(ex, m, &ms, ctx));
        cp.srcDevice = s % 3 ? a : t;
        cp.dstDevice = h + (CUdeviceptr)s * 16;
        CK(cuGraphExecMemcpyNodeSetParams(ex, p, &cp, ctx));
        hp.userData = &notes[s];
        CK(cuGraphExecHostNodeSetParams(ex, hn, &hp));
        cin = c[s % 2];
        for (int i = 0; i < 2; i++) {
            CUDA_KERNEL_NODE_PARAMS q = params(&nd[i]);
            CK(cuGraphExecKernelNodeSetParams_v2(ex, nd[i].h, &q));
        }
        CK(cuGraphLaunch(ex, st[s % 2]));
        if (s < WARM)
            CK(cuCtxSynchronize());
        ha += 0.5f * mval;
        ha += cval[s % 2];
        for (int j = 0; j < 4; j++)
            want_h[s * 4 + j] = s % 3 ? ha : mval;
    }
    CK(cuCtxSynchronize());
    float *got_h = malloc(hbytes);
    if (!got_h)
        die("malloc", CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemcpyDtoH_v2(got_h, h, hbytes));
    int bad = 0;
    for (unsigned s = 0; s < steps && !bad; s++) {
        if (notes[s] != (int)s + 1) {
            fprintf(stderr, "variant_probe nodes: step %u noted %d\n", s, notes[s]);
            bad = 1;
        }
        if (memcmp(&got_h[s * 4], &want_h[s * 4], 16)) {
            fprintf(stderr, "variant_probe nodes: step %u copied %g, want %g\n", s,
                    (double)got_h[s * 4], (double)want_h[s * 4]);
            bad = 1;
        }
    }
    for (size_t i = 0; i < n && !bad; i += n / 8 + 1)
        if (read1(a, i) != ha) {
            fprintf(stderr, "variant_probe nodes: A[%zu]=%g, want %g\n", i, (double)read1(a, i),
                    (double)ha);
            bad = 1;
        }
    unsigned long long sum = 0;
    for (size_t i = 0; i < (size_t)steps * 4; i++) {
        unsigned u;
        memcpy(&u, &got_h[i], 4);
        sum = sum * 31 + u;
    }
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g)); /* kept until here: exec calls name its nodes */
    free(notes);
    free(want_h);
    free(got_h);
    if (bad)
        return 1;
    printf("ok nodes A=%a H=%llx steps=%u\n", (double)ha, sum, steps);
    return 0;
}

static int range(unsigned steps)
{
    CUfunction sum, scale;
    CK(cuModuleGetFunction(&sum, mod, "vr_sum_range_f32"));
    CK(cuModuleGetFunction(&scale, mod, "vr_scale_f32"));
    CUdeviceptr out, x = buffer(1.0f), y[2] = {buffer(0.0f), buffer(0.0f)};
    CK(cuMemAlloc_v2(&out, 4)); /* small: never a slice */
    float two = 2.0f;
    unsigned long long n = vr_extent_f32(N); /* the floats the kernels cover */
    CUdeviceptr xend = x + BYTES, xbegin = xend - n * 4, yout = y[0];
    void *kp0[] = {&out, &xbegin, &xend};
    void *kp1[] = {&yout, &x, &two, &n};
    struct node nd[2] = {{NULL, sum, kp0}, {NULL, scale, kp1}};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    for (int i = 0; i < 2; i++) {
        CUDA_KERNEL_NODE_PARAMS p = params(&nd[i]);
        if (i == 0)
            p.gridDimX = p.blockDimX = 1; /* one thread sums */
        CK(cuGraphAddKernelNode_v2(&nd[i].h, g, NULL, 0, &p));
    }
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (unsigned s = 0; s < steps; s++) {
        yout = y[s % 2];
        for (int i = 0; i < 2; i++) {
            CUDA_KERNEL_NODE_PARAMS p = params(&nd[i]);
            if (i == 0)
                p.gridDimX = p.blockDimX = 1;
            CK(cuGraphExecKernelNodeSetParams_v2(ex, nd[i].h, &p));
        }
        CK(cuGraphLaunch(ex, st[0]));
        CK(cuCtxSynchronize());
    }
    float sres;
    CK(cuMemcpyDtoH_v2(&sres, out, 4));
    for (size_t i = 0; i < n; i += n / 8 + 1)
        if (sres != (float)n || read1(y[0], i) != 2.0f || read1(y[1], i) != 2.0f) {
            fprintf(stderr, "variant_probe range: sum %g, Y0[%zu] %g, Y1 %g\n", (double)sres, i,
                    (double)read1(y[0], i), (double)read1(y[1], i));
            return 1;
        }
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g)); /* kept until here: exec calls name its nodes */
    printf("ok range sum=%a steps=%u\n", (double)sres, steps);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned steps = 40;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--case"))
            case_name = argv[i + 1];
        else if (!strcmp(argv[i], "--steps"))
            steps = (unsigned)strtoul(argv[i + 1], NULL, 10);
    alarm(30); /* a hang is a failure with a name */
    bool order = !strcmp(case_name, "order"), enable = !strcmp(case_name, "enable");
    bool degrade = !strcmp(case_name, "degrade"), ranged = !strcmp(case_name, "range");
    bool upload = !strcmp(case_name, "upload"), other = !strcmp(case_name, "nodes");
    const char *path = getenv("VR_PTX");
    char *ptx = path ? vr_read_text(path) : NULL;
    if (!ptx || (!order && !enable && !degrade && !ranged && !upload && !other)) {
        fprintf(stderr, "usage: VR_PTX=... variant_probe --case order|enable|degrade|range|upload|nodes "
                        "[--steps N]\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, ptx));
    free(ptx);
    for (int i = 0; i < 2; i++)
        CK(cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING));
    if (ranged)
        return range(steps);
    if (other)
        return nodes(steps);
    CUfunction scale, add;
    CK(cuModuleGetFunction(&scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&add, mod, "vr_add_f32"));

    const float cval[2] = {0.5f, -0.25f};
    CUdeviceptr a = buffer(1.0f), t = buffer(0.0f), c[2] = {buffer(cval[0]), buffer(cval[1])};
    CUdeviceptr cin = c[0];
    float half = 0.5f;
    unsigned long long n = vr_extent_f32(N); /* the floats the kernels cover */
    void *kp0[] = {&t, &a, &half, &n};
    void *kp1[] = {&a, &t, &cin, &n};
    struct node nd[2] = {{NULL, scale, kp0}, {NULL, add, kp1}};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    for (int i = 0; i < 2; i++) {
        CUDA_KERNEL_NODE_PARAMS p = params(&nd[i]);
        CK(cuGraphAddKernelNode_v2(&nd[i].h, g, i ? &nd[0].h : NULL, i ? 1 : 0, &p));
    }
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));

    float ha = 1.0f, ht = 0.0f;
    bool added = true;
    unsigned step = 0;
    /* One step: point the add at C[step % 2], launch on stream[step % 2]. */
#define STEP()                                                                  \
    do {                                                                        \
        cin = c[step % 2];                                                      \
        for (int i_ = 0; i_ < 2; i_++) {                                        \
            CUDA_KERNEL_NODE_PARAMS p_ = params(&nd[i_]);                       \
            CK(cuGraphExecKernelNodeSetParams_v2(ex, nd[i_].h, &p_));           \
        }                                                                       \
        CK(launch(ex, st[step % 2]));                                           \
        ht = 0.5f * ha;                                                         \
        if (added)                                                              \
            ha = ht + cval[step % 2];                                           \
        step++;                                                                 \
    } while (0)

    for (int i = 0; i < WARM; i++) {
        STEP();
        CK(cuCtxSynchronize());
    }
    if (order) {
        CK(cuLaunchHostFunc(st[step % 2], vr_gate, &released));
        for (int i = 0; i < 4; i++)
            STEP();
        atomic_store(&released, 1);
    } else if (upload) {
        CUstream u;
        CUevent ev;
        CK(cuStreamCreate(&u, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        for (int i = 0; i < 2; i++) {
            atomic_store(&released, 0);
            CK(cuLaunchHostFunc(st[step % 2], vr_gate, &released));
            STEP();
            CK(cuGraphUpload(ex, u));
            CK(cuEventRecord(ev, u));
            usleep(50 * 1000);
            CUresult q = cuEventQuery(ev);
            printf("upload %d pending=%d\n", i, q == CUDA_ERROR_NOT_READY);
            atomic_store(&released, 1);
            CK(cuCtxSynchronize());
        }
        CK(cuEventDestroy_v2(ev));
        CK(cuStreamDestroy_v2(u));
    } else if (degrade) {
        /* An odd step: the last launch was a variant's (the program's exec
         * holds the warm-up's first phase), so the program's exec has a
         * slot retargeted for a variant when the entry point is handed out. */
        STEP();
        CK(cuCtxSynchronize());
        say_variants("before");
        void *fn = NULL;
        CUdriverProcAddressQueryResult qs;
        CK(cuGetProcAddress_v2("cuGraphLaunch", &fn, 10000, CU_GET_PROC_ADDRESS_DEFAULT, &qs));
        if (!fn || qs != CU_GET_PROC_ADDRESS_SUCCESS)
            die("cuGetProcAddress_v2(cuGraphLaunch)", CUDA_ERROR_NOT_FOUND);
        launch_fn internal;
        memcpy(&internal, &fn, sizeof fn);
        for (int i = 0; i < 8; i++) {
            launch = i % 4 == 3 ? cuGraphLaunch : internal;
            STEP();
        }
        CK(cuCtxSynchronize());
        say_variants("after");
    } else {
        added = false;
        CK(cuGraphNodeSetEnabled(ex, nd[1].h, 0));
        for (int i = 0; i < 4; i++)
            STEP();
        added = true;
        CK(cuGraphNodeSetEnabled(ex, nd[1].h, 1));
        for (int i = 0; i < 4; i++)
            STEP();
    }
    CK(cuCtxSynchronize());
    for (size_t i = 0; i < n; i += n / 8 + 1) {
        float ga = read1(a, i), gt = read1(t, i);
        if (ga != ha || gt != ht) {
            fprintf(stderr, "variant_probe %s: at %zu A=%g T=%g, want A=%g T=%g\n", case_name, i,
                    (double)ga, (double)gt, (double)ha, (double)ht);
            return 1;
        }
    }
    if (!degrade)
        CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g)); /* kept until here: exec calls name its nodes */
    printf("ok %s A=%a T=%a steps=%u\n", case_name, (double)ha, (double)ht, step);
    return 0;
}
