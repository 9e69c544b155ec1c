/* Layouts: which words are scanned, packing, and the per-function cache. */
#include <criterion/criterion.h>
#include <string.h>

#include "driver.h"
#include "layout.h"

static struct vr_layout *build(const uint32_t *off, const uint32_t *size, uint32_t n)
{
    struct vr_layout *l = NULL;
    cr_assert_eq(vr_layout_build(off, size, n, &l), 0);
    return l;
}

Test(layout, pointer_float_scalar_words)
{
    /* vr_scale_f32(float *out, const float *in, float s, unsigned long long n) */
    const uint32_t off[] = {0, 8, 16, 24}, size[] = {8, 8, 4, 8};
    struct vr_layout *l = build(off, size, 4);
    cr_assert_eq(l->bytes, 32);
    cr_assert_eq(l->nwords, 3);
    cr_assert_eq(l->words[0], 0);
    cr_assert_eq(l->words[1], 8);
    cr_assert_eq(l->words[2], 24);
    vr_layout_free(l);
}

Test(layout, struct_argument_scanned_word_by_word)
{
    /* vr_affine_struct(struct vr_affine p): 32 bytes, pointers at 0 and 8 */
    const uint32_t off[] = {0}, size[] = {32};
    struct vr_layout *l = build(off, size, 1);
    cr_assert_eq(l->nwords, 4);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert_eq(l->words[i], 8 * i);
    vr_layout_free(l);
}

Test(layout, only_aligned_words_inside_an_argument)
{
    /* a 12-byte argument at offset 4 holds one aligned word: [8, 16) */
    const uint32_t off[] = {0, 4}, size[] = {4, 12};
    struct vr_layout *l = build(off, size, 2);
    cr_assert_eq(l->nwords, 1);
    cr_assert_eq(l->words[0], 8);
    cr_assert_eq(l->bytes, 16);
    vr_layout_free(l);
}

Test(layout, pack_and_point_round_trip)
{
    const uint32_t off[] = {0, 8, 16}, size[] = {8, 4, 8};
    struct vr_layout *l = build(off, size, 3);
    uint64_t a = 0x1111222233334444u, c = 42;
    float b = 1.5f;
    void *args[] = {&a, &b, &c};
    uint8_t buf[24] = {0};
    vr_layout_pack(l, args, buf);
    void *pts[3];
    vr_layout_point(l, buf, pts);
    cr_assert_eq(*(uint64_t *)pts[0], a);
    cr_assert_eq(memcmp(pts[1], &b, sizeof b), 0);
    cr_assert_eq(*(uint64_t *)pts[2], c);
    vr_layout_free(l);
}

static int info_calls;

static CUresult CUDAAPI fake_param_info(CUfunction f, size_t i, size_t *off, size_t *size)
{
    info_calls++;
    if ((uintptr_t)f == 0x200)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (i >= 2)
        return CUDA_ERROR_INVALID_VALUE;
    *off = i * 8;
    *size = 8;
    return CUDA_SUCCESS;
}

Test(layout, read_once_per_function_and_failures_cached)
{
    vr_real.cuFuncGetParamInfo = fake_param_info;
    const struct vr_layout *a = NULL, *b = NULL;
    cr_assert_eq(vr_layout_get((CUfunction)0x100, NULL, &a), 0);
    int after_first = info_calls;
    cr_assert_eq(after_first, 3, "two arguments and the probe past the end");
    cr_assert_eq(vr_layout_get((CUfunction)0x100, NULL, &b), 0);
    cr_assert_eq(a, b);
    cr_assert_eq(info_calls, after_first, "the second lookup must hit the cache");
    cr_assert_eq(a->nparams, 2);
    cr_assert_eq(a->nwords, 2);

    const struct vr_layout *c = NULL;
    cr_assert_neq(vr_layout_get((CUfunction)0x200, NULL, &c), 0);
    int calls = info_calls;
    cr_assert_neq(vr_layout_get((CUfunction)0x200, NULL, &c), 0);
    cr_assert_eq(info_calls, calls, "a failure is asked once");
    cr_assert_null(c, "no output on failure");
}
