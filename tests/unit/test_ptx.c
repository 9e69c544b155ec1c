/*
 * simcuda's PTX interpreter (tests/simcuda/ptx.h, issue 18): every standard
 * kernel run both ways, host version and interpreter, compared byte for
 * byte (the interpreted copy is the same PTX text with the kernels renamed,
 * so no host version matches it); kernels written for the interpreter
 * (tests/kernels/ptx_tests.cu) checked against host references; an unknown
 * instruction refuses the launch; a shared-memory access out of bounds
 * aborts the process as a GPU fault would.
 */
#include <criterion/criterion.h>
#include <cuda.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CK(call)                                                               \
    do {                                                                       \
        CUresult ck_r_ = (call);                                               \
        cr_assert_eq(ck_r_, CUDA_SUCCESS, "%s -> %d", #call, (int)ck_r_);      \
    } while (0)

static char *slurp(const char *env)
{
    const char *path = getenv(env);
    cr_assert(path, "%s not set", env);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    return b;
}

static void setup(void)
{
    CUdevice d;
    CUcontext c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
}

static CUdeviceptr dalloc(size_t n, const void *init)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, n));
    if (init)
        CK(cuMemcpyHtoD_v2(p, init, n));
    else
        CK(cuMemsetD8_v2(p, 0, n));
    return p;
}

static void launch(CUfunction f, unsigned g, unsigned b, unsigned shmem, void **args)
{
    CK(cuLaunchKernel(f, g, 1, 1, b, 1, 1, shmem, NULL, args, NULL));
    CK(cuCtxSynchronize());
}

/* ---- the standard kernels, host version against interpreter ---------------- */

struct vr_affine {
    CUdeviceptr out, in;
    float scale, shift;
    unsigned long long n;
};

/* Runs kernel `name` (vr_ or px_ prefix) on fresh buffers made from seed,
 * shape g x b; returns the output bytes. */
static unsigned char *run_std(CUmodule m, const char *prefix, const char *kname, size_t n,
                              unsigned g, unsigned b)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, kname);
    CUfunction f;
    CK(cuModuleGetFunction(&f, m, name));
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((i * 2654435761u) % 1000003) / 7.0f - 300.0f;
        y[i] = 1.0f / (float)(i + 1) + (float)i * 0.3f;
    }
    size_t bytes = n * sizeof(float);
    CUdeviceptr out = dalloc(bytes, y), in = dalloc(bytes, x), in2 = dalloc(bytes, y);
    unsigned long long nn = n;
    float s = 1.7f, v = -2.25f;
    if (!strcmp(kname, "fill_f32")) {
        void *a[] = {&out, &v, &nn};
        launch(f, g, b, 0, a);
    } else if (!strcmp(kname, "scale_f32") || !strcmp(kname, "axpy_f32")) {
        void *a[] = {&out, &in, &s, &nn};
        launch(f, g, b, 0, a);
    } else if (!strcmp(kname, "add_f32")) {
        void *a[] = {&out, &in, &in2, &nn};
        launch(f, g, b, 0, a);
    } else if (!strcmp(kname, "affine_struct")) {
        struct vr_affine p = {out, in, s, v, nn};
        void *a[] = {&p};
        launch(f, g, b, 0, a);
    } else if (!strcmp(kname, "copy_u8")) {
        unsigned long long nb = bytes - 3;
        void *a[] = {&out, &in, &nb};
        launch(f, g, b, 0, a);
    } else if (!strcmp(kname, "sum_range_f32")) {
        CUdeviceptr end = in + bytes;
        void *a[] = {&out, &in, &end};
        launch(f, g, b, 0, a);
    }
    unsigned char *res = malloc(bytes);
    CK(cuMemcpyDtoH_v2(res, out, bytes));
    CK(cuMemFree_v2(out));
    CK(cuMemFree_v2(in));
    CK(cuMemFree_v2(in2));
    free(x);
    free(y);
    return res;
}

/* The PTX text with every `vr_` renamed `px_`: no host version matches. */
static char *renamed(const char *t)
{
    char *r = strdup(t);
    for (char *p = r; (p = strstr(p, "vr_")) != NULL; p += 3)
        p[0] = 'p', p[1] = 'x';
    return r;
}

Test(ptx, standard_kernels_match_host_versions)
{
    setup();
    char *text = slurp("SIMCUDA_TEST_PTX"), *text2 = renamed(text);
    CUmodule mh, mp;
    CK(cuModuleLoadData(&mh, text));
    CK(cuModuleLoadData(&mp, text2));
    static const char *const ks[] = {"fill_f32", "scale_f32", "axpy_f32", "add_f32",
                                     "affine_struct", "copy_u8", "sum_range_f32"};
    static const struct {
        size_t n;
        unsigned g, b;
    } shapes[] = {{1000, 4, 128}, {4099, 3, 67}, {77, 1, 1024}, {5000, 40, 32}, {1, 1, 1}};
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            size_t n = shapes[s].n;
            unsigned char *h = run_std(mh, "vr_", ks[k], n, shapes[s].g, shapes[s].b);
            unsigned char *p = run_std(mp, "px_", ks[k], n, shapes[s].g, shapes[s].b);
            cr_assert(memcmp(h, p, n * sizeof(float)) == 0,
                      "%s, n %zu, grid %u block %u: the interpreter differs from the host version",
                      ks[k], n, shapes[s].g, shapes[s].b);
            free(h);
            free(p);
        }
    CK(cuModuleUnload(mh));
    CK(cuModuleUnload(mp));
    free(text);
    free(text2);
}

/* The same through a graph (kernel nodes hold the decoded kernel) after the
 * module is unloaded: the exec keeps what it runs. */
Test(ptx, graph_node_outlives_its_module)
{
    setup();
    char *orig = slurp("SIMCUDA_TEST_PTX"), *text = renamed(orig);
    free(orig);
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, text));
    CK(cuModuleGetFunction(&f, m, "px_fill_f32"));
    size_t n = 3000;
    CUdeviceptr out = dalloc(n * 4, NULL);
    float v = 3.5f;
    unsigned long long nn = n;
    void *args[] = {&out, &v, &nn};
    CUDA_KERNEL_NODE_PARAMS p = {0};
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec x;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode_v2(&nd, g, NULL, 0, &p));
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphDestroy(g));
    CK(cuModuleUnload(m));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    float *r = malloc(n * 4);
    CK(cuMemcpyDtoH_v2(r, out, n * 4));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(r[i], 3.5f, "element %zu", i);
    CK(cuGraphExecDestroy(x));
    free(r);
    free(text);
}

/* ---- kernels written for the interpreter ------------------------------------- */

static CUmodule g_tm;

static CUfunction tk(const char *name)
{
    if (!g_tm) {
        setup();
        char *text = slurp("PTX_TEST_KERNELS");
        CK(cuModuleLoadData(&g_tm, text));
        free(text); /* the module decoded it: nothing points into it */
    }
    CUfunction f;
    CK(cuModuleGetFunction(&f, g_tm, name));
    return f;
}

Test(ptx, shared_memory_shuffle_reduction_with_double_atomics)
{
    CUfunction f = tk("pt_reduce");
    unsigned n = 100003;
    double *in = malloc(n * sizeof *in), want = 0;
    for (unsigned i = 0; i < n; i++) {
        in[i] = (double)((i * 7919u) % 2001) - 1000.0;
        want += in[i];
    }
    static const unsigned shapes[][2] = {{13, 256}, {1, 1024}, {7, 96}, {64, 32}};
    for (size_t s = 0; s < 4; s++) {
        CUdeviceptr din = dalloc(n * sizeof *in, in), dout = dalloc(sizeof(double), NULL);
        void *a[] = {&dout, &din, &n};
        launch(f, shapes[s][0], shapes[s][1], 0, a);
        double got;
        CK(cuMemcpyDtoH_v2(&got, dout, sizeof got));
        cr_assert_eq(got, want, "grid %u block %u: %.1f, want %.1f", shapes[s][0], shapes[s][1],
                     got, want);
        CK(cuMemFree_v2(din));
        CK(cuMemFree_v2(dout));
    }
    free(in);
}

static int diverge_ref(int v)
{
    int r = 0;
    if (v % 3 == 0) {
        for (int k = 0; k < (v & 15); k++)
            r += k * v;
    } else if (v % 3 == 1) {
        r = v * 7 - 3;
        if (v & 4)
            r ^= 0x5a5a;
        else
            r = -r;
    } else {
        unsigned x = (unsigned)v;
        while (x > 1) {
            x = (x & 1) ? 3 * x + 1 : x / 2;
            r++;
        }
    }
    return r;
}

Test(ptx, divergent_branches)
{
    CUfunction f = tk("pt_diverge");
    unsigned n = 5000;
    int *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    for (unsigned i = 0; i < n; i++)
        in[i] = (int)((i * 2654435761u) >> 20) - 1000;
    CUdeviceptr din = dalloc(n * 4, in), dout = dalloc(n * 4, NULL);
    void *a[] = {&dout, &din, &n};
    launch(f, (n + 127) / 128, 128, 0, a);
    CK(cuMemcpyDtoH_v2(out, dout, n * 4));
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(out[i], diverge_ref(in[i]), "element %u (input %d): %d, want %d", i, in[i],
                     out[i], diverge_ref(in[i]));
    free(in);
    free(out);
}

Test(ptx, atomics)
{
    CUfunction f = tk("pt_atomics");
    unsigned n = 3001;
    int *in = malloc(n * sizeof *in);
    int res0[9] = {0, INT32_MAX, INT32_MIN, 0, 0, 0, 0, 0, 0};
    unsigned ures0[4] = {0xffffffffu, 0, 0, 0};
    int want[9] = {0, INT32_MAX, INT32_MIN, 0, 0, 0, (int)n, 12345, 0};
    unsigned uwant[4] = {0xffffffffu, 0, 0, 0};
    float fwant = 0;
    for (unsigned i = 0; i < n; i++) {
        int v = (int)((i * 40503u) % 100000) - 50000;
        in[i] = v;
        want[0] += v;
        want[1] = v < want[1] ? v : want[1];
        want[2] = v > want[2] ? v : want[2];
        uwant[0] &= (unsigned)v | 0xffff0000u;
        uwant[1] |= (unsigned)v;
        uwant[2] ^= (unsigned)v;
        unsigned h = (unsigned)v * 2654435761u;
        uwant[3] = h > uwant[3] ? h : uwant[3];
        fwant += (float)(v & 255); /* small integers: exact in any order */
    }
    want[8] = want[0];
    CUdeviceptr dres = dalloc(sizeof res0, res0), dures = dalloc(sizeof ures0, ures0),
                dfres = dalloc(sizeof(float), NULL), din = dalloc(n * 4, in);
    void *a[] = {&dres, &dures, &dfres, &din, &n};
    launch(f, (n + 255) / 256, 256, 0, a);
    int res[9];
    unsigned ures[4];
    float fres;
    CK(cuMemcpyDtoH_v2(res, dres, sizeof res));
    CK(cuMemcpyDtoH_v2(ures, dures, sizeof ures));
    CK(cuMemcpyDtoH_v2(&fres, dfres, sizeof fres));
    for (int i = 0; i < 9; i++)
        cr_assert_eq(res[i], want[i], "res[%d] %d, want %d", i, res[i], want[i]);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ures[i], uwant[i], "ures[%d] %#x, want %#x", i, ures[i], uwant[i]);
    cr_assert_eq(fres, fwant);
    free(in);
}

Test(ptx, dynamic_shared_memory)
{
    CUfunction f = tk("pt_reverse");
    unsigned n = 1000, b = 192;
    float *in = malloc(n * 4), *out = malloc(n * 4);
    for (unsigned i = 0; i < n; i++)
        in[i] = (float)i * 0.5f;
    CUdeviceptr din = dalloc(n * 4, in), dout = dalloc(n * 4, NULL);
    void *a[] = {&dout, &din, &n};
    launch(f, (n + b - 1) / b, b, b * 4, a);
    CK(cuMemcpyDtoH_v2(out, dout, n * 4));
    for (unsigned i = 0; i < n; i++) {
        unsigned base = i / b * b, m = n - base < b ? n - base : b;
        cr_assert_eq(out[i], in[base + m - 1 - (i - base)], "element %u", i);
    }
    free(in);
    free(out);
}

Test(ptx, votes_and_shuffles)
{
    CUfunction f = tk("pt_vote");
    unsigned n = 256;
    int *in = malloc(n * 4);
    unsigned *out = malloc(n * 16);
    for (unsigned i = 0; i < n; i++)
        in[i] = (int)((i * 7u + (i >> 5) * 13u) % 1500);
    in[40] = -1; /* warp 1: not all >= 0 */
    CUdeviceptr din = dalloc(n * 4, in), dout = dalloc(n * 16, NULL);
    void *a[] = {&dout, &din};
    launch(f, 2, 128, 0, a);
    CK(cuMemcpyDtoH_v2(out, dout, n * 16));
    for (unsigned w = 0; w < n / 32; w++) {
        unsigned ballot = 0;
        int any = 0, all = 1;
        for (unsigned l = 0; l < 32; l++) {
            int v = in[w * 32 + l];
            ballot |= (unsigned)(v & 1) << l;
            any |= v > 1000;
            all &= v >= 0;
        }
        for (unsigned l = 0; l < 32; l++) {
            unsigned i = w * 32 + l, t = i % 128;
            cr_assert_eq(out[i * 4], ballot, "thread %u ballot", i);
            cr_assert_eq(out[i * 4 + 1],
                         (unsigned)any | (unsigned)all << 1 | (unsigned)__builtin_popcount(ballot) << 2,
                         "thread %u any/all/popc", i);
            cr_assert_eq(out[i * 4 + 2], (unsigned)in[l >= 3 ? i - 3 : i], "thread %u up", i);
            cr_assert_eq(out[i * 4 + 3], (unsigned)in[w * 32 + ((t * 7) & 31)], "thread %u idx", i);
        }
    }
    free(in);
    free(out);
}

Test(ptx, conversions)
{
    CUfunction f = tk("pt_convert");
    static const double in[] = {2.5, -2.5, 3.5, -0.75, 1e9 + 0.5, 123456.789, -7.0, 0.0};
    unsigned n = sizeof in / sizeof in[0];
    CUdeviceptr din = dalloc(sizeof in, in), dout = dalloc(n * 64, NULL);
    void *a[] = {&dout, &din, &n};
    launch(f, 1, 32, 0, a);
    long long out[64];
    CK(cuMemcpyDtoH_v2(out, dout, n * 64));
    for (unsigned i = 0; i < n; i++) {
        double d = in[i];
        float fl = (float)d;
        long long q = (long long)(i + 1) * -123456789LL;
        long long want[8] = {
            (long long)d,
            (long long)__builtin_rintf(fl), /* ties to even */
            (long long)__builtin_floorf(fl),
            (long long)__builtin_ceilf(fl),
            (long long)(unsigned)(d < 0 ? -d : d),
            q / 7 + q % 7,
            (long long)(fl / 4.0f * 8.0f),
            (long long)__builtin_sqrt(d * d),
        };
        for (int k = 0; k < 8; k++)
            cr_assert_eq(out[i * 8 + k], want[k], "input %g, result %d: %lld, want %lld", d, k,
                         out[i * 8 + k], want[k]);
    }
}

/* The instructions the interpreter runs through specialised loops
 * (ptx_exec.c, ptx_prepare), with operands where a wrong width, a missing
 * sign extension or a swapped comparison shows: a full warp and a partial
 * one (50 threads in a block of 64). */
static const char fastops_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry fastops(.param .u64 pa, .param .u64 pb, .param .u64 po, .param .u32 pn)\n"
    "{\n"
    "\t.reg .pred %p<6>;\n\t.reg .b16 %h<3>;\n\t.reg .b32 %r<40>;\n\t.reg .b64 %rd<20>;\n"
    "\tld.param.u64 %rd1, [pa];\n\tld.param.u64 %rd2, [pb];\n"
    "\tld.param.u64 %rd3, [po];\n\tld.param.u32 %r1, [pn];\n"
    "\tmov.u32 %r2, %tid.x;\n\tsetp.ge.u32 %p1, %r2, %r1;\n\t@%p1 bra DONE;\n"
    "\tcvta.to.global.u64 %rd1, %rd1;\n\tcvta.to.global.u64 %rd2, %rd2;\n"
    "\tmul.wide.u32 %rd4, %r2, 4;\n\tadd.s64 %rd5, %rd1, %rd4;\n\tadd.s64 %rd6, %rd2, %rd4;\n"
    "\tld.global.u32 %r3, [%rd5];\n\tld.global.u32 %r4, [%rd6];\n"
    "\tmul.wide.u32 %rd7, %r2, 128;\n\tadd.s64 %rd8, %rd3, %rd7;\n"
    "\tshr.s32 %r5, %r3, 3;\n\tst.global.u32 [%rd8], %r5;\n"
    "\tshr.u32 %r6, %r3, 3;\n\tst.global.u32 [%rd8+8], %r6;\n"
    "\tmul.wide.s32 %rd9, %r3, -3;\n\tst.global.u64 [%rd8+16], %rd9;\n"
    "\tmul.wide.u32 %rd10, %r3, %r4;\n\tst.global.u64 [%rd8+24], %rd10;\n"
    "\tsetp.le.s32 %p2, %r3, %r4;\n\tselp.u32 %r7, 1, 0, %p2;\n\tst.global.u32 [%rd8+32], %r7;\n"
    "\tsetp.gt.u32 %p3, %r3, %r4;\n\tselp.u32 %r8, 1, 0, %p3;\n\tst.global.u32 [%rd8+40], %r8;\n"
    "\txor.b32 %r9, %r3, 0xffff00ff;\n\tst.global.u32 [%rd8+48], %r9;\n"
    "\tsub.s32 %r10, %r3, 7;\n\tst.global.u32 [%rd8+56], %r10;\n"
    "\tmad.lo.s32 %r11, %r3, %r4, %r3;\n\tst.global.u32 [%rd8+64], %r11;\n"
    "\tshl.b32 %r12, %r3, 5;\n\tst.global.u32 [%rd8+72], %r12;\n"
    "\tcvt.s64.s32 %rd11, %r3;\n\tst.global.u64 [%rd8+80], %rd11;\n"
    "\tsetp.lt.s64 %p4, %rd11, -5;\n\tselp.u32 %r13, 1, 0, %p4;\n\tst.global.u32 [%rd8+88], %r13;\n"
    "\tcvt.u16.u32 %h1, %r3;\n\tcvt.u16.u32 %h2, %r4;\n"
    "\tst.global.u16 [%rd8+98], %h2;\n\tst.global.u16 [%rd8+96], %h1;\n"
    "\tld.global.s8 %r14, [%rd5];\n\tst.global.u32 [%rd8+104], %r14;\n"
    "\tand.b32 %r15, %r3, %r4;\n\tst.global.u32 [%rd8+112], %r15;\n"
    "\tor.b32 %r16, %r3, %r4;\n\tst.global.u32 [%rd8+120], %r16;\n"
    "DONE:\n\tret;\n}\n";

Test(ptx, specialised_paths_match_their_definitions)
{
    setup();
    enum { N = 50 };
    uint32_t a[N], b[N];
    for (unsigned i = 0; i < N; i++) {
        a[i] = (uint32_t)((i * 2654435761u) ^ (i & 1 ? 0x80000000u : 0)) - (i % 5 == 0 ? 0 : 9);
        b[i] = (uint32_t)(i * 40503u) ^ (i & 2 ? 0xf0000000u : 0);
    }
    a[3] = b[3]; /* equal operands: <= holds, > does not */
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, fastops_ptx));
    CK(cuModuleGetFunction(&f, m, "fastops"));
    CUdeviceptr da = dalloc(sizeof a, a), db = dalloc(sizeof b, b), dout = dalloc(N * 128, NULL);
    unsigned n = N;
    void *args[] = {&da, &db, &dout, &n};
    launch(f, 1, 64, 0, args);
    static unsigned char out[N * 128];
    CK(cuMemcpyDtoH_v2(out, dout, sizeof out));
    for (unsigned i = 0; i < N; i++) {
        uint32_t x = a[i], y = b[i];
        int32_t sx = (int32_t)x, sy = (int32_t)y;
        uint64_t want[16] = {
            (uint32_t)(sx >> 3),
            x >> 3,
            (uint64_t)((int64_t)sx * -3),
            (uint64_t)x * y,
            sx <= sy,
            x > y,
            x ^ 0xffff00ffu,
            x - 7u,
            x * y + x,
            x << 5,
            (uint64_t)(int64_t)sx,
            (int64_t)sx < -5,
            (uint16_t)x | (uint64_t)(uint16_t)y << 16,
            (uint32_t)(int32_t)(int8_t)(x & 0xff),
            x & y,
            x | y,
        };
        for (int k = 0; k < 16; k++) {
            uint64_t got;
            memcpy(&got, out + i * 128 + k * 8, 8);
            cr_assert_eq(got, want[k], "thread %u (a=%#x b=%#x), result %d: %#llx, want %#llx",
                         i, x, y, k, (unsigned long long)got, (unsigned long long)want[k]);
        }
    }
    CK(cuModuleUnload(m));
}

/* ---- refusals and faults --------------------------------------------------------- */

Test(ptx, unknown_instruction_refuses_the_launch)
{
    setup();
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry weird(.param .u64 p)\n{\n"
                              "\t.reg .b32 %r<3>;\n\tmov.u32 %r1, 1;\n"
                              "\tfrobnicate.b32 %r2, %r1;\n\tret;\n}\n";
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetFunction(&f, m, "weird"));
    unsigned long long x = 0;
    void *a[] = {&x};
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, a, NULL);
    cr_assert_eq(r, CUDA_ERROR_NOT_SUPPORTED, "launch -> %d", (int)r);
    CK(cuModuleUnload(m));
}

Test(ptx, shared_access_out_of_bounds_aborts, .signal = SIGABRT)
{
    setup();
    static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry oob()\n{\n"
                              "\t.reg .b32 %r<3>;\n\t.shared .align 4 .b8 s[64];\n"
                              "\tmov.u32 %r1, s;\n\tadd.s32 %r2, %r1, 64;\n"
                              "\tst.shared.u32 [%r2], %r1;\n\tret;\n}\n";
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetFunction(&f, m, "oob"));
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CK(cuCtxSynchronize());
}

Test(ptx, module_variables_local_arrays_barrier_reductions)
{
    CUfunction f = tk("pt_misc"), g = tk("pt_read_counter");
    unsigned blocks = 3, threads = 100;
    int k = 53;
    CUdeviceptr dout = dalloc(blocks * 5 * sizeof(int), NULL), dc = dalloc(4, NULL);
    void *a[] = {&dout, &k};
    launch(f, blocks, threads, 0, a);
    void *b[] = {&dc};
    launch(g, 1, 1, 0, b);
    int out[15];
    unsigned cnt;
    CK(cuMemcpyDtoH_v2(out, dout, sizeof out));
    CK(cuMemcpyDtoH_v2(&cnt, dc, sizeof cnt));
    static const int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    for (unsigned i = 0; i < blocks; i++) {
        cr_assert_eq(out[i * 5 + 0], 50);
        cr_assert_eq(out[i * 5 + 1], 1);
        cr_assert_eq(out[i * 5 + 2], 1);
        cr_assert_eq(out[i * 5 + 3], (k % 40) * 0 + table[(k % 40) & 7]);
        cr_assert_eq(out[i * 5 + 4], ((k + 7) % 40) * 1 + table[((k + 7) % 40) & 7]);
    }
    cr_assert_eq(cnt, blocks * threads);
}

Test(ptx, calls_of_device_functions)
{
    CUfunction f = tk("pt_call");
    unsigned n = 200;
    double *in = malloc(n * sizeof *in), *dres = malloc(n * sizeof *dres);
    long long *res = malloc(n * sizeof *res);
    for (unsigned i = 0; i < n; i++)
        in[i] = (i % 3 == 0) ? 1e9 * (double)(i + 1) + 0.25 : (double)i * 0.37 - 20.0;
    CUdeviceptr dout = dalloc(n * 8, NULL), ddout = dalloc(n * 8, NULL), din = dalloc(n * 8, in);
    void *a[] = {&dout, &ddout, &din, &n};
    launch(f, 4, 64, 0, a);
    CK(cuMemcpyDtoH_v2(res, dout, n * 8));
    CK(cuMemcpyDtoH_v2(dres, ddout, n * 8));
    for (unsigned i = 0; i < n; i++) {
        long long want = (i & 1) ? (long long)i * 3 + 7 + 7 : -(long long)i + 0;
        cr_assert_eq(res[i], want, "element %u: %lld, want %lld", i, res[i], want);
        /* CUDA's sin: within 2 ulp (of a result of magnitude <= 1) */
        double ref = __builtin_sin(in[i]);
        double err = dres[i] > ref ? dres[i] - ref : ref - dres[i];
        cr_assert(err <= 4.5e-16, "sin(%.17g) = %.17g, want %.17g", in[i], dres[i], ref);
    }
    free(in);
    free(dres);
    free(res);
}

/* ---- exact semantics (issue 32): expected values from the PTX ISA's
 * definitions, worked out by hand (and seen on an H200) ----------------------- */

/* Loads `ptx`, runs entry `name` on one block of `threads` with a zeroed
 * device buffer of `bytes` as its one parameter, and copies it to out. */
static void run_one(const char *ptx, const char *name, unsigned threads, void *out,
                    size_t bytes)
{
    setup();
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetFunction(&f, m, name));
    CUdeviceptr d = dalloc(bytes, NULL);
    void *a[] = {&d};
    launch(f, 1, threads, 0, a);
    CK(cuMemcpyDtoH_v2(out, d, bytes));
    CK(cuMemFree_v2(d));
    CK(cuModuleUnload(m));
}

#define PTX_HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"

/* mad.hi.cc.s32/.s64: the high half of the SIGNED product, plus c, with
 * the carry out of that addition. -3 * 5 = -15: high half all ones;
 * + 1 = 0 with a carry. (Unsigned, the high half would be 4.) */
static const char madhicc_ptx[] =
    PTX_HEAD ".visible .entry madhicc(.param .u64 po)\n{\n"
    "\t.reg .b32 %r<12>;\n\t.reg .b64 %rd<8>;\n"
    "\tld.param.u64 %rd1, [po];\n"
    "\tmov.u32 %r1, -3;\n\tmov.u32 %r2, 5;\n\tmov.u32 %r3, 1;\n\tmov.u32 %r4, 0;\n"
    "\tmad.hi.cc.s32 %r5, %r1, %r2, %r3;\n\taddc.u32 %r6, 0, 0;\n"
    "\tmad.hi.cc.s32 %r7, %r1, %r2, %r4;\n\taddc.u32 %r8, 0, 0;\n"
    "\tmov.u64 %rd2, -3;\n\tmov.u64 %rd3, 5;\n\tmov.u64 %rd4, 1;\n"
    "\tmad.hi.cc.s64 %rd5, %rd2, %rd3, %rd4;\n\taddc.u32 %r9, 0, 0;\n"
    "\tmad.hi.cc.u32 %r10, %r1, %r2, %r3;\n\taddc.u32 %r11, 0, 0;\n"
    "\tst.global.u32 [%rd1], %r5;\n\tst.global.u32 [%rd1+4], %r6;\n"
    "\tst.global.u32 [%rd1+8], %r7;\n\tst.global.u32 [%rd1+12], %r8;\n"
    "\tst.global.u64 [%rd1+16], %rd5;\n\tst.global.u32 [%rd1+24], %r9;\n"
    "\tst.global.u32 [%rd1+28], %r10;\n\tst.global.u32 [%rd1+32], %r11;\n"
    "\tret;\n}\n";

Test(ptx, mad_hi_cc_uses_the_signed_product)
{
    uint32_t o[9];
    run_one(madhicc_ptx, "madhicc", 1, o, sizeof o);
    uint64_t s64;
    memcpy(&s64, &o[4], 8);
    cr_assert_eq(o[0], 0u, "mad.hi.cc.s32 -3*5+1: %#x", o[0]);
    cr_assert_eq(o[1], 1u, "its carry: %u", o[1]);
    cr_assert_eq(o[2], 0xffffffffu, "mad.hi.cc.s32 -3*5+0: %#x", o[2]);
    cr_assert_eq(o[3], 0u, "its carry: %u", o[3]);
    cr_assert_eq(s64, 0u, "mad.hi.cc.s64 -3*5+1: %#llx", (unsigned long long)s64);
    cr_assert_eq(o[6], 1u, "its carry: %u", o[6]);
    /* unsigned: 0xfffffffd * 5 = 0x4_fffffff1, high half 4, + 1 = 5 */
    cr_assert_eq(o[7], 5u, "mad.hi.cc.u32: %#x", o[7]);
    cr_assert_eq(o[8], 0u, "its carry: %u", o[8]);
}

/* cvt to a narrower signed type into a wider register: chopped to the
 * type, then sign-extended to the register (as ld.s8 does), both through
 * a register source and an immediate one. */
static const char cvtsx_ptx[] =
    PTX_HEAD ".visible .entry cvtsx(.param .u64 po)\n{\n"
    "\t.reg .b32 %r<12>;\n\t.reg .f32 %f<3>;\n\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [po];\n"
    "\tmov.u32 %r1, 0x180;\n\tcvt.s8.s32 %r2, %r1;\n"
    "\tmov.u32 %r3, 0x18000;\n\tcvt.s16.s32 %r4, %r3;\n"
    "\tmov.f32 %f1, 0fC2FB0000;\n\tcvt.rzi.s8.f32 %r5, %f1;\n"
    "\tcvt.s8.s32 %r6, 0x17f;\n\tcvt.s8.s32 %r7, 0x1ff;\n"
    "\tmov.u32 %r8, -1000;\n\tcvt.sat.s8.s32 %r9, %r8;\n"
    "\tcvt.u8.s32 %r10, %r8;\n\tcvt.s8.s32 %rd2, %r1;\n"
    "\tst.global.u32 [%rd1], %r2;\n\tst.global.u32 [%rd1+4], %r4;\n"
    "\tst.global.u32 [%rd1+8], %r5;\n\tst.global.u32 [%rd1+12], %r6;\n"
    "\tst.global.u32 [%rd1+16], %r7;\n\tst.global.u32 [%rd1+20], %r9;\n"
    "\tst.global.u32 [%rd1+24], %r10;\n\tst.global.u64 [%rd1+32], %rd2;\n"
    "\tret;\n}\n";

Test(ptx, cvt_to_a_narrow_signed_type_sign_extends)
{
    uint32_t o[10];
    run_one(cvtsx_ptx, "cvtsx", 1, o, sizeof o);
    static const uint32_t want[7] = {
        0xffffff80u, /* 0x180 -> s8 0x80 = -128 */
        0xffff8000u, /* 0x18000 -> s16 0x8000 = -32768 */
        0xffffff83u, /* -125.5 truncated: -125 = s8 0x83 */
        0x7fu,       /* 0x17f -> s8 0x7f = 127 */
        0xffffffffu, /* 0x1ff -> s8 0xff = -1 */
        0xffffff80u, /* -1000 saturated to s8: -128 */
        0x18u,       /* -1000 = 0xfffffc18 -> u8 0x18: zero-extended */
    };
    for (int i = 0; i < 7; i++)
        cr_assert_eq(o[i], want[i], "result %d: %#x, want %#x", i, o[i], want[i]);
    uint64_t w64;
    memcpy(&w64, &o[8], 8);
    cr_assert_eq(w64, 0xffffffffffffff80ull, "into a 64-bit register: %#llx",
                 (unsigned long long)w64);
}

/* A NaN that f32 arithmetic makes is the one canonical NaN 0x7fffffff
 * (CUDART_NAN_F; single precision keeps no payload), through the general
 * and the specialised paths; f64 keeps the IEEE default 0xfff8000000000000
 * and an input's payload (CUDART_NAN; what an H200 gives too). */
static const char nan_ptx[] =
    PTX_HEAD ".visible .entry nans(.param .u64 po)\n{\n"
    "\t.reg .f32 %f<21>;\n\t.reg .f64 %fd<8>;\n\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [po];\n"
    "\tmov.f32 %f1, 0f00000000;\n\tmov.f32 %f2, 0f7F800000;\n\tmov.f32 %f3, 0fBF800000;\n"
    "\tmov.f32 %f4, 0f7F812345;\n\tmov.f32 %f5, 0f3F800000;\n"
    "\tdiv.rn.f32 %f6, %f1, %f1;\n\tsub.f32 %f7, %f2, %f2;\n\tmul.f32 %f8, %f2, %f1;\n"
    "\tsqrt.rn.f32 %f9, %f3;\n\tfma.rn.f32 %f10, %f2, %f1, %f1;\n\tadd.f32 %f11, %f4, %f5;\n"
    "\tadd.f32 %f12, %f2, 0fFF800000;\n\tsqrt.approx.f32 %f13, %f3;\n\tneg.f32 %f14, %f4;\n"
    "\tdiv.approx.f32 %f15, %f1, %f1;\n\tmul.rz.f32 %f16, %f2, %f1;\n"
    "\tabs.f32 %f17, %f4;\n\tmin.f32 %f18, %f4, %f4;\n\tcvt.rni.f32.f32 %f19, %f4;\n"
    "\tmin.f32 %f20, %f4, %f5;\n"
    "\tst.global.f32 [%rd1], %f6;\n\tst.global.f32 [%rd1+4], %f7;\n"
    "\tst.global.f32 [%rd1+8], %f8;\n\tst.global.f32 [%rd1+12], %f9;\n"
    "\tst.global.f32 [%rd1+16], %f10;\n\tst.global.f32 [%rd1+20], %f11;\n"
    "\tst.global.f32 [%rd1+24], %f12;\n\tst.global.f32 [%rd1+28], %f13;\n"
    "\tst.global.f32 [%rd1+32], %f14;\n\tst.global.f32 [%rd1+36], %f15;\n"
    "\tst.global.f32 [%rd1+40], %f16;\n\tst.global.f32 [%rd1+44], %f17;\n"
    "\tst.global.f32 [%rd1+64], %f18;\n\tst.global.f32 [%rd1+68], %f19;\n"
    "\tst.global.f32 [%rd1+72], %f20;\n"
    "\tmov.f64 %fd1, 0d0000000000000000;\n\tdiv.rn.f64 %fd2, %fd1, %fd1;\n"
    "\tmov.f64 %fd3, 0d7FF0000012345678;\n\tadd.f64 %fd4, %fd3, 0d3FF0000000000000;\n"
    "\tmov.f64 %fd7, 0dFFF8000000000001;\n"
    "\tst.global.f64 [%rd1+48], %fd2;\n\tst.global.f64 [%rd1+56], %fd4;\n"
    "\tneg.f64 %fd5, %fd3;\n\tabs.f64 %fd6, %fd7;\n"
    "\tst.global.f64 [%rd1+80], %fd5;\n\tst.global.f64 [%rd1+88], %fd6;\n"
    "\tret;\n}\n";

Test(ptx, nans_are_the_gpus)
{
    uint32_t o[24];
    run_one(nan_ptx, "nans", 1, o, sizeof o);
    static const char *const what[12] = {
        "0/0", "inf-inf", "inf*0", "sqrt(-1)", "fma(inf,0,0)", "NaN(payload)+1",
        "inf+(-inf) immediate", "sqrt.approx(-1)", "neg NaN(payload)", "div.approx 0/0",
        "mul.rz inf*0", "abs NaN(payload)",
    };
    for (int i = 0; i < 12; i++)
        cr_assert_eq(o[i], 0x7fffffffu, "f32 %s: %#x, want 0x7fffffff", what[i], o[i]);
    cr_assert_eq(o[16], 0x7fffffffu, "f32 min(NaN, NaN): %#x", o[16]);
    cr_assert_eq(o[17], 0x7fffffffu, "f32 cvt.rni NaN(payload): %#x", o[17]);
    cr_assert_eq(o[18], 0x3f800000u, "f32 min(NaN, 1): %#x", o[18]);
    uint64_t n64, a64;
    memcpy(&n64, &o[20], 8);
    memcpy(&a64, &o[22], 8);
    /* f64 neg and abs of a NaN: quieted, sign and payload kept */
    cr_assert_eq(n64, 0x7ff8000012345678ull, "f64 neg NaN: %#llx", (unsigned long long)n64);
    cr_assert_eq(a64, 0xfff8000000000001ull, "f64 abs NaN: %#llx", (unsigned long long)a64);
    uint64_t d0, d1;
    memcpy(&d0, &o[12], 8);
    memcpy(&d1, &o[14], 8);
    cr_assert_eq(d0, 0xfff8000000000000ull, "f64 0/0: %#llx", (unsigned long long)d0);
    cr_assert_eq(d1, 0x7ff8000012345678ull, "f64 NaN(payload)+1: %#llx",
                 (unsigned long long)d1);
}

/* Lanes of one warp reaching .sync warp operations from two branches with a
 * full membermask wait for each other (sm_70+): lanes 0-15 take the first
 * branch, 16-31 the second; each branch has its own vote, shfl, redux,
 * match and bar.warp.sync (which orders the shared-memory stores before
 * it). */
static const char wsync_ptx[] =
    PTX_HEAD ".visible .entry wsync(.param .u64 po)\n{\n"
    "\t.reg .pred %p<4>;\n\t.reg .b32 %r<24>;\n\t.reg .b64 %rd<8>;\n"
    "\t.shared .align 4 .b8 sh[128];\n"
    "\tld.param.u64 %rd1, [po];\n\tmov.u32 %r1, %laneid;\n"
    "\tmov.u32 %r20, sh;\n\tshl.b32 %r21, %r1, 2;\n\tadd.s32 %r22, %r20, %r21;\n"
    "\tadd.s32 %r23, %r1, 1;\n"
    "\tsetp.ge.u32 %p1, %r1, 16;\n\t@%p1 bra HIGH;\n"
    "\tsetp.ge.u32 %p2, %r1, 0;\n\tvote.sync.ballot.b32 %r2, %p2, 0xffffffff;\n"
    "\tmul.lo.u32 %r3, %r1, 10;\n\tadd.u32 %r4, %r1, 16;\n"
    "\tshfl.sync.idx.b32 %r5, %r3, %r4, 31, 0xffffffff;\n"
    "\tredux.sync.add.u32 %r6, %r1, 0xffffffff;\n"
    "\tand.b32 %r12, %r1, 3;\n\tmatch.any.sync.b32 %r13, %r12, 0xffffffff;\n"
    "\tst.shared.u32 [%r22], %r23;\n\tbar.warp.sync 0xffffffff;\n"
    "\tld.shared.u32 %r7, [%r22+64];\n"
    "\tbra JOIN;\n"
    "HIGH:\n"
    "\tand.b32 %r8, %r1, 1;\n\tsetp.ne.u32 %p3, %r8, 0;\n"
    "\tvote.sync.ballot.b32 %r2, %p3, 0xffffffff;\n"
    "\tmul.lo.u32 %r9, %r1, 100;\n\tsub.u32 %r10, %r1, 16;\n"
    "\tshfl.sync.idx.b32 %r5, %r9, %r10, 31, 0xffffffff;\n"
    "\tshl.b32 %r11, %r1, 1;\n\tredux.sync.add.u32 %r6, %r11, 0xffffffff;\n"
    "\tand.b32 %r14, %r1, 3;\n\tmatch.any.sync.b32 %r13, %r14, 0xffffffff;\n"
    "\tst.shared.u32 [%r22], %r23;\n\tbar.warp.sync 0xffffffff;\n"
    "\tld.shared.u32 %r7, [%r22+-64];\n"
    "JOIN:\n"
    "\tmul.wide.u32 %rd2, %r1, 20;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tst.global.u32 [%rd3], %r2;\n\tst.global.u32 [%rd3+4], %r5;\n"
    "\tst.global.u32 [%rd3+8], %r6;\n\tst.global.u32 [%rd3+12], %r7;\n"
    "\tst.global.u32 [%rd3+16], %r13;\n"
    "\tret;\n}\n";

Test(ptx, sync_warp_operations_wait_across_branches)
{
    uint32_t o[32][5];
    run_one(wsync_ptx, "wsync", 32, o, sizeof o);
    /* ballot: lanes 0-15 vote 1, lanes 16-31 their lane's low bit */
    uint32_t ballot = 0xffffu;
    for (unsigned l = 17; l < 32; l += 2)
        ballot |= 1u << l;
    /* redux: sum of l over 0-15 plus 2l over 16-31 */
    uint32_t sum = 0;
    for (unsigned l = 0; l < 32; l++)
        sum += l < 16 ? l : 2 * l;
    for (unsigned l = 0; l < 32; l++) {
        uint32_t shfl = l < 16 ? (l + 16) * 100 : (l - 16) * 10;
        uint32_t seen = l < 16 ? l + 17 : l - 15; /* the other lane's store, l+1 */
        cr_assert_eq(o[l][0], ballot, "lane %u ballot %#x, want %#x", l, o[l][0], ballot);
        cr_assert_eq(o[l][1], shfl, "lane %u shfl %u, want %u", l, o[l][1], shfl);
        cr_assert_eq(o[l][2], sum, "lane %u redux %u, want %u", l, o[l][2], sum);
        cr_assert_eq(o[l][3], seen, "lane %u after bar.warp.sync %u, want %u", l, o[l][3], seen);
        /* match.any on l & 3: every 4th lane of the warp, both branches */
        uint32_t same = 0x11111111u << (l & 3);
        cr_assert_eq(o[l][4], same, "lane %u match %#x, want %#x", l, o[l][4], same);
    }
}

/* redux.sync over a converged warp, every operation: values computed here
 * from the definition (over lanes 0-31, .add truncated to 32 bits). */
static const char redux_ptx[] =
    PTX_HEAD ".visible .entry redux(.param .u64 po)\n{\n"
    "\t.reg .b32 %r<20>;\n\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [po];\n\tmov.u32 %r1, %laneid;\n"
    "\tsub.s32 %r2, %r1, 20;\n\tmul.lo.u32 %r3, %r1, %r1;\n\tor.b32 %r4, %r3, 0xf00;\n"
    "\tmul.lo.u32 %r5, %r1, 0x9e3779b9;\n"
    "\tredux.sync.add.s32 %r10, %r2, 0xffffffff;\n"
    "\tredux.sync.min.s32 %r11, %r2, 0xffffffff;\n"
    "\tredux.sync.max.s32 %r12, %r2, 0xffffffff;\n"
    "\tredux.sync.min.u32 %r13, %r2, 0xffffffff;\n"
    "\tredux.sync.max.u32 %r14, %r2, 0xffffffff;\n"
    "\tredux.sync.and.b32 %r15, %r4, 0xffffffff;\n"
    "\tredux.sync.or.b32 %r16, %r4, 0xffffffff;\n"
    "\tredux.sync.xor.b32 %r17, %r3, 0xffffffff;\n"
    "\tredux.sync.add.u32 %r18, %r5, 0xffffffff;\n"
    "\tmul.wide.u32 %rd2, %r1, 36;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
    "\tst.global.u32 [%rd3], %r10;\n\tst.global.u32 [%rd3+4], %r11;\n"
    "\tst.global.u32 [%rd3+8], %r12;\n\tst.global.u32 [%rd3+12], %r13;\n"
    "\tst.global.u32 [%rd3+16], %r14;\n\tst.global.u32 [%rd3+20], %r15;\n"
    "\tst.global.u32 [%rd3+24], %r16;\n\tst.global.u32 [%rd3+28], %r17;\n"
    "\tst.global.u32 [%rd3+32], %r18;\n"
    "\tret;\n}\n";

Test(ptx, redux_sync)
{
    uint32_t o[32][9];
    run_one(redux_ptx, "redux", 32, o, sizeof o);
    uint32_t want[9] = {0, 0x7fffffff, 0x80000000u, 0xffffffffu, 0, ~0u, 0, 0, 0};
    for (uint32_t l = 0; l < 32; l++) {
        int32_t v = (int32_t)l - 20;
        uint32_t sq = l * l;
        want[0] += (uint32_t)v;
        if (v < (int32_t)want[1])
            want[1] = (uint32_t)v;
        if (v > (int32_t)want[2])
            want[2] = (uint32_t)v;
        if ((uint32_t)v < want[3])
            want[3] = (uint32_t)v;
        if ((uint32_t)v > want[4])
            want[4] = (uint32_t)v;
        want[5] &= sq | 0xf00;
        want[6] |= sq | 0xf00;
        want[7] ^= sq;
        want[8] += l * 0x9e3779b9u;
    }
    /* by hand: -144, -20, 11, 0 (lane 20), 0xffffffff (lane 19), 0xf00 */
    cr_assert_eq(want[0], (uint32_t)-144);
    cr_assert_eq(want[1], (uint32_t)-20);
    cr_assert_eq(want[2], 11u);
    for (unsigned l = 0; l < 32; l++)
        for (int i = 0; i < 9; i++)
            cr_assert_eq(o[l][i], want[i], "lane %u, result %d: %#x, want %#x", l, i, o[l][i],
                         want[i]);
}

/* What real programs emit and the interpreter refused: __threadfence()
 * (membar.gl) and the other fences, mul24.hi, and inline asm declaring its
 * own scoped registers (named without %). mul24.hi: bits 47..16 of the
 * 48-bit product of the low 24 bits. */
static const char misc_ptx[] =
    PTX_HEAD ".visible .entry misc(.param .u64 po)\n{\n"
    "\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<4>;\n"
    "\tld.param.u64 %rd1, [po];\n"
    "\tmov.u32 %r1, 0x00800001;\n\tmov.u32 %r2, 0x00400000;\n\tmov.u32 %r3, 0xffffff;\n"
    "\tmembar.gl;\n\tmembar.cta;\n\tmembar.sys;\n\tfence.sc.gpu;\n\tfence.acq_rel.sys;\n"
    "\tmul24.hi.s32 %r4, %r1, %r2;\n\tmul24.hi.u32 %r5, %r1, %r2;\n"
    "\tmul24.hi.u32 %r6, %r3, %r3;\n\tmul24.lo.s32 %r7, %r3, 3;\n"
    "\tmad24.hi.u32 %r11, %r1, %r2, 1;\n"
    "\tmov.u32 %r8, 7;\n"
    "\t{ .reg .pred p; setp.gt.s32 p, %r8, 5; selp.s32 %r9, 11, 22, p; }\n"
    "\t{ .reg .pred p; .reg .b32 t; setp.gt.s32 p, %r8, 9; selp.s32 t, 11, 22, p;"
    " add.s32 %r10, t, 1; }\n"
    "\tst.global.u32 [%rd1], %r4;\n\tst.global.u32 [%rd1+4], %r5;\n"
    "\tst.global.u32 [%rd1+8], %r6;\n\tst.global.u32 [%rd1+12], %r7;\n"
    "\tst.global.u32 [%rd1+16], %r9;\n\tst.global.u32 [%rd1+20], %r10;\n"
    "\tst.global.u32 [%rd1+24], %r11;\n"
    "\tret;\n}\n";

Test(ptx, fences_mul24_hi_and_scoped_registers)
{
    uint32_t o[7];
    run_one(misc_ptx, "misc", 1, o, sizeof o);
    /* 0x800001 is -0x7fffff as s24; * 0x400000 = -(2^45 - 2^22): as 48
     * bits 0xe00000400000, bits 47..16 0xe0000040 */
    cr_assert_eq(o[0], 0xe0000040u, "mul24.hi.s32: %#x", o[0]);
    /* 0x800001 * 0x400000 = 0x200000400000 */
    cr_assert_eq(o[1], 0x20000040u, "mul24.hi.u32: %#x", o[1]);
    /* 0xffffff^2 = 0xfffffe000001 */
    cr_assert_eq(o[2], 0xfffffe00u, "mul24.hi.u32 max: %#x", o[2]);
    cr_assert_eq(o[3], 0xfffffffdu, "mul24.lo.s32 -1*3: %#x", o[3]);
    cr_assert_eq(o[4], 11u, "scoped predicate: %u", o[4]);
    cr_assert_eq(o[5], 23u, "scoped register: %u", o[5]);
    cr_assert_eq(o[6], 0x20000041u, "mad24.hi.u32: bits 47..16, + 1: %#x", o[6]);
}

/* A module of many entries (the kernel array grows while they are decoded):
 * the refused one still says which instruction it lacks. */
Test(ptx, refused_kernel_names_its_instruction_in_a_large_module)
{
    setup();
    static char ptx[16384];
    size_t n = (size_t)snprintf(ptx, sizeof ptx,
                                PTX_HEAD ".visible .entry bad0()\n{\n"
                                "\t.reg .b32 %%r<3>;\n\tfrobnicate.b32 %%r2, %%r1;\n\tret;\n}\n");
    for (int i = 1; i < 40; i++)
        n += (size_t)snprintf(ptx + n, sizeof ptx - n,
                              ".visible .entry ok%d()\n{\n\tret;\n}\n", i);
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetFunction(&f, m, "bad0"));
    fflush(stderr);
    FILE *cap = tmpfile();
    cr_assert(cap);
    int saved = dup(2);
    dup2(fileno(cap), 2);
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char msg[512] = {0};
    rewind(cap);
    size_t got = fread(msg, 1, sizeof msg - 1, cap);
    fclose(cap);
    cr_assert_eq(r, CUDA_ERROR_NOT_SUPPORTED, "launch -> %d", (int)r);
    cr_assert(got > 0 && strstr(msg, "cannot run: unsupported PTX instruction 'frobnicate.b32'"),
              "message: %s", msg);
    CK(cuModuleUnload(m));
}

/* Module-scope variables (`__device__`, `__constant__`, `__managed__`, as
 * nvcc writes them): cuModuleGetGlobal gives each one's address and size in
 * its module's own storage, initializers applied; the driver's copies reach
 * them, kernels read and write the same bytes, each loaded module has its
 * own, and the storage is no allocation to free and goes with the unload. */
static const char globals_ptx[] =
    PTX_HEAD ".global .align 4 .u32 counter;\n"
    ".global .align 4 .b8 table[16] = {0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 96, 64, 0, 0, 128, "
    "64};\n"
    ".const .align 4 .b8 coef[32];\n"
    ".global .attribute(.managed) .align 4 .u32 mvar = 3;\n"
    ".visible .entry gvars(.param .u64 po)\n{\n"
    "\t.reg .b32 %r<10>;\n\t.reg .b64 %rd<12>;\n\t.reg .f32 %f<3>;\n"
    "\tld.param.u64 %rd1, [po];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tmov.u64 %rd3, counter;\n\tatom.global.add.u32 %r1, [%rd3], 1;\n"
    "\tmov.u32 %r2, %tid.x;\n\tmul.wide.u32 %rd4, %r2, 4;\n"
    "\tmov.u64 %rd5, coef;\n\tadd.s64 %rd6, %rd5, %rd4;\n\tld.const.u32 %r3, [%rd6];\n"
    "\tand.b64 %rd7, %rd4, 12;\n\tmov.u64 %rd8, table;\n\tadd.s64 %rd9, %rd8, %rd7;\n"
    "\tld.global.f32 %f1, [%rd9];\n\tcvt.rzi.s32.f32 %r4, %f1;\n"
    "\tld.global.u32 %r5, [mvar];\n\tadd.s32 %r6, %r3, %r4;\n\tadd.s32 %r7, %r6, %r5;\n"
    "\tadd.s64 %rd10, %rd2, %rd4;\n\tst.global.u32 [%rd10], %r7;\n\tret;\n}\n";

Test(ptx, module_variables_through_cuModuleGetGlobal)
{
    setup();
    CUmodule m, m2;
    CK(cuModuleLoadData(&m, globals_ptx));
    CK(cuModuleLoadData(&m2, globals_ptx));
    CUdeviceptr counter, table, coef, mvar, other;
    size_t sz = 0;
    CK(cuModuleGetGlobal_v2(&counter, &sz, m, "counter"));
    cr_assert_eq(sz, 4);
    CK(cuModuleGetGlobal_v2(&table, &sz, m, "table"));
    cr_assert_eq(sz, 16);
    CK(cuModuleGetGlobal_v2(&coef, NULL, m, "coef"));
    CK(cuModuleGetGlobal_v2(NULL, &sz, m, "coef"));
    cr_assert_eq(sz, 32);
    CK(cuModuleGetGlobal_v2(&mvar, &sz, m, "mvar"));
    cr_assert_eq(sz, 4);
    CK(cuModuleGetGlobal_v2(&other, NULL, m2, "counter"));
    cr_assert_neq(other, counter, "two loads share one variable");
    cr_assert_eq(counter % 4, 0);
    cr_assert_eq(table % 4, 0);
    cr_assert_eq(cuModuleGetGlobal_v2(&coef, &sz, m, "nope"), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(cuModuleGetGlobal_v2(NULL, NULL, m, "coef"), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuModuleGetGlobal_v2(&coef, &sz, (CUmodule)(uintptr_t)&sz, "coef"),
                 CUDA_ERROR_INVALID_HANDLE);
    /* the initializers: 1.0f 2.0f 3.5f 4.0f, and 3; the rest zero */
    float t[4];
    uint32_t u;
    CK(cuMemcpyDtoH_v2(t, table, sizeof t));
    cr_assert(t[0] == 1.0f && t[1] == 2.0f && t[2] == 3.5f && t[3] == 4.0f, "%g %g %g %g", t[0],
              t[1], t[2], t[3]);
    CK(cuMemcpyDtoH_v2(&u, mvar, 4));
    cr_assert_eq(u, 3);
    CK(cuMemcpyDtoH_v2(&u, counter, 4));
    cr_assert_eq(u, 0);
    int32_t cf[8];
    for (int i = 0; i < 8; i++)
        cf[i] = 100 * (i + 1);
    CK(cuMemcpyHtoD_v2(coef, cf, sizeof cf));
    CK(cuMemcpyHtoD_v2(counter + 0, &(uint32_t){ 5 }, 4));
    CUfunction f;
    CK(cuModuleGetFunction(&f, m, "gvars"));
    CUdeviceptr d = dalloc(32, NULL);
    void *a[] = {&d};
    launch(f, 1, 8, 0, a);
    launch(f, 1, 8, 0, a);
    int32_t o[8];
    CK(cuMemcpyDtoH_v2(o, d, sizeof o));
    for (int i = 0; i < 8; i++) {
        int32_t want = 100 * (i + 1) + (int32_t)t[i & 3] + 3;
        cr_assert_eq(o[i], want, "out[%d] = %d, expected %d", i, o[i], want);
    }
    CK(cuMemcpyDtoH_v2(&u, counter, 4));
    cr_assert_eq(u, 5 + 16, "counter %u", u);
    CK(cuMemcpyDtoH_v2(&u, other, 4));
    cr_assert_eq(u, 0, "the other module's counter moved: %u", u);
    /* its storage is the module's: no allocation to free */
    cr_assert_eq(cuMemFree_v2(counter), CUDA_ERROR_INVALID_VALUE);
    CK(cuModuleUnload(m));
    cr_assert_eq(cuMemcpyHtoD_v2(coef, cf, 4), CUDA_ERROR_INVALID_VALUE,
                 "a copy into an unloaded module's variable");
    CK(cuModuleUnload(m2));
    CK(cuMemFree_v2(d));
}

/* Device printf (vprintf, as nvcc calls it): the format applied to the
 * argument buffer the thread wrote (promoted types at their alignments),
 * each specifier through the host's printf, `*` widths, `%%`, a specifier
 * printf() does not take printed as written; the call returns the number
 * of arguments parsed. The output stays in the context's buffer until a
 * flush point (here cuCtxSynchronize), then reaches stdout, thread by
 * thread in order. */
static const char printf_fmt[] =
    "a=%d b=%5.2f c=%-4x| d=%lld e=%c f=%s %% g=%hd h=%*d i=%.*f j=%q\n";

static char *printf_ptx(void)
{
    static char ptx[8192];
    size_t n = (size_t)snprintf(
        ptx, sizeof ptx,
        PTX_HEAD ".extern .func (.param .b32 func_retval0) vprintf\n"
        "(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n"
        ".global .align 1 .b8 str[4] = {115, 116, 114, 0};\n"
        ".global .align 1 .b8 $fmt[%zu] = {",
        sizeof printf_fmt);
    for (size_t i = 0; i < sizeof printf_fmt; i++)
        n += (size_t)snprintf(ptx + n, sizeof ptx - n, "%s%d", i ? ", " : "",
                              (unsigned char)printf_fmt[i]);
    snprintf(ptx + n, sizeof ptx - n, "%s",
             "};\n.visible .entry pf(.param .u64 po)\n{\n"
             "\t.local .align 8 .b8 __local_depot0[72];\n"
             "\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n"
             "\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<12>;\n\t.reg .f64 %fd<3>;\n"
             "\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n"
             "\tadd.u64 %rd1, %SPL, 0;\n\tadd.u64 %rd2, %SP, 0;\n"
             "\tmov.u32 %r1, %tid.x;\n\tsub.s32 %r2, %r1, 42;\n"
             "\tst.local.u32 [%rd1], %r2;\n"
             "\tmov.f64 %fd1, 0d400921F9F01B866E;\n\tst.local.f64 [%rd1+8], %fd1;\n"
             "\tmov.u32 %r3, 255;\n\tst.local.u32 [%rd1+16], %r3;\n"
             "\tmov.u64 %rd3, -1234567890123;\n\tst.local.u64 [%rd1+24], %rd3;\n"
             "\tmov.u32 %r4, 90;\n\tst.local.u32 [%rd1+32], %r4;\n"
             "\tmov.u64 %rd4, str;\n\tcvta.global.u64 %rd5, %rd4;\n"
             "\tst.local.u64 [%rd1+40], %rd5;\n"
             "\tmov.u32 %r5, 65537;\n\tst.local.u32 [%rd1+48], %r5;\n"
             "\tmov.u32 %r6, 6;\n\tst.local.u32 [%rd1+52], %r6;\n"
             "\tmov.u32 %r7, 7;\n\tst.local.u32 [%rd1+56], %r7;\n"
             "\tmov.u32 %r6, 3;\n\tst.local.u32 [%rd1+60], %r6;\n"
             "\tmov.f64 %fd2, 0d4004000000000000;\n\tst.local.f64 [%rd1+64], %fd2;\n"
             "\tmov.u64 %rd6, $fmt;\n\tcvta.global.u64 %rd7, %rd6;\n"
             "\t{ // callseq 0, 0\n\t.reg .b32 temp_param_reg;\n"
             "\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd7;\n"
             "\t.param .b64 param1;\n\tst.param.b64 [param1+0], %rd2;\n"
             "\t.param .b32 retval0;\n"
             "\tcall.uni (retval0), \n\tvprintf, \n\t(\n\tparam0, \n\tparam1\n\t);\n"
             "\tld.param.b32 %r1, [retval0+0];\n\t} // callseq 0\n"
             "\tld.param.u64 %rd8, [po];\n\tcvta.to.global.u64 %rd9, %rd8;\n"
             "\tmov.u32 %r2, %tid.x;\n\tmul.wide.u32 %rd10, %r2, 4;\n"
             "\tadd.s64 %rd11, %rd9, %rd10;\n\tst.global.u32 [%rd11], %r1;\n\tret;\n}\n");
    return ptx;
}

Test(ptx, device_printf_formats_and_flushes_at_synchronize)
{
    setup();
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, printf_ptx()));
    CK(cuModuleGetFunction(&f, m, "pf"));
    CUdeviceptr d = dalloc(8, NULL);
    void *a[] = {&d};
    fflush(stdout);
    FILE *cap = tmpfile();
    cr_assert(cap);
    int saved = dup(1);
    dup2(fileno(cap), 1);
    CK(cuLaunchKernel(f, 1, 1, 1, 2, 1, 1, 0, NULL, a, NULL));
    fflush(stdout);
    long before = (long)lseek(fileno(cap), 0, SEEK_END); /* bytes written so far */
    CK(cuCtxSynchronize());
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    char got[1024] = {0};
    rewind(cap);
    size_t len = fread(got, 1, sizeof got - 1, cap);
    fclose(cap);
    cr_assert_eq(before, 0, "device printf reached stdout before a flush point");
    const char *want = "a=-42 b= 3.14 c=ff  | d=-1234567890123 e=Z f=str % g=1 h=     7 "
                       "i=2.500 j=%q\n"
                       "a=-41 b= 3.14 c=ff  | d=-1234567890123 e=Z f=str % g=1 h=     7 "
                       "i=2.500 j=%q\n";
    cr_assert_eq(len, strlen(want), "got %zu bytes:\n%s", len, got);
    cr_assert_str_eq(got, want);
    int32_t ret[2];
    CK(cuMemcpyDtoH_v2(ret, d, sizeof ret));
    cr_assert(ret[0] == 11 && ret[1] == 11, "printf returned %d, %d (11 arguments)", ret[0],
              ret[1]);
    CK(cuMemFree_v2(d));
    CK(cuModuleUnload(m));
}

/* cuLibraryGetGlobal: a library's variables, as a module's (cuda.h); a
 * module without variables has none to find. */
Test(ptx, library_variables_through_cuLibraryGetGlobal)
{
    setup();
    CUlibrary lib;
    CK(cuLibraryLoadData(&lib, globals_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUdeviceptr table;
    size_t sz = 0;
    CK(cuLibraryGetGlobal(&table, &sz, lib, "table"));
    cr_assert_eq(sz, 16);
    float t[4];
    CK(cuMemcpyDtoH_v2(t, table, sizeof t));
    cr_assert(t[0] == 1.0f && t[3] == 4.0f, "%g %g", t[0], t[3]);
    cr_assert_eq(cuLibraryGetGlobal(&table, &sz, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(cuLibraryGetGlobal(&table, &sz, (CUlibrary)(uintptr_t)&sz, "table"),
                 CUDA_ERROR_INVALID_HANDLE);
    CK(cuLibraryUnload(lib));
    CUmodule m;
    CK(cuModuleLoadData(&m, PTX_HEAD ".visible .entry none()\n{\n\tret;\n}\n"));
    cr_assert_eq(cuModuleGetGlobal_v2(&table, &sz, m, "table"), CUDA_ERROR_NOT_FOUND);
    CK(cuModuleUnload(m));
}
