/* stored_ptr: a set-up kernel stores its pointer argument in device memory
 * (a pointer table, as frameworks build), the exec goes, and a plain kernel
 * follows the stored pointers while the buffer is still allocated (issue 30,
 * item 4). Under the shim the stored values are slice addresses: they must
 * stay valid as long as the buffer, exactly as the program's own would.
 *
 *   stored_ptr [--out FILE] [--map FILE] [--launches L]
 *
 * The graph: vr_store_ptr(T, X, M) then vr_scale_f32(Y, X, 2, M), replayed
 * L times (default 8: profiled, then with slices); the exec and its graph
 * are destroyed; X is rewritten; vr_load_ptr_f32(O, T, M, M) reads X through
 * the table. stdout: the sums; --out: O's bytes. stderr (under the shim):
 * `slices_bound N` once X, Y and T are freed, the shim's count of slots
 * still mapped (0: the slices went with their buffers).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "stored_ptr"
#include "vr_check.h"
#include "varemap/varemap.h"

enum { M = 1024 };
#define BYTES ((size_t)2 << 20) /* VMM-backed at the default threshold */

static CUfunction fn(CUmodule mod, const char *name)
{
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static double sum(CUdeviceptr p, float *h)
{
    CK(cuMemcpyDtoH_v2(h, p, M * sizeof *h));
    double s = 0;
    for (size_t i = 0; i < M; i++)
        s += h[i] * (double)(i % 7 + 1);
    return s;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    unsigned launches = 8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--map") && i + 1 < argc)
            i++;
        else if (!strcmp(argv[i], "--launches") && i + 1 < argc)
            launches = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: stored_ptr [--out FILE] [--map FILE] [--launches L]\n");
            return 2;
        }
    }
    CUmodule mod;
    vr_module_start(&mod, NULL);
    CUfunction store = fn(mod, "vr_store_ptr"), scale = fn(mod, "vr_scale_f32"),
               load = fn(mod, "vr_load_ptr_f32");
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x, y, t, o;
    CK(cuMemAlloc_v2(&x, BYTES));
    CK(cuMemAlloc_v2(&y, BYTES));
    CK(cuMemAlloc_v2(&t, BYTES));
    CK(cuMemAlloc_v2(&o, BYTES));
    float *h = malloc(M * sizeof *h);
    if (!h)
        return 1;
    for (size_t i = 0; i < M; i++)
        h[i] = (float)(i % 13) + 0.5f;
    CK(cuMemcpyHtoD_v2(x, h, M * sizeof *h));
    CK(cuMemsetD32_v2(o, 0, M));
    CK(cuCtxSynchronize());

    unsigned long long m = M;
    float two = 2.0f;
    void *kp_store[] = {&t, &x, &m};
    void *kp_scale[] = {&y, &x, &two, &m};
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.gridDimX = 4;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256;
    p.blockDimY = p.blockDimZ = 1;
    p.func = store;
    p.kernelParams = kp_store;
    CUgraphNode n0, n1;
    CK(cuGraphAddKernelNode_v2(&n0, g, NULL, 0, &p));
    p.func = scale;
    p.kernelParams = kp_scale;
    CK(cuGraphAddKernelNode_v2(&n1, g, &n0, 1, &p));
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (unsigned l = 0; l < launches; l++) {
        /* the program re-sets its nodes every step, as the seed does */
        p.func = store;
        p.kernelParams = kp_store;
        CK(cuGraphExecKernelNodeSetParams_v2(ex, n0, &p));
        p.func = scale;
        p.kernelParams = kp_scale;
        CK(cuGraphExecKernelNodeSetParams_v2(ex, n1, &p));
        CK(cuGraphLaunch(ex, st));
        CK(cuStreamSynchronize(st));
    }
    printf("y %.1f\n", sum(y, h));
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    /* Nothing of the exec is left; the table's pointers name X still. */
    for (size_t i = 0; i < M; i++)
        h[i] = (float)(i % 11) + 0.25f;
    CK(cuMemcpyHtoD_v2(x, h, M * sizeof *h));
    CK(cuCtxSynchronize());
    void *kp_load[] = {&o, &t, &m, &m};
    CK(cuLaunchKernel(load, 4, 1, 1, 256, 1, 1, 0, st, kp_load, NULL));
    CK(cuStreamSynchronize(st));
    printf("loaded %.1f\n", sum(o, h));
    if (out) {
        CK(cuMemcpyDtoH_v2(h, o, M * sizeof *h));
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(h, sizeof *h, M, f) != M || fclose(f) != 0)
            return 1;
    }
    CK(cuMemFree_v2(x));
    CK(cuMemFree_v2(y));
    CK(cuMemFree_v2(t));
    int (*stats)(struct varemap_stats *, size_t);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    struct varemap_stats s;
    if (stats && stats(&s, sizeof s) == 0)
        fprintf(stderr, "slices_bound %llu\n", (unsigned long long)s.slices_bound);
    CK(cuMemFree_v2(o));
    CK(cuStreamDestroy_v2(st));
    free(h);
    printf("ok\n");
    return 0;
}
