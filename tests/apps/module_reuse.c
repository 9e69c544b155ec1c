/* module_reuse: a function handle that outlives its module.
 *
 * Phase A loads a module holding only vr_copy_u8(dst, src, n), replays a
 * one-node graph with it and unloads the module. Phase B loads a module
 * holding only vr_add_f32(out, a, b, n): a driver may give its function the
 * handle phase A's function had (simcuda does, like a driver reusing freed
 * handles). B's graph is replayed with SetParams that change only the last
 * argument, n, which the copy kernel's layout does not have: a layout cached
 * across the unload would make every update look identical.
 *
 * With --library the same through cuLibraryLoadData and CUkernel nodes.
 *
 * stdout: "reused=0|1" and one line per step with what the step computed,
 * compared byte for byte with and without the shim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "module_reuse"
#include "vr_check.h"

/* The PTX header (up to the first entry) followed by the one entry `entry`,
 * so the module holds exactly one function. */
static char *one_entry(const char *ptx, const char *entry)
{
    const char *first = strstr(ptx, "// .globl");
    char key[128];
    snprintf(key, sizeof key, ".entry %s(", entry);
    const char *start = strstr(ptx, key);
    if (!first || !start)
        return NULL;
    while (start > ptx && start[-1] != '\n')
        start--; /* the whole ".visible .entry" line */
    const char *end = strstr(start, "// .globl");
    if (!end)
        end = start + strlen(start);
    size_t head = (size_t)(first - ptx), body = (size_t)(end - start);
    char *out = malloc(head + body + 2);
    if (!out)
        return NULL;
    memcpy(out, ptx, head);
    out[head] = '\n';
    memcpy(out + head + 1, start, body);
    out[head + 1 + body] = '\0';
    return out;
}

/* A loaded function: from a module (func), or with --library from a
 * library (kern, with func NULL in the node). */
struct loaded {
    CUmodule mod;
    CUlibrary lib;
    CUfunction func;
    CUkernel kern;
};

static int use_library;

static struct loaded load(const char *ptx, const char *entry)
{
    char *text = one_entry(ptx, entry);
    if (!text) {
        fprintf(stderr, "module_reuse: no entry %s in the PTX\n", entry);
        exit(1);
    }
    struct loaded l = {0};
    if (use_library) {
        CK(cuLibraryLoadData(&l.lib, text, NULL, NULL, 0, NULL, NULL, 0));
        CK(cuLibraryGetKernel(&l.kern, l.lib, entry));
    } else {
        CK(cuModuleLoadData(&l.mod, text));
        CK(cuModuleGetFunction(&l.func, l.mod, entry));
    }
    free(text);
    return l;
}

static void unload(const struct loaded *l)
{
    if (use_library)
        CK(cuLibraryUnload(l->lib));
    else
        CK(cuModuleUnload(l->mod));
}

static void kernel_params(CUDA_KERNEL_NODE_PARAMS *p, const struct loaded *l, void **args)
{
    memset(p, 0, sizeof *p);
    p->func = l->func;
    if (!l->func)
        p->kern = l->kern; /* ctx NULL: the current context (cuda.h) */
    p->gridDimX = p->gridDimY = p->gridDimZ = 1;
    p->blockDimX = 64;
    p->blockDimY = p->blockDimZ = 1;
    p->kernelParams = args;
}

enum { N = 256 };

/* A graph of one kernel node, instantiated; each step sets the node's
 * parameters (the program's update) and replays it to completion. */
struct one_node {
    CUgraph g;
    CUgraphNode node;
    CUgraphExec x;
};

static void one_node_make(struct one_node *o, const CUDA_KERNEL_NODE_PARAMS *p)
{
    CK(cuGraphCreate(&o->g, 0));
    CK(cuGraphAddKernelNode_v2(&o->node, o->g, NULL, 0, p));
    CK(cuGraphInstantiateWithFlags(&o->x, o->g, 0));
}

static void one_node_step(const struct one_node *o, const CUDA_KERNEL_NODE_PARAMS *p, CUstream s)
{
    CK(cuGraphExecKernelNodeSetParams_v2(o->x, o->node, p));
    CK(cuGraphLaunch(o->x, s));
    CK(cuStreamSynchronize(s));
}

static void one_node_free(const struct one_node *o)
{
    CK(cuGraphExecDestroy(o->x));
    CK(cuGraphDestroy(o->g));
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--library")) {
        use_library = 1;
        argc--, argv++;
    }
    const char *ptx_path = argc > 1 ? argv[1] : getenv("VR_PTX");
    char *ptx = vr_ptx_or_die(ptx_path);
    CUstream s;
    CK(cuInit(0));
    CUdevice dev = vr_ctx_current(0, NULL);
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    CUdeviceptr dst, src, out, a, b;
    CK(cuMemAlloc_v2(&dst, N));
    CK(cuMemAlloc_v2(&src, N));
    CK(cuMemAlloc_v2(&out, N * sizeof(float)));
    CK(cuMemAlloc_v2(&a, N * sizeof(float)));
    CK(cuMemAlloc_v2(&b, N * sizeof(float)));
    unsigned char bytes[N];
    float fa[N], fb[N];
    for (int i = 0; i < N; i++) {
        bytes[i] = (unsigned char)(i * 7 + 1);
        fa[i] = (float)i;
        fb[i] = 1000.0f;
    }
    CK(cuMemcpyHtoD_v2(src, bytes, N));
    CK(cuMemcpyHtoD_v2(a, fa, sizeof fa));
    CK(cuMemcpyHtoD_v2(b, fb, sizeof fb));

    /* Phase A: vr_copy_u8 */
    struct loaded copy = load(ptx, "vr_copy_u8");
    {
        unsigned long long n = 16;
        void *args[] = {&dst, &src, &n};
        CUDA_KERNEL_NODE_PARAMS p;
        kernel_params(&p, &copy, args);
        struct one_node o;
        one_node_make(&o, &p);
        for (int step = 0; step < 5; step++) {
            n = 16 + 16 * (unsigned long long)step;
            CK(cuMemsetD8Async(dst, 0, N, s));
            one_node_step(&o, &p, s);
            unsigned char got[N];
            CK(cuMemcpyDtoH_v2(got, dst, N));
            unsigned sum = 0, nonzero = 0;
            for (int i = 0; i < N; i++) {
                sum += got[i];
                nonzero += got[i] != 0;
            }
            printf("copy step=%d n=%llu copied=%u sum=%u\n", step, n, nonzero, sum);
        }
        one_node_free(&o);
    }
    unload(&copy);

    /* Phase B: vr_add_f32, perhaps under phase A's handle */
    struct loaded add = load(ptx, "vr_add_f32");
    printf("reused=%d\n", use_library ? add.kern == copy.kern : add.func == copy.func);
    {
        unsigned long long n = N;
        void *args[] = {&out, &a, &b, &n};
        CUDA_KERNEL_NODE_PARAMS p;
        kernel_params(&p, &add, args);
        struct one_node o;
        one_node_make(&o, &p);
        for (int step = 0; step < 8; step++) {
            n = N - 24 * (unsigned long long)step;
            CK(cuMemsetD32Async(out, 0, N, s));
            one_node_step(&o, &p, s);
            float got[N];
            CK(cuMemcpyDtoH_v2(got, out, sizeof got));
            double sum = 0;
            unsigned written = 0;
            for (int i = 0; i < N; i++) {
                sum += got[i];
                written += got[i] != 0.0f;
            }
            printf("add step=%d n=%llu written=%u sum=%.1f\n", step, n, written, sum);
        }
        one_node_free(&o);
    }
    unload(&add);
    CK(cuMemFree_v2(dst));
    CK(cuMemFree_v2(src));
    CK(cuMemFree_v2(out));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    CK(cuStreamDestroy_v2(s));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    free(ptx);
    return 0;
}
