/* Layouts: which words are scanned, packing, and the per-function cache. */
#include <criterion/criterion.h>
#include <string.h>

#include "driver.h"
#include "layout.h"
#include "node.h"

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

/* The shim packs every node into one scratch buffer: the 4 bytes between
 * vr_scale_f32's float and its count must not keep another node's bytes,
 * or equal arguments would compare different as whole buffers (and be sent
 * to the driver again). */
Test(layout, pack_zeroes_the_padding_between_arguments)
{
    const uint32_t off[] = {0, 8, 16, 24}, size[] = {8, 8, 4, 8};
    struct vr_layout *l = build(off, size, 4);
    cr_assert(l->gaps);
    uint64_t p = 0x7f0000001000u, q = 0x7f0000002000u, n = 1024;
    float s = 2.0f;
    void *args[] = {&p, &q, &s, &n};
    uint8_t buf[32], zeroed[32] = {0};
    memset(buf, 0xa5, sizeof buf);
    vr_layout_pack(l, args, buf);
    vr_layout_pack(l, args, zeroed);
    cr_assert_eq(memcmp(buf, zeroed, sizeof buf), 0);
    cr_assert_eq(buf[20] | buf[21] | buf[22] | buf[23], 0);
    vr_layout_free(l);
}

/* pack2 writes the same argument bytes into both buffers as pack, every
 * unit size included, and leaves the rest alone. */
Test(layout, pack2_writes_both_buffers_like_pack)
{
    const uint32_t off[] = {0, 8, 12, 16, 48, 50}, size[] = {8, 4, 1, 32, 2, 12};
    struct vr_layout *l = build(off, size, 6);
    uint8_t a0[8], a1[4], a2[1], a3[32], a4[2], a5[12];
    for (unsigned i = 0; i < sizeof a3; i++)
        a3[i] = (uint8_t)(3 * i + 1);
    memset(a0, 0x11, sizeof a0);
    memset(a1, 0x22, sizeof a1);
    memset(a2, 0x33, sizeof a2);
    memset(a4, 0x44, sizeof a4);
    for (unsigned i = 0; i < sizeof a5; i++)
        a5[i] = (uint8_t)(0x50 + i);
    void *args[] = {a0, a1, a2, a3, a4, a5};
    uint8_t want[62], x[62], y[62];
    memset(want, 0, sizeof want);
    vr_layout_pack(l, args, want);
    memset(x, 0, sizeof x);
    memset(y, 0, sizeof y);
    vr_layout_pack2(l, args, x, y);
    cr_assert_eq(memcmp(x, want, sizeof want), 0);
    cr_assert_eq(memcmp(y, want, sizeof want), 0);
    vr_layout_free(l);
}

/* Every argument size the absorbed path meets: 8 and 4 bytes, a struct of
 * 32 (four 8-byte units), 12 (a unit and a 4-byte rest), 2 and 1 (rests),
 * and a zero-sized argument. */
Test(layout, equal_sees_every_byte_of_every_argument_and_no_padding)
{
    const uint32_t off[] = {0, 8, 16, 48, 64, 68, 72, 80}, size[] = {8, 4, 32, 12, 2, 1, 0, 8};
    struct vr_layout *l = build(off, size, 8);
    uint64_t a = 0x1111222233334444u, h = 7;
    uint32_t b = 5;
    uint8_t st[32], tw[12], sh[2] = {9, 8}, by = 3;
    for (int i = 0; i < 32; i++)
        st[i] = (uint8_t)(i + 1);
    for (int i = 0; i < 12; i++)
        tw[i] = (uint8_t)(100 + i);
    void *args[] = {&a, &b, st, tw, sh, &by, &by, &h};
    uint8_t buf[88];
    memset(buf, 0xee, sizeof buf); /* padding differs from anything packed */
    vr_layout_pack(l, args, buf);
    cr_assert(vr_layout_equal(l, args, buf));
    cr_assert(!vr_layout_equal_fast(l, args, buf), "odd-sized units are left to vr_layout_equal");

    /* Each byte of each argument, changed alone, is seen. */
    uint8_t *bytes[] = {(uint8_t *)&a, (uint8_t *)&b, st, tw, sh, &by, (uint8_t *)&h};
    const uint32_t sizes[] = {8, 4, 32, 12, 2, 1, 8};
    for (int k = 0; k < 7; k++)
        for (uint32_t i = 0; i < sizes[k]; i++) {
            bytes[k][i] ^= 0x40;
            cr_assert(!vr_layout_equal(l, args, buf), "argument %d byte %u changed unseen", k,
                      i);
            bytes[k][i] ^= 0x40;
        }
    cr_assert(vr_layout_equal(l, args, buf));
    vr_layout_free(l);

    /* Only 8- and 4-byte units: the fast form decides alone. */
    const uint32_t off2[] = {0, 8, 12, 16}, size2[] = {8, 4, 4, 16};
    l = build(off2, size2, 4);
    uint32_t c = 6;
    void *args2[] = {&a, &b, &c, st};
    uint8_t buf2[32];
    vr_layout_pack(l, args2, buf2);
    cr_assert(vr_layout_equal_fast(l, args2, buf2));
    st[15] ^= 1;
    cr_assert(!vr_layout_equal_fast(l, args2, buf2));
    cr_assert(!vr_layout_equal(l, args2, buf2));
    vr_layout_free(l);
}

/* The absorbed path's compare (node.h): every byte of every 8- and 4-byte
 * unit, a struct's chunks included; none of the padding; no decision when a
 * layout has odd-sized units. */
Test(layout, args_same_sees_every_byte_and_leaves_odd_units)
{
    const uint32_t off[] = {0, 8, 12, 16, 48, 56}, size[] = {8, 4, 4, 32, 0, 8};
    struct vr_layout *l = build(off, size, 6);
    uint64_t a = 0x1111222233334444u, h = 7;
    uint32_t b = 5, c = 6;
    uint8_t st[32], none = 0;
    for (int i = 0; i < 32; i++)
        st[i] = (uint8_t)(i + 1);
    void *args[] = {&a, &b, &c, st, &none, &h};
    uint8_t buf[64];
    memset(buf, 0xee, sizeof buf);
    vr_layout_pack(l, args, buf);
    cr_assert(vr_args_same(l, args, buf));
    uint8_t *bytes[] = {(uint8_t *)&a, (uint8_t *)&b, (uint8_t *)&c, st, (uint8_t *)&h};
    const uint32_t sizes[] = {8, 4, 4, 32, 8};
    for (int k = 0; k < 5; k++)
        for (uint32_t i = 0; i < sizes[k]; i++) {
            bytes[k][i] ^= 0x40;
            cr_assert(!vr_args_same(l, args, buf), "argument %d byte %u changed unseen", k, i);
            bytes[k][i] ^= 0x40;
        }
    none ^= 1; /* zero-sized: nothing to compare */
    cr_assert(vr_args_same(l, args, buf));
    vr_layout_free(l);

    /* No arguments at all; then one 4-byte argument only. */
    l = build(off, size, 0);
    cr_assert(vr_args_same(l, NULL, buf));
    vr_layout_free(l);
    l = build(off + 1, size + 1, 1);
    vr_layout_pack(l, args + 1, buf);
    cr_assert(vr_args_same(l, args + 1, buf));
    b ^= 0x80000000u;
    cr_assert(!vr_args_same(l, args + 1, buf));
    vr_layout_free(l);

    /* A 2-byte argument: left to vr_layout_equal, even when equal. */
    const uint32_t off3[] = {0, 8}, size3[] = {8, 2};
    uint16_t s2 = 3;
    void *args3[] = {&a, &s2};
    l = build(off3, size3, 2);
    vr_layout_pack(l, args3, buf);
    cr_assert(vr_layout_equal(l, args3, buf));
    cr_assert(!vr_args_same(l, args3, buf));
    vr_layout_free(l);
}

/* The plan (node.h's vr_args_same, layout.c's vr_layout_pack2): every mix of 8- and 4-byte units a
 * plan covers, and one past each bound (the loop), with the arguments in
 * an order that interleaves the two sizes and a struct split in chunks;
 * each unit must be compared once, at its own bytes, and no other. */
Test(layout, plan_compares_and_packs_every_unit_of_every_shape)
{
    for (uint32_t n8 = 0; n8 <= VR_PLAN_MAX8 + 1; n8++)
        for (uint32_t n4 = 0; n4 <= VR_PLAN_MAX4 + 1; n4++)
            for (int chunked = 0; chunked < 2 && (n8 >= 2 || !chunked); chunked++) {
                /* Arguments alternate 4- and 8-byte; chunked: the first two
                 * 8-byte units are one 16-byte struct. */
                uint32_t off[16], size[16], n = 0, at = 0, k8 = 0, k4 = 0;
                while (k8 < n8 || k4 < n4) {
                    if (k4 < n4 && (k8 == n8 || n % 2 == 0)) {
                        off[n] = at, size[n++] = 4, at += 4, k4++;
                        continue;
                    }
                    at = (at + 7) & ~7u;
                    uint32_t sz = chunked && k8 == 0 ? 16 : 8;
                    off[n] = at, size[n++] = sz, at += sz, k8 += sz / 8;
                }
                struct vr_layout *l = build(off, size, n);
                uint8_t want = n8 > VR_PLAN_MAX8 || n4 > VR_PLAN_MAX4
                                   ? VR_PLAN_LOOP : (uint8_t)VR_PLAN(n8, n4);
                cr_assert_eq(l->plan, want, "n8 %u n4 %u: plan %u", n8, n4, l->plan);
                uint8_t src[16][16], buf[256];
                void *args[16];
                for (uint32_t i = 0; i < n; i++) {
                    for (uint32_t b = 0; b < 16; b++)
                        src[i][b] = (uint8_t)(i * 16 + b + 1);
                    args[i] = src[i];
                }
                memset(buf, 0xee, sizeof buf);
                vr_layout_pack(l, args, buf);
                cr_assert(vr_args_same(l, args, buf), "n8 %u n4 %u chunked %d", n8, n4, chunked);
                for (uint32_t i = 0; i < n; i++)
                    for (uint32_t b = 0; b < size[i]; b++) {
                        src[i][b] ^= 0x10;
                        cr_assert(!vr_args_same(l, args, buf),
                                  "n8 %u n4 %u chunked %d: argument %u byte %u unseen", n8, n4,
                                  chunked, i, b);
                        src[i][b] ^= 0x10;
                        buf[off[i] + b] ^= 0x01;
                        cr_assert(!vr_args_same(l, args, buf),
                                  "n8 %u n4 %u chunked %d: shadow of %u byte %u unseen", n8, n4,
                                  chunked, i, b);
                        buf[off[i] + b] ^= 0x01;
                    }
                /* vr_layout_pack2 by the same plan: every argument's bytes
                 * into both buffers, nothing else touched. */
                uint8_t pa[256], pb[256], mine[256] = {0};
                memset(pa, 0xee, sizeof pa);
                memset(pb, 0xdd, sizeof pb);
                vr_layout_pack2(l, args, pa, pb);
                for (uint32_t i = 0; i < n; i++) {
                    cr_assert(!memcmp(pa + off[i], src[i], size[i]) &&
                                  !memcmp(pb + off[i], src[i], size[i]),
                              "n8 %u n4 %u chunked %d: pack2 of argument %u", n8, n4, chunked, i);
                    memset(mine + off[i], 1, size[i]);
                }
                for (uint32_t b = 0; b < sizeof pa; b++)
                    cr_assert(mine[b] || (pa[b] == 0xee && pb[b] == 0xdd),
                              "n8 %u n4 %u chunked %d: pack2 wrote byte %u", n8, n4, chunked, b);
                /* Bytes past an argument's size are not its own. */
                for (uint32_t i = 0; i < n; i++)
                    if (size[i] == 4)
                        src[i][4] ^= 0x5a;
                cr_assert(vr_args_same(l, args, buf), "n8 %u n4 %u: read past a 4-byte argument",
                          n8, n4);
                vr_layout_free(l);
            }
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

/* ---- eviction on unload ---- */

/* Function 0x100 belongs to module 0xA0, 0x300 to module 0xB0; 0x500's
 * module the driver cannot name. Each call of the fake reports `width`
 * eight-byte arguments, so a re-read is visible in the layout. */
static uint32_t width = 2;

static CUresult CUDAAPI fake_info_width(CUfunction f, size_t i, size_t *off, size_t *size)
{
    (void)f;
    info_calls++;
    if (i >= width)
        return CUDA_ERROR_INVALID_VALUE;
    *off = i * 8;
    *size = 8;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_kernel_info(CUkernel k, size_t i, size_t *off, size_t *size)
{
    return fake_info_width((CUfunction)(void *)k, i, off, size);
}

static CUresult CUDAAPI fake_func_module(CUmodule *mod, CUfunction f)
{
    switch ((uintptr_t)f) {
    case 0x100: *mod = (CUmodule)0xA0; return CUDA_SUCCESS;
    case 0x300: *mod = (CUmodule)0xB0; return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult CUDAAPI fake_kernel_library(CUlibrary *lib, CUkernel k)
{
    if ((uintptr_t)k == 0x700) {
        *lib = (CUlibrary)0xC0;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* Even-numbered functions (by 16-byte slot) in module 0xE0, odd in 0xF0. */
static CUresult CUDAAPI fake_func_module_many(CUmodule *mod, CUfunction f)
{
    *mod = (CUmodule)(uintptr_t)(((uintptr_t)f / 16) % 2 ? 0xF0 : 0xE0);
    return CUDA_SUCCESS;
}

static const struct vr_layout *get_f(uintptr_t f)
{
    const struct vr_layout *l = NULL;
    cr_assert_eq(vr_layout_get((CUfunction)f, NULL, &l), 0);
    return l;
}

static const struct vr_layout *get_k(uintptr_t k)
{
    const struct vr_layout *l = NULL;
    cr_assert_eq(vr_layout_get(NULL, (CUkernel)k, &l), 0);
    return l;
}

static void fake_driver(void)
{
    vr_real.cuFuncGetParamInfo = fake_info_width;
    vr_real.cuKernelGetParamInfo = fake_kernel_info;
    vr_real.cuFuncGetModule = fake_func_module;
    vr_real.cuKernelGetLibrary = fake_kernel_library;
}

Test(layout, module_unload_evicts_only_its_functions_and_unknown_owners)
{
    fake_driver();
    const struct vr_layout *a = get_f(0x100), *b = get_f(0x300), *c = get_f(0x500);
    cr_assert_eq(a->nparams, 2);
    width = 3; /* what a reused handle would now describe */
    vr_layout_evict_module((CUmodule)0xA0);
    int calls = info_calls;
    cr_assert_eq(get_f(0x300), b, "module 0xB0's function must stay cached");
    cr_assert_eq(info_calls, calls);
    const struct vr_layout *a2 = get_f(0x100);
    cr_assert_gt(info_calls, calls, "0x100 must be read again");
    cr_assert_eq(a2->nparams, 3);
    const struct vr_layout *c2 = get_f(0x500);
    cr_assert_eq(c2->nparams, 3, "a function of unknown module goes with any module unload");
    /* The evicted layouts are still readable (never freed while the
     * process runs): an exec may hold them. */
    cr_assert_eq(a->nparams, 2);
    cr_assert_eq(a->offset[1], 8);
    cr_assert_eq(c->nparams, 2);
}

Test(layout, library_unload_evicts_its_kernels_and_all_functions)
{
    fake_driver();
    const struct vr_layout *k = get_k(0x700), *other = get_k(0x900), *f = get_f(0x100);
    const struct vr_layout *kept = get_k(0x700);
    cr_assert_eq(k, kept);
    width = 4;
    vr_layout_evict_module((CUmodule)0xB0); /* not theirs: 0x700 stays */
    cr_assert_eq(get_k(0x700), k);
    vr_layout_evict_library((CUlibrary)0xD0); /* another library */
    cr_assert_eq(get_k(0x700), k, "a kernel of another library stays cached");
    cr_assert_eq(get_k(0x900)->nparams, 4, "a kernel of unknown library goes");
    cr_assert_eq(get_f(0x100)->nparams, 4, "every function goes with a library unload");
    vr_layout_evict_library((CUlibrary)0xC0);
    cr_assert_eq(get_k(0x700)->nparams, 4);
    cr_assert_eq(other->nparams, 2);
    cr_assert_eq(f->nparams, 2);
}

Test(layout, eviction_keeps_colliding_entries_reachable)
{
    /* Hundreds of functions in two modules: deleting half of a linear-probe
     * table must leave every survivor findable without a re-read. */
    vr_real.cuFuncGetParamInfo = fake_info_width;
    vr_real.cuFuncGetModule = fake_func_module_many;
    enum { NF = 300 };
    const struct vr_layout *before[NF];
    for (uintptr_t i = 0; i < NF; i++)
        before[i] = get_f(0x1000 + 16 * i);
    vr_layout_evict_module((CUmodule)0xE0); /* the even ones */
    int calls = info_calls;
    for (uintptr_t i = 1; i < NF; i += 2)
        cr_assert_eq(get_f(0x1000 + 16 * i), before[i], "function %zu lost", (size_t)i);
    cr_assert_eq(info_calls, calls, "no survivor may be read again");
    for (uintptr_t i = 0; i < NF; i += 2)
        get_f(0x1000 + 16 * i);
    cr_assert_eq(info_calls, calls + (NF / 2) * 3, "every evicted function read again");
}
