/* extra: which `extra` arrays are one readable argument buffer, and the
 * packing of such a buffer (issue 30, item 5). */
#include <criterion/criterion.h>
#include <string.h>

#include "extra.h"
#include "layout.h"

/* vr_scale_f32(float *out, const float *in, float s, unsigned long long n):
 * 28 bytes of arguments, 4 of padding at 20. */
static struct vr_layout *scale_layout(void)
{
    static const uint32_t off[] = {0, 8, 16, 24}, size[] = {8, 8, 4, 8};
    struct vr_layout *l = NULL;
    cr_assert_eq(vr_layout_build(off, size, 4, &l), 0);
    return l;
}

Test(extra, one_buffer_with_its_size_is_read)
{
    struct vr_layout *l = scale_layout();
    uint8_t buf[32];
    size_t size = 32;
    void *e1[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                  CU_LAUNCH_PARAM_END};
    void *e2[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
                  CU_LAUNCH_PARAM_END};
    struct vr_extra x = {0};
    cr_assert(vr_extra_read(e1, l, &x));
    cr_assert_eq(x.buf, buf);
    cr_assert_eq(x.size, 32);
    cr_assert(vr_extra_read(e2, l, &x), "either order");
    vr_layout_free(l);
}

Test(extra, anything_else_is_opaque)
{
    struct vr_layout *l = scale_layout();
    uint8_t buf[32];
    size_t size = 32, small = 31, big = VR_EXTRA_MAX + 1;
    struct vr_extra x = {0};
    void *no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_END};
    void *no_buf[] = {CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    void *null_buf[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, NULL, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                        CU_LAUNCH_PARAM_END};
    void *null_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, NULL,
                         CU_LAUNCH_PARAM_END};
    void *too_small[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &small, CU_LAUNCH_PARAM_END};
    void *too_big[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &big,
                       CU_LAUNCH_PARAM_END};
    void *twice[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
                     CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    void *other_key[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         (void *)0x7, NULL, CU_LAUNCH_PARAM_END};
    void *const *bad[] = {no_size, no_buf, null_buf, null_size, too_small, too_big, twice,
                          other_key};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!vr_extra_read(bad[i], l, &x), "case %zu read", i);
    vr_layout_free(l);
}

/* A corrupt array without END ends the walk. */
Test(extra, endless_array_is_refused)
{
    struct vr_layout *l = scale_layout();
    uint8_t buf[32];
    size_t size = 32;
    void *endless[64];
    for (size_t i = 0; i < 64; i += 2) {
        endless[i] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        endless[i + 1] = &size;
    }
    endless[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    endless[1] = buf;
    struct vr_extra x = {0};
    cr_assert(!vr_extra_read(endless, l, &x));
    vr_layout_free(l);
}

/* Packed like kernelParams: the arguments at their offsets, the padding
 * zero whatever the program's buffer holds there. */
Test(extra, pack_takes_the_arguments_and_zeroes_the_padding)
{
    struct vr_layout *l = scale_layout();
    uint8_t prog[40], packed[32], via_kp[32];
    for (size_t i = 0; i < sizeof prog; i++)
        prog[i] = (uint8_t)(0x11 * (i % 15) + 1);
    struct vr_extra x = {prog, sizeof prog};
    memset(packed, 0xff, sizeof packed);
    vr_extra_pack(l, &x, packed);
    void *kp[4] = {prog, prog + 8, prog + 16, prog + 24};
    memset(via_kp, 0x77, sizeof via_kp);
    vr_layout_pack(l, kp, via_kp);
    cr_assert(memcmp(packed, via_kp, 32) == 0);
    for (size_t i = 20; i < 24; i++)
        cr_assert_eq(packed[i], 0, "padding byte %zu", i);
    vr_layout_free(l);
}
