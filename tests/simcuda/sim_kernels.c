/*
 * Host implementations of the standard kernels (DESIGN.md, "Standard
 * kernels (contract)"). Same float expressions as tests/kernels/vr_kernels.cu,
 * compiled with -ffp-contract=off so no multiply-add is fused: results are
 * deterministic bit for bit. A grid-stride loop covers all n elements for
 * any launch shape, so the host versions simply loop over n.
 */
#include "sim.h"

#include <stdatomic.h>
#include <string.h>

/* Launches run here (SIMCUDA_STATS says which path the standard kernels
 * took; a test sees that the suites really use the interpreter). */
static _Atomic uint64_t g_host_runs;

uint64_t sim_kernel_host_runs(void)
{
    return atomic_load_explicit(&g_host_runs, memory_order_relaxed);
}

static void count_run(void)
{
    atomic_fetch_add_explicit(&g_host_runs, 1, memory_order_relaxed);
}

static uint64_t rd_u64(const unsigned char *a, size_t off)
{
    uint64_t v;
    memcpy(&v, a + off, sizeof v);
    return v;
}

static float rd_f32(const unsigned char *a, size_t off)
{
    float v;
    memcpy(&v, a + off, sizeof v);
    return v;
}

#define PTR(type, a, off) ((type *)(uintptr_t)rd_u64((a), (off)))

/* vr_fill_f32(float *out, float value, unsigned long long n) */
static void k_fill_f32(const unsigned char *a)
{
    count_run();
    float *out = PTR(float, a, 0);
    float value = rd_f32(a, 8);
    uint64_t n = rd_u64(a, 16);
    for (uint64_t i = 0; i < n; i++)
        out[i] = value;
}

/* vr_scale_f32(float *out, const float *in, float s, unsigned long long n) */
static void k_scale_f32(const unsigned char *a)
{
    count_run();
    float *out = PTR(float, a, 0);
    const float *in = PTR(const float, a, 8);
    float s = rd_f32(a, 16);
    uint64_t n = rd_u64(a, 24);
    for (uint64_t i = 0; i < n; i++)
        out[i] = s * in[i];
}

/* vr_axpy_f32(float *y, const float *x, float a, unsigned long long n) */
static void k_axpy_f32(const unsigned char *a)
{
    count_run();
    float *y = PTR(float, a, 0);
    const float *x = PTR(const float, a, 8);
    float al = rd_f32(a, 16);
    uint64_t n = rd_u64(a, 24);
    for (uint64_t i = 0; i < n; i++)
        y[i] = y[i] + al * x[i];
}

/* vr_add_f32(float *out, const float *a, const float *b, unsigned long long n) */
static void k_add_f32(const unsigned char *a)
{
    count_run();
    float *out = PTR(float, a, 0);
    const float *x = PTR(const float, a, 8);
    const float *y = PTR(const float, a, 16);
    uint64_t n = rd_u64(a, 24);
    for (uint64_t i = 0; i < n; i++)
        out[i] = x[i] + y[i];
}

/* vr_affine_struct(struct vr_affine { float *out; const float *in; float scale;
 *                                     float shift; unsigned long long n; } p) */
static void k_affine_struct(const unsigned char *a)
{
    count_run();
    float *out = PTR(float, a, 0);
    const float *in = PTR(const float, a, 8);
    float scale = rd_f32(a, 16);
    float shift = rd_f32(a, 20);
    uint64_t n = rd_u64(a, 24);
    for (uint64_t i = 0; i < n; i++)
        out[i] = in[i] * scale + shift;
}

/* vr_copy_u8(unsigned char *dst, const unsigned char *src, unsigned long long n) */
static void k_copy_u8(const unsigned char *a)
{
    count_run();
    unsigned char *dst = PTR(unsigned char, a, 0);
    const unsigned char *src = PTR(const unsigned char, a, 8);
    uint64_t n = rd_u64(a, 16);
    for (uint64_t i = 0; i < n; i++)
        dst[i] = src[i];
}

/* vr_sum_range_f32(float *out, const float *begin, const float *end):
 * one thread, in order (as the device version). */
static void k_sum_range_f32(const unsigned char *a)
{
    count_run();
    float *out = PTR(float, a, 0);
    const float *p = PTR(const float, a, 8);
    const float *end = PTR(const float, a, 16);
    float s = 0.0f;
    for (; p < end; p++)
        s = s + *p;
    out[0] = s;
}

/* Expected layouts: what nvcc's PTX declares for these signatures. */
static const struct sim_kernel_impl g_kernels[] = {
    {"vr_fill_f32", k_fill_f32, 3, {0, 8, 16, 0}, {8, 4, 8, 0}, -1, -1},
    {"vr_scale_f32", k_scale_f32, 4, {0, 8, 16, 24}, {8, 8, 4, 8}, -1, -1},
    {"vr_axpy_f32", k_axpy_f32, 4, {0, 8, 16, 24}, {8, 8, 4, 8}, -1, -1},
    {"vr_add_f32", k_add_f32, 4, {0, 8, 16, 24}, {8, 8, 8, 8}, -1, -1},
    {"vr_affine_struct", k_affine_struct, 1, {0, 0, 0, 0}, {32, 0, 0, 0}, -1, -1},
    {"vr_copy_u8", k_copy_u8, 3, {0, 8, 16, 0}, {8, 8, 8, 0}, -1, -1},
    {"vr_sum_range_f32", k_sum_range_f32, 3, {0, 8, 16, 0}, {8, 8, 8, 0}, 1, 2},
};

const struct sim_kernel_impl *sim_kernel_find(const char *name)
{
    for (size_t i = 0; i < sizeof g_kernels / sizeof g_kernels[0]; i++)
        if (strcmp(g_kernels[i].name, name) == 0)
            return &g_kernels[i];
    return NULL;
}
