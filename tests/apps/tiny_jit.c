/* tiny_jit: a program shaped like tinygrad's CUDA graph JIT (issue 30,
 * items 5 and 8), written for this suite.
 *
 * A context from the legacy cuCtxCreate_v2, the device's capability from
 * cuDeviceComputeCapability, page-locked staging memory from
 * cuMemHostAlloc. A graph of NODES kernel nodes whose arguments are packed
 * by the program into one buffer per kernel and passed through `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END), instantiated with the
 * legacy cuGraphInstantiate_v2. Every call ("JIT step") copies a new input
 * into one of two input buffers (alternating, as a JIT called with another
 * tensor), then re-sets EVERY kernel node through the v1 entry point
 * cuGraphExecKernelNodeSetParams, launches, and reads the output back. Two
 * nodes read the input; one takes a scalar that changes every step; the
 * others get the same arguments every time (the padding of the packed
 * buffers, which no kernel reads, changes every step).
 *
 *   tiny_jit [--steps N] [--inst v2|v1|flags|params] [--resolve link|dlsym|procaddr]
 *            [--args extra|params] [--setparams v1|v2|node] [--out PATH]
 *
 * --inst: the entry point that instantiates; --resolve: how the program
 * reaches it (linked by name, dlsym on libcuda.so.1, or cuGetProcAddress_v2
 * by base name and version: "cuGraphInstantiate" at 10000 for v1 and 11000
 * for v2); --args params passes the same bytes through kernelParams;
 * --setparams the entry point of the updates (cuGraphExecKernelNodeSetParams,
 * its _v2, or cuGraphExecNodeSetParams). The
 * output buffer of every step goes to --out; stdout is one line,
 * "steps=N launches=N setparams=N checksum=HEX".
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "tiny_jit"
#include "vr_check.h"

enum { NODES = 20, TMPS = 4, BUF_FLOATS = 262144 /* 1 MiB */, ARG_BYTES = 32 };
enum kind { SCALE, ADD, AXPY };

struct node {
    enum kind kind;
    int out, a, b;        /* buffer indices: IN = -1, W = -2, OUT = -3, else a temporary */
    float s;
    bool step_scalar;     /* s changes every step */
    CUgraphNode handle;
    uint8_t args[ARG_BYTES];
    size_t size;
    void *extra[5];
    void *kp[4];
};

static CUdeviceptr in[2], w, out, tmp[TMPS];
static CUfunction fn_scale, fn_add, fn_axpy;
static unsigned long long n_elems;

static CUdeviceptr buf_of(int i, int step)
{
    return i == -1 ? in[step % 2] : i == -2 ? w : i == -3 ? out : tmp[i];
}

static void put(uint8_t *b, size_t off, const void *v, size_t n)
{
    memcpy(b + off, v, n);
}

/* Packs node k's arguments for `step` at their parameter offsets (all three
 * kernels: pointer 0, pointer 8, then a float or pointer at 16, n at 24);
 * the 4 padding bytes after a float take a value that changes every step. */
static void pack(struct node *nd, int step)
{
    memset(nd->args, 0xa0 + (step & 15), sizeof nd->args);
    CUdeviceptr o = buf_of(nd->out, step), a = buf_of(nd->a, step);
    put(nd->args, 0, &o, 8);
    put(nd->args, 8, &a, 8);
    float s = nd->step_scalar ? 1.0f - (float)step / 64.0f : nd->s;
    if (nd->kind == ADD) {
        CUdeviceptr b = buf_of(nd->b, step);
        put(nd->args, 16, &b, 8);
    } else {
        put(nd->args, 16, &s, 4);
    }
    put(nd->args, 24, &n_elems, 8);
    nd->size = ARG_BYTES;
    nd->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    nd->extra[1] = nd->args;
    nd->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    nd->extra[3] = &nd->size;
    nd->extra[4] = CU_LAUNCH_PARAM_END;
    for (int i = 0; i < 4; i++)
        nd->kp[i] = nd->args + 8 * i;
}

static CUDA_KERNEL_NODE_PARAMS_v1 params_v1(struct node *nd, bool via_extra)
{
    CUDA_KERNEL_NODE_PARAMS_v1 p;
    memset(&p, 0, sizeof p);
    p.func = nd->kind == SCALE ? fn_scale : nd->kind == ADD ? fn_add : fn_axpy;
    p.gridDimX = 4;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256;
    p.blockDimY = p.blockDimZ = 1;
    if (via_extra)
        p.extra = nd->extra;
    else
        p.kernelParams = nd->kp;
    return p;
}

/* Node k's update for `step` through the entry point `entry`. */
static void set_node(CUgraphExec x, struct node *nd, bool via_extra, const char *entry)
{
    CUDA_KERNEL_NODE_PARAMS_v1 p1 = params_v1(nd, via_extra);
    if (!strcmp(entry, "v1")) {
        CK(cuGraphExecKernelNodeSetParams(x, nd->handle, &p1));
        return;
    }
    CUDA_KERNEL_NODE_PARAMS_v2 p2;
    memset(&p2, 0, sizeof p2);
    p2.func = p1.func;
    memcpy(&p2.gridDimX, &p1.gridDimX, 7 * sizeof(unsigned));
    p2.kernelParams = p1.kernelParams;
    p2.extra = p1.extra;
    if (!strcmp(entry, "v2")) {
        CK(cuGraphExecKernelNodeSetParams_v2(x, nd->handle, &p2));
        return;
    }
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    np.kernel.func = p2.func;
    memcpy(&np.kernel.gridDimX, &p2.gridDimX, 7 * sizeof(unsigned));
    np.kernel.kernelParams = p2.kernelParams;
    np.kernel.extra = p2.extra;
    CK(cuGraphExecNodeSetParams(x, nd->handle, &np));
}

typedef CUresult (*inst_legacy_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*inst_flags_fn)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*inst_params_fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);

/* The instantiating entry point, reached the way --resolve says. */
static void *resolve(const char *inst, const char *how)
{
    const char *sym = !strcmp(inst, "v1")      ? "cuGraphInstantiate"
                      : !strcmp(inst, "v2")    ? "cuGraphInstantiate_v2"
                      : !strcmp(inst, "flags") ? "cuGraphInstantiateWithFlags"
                                               : "cuGraphInstantiateWithParams";
    if (!strcmp(how, "link")) {
        if (!strcmp(inst, "v1"))
            return (void *)(uintptr_t)cuGraphInstantiate;
        if (!strcmp(inst, "v2"))
            return (void *)(uintptr_t)cuGraphInstantiate_v2;
        if (!strcmp(inst, "flags"))
            return (void *)(uintptr_t)cuGraphInstantiateWithFlags;
        return (void *)(uintptr_t)cuGraphInstantiateWithParams;
    }
    if (!strcmp(how, "dlsym")) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        void *fn = lib ? dlsym(lib, sym) : NULL;
        if (!fn) {
            fprintf(stderr, "tiny_jit: dlsym %s: %s\n", sym, lib ? "not found" : dlerror());
            exit(1);
        }
        return fn;
    }
    const char *base = !strcmp(inst, "v1") || !strcmp(inst, "v2") ? "cuGraphInstantiate" : sym;
    int version = !strcmp(inst, "v1") ? 10000 : !strcmp(inst, "v2") ? 11000
                  : !strcmp(inst, "flags") ? 11040 : 12000;
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CK(cuGetProcAddress_v2(base, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    if (st != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
        fprintf(stderr, "tiny_jit: cuGetProcAddress(%s@%d): status %d\n", base, version, (int)st);
        exit(1);
    }
    return fn;
}

static CUgraphExec instantiate(const char *inst, void *fn, CUgraph g)
{
    CUgraphExec x = NULL;
    if (!strcmp(inst, "v1") || !strcmp(inst, "v2")) {
        inst_legacy_fn f;
        memcpy(&f, &fn, sizeof f);
        CK(f(&x, g, NULL, NULL, 0)); /* as tinygrad calls it */
    } else if (!strcmp(inst, "flags")) {
        inst_flags_fn f;
        memcpy(&f, &fn, sizeof f);
        CK(f(&x, g, 0));
    } else {
        inst_params_fn f;
        memcpy(&f, &fn, sizeof f);
        CUDA_GRAPH_INSTANTIATE_PARAMS p;
        memset(&p, 0, sizeof p);
        CK(f(&x, g, &p));
    }
    return x;
}

int main(int argc, char **argv)
{
    int steps = 12;
    const char *inst = "v2", *how = "link", *out_path = NULL, *entry = "v1";
    bool via_extra = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--inst"))
            inst = argv[i + 1];
        else if (!strcmp(argv[i], "--resolve"))
            how = argv[i + 1];
        else if (!strcmp(argv[i], "--args"))
            via_extra = strcmp(argv[i + 1], "params") != 0;
        else if (!strcmp(argv[i], "--setparams"))
            entry = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
    }
    char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    int major = 0, minor = 0;
    CK(cuDeviceComputeCapability(&major, &minor, dev));
    CUcontext ctx;
    CK(cuCtxCreate_v2(&ctx, 0, dev));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmodule mod;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&fn_scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&fn_add, mod, "vr_add_f32"));
    CK(cuModuleGetFunction(&fn_axpy, mod, "vr_axpy_f32"));
    n_elems = vr_extent_f32(BUF_FLOATS);
    size_t bytes = n_elems * sizeof(float);

    for (int i = 0; i < 2; i++)
        CK(cuMemAlloc_v2(&in[i], BUF_FLOATS * sizeof(float)));
    CK(cuMemAlloc_v2(&out, BUF_FLOATS * sizeof(float)));
    for (int i = 0; i < TMPS; i++)
        CK(cuMemAlloc_v2(&tmp[i], BUF_FLOATS * sizeof(float)));
    float *host;
    CK(cuMemHostAlloc((void **)&host, bytes, CU_MEMHOSTALLOC_PORTABLE));
    for (size_t i = 0; i < n_elems; i++)
        host[i] = (float)(i % 17) / 16.0f;
    CK(cuMemAlloc_v2(&w, BUF_FLOATS * sizeof(float)));
    CK(cuMemcpyHtoDAsync_v2(w, host, bytes, s));
    for (int i = 0; i < TMPS; i++)
        CK(cuMemsetD32Async(tmp[i], 0, n_elems, s));

    /* The model: input -> a chain over the temporaries -> output, which reads
     * the input again. */
    static struct node nodes[NODES];
    nodes[0] = (struct node){.kind = SCALE, .out = 0, .a = -1, .s = 0.5f};
    nodes[1] = (struct node){.kind = ADD, .out = 1, .a = 0, .b = -2};
    for (int k = 2; k < NODES - 2; k++) {
        int o = k % TMPS, a = (k + 1) % TMPS, b = (k + 2) % TMPS;
        if (k % 3 == 0)
            nodes[k] = (struct node){.kind = AXPY, .out = o, .a = a, .s = 0.125f};
        else if (k % 3 == 1)
            nodes[k] = (struct node){.kind = ADD, .out = o, .a = a, .b = b};
        else
            nodes[k] = (struct node){.kind = SCALE, .out = o, .a = a, .s = 0.75f};
    }
    nodes[NODES - 2] = (struct node){.kind = SCALE, .out = 2, .a = 1, .step_scalar = true};
    nodes[NODES - 1] = (struct node){.kind = ADD, .out = -3, .a = 2, .b = -1};

    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    for (int k = 0; k < NODES; k++) {
        pack(&nodes[k], 0);
        CUDA_KERNEL_NODE_PARAMS_v1 p = params_v1(&nodes[k], via_extra);
        CK(cuGraphAddKernelNode(&nodes[k].handle, g, k ? &nodes[k - 1].handle : NULL, k ? 1 : 0,
                                &p));
    }
    CUgraphExec x = instantiate(inst, resolve(inst, how), g);

    FILE *of = out_path ? fopen(out_path, "wb") : NULL;
    if (out_path && !of) {
        fprintf(stderr, "tiny_jit: cannot write %s\n", out_path);
        return 1;
    }
    float *res;
    CK(cuMemHostAlloc((void **)&res, bytes, 0));
    uint64_t sum = 1469598103934665603ull;
    unsigned long long launches = 0, setparams = 0;
    for (int step = 0; step < steps; step++) {
        for (size_t i = 0; i < n_elems; i++)
            host[i] = (float)((i * 7 + (size_t)step * 3) % 29) / 8.0f;
        CK(cuMemcpyHtoDAsync_v2(in[step % 2], host, bytes, s));
        for (int k = 0; k < NODES; k++) {
            pack(&nodes[k], step);
            uint8_t before[ARG_BYTES];
            memcpy(before, nodes[k].args, sizeof before);
            set_node(x, &nodes[k], via_extra, entry);
            if (memcmp(before, nodes[k].args, sizeof before) != 0 || nodes[k].size != ARG_BYTES) {
                fprintf(stderr, "tiny_jit: SetParams wrote the program's argument buffer\n");
                return 1;
            }
            setparams++;
        }
        CK(cuGraphLaunch(x, s));
        launches++;
        CK(cuMemcpyDtoHAsync_v2(res, out, bytes, s));
        CK(cuStreamSynchronize(s));
        if (of && fwrite(res, 1, bytes, of) != bytes)
            return 1;
        const uint8_t *b = (const uint8_t *)res;
        for (size_t i = 0; i < bytes; i++)
            sum = (sum ^ b[i]) * 1099511628211ull;
    }
    if (of)
        fclose(of);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuMemFreeHost(res));
    CK(cuMemFreeHost(host));
    for (int i = 0; i < 2; i++)
        CK(cuMemFree_v2(in[i]));
    for (int i = 0; i < TMPS; i++)
        CK(cuMemFree_v2(tmp[i]));
    CK(cuMemFree_v2(w));
    CK(cuMemFree_v2(out));
    CK(cuModuleUnload(mod));
    CK(cuStreamDestroy_v2(s));
    CK(cuCtxDestroy_v2(ctx));
    free(ptx);
    printf("steps=%d launches=%llu setparams=%llu checksum=%016llx\n", steps, launches, setparams,
           (unsigned long long)sum);
    return 0;
}
