/* fill_probe: the fixture of the small probes built on one vr_fill_f32
 * node (update_v1, update_retry): a context, a stream, the kernel, an
 * output buffer of FILL_N floats, a graph of one fill node, and a step that
 * launches it and prints what it wrote, so that runs with and without the
 * shim compare byte for byte. Include after vr_check.h. */
#ifndef VR_FILL_PROBE_H
#define VR_FILL_PROBE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FILL_N = 64 };

struct fill_probe {
    char *ptx;
    CUdevice dev;
    CUstream s;
    CUmodule mod;
    CUfunction fill;
    CUdeviceptr out;
};

static inline void fill_open(struct fill_probe *f, const char *ptx_path)
{
    f->ptx = vr_ptx_or_die(ptx_path);
    CK(cuInit(0));
    f->dev = vr_ctx_current(0, NULL);
    CK(cuStreamCreate(&f->s, CU_STREAM_NON_BLOCKING));
    CK(cuModuleLoadData(&f->mod, f->ptx));
    CK(cuModuleGetFunction(&f->fill, f->mod, "vr_fill_f32"));
    CK(cuMemAlloc_v2(&f->out, FILL_N * sizeof(float)));
}

/* The fill node's parameters: one block of 32 threads, args = {&out,
 * &value, &n}. */
static inline CUDA_KERNEL_NODE_PARAMS fill_params(const struct fill_probe *f, void **args)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f->fill;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    return p;
}

static inline CUgraph fill_graph(const struct fill_probe *f, void **args, CUgraphNode *node)
{
    CUDA_KERNEL_NODE_PARAMS p = fill_params(f, args);
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode_v2(node, g, NULL, 0, &p));
    return g;
}

static inline void fill_step(const struct fill_probe *f, CUgraphExec x, const char *what)
{
    CK(cuGraphLaunch(x, f->s));
    CK(cuStreamSynchronize(f->s));
    float got[FILL_N];
    CK(cuMemcpyDtoH_v2(got, f->out, sizeof got));
    printf("%s first=%.1f last=%.1f\n", what, got[0], got[FILL_N - 1]);
}

static inline void fill_close(struct fill_probe *f)
{
    CK(cuMemFree_v2(f->out));
    CK(cuModuleUnload(f->mod));
    CK(cuStreamDestroy_v2(f->s));
    CK(cuDevicePrimaryCtxRelease_v2(f->dev));
    free(f->ptx);
}

#endif
