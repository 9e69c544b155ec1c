/* profile_probe: registry changes while an exec is profiled (issue 8, item 7:
 * profile launches read only the nodes that may have changed).
 *
 * One graph: fill(out, 0), fill(a, v), then K x axpy(out, a, 1), so out ends
 * as K * v. Every step re-sets every node (absorbed when nothing changed)
 * and launches; only the fill of `a` changes its bytes (v changes).
 *
 *   --case realloc    after the first launch `a` is freed and allocated again
 *                     with its size: with the shim at the same address (its
 *                     cache of freed memory), so the axpy nodes' bytes stay
 *                     the same while they name a new allocation
 *   --case unrelated  after the first and second launches a buffer no node
 *                     names is allocated and freed
 *
 * Options --out FILE (out's first bytes after every step), --map FILE
 * (every allocation: "buf NAME 0xPTR SIZE plain"), --k N (default 32).
 * Prints the harness's final line and exits 0; any failed call exits 1.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *case_name = "";
#define VR_PROG "profile_probe"
#define VR_PROG_DETAIL case_name
#include "vr_check.h"

#define N (1u << 18) /* floats: 1 MiB buffers, VMM-backed by default */
#define BYTES ((size_t)N * 4)
#define STEPS 6
#define SAMPLE 4096 /* bytes of out kept per step */
#define MAXK 256

static CUmodule mod;
static CUstream stream;
static FILE *map;
static unsigned long long setparams, launches;

static CUfunction fn(const char *name)
{
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static CUdeviceptr buffer(const char *name)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, BYTES));
    CK(cuMemsetD32_v2(p, 0, N));
    CK(cuCtxSynchronize());
    if (map)
        fprintf(map, "buf %s 0x%" PRIx64 " %zu plain\n", name, (uint64_t)p, BYTES);
    return p;
}

static CUDA_KERNEL_NODE_PARAMS_v2 params(CUfunction f, void **kp)
{
    return (CUDA_KERNEL_NODE_PARAMS_v2){.func = f, .gridDimX = 64, .gridDimY = 1, .gridDimZ = 1,
                                        .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
                                        .kernelParams = kp};
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

static int run(bool realloc_a, unsigned k, FILE *out)
{
    CUfunction fill = fn("vr_fill_f32"), axpy = fn("vr_axpy_f32");
    CUdeviceptr o = buffer("out"), a = buffer("a");
    float zero = 0.0f, v = 0.0f, one = 1.0f;
    unsigned long long n = vr_extent_f32(N); /* the floats the kernels cover */
    void *kp_zero[] = {&o, &zero, &n}, *kp_fill[] = {&a, &v, &n}, *kp_axpy[] = {&o, &a, &one, &n};
    CUgraph g;
    CUgraphNode nodes[MAXK + 2];
    void **kps[MAXK + 2];
    CUfunction fns[MAXK + 2];
    CK(cuGraphCreate(&g, 0));
    for (unsigned i = 0; i < k + 2; i++) {
        kps[i] = i == 0 ? kp_zero : i == 1 ? kp_fill : kp_axpy;
        fns[i] = i < 2 ? fill : axpy;
        CUDA_KERNEL_NODE_PARAMS_v2 p = params(fns[i], kps[i]);
        CK(cuGraphAddKernelNode_v2(&nodes[i], g, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &p));
    }
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    static unsigned char sample[SAMPLE];
    for (unsigned step = 0; step < STEPS; step++) {
        v = 1.0f + (float)step;
        for (unsigned i = 0; i < k + 2; i++) {
            CUDA_KERNEL_NODE_PARAMS_v2 p = params(fns[i], kps[i]);
            CK(cuGraphExecKernelNodeSetParams_v2(ex, nodes[i], &p));
            setparams++;
        }
        CK(cuGraphLaunch(ex, stream));
        launches++;
        CK(cuStreamSynchronize(stream));
        CK(cuMemcpyDtoH_v2(sample, o, SAMPLE));
        h = fnv(h, sample, SAMPLE);
        if (out && fwrite(sample, 1, SAMPLE, out) != SAMPLE) {
            perror("profile_probe: --out");
            return 1;
        }
        if (realloc_a && step == 0) {
            /* The next step's SetParams carry the new address; where it is
             * the old one, they change no byte. */
            CK(cuMemFree_v2(a));
            a = buffer("a");
        } else if (!realloc_a && step < 2) {
            CUdeviceptr u = buffer("unrelated");
            CK(cuMemFree_v2(u));
        }
    }
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(o));
    printf("steps=%u launches=%llu setparams=%llu checksum=%016" PRIx64 "\n", STEPS, launches,
           setparams, h);
    return 0;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *map_path = NULL;
    unsigned k = 32;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--case"))
            case_name = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--map"))
            map_path = argv[i + 1];
        else if (!strcmp(argv[i], "--k"))
            k = (unsigned)strtoul(argv[i + 1], NULL, 10);
    }
    bool realloc_a = !strcmp(case_name, "realloc");
    if ((!realloc_a && strcmp(case_name, "unrelated")) || k == 0 || k > MAXK) {
        fprintf(stderr, "usage: profile_probe --case realloc|unrelated [--k 1..%d] [--out FILE] "
                        "[--map FILE]\n", MAXK);
        return 2;
    }
    alarm(20); /* a hang is a failure with a name */
    FILE *out;
    vr_probe_start(out_path, map_path, &out, &map, &mod, &stream);
    int rc = run(realloc_a, k, out);
    if (out && fclose(out) != 0)
        rc = 1;
    if (map && fclose(map) != 0)
        rc = 1;
    return rc;
}
