/* gromacs_like: an MD loop shaped like GROMACS's CUDA graphs (issue 30,
 * item 8): two graphs, one for even steps and one for odd ones, because
 * the coordinates ping-pong between two buffers. Written for these tests;
 * no code of that project.
 *
 * Step s reads coordinates from xs[s % 2] and writes xs[(s + 1) % 2]:
 *   fill(f, 0), axpy(f, pairlist, 0.25), axpy(f, x_in, -0.5)   forces
 *   copy(x_out, x_in), axpy(x_out, f, dt)                      update
 * The two graphs are captured once and instantiated; every NSTLIST steps a
 * neighbour search rewrites the pair list outside the graphs (a plain
 * launch). At step REALLOC the pair list grows: a new, larger buffer, so
 * both graphs are captured again and applied with cuGraphExecUpdate (a
 * refused update would instantiate again).
 *
 *   --case keep      the graphs live until the end (GROMACS keeps them)
 *   --case destroy   each graph is destroyed right after its instantiate or
 *                    update (the exec no longer needs it)
 *
 * --out FILE: x_out's first 4 KiB after every step; --map FILE: every
 * allocation. Prints the harness's final line; any failed call exits 1.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VR_PROG "gromacs_like"
#include "vr_check.h"

#define N (1u << 19) /* floats: 2 MiB buffers */
#define BYTES ((size_t)N * 4)
#define STEPS 30
#define NSTLIST 5
#define REALLOC 15
#define SAMPLE 4096

static CUmodule mod;
static CUstream stream;
static FILE *map;
static CUfunction f_fill, f_axpy, f_copy;
static bool destroy;

static CUdeviceptr buffer(const char *name, size_t bytes)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, bytes));
    CK(cuMemsetD8_v2(p, 0, bytes));
    CK(cuCtxSynchronize());
    if (map)
        fprintf(map, "buf %s 0x%" PRIx64 " %zu plain\n", name, (uint64_t)p, bytes);
    return p;
}

static void launch(CUfunction f, void **kp)
{
    CK(cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, stream, kp, NULL));
}

static void fill(CUdeviceptr p, float v, unsigned long long n)
{
    void *kp[] = {&p, &v, &n};
    launch(f_fill, kp);
}

static void axpy(CUdeviceptr y, CUdeviceptr x, float a, unsigned long long n)
{
    void *kp[] = {&y, &x, &a, &n};
    launch(f_axpy, kp);
}

/* One step's work from x_in to x_out, captured. */
static CUgraph capture(CUdeviceptr x_in, CUdeviceptr x_out, CUdeviceptr f, CUdeviceptr pl,
                       unsigned long long n)
{
    CK(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    fill(f, 0.0f, n);
    axpy(f, pl, 0.25f, n);
    axpy(f, x_in, -0.5f, n);
    unsigned long long bytes = n * 4;
    void *kp[] = {&x_out, &x_in, &bytes};
    launch(f_copy, kp);
    axpy(x_out, f, 0.125f, n);
    CUgraph g;
    CK(cuStreamEndCapture(stream, &g));
    return g;
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *map_path = NULL, *which = "";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--map"))
            map_path = argv[i + 1];
        else if (!strcmp(argv[i], "--case"))
            which = argv[i + 1];
    }
    destroy = !strcmp(which, "destroy");
    if (!destroy && strcmp(which, "keep")) {
        fprintf(stderr, "usage: gromacs_like --case keep|destroy [--out FILE] [--map FILE]\n");
        return 2;
    }
    alarm(30); /* a hang is a failure with a name */
    FILE *out;
    vr_probe_start(out_path, map_path, &out, &map, &mod, &stream);
    CK(cuModuleGetFunction(&f_fill, mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&f_axpy, mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&f_copy, mod, "vr_copy_u8"));
    unsigned long long n = vr_extent_f32(N);
    CUdeviceptr xs[2] = {buffer("x0", BYTES), buffer("x1", BYTES)};
    CUdeviceptr f = buffer("f", BYTES), pl = buffer("pairlist", BYTES);
    CK(cuStreamSynchronize(stream));
    fill(xs[0], 1.0f, n);

    CUgraph g[2] = {NULL, NULL}, old[2] = {NULL, NULL};
    CUgraphExec ex[2] = {NULL, NULL};
    unsigned long long launches = 0, updates = 0, instantiates = 0;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    static unsigned char sample[SAMPLE];
    for (unsigned step = 0; step < STEPS; step++) {
        if (step % NSTLIST == 0) {
            /* neighbour search: a new pair list, outside the graphs */
            if (step == REALLOC) {
                CK(cuStreamSynchronize(stream));
                CK(cuMemFree_v2(pl));
                pl = buffer("pairlist", 2 * BYTES);
            }
            fill(pl, 0.5f + (float)step, n);
            if (step == 0 || step == REALLOC) {
                for (int p = 0; p < 2; p++) {
                    CUgraph ng = capture(xs[p], xs[!p], f, pl, n);
                    if (!ex[p]) {
                        CK(cuGraphInstantiateWithFlags(&ex[p], ng, 0));
                        instantiates++;
                    } else {
                        CUgraphExecUpdateResultInfo info;
                        CUresult r = cuGraphExecUpdate_v2(ex[p], ng, &info);
                        updates++;
                        if (r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
                            CK(cuGraphExecDestroy(ex[p]));
                            CK(cuGraphInstantiateWithFlags(&ex[p], ng, 0));
                            instantiates++;
                        } else if (r != CUDA_SUCCESS) {
                            vr_check_fail("cuGraphExecUpdate_v2", __FILE__, __LINE__, r);
                        }
                    }
                    if (destroy) {
                        CK(cuGraphDestroy(ng));
                    } else {
                        old[p] = g[p];
                        g[p] = ng;
                    }
                }
            }
        }
        CK(cuGraphLaunch(ex[step % 2], stream));
        launches++;
        CK(cuStreamSynchronize(stream));
        CK(cuMemcpyDtoH_v2(sample, xs[(step + 1) % 2], SAMPLE));
        h = fnv(h, sample, SAMPLE);
        if (out && fwrite(sample, 1, SAMPLE, out) != SAMPLE)
            return 1;
    }
    for (int p = 0; p < 2; p++) {
        CK(cuGraphExecDestroy(ex[p]));
        if (g[p])
            CK(cuGraphDestroy(g[p]));
        if (old[p])
            CK(cuGraphDestroy(old[p]));
    }
    CK(cuMemFree_v2(pl));
    CK(cuMemFree_v2(f));
    CK(cuMemFree_v2(xs[1]));
    CK(cuMemFree_v2(xs[0]));
    fprintf(stderr, "gromacs_like: %llu instantiates, %llu updates\n", instantiates, updates);
    printf("steps=%u launches=%llu setparams=0 checksum=%016" PRIx64 "\n", STEPS, launches, h);
    if (out && fclose(out) != 0)
        return 1;
    if (map && fclose(map) != 0)
        return 1;
    return 0;
}
