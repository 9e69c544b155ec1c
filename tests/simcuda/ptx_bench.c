/*
 * ptx_bench: thread-instructions per second of simcuda's PTX interpreter on
 * one thread (issue 18, item 2; a benchmark, not a test). Runs
 * vr_axpy_f32 from the standard kernels' PTX over 4M elements (grid 1024 x
 * block 256, grid-stride) and vr_sum_range_f32 (one thread: a divergent
 * warp) through ptx_run() directly, with no driver around it.
 * Usage: ptx_bench build/tests/kernels/vr_kernels.ptx [ELEMENTS] (fewer
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

static void bench(struct ptx_module *m, const char *name, unsigned grid, unsigned block,
                  const unsigned char *args, size_t argsize, int reps)
{
    struct ptx_kernel *k = ptx_module_kernel(m, name);
    if (!k || ptx_kernel_error(k)) {
        fprintf(stderr, "ptx_bench: %s: %s\n", name, k ? ptx_kernel_error(k) : "not found");
        exit(1);
    }
    struct ptx_launch l = {{grid, 1, 1}, {block, 1, 1}, 0, args, argsize, 0, NULL, NULL, NULL};
    uint64_t t0 = sim_now_ns(), c0 = cpu_ns(), n = 0;
    for (int i = 0; i < reps; i++)
        n += ptx_run(k, &l);
    double s = (double)(sim_now_ns() - t0) / 1e9, c = (double)(cpu_ns() - c0) / 1e9;
    /* The CPU-time rate too: on a loaded machine the wall-clock one
     * measures the neighbours. */
    printf("%-18s %12llu thread-instructions in %.3f s: %.1f M/s (one worker, interpreter; "
           "%.1f M/s of its CPU time)\n",
           name, (unsigned long long)n, s, (double)n / s / 1e6, (double)n / c / 1e6);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: ptx_bench VR_KERNELS.ptx [ELEMENTS]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    struct ptx_module *m;
    if (ptx_module_load(text, &m) != 0) {
        fprintf(stderr, "ptx_bench: cannot decode %s\n", argv[1]);
        return 1;
    }
    size_t n = argc == 3 ? strtoull(argv[2], NULL, 0) : (size_t)4 << 20;
    if (n < 4) {
        fprintf(stderr, "ptx_bench: ELEMENTS must be at least 4\n");
        return 2;
    }
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    unsigned char a[32] = {0};
    put_u64(a, 0, (uintptr_t)y);
    put_u64(a, 8, (uintptr_t)x);
    float al = 0.5f;
    memcpy(a + 16, &al, 4);
    put_u64(a, 24, n);
    bench(m, "vr_axpy_f32", 1024, 256, a, 32, 3);
    unsigned char s[24];
    put_u64(s, 0, (uintptr_t)y);
    put_u64(s, 8, (uintptr_t)x);
    put_u64(s, 16, (uintptr_t)(x + n / 4));
    bench(m, "vr_sum_range_f32", 1, 32, s, 24, 3);
    ptx_module_unref(m);
    free(x);
    free(y);
    return 0;
}
