/*
 * ptx_bench: thread-instructions per second of simcuda's PTX interpreter on
 * one thread (issues 18 and 32; a benchmark, not a test). Runs a fixed
 * kernel set through ptx_run() directly, with no driver around it:
 * vr_axpy_f32 (memory-heavy: 4M elements, grid 1024 x block 256,
 * grid-stride) and vr_sum_range_f32 (one thread: a divergent warp) from the
 * standard kernels, and from tests/kernels/bench_kernels.cu bk_arith
 * (arithmetic), bk_shared (shared memory with barriers), bk_atomics and
 * bk_diverge (divergent control flow). Each row prints the rate in wall
 * time and in the thread's CPU time (the one to compare on a loaded
 * machine), the rate measured at the base of issue 32 on the project's VM
 * beside it (docs/bench.md), and a checksum of what the kernel wrote: a
 * faster interpreter must print the same checksums.
 * Usage: ptx_bench VR_KERNELS.ptx [BENCH_KERNELS.ptx] [ELEMENTS] (fewer
 * elements than the default 4M, e.g. to count host instructions under
 * callgrind; the sum then covers a quarter of them).
 */
#include "ptx.h"
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_u64(unsigned char *a, size_t off, uint64_t v)
{
    memcpy(a + off, &v, 8);
}

static void put_u32(unsigned char *a, size_t off, uint32_t v)
{
    memcpy(a + off, &v, 4);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* The CPU-time rates (M thread-instructions/s) of the base of issue 32
 * (commit 6a61fea, ptx_bench built debugoptimized, the project's 2-core VM,
 * best of 3 runs of 3): the "before" column. */
static double base_rate(const char *name)
{
    static const struct {
        const char *name;
        double rate;
    } base[] = {
        {"vr_axpy_f32", 1110}, {"vr_sum_range_f32", 200}, {"bk_arith", 324},
        {"bk_shared", 1030},   {"bk_atomics", 695},       {"bk_diverge", 305},
    };
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        if (!strcmp(base[i].name, name))
            return base[i].rate;
    return 0;
}

struct out {
    void *p;
    size_t n;
};

static void bench(struct ptx_module *m, const char *name, unsigned grid, unsigned block,
                  unsigned shmem, const unsigned char *args, size_t argsize, int reps,
                  struct out o1, struct out o2)
{
    struct ptx_kernel *k = ptx_module_kernel(m, name);
    if (!k || ptx_kernel_error(k)) {
        fprintf(stderr, "ptx_bench: %s: %s\n", name, k ? ptx_kernel_error(k) : "not found");
        exit(1);
    }
    struct ptx_launch l = {{grid, 1, 1}, {block, 1, 1}, shmem, args, argsize, 0, NULL, NULL, NULL};
    uint64_t n = 0, best = UINT64_MAX, wall = 0, h = 0xcbf29ce484222325ull;
    for (int i = 0; i < reps; i++) {
        /* outputs cleared first: every run writes the same bytes */
        if (o1.p)
            memset(o1.p, 0, o1.n);
        if (o2.p)
            memset(o2.p, 0, o2.n);
        uint64_t t0 = sim_now_ns(), c0 = cpu_ns();
        n = ptx_run(k, &l);
        uint64_t c = cpu_ns() - c0, t = sim_now_ns() - t0;
        if (c < best) {
            best = c;
            wall = t;
        }
    }
    if (o1.p)
        h = fnv(h, o1.p, o1.n);
    if (o2.p)
        h = fnv(h, o2.p, o2.n);
    double s = (double)wall / 1e9, c = (double)best / 1e9, r = (double)n / c / 1e6;
    double was = base_rate(name);
    /* The CPU-time rate too: on a loaded machine the wall-clock one
     * measures the neighbours. Best of reps. */
    printf("%-17s %11llu thr-ins  %7.3f s  %7.1f M/s wall  %7.1f M/s cpu", name,
           (unsigned long long)n, s, (double)n / s / 1e6, r);
    if (was > 0)
        printf("  (base %7.1f: x%.2f)", was, r / was);
    printf("  sum %016llx\n", (unsigned long long)h);
}

static struct ptx_module *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    struct ptx_module *m;
    if (ptx_module_load(text, &m) != 0) {
        fprintf(stderr, "ptx_bench: cannot decode %s\n", path);
        exit(1);
    }
    return m;
}

static void bench_set(const char *path)
{
    struct ptx_module *m = load(path);
    enum { NT = 64 * 256, N = 1 << 20 };
    float *fo = calloc(NT, 4), *fin = malloc((size_t)N * 4);
    unsigned *uo = calloc(N, 4), *uin = malloc((size_t)N * 4);
    for (unsigned i = 0; i < N; i++) {
        fin[i] = (float)(i % 977) * 0.125f - 50.0f;
        uin[i] = i * 7919u + (i >> 7);
    }
    unsigned char a[24] = {0};
    put_u64(a, 0, (uintptr_t)fo);
    put_u64(a, 8, (uintptr_t)uo);
    put_u32(a, 16, 200);
    bench(m, "bk_arith", 64, 256, 0, a, 20, 3, (struct out){fo, NT * 4},
          (struct out){uo, NT * 4});
    put_u64(a, 0, (uintptr_t)fo);
    put_u64(a, 8, (uintptr_t)fin);
    put_u32(a, 16, N);
    bench(m, "bk_shared", 64, 256, 256 * 4, a, 20, 3, (struct out){fo, 64 * 4},
          (struct out){NULL, 0});
    put_u64(a, 0, (uintptr_t)uo);
    put_u64(a, 8, (uintptr_t)uin);
    bench(m, "bk_atomics", 64, 256, 0, a, 20, 3, (struct out){uo, 256 * 4},
          (struct out){NULL, 0});
    put_u32(a, 16, N / 4);
    bench(m, "bk_diverge", N / 4 / 256, 256, 0, a, 20, 3, (struct out){uo, N / 4 * 4},
          (struct out){NULL, 0});
    ptx_module_unref(m);
    free(fo);
    free(fin);
    free(uo);
    free(uin);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: ptx_bench VR_KERNELS.ptx [BENCH_KERNELS.ptx] [ELEMENTS]\n");
        return 2;
    }
    const char *set = NULL, *elems = NULL;
    for (int i = 2; i < argc; i++) {
        size_t len = strlen(argv[i]);
        if (len > 4 && !strcmp(argv[i] + len - 4, ".ptx"))
            set = argv[i];
        else
            elems = argv[i];
    }
    ptx_set_threads(1); /* the rate of one core */
    struct ptx_module *m = load(argv[1]);
    size_t n = elems ? strtoull(elems, NULL, 0) : (size_t)4 << 20;
    if (n < 4) {
        fprintf(stderr, "ptx_bench: ELEMENTS must be at least 4\n");
        return 2;
    }
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i;
    unsigned char a[32] = {0};
    put_u64(a, 0, (uintptr_t)y);
    put_u64(a, 8, (uintptr_t)x);
    float al = 0.5f;
    memcpy(a + 16, &al, 4);
    put_u64(a, 24, n);
    /* bench() clears y before each run: y = a * x */
    bench(m, "vr_axpy_f32", 1024, 256, 0, a, 32, 3, (struct out){y, n * 4},
          (struct out){NULL, 0});
    unsigned char s[24];
    float sum = 0;
    put_u64(s, 0, (uintptr_t)&sum);
    put_u64(s, 8, (uintptr_t)x);
    put_u64(s, 16, (uintptr_t)(x + n / 4));
    bench(m, "vr_sum_range_f32", 1, 32, 0, s, 24, 3, (struct out){&sum, 4},
          (struct out){NULL, 0});
    ptx_module_unref(m);
    free(x);
    free(y);
    if (set)
        bench_set(set);
    return 0;
}
