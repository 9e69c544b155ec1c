/* churn_probe: a graph whose buffers are freed and allocated again every
 * step (issue 17, item 4), in the ways that could make memory the shim
 * keeps for reuse name the wrong bytes. Prints "ok ..." with the final
 * values of each accumulator, or names the first wrong value and exits 1.
 *
 * The graph: M kernel nodes in a chain, node j: acc += B[j] over the first
 * n floats of this step's buffers (vr_add_f32; all of them, or as many as
 * VR_EXTENT covers: vr_check.h). Every step allocates M new
 * buffers (size below), fills B[j] with a value of (step, j) on a stream of
 * its own, waits for the fill, re-points
 * every node (cuGraphExecKernelNodeSetParams_v2), launches, and frees:
 *
 *   --keep 1      the previous step's buffers (two generations alive, as
 *                 graph_bench's churn); --keep 0: this step's, right after
 *                 the launch that reads them
 *   --free sync   cuMemFree (the native call waits for the device: after
 *                 each, the launch stream must be idle, cuStreamQuery);
 *          async  cuMemFreeAsync on the launch's stream (it does not)
 *   --sizes same  every buffer 2 MiB; class: 2 MiB or 2 MiB - 4 KiB (one
 *                 padded size: the same cached memory, another size), so
 *                 the buffer at an address differs from the one freed
 *                 there; padded: 2 MiB or 4 MiB (other padded sizes)
 *   --shared      a second exec of the same graph keeps step 0's pointers;
 *                 whenever this step's buffers lie at exactly step 0's
 *                 addresses (the address is live again, so the program may
 *                 use it), it is launched too and must read this step's bytes
 *   --threads T   T threads, each its own stream, graph, exec and buffers
 *   --steps S     (default 40)
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#define VR_PROG "churn_probe"
#include "vr_check.h"

#define M 4
#define MIB ((size_t)1 << 20)
#define ACC_FLOATS (4 * MIB / 4)

static struct {
    int keep, steps, threads;
    bool async, shared;
    const char *sizes;
} o = { 1, 40, 1, false, false, "same" };

static CUmodule mod;
static CUcontext ctx;

static size_t size_of(int s)
{
    int f = (s / (o.keep + 1)) % 2;
    if (!strcmp(o.sizes, "class"))
        return 2 * MIB - (size_t)f * 4096;
    if (!strcmp(o.sizes, "padded"))
        return (2 + 2 * (size_t)f) * MIB;
    return 2 * MIB;
}

static float value_of(int s, int j)
{
    return (float)((s * M + j) % 7 + 1);
}

/* Regions of an accumulator, cut where the sizes end: [0, SMALL), [SMALL,
 * 2 MiB), [2 MiB, 4 MiB) in floats; where the kernels cover less (the
 * extent), cut there too (main). */
#define SMALL ((2 * MIB - 4096) / 4)
static size_t cut[4] = { 0, SMALL, 2 * MIB / 4, ACC_FLOATS };
static size_t extent = ACC_FLOATS;

struct acc {
    CUdeviceptr d;
    double want[3]; /* every float of region r */
};

/* One step's effect: the first n floats grow by v. */
static void expect(struct acc *a, size_t n, float v)
{
    for (int r = 0; r < 3; r++)
        if (n >= cut[r + 1])
            a->want[r] += v;
}

/* Every float of acc against its region's value. */
static bool check(const char *what, int t, const struct acc *a, char *line, size_t cap)
{
    float *h = malloc(ACC_FLOATS * sizeof *h);
    if (!h)
        return false;
    CK(cuMemcpyDtoH_v2(h, a->d, ACC_FLOATS * sizeof *h));
    for (int r = 0; r < 3; r++)
        for (size_t i = cut[r]; i < cut[r + 1]; i++)
            if (h[i] != (float)a->want[r]) {
                fprintf(stderr, "churn_probe: thread %d %s[%zu] = %g, want %g\n", t, what, i,
                        h[i], a->want[r]);
                free(h);
                return false;
            }
    /* The second exec runs as often as the addresses come back: only its
     * correctness is the same with and without the shim. */
    if (!strcmp(what, "shared"))
        snprintf(line, cap, " %s=ok", what);
    else
        snprintf(line, cap, " %s=%g/%g/%g", what, h[0], h[cut[1]], h[ACC_FLOATS - 1]);
    free(h);
    return true;
}

/* Whether every one of step 0's buffers is one of this step's (in any
 * order: the second exec then reads this step's buffers, live again). */
static bool live_again(const CUdeviceptr *first, const CUdeviceptr *cur)
{
    for (int j = 0; j < M; j++) {
        bool in = false;
        for (int k = 0; k < M; k++)
            in = in || first[j] == cur[k];
        if (!in)
            return false;
    }
    return true;
}

struct worker {
    int t;
    bool ok;
    char line[256];
    unsigned shared_launches;
    unsigned early_frees; /* cuMemFree returned with the launch before it unfinished */
    size_t free_at_start; /* after the accumulators */
    unsigned long long ids[1024]; /* buffer ids seen */
    size_t nids;
};

/* What the driver says of a new allocation: its own size, and a buffer id
 * no allocation of this run had before (the driver's ids are process-wide
 * unique, whatever address comes back). */
static bool as_native(struct worker *w, CUdeviceptr p, size_t bytes)
{
    CUdeviceptr base;
    size_t size;
    unsigned long long id = 0;
    CK(cuMemGetAddressRange_v2(&base, &size, p));
    CK(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
    bool fresh = true;
    for (size_t i = 0; i < w->nids; i++)
        fresh = fresh && w->ids[i] != id;
    if (w->nids < sizeof w->ids / sizeof w->ids[0])
        w->ids[w->nids++] = id;
    if (base != p || size != bytes || !fresh) {
        fprintf(stderr, "churn_probe: thread %d: an allocation of %zu bytes: range %zu at %+lld, "
                "buffer id %s\n", w->t, bytes, size, (long long)(base - p),
                fresh ? "new" : "seen before");
        return false;
    }
    return true;
}

/* Points every node at acc and b (adds them to g when ex is NULL). */
static void set_nodes(CUgraph g, CUgraphExec ex, CUgraphNode *nodes, CUfunction add,
                      CUdeviceptr *acc, CUdeviceptr *b, unsigned long long *n)
{
    for (int j = 0; j < M; j++) {
        void *kp[] = { acc, acc, &b[j], n };
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.func = add;
        p.gridDimX = 64, p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = 256, p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = kp; /* copied by the call */
        if (ex)
            CK(cuGraphExecKernelNodeSetParams_v2(ex, nodes[j], &p));
        else
            CK(cuGraphAddKernelNode_v2(&nodes[j], g, j ? &nodes[j - 1] : NULL, j ? 1 : 0, &p));
    }
}

static void *work(void *arg)
{
    struct worker *w = arg;
    CK(cuCtxSetCurrent(ctx));
    CUfunction add;
    CK(cuModuleGetFunction(&add, mod, "vr_add_f32"));
    CUstream st, fill;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&fill, CU_STREAM_NON_BLOCKING));
    struct acc a = { vr_buffer_f32(ACC_FLOATS, 0.0f), { 0 } };
    struct acc a2 = { vr_buffer_f32(ACC_FLOATS, 0.0f), { 0 } };
    CUdeviceptr cur[M], prev[M] = { 0 }, first[M];
    CUgraph g;
    CUgraphNode nodes[M];
    CUgraphExec ex, ex2 = NULL;
    unsigned long long n = 0;
    size_t total;
    CK(cuMemGetInfo_v2(&w->free_at_start, &total));
    for (int s = 0; s < o.steps; s++) {
        size_t bytes = size_of(s);
        n = bytes / 4 < extent ? bytes / 4 : extent;
        for (int j = 0; j < M; j++) {
            CK(cuMemAlloc_v2(&cur[j], bytes));
            if (!as_native(w, cur[j], bytes))
                return NULL;
            union { float f; unsigned u; } v = { value_of(s, j) };
            CK(cuMemsetD32Async(cur[j], v.u, bytes / 4, fill));
            expect(&a, n, v.f);
        }
        /* Filled apart from the launch stream, so nothing orders the fill
         * after work still queued there: only the allocator's rules keep it
         * off memory a pending launch reads. */
        CK(cuStreamSynchronize(fill));
        if (s == 0) {
            CK(cuGraphCreate(&g, 0));
            set_nodes(g, NULL, nodes, add, &a.d, cur, &n);
            CK(cuGraphInstantiateWithFlags(&ex, g, 0));
            if (o.shared) {
                memcpy(first, cur, sizeof first);
                CK(cuGraphInstantiateWithFlags(&ex2, g, 0));
                set_nodes(g, ex2, nodes, add, &a2.d, cur, &n);
            }
            CK(cuStreamSynchronize(st));
        }
        set_nodes(g, ex, nodes, add, &a.d, cur, &n);
        CK(cuGraphLaunch(ex, st));
        if (o.shared && live_again(first, cur) && size_of(0) == bytes) {
            CK(cuGraphLaunch(ex2, st));
            for (int j = 0; j < M; j++)
                expect(&a2, n, value_of(s, j));
            w->shared_launches++;
        }
        CUdeviceptr *gone = o.keep ? prev : cur;
        for (int j = 0; j < M && (gone != prev || s > 0); j++) {
            if (o.async)
                CK(cuMemFreeAsync(gone[j], st));
            else {
                CK(cuMemFree_v2(gone[j]));
                /* The native free returns once the device finished the work
                 * before it, and a program may rely on that: this stream's
                 * launch is complete, with no synchronizing call of ours. */
                CUresult q = cuStreamQuery(st);
                if (q != CUDA_SUCCESS)
                    w->early_frees++;
            }
        }
        if (o.keep)
            for (int j = 0; j < M; j++)
                prev[j] = cur[j];
    }
    CK(cuStreamSynchronize(st));
    w->ok = check("acc", w->t, &a, w->line, sizeof w->line);
    if (w->ok && w->early_frees) {
        fprintf(stderr,
                "churn_probe: thread %d: %u cuMemFree returned before the launch before "
                "them completed\n", w->t, w->early_frees);
        w->ok = false;
    }
    if (w->ok && o.shared) {
        size_t len = strlen(w->line);
        w->ok = check("shared", w->t, &a2, w->line + len, sizeof w->line - len);
    }
    if (o.keep)
        for (int j = 0; j < M; j++)
            CK(cuMemFree_v2(prev[j]));
    /* Every step's memory is free again while the execs still live: nothing
     * the shim keeps for them may hold on to memory the program freed. */
    if (o.threads == 1) {
        size_t free_now, total;
        CK(cuCtxSynchronize());
        CK(cuMemGetInfo_v2(&free_now, &total));
        size_t len = strlen(w->line);
        snprintf(w->line + len, sizeof w->line - len, " memory_back=%d", free_now >= w->free_at_start);
    }
    if (ex2)
        CK(cuGraphExecDestroy(ex2));
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(a.d));
    CK(cuMemFree_v2(a2.d));
    CK(cuStreamDestroy_v2(st));
    CK(cuStreamDestroy_v2(fill));
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--keep"))
            o.keep = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--free"))
            o.async = !strcmp(argv[i + 1], "async");
        else if (!strcmp(argv[i], "--sizes"))
            o.sizes = argv[i + 1];
        else if (!strcmp(argv[i], "--shared"))
            o.shared = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--threads"))
            o.threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            o.steps = atoi(argv[i + 1]);
    }
    if (o.threads < 1 || o.threads > 8 || o.steps < 1) {
        fprintf(stderr, "churn_probe: bad arguments\n");
        return 2;
    }
    extent = vr_extent_f32(ACC_FLOATS);
    for (int r = 1; r < 3; r++)
        cut[r] = cut[r] < extent ? cut[r] : extent;
    CK(cuInit(0));
    vr_ctx_current(0, &ctx);
    char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
    CK(cuModuleLoadData(&mod, ptx));
    free(ptx);
    struct worker w[8];
    pthread_t th[8];
    for (int t = 0; t < o.threads; t++) {
        w[t] = (struct worker){ .t = t };
        if (pthread_create(&th[t], NULL, work, &w[t]) != 0)
            return 1;
    }
    bool ok = true;
    for (int t = 0; t < o.threads; t++) {
        pthread_join(th[t], NULL);
        ok = ok && w[t].ok;
    }
    if (!ok)
        return 1;
    for (int t = 0; t < o.threads; t++) {
        printf("ok thread %d%s\n", t, w[t].line);
        fprintf(stderr, "thread %d shared_launches=%u\n", t, w[t].shared_launches);
    }
    CK(cuModuleUnload(mod));
    return 0;
}
