/* exec_edge: small driver-API programs for the shim's edge cases, each
 * checking its own result on the host (the values are computed from
 * addresses, so runs with and without the shim cannot be compared byte for
 * byte). Prints "ok CASE ..." and exits 0, or names the first wrong value and
 * exits 1.
 *
 *   --case scalar   a by-value word that equals a selected buffer's address
 *                   only after the profile: passed as written, not translated
 *   --case range    [begin, end) of a whole selected buffer (vr_sum_range_f32)
 *   --case gate     a rebind while the last launch waits behind a host
 *                   function that the program releases only afterwards
 *   --case gate-destroy / gate-update   the same, destroying / updating the
 *                   exec instead
 *   --case orphan   the graph destroyed after the exec went active: launches
 *                   go on computing the same values, and every call naming
 *                   the destroyed graph's node gets the driver's refusal
 *                   (the shim keeps the graph for its own calls)
 *   --case reshape  a SetParams changes a node's launch shape; updates from
 *                   graphs with the first shape follow: the first must
 *                   reach the driver (it restores the shape), the next ones
 *                   change nothing. Prints the update's answers.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *case_name = "";
#define VR_PROG "exec_edge"
#define VR_PROG_DETAIL case_name
#include "vr_check.h"

#define N (1u << 18) /* floats: 1 MiB buffers, VMM-backed by default */
#define BYTES ((size_t)N * 4)

static CUmodule mod;
static CUstream stream;

static CUfunction fn(const char *name)
{
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static CUdeviceptr buffer(float value)
{
    return vr_buffer_f32(N, value);
}

static float read1(CUdeviceptr p, size_t i)
{
    return vr_read_f32(p, i);
}

static CUgraphNode add(CUgraph g, CUfunction f, void **kp, CUgraphNode *dep)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p = {.func = f, .gridDimX = 64, .gridDimY = 1, .gridDimZ = 1,
                                 .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
                                 .kernelParams = kp};
    CUgraphNode n;
    CK(cuGraphAddKernelNode_v2(&n, g, dep, dep ? 1 : 0, &p));
    return n;
}

static void set(CUgraphExec ex, CUgraphNode n, CUfunction f, void **kp)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p = {.func = f, .gridDimX = 64, .gridDimY = 1, .gridDimZ = 1,
                                 .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
                                 .kernelParams = kp};
    CK(cuGraphExecKernelNodeSetParams_v2(ex, n, &p));
}

static int fail(const char *what, size_t i, float got, float want)
{
    fprintf(stderr, "exec_edge %s: %s[%zu] = %.9g, expected %.9g\n", case_name, what, i,
            (double)got, (double)want);
    return 1;
}

struct vr_affine { CUdeviceptr out, in; float scale, shift; unsigned long long n; };

static int run_scalar(void)
{
    CUfunction scale = fn("vr_scale_f32"), affine = fn("vr_affine_struct");
    CUdeviceptr in = buffer(1.5f), x = buffer(0.0f), out = buffer(0.0f);
    float two = 2.0f;
    unsigned long long n = N;
    void *kp0[] = {&x, &in, &two, &n};
    struct vr_affine a = {out, in, 1.0f, 0.0f, N};
    void *kp1[] = {&a};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n0 = add(g, scale, kp0, NULL);
    CUgraphNode n1 = add(g, affine, kp1, &n0);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (int step = 0; step < 8; step++) {
        if (step == 5) {
            /* From now on scale and shift are the bits of an address inside
             * x, a buffer the profile selected. */
            uint64_t bits = x + 16;
            memcpy(&a.scale, &bits, 8);
        }
        set(ex, n0, scale, kp0);
        set(ex, n1, affine, kp1);
        CK(cuGraphLaunch(ex, stream));
        CK(cuStreamSynchronize(stream));
        float want = 1.5f * a.scale + a.shift;
        for (size_t i = 0; i < N; i += 4099) {
            float got = read1(out, i);
            /* An address's low word can be a NaN's bits (ASLR decides): the
             * GPU then writes its canonical NaN, the host keeps the payload,
             * so a NaN matches any NaN. */
            if (isnan(want) ? !isnan(got) : memcmp(&got, &want, 4) != 0)
                return fail("out", i, got, want);
        }
    }
    printf("ok scalar\n");
    return 0;
}

static int run_orphan(void)
{
    CUfunction scale = fn("vr_scale_f32");
    CUdeviceptr in[2] = {buffer(1.0f), buffer(3.0f)}, out = buffer(0.0f);
    float two = 2.0f;
    unsigned long long n = N;
    CUdeviceptr cur = in[0];
    void *kp[] = {&out, &cur, &two, &n};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n0 = add(g, scale, kp, NULL);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (int step = 0; step < 12; step++) {
        if (step < 6) {
            cur = in[step == 5]; /* a rebind right before the graph goes */
            set(ex, n0, scale, kp);
        }
        if (step == 6)
            CK(cuGraphDestroy(g));
        if (step == 8) {
            /* the arguments the exec holds: a shim that did not know the
             * graph is gone would absorb this and answer success */
            CUDA_KERNEL_NODE_PARAMS_v2 p = {.func = scale, .gridDimX = 64, .gridDimY = 1,
                                         .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
                                         .blockDimZ = 1, .kernelParams = kp};
            CUresult r = cuGraphExecKernelNodeSetParams_v2(ex, n0, &p);
            printf("update after destroy: %s\n", vr_err_name(r));
            /* the other calls naming the node: refused as well (the shim
             * keeps the graph for its own calls, not for the program's) */
            unsigned en = 7;
            r = cuGraphNodeGetEnabled(ex, n0, &en);
            printf("get enabled after destroy: %s %u\n", vr_err_name(r), en);
            r = cuGraphNodeSetEnabled(ex, n0, 1);
            printf("set enabled after destroy: %s\n", vr_err_name(r));
        }
        CK(cuGraphLaunch(ex, stream));
        CK(cuStreamSynchronize(stream));
        float want = step < 5 ? 2.0f : 6.0f; /* the refused update changes nothing */
        for (size_t i = 0; i < N; i += 4099) {
            float got = read1(out, i);
            if (memcmp(&got, &want, 4) != 0)
                return fail("out", i, got, want);
        }
    }
    CK(cuGraphExecDestroy(ex));
    printf("ok orphan\n");
    return 0;
}

static int run_reshape(void)
{
    CUfunction scale = fn("vr_scale_f32");
    CUdeviceptr in = buffer(1.0f), out = buffer(0.0f);
    float two = 2.0f;
    unsigned long long n = N;
    void *kp[] = {&out, &in, &two, &n};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n0 = add(g, scale, kp, NULL);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (int step = 0; step < 6; step++) {
        if (step == 2) {
            CUDA_KERNEL_NODE_PARAMS_v2 p = {.func = scale, .gridDimX = 32, .gridDimY = 1,
                                         .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
                                         .blockDimZ = 1, .kernelParams = kp};
            CK(cuGraphExecKernelNodeSetParams_v2(ex, n0, &p));
        } else {
            CUgraph g2;
            CK(cuGraphCreate(&g2, 0));
            add(g2, scale, kp, NULL);
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            CK(cuGraphExecUpdate_v2(ex, g2, &info));
            printf("update %d: result %d\n", step, (int)info.result);
            CK(cuGraphDestroy(g2));
        }
        CK(cuGraphLaunch(ex, stream));
        CK(cuStreamSynchronize(stream));
        for (size_t i = 0; i < N; i += 4099) {
            float got = read1(out, i);
            if (got != 2.0f)
                return fail("out", i, got, 2.0f);
        }
    }
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    printf("ok reshape\n");
    return 0;
}

static int run_range(void)
{
    CUfunction fill = fn("vr_fill_f32"), sum = fn("vr_sum_range_f32");
    CUdeviceptr a = buffer(0.0f), s = buffer(0.0f);
    CUdeviceptr end = a + BYTES;
    float value = 1.0f;
    unsigned long long n = N;
    void *kp0[] = {&a, &value, &n};
    void *kp1[] = {&s, &a, &end};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n0 = add(g, fill, kp0, NULL);
    CUgraphNode n1 = add(g, sum, kp1, &n0);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (int step = 0; step < 8; step++) {
        value = (float)(step + 1);
        set(ex, n0, fill, kp0);
        set(ex, n1, sum, kp1);
        CK(cuGraphLaunch(ex, stream));
        CK(cuStreamSynchronize(stream));
        float got = read1(s, 0), want = value * (float)N;
        if (got != want)
            return fail("sum", 0, got, want);
    }
    printf("ok range\n");
    return 0;
}

static atomic_int released;

/* Profiles out = 2 * a, then queues a launch behind a gate the program opens
 * only after its next calls: a rebind to b (or a destroy, or an update). */
static int run_gate(int what)
{
    CUfunction scale = fn("vr_scale_f32");
    CUdeviceptr a = buffer(1.0f), b = buffer(3.0f), out = buffer(0.0f);
    float two = 2.0f;
    unsigned long long n = N;
    CUdeviceptr in = a;
    void *kp[] = {&out, &in, &two, &n};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n0 = add(g, scale, kp, NULL);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (int step = 0; step < 5; step++) {
        set(ex, n0, scale, kp);
        CK(cuGraphLaunch(ex, stream));
        CK(cuStreamSynchronize(stream));
    }
    CK(cuLaunchHostFunc(stream, vr_gate, &released));
    CK(cuGraphLaunch(ex, stream));
    float want = 2.0f;
    if (what == 0) {
        in = b;
        set(ex, n0, scale, kp);
        CK(cuGraphLaunch(ex, stream));
        want = 6.0f;
    } else if (what == 1) {
        CK(cuGraphExecDestroy(ex));
        ex = NULL;
    } else {
        CUgraph g2;
        CK(cuGraphCreate(&g2, 0));
        in = b;
        add(g2, scale, kp, NULL);
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        CK(cuGraphExecUpdate_v2(ex, g2, &info));
        CK(cuGraphLaunch(ex, stream));
        CK(cuGraphDestroy(g2));
        want = 6.0f;
    }
    atomic_store(&released, 1);
    CK(cuStreamSynchronize(stream));
    for (size_t i = 0; i < N; i += 4099) {
        float got = read1(out, i);
        if (got != want)
            return fail("out", i, got, want);
    }
    if (ex)
        CK(cuGraphExecDestroy(ex));
    printf("ok %s\n", case_name);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--case"))
            case_name = argv[i + 1];
    /* A hang is a failure with a name, not a stuck suite. */
    alarm(20);
    const char *path = getenv("VR_PTX");
    char *ptx = path ? vr_read_text(path) : NULL;
    if (!ptx) {
        fprintf(stderr, "exec_edge: set VR_PTX to the kernels' PTX\n");
        return 2;
    }
    CK(cuInit(0));
    vr_ctx_current(0, NULL);
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    free(ptx);
    if (!strcmp(case_name, "scalar"))
        return run_scalar();
    if (!strcmp(case_name, "orphan"))
        return run_orphan();
    if (!strcmp(case_name, "range"))
        return run_range();
    if (!strcmp(case_name, "reshape"))
        return run_reshape();
    if (!strcmp(case_name, "gate"))
        return run_gate(0);
    if (!strcmp(case_name, "gate-destroy"))
        return run_gate(1);
    if (!strcmp(case_name, "gate-update"))
        return run_gate(2);
    fprintf(stderr, "usage: exec_edge --case scalar|range|orphan|reshape|gate|gate-destroy|gate-update\n");
    return 2;
}
