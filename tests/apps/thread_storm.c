/* thread_storm: several threads replay their own graphs at once, each
 * re-allocating one of its buffers every few steps and freeing the old one,
 * so the shim's exec table, allocation registry and slice unbinding are used
 * from many threads truly concurrently. Each thread's result depends only on
 * its own work, so the printed checksums are the same however the threads
 * interleave, with and without the shim.
 *   thread_storm [--threads T] [--steps S] [--k K] [--bytes N] [PTX]
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include "ptx_text.h"

#define MAXT 16

static CUcontext ctx;
static CUfunction fill, axpy, scale;
static unsigned steps = 40, k = 4, nthreads = 4;
static size_t bytes = 1u << 20;

struct job {
    unsigned id;
    uint64_t checksum;
    unsigned long long setparams, launches;
    CUresult err;
    const char *what;
};

#define TRY(call)                                                                  \
    do {                                                                           \
        CUresult r_ = (call);                                                      \
        if (r_ != CUDA_SUCCESS) {                                                  \
            j->err = r_;                                                           \
            j->what = #call;                                                       \
            return NULL;                                                           \
        }                                                                          \
    } while (0)

static uint64_t mix(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void *worker(void *arg)
{
    struct job *j = arg;
    unsigned long long n = bytes / 4;
    CUstream s;
    CUdeviceptr x, y, acc;
    TRY(cuCtxSetCurrent(ctx));
    TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(cuMemAlloc_v2(&x, bytes));
    TRY(cuMemAlloc_v2(&y, bytes));
    TRY(cuMemAlloc_v2(&acc, bytes));
    TRY(cuMemsetD32Async(acc, 0, n, s));
    TRY(cuMemsetD32Async(x, 0, n, s));

    float value = 0, half = 0.5f, one = 1.0f;
    void *a_fill[] = {&y, &value, &n};
    void *a_axpy[] = {&acc, &y, &half, &n};
    void *a_scale[] = {&x, &acc, &one, &n};
    void **args[] = {a_fill, a_axpy, a_scale};
    CUfunction fn[] = {fill, axpy, scale};
    CUDA_KERNEL_NODE_PARAMS p[3];
    CUgraph g;
    CUgraphNode node[3];
    CUgraphExec ex;
    TRY(cuGraphCreate(&g, 0));
    for (int i = 0; i < 3; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].func = fn[i];
        p[i].gridDimX = 64, p[i].gridDimY = p[i].gridDimZ = 1;
        p[i].blockDimX = 256, p[i].blockDimY = p[i].blockDimZ = 1;
        p[i].kernelParams = args[i];
        TRY(cuGraphAddKernelNode_v2(&node[i], g, i ? &node[i - 1] : NULL, i ? 1 : 0, &p[i]));
    }
    TRY(cuGraphInstantiateWithFlags(&ex, g, 0));
    for (unsigned step = 0; step < steps; step++) {
        CUdeviceptr old = 0;
        if (step && step % k == 0) {
            old = y;
            TRY(cuMemAlloc_v2(&y, bytes));
        }
        value = (float)(j->id * 100 + step % 5);
        for (int i = 0; i < 3; i++) {
            TRY(cuGraphExecKernelNodeSetParams_v2(ex, node[i], &p[i]));
            j->setparams++;
        }
        TRY(cuGraphLaunch(ex, s));
        j->launches++;
        if (old)
            TRY(cuMemFree_v2(old)); /* while other threads' launches run */
    }
    TRY(cuStreamSynchronize(s));
    unsigned char *host = malloc(bytes);
    if (!host) {
        j->what = "malloc";
        j->err = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    TRY(cuMemcpyDtoH_v2(host, acc, bytes));
    h = mix(h, host, bytes);
    TRY(cuMemcpyDtoH_v2(host, x, bytes));
    h = mix(h, host, bytes);
    free(host);
    j->checksum = h;
    TRY(cuGraphExecDestroy(ex));
    TRY(cuGraphDestroy(g));
    TRY(cuMemFree_v2(x));
    TRY(cuMemFree_v2(y));
    TRY(cuMemFree_v2(acc));
    TRY(cuStreamDestroy_v2(s));
    return NULL;
}

static const char *name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

int main(int argc, char **argv)
{
    const char *ptx_path = getenv("VR_PTX");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            nthreads = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--k") && i + 1 < argc)
            k = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = (size_t)atoll(argv[++i]);
        else if (!strncmp(argv[i], "--", 2))
            i++; /* --out/--map from the e2e harness: nothing to write */
        else
            ptx_path = argv[i];
    }
    if (!nthreads || nthreads > MAXT || !steps || !k || bytes < 1024 || bytes % 4) {
        fprintf(stderr, "usage: thread_storm [--threads 1..16] [--steps S] [--k K] [--bytes N] [PTX]\n");
        return 2;
    }
    CUdevice dev;
    CUmodule mod;
    char *ptx = ptx_path ? vr_read_text(ptx_path) : NULL;
    bool ok = ptx && !cuInit(0) && !cuDeviceGet(&dev, 0) && !cuDevicePrimaryCtxRetain(&ctx, dev) &&
              !cuCtxSetCurrent(ctx) && !cuModuleLoadData(&mod, ptx) &&
              !cuModuleGetFunction(&fill, mod, "vr_fill_f32") &&
              !cuModuleGetFunction(&axpy, mod, "vr_axpy_f32") &&
              !cuModuleGetFunction(&scale, mod, "vr_scale_f32");
    free(ptx);
    if (!ok) {
        fprintf(stderr, "thread_storm: set-up failed (PTX from VR_PTX or the argument)\n");
        return 1;
    }
    struct job jobs[MAXT];
    pthread_t tid[MAXT];
    for (unsigned t = 0; t < nthreads; t++) {
        jobs[t] = (struct job){.id = t};
        if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) {
            fprintf(stderr, "thread_storm: pthread_create failed\n");
            return 1;
        }
    }
    uint64_t all = 0xcbf29ce484222325ull;
    unsigned long long sp = 0, ln = 0;
    int rc = 0;
    for (unsigned t = 0; t < nthreads; t++) {
        pthread_join(tid[t], NULL);
        if (jobs[t].err) {
            fprintf(stderr, "thread_storm: thread %u: %s: %s\n", t, jobs[t].what,
                    name(jobs[t].err));
            rc = 1;
        }
        printf("thread %u checksum=%016" PRIx64 "\n", t, jobs[t].checksum);
        all = mix(all, (const unsigned char *)&jobs[t].checksum, sizeof jobs[t].checksum);
        sp += jobs[t].setparams;
        ln += jobs[t].launches;
    }
    cuModuleUnload(mod);
    cuDevicePrimaryCtxRelease_v2(dev);
    printf("steps=%u launches=%llu setparams=%llu checksum=%016" PRIx64 "\n", steps, ln, sp, all);
    return rc;
}
