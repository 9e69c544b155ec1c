/*
 * The PTX interpreter's block workers (ptx.h: ptx_set_threads, ptx_workers;
 * issue 32 item 2): how many a launch gets, and that a kernel whose result
 * does not depend on the order of its blocks gives the same bytes and the
 * same thread-instruction count on 1 and on 4 workers. Runs the benchmark's
 * kernels (tests/kernels/bench_kernels.cu) through ptx_run() directly.
 */
#include "../simcuda/ptx.h"
#include "../simcuda/sim.h"

#include <criterion/criterion.h>
#include <stdint.h>
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

static struct ptx_module *load_file(const char *env)
{
    const char *path = getenv(env);
    cr_assert(path, "%s not set", env);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = malloc((size_t)n + 1);
    cr_assert(t);
    cr_assert_eq(fread(t, 1, (size_t)n, f), (size_t)n);
    t[n] = 0;
    fclose(f);
    struct ptx_module *m;
    cr_assert_eq(ptx_module_load(t, &m), 0);
    free(t);
    return m;
}

static void put_u64(unsigned char *a, size_t off, uint64_t v)
{
    memcpy(a + off, &v, 8);
}

static void put_u32(unsigned char *a, size_t off, uint32_t v)
{
    memcpy(a + off, &v, 4);
}

static struct ptx_launch launch(unsigned grid, unsigned block, unsigned shmem,
                                const unsigned char *args, size_t argsize)
{
    struct ptx_launch l = {{grid, 1, 1}, {block, 1, 1}, shmem, args, argsize, 0, NULL, NULL, NULL};
    return l;
}

Test(ptx_threads, workers_follow_the_setting_the_grid_and_printf)
{
    struct ptx_module *m = load_file("BENCH_KERNELS");
    struct ptx_kernel *k = ptx_module_kernel(m, "bk_arith");
    cr_assert(k);
    unsigned char a[20] = {0};
    struct ptx_launch big = launch(64, 256, 0, a, sizeof a);
    cr_assert_eq(ptx_workers(k, &big, 4), 4);
    cr_assert_eq(ptx_workers(k, &big, 1), 1);
    cr_assert_eq(ptx_workers(k, &big, 200), 64, "at most one worker per block");
    cr_assert_geq(ptx_workers(k, &big, 0), 1, "0: the cores");
    struct ptx_launch one = launch(1, 1024, 0, a, sizeof a);
    cr_assert_eq(ptx_workers(k, &one, 4), 1, "one block: one worker");
    struct ptx_launch small = launch(8, 32, 0, a, sizeof a);
    cr_assert_eq(ptx_workers(k, &small, 4), 1, "a small grid is not worth a thread");
    struct ptx_launch wide = launch(5, 1024, 0, a, sizeof a);
    cr_assert_eq(ptx_workers(k, &wide, 8), 5, "fewer blocks than threads: one each");
    ptx_module_unref(m);

    /* device printf: its lines in the order one worker prints them */
    static const char pf[] =
        ".version 8.0\n.target sm_52\n.address_size 64\n"
        ".extern .func (.param .b32 func_retval0) vprintf\n"
        "(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n"
        ".global .align 1 .b8 $fmt[4] = {104, 105, 10, 0};\n"
        ".visible .entry pf()\n{\n\t.reg .b64 %rd<3>;\n\t.reg .b32 %r<2>;\n"
        "\tmov.u64 %rd1, $fmt;\n\tcvta.global.u64 %rd2, %rd1;\n"
        "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd2;\n"
        "\t.param .b64 param1;\n\tst.param.b64 [param1+0], 0;\n"
        "\t.param .b32 retval0;\n"
        "\tcall.uni (retval0), vprintf, (param0, param1);\n"
        "\tld.param.b32 %r1, [retval0+0];\n\t}\n\tret;\n}\n";
    cr_assert_eq(ptx_module_load(pf, &m), 0);
    k = ptx_module_kernel(m, "pf");
    cr_assert(k);
    cr_assert_null(ptx_kernel_error(k), "%s", ptx_kernel_error(k));
    struct ptx_launch pl = launch(64, 256, 0, NULL, 0);
    cr_assert_eq(ptx_workers(k, &pl, 4), 1);
    ptx_module_unref(m);
}

/* Global atomics whose bytes depend on the order of the updates keep one
 * worker: a float add (rounding), an old value that is read (a ticket). An
 * integer add nobody reads the old value of (bk_atomics) does not. */
static unsigned atomic_workers(const char *body)
{
    char text[1024];
    snprintf(text, sizeof text,
             ".version 8.0\n.target sm_52\n.address_size 64\n"
             ".visible .entry ak(.param .u64 p)\n{\n\t.reg .b64 %%rd<3>;\n"
             "\t.reg .b32 %%r<4>;\n\t.reg .f32 %%f<3>;\n"
             "\tld.param.u64 %%rd1, [p];\n\tcvta.to.global.u64 %%rd2, %%rd1;\n"
             "\tmov.u32 %%r1, 1;\n\tmov.f32 %%f1, 0f3F800000;\n%s\tret;\n}\n",
             body);
    struct ptx_module *m;
    cr_assert_eq(ptx_module_load(text, &m), 0);
    struct ptx_kernel *k = ptx_module_kernel(m, "ak");
    cr_assert(k);
    cr_assert_null(ptx_kernel_error(k), "%s", ptx_kernel_error(k));
    unsigned char a[8] = {0};
    struct ptx_launch l = launch(64, 256, 0, a, sizeof a);
    unsigned n = ptx_workers(k, &l, 4);
    ptx_module_unref(m);
    return n;
}

Test(ptx_threads, order_dependent_atomics_keep_one_worker)
{
    cr_assert_eq(atomic_workers("\tatom.global.add.u32 %r2, [%rd2], %r1;\n"), 4,
                 "an integer add, old value unread");
    cr_assert_eq(atomic_workers("\tred.global.or.b32 [%rd2], %r1;\n"), 4);
    cr_assert_eq(atomic_workers("\tatom.shared.exch.b32 %r2, [0], %r1;\n"
                                "\tst.global.u32 [%rd2], %r2;\n"),
                 4, "shared memory is the block's own");
    cr_assert_eq(atomic_workers("\tatom.global.add.f32 %f2, [%rd2], %f1;\n"), 1,
                 "a float add");
    cr_assert_eq(atomic_workers("\tred.global.add.f32 [%rd2], %f1;\n"), 1, "a float add");
    cr_assert_eq(atomic_workers("\tatom.global.add.u32 %r2, [%rd2], %r1;\n"
                                "\tst.global.u32 [%rd2+4], %r2;\n"),
                 1, "a ticket");
    cr_assert_eq(atomic_workers("\tatom.global.exch.b32 %r2, [%rd2], %r1;\n"), 1,
                 "an exchange");
}

struct run {
    unsigned char *out;
    size_t n;
    uint64_t icount;
};

/* One benchmark kernel on `threads` workers: what it wrote, and its count. */
static struct run run_bk(struct ptx_module *m, const char *name, unsigned threads)
{
    enum { NT = 64 * 256, N = 1 << 18 };
    static float fin[N];
    static unsigned uin[N];
    for (unsigned i = 0; i < N; i++) {
        fin[i] = (float)(i % 977) * 0.125f - 50.0f;
        uin[i] = i * 7919u + (i >> 7);
    }
    struct run r = {calloc(2 * NT, 4), 2 * NT * 4, 0};
    cr_assert(r.out);
    unsigned char a[20] = {0};
    struct ptx_launch l;
    if (!strcmp(name, "bk_arith")) {
        put_u64(a, 0, (uintptr_t)r.out);
        put_u64(a, 8, (uintptr_t)(r.out + NT * 4));
        put_u32(a, 16, 20);
        l = launch(64, 256, 0, a, sizeof a);
    } else if (!strcmp(name, "bk_shared")) {
        put_u64(a, 0, (uintptr_t)r.out);
        put_u64(a, 8, (uintptr_t)fin);
        put_u32(a, 16, N);
        l = launch(64, 256, 256 * 4, a, sizeof a);
    } else if (!strcmp(name, "bk_atomics")) {
        put_u64(a, 0, (uintptr_t)r.out);
        put_u64(a, 8, (uintptr_t)uin);
        put_u32(a, 16, N);
        l = launch(64, 256, 0, a, sizeof a);
    } else {
        put_u64(a, 0, (uintptr_t)r.out);
        put_u64(a, 8, (uintptr_t)uin);
        put_u32(a, 16, 2 * NT);
        l = launch(2 * NT / 128, 128, 0, a, sizeof a);
    }
    struct ptx_kernel *k = ptx_module_kernel(m, name);
    cr_assert(k && !ptx_kernel_error(k), "%s", name);
    ptx_set_threads(threads);
    cr_assert_eq(ptx_workers(k, &l, threads), threads, "%s: %u workers", name, threads);
    r.icount = ptx_run(k, &l);
    return r;
}

Test(ptx_threads, one_and_four_workers_give_the_same_bytes)
{
    struct ptx_module *m = load_file("BENCH_KERNELS");
    static const char *const ks[] = {"bk_arith", "bk_shared", "bk_atomics", "bk_diverge"};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        struct run one = run_bk(m, ks[i], 1), four = run_bk(m, ks[i], 4);
        cr_assert_eq(one.icount, four.icount, "%s: thread-instructions %llu vs %llu", ks[i],
                     (unsigned long long)one.icount, (unsigned long long)four.icount);
        cr_assert(memcmp(one.out, four.out, one.n) == 0, "%s: 1 and 4 workers differ", ks[i]);
        free(one.out);
        free(four.out);
    }
    ptx_set_threads(0);
    ptx_module_unref(m);
}
