/* pair_probe: a [begin, end) pointer pair into one allocation (issue 30,
 * item 2: pairs stay pairs).
 *
 * One graph of two nodes on a buffer X:
 *   fill(X + size - TAIL, v, TAIL / 4)         the buffer's tail, v = step + 1
 *   sum(out, X + size - 4 k, X + size)         out[0] = k * v
 * `end` is X's one-past-the-end (base + size: with a size that is a multiple
 * of the granularity, exactly where its mapping stops) and keeps its offset
 * every step; `begin` moves (k changes every step), so it never anchors.
 *
 *   --case pingpong   X alternates between two buffers A and B
 *   --case stable     X is always A
 *   --case late       X is A (begin fixed: both words anchors) until step
 *                     LATE; then X is a small buffer S (native under the
 *                     shim) allocated then, where simcuda's address space
 *                     puts it: right below A's start when there is room,
 *                     so S's end pointer is A's start (the program cannot
 *                     tell, nor should it have to)
 *
 * Options --size BYTES (each buffer; default 2 MiB, a multiple of simcuda's
 * granularity), --out FILE (out[0] after every step), --map FILE (every
 * allocation: "buf NAME 0xPTR SIZE plain"). Every step checks its sum
 * (exit 3 on a wrong one). Prints the harness's final line; any failed call
 * exits 1.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *case_name = "";
#define VR_PROG "pair_probe"
#define VR_PROG_DETAIL case_name
#include "vr_check.h"

#define STEPS 12
#define TAIL 4096u /* bytes of the tail filled and summed from */
#define LATE 5
#define SMALL ((size_t)64 << 10)

static CUmodule mod;
static CUstream stream;
static FILE *map;

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

/* A small buffer, ending at `at` if the address space has room there
 * (tried among MAXTRY allocations, the others freed); the last one else. */
#define MAXTRY 512
static CUdeviceptr below(CUdeviceptr at)
{
    static CUdeviceptr tried[MAXTRY];
    unsigned n = 0;
    CUdeviceptr p = 0;
    while (n < MAXTRY) {
        CK(cuMemAlloc_v2(&p, SMALL));
        tried[n++] = p;
        if (p + SMALL == at)
            break;
    }
    for (unsigned i = 0; i + 1 < n; i++)
        CK(cuMemFree_v2(tried[i]));
    CK(cuMemsetD8_v2(p, 0, SMALL));
    CK(cuCtxSynchronize());
    if (map)
        fprintf(map, "buf small 0x%" PRIx64 " %zu plain\n", (uint64_t)p, SMALL);
    return p;
}

static CUDA_KERNEL_NODE_PARAMS_v2 params(CUfunction f, unsigned grid, void **kp)
{
    return (CUDA_KERNEL_NODE_PARAMS_v2){.func = f, .gridDimX = grid, .gridDimY = 1,
                                        .gridDimZ = 1, .blockDimX = grid > 1 ? 256 : 1,
                                        .blockDimY = 1, .blockDimZ = 1, .kernelParams = kp};
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

static int run(bool pingpong, bool late, size_t bytes, FILE *out)
{
    CUfunction fill, sum;
    CK(cuModuleGetFunction(&fill, mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&sum, mod, "vr_sum_range_f32"));
    CUdeviceptr a = buffer("a", bytes), b = pingpong ? buffer("b", bytes) : a;
    CUdeviceptr o = buffer("out", 4096), small = 0;
    CUdeviceptr tail = a + bytes - TAIL, begin = a + bytes - 4, end = a + bytes;
    float v = 1.0f;
    unsigned long long n = TAIL / 4;
    void *kp_fill[] = {&tail, &v, &n}, *kp_sum[] = {&o, &begin, &end};
    CUgraph g;
    CUgraphNode nf, ns;
    CK(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS_v2 pf = params(fill, 4, kp_fill), ps = params(sum, 1, kp_sum);
    CK(cuGraphAddKernelNode_v2(&nf, g, NULL, 0, &pf));
    CK(cuGraphAddKernelNode_v2(&ns, g, &nf, 1, &ps));
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    unsigned long long setparams = 0, launches = 0;
    for (unsigned step = 0; step < STEPS; step++) {
        CUdeviceptr x = pingpong && (step & 1) ? b : a;
        size_t xb = bytes;
        unsigned k = 16 + (step * 37) % (TAIL / 4 - 16);
        if (late && step < LATE)
            k = 64;
        if (late && step == LATE)
            small = below(a);
        if (late && step >= LATE) {
            x = small;
            xb = SMALL;
        }
        v = 1.0f + (float)step;
        tail = x + xb - TAIL;
        begin = x + xb - 4 * (CUdeviceptr)k;
        end = x + xb;
        pf = params(fill, 4, kp_fill);
        ps = params(sum, 1, kp_sum);
        CK(cuGraphExecKernelNodeSetParams_v2(ex, nf, &pf));
        CK(cuGraphExecKernelNodeSetParams_v2(ex, ns, &ps));
        setparams += 2;
        CK(cuGraphLaunch(ex, stream));
        launches++;
        CK(cuStreamSynchronize(stream));
        float got;
        CK(cuMemcpyDtoH_v2(&got, o, sizeof got));
        h = fnv(h, (const unsigned char *)&got, sizeof got);
        if (out && fwrite(&got, sizeof got, 1, out) != 1) {
            perror("pair_probe: --out");
            return 1;
        }
        if (got != (float)k * v) {
            fprintf(stderr, "pair_probe %s: step %u: sum %g, want %g (k %u, v %g)\n", case_name,
                    step, (double)got, (double)((float)k * v), k, (double)v);
            return 3;
        }
    }
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuMemFree_v2(o));
    if (b != a)
        CK(cuMemFree_v2(b));
    if (small)
        CK(cuMemFree_v2(small));
    CK(cuMemFree_v2(a));
    printf("steps=%u launches=%llu setparams=%llu checksum=%016" PRIx64 "\n", STEPS, launches,
           setparams, h);
    return 0;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *map_path = NULL;
    size_t bytes = (size_t)2 << 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--case"))
            case_name = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--map"))
            map_path = argv[i + 1];
        else if (!strcmp(argv[i], "--size"))
            bytes = (size_t)strtoull(argv[i + 1], NULL, 0);
    }
    bool pingpong = !strcmp(case_name, "pingpong"), late = !strcmp(case_name, "late");
    if ((!pingpong && !late && strcmp(case_name, "stable")) || bytes < TAIL || bytes % 4) {
        fprintf(stderr, "usage: pair_probe --case pingpong|stable|late [--size BYTES >= %u] "
                        "[--out FILE] [--map FILE]\n", TAIL);
        return 2;
    }
    alarm(20); /* a hang is a failure with a name */
    FILE *out;
    vr_probe_start(out_path, map_path, &out, &map, &mod, &stream);
    int rc = run(pingpong, late, bytes, out);
    if (out && fclose(out) != 0)
        rc = 1;
    if (map && fclose(map) != 0)
        rc = 1;
    return rc;
}
