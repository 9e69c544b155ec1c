/* mpi_ranks: one job of several processes, one device each, as an MPI
 * program on a GPU node runs (rank r uses device r % count).
 *
 * Every rank builds a graph of --nodes kernel nodes over two state buffers
 * and an input, and runs --steps steps; each step re-sets every node
 * (cuGraphExecKernelNodeSetParams) with the state buffers swapped, then
 * launches: node 0 writes P[(s+1)%2] = 0.5 * P[s%2], nodes 1.. add a_i * X
 * into it. Each rank checks its result against a host reference; rank 0
 * gathers every rank's bytes, writes them to --out and prints one line per
 * rank and one for the job. Exit 3 when any rank's result is wrong.
 *
 *   mpirun -n R mpi_ranks [--nodes N] [--steps S] [--elems E] [--out FILE]
 */
#include <mpi.h>

#include <cuda.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "mpi_ranks"
#include "vr_check.h"

static unsigned long num(const char *s)
{
    char *e;
    unsigned long v = strtoul(s, &e, 10);
    if (*e || v == 0) {
        fprintf(stderr, "mpi_ranks: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *out = NULL, *ptx = NULL;
    unsigned long nodes = 16, steps = 20, elems = 512;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--ptx"))
            ptx = argv[i + 1];
        else if (!strcmp(argv[i], "--nodes"))
            nodes = num(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = num(argv[i + 1]);
        else if (!strcmp(argv[i], "--elems"))
            elems = num(argv[i + 1]);
        else {
            fprintf(stderr, "mpi_ranks: unknown option %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }

    CK(cuInit(0));
    int count;
    CK(cuDeviceGetCount(&count));
    CUcontext ctx;
    CUdevice dev = vr_ctx_current(rank % count, &ctx);
    char *image = vr_ptx_or_die(ptx ? ptx : getenv("VR_PTX"));
    CUmodule mod;
    CK(cuModuleLoadData(&mod, image));
    free(image);
    CUfunction f_scale, f_axpy;
    CK(cuModuleGetFunction(&f_scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&f_axpy, mod, "vr_axpy_f32"));
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

    /* 2 MiB buffers: what the shim backs with VMM (its granularity). */
    const size_t bytes = (size_t)2 << 20;
    if (elems * sizeof(float) > bytes)
        MPI_Abort(MPI_COMM_WORLD, 2);
    const float base = 1.0f + (float)rank;
    CUdeviceptr p[2], x;
    CK(cuMemAlloc_v2(&p[0], bytes));
    CK(cuMemAlloc_v2(&p[1], bytes));
    CK(cuMemAlloc_v2(&x, bytes));
    float *h = malloc(elems * sizeof *h);
    for (unsigned long i = 0; i < elems; i++)
        h[i] = base + 0.01f * (float)(i % 31);
    CK(cuMemcpyHtoD_v2(p[0], h, elems * sizeof *h));
    CK(cuMemsetD32_v2(p[1], 0, elems));
    for (unsigned long i = 0; i < elems; i++)
        h[i] = 0.001f * (float)((i + (unsigned long)rank) % 17);
    CK(cuMemcpyHtoD_v2(x, h, elems * sizeof *h));

    /* One argument block per node, kept alive: SetParams reads them. */
    struct args {
        CUdeviceptr o, i;
        float s;
        unsigned long long n;
        void *kp[4];
    } *a = calloc(nodes, sizeof *a);
    CUDA_KERNEL_NODE_PARAMS *kn = calloc(nodes, sizeof *kn);
    CUgraphNode *gn = calloc(nodes, sizeof *gn);
    if (!h || !a || !kn || !gn)
        MPI_Abort(MPI_COMM_WORLD, 1);
    const unsigned block = 128, grid = (unsigned)((elems + block - 1) / block);
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    for (unsigned long i = 0; i < nodes; i++) {
        a[i].n = elems;
        a[i].s = i == 0 ? 0.5f : 0.25f / (float)i;
        a[i].o = p[1];
        a[i].i = i == 0 ? p[0] : x;
        a[i].kp[0] = &a[i].o;
        a[i].kp[1] = &a[i].i;
        a[i].kp[2] = &a[i].s;
        a[i].kp[3] = &a[i].n;
        kn[i] = (CUDA_KERNEL_NODE_PARAMS){
            .func = i == 0 ? f_scale : f_axpy,
            .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
            .blockDimX = block, .blockDimY = 1, .blockDimZ = 1,
            .kernelParams = a[i].kp,
        };
        CK(cuGraphAddKernelNode_v2(&gn[i], g, i ? &gn[i - 1] : NULL, i ? 1 : 0, &kn[i]));
    }
    CUgraphExec exec;
    CK(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (unsigned long s = 0; s < steps; s++) {
        CUdeviceptr from = p[s % 2], to = p[(s + 1) % 2];
        for (unsigned long i = 0; i < nodes; i++) {
            a[i].o = to;
            if (i == 0)
                a[i].i = from;
            CK(cuGraphExecKernelNodeSetParams_v2(exec, gn[i], &kn[i]));
        }
        CK(cuGraphLaunch(exec, st));
    }
    CK(cuStreamSynchronize(st));

    float *res = malloc(elems * sizeof *res);
    if (!res)
        MPI_Abort(MPI_COMM_WORLD, 1);
    CK(cuMemcpyDtoH_v2(res, p[steps % 2], elems * sizeof *res));
    /* The host reference, in the kernels' order of operations. */
    int bad = 0;
    for (unsigned long i = 0; i < elems; i++) {
        float v[2] = {base + 0.01f * (float)(i % 31), 0.0f};
        float xi = 0.001f * (float)((i + (unsigned long)rank) % 17);
        for (unsigned long s = 0; s < steps; s++) {
            float y = 0.5f * v[s % 2];
            for (unsigned long k = 1; k < nodes; k++)
                y = (0.25f / (float)k) * xi + y;
            v[(s + 1) % 2] = y;
        }
        float want = v[steps % 2];
        if (!(fabsf(res[i] - want) <= 1e-5f * fabsf(want) + 1e-6f)) {
            if (!bad)
                fprintf(stderr, "mpi_ranks: rank %d element %lu: %g, expected %g\n", rank, i,
                        res[i], want);
            bad = 1;
        }
    }
    CUdevice used;
    CK(cuCtxGetDevice(&used));

    float *all = rank == 0 ? malloc((size_t)size * elems * sizeof *all) : NULL;
    int *devs = rank == 0 ? malloc((size_t)size * sizeof *devs) : NULL;
    int any_bad = 0, mydev = (int)used;
    MPI_Gather(res, (int)elems, MPI_FLOAT, all, (int)elems, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Gather(&mydev, 1, MPI_INT, devs, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t job = 0xcbf29ce484222325ull;
        for (int r = 0; r < size; r++) {
            uint64_t hr = 0xcbf29ce484222325ull;
            const unsigned char *b = (const unsigned char *)(all + (size_t)r * elems);
            for (size_t k = 0; k < elems * sizeof(float); k++) {
                hr = (hr ^ b[k]) * 0x100000001b3ull;
                job = (job ^ b[k]) * 0x100000001b3ull;
            }
            printf("rank %d device %d checksum %016" PRIx64 "\n", r, devs[r], hr);
        }
        printf("job ranks=%d steps=%lu nodes=%lu checksum=%016" PRIx64 " %s\n", size, steps,
               nodes, job, any_bad ? "WRONG" : "verified");
        if (out) {
            FILE *fo = fopen(out, "wb");
            if (!fo || fwrite(all, sizeof(float), (size_t)size * elems, fo) !=
                           (size_t)size * elems || fclose(fo)) {
                fprintf(stderr, "mpi_ranks: cannot write %s\n", out);
                any_bad = 1;
            }
        }
    }
    (void)dev;
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(p[0]));
    CK(cuMemFree_v2(p[1]));
    CK(cuMemFree_v2(x));
    CK(cuStreamDestroy_v2(st));
    CK(cuModuleUnload(mod));
    free(h);
    free(a);
    free(kn);
    free(gn);
    free(res);
    free(all);
    free(devs);
    MPI_Bcast(&any_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return any_bad ? 3 : 0;
}
