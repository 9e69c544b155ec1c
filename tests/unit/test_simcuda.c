/*
 * Unit tests of simcuda, the simulated driver (tests/simcuda). Criterion
 * runs every test in its own process, so each test may set SIMCUDA_* knobs
 * with setenv() before cuInit. Tests that must crash run in a forked child.
 */
#include <criterion/criterion.h>

#include <cuda.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim_ck.h"

static CUcontext g_ctx;
static CUmodule g_mod;
static CUfunction f_fill, f_scale, f_axpy, f_add, f_affine, f_copy;

struct vr_affine {
    float *out;
    const float *in;
    float scale;
    float shift;
    unsigned long long n;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void setup(void)
{
    CUdevice d;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&g_ctx, d));
    CK(cuCtxSetCurrent(g_ctx));
}

static void load_kernels(void)
{
    const char *path = getenv("SIMCUDA_TEST_PTX");
    cr_assert(path, "SIMCUDA_TEST_PTX is not set");
    CK(cuModuleLoad(&g_mod, path));
    CK(cuModuleGetFunction(&f_fill, g_mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&f_scale, g_mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&f_axpy, g_mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&f_add, g_mod, "vr_add_f32"));
    CK(cuModuleGetFunction(&f_affine, g_mod, "vr_affine_struct"));
    CK(cuModuleGetFunction(&f_copy, g_mod, "vr_copy_u8"));
}

static void start(void)
{
    setup();
    load_kernels();
}

static CUdeviceptr alloc_f32(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, n * sizeof(float)));
    CK(cuMemsetD32_v2(p, 0, n));
    return p;
}

static void launch_fill(CUstream s, CUdeviceptr out, float v, unsigned long long n)
{
    void *args[] = {&out, &v, &n};
    CK(cuLaunchKernel(f_fill, 2, 1, 1, 64, 1, 1, 0, s, args, NULL));
}

static void launch_scale(CUstream s, CUdeviceptr out, CUdeviceptr in, float k, unsigned long long n)
{
    void *args[] = {&out, &in, &k, &n};
    CK(cuLaunchKernel(f_scale, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void read_f32(float *dst, CUdeviceptr src, size_t n)
{
    CK(cuMemcpyDtoH_v2(dst, src, n * sizeof(float)));
}

static void expect_all(CUdeviceptr p, size_t n, float v)
{
    float *h = malloc(n * sizeof *h);
    read_f32(h, p, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], v, "element %zu is %g, want %g", i, (double)h[i], (double)v);
    free(h);
}

static size_t granularity(void)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    return g;
}

static CUmemGenericAllocationHandle vmm_create(size_t size)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, size, &prop, 0));
    return h;
}

static void vmm_access(CUdeviceptr p, size_t size)
{
    CUmemAccessDesc d = {0};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = 0;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(p, size, &d, 1));
}

/* Run fn in a forked child with default SIGSEGV handling; return the status. */
static int in_child(void (*fn)(int fd), int fd)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        fn(fd);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return st;
}

#define CHILD_CK(call, code)                                                   \
    do {                                                                       \
        if ((call) != CUDA_SUCCESS)                                            \
            _exit(code);                                                       \
    } while (0)

/* ---- initialization, device, context ------------------------------------------ */

/* A function cuda.h declares that simcuda does not model is there all the
 * same (gen_stubs.py): it answers CUDA_ERROR_NOT_SUPPORTED. */
Test(simcuda, an_unmodelled_function_is_not_supported)
{
    cr_assert_eq(cuDeviceGetNvSciSyncAttributes(NULL, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
}

Test(simcuda, init_device_context)
{
    CUdeviceptr p;
    int v = 0, n = 0;
    CKE(cuMemAlloc_v2(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    CKE(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CK(cuDriverGetVersion(&v));
    cr_assert_eq(v, 13000);

    CK(cuInit(0));
    CK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 1);
    CUdevice d;
    CKE(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGet(&d, 0));
    CKE(cuMemAlloc_v2(&p, 16), CUDA_ERROR_INVALID_CONTEXT);

    int a;
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d));
    cr_assert_eq(a, 1);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
    cr_assert_eq(a, 9);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
    cr_assert_eq(a, 0);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d));
    cr_assert_eq(a, 1);
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
    cr_assert_gt(a, 0);
    a = 7;
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_ECC_ENABLED, d));
    cr_assert_eq(a, 0);
    char name[64];
    CK(cuDeviceGetName(name, sizeof name, d));
    cr_assert_gt(strlen(name), 0);
    size_t total;
    CK(cuDeviceTotalMem_v2(&total, d));
    cr_assert_gt(total, (size_t)1 << 30);

    CUcontext c1, c2, cur;
    CK(cuCtxCreate_v4(&c1, NULL, 0, d));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, c1);
    CK(cuMemAlloc_v2(&p, 16));
    CK(cuMemFree_v2(p));
    CKE(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuDevicePrimaryCtxRetain(&c2, d));
    cr_assert_neq(c2, c1);
    CKE(cuCtxEnablePeerAccess(c2, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    CK(cuCtxPushCurrent_v2(c2));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, c2);
    CK(cuCtxPopCurrent_v2(&cur));
    cr_assert_eq(cur, c2);
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, c1);
    CK(cuCtxDestroy_v2(c1));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_null(cur);
    CKE(cuCtxDestroy_v2(c1), CUDA_ERROR_INVALID_CONTEXT);
    CKE(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(c2));
    CK(cuCtxSynchronize());
    CK(cuDevicePrimaryCtxRelease_v2(d));

    const char *s;
    CK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_INVALID_VALUE");
    CK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    cr_assert_str_eq(s, "out of memory");
    CKE(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
}

/* ---- modules and kernels --------------------------------------------------------- */

Test(simcuda, ptx_layouts_of_standard_kernels)
{
    start();
    struct {
        CUfunction f;
        const char *name;
        size_t n;
        size_t off[4], size[4];
    } want[] = {
        {f_fill, "vr_fill_f32", 3, {0, 8, 16}, {8, 4, 8}},
        {f_scale, "vr_scale_f32", 4, {0, 8, 16, 24}, {8, 8, 4, 8}},
        {f_axpy, "vr_axpy_f32", 4, {0, 8, 16, 24}, {8, 8, 4, 8}},
        {f_add, "vr_add_f32", 4, {0, 8, 16, 24}, {8, 8, 8, 8}},
        {f_affine, "vr_affine_struct", 1, {0}, {32}},
        {f_copy, "vr_copy_u8", 3, {0, 8, 16}, {8, 8, 8}},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const char *name;
        CK(cuFuncGetName(&name, want[k].f));
        cr_assert_str_eq(name, want[k].name);
        for (size_t i = 0; i < want[k].n; i++) {
            size_t off = 99, size = 99;
            CK(cuFuncGetParamInfo(want[k].f, i, &off, &size));
            cr_assert_eq(off, want[k].off[i], "%s param %zu offset %zu", name, i, off);
            cr_assert_eq(size, want[k].size[i], "%s param %zu size %zu", name, i, size);
        }
        size_t off;
        CKE(cuFuncGetParamInfo(want[k].f, want[k].n, &off, NULL), CUDA_ERROR_INVALID_VALUE);
    }
    cr_assert_eq(sizeof(struct vr_affine), 32);

    /* An entry without a host implementation runs through the PTX
     * interpreter; a commented-out one does not exist. */
    static const char ptx[] =
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        "// .entry commented_out(\n"
        ".visible .entry other_kernel(\n"
        "\t.param .u32 a,\n\t.param .align 8 .b8 s[12],\n\t.param .u64 .ptr .global .align 16 p\n)\n{ ret; }\n"
        ".visible .entry vr_fill_f32(\n\t.param .u64 x\n)\n{ ret; }\n";
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetFunction(&f, m, "other_kernel"));
    CKE(cuModuleGetFunction(&f, m, "commented_out"), CUDA_ERROR_NOT_FOUND);
    /* same name, another signature: not the standard kernel, its PTX runs */
    CK(cuModuleGetFunction(&f, m, "vr_fill_f32"));
    size_t poff, psize;
    CK(cuFuncGetParamInfo(f, 0, &poff, &psize));
    cr_assert_eq(psize, 8);
    CKE(cuModuleGetFunction(&f, m, "nope"), CUDA_ERROR_NOT_FOUND);
    CK(cuModuleUnload(m));
    CKE(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuModuleLoadData(&m, "not ptx at all"), CUDA_ERROR_INVALID_IMAGE);
}

/* vr_sum_range_f32(out, begin, end): out[0] = the in-order sum of [begin, end),
 * one value whatever the launch shape; end may be one past the allocation. */
Test(simcuda, sum_range_kernel)
{
    start();
    CUfunction f;
    CK(cuModuleGetFunction(&f, g_mod, "vr_sum_range_f32"));
    const char *name;
    CK(cuFuncGetName(&name, f));
    cr_assert_str_eq(name, "vr_sum_range_f32");
    for (size_t i = 0; i < 3; i++) {
        size_t off = 99, size = 99;
        CK(cuFuncGetParamInfo(f, i, &off, &size));
        cr_assert_eq(off, 8 * i);
        cr_assert_eq(size, 8);
    }
    size_t off;
    CKE(cuFuncGetParamInfo(f, 3, &off, NULL), CUDA_ERROR_INVALID_VALUE);

    /* in order: ((1e8 + 1) - 1e8) + 1 = 1; any other order gives 0 or 2 */
    float h[4] = {1e8f, 1.0f, -1e8f, 1.0f};
    CUdeviceptr in = alloc_f32(4), out = alloc_f32(2);
    CK(cuMemcpyHtoD_v2(in, h, sizeof h));
    CUdeviceptr end = in + sizeof h;
    void *args[] = {&out, &in, &end};
    CK(cuLaunchKernel(f, 8, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    float r[2] = {-1, -1};
    read_f32(r, out, 2);
    cr_assert_eq(r[0], 1.0f, "sum %g", (double)r[0]);
    cr_assert_eq(r[1], 0.0f, "only out[0] is written");

    CUdeviceptr b2 = in + 4, e2 = in + 12; /* [1, -1e8] */
    void *args2[] = {&out, &b2, &e2};
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args2, NULL));
    read_f32(r, out, 1);
    cr_assert_eq(r[0], -1e8f + 1.0f);
    void *args3[] = {&out, &in, &in}; /* empty range */
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args3, NULL));
    read_f32(r, out, 1);
    cr_assert_eq(r[0], 0.0f);
}

static const char ptx_fill_only[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry vr_fill_f32(\n\t.param .u64 a,\n\t.param .f32 b,\n\t.param .u64 c\n)\n{ ret; }\n";
static const char ptx_three[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry vr_scale_f32(\n\t.param .u64 a,\n\t.param .u64 b,\n\t.param .f32 c,\n"
    "\t.param .u64 d\n)\n{ ret; }\n"
    ".visible .entry vr_copy_u8(\n\t.param .u64 a,\n\t.param .u64 b,\n\t.param .u64 c\n)\n{ ret; }\n"
    ".visible .entry vr_add_f32(\n\t.param .u64 a,\n\t.param .u64 b,\n\t.param .u64 c,\n"
    "\t.param .u64 d\n)\n{ ret; }\n";

/* After an unload a later load may hand out the same CUfunction value for
 * another kernel (as a real driver may): a cache keyed by CUfunction must be
 * evicted on unload. */
Test(simcuda, unloaded_function_handles_are_reused)
{
    setup();
    CUmodule m1, m2;
    CUfunction fill, scale, copy;
    CK(cuModuleLoadData(&m1, ptx_fill_only));
    CK(cuModuleGetFunction(&fill, m1, "vr_fill_f32"));
    CUmodule got = NULL;
    CK(cuFuncGetModule(&got, fill));
    cr_assert_eq(got, m1);
    CK(cuModuleUnload(m1));
    const char *name;
    CKE(cuFuncGetName(&name, fill), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuFuncGetModule(&got, fill), CUDA_ERROR_INVALID_HANDLE);

    CK(cuModuleLoadData(&m2, ptx_three));
    CK(cuModuleGetFunction(&scale, m2, "vr_scale_f32"));
    CK(cuModuleGetFunction(&copy, m2, "vr_copy_u8"));
    cr_assert_eq(scale, fill, "the first function of the next load reuses the handle");
    cr_assert_neq(copy, fill);
    CK(cuFuncGetName(&name, fill));
    cr_assert_str_eq(name, "vr_scale_f32");
    size_t off, size;
    CK(cuFuncGetParamInfo(fill, 2, &off, &size));
    cr_assert_eq(off, 16);
    cr_assert_eq(size, 4);
    CK(cuFuncGetParamInfo(fill, 3, &off, &size)); /* four parameters now */
    CK(cuFuncGetModule(&got, fill));
    cr_assert_eq(got, m2);
    CK(cuModuleUnload(m2));

    /* reloading the same image gives the same handles in the same order */
    CK(cuModuleLoadData(&m2, ptx_three));
    CUfunction scale2, copy2;
    CK(cuModuleGetFunction(&scale2, m2, "vr_scale_f32"));
    CK(cuModuleGetFunction(&copy2, m2, "vr_copy_u8"));
    cr_assert_eq(scale2, scale);
    cr_assert_eq(copy2, copy);
    CK(cuModuleUnload(m2));
}

/* Libraries: CUkernel handles, their functions, parameter info, unload; the
 * function handles are reused like a module's. */
Test(simcuda, libraries_and_kernels)
{
    setup();
    const char *path = getenv("SIMCUDA_TEST_PTX");
    cr_assert(path);
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp);
    static char ptx[1 << 20];
    size_t len = fread(ptx, 1, sizeof ptx - 1, fp);
    fclose(fp);
    ptx[len] = 0;
    CUlibrary lib;
    CK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel kfill, knope;
    CK(cuLibraryGetKernel(&kfill, lib, "vr_fill_f32"));
    CKE(cuLibraryGetKernel(&knope, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    size_t off = 0, size = 0;
    CK(cuKernelGetParamInfo(kfill, 1, &off, &size));
    cr_assert_eq(off, 8);
    cr_assert_eq(size, 4);
    CKE(cuKernelGetParamInfo(kfill, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);
    CUfunction f;
    CK(cuKernelGetFunction(&f, kfill));
    cr_assert_neq((void *)f, (void *)kfill);
    CUmodule lm;
    CK(cuFuncGetModule(&lm, f));
    CKE(cuModuleUnload(lm), CUDA_ERROR_INVALID_HANDLE); /* goes with the library */

    enum { N = 8 };
    CUdeviceptr p = alloc_f32(N);
    float v = 2.5f;
    unsigned long long n = N;
    void *args[] = {&p, &v, &n};
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    expect_all(p, N, 2.5f);
    v = 3.5f;
    CK(cuLaunchKernel((CUfunction)kfill, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    expect_all(p, N, 3.5f);

    /* a kernel node given as kern (func NULL) */
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS np = {0};
    np.kern = kfill;
    np.gridDimX = np.gridDimY = np.gridDimZ = np.blockDimX = np.blockDimY = np.blockDimZ = 1;
    v = 4.5f;
    np.kernelParams = args;
    CUgraphNode node;
    CK(cuGraphAddKernelNode_v2(&node, g, NULL, 0, &np));
    CUDA_KERNEL_NODE_PARAMS gp;
    CK(cuGraphKernelNodeGetParams_v2(node, &gp));
    cr_assert_null(gp.func);
    cr_assert_eq(gp.kern, kfill);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(p, N, 4.5f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));

    CK(cuLibraryUnload(lib));
    CKE(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuKernelGetFunction(&f, kfill), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuKernelGetParamInfo(kfill, 0, &off, &size), CUDA_ERROR_INVALID_VALUE);
    const char *name;
    CKE(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
    CUmodule m;
    CUfunction again;
    CK(cuModuleLoadData(&m, ptx_fill_only));
    CK(cuModuleGetFunction(&again, m, "vr_fill_f32"));
    cr_assert(again == f || (void *)again == (void *)kfill,
              "a library's records are reused by the next load");
    CK(cuModuleUnload(m));
}

Test(simcuda, host_kernels_compute_documented_results)
{
    start();
    enum { N = 1000 };
    float hx[N], hy[N], out[N];
    for (int i = 0; i < N; i++) {
        hx[i] = (float)i * 0.37f + 1.1f;
        hy[i] = 3.3f - (float)i * 0.013f;
    }
    CUdeviceptr x = alloc_f32(N), y = alloc_f32(N), z = alloc_f32(N);
    CK(cuMemcpyHtoD_v2(x, hx, sizeof hx));
    CK(cuMemcpyHtoD_v2(y, hy, sizeof hy));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamSynchronize(s));
    CK(cuCtxSynchronize());
    unsigned long long n = N;

    launch_fill(s, z, 2.5f, n);
    CK(cuStreamSynchronize(s));
    expect_all(z, N, 2.5f);

    float k = 1.7f;
    launch_scale(s, z, x, k, n);
    CK(cuStreamSynchronize(s));
    read_f32(out, z, N);
    for (int i = 0; i < N; i++)
        cr_assert(memcmp(&out[i], &(float){k * hx[i]}, 4) == 0, "scale %d", i);

    float a = -0.61f;
    void *axpy_args[] = {&y, &x, &a, &n};
    CK(cuLaunchKernel(f_axpy, 3, 1, 1, 128, 1, 1, 0, s, axpy_args, NULL));
    CK(cuStreamSynchronize(s));
    read_f32(out, y, N);
    for (int i = 0; i < N; i++)
        cr_assert(memcmp(&out[i], &(float){hy[i] + a * hx[i]}, 4) == 0, "axpy %d", i);
    float y1[N];
    memcpy(y1, out, sizeof y1);

    void *add_args[] = {&z, &x, &y, &n};
    CK(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, add_args, NULL));
    CK(cuStreamSynchronize(s));
    read_f32(out, z, N);
    for (int i = 0; i < N; i++)
        cr_assert(memcmp(&out[i], &(float){hx[i] + y1[i]}, 4) == 0, "add %d", i);

    struct vr_affine p = {(float *)(uintptr_t)z, (const float *)(uintptr_t)x, 0.3f, -4.25f, n};
    void *aff_args[] = {&p};
    CK(cuLaunchKernel(f_affine, 4, 1, 1, 256, 1, 1, 0, s, aff_args, NULL));
    CK(cuStreamSynchronize(s));
    read_f32(out, z, N);
    for (int i = 0; i < N; i++)
        cr_assert(memcmp(&out[i], &(float){hx[i] * 0.3f + -4.25f}, 4) == 0, "affine %d", i);

    /* vr_copy_u8 through `extra` (a packed argument buffer) */
    CUdeviceptr b1, b2;
    unsigned char hb[777], hc[777];
    for (int i = 0; i < 777; i++)
        hb[i] = (unsigned char)(i * 7 + 3);
    CK(cuMemAlloc_v2(&b1, sizeof hb));
    CK(cuMemAlloc_v2(&b2, sizeof hb));
    CK(cuMemcpyHtoD_v2(b1, hb, sizeof hb));
    struct {
        uint64_t dst, src, n;
    } buf = {b2, b1, sizeof hb};
    size_t bsize = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize,
                     CU_LAUNCH_PARAM_END};
    CK(cuLaunchKernel(f_copy, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
    buf.n = 0; /* arguments were copied at launch */
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH_v2(hc, b2, sizeof hc));
    cr_assert(memcmp(hb, hc, sizeof hb) == 0);

    /* validation like the driver */
    CKE(cuLaunchKernel(f_copy, 1, 1, 1, 1, 1, 1, 0, s, axpy_args, extra), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(f_copy, 0, 1, 1, 1, 1, 1, 0, s, axpy_args, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(f_copy, 1, 1, 1, 2048, 1, 1, 0, s, axpy_args, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel((CUfunction)&p, 1, 1, 1, 1, 1, 1, 0, s, axpy_args, NULL),
        CUDA_ERROR_INVALID_HANDLE);
    bsize = 8;
    CKE(cuLaunchKernel(f_copy, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy_v2(s));
}

/* ---- streams and events ------------------------------------------------------------ */

Test(simcuda, stream_runs_work_async_in_order)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "40000", 1);
    start();
    enum { N = 256 };
    CUdeviceptr x = alloc_f32(N), y = alloc_f32(N), z = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamQuery(s));
    unsigned long long n = N;
    double t0 = now_ms();
    launch_fill(s, x, 1.0f, n);
    launch_scale(s, y, x, 2.0f, n);
    float a = 3.0f;
    void *axpy_args[] = {&y, &x, &a, &n};
    CK(cuLaunchKernel(f_axpy, 1, 1, 1, 32, 1, 1, 0, s, axpy_args, NULL));
    void *add_args[] = {&z, &y, &x, &n};
    CK(cuLaunchKernel(f_add, 1, 1, 1, 32, 1, 1, 0, s, add_args, NULL));
    cr_assert_lt(now_ms() - t0, 40.0, "launches must not wait for the kernels");
    CKE(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(s));
    cr_assert_geq(now_ms() - t0, 4 * 40.0 - 1);
    CK(cuStreamQuery(s));
    expect_all(z, N, 6.0f); /* y = 2x + 3x = 5, z = y + x */

    /* Pending work completes after cuStreamDestroy. */
    launch_fill(s, x, 9.0f, n);
    CK(cuStreamDestroy_v2(s));
    CKE(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CK(cuCtxSynchronize());
    expect_all(x, N, 9.0f);
}

Test(simcuda, legacy_stream_semantics)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "150000", 1);
    start();
    enum { N = 64 };
    CUdeviceptr x = alloc_f32(N), y = alloc_f32(N), scratch = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUstream blocking, nonblocking;
    CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    launch_fill(nonblocking, scratch, 1.0f, N); /* y is written after 2 delays */
    launch_fill(nonblocking, y, 3.0f, N);
    launch_fill(blocking, x, 7.0f, N);
    /* the (synchronous) copy runs in the legacy stream: it waits for the
     * blocking stream but not for the non-blocking one */
    float h[N];
    CK(cuMemcpyDtoH_v2(h, x, sizeof h));
    cr_assert_eq(h[0], 7.0f);
    cr_assert_eq(h[N - 1], 7.0f);
    CK(cuMemcpyDtoH_v2(h, y, sizeof h));
    cr_assert_eq(h[0], 0.0f, "legacy stream waited for a non-blocking stream");
    CK(cuCtxSynchronize());
    expect_all(y, N, 3.0f);

    /* a blocking stream waits for earlier legacy work */
    launch_fill(NULL, x, 1.0f, N);
    launch_scale(blocking, y, x, 5.0f, N);
    CK(cuStreamSynchronize(blocking));
    expect_all(y, N, 5.0f);
    CK(cuStreamDestroy_v2(blocking));
    CK(cuStreamDestroy_v2(nonblocking));
}

struct pts_arg {
    CUcontext ctx;
    CUdeviceptr x;
    CUresult other_query;
};

static void *pts_thread(void *p)
{
    struct pts_arg *a = p;
    cuCtxSetCurrent(a->ctx);
    a->other_query = cuStreamQuery_ptsz(NULL);
    return NULL;
}

Test(simcuda, per_thread_default_stream)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "150000", 1);
    start();
    CUdeviceptr x = alloc_f32(16);
    CK(cuCtxSynchronize());
    float v = 4.0f;
    unsigned long long n = 16;
    void *args[] = {&x, &v, &n};
    CK(cuLaunchKernel_ptsz(f_fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CKE(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
    CKE(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    struct pts_arg a = {g_ctx, x, CUDA_ERROR_UNKNOWN};
    pthread_t th;
    pthread_create(&th, NULL, pts_thread, &a);
    pthread_join(th, NULL);
    cr_assert_eq(a.other_query, CUDA_SUCCESS, "another thread has its own per-thread stream");
    CK(cuStreamSynchronize_ptsz(NULL));
    expect_all(x, 16, 4.0f);
}

Test(simcuda, events)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "100000", 1);
    start();
    enum { N = 128 };
    CUdeviceptr x = alloc_f32(N), y = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUstream a, b;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CUevent e0, e1, never;
    CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&never, CU_EVENT_DISABLE_TIMING));
    CK(cuEventQuery(never)); /* never recorded: complete */
    CK(cuEventRecord(e0, a));
    launch_fill(a, x, 5.0f, N);
    CK(cuEventRecord(e1, a));
    CKE(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    CK(cuStreamWaitEvent(b, e1, 0));
    launch_scale(b, y, x, 2.0f, N);
    CK(cuEventRecord(e1, b)); /* re-recording does not affect the earlier wait */
    CK(cuStreamSynchronize(b));
    expect_all(y, N, 10.0f);
    CK(cuEventSynchronize(e1));
    CK(cuEventQuery(e1));
    float ms = 0;
    CK(cuEventElapsedTime_v2(&ms, e0, e1));
    cr_assert_geq(ms, 150.0f, "two delayed kernels between the events, got %g ms", (double)ms);
    CKE(cuEventElapsedTime_v2(&ms, e0, never), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventDestroy_v2(e0));
    CKE(cuEventQuery(e0), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventDestroy_v2(e1));
    CK(cuEventDestroy_v2(never));
    CK(cuStreamDestroy_v2(a));
    CK(cuStreamDestroy_v2(b));
}

/* ---- memory -------------------------------------------------------------------------- */

Test(simcuda, native_free_errors)
{
    setup();
    CUdeviceptr p, base;
    size_t size;
    CK(cuMemAlloc_v2(&p, 1000));
    CKE(cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemGetAddressRange_v2(&base, &size, p + 123));
    cr_assert_eq(base, p);
    cr_assert_eq(size, 1000);
    CK(cuMemGetAddressRange_v2(NULL, NULL, p + 999));
    CKE(cuMemGetAddressRange_v2(&base, &size, p + 1000 + 4096 * 16), CUDA_ERROR_NOT_FOUND);
    CKE(cuMemFree_v2(p + 8), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree_v2(0));
    CK(cuMemFree_v2(p));
    CKE(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemFree_v2((CUdeviceptr)(uintptr_t)&size), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemcpyHtoD_v2(p, &size, sizeof size), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemAlloc_v2(&p, (size_t)1 << 50), CUDA_ERROR_OUT_OF_MEMORY);
}

static void child_use_after_free(int fd)
{
    (void)fd;
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    CHILD_CK(cuInit(0), 10);
    CHILD_CK(cuDeviceGet(&d, 0), 11);
    CHILD_CK(cuDevicePrimaryCtxRetain(&c, d), 12);
    CHILD_CK(cuCtxSetCurrent(c), 13);
    CHILD_CK(cuMemAlloc_v2(&p, 4096), 14);
    *(volatile int *)(uintptr_t)p = 1;
    CHILD_CK(cuMemFree_v2(p), 15);
    *(volatile int *)(uintptr_t)p = 2; /* must crash */
}

static void child_touch_unmapped(int fd)
{
    CUdeviceptr va;
    CHILD_CK(cuInit(0), 10);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g;
    CHILD_CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), 11);
    CHILD_CK(cuMemAddressReserve(&va, g, 0, 0, 0), 12);
    CUmemGenericAllocationHandle h;
    CHILD_CK(cuMemCreate(&h, g, &prop, 0), 13);
    CHILD_CK(cuMemMap(va, g, 0, h, 0), 14);
    if (fd == 1) {
        /* mapped but no access set yet */
        *(volatile char *)(uintptr_t)va = 1;
        _exit(20);
    }
    CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHILD_CK(cuMemSetAccess(va, g, &ad, 1), 15);
    *(volatile char *)(uintptr_t)va = 1;
    CHILD_CK(cuMemUnmap(va, g), 16);
    *(volatile char *)(uintptr_t)va = 2; /* must crash */
}

Test(simcuda, invalid_accesses_crash)
{
    int st = in_child(child_use_after_free, 0);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "use after cuMemFree: status %#x", st);
    st = in_child(child_touch_unmapped, 0);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "touch after cuMemUnmap: status %#x", st);
    st = in_child(child_touch_unmapped, 1);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "touch before cuMemSetAccess: status %#x",
              st);
}

Test(simcuda, vmm_aliasing_is_real)
{
    start();
    size_t g = granularity();
    cr_assert_eq(g, (size_t)2 << 20);
    size_t size = 2 * g;
    CUdeviceptr A, B, C;
    CK(cuMemAddressReserve(&A, size, 0, 0, 0));
    CK(cuMemAddressReserve(&B, size, 0, 0, 0));
    CK(cuMemAddressReserve(&C, 2 * size, 0, 0, 0));
    cr_assert_eq(A % g, 0);
    CKE(cuMemAddressReserve(&C, g + 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemGenericAllocationHandle h = vmm_create(size);
    CK(cuMemMap(A, size, 0, h, 0));
    CK(cuMemMap(B, size, 0, h, 0));
    CKE(cuMemMap(A, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  /* already mapped */
    CKE(cuMemMap(A + g, g, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
    CKE(cuMemMap(C + 4 * g - g, size, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* past the end */
    vmm_access(A, size);
    vmm_access(B, size);

    /* host store through A, copy out through B */
    float *ha = (float *)(uintptr_t)A;
    ha[0] = 42.0f;
    ha[size / 4 - 1] = -1.0f;
    float v[2];
    CK(cuMemcpyDtoH_v2(&v[0], B, 4));
    CK(cuMemcpyDtoH_v2(&v[1], B + size - 4, 4));
    cr_assert_eq(v[0], 42.0f);
    cr_assert_eq(v[1], -1.0f);

    /* a kernel writing through B is seen through A */
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    launch_fill(s, B, 8.0f, size / 4);
    CK(cuStreamSynchronize(s));
    expect_all(A, size / 4, 8.0f);

    /* address range and handle of an interior address */
    CUdeviceptr base;
    size_t bsize;
    CK(cuMemGetAddressRange_v2(&base, &bsize, B + 12345));
    cr_assert_eq(base, B);
    cr_assert_eq(bsize, size);
    CUmemGenericAllocationHandle h2;
    CK(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(A + 100)));
    cr_assert_eq(h2, h);
    CK(cuMemRelease(h2));
    CUmemAllocationProp prop;
    CK(cuMemGetAllocationPropertiesFromHandle(&prop, h));
    cr_assert_eq(prop.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    CUdeviceptr nat;
    CK(cuMemAlloc_v2(&nat, 4096));
    CKE(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)nat), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemFree_v2(A), CUDA_ERROR_INVALID_VALUE);

    /* unmap B, map the same memory at a second VA: same bytes */
    CKE(cuMemUnmap(B, g), CUDA_ERROR_INVALID_VALUE); /* part of a mapping */
    CK(cuMemUnmap(B, size));
    CK(cuMemMap(C + size, size, 0, h, 0));
    vmm_access(C + size, size);
    ha[7] = 1234.5f;
    CK(cuMemcpyDtoH_v2(v, C + size + 28, 4));
    cr_assert_eq(v[0], 1234.5f);
    expect_all(C + size + 32, 16, 8.0f);
    /* and B is a reservation again: it can take a new mapping */
    CK(cuMemMap(B, size, 0, h, 0));
    CKE(cuMemAddressFree(B, size), CUDA_ERROR_INVALID_VALUE); /* still mapped */
    CK(cuMemUnmap(B, size));
    CK(cuMemAddressFree(B, size));
    CK(cuMemUnmap(A, size));
    CK(cuMemUnmap(C + size, size));
    CK(cuMemRelease(h));
    CKE(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressFree(A, size));
    CK(cuMemAddressFree(C, 2 * size));
    CK(cuStreamDestroy_v2(s));
}

static void child_unmap_no_wait(int fd)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "400000", 1);
    CUdevice d;
    CUcontext c;
    CUmodule m;
    CUfunction f;
    CUstream s;
    CUdeviceptr va;
    CHILD_CK(cuInit(0), 10);
    CHILD_CK(cuDeviceGet(&d, 0), 11);
    CHILD_CK(cuDevicePrimaryCtxRetain(&c, d), 12);
    CHILD_CK(cuCtxSetCurrent(c), 13);
    CHILD_CK(cuModuleLoad(&m, getenv("SIMCUDA_TEST_PTX")), 14);
    CHILD_CK(cuModuleGetFunction(&f, m, "vr_fill_f32"), 15);
    CHILD_CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), 16);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g;
    CHILD_CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), 17);
    CHILD_CK(cuMemAddressReserve(&va, g, 0, 0, 0), 18);
    CUmemGenericAllocationHandle h;
    CHILD_CK(cuMemCreate(&h, g, &prop, 0), 19);
    CHILD_CK(cuMemMap(va, g, 0, h, 0), 20);
    CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHILD_CK(cuMemSetAccess(va, g, &ad, 1), 21);
    float v = 1.0f;
    unsigned long long n = g / 4;
    void *args[] = {&va, &v, &n};
    CHILD_CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), 22);
    double t0 = now_ms();
    CHILD_CK(cuMemUnmap(va, g), 23);
    double dt = now_ms() - t0;
    if (write(fd, &dt, sizeof dt) != (ssize_t)sizeof dt)
        _exit(24);
    sleep(3); /* the kernel now writes to the unmapped range */
    _exit(25);
}

Test(simcuda, unmap_does_not_wait_for_inflight_work)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    int st = in_child(child_unmap_no_wait, fds[1]);
    close(fds[1]);
    double dt = -1;
    cr_assert_eq(read(fds[0], &dt, sizeof dt), (ssize_t)sizeof dt, "child status %#x", st);
    close(fds[0]);
    cr_assert_lt(dt, 200.0, "cuMemUnmap waited %g ms for the kernel", dt);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
              "the in-flight kernel must fault on the unmapped range: status %#x", st);
}

Test(simcuda, meminfo_sees_vmm_memory_returned)
{
    setup();
    size_t g = granularity();
    size_t free0, free1, total;
    CK(cuMemGetInfo_v2(&free0, &total));
    cr_assert_eq(total, (size_t)80 << 30);
    size_t size = 4 * g;

    /* release, then unmap */
    CUmemGenericAllocationHandle h = vmm_create(size);
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_eq(free1, free0 - size);
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, size, 0, 0, 0));
    CK(cuMemMap(va, size, 0, h, 0));
    CK(cuMemRelease(h));
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_eq(free1, free0 - size, "still mapped: not returned yet");
    CK(cuMemUnmap(va, size));
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_eq(free1, free0, "released and unmapped: returned");

    /* unmap, then release */
    h = vmm_create(size);
    CK(cuMemMap(va, size, 0, h, 0));
    CK(cuMemUnmap(va, size));
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_eq(free1, free0 - size, "handle alive: not returned yet");
    CK(cuMemRelease(h));
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_eq(free1, free0);
    CK(cuMemAddressFree(va, size));

    /* native memory */
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, 3 << 20));
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_lt(free1, free0);
    CK(cuMemFree_v2(p));
    CK(cuMemGetInfo_v2(&free1, &total));
    cr_assert_eq(free1, free0);
}

Test(simcuda, vmm_knobs)
{
    setenv("SIMCUDA_VMM", "0", 1);
    setenv("SIMCUDA_GRANULARITY", "64K", 1);
    setup();
    int a = 1;
    CK(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    cr_assert_eq(a, 0);
    cr_assert_eq(granularity(), (size_t)64 << 10);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CKE(cuMemCreate(&h, 64 << 10, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
}

static void CUDA_CB host_fn(void *p)
{
    int *v = p;
    *v = *v * 10 + 1;
}

Test(simcuda, stream_ordered_alloc_and_host_func)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "100000", 1);
    start();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p, base;
    size_t size;
    CK(cuMemAllocAsync(&p, 4096, s));
    launch_fill(s, p, 2.0f, 1024);
    int v = 0;
    CK(cuLaunchHostFunc(s, host_fn, &v));
    CK(cuMemFreeAsync(p, s));
    CKE(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemGetAddressRange_v2(&base, &size, p + 8)); /* the free is stream ordered */
    cr_assert_eq(v, 0);
    CUmemGenericAllocationHandle h;
    CKE(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamSynchronize(s));
    cr_assert_eq(v, 1);
    CKE(cuMemGetAddressRange_v2(&base, &size, p + 8), CUDA_ERROR_NOT_FOUND);
    CK(cuStreamDestroy_v2(s));
}

/* ---- graphs ---------------------------------------------------------------------------- */

static CUgraphNode add_fill_node(CUgraph g, const CUgraphNode *deps, size_t nd, CUdeviceptr out,
                                 float v, unsigned long long n)
{
    void *args[] = {&out, &v, &n};
    CUDA_KERNEL_NODE_PARAMS p = {0};
    p.func = f_fill;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraphNode node;
    CK(cuGraphAddKernelNode_v2(&node, g, deps, nd, &p));
    return node;
}

static CUgraphNode add_scale_node(CUgraph g, const CUgraphNode *deps, size_t nd, CUdeviceptr out,
                                  CUdeviceptr in, float k, unsigned long long n)
{
    void *args[] = {&out, &in, &k, &n};
    CUDA_KERNEL_NODE_PARAMS p = {0};
    p.func = f_scale;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraphNode node;
    CK(cuGraphAddKernelNode_v2(&node, g, deps, nd, &p));
    return node;
}

static void set_fill(CUgraphExec x, CUgraphNode node, CUdeviceptr out, float v,
                     unsigned long long n, CUresult want)
{
    void *args[] = {&out, &v, &n};
    CUDA_KERNEL_NODE_PARAMS p = {0};
    p.func = f_fill;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CKE(cuGraphExecKernelNodeSetParams_v2(x, node, &p), want);
}

Test(simcuda, graph_nodes_params_and_validation)
{
    start();
    enum { N = 32 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    CUgraph g, other;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphCreate(&other, 0));
    CUgraphNode n1 = add_fill_node(g, NULL, 0, a, 2.0f, N);
    /* v1 struct entry point */
    float k = 3.0f;
    unsigned long long n = N;
    void *sargs[] = {&b, &a, &k, &n};
    CUDA_KERNEL_NODE_PARAMS_v1 p1 = {0};
    p1.func = f_scale;
    p1.gridDimX = p1.gridDimY = p1.gridDimZ = 1;
    p1.blockDimX = p1.blockDimY = p1.blockDimZ = 1;
    p1.kernelParams = sargs;
    CUgraphNode n2;
    CK(cuGraphAddKernelNode(&n2, g, NULL, 0, &p1));
    CK(cuGraphAddDependencies(g, &n1, &n2, 1));
    CKE(cuGraphAddDependencies(g, &n1, &n2, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode e;
    CK(cuGraphAddEmptyNode(&e, g, &n2, 1));
    CUgraphNode foreign = add_fill_node(other, NULL, 0, a, 1.0f, N);
    CKE(cuGraphAddDependencies(g, &foreign, &n2, 1), CUDA_ERROR_INVALID_VALUE);

    size_t count = 0;
    CK(cuGraphGetNodes(g, NULL, &count));
    cr_assert_eq(count, 3);
    CUgraphNode nodes[5];
    count = 5;
    CK(cuGraphGetNodes(g, nodes, &count));
    cr_assert_eq(count, 3);
    cr_assert_eq(nodes[0], n1);
    cr_assert_eq(nodes[1], n2);
    cr_assert_eq(nodes[2], e);
    cr_assert_null(nodes[3]);
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(e, &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_EMPTY);
    CK(cuGraphNodeGetType(n2, &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_KERNEL);
    CUgraphNode dep;
    count = 1;
    CK(cuGraphNodeGetDependencies(n2, &dep, &count));
    cr_assert_eq(dep, n1);

    CUDA_KERNEL_NODE_PARAMS gp;
    CK(cuGraphKernelNodeGetParams_v2(n2, &gp));
    cr_assert_eq(gp.func, f_scale);
    cr_assert_eq(gp.gridDimX, 1);
    cr_assert_not_null(gp.kernelParams);
    cr_assert_null(gp.extra);
    k = 99.0f; /* node holds its own copy */
    cr_assert_eq(*(CUdeviceptr *)gp.kernelParams[0], b);
    cr_assert_eq(*(CUdeviceptr *)gp.kernelParams[1], a);
    cr_assert_eq(*(float *)gp.kernelParams[2], 3.0f);
    cr_assert_eq(*(unsigned long long *)gp.kernelParams[3], (unsigned long long)N);
    CKE(cuGraphKernelNodeGetParams_v2(e, &gp), CUDA_ERROR_INVALID_VALUE);

    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    expect_all(b, N, 6.0f);

    /* exec updates: validated like the driver */
    set_fill(x, n1, a, 4.0f, N, CUDA_SUCCESS);
    set_fill(x, foreign, a, 4.0f, N, CUDA_ERROR_INVALID_VALUE);
    set_fill(x, e, a, 4.0f, N, CUDA_ERROR_INVALID_VALUE);
    set_fill((CUgraphExec)&gp, n1, a, 4.0f, N, CUDA_ERROR_INVALID_VALUE);
    CUDA_KERNEL_NODE_PARAMS bad = {0};
    bad.gridDimX = bad.gridDimY = bad.gridDimZ = bad.blockDimX = bad.blockDimY = bad.blockDimZ = 1;
    CKE(cuGraphExecKernelNodeSetParams_v2(x, n1, &bad), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    float v5 = 5.0f;
    void *fargs[] = {&a, &v5, &n};
    np.kernel.func = f_fill;
    np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
    np.kernel.blockDimX = np.kernel.blockDimY = np.kernel.blockDimZ = 1;
    np.kernel.kernelParams = fargs;
    CK(cuGraphExecNodeSetParams(x, n1, &np));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    expect_all(b, N, 15.0f);
    /* v1 struct exec update */
    CUDA_KERNEL_NODE_PARAMS_v1 q = p1;
    float k2 = -1.0f;
    void *qargs[] = {&b, &a, &k2, &n};
    q.kernelParams = qargs;
    CK(cuGraphExecKernelNodeSetParams(x, n2, &q));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    expect_all(b, N, -5.0f);

    CK(cuGraphExecDestroy(x));
    set_fill(x, n1, a, 4.0f, N, CUDA_ERROR_INVALID_VALUE); /* stale exec handle */
    CKE(cuGraphLaunch(x, s), CUDA_ERROR_INVALID_VALUE);

    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {0};
    CK(cuGraphInstantiateWithParams(&x, g, &ip));
    cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    cr_assert_null(ip.hErrNode_out);
    CK(cuGraphDestroy(g)); /* the exec is independent of its graph */
    CK(cuGraphLaunch_ptsz(x, NULL));
    CK(cuStreamSynchronize_ptsz(NULL));
    expect_all(b, N, 6.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(other));
    CKE(cuGraphDestroy(other), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy_v2(s));
}

Test(simcuda, setparams_after_launch_does_not_affect_queued_launch)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "100000", 1);
    start();
    enum { N = 64 };
    CUdeviceptr out = alloc_f32(N), scratch = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode node = add_fill_node(g, NULL, 0, out, 1.0f, N);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s, s2;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));

    CK(cuGraphLaunch(x, s));
    set_fill(x, node, out, 2.0f, N, CUDA_SUCCESS);
    CK(cuStreamSynchronize(s));
    expect_all(out, N, 1.0f);
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    expect_all(out, N, 2.0f);

    /* A launch is ordered behind the previous launch of the same exec even
     * on another stream: s is busy, so without that order the launch on s2
     * would finish first and the result would be 3. */
    launch_fill(s, scratch, 0.5f, N);
    set_fill(x, node, out, 3.0f, N, CUDA_SUCCESS);
    CK(cuGraphLaunch(x, s));
    set_fill(x, node, out, 4.0f, N, CUDA_SUCCESS);
    CK(cuGraphLaunch(x, s2));
    CK(cuStreamSynchronize(s2));
    expect_all(out, N, 4.0f);
    CK(cuStreamSynchronize(s));
    expect_all(out, N, 4.0f);

    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(s));
    CK(cuStreamDestroy_v2(s2));
}

/* Launches return at once and the worker runs their nodes later, so each
 * queued launch must run the parameters set before it and none set after
 * (cuda.h): a kernel node re-pointed before every launch, a memset node
 * re-set, a node disabled for one launch, an update from another graph, and
 * the exec destroyed while its launches are still queued (legal: the
 * driver defers). Each launch writes buffers of its own, so a launch that
 * ran another's parameters leaves a wrong or missing value. */
Test(simcuda, queued_launches_run_the_parameters_set_before_them)
{
    setenv("SIMCUDA_KERNEL_DELAY_US", "20000", 1);
    start();
    enum { N = 64, L = 7 };
    CUdeviceptr out[L], mark[L], first = alloc_f32(N);
    for (int j = 0; j < L; j++) {
        out[j] = alloc_f32(N);
        mark[j] = alloc_f32(N);
    }
    CK(cuCtxSynchronize());
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode k = add_fill_node(g, NULL, 0, first, 100.0f, N);
    CUDA_MEMSET_NODE_PARAMS ms = {.dst = first, .pitch = 0, .value = 0, .elementSize = 4,
                                  .width = N, .height = 1};
    CUgraphNode m;
    CK(cuGraphAddMemsetNode(&m, g, &k, 1, &ms, g_ctx));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    launch_fill(s, first, 0.5f, N); /* the launches below queue behind it */
    for (int j = 0; j < L; j++) {
        float v = (float)(j + 1);
        if (j == 5) {
            /* launch 5: the exec updated from a graph of the same shape */
            CUgraph u;
            CK(cuGraphCreate(&u, 0));
            CUgraphNode uk = add_fill_node(u, NULL, 0, out[j], v, N);
            CUDA_MEMSET_NODE_PARAMS ums = ms;
            ums.dst = mark[j];
            ums.value = (unsigned)(j + 10);
            CUgraphNode um;
            CK(cuGraphAddMemsetNode(&um, u, &uk, 1, &ums, g_ctx));
            CUgraphExecUpdateResultInfo info;
            CK(cuGraphExecUpdate_v2(x, u, &info));
            CK(cuGraphDestroy(u));
        } else {
            set_fill(x, k, out[j], v, N, CUDA_SUCCESS);
            ms.dst = mark[j];
            ms.value = (unsigned)(j + 10);
            CK(cuGraphExecMemsetNodeSetParams(x, m, &ms, g_ctx));
        }
        CK(cuGraphNodeSetEnabled(x, k, j != 3)); /* launch 3 without its kernel */
        CK(cuGraphLaunch(x, s));
    }
    CKE(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CK(cuGraphExecDestroy(x)); /* launches still queued */
    CK(cuStreamSynchronize(s));
    for (int j = 0; j < L; j++) {
        expect_all(out[j], N, j == 3 ? 0.0f : (float)(j + 1));
        unsigned h[N];
        CK(cuMemcpyDtoH_v2(h, mark[j], sizeof h));
        for (int i = 0; i < N; i++)
            cr_assert_eq(h[i], (unsigned)(j + 10), "launch %d: mark[%d] = %u", j, i, h[i]);
    }
    expect_all(first, N, 0.5f);
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(s));
}

Test(simcuda, graph_exec_update)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N), c = alloc_f32(N);
    CUgraph g1, g2, g3, g4, g5;
    CK(cuGraphCreate(&g1, 0));
    CUgraphNode a1 = add_fill_node(g1, NULL, 0, a, 1.0f, N);
    add_scale_node(g1, &a1, 1, b, a, 2.0f, N);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g1, 0));

    /* same topology, other parameters */
    CK(cuGraphCreate(&g2, 0));
    CUgraphNode a2 = add_fill_node(g2, NULL, 0, c, 5.0f, N);
    add_scale_node(g2, &a2, 1, b, c, 3.0f, N);
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0xff, sizeof info);
    CK(cuGraphExecUpdate_v2(x, g2, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    cr_assert_null(info.errorNode);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 15.0f);
    expect_all(a, N, 0.0f);

    /* one node more */
    CK(cuGraphCreate(&g3, 0));
    CUgraphNode a3 = add_fill_node(g3, NULL, 0, a, 1.0f, N);
    CUgraphNode b3 = add_scale_node(g3, &a3, 1, b, a, 2.0f, N);
    add_fill_node(g3, &b3, 1, c, 1.0f, N);
    CKE(cuGraphExecUpdate_v2(x, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    cr_assert_null(info.errorNode);

    /* same count, no edge */
    CK(cuGraphCreate(&g4, 0));
    add_fill_node(g4, NULL, 0, a, 1.0f, N);
    CUgraphNode b4 = add_scale_node(g4, NULL, 0, b, a, 2.0f, N);
    CKE(cuGraphExecUpdate_v2(x, g4, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    cr_assert_eq(info.errorNode, b4);

    /* a node of another type */
    CK(cuGraphCreate(&g5, 0));
    CUgraphNode a5;
    CK(cuGraphAddEmptyNode(&a5, g5, NULL, 0));
    CUgraphNode b5 = add_scale_node(g5, &a5, 1, b, a, 2.0f, N);
    (void)b5;
    CKE(cuGraphExecUpdate_v2(x, g5, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    cr_assert_eq(info.errorNode, a5);

    /* the failed updates changed nothing */
    CK(cuMemsetD32_v2(b, 0, N));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 15.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g1));
    CK(cuGraphDestroy(g2));
    CK(cuGraphDestroy(g3));
    CK(cuGraphDestroy(g4));
    CK(cuGraphDestroy(g5));
}

/* Exec calls name nodes by the handles of the graph the exec was instantiated
 * from, also after cuGraphExecUpdate (which pairs nodes by creation order and
 * copies parameters) and after that graph was destroyed. */
Test(simcuda, exec_node_identity_is_the_instantiating_graph)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N), c = alloc_f32(N);
    CUgraph g1, g2, other;
    CK(cuGraphCreate(&g1, 0));
    CUgraphNode a1 = add_fill_node(g1, NULL, 0, a, 1.0f, N);
    CUgraphNode b1 = add_scale_node(g1, &a1, 1, b, a, 2.0f, N);
    CUgraphNode e1;
    CK(cuGraphAddEmptyNode(&e1, g1, &b1, 1));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g1, 0));

    CK(cuGraphCreate(&g2, 0));
    CUgraphNode a2 = add_fill_node(g2, NULL, 0, c, 5.0f, N);
    CUgraphNode b2 = add_scale_node(g2, &a2, 1, b, c, 3.0f, N);
    CUgraphNode e2;
    CK(cuGraphAddEmptyNode(&e2, g2, &b2, 1));
    CK(cuGraphCreate(&other, 0));
    CUgraphNode o1 = add_fill_node(other, NULL, 0, a, 7.0f, N);
    CUgraphExecUpdateResultInfo info;
    CK(cuGraphExecUpdate_v2(x, g2, &info));

    /* the update graph's handles name nothing in x */
    set_fill(x, a2, c, 9.0f, N, CUDA_ERROR_INVALID_VALUE);
    set_fill(x, o1, c, 9.0f, N, CUDA_ERROR_INVALID_VALUE);
    set_fill(x, NULL, c, 9.0f, N, CUDA_ERROR_INVALID_VALUE);
    float v = 9.0f;
    unsigned long long n = N;
    void *fargs[] = {&c, &v, &n};
    CUDA_KERNEL_NODE_PARAMS_v1 q = {0};
    q.func = f_fill;
    q.gridDimX = q.gridDimY = q.gridDimZ = q.blockDimX = q.blockDimY = q.blockDimZ = 1;
    q.kernelParams = fargs;
    CKE(cuGraphExecKernelNodeSetParams(x, a2, &q), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecKernelNodeSetParams(x, NULL, &q), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    memcpy(&np.kernel, &q, sizeof q);
    np.kernel.func = f_fill;
    np.kernel.kernelParams = fargs;
    CKE(cuGraphExecNodeSetParams(x, a2, &np), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecNodeSetParams(x, NULL, &np), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams ep;
    memset(&ep, 0, sizeof ep);
    ep.type = CU_GRAPH_NODE_TYPE_EMPTY;
    CKE(cuGraphExecNodeSetParams(x, e2, &ep), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecNodeSetParams(x, e1, &ep));
    CKE(cuGraphExecNodeSetParams(x, a1, &ep), CUDA_ERROR_INVALID_VALUE); /* type mismatch */
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 15.0f); /* the update's parameters, none of the rejected calls */

    /* the instantiating graph's handles still name x's nodes */
    CK(cuGraphExecKernelNodeSetParams(x, a1, &q));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(c, N, 9.0f);
    expect_all(b, N, 27.0f);

    /* ... but not once that graph is gone: an H200 refuses them then
     * (driver-answers.txt), while the exec still launches */
    CK(cuGraphDestroy(g1));
    CUgraph filler;
    CK(cuGraphCreate(&filler, 0));
    for (int i = 0; i < 8; i++)
        add_fill_node(filler, NULL, 0, a, 1.0f, N);
    set_fill(x, a1, c, 4.0f, N, CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecNodeSetParams(x, e1, &ep), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphNodeSetEnabled(x, a1, 0), CUDA_ERROR_INVALID_VALUE);
    set_fill(x, a2, c, 8.0f, N, CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(c, N, 9.0f);
    expect_all(b, N, 27.0f);

    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g2));
    CK(cuGraphDestroy(other));
    CK(cuGraphDestroy(filler));
}

typedef CUresult (*exec_update_v1_fn)(CUgraphExec, CUgraph, CUgraphNode *,
                                      CUgraphExecUpdateResult *);

/* cuGraphExecUpdate (10.2 signature) and node enable state; both name nodes
 * by the instantiating graph's handles. */
Test(simcuda, exec_update_v1_and_node_enable)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    CUgraph g1, g2;
    CK(cuGraphCreate(&g1, 0));
    CUgraphNode a1 = add_fill_node(g1, NULL, 0, a, 1.0f, N);
    CUgraphNode b1 = add_fill_node(g1, &a1, 1, b, 2.0f, N);
    CUgraphNode e1;
    CK(cuGraphAddEmptyNode(&e1, g1, NULL, 0));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g1, 0));
    CK(cuGraphCreate(&g2, 0));
    CUgraphNode a2 = add_fill_node(g2, NULL, 0, a, 3.0f, N);
    CUgraphNode b2 = add_fill_node(g2, &a2, 1, b, 4.0f, N);
    CUgraphNode e2;
    CK(cuGraphAddEmptyNode(&e2, g2, NULL, 0));

    unsigned en = 7;
    CK(cuGraphNodeGetEnabled(x, b1, &en));
    cr_assert_eq(en, 1);
    CK(cuGraphNodeSetEnabled(x, b1, 0));
    CKE(cuGraphNodeSetEnabled(x, b2, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphNodeSetEnabled(x, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphNodeSetEnabled(x, e1, 0), CUDA_ERROR_INVALID_VALUE); /* kernel nodes only */
    CKE(cuGraphNodeGetEnabled(x, a2, &en), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphNodeGetEnabled(x, b1, &en));
    cr_assert_eq(en, 0);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(a, N, 1.0f);
    expect_all(b, N, 0.0f); /* disabled: an empty node */

    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(lib);
    exec_update_v1_fn upd = (exec_update_v1_fn)dlsym(lib, "cuGraphExecUpdate");
    cr_assert_not_null(upd);
    void *pfn = NULL;
    CK(cuGetProcAddress_v2("cuGraphExecUpdate", &pfn, 11040, 0, NULL));
    cr_assert_eq(pfn, (void *)upd);
    CUgraphNode err = a1;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
    CK(upd(x, g2, &err, &res));
    cr_assert_eq(res, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    cr_assert_null(err);
    CK(cuGraphNodeGetEnabled(x, b1, &en));
    cr_assert_eq(en, 0, "the enable state survives an update");
    CK(cuGraphNodeSetEnabled(x, b1, 1));
    CKE(cuGraphNodeSetEnabled(x, b2, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(a, N, 3.0f);
    expect_all(b, N, 4.0f);

    CUgraph g3;
    CK(cuGraphCreate(&g3, 0));
    CUgraphNode a3 = add_fill_node(g3, NULL, 0, a, 3.0f, N);
    CKE(upd(x, g3, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(res, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    (void)a3;
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g1));
    CK(cuGraphDestroy(g2));
    CK(cuGraphDestroy(g3));
    dlclose(lib);
}

/* ---- several devices (SIMCUDA_DEVICES) ------------------------------------------ */

static CUcontext g_pctx[2];

static void setup_two_devices(void)
{
    setenv("SIMCUDA_DEVICES", "2", 1);
    CK(cuInit(0));
    for (int d = 0; d < 2; d++) {
        CUdevice dev;
        CK(cuDeviceGet(&dev, d));
        CK(cuDevicePrimaryCtxRetain(&g_pctx[d], dev));
    }
    CK(cuCtxSetCurrent(g_pctx[0]));
    load_kernels();
}

static CUmemAllocationProp prop_on(int dev)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

/* A granularity-sized mapping of device dev's memory, accessible (read/write)
 * from the devices in the mask. */
static CUdeviceptr map_on(int dev, unsigned mask, size_t *gout)
{
    CUmemAllocationProp prop = prop_on(dev);
    size_t g;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, g, 0, 0, 0));
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, g, &prop, 0));
    CK(cuMemMap(va, g, 0, h, 0));
    CK(cuMemRelease(h));
    for (int d = 0; d < 2; d++) {
        if (!(mask >> d & 1))
            continue;
        CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, d}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CK(cuMemSetAccess(va, g, &ad, 1));
    }
    *gout = g;
    return va;
}

Test(simcuda, devices_contexts_memory_and_peer_access)
{
    setenv("SIMCUDA_MEM_BYTES", "64M", 1);
    setup_two_devices();
    int n = 0;
    CK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 2);
    CUdevice d;
    CKE(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
    size_t total = 0, fr = 0;
    CK(cuDeviceTotalMem_v2(&total, 1));
    cr_assert_eq(total, (size_t)64 << 20);
    int can = -1;
    CK(cuDeviceCanAccessPeer(&can, 0, 1));
    cr_assert_eq(can, 1);
    CK(cuDeviceCanAccessPeer(&can, 1, 0));
    cr_assert_eq(can, 1);
    CK(cuDeviceCanAccessPeer(&can, 1, 1));
    cr_assert_eq(can, 0);
    CKE(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    cr_assert_neq(g_pctx[0], g_pctx[1]);
    CK(cuCtxGetDevice(&d));
    cr_assert_eq(d, 0);
    CK(cuCtxSetCurrent(g_pctx[1]));
    CK(cuCtxGetDevice(&d));
    cr_assert_eq(d, 1);

    /* memory accounting per device */
    CUdeviceptr p1;
    CK(cuMemAlloc_v2(&p1, (size_t)16 << 20));
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(fr, (size_t)48 << 20);
    CK(cuCtxSetCurrent(g_pctx[0]));
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(fr, (size_t)64 << 20);
    CUmemAllocationProp prop = prop_on(1);
    size_t g;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, g, &prop, 0)); /* device 1's memory, made from device 0 */
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(fr, (size_t)64 << 20);
    CK(cuCtxSetCurrent(g_pctx[1]));
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(fr, ((size_t)48 << 20) - g);
    CK(cuMemRelease(h));
    CUmemAllocationProp bad = prop_on(2);
    CKE(cuMemCreate(&h, g, &bad, 0), CUDA_ERROR_INVALID_DEVICE);

    /* peer access, with the documented errors */
    CK(cuCtxSetCurrent(g_pctx[0]));
    CKE(cuCtxEnablePeerAccess(g_pctx[0], 0), CUDA_ERROR_INVALID_CONTEXT);
    CKE(cuCtxEnablePeerAccess(g_pctx[1], 1), CUDA_ERROR_INVALID_VALUE);
    CKE(cuCtxDisablePeerAccess(g_pctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CK(cuCtxEnablePeerAccess(g_pctx[1], 0));
    CKE(cuCtxEnablePeerAccess(g_pctx[1], 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CK(cuCtxDisablePeerAccess(g_pctx[1]));
    CKE(cuCtxDisablePeerAccess(g_pctx[1]), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CUcontext own;
    CK(cuCtxCreate_v4(&own, NULL, 0, 0)); /* pushed: current */
    CK(cuCtxGetDevice(&d));
    cr_assert_eq(d, 0);
    CKE(cuCtxEnablePeerAccess(g_pctx[0], 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED); /* same device */
    CK(cuCtxEnablePeerAccess(g_pctx[1], 0));
    CK(cuCtxPopCurrent_v2(NULL));

    /* VMM access is per device; native memory has none to ask about */
    size_t gg;
    CUdeviceptr va = map_on(1, 1u, &gg); /* device 1's memory, device 0 may use it */
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    unsigned long long fl = 99;
    CK(cuMemGetAccess(&fl, &loc, va));
    cr_assert_eq(fl, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    loc.id = 1;
    CK(cuMemGetAccess(&fl, &loc, va + 100));
    cr_assert_eq(fl, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    loc.id = 2;
    CKE(cuMemGetAccess(&fl, &loc, va), CUDA_ERROR_INVALID_DEVICE);
    loc.id = 0;
    CKE(cuMemGetAccess(&fl, &loc, p1), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p1), CUDA_ERROR_INVALID_VALUE);

    /* allowed accesses run: device 0 writes its own, a peer's (enabled) and a
     * mapping it was granted */
    CUdeviceptr p0;
    CK(cuMemAlloc_v2(&p0, 64));
    launch_fill(NULL, p0, 1.0f, 16);
    CK(cuCtxEnablePeerAccess(g_pctx[1], 0));
    launch_fill(NULL, p1, 2.0f, 16);
    launch_fill(NULL, va, 3.0f, 16);
    CK(cuCtxSynchronize());
    expect_all(p0, 16, 1.0f);
    expect_all(p1, 16, 2.0f);
    expect_all(va, 16, 3.0f);
    /* a graph runs in the context it was instantiated in */
    CUgraph gr;
    CK(cuGraphCreate(&gr, 0));
    add_fill_node(gr, NULL, 0, p1, 4.0f, 16);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, gr, 0));
    CK(cuCtxSetCurrent(g_pctx[1]));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    CK(cuCtxSetCurrent(g_pctx[0]));
    CK(cuCtxSynchronize());
    expect_all(p1, 16, 4.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(gr));
}

/* Kernels that touch memory their device may not access abort the process,
 * with a message, as a GPU fault kills the context. fd: which case. */
static void child_bad_access(int which)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/simcuda-fault-%d.txt", (int)getpid());
    (void)path;
    setup_two_devices();
    CUdeviceptr p1, out;
    CK(cuMemAlloc_v2(&out, 64));
    CK(cuCtxSetCurrent(g_pctx[1]));
    CK(cuMemAlloc_v2(&p1, 64));
    CK(cuCtxSetCurrent(g_pctx[0]));
    size_t g;
    switch (which) {
    case 0: /* native memory of device 1, no peer access */
        launch_fill(NULL, p1, 1.0f, 16);
        break;
    case 1: { /* peer access enabled, then disabled again */
        CK(cuCtxEnablePeerAccess(g_pctx[1], 0));
        launch_fill(NULL, p1, 1.0f, 16);
        CK(cuCtxSynchronize());
        CK(cuCtxDisablePeerAccess(g_pctx[1]));
        launch_fill(NULL, p1, 1.0f, 16);
        break;
    }
    case 2: { /* a mapping granted to device 1 only, used by device 0 even with peer access */
        CK(cuCtxEnablePeerAccess(g_pctx[1], 0));
        CUdeviceptr va = map_on(1, 2u, &g);
        launch_fill(NULL, va, 1.0f, 16);
        break;
    }
    case 3: { /* a graph instantiated on device 0 reads device 1's memory */
        CUgraph gr;
        CK(cuGraphCreate(&gr, 0));
        add_scale_node(gr, NULL, 0, out, p1, 2.0f, 4);
        CUgraphExec x;
        CK(cuGraphInstantiateWithFlags(&x, gr, 0));
        CK(cuCtxSetCurrent(g_pctx[1])); /* launched from device 1: still runs on 0 */
        CK(cuGraphLaunch(x, NULL));
        break;
    }
    case 4: { /* a word that is an address counts even if the kernel does not use it */
        CUdeviceptr va = map_on(0, 2u, &g);
        void *args[] = {&out, &va, &(unsigned long long){0}};
        CUfunction f;
        CK(cuModuleGetFunction(&f, g_mod, "vr_copy_u8"));
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        break;
    }
    case 5: { /* device 0's access made read-only after a kernel of the same stream used it;
               * device 1 keeps read/write, so the host protection alone would not fault */
        CUdeviceptr va = map_on(0, 3u, &g);
        launch_fill(NULL, va, 1.0f, 16);
        CK(cuCtxSynchronize());
        CUmemAccessDesc ro = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READ};
        CK(cuMemSetAccess(va, g, &ro, 1));
        launch_fill(NULL, va, 2.0f, 16);
        break;
    }
    default: { /* [begin, end): end may be the start of a mapping it may not use */
        CUmemAllocationProp prop = prop_on(0);
        CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
        CUdeviceptr va;
        CK(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
        CUmemGenericAllocationHandle ha, hb;
        CK(cuMemCreate(&ha, g, &prop, 0));
        CK(cuMemCreate(&hb, g, &prop, 0));
        CK(cuMemMap(va, g, 0, ha, 0));
        CK(cuMemMap(va + g, g, 0, hb, 0));
        CUmemAccessDesc a0 = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CUmemAccessDesc a1 = {{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CK(cuMemSetAccess(va, g, &a0, 1));
        CK(cuMemSetAccess(va + g, g, &a1, 1));
        CK(cuMemsetD32_v2(va, 0, g / 4));
        float one = 1.0f;
        CK(cuMemcpyHtoD_v2(va + g - 4, &one, 4));
        CUfunction f;
        CK(cuModuleGetFunction(&f, g_mod, "vr_sum_range_f32"));
        CUdeviceptr b = va, e = va + g;
        void *args[] = {&out, &b, &e};
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        float r = 0;
        CK(cuMemcpyDtoH_v2(&r, out, 4));
        if (r != 1.0f)
            _exit(30);
        e = va + g + 4; /* one element into the other mapping */
        CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        break;
    }
    }
    CK(cuCtxSynchronize());
    CK(cuCtxSetCurrent(g_pctx[1]));
    CK(cuCtxSynchronize());
    _exit(40); /* reached only if nothing faulted */
}

static int child_status(int which, char *err, size_t errlen)
{
    char path[] = "/tmp/simcuda-fault-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        child_bad_access(which);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    ssize_t n = pread(fd, err, errlen - 1, 0);
    err[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return st;
}

Test(simcuda, kernel_without_access_aborts)
{
    char err[1024];
    for (int which = 0; which <= 6; which++) {
        int st = child_status(which, err, sizeof err);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "case %d: status %#x, stderr: %s",
                  which, st, err);
        cr_assert_not_null(strstr(err, "simcuda: fatal: kernel vr_"), "case %d: %s", which, err);
        cr_assert_not_null(strstr(err, "illegal memory access"), "case %d: %s", which, err);
    }
}

/* Calls that need a context fail without one and do nothing. */
static void *no_ctx_thread(void *arg)
{
    CUdeviceptr p = *(CUdeviceptr *)arg, q = 0, base = 1;
    size_t size = 7;
    static CUresult r[4];
    r[0] = cuMemFree_v2(p);
    r[1] = cuMemGetAddressRange_v2(&base, &size, p);
    r[2] = cuMemAlloc_v2(&q, 64);
    r[3] = cuCtxSynchronize();
    if (base != 1 || size != 7 || q != 0)
        r[0] = CUDA_ERROR_UNKNOWN; /* an output was written */
    return r;
}

Test(simcuda, no_current_context)
{
    setup();
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, 4096));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, no_ctx_thread, &p), 0);
    CUresult *r;
    cr_assert_eq(pthread_join(th, (void **)&r), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(r[i], CUDA_ERROR_INVALID_CONTEXT, "call %d -> %d", i, (int)r[i]);
    CUdeviceptr base;
    size_t size;
    CK(cuMemGetAddressRange_v2(&base, &size, p + 10)); /* not freed */
    cr_assert_eq(base, p);
    cr_assert_eq(size, 4096);
    *(volatile int *)(uintptr_t)p = 1;
    CK(cuMemFree_v2(p));
}

/* SIMCUDA_MEM_BYTES: a fill-the-device loop stops where the documented costs
 * say (native: size rounded to 512; VMM: the handle's size). */
Test(simcuda, memory_limit_knob)
{
    setenv("SIMCUDA_MEM_BYTES", "1M", 1);
    setenv("SIMCUDA_GRANULARITY", "64K", 1);
    setup();
    size_t fr, total;
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(total, (size_t)1 << 20);
    cr_assert_eq(fr, (size_t)1 << 20);
    CK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, (size_t)1 << 20);
    static CUdeviceptr p[4096];
    int n = 0;
    CUresult r;
    while ((r = cuMemAlloc_v2(&p[n], 1000)) == CUDA_SUCCESS)
        n++;
    cr_assert_eq(r, CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(n, 1024, "%d allocations of 1000 bytes (1024 each) fit in 1 MiB", n);
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(fr, 0);
    for (int i = 0; i < 64; i++) /* 64 KiB back */
        CK(cuMemFree_v2(p[i]));
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h, h2;
    CK(cuMemCreate(&h, (size_t)64 << 10, &prop, 0));
    CKE(cuMemCreate(&h2, (size_t)64 << 10, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CKE(cuMemAlloc_v2(&p[0], 1), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemRelease(h));
    CK(cuMemAlloc_v2(&p[0], 1));
    CK(cuMemGetInfo_v2(&fr, &total));
    cr_assert_eq(fr, ((size_t)64 << 10) - 512);
}

static void CUDA_CB nop_host(void *p)
{
    (void)p;
}

/* SIMCUDA_FAIL=name:N makes exactly that call fail, and the failed call does
 * nothing: the next one (the same arguments) succeeds as if it were first. */
Test(simcuda, fail_knob_every_entry_point)
{
    setenv("SIMCUDA_FAIL",
           "cuEventSynchronize:1,cuEventQuery:1,cuMemUnmap:1,cuMemRelease:1,cuMemAddressFree:1,"
           "cuCtxSynchronize:1,cuMemMap:1,cuMemSetAccess:1,cuMemCreate:1,cuEventRecord:1,"
           "cuGraphExecKernelNodeSetParams_v2:1,cuStreamWaitEvent:1,cuGraphClone:1,"
           "cuGraphInstantiateWithFlags:1,cuLaunchHostFunc:1,cuGraphNodeSetEnabled:1,"
           "cuMemGetAccess:1,cuCtxEnablePeerAccess:1",
           1);
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e;
    CK(cuEventCreate(&e, 0));
    CKE(cuEventRecord(e, s), CUDA_ERROR_UNKNOWN);
    CK(cuEventQuery(e) == CUDA_ERROR_UNKNOWN ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
    CK(cuEventRecord(e, s));
    CKE(cuStreamWaitEvent(NULL, e, 0), CUDA_ERROR_UNKNOWN);
    CK(cuStreamWaitEvent(NULL, e, 0));
    CKE(cuEventSynchronize(e), CUDA_ERROR_UNKNOWN);
    CK(cuEventSynchronize(e));
    CK(cuEventQuery(e));
    CKE(cuLaunchHostFunc(s, nop_host, NULL), CUDA_ERROR_LAUNCH_FAILED);
    CK(cuLaunchHostFunc(s, nop_host, NULL));
    CKE(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
    CK(cuCtxSynchronize());

    CUgraph g, c;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n1 = add_fill_node(g, NULL, 0, a, 1.0f, N);
    c = NULL;
    CKE(cuGraphClone(&c, g), CUDA_ERROR_UNKNOWN);
    cr_assert_null(c);
    CK(cuGraphClone(&c, g));
    CUgraphExec x = NULL;
    CKE(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_ERROR_UNKNOWN);
    cr_assert_null(x);
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    set_fill(x, n1, a, 2.0f, N, CUDA_ERROR_UNKNOWN);
    CK(cuGraphLaunch(x, NULL));
    CK(cuStreamSynchronize(NULL));
    expect_all(a, N, 1.0f); /* the failed SetParams changed nothing */
    set_fill(x, n1, a, 2.0f, N, CUDA_SUCCESS);
    CKE(cuGraphNodeSetEnabled(x, n1, 0), CUDA_ERROR_UNKNOWN);
    CK(cuGraphLaunch(x, NULL));
    CK(cuStreamSynchronize(NULL));
    expect_all(a, N, 2.0f);

    size_t gr = granularity();
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CKE(cuMemCreate(&h, gr, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(h, 0);
    CK(cuMemCreate(&h, gr, &prop, 0));
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, gr, 0, 0, 0));
    CKE(cuMemMap(va, gr, 0, h, 0), CUDA_ERROR_UNKNOWN);
    CK(cuMemMap(va, gr, 0, h, 0));
    CUmemAccessDesc ad = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CKE(cuMemSetAccess(va, gr, &ad, 1), CUDA_ERROR_UNKNOWN);
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    unsigned long long fl = 77;
    CKE(cuMemGetAccess(&fl, &loc, va), CUDA_ERROR_UNKNOWN);
    cr_assert_eq(fl, 77);
    CK(cuMemGetAccess(&fl, &loc, va));
    cr_assert_eq(fl, CU_MEM_ACCESS_FLAGS_PROT_NONE, "the failed cuMemSetAccess granted nothing");
    CK(cuMemSetAccess(va, gr, &ad, 1));
    *(volatile int *)(uintptr_t)va = 5;
    CKE(cuMemRelease(h), CUDA_ERROR_UNKNOWN);
    CK(cuMemRelease(h));
    CKE(cuMemUnmap(va, gr), CUDA_ERROR_UNKNOWN);
    cr_assert_eq(*(volatile int *)(uintptr_t)va, 5, "still mapped after the failed unmap");
    CK(cuMemUnmap(va, gr));
    CKE(cuMemAddressFree(va, gr), CUDA_ERROR_UNKNOWN);
    CK(cuMemAddressFree(va, gr));
    CKE(cuMemAddressFree(va, gr), CUDA_ERROR_INVALID_VALUE); /* the 2nd call did free it */
    CUcontext own;
    CK(cuCtxCreate_v4(&own, NULL, 0, 0));
    CKE(cuCtxEnablePeerAccess(g_ctx, 0), CUDA_ERROR_UNKNOWN);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(c));
    CK(cuEventDestroy_v2(e));
    CK(cuStreamDestroy_v2(s));
}

/* cuGraphClone: new handles, same nodes, parameters and edges. */
Test(simcuda, graph_clone)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    CUgraph g, c;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n1 = add_fill_node(g, NULL, 0, a, 3.0f, N);
    CUgraphNode n2 = add_scale_node(g, &n1, 1, b, a, 2.0f, N);
    CK(cuGraphClone(&c, g));
    CUgraphNode cn[3];
    size_t cnt = 3;
    CK(cuGraphGetNodes(c, cn, &cnt));
    cr_assert_eq(cnt, 2);
    cr_assert_neq(cn[0], n1);
    cr_assert_neq(cn[1], n2);
    CUgraphNode dep;
    cnt = 1;
    CK(cuGraphNodeGetDependencies(cn[1], &dep, &cnt));
    cr_assert_eq(cnt, 1);
    cr_assert_eq(dep, cn[0]);
    CUgraphNode found;
    CK(cuGraphNodeFindInClone(&found, n2, c));
    cr_assert_eq(found, cn[1]);
    CK(cuGraphNodeFindInClone(&found, n1, c));
    cr_assert_eq(found, cn[0]);
    CKE(cuGraphNodeFindInClone(&found, cn[0], g), CUDA_ERROR_INVALID_VALUE); /* g is no clone */
    CKE(cuGraphNodeFindInClone(&found, cn[0], c), CUDA_ERROR_INVALID_VALUE); /* c's own node */
    CUgraphNode late = add_fill_node(g, NULL, 0, a, 1.0f, N);
    CKE(cuGraphNodeFindInClone(&found, late, c), CUDA_ERROR_INVALID_VALUE); /* after the clone */
    CKE(cuGraphNodeFindInClone(NULL, n1, c), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(g)); /* the clone is independent */
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, c, 0));
    set_fill(x, n1, a, 1.0f, N, CUDA_ERROR_INVALID_VALUE); /* not the clone's node */
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 6.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(c));
}

/* A dependency added on a node made later (cuGraphAddDependencies: the
 * scale node made first, the fill it depends on after it) is cloned too;
 * the clone used to read the later node before it existed. */
Test(simcuda, graph_clone_dependency_on_a_later_node)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    CUgraph g, c;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode scale_n = add_scale_node(g, NULL, 0, b, a, 2.0f, N);
    CUgraphNode fill_n = add_fill_node(g, NULL, 0, a, 4.0f, N);
    CK(cuGraphAddDependencies(g, &fill_n, &scale_n, 1));
    CK(cuGraphClone(&c, g));
    CUgraphNode cn[2], dep;
    size_t cnt = 2;
    CK(cuGraphGetNodes(c, cn, &cnt));
    cr_assert_eq(cnt, 2);
    cnt = 1;
    CK(cuGraphNodeGetDependencies(cn[0], &dep, &cnt));
    cr_assert_eq(cnt, 1);
    cr_assert_eq(dep, cn[1]);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, c, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 8.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(c));
    CK(cuGraphDestroy(g));
}

/* A host function occupies its stream until it returns: a graph launch
 * queued behind it waits, however long the function waits itself. */
static pthread_mutex_t hf_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hf_cv = PTHREAD_COND_INITIALIZER;
static int hf_state; /* 1: entered, 2: released */

static void CUDA_CB gate_host(void *p)
{
    (void)p;
    pthread_mutex_lock(&hf_mu);
    hf_state = 1;
    pthread_cond_broadcast(&hf_cv);
    while (hf_state != 2)
        pthread_cond_wait(&hf_cv, &hf_mu);
    pthread_mutex_unlock(&hf_mu);
}

Test(simcuda, host_function_gates_the_stream)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    add_fill_node(g, NULL, 0, a, 7.0f, N);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent e;
    CK(cuEventCreate(&e, 0));
    CK(cuLaunchHostFunc(s, gate_host, NULL));
    CK(cuGraphLaunch(x, s));
    CK(cuEventRecord(e, s));
    pthread_mutex_lock(&hf_mu);
    while (hf_state != 1)
        pthread_cond_wait(&hf_cv, &hf_mu);
    pthread_mutex_unlock(&hf_mu);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CKE(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CKE(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    cr_assert_eq(((volatile float *)(uintptr_t)a)[0], 0.0f, "the graph ran before the host function returned");
    pthread_mutex_lock(&hf_mu);
    hf_state = 2;
    pthread_cond_broadcast(&hf_cv);
    pthread_mutex_unlock(&hf_mu);
    CK(cuEventSynchronize(e));
    expect_all(a, N, 7.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuEventDestroy_v2(e));
    CK(cuStreamDestroy_v2(s));
}

/* cuGraphUpload is stream work ordered behind the exec's earlier launches
 * on any stream: an event recorded after it in another stream is not
 * complete while that launch is held back. */
Test(simcuda, upload_is_ordered_behind_the_execs_launches)
{
    start();
    enum { N = 16 };
    CUdeviceptr a = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    add_fill_node(g, NULL, 0, a, 3.0f, N);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s, u;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&u, CU_STREAM_NON_BLOCKING));
    CUevent e;
    CK(cuEventCreate(&e, 0));
    pthread_mutex_lock(&hf_mu);
    hf_state = 0;
    pthread_mutex_unlock(&hf_mu);
    CK(cuLaunchHostFunc(s, gate_host, NULL));
    CK(cuGraphLaunch(x, s));
    CK(cuGraphUpload(x, u));
    CK(cuEventRecord(e, u));
    pthread_mutex_lock(&hf_mu);
    while (hf_state != 1)
        pthread_cond_wait(&hf_cv, &hf_mu);
    pthread_mutex_unlock(&hf_mu);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CKE(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    CKE(cuStreamQuery(u), CUDA_ERROR_NOT_READY);
    pthread_mutex_lock(&hf_mu);
    hf_state = 2;
    pthread_cond_broadcast(&hf_cv);
    pthread_mutex_unlock(&hf_mu);
    CK(cuEventSynchronize(e));
    expect_all(a, N, 3.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuEventDestroy_v2(e));
    CK(cuStreamDestroy_v2(s));
    CK(cuStreamDestroy_v2(u));
}

Test(simcuda, stream_capture)
{
    start();
    enum { N = 32 };
    CUdeviceptr x = alloc_f32(N), y = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CKE(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    launch_fill(s, x, 3.0f, N);
    launch_scale(s, y, x, 2.0f, N);
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    CK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuStreamSynchronize(s));
    expect_all(x, N, 0.0f); /* captured, not run */

    CUgraphNode nodes[2], dep;
    size_t n = 2, nd = 1;
    CK(cuGraphGetNodes(g, nodes, &n));
    cr_assert_eq(n, 2);
    CK(cuGraphNodeGetDependencies(nodes[1], &dep, &nd));
    cr_assert_eq(nd, 1);
    cr_assert_eq(dep, nodes[0]);
    CUDA_KERNEL_NODE_PARAMS p;
    CK(cuGraphKernelNodeGetParams_v2(nodes[1], &p));
    cr_assert_eq(p.func, f_scale);
    CUgraphExec ge;
    CK(cuGraphInstantiateWithFlags(&ge, g, 0));
    CK(cuGraphLaunch(ge, s));
    CK(cuStreamSynchronize(s));
    expect_all(y, N, 6.0f);

    /* an illegal call invalidates the capture */
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    launch_fill(s, x, 1.0f, N);
    CKE(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CUgraph g2 = (CUgraph)&p;
    CKE(cuStreamEndCapture(s, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_null(g2);
    CKE(cuStreamEndCapture(s, &g2), CUDA_ERROR_ILLEGAL_STATE);
    CKE(cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);

    /* fork/join across streams through events */
    CUstream s2;
    CUevent fork_ev, join_ev;
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch_fill(s, x, 2.0f, N);
    CK(cuEventRecord(fork_ev, s));
    CK(cuStreamWaitEvent(s2, fork_ev, 0));
    launch_scale(s2, y, x, 4.0f, N);
    CK(cuEventRecord(join_ev, s2));
    CK(cuStreamWaitEvent(s, join_ev, 0));
    CK(cuStreamEndCapture(s, &g2));
    CK(cuStreamIsCapturing(s2, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    n = 0;
    CK(cuGraphGetNodes(g2, NULL, &n));
    cr_assert_eq(n, 2);
    CUgraphExec ge2;
    CK(cuGraphInstantiateWithFlags(&ge2, g2, 0));
    CK(cuGraphLaunch(ge2, s));
    CK(cuStreamSynchronize(s));
    expect_all(y, N, 8.0f);

    CK(cuGraphExecDestroy(ge));
    CK(cuGraphExecDestroy(ge2));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(g2));
    CK(cuStreamDestroy_v2(s));
    CK(cuStreamDestroy_v2(s2));
}

/* cuda.h: async memsets and copies into a capturing stream add memset and
 * memcpy nodes in the stream's chain; they run at each launch with the
 * parameters captured (not at capture), the host side read and written at
 * launch. Synchronous work stays refused. */
Test(simcuda, stream_capture_memset_memcpy)
{
    start();
    enum { N = 32 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    CK(cuCtxSynchronize());
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    float host_in[N], host_out[N];
    for (int i = 0; i < N; i++)
        host_in[i] = 0.0f;
    unsigned five;
    float f5 = 5.0f;
    memcpy(&five, &f5, sizeof five);
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemsetD32Async(a, five, N, s));                    /* a = 5 */
    launch_scale(s, b, a, 2.0f, N);                          /* b = 10 */
    CK(cuMemcpyDtoDAsync_v2(a, b, N * sizeof(float), s));    /* a = 10 */
    CK(cuMemcpyDtoHAsync_v2(host_out, a, N * sizeof(float), s));
    CK(cuMemcpyHtoDAsync_v2(b, host_in, N * sizeof(float), s)); /* b = host_in at launch */
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    CK(cuStreamSynchronize(s));
    expect_all(a, N, 0.0f); /* captured, not run */
    expect_all(b, N, 0.0f);

    CUgraphNode nodes[5], dep;
    size_t n = 5, nd = 1;
    CK(cuGraphGetNodes(g, nodes, &n));
    cr_assert_eq(n, 5);
    static const CUgraphNodeType want[5] = {CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL,
                                            CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_MEMCPY,
                                            CU_GRAPH_NODE_TYPE_MEMCPY};
    for (int i = 0; i < 5; i++) {
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(nodes[i], &t));
        cr_assert_eq(t, want[i], "node %d", i);
        nd = 1;
        CK(cuGraphNodeGetDependencies(nodes[i], &dep, &nd));
        cr_assert_eq(nd, i ? 1u : 0u, "node %d", i);
        if (i)
            cr_assert_eq(dep, nodes[i - 1], "node %d: not in the stream's chain", i);
    }
    CUDA_MEMSET_NODE_PARAMS mp;
    CK(cuGraphMemsetNodeGetParams(nodes[0], &mp));
    cr_assert_eq(mp.dst, a);
    cr_assert_eq(mp.value, five);
    cr_assert_eq(mp.elementSize, 4);
    cr_assert_eq(mp.width, N);
    cr_assert_eq(mp.height, 1);
    CUDA_MEMCPY3D cp;
    CK(cuGraphMemcpyNodeGetParams(nodes[3], &cp));
    cr_assert_eq(cp.srcMemoryType, CU_MEMORYTYPE_DEVICE);
    cr_assert_eq(cp.srcDevice, a);
    cr_assert_eq(cp.dstMemoryType, CU_MEMORYTYPE_HOST);
    cr_assert_eq(cp.dstHost, host_out);
    cr_assert_eq(cp.WidthInBytes, N * sizeof(float));

    for (int i = 0; i < N; i++)
        host_in[i] = 7.0f; /* read at launch, not at capture */
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    expect_all(a, N, 10.0f);
    expect_all(b, N, 7.0f);
    for (int i = 0; i < N; i++)
        cr_assert_eq(host_out[i], 10.0f, "host_out[%d] = %f", i, host_out[i]);

    /* synchronous work into a capturing stream: refused, capture invalid */
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemsetD8Async(a, 1, 4, s));
    CKE(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUgraph g2;
    CKE(cuStreamEndCapture(s, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(s));
}

static void count_call(void *arg)
{
    ++*(int *)arg;
}

static void expect_row_pattern(CUdeviceptr p, size_t rows, size_t pitch_floats, size_t width,
                               float in_row, float rest)
{
    size_t n = rows * pitch_floats;
    float *h = malloc(n * sizeof *h);
    cr_assert_not_null(h);
    CK(cuMemcpyDtoH_v2(h, p, n * sizeof *h));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], i % pitch_floats < width ? in_row : rest, "[%zu] = %f", i, h[i]);
    free(h);
}

/* D16 and 2-D memsets, in a stream and captured (memset nodes with the
 * call's rows, pitch and element size); a host function captured (a host
 * node, run at each launch); cuLaunchKernelEx with a priority attribute
 * (the node keeps it) and with one simcuda does not model. */
Test(simcuda, capture_d16_2d_memsets_host_funcs_launch_attributes)
{
    start();
    enum { N = 64, PITCH = 16 }; /* 4 rows of 16 floats */
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    /* alloc_f32's memsets run on the legacy stream, which a non-blocking
     * stream does not wait for: they must be done before s writes. */
    CK(cuCtxSynchronize());
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    float three = 0.0f, five = 5.0f;
    unsigned bits3 = 0x40404040u, bits5;
    memcpy(&three, &bits3, sizeof three);
    memcpy(&bits5, &five, sizeof bits5);
    CK(cuMemsetD32Async(a, 0, N, s));
    CK(cuMemsetD32Async(b, 0, N, s));
    CK(cuMemsetD16Async(a, 0x4040, 2 * N, s));
    CK(cuMemsetD2D32Async(b, PITCH * sizeof(float), bits5, 4, N / PITCH, s));
    CK(cuStreamSynchronize(s));
    expect_all(a, N, three);
    expect_row_pattern(b, N / PITCH, PITCH, 4, 5.0f, 0.0f);
    CKE(cuMemsetD2D32Async(b, 2, bits5, 4, 2, s), CUDA_ERROR_INVALID_VALUE); /* pitch < row */

    int calls = 0;
    CK(cuMemsetD32Async(a, 0, N, s));
    CK(cuMemsetD32Async(b, 0, N, s));
    CK(cuStreamSynchronize(s));
    CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemsetD16Async(a, 0x4040, 2 * N, s));
    CK(cuMemsetD2D8Async(b, PITCH * sizeof(float), 0x40, 8, N / PITCH, s)); /* 2 floats a row */
    CK(cuLaunchHostFunc(s, count_call, &calls));
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 3;
    CUlaunchConfig c;
    memset(&c, 0, sizeof c);
    c.gridDimX = c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = 32;
    c.blockDimY = c.blockDimZ = 1;
    c.hStream = s;
    c.attrs = &attr;
    c.numAttrs = 1;
    float k = 2.0f;
    unsigned long long n64 = N;
    void *args[] = {&a, &a, &k, &n64};
    CK(cuLaunchKernelEx(&c, f_scale, args, NULL)); /* a = 2 * a */
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    cr_assert_eq(calls, 0, "captured, not run");
    CUgraphNode nodes[4];
    size_t nn = 4;
    CK(cuGraphGetNodes(g, nodes, &nn));
    cr_assert_eq(nn, 4);
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(nodes[2], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_HOST);
    CUDA_MEMSET_NODE_PARAMS mp;
    CK(cuGraphMemsetNodeGetParams(nodes[0], &mp));
    cr_assert(mp.elementSize == 2 && mp.value == 0x4040 && mp.width == 2 * N && mp.height == 1);
    CK(cuGraphMemsetNodeGetParams(nodes[1], &mp));
    cr_assert(mp.elementSize == 1 && mp.value == 0x40 && mp.width == 8 &&
              mp.height == N / PITCH && mp.pitch == PITCH * sizeof(float));
    CUDA_HOST_NODE_PARAMS hp;
    CK(cuGraphHostNodeGetParams(nodes[2], &hp));
    cr_assert(hp.fn == count_call && hp.userData == &calls);
    CUkernelNodeAttrValue v;
    CK(cuGraphKernelNodeGetAttribute(nodes[3], CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    cr_assert_eq(v.priority, 3);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    cr_assert_eq(calls, 2);
    expect_all(a, N, 2.0f * three);
    float b3;
    unsigned b3bits = 0x40404040u;
    memcpy(&b3, &b3bits, sizeof b3);
    expect_row_pattern(b, N / PITCH, PITCH, 2, b3, 0.0f);

    /* an attribute simcuda does not model: refused, nothing launched */
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    c.hStream = s;
    CKE(cuLaunchKernelEx(&c, f_scale, args, NULL), CUDA_ERROR_NOT_SUPPORTED);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(s));
}

/* ---- cuGetProcAddress ------------------------------------------------------------------ */

typedef void (*voidfn)(void);

static void expect_proc(const char *sym, int ver, cuuint64_t flags, voidfn want, const char *name)
{
    void *pfn = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CK(cuGetProcAddress_v2(sym, &pfn, ver, flags, &st));
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    voidfn got;
    memcpy(&got, &pfn, sizeof got);
    cr_assert(got == want, "%s@%d flags %llu: wrong function", sym, ver, (unsigned long long)flags);
    Dl_info info;
    cr_assert(dladdr(pfn, &info) != 0);
    cr_assert_str_eq(info.dli_sname, name, "%s@%d: dladdr names %s", sym, ver, info.dli_sname);
}

static void expect_no_proc(const char *sym, int ver, cuuint64_t flags,
                           CUdriverProcAddressQueryResult want)
{
    void *pfn = (void *)1;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CKE(cuGetProcAddress_v2(sym, &pfn, ver, flags, &st), CUDA_ERROR_NOT_FOUND);
    cr_assert_null(pfn);
    cr_assert_eq(st, want, "%s@%d: status %d", sym, ver, (int)st);
}

#define PROC(sym, ver, flags, fn) expect_proc(sym, ver, flags, (voidfn)fn, #fn)

Test(simcuda, get_proc_address_routing)
{
    const cuuint64_t D = CU_GET_PROC_ADDRESS_DEFAULT, L = CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                     P = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    /* works before cuInit, as cudart needs it */
    PROC("cuInit", 2000, D, cuInit);
    PROC("cuMemAlloc", 3020, D, cuMemAlloc_v2);
    PROC("cuMemAlloc", 13000, P, cuMemAlloc_v2);
    expect_no_proc("cuMemAlloc", 2000, D, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    PROC("cuGraphLaunch", 10000, P, cuGraphLaunch_ptsz);
    PROC("cuGraphLaunch", 12000, L, cuGraphLaunch);
    PROC("cuGraphLaunch", 12000, D, cuGraphLaunch);
    PROC("cuGraphExecKernelNodeSetParams", 10010, D, cuGraphExecKernelNodeSetParams);
    PROC("cuGraphExecKernelNodeSetParams", 11080, P, cuGraphExecKernelNodeSetParams);
    PROC("cuGraphExecKernelNodeSetParams", 12000, D, cuGraphExecKernelNodeSetParams_v2);
    PROC("cuGraphExecKernelNodeSetParams", 13000, P, cuGraphExecKernelNodeSetParams_v2);
    PROC("cuGetProcAddress", 11030, D, cuGetProcAddress);
    PROC("cuGetProcAddress", 12000, D, cuGetProcAddress_v2);
    PROC("cuGraphInstantiateWithParams", 12000, P, cuGraphInstantiateWithParams_ptsz);
    PROC("cuGraphInstantiateWithParams", 12000, L, cuGraphInstantiateWithParams);
    PROC("cuCtxCreate", 12050, D, cuCtxCreate_v4);
    PROC("cuCtxCreate", 11040, D, cuCtxCreate_v3);
    PROC("cuCtxCreate", 3020, D, cuCtxCreate_v2);
    expect_no_proc("cuCtxCreate", 2000, D, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* the legacy five-argument instantiate: no newer variant under this name */
    PROC("cuGraphInstantiate", 10000, D, cuGraphInstantiate);
    PROC("cuGraphInstantiate", 11000, D, cuGraphInstantiate_v2);
    PROC("cuGraphInstantiate", 13000, D, cuGraphInstantiate_v2);
    PROC("cuMemHostAlloc", 2020, D, cuMemHostAlloc);
    PROC("cuDeviceComputeCapability", 2000, D, cuDeviceComputeCapability);
    PROC("cuMemcpyHtoD", 12000, P, cuMemcpyHtoD_v2_ptds);
    PROC("cuMemcpyHtoD", 12000, L, cuMemcpyHtoD_v2);
    PROC("cuMemcpyHtoD", 6000, P, cuMemcpyHtoD_v2); /* no per-thread variant yet */
    PROC("cuStreamBeginCapture", 10010, P, cuStreamBeginCapture_v2_ptsz);
    PROC("cuLaunchKernel", 12000, D, cuLaunchKernel);
    PROC("cuGraphExecUpdate", 12000, D, cuGraphExecUpdate_v2);
    PROC("cuMemGetAddressRange", 3020, D, cuMemGetAddressRange_v2);
    PROC("cuCtxEnablePeerAccess", 4000, D, cuCtxEnablePeerAccess);
    expect_no_proc("cuNoSuchFunction", 12000, D, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    expect_no_proc("cuMemAlloc_v2", 12000, D, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

    /* the v1 entry point routes the same way */
    void *pfn = NULL;
    CK(cuGetProcAddress("cuGraphLaunch", &pfn, 12000, P));
    voidfn got;
    memcpy(&got, &pfn, sizeof got);
    cr_assert(got == (voidfn)cuGraphLaunch_ptsz);
    CKE(cuGetProcAddress("cuNoSuchFunction", &pfn, 12000, D), CUDA_ERROR_NOT_FOUND);
    cr_assert_null(pfn);

    /* the returned pointers are the exported functions themselves */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cr_assert_not_null(lib);
    CK(cuGetProcAddress_v2("cuGraphLaunch", &pfn, 12000, P, NULL));
    cr_assert_eq(pfn, dlsym(lib, "cuGraphLaunch_ptsz"));
    dlclose(lib);
}

/* ---- knobs ---------------------------------------------------------------------------- */

Test(simcuda, fail_knob)
{
    setenv("SIMCUDA_FAIL",
           "cuInit:1,cuMemAlloc_v2:3,cuGraphLaunch:*,cuMemCreate:1,cuStreamCreate:1", 1);
    CKE(cuInit(0), CUDA_ERROR_UNKNOWN);
    CUdeviceptr p0;
    CKE(cuMemAlloc_v2(&p0, 64), CUDA_ERROR_NOT_INITIALIZED); /* the failed cuInit did nothing */
    start();
    CUdeviceptr p1, p2, p3;
    CK(cuMemAlloc_v2(&p1, 64)); /* 2nd call (every call counts, the 1st too) */
    p2 = 0;
    CKE(cuMemAlloc_v2(&p2, 64), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(p2, 0, "a failed call does nothing");
    CK(cuMemAlloc_v2(&p3, 64));
    CUstream s;
    CKE(cuStreamCreate(&s, 0), CUDA_ERROR_UNKNOWN);
    CK(cuStreamCreate(&s, 0));
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    CKE(cuMemCreate(&h, granularity(), &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemCreate(&h, granularity(), &prop, 0));
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    add_fill_node(g, NULL, 0, p1, 1.0f, 16);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int i = 0; i < 3; i++)
        CKE(cuGraphLaunch(x, s), CUDA_ERROR_LAUNCH_FAILED);
    CK(cuGraphLaunch_ptsz(x, s)); /* another entry point */
    CK(cuStreamSynchronize(s));
}

/* name:N@other:M counts name's calls from other's Mth call on; '*' with it
 * fails every call from there. */
Test(simcuda, fail_knob_after_another_call)
{
    setenv("SIMCUDA_FAIL", "cuDriverGetVersion:2@cuDeviceGetCount:2,cuCtxSynchronize:*@cuDeviceGetCount:3",
           1);
    start();
    int v, n;
    for (int i = 0; i < 3; i++)
        CK(cuDriverGetVersion(&v)); /* before the 2nd cuDeviceGetCount: never */
    CK(cuCtxSynchronize());
    CK(cuDeviceGetCount(&n));
    CK(cuDeviceGetCount(&n)); /* from here on cuDriverGetVersion counts again */
    CK(cuDriverGetVersion(&v));
    CKE(cuDriverGetVersion(&v), CUDA_ERROR_UNKNOWN);
    CK(cuDriverGetVersion(&v));
    CK(cuCtxSynchronize());
    CK(cuDeviceGetCount(&n));
    for (int i = 0; i < 3; i++)
        CKE(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
}

Test(simcuda, cost_knob)
{
    setenv("SIMCUDA_COST", "cuDriverGetVersion:3000000", 1);
    CK(cuInit(0));
    int v;
    double t0 = now_ms();
    for (int i = 0; i < 5; i++)
        CK(cuDriverGetVersion(&v));
    cr_assert_geq(now_ms() - t0, 15.0);
}

static void child_stats(int fd)
{
    (void)fd;
    if (cuInit(0) != CUDA_SUCCESS)
        _exit(10);
    int v;
    for (int i = 0; i < 3; i++)
        cuDriverGetVersion(&v);
    void *pfn;
    cuGetProcAddress_v2("cuGraphLaunch", &pfn, 12000, 0, NULL);
    if (fd == 1) {
        /* leave objects alive: 2 allocations, 1 event, 1 exec, a reservation
         * with 2 mappings of 2 handles (one released: still live while mapped) */
        CUdevice d;
        CUcontext c;
        CUdeviceptr p, q, va;
        cuDeviceGet(&d, 0);
        cuDevicePrimaryCtxRetain(&c, d);
        cuCtxSetCurrent(c);
        cuMemAlloc_v2(&p, 64);
        cuMemAlloc_v2(&q, 64);
        CUdeviceptr gone;
        cuMemAlloc_v2(&gone, 64);
        cuMemFree_v2(gone);
        CUevent e, e2;
        cuEventCreate(&e, 0);
        cuEventCreate(&e2, 0);
        cuEventDestroy_v2(e2);
        CUgraph g;
        CUgraphExec x, x2;
        cuGraphCreate(&g, 0);
        cuGraphInstantiateWithFlags(&x, g, 0);
        cuGraphInstantiateWithFlags(&x2, g, 0);
        cuGraphExecDestroy(x2);
        cuGraphDestroy(g);
        CUmemAllocationProp prop = {0};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        size_t gr;
        cuMemGetAllocationGranularity(&gr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        cuMemAddressReserve(&va, 2 * gr, 0, 0, 0);
        CUmemGenericAllocationHandle h1, h2, h3;
        cuMemCreate(&h1, gr, &prop, 0);
        cuMemCreate(&h2, gr, &prop, 0);
        cuMemCreate(&h3, gr, &prop, 0);
        cuMemRelease(h3);
        cuMemMap(va, gr, 0, h1, 0);
        cuMemMap(va + gr, gr, 0, h2, 0);
        cuMemRelease(h2);
    }
    exit(0); /* runs the destructor that writes the file */
}

Test(simcuda, stats_knob)
{
    char path[] = "/tmp/simcuda-stats-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("SIMCUDA_STATS", path, 1);
    int st = in_child(child_stats, 0);
    char path2[] = "/tmp/simcuda-stats-XXXXXX";
    fd = mkstemp(path2);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("SIMCUDA_STATS", path2, 1);
    int st2 = in_child(child_stats, 1);
    unsetenv("SIMCUDA_STATS");
    cr_assert(WIFEXITED(st2) && WEXITSTATUS(st2) == 0, "status %#x", st2);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[1 << 15];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path);
    cr_assert_gt(n, 0);
    cr_assert(strncmp(buf, "{\"calls\": {", 11) == 0, "%s", buf);
    cr_assert_not_null(strstr(buf, "\"cuInit\": 1"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\"cuDriverGetVersion\": 3"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\"cuGetProcAddress_v2\": 1"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\"cuGraphLaunch\": 0"), "%s", buf); /* all entry points */
    cr_assert_not_null(strstr(buf, "\"cuGraphLaunch_ptsz\": 0"), "%s", buf);
    cr_assert_not_null(strstr(buf, "}, \"live\": {\"mappings\": 0, \"handles\": 0, "
                                   "\"reservations\": 0, \"allocations\": 0, \"events\": 0, "
                                   "\"execs\": 0}, \"kernels\": {\"host\": "),
                       "%s", buf);

    f = fopen(path2, "r");
    cr_assert_not_null(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path2);
    buf[n] = 0;
    cr_assert_not_null(strstr(buf, "\"live\": {\"mappings\": 2, \"handles\": 2, "
                                   "\"reservations\": 1, \"allocations\": 2, \"events\": 1, "
                                   "\"execs\": 1}, \"kernels\": {\"host\": "),
                       "%s", buf);
}

/* simcuda_heap_bytes, a simcuda-only export: the heap bytes simcuda
 * holds for its own objects, in the unit mallinfo2 counts, so a benchmark
 * can tell the driver's share of the process heap from the program's and an
 * interposer's. A graph and its exec raise it by their size; destroying
 * them brings it back. */
#define HEAP_NODES 512
/* One scale node's parameters over buf by *f; args holds what they point to. */
struct heap_args {
    CUdeviceptr buf;
    float s;
    unsigned long long n;
    void *kp[4];
};
static CUDA_KERNEL_NODE_PARAMS heap_params(struct heap_args *a, CUdeviceptr buf, float s)
{
    *a = (struct heap_args){.buf = buf, .s = s, .n = 64};
    a->kp[0] = a->kp[1] = &a->buf;
    a->kp[2] = &a->s;
    a->kp[3] = &a->n;
    CUDA_KERNEL_NODE_PARAMS p = {0};
    p.func = f_scale;
    p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimY = p.blockDimZ = 1;
    p.blockDimX = 32;
    p.kernelParams = a->kp;
    return p;
}

/* A simcuda-only export, as a function pointer. */
static long long (*heap_query(const char *name))(void)
{
    long long (*q)(void) = NULL;
    void *sym = dlsym(RTLD_DEFAULT, name);
    cr_assert_not_null(sym, "simcuda exports %s", name);
    memcpy(&q, &sym, sizeof sym);
    return q;
}

static CUgraph heap_graph(CUgraphNode *nodes, CUdeviceptr buf)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    struct heap_args a;
    CUDA_KERNEL_NODE_PARAMS p = heap_params(&a, buf, 2.0f);
    for (int i = 0; i < HEAP_NODES; i++)
        CK(cuGraphAddKernelNode_v2(&nodes[i], g, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &p));
    return g;
}

/* A buffer, a graph of HEAP_NODES nodes over it, its exec, and the query. */
struct heap_fix {
    CUgraphNode nodes[HEAP_NODES];
    CUdeviceptr buf;
    CUgraph g;
    CUgraphExec x;
    long long (*heap)(void);
};
static void heap_start(struct heap_fix *t)
{
    start();
    t->heap = heap_query("simcuda_heap_bytes");
    t->buf = alloc_f32(64);
    t->g = heap_graph(t->nodes, t->buf);
    CK(cuGraphInstantiateWithFlags(&t->x, t->g, 0));
}

Test(simcuda, heap_accounting)
{
    static struct heap_fix t;
    /* Once first, so that tables that only grow (the handle registry) have
     * grown already. */
    heap_start(&t);
    CK(cuGraphExecDestroy(t.x));
    CK(cuGraphDestroy(t.g));

    long long h0 = t.heap();
    struct mallinfo2 m0 = mallinfo2();
    t.g = heap_graph(t.nodes, t.buf);
    long long h1 = t.heap();
    struct mallinfo2 m1 = mallinfo2();
    CK(cuGraphInstantiateWithFlags(&t.x, t.g, 0));
    long long h2 = t.heap();
    CK(cuGraphExecDestroy(t.x));
    long long h3 = t.heap();
    CK(cuGraphDestroy(t.g));
    long long h4 = t.heap();

    cr_assert_gt(h0, 0, "simcuda holds its context, module and stream: %lld", h0);
    /* every node holds at least its record and its argument bytes */
    cr_assert_geq(h1 - h0, HEAP_NODES * 64, "graph of %d nodes: %lld bytes", HEAP_NODES, h1 - h0);
    long long mi = (long long)(m1.uordblks + m1.hblkhd) - (long long)(m0.uordblks + m0.hblkhd);
    /* mallinfo2 saw the same bytes (chunks freed into glibc's per-thread
     * cache still count as in use there, so only roughly) */
    if (m1.uordblks + m1.hblkhd != 0) /* a sanitizer's allocator leaves mallinfo2 empty */
        cr_assert(mi >= (h1 - h0) / 2 && mi <= (h1 - h0) * 2, "mallinfo2 %lld, simcuda %lld", mi,
                  h1 - h0);
    cr_assert_geq(h2 - h1, HEAP_NODES * 16, "exec of %d nodes: %lld bytes", HEAP_NODES, h2 - h1);
    /* back to where it was, but for what a stream worker may free meanwhile
     * (a finished operation's record) */
    cr_assert(llabs(h3 - h1) <= 256, "the exec's bytes are returned (%lld, %lld)", h3, h1);
    cr_assert(llabs(h4 - h0) <= 256, "the graph's bytes are returned (%lld, %lld)", h4, h0);
}

/* An exec keeps the versions that queued launches no longer need in a free
 * list for the next setters; how many there are follows how far the host ran
 * ahead of the stream. simcuda_heap_bytes counts them as parked, not in use,
 * so that the same work reads the same bytes however the stream kept up:
 * after eight updates queued behind a gate, as after one that ran at once. */
static void heap_set_all(CUgraphExec x, const CUgraphNode *nodes, CUdeviceptr buf, float s)
{
    struct heap_args a;
    CUDA_KERNEL_NODE_PARAMS p = heap_params(&a, buf, s);
    for (int i = 0; i < HEAP_NODES; i++)
        CK(cuGraphExecKernelNodeSetParams_v2(x, nodes[i], &p));
}

Test(simcuda, heap_leaves_out_recycled_versions)
{
    static struct heap_fix t;
    heap_start(&t);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int r = 0; r < 2; r++) { /* the stream keeps up: one version recycled per node */
        heap_set_all(t.x, t.nodes, t.buf, 1.0f);
        CK(cuGraphLaunch(t.x, s));
        CK(cuStreamSynchronize(s));
    }
    long long kept_up = t.heap();

    hf_state = 0;
    CK(cuLaunchHostFunc(s, gate_host, NULL));
    pthread_mutex_lock(&hf_mu);
    while (hf_state != 1)
        pthread_cond_wait(&hf_cv, &hf_mu);
    pthread_mutex_unlock(&hf_mu);
    enum { QUEUED = 8 };
    for (int r = 0; r < QUEUED; r++) { /* each launch holds its own version of every node */
        heap_set_all(t.x, t.nodes, t.buf, 1.0f);
        CK(cuGraphLaunch(t.x, s));
    }
    long long queued = t.heap();
    pthread_mutex_lock(&hf_mu);
    hf_state = 2;
    pthread_cond_broadcast(&hf_cv);
    pthread_mutex_unlock(&hf_mu);
    CK(cuStreamSynchronize(s));
    heap_set_all(t.x, t.nodes, t.buf, 1.0f);
    CK(cuGraphLaunch(t.x, s));
    CK(cuStreamSynchronize(s));
    long long caught_up = t.heap();

    /* the queued launches' versions are in use while they wait */
    cr_assert_geq(queued - kept_up, (QUEUED - 1) * HEAP_NODES * 32,
                  "%d launches queued: %lld bytes more", QUEUED, queued - kept_up);
    cr_assert(llabs(caught_up - kept_up) <= 256,
              "recycled versions are parked, not in use (%lld after a backlog, %lld without)",
              caught_up, kept_up);
    long long (*parked)(void) = heap_query("simcuda_heap_parked_bytes");
    cr_assert_geq(parked(), (QUEUED - 1) * HEAP_NODES * 32, "the backlog's versions are parked: %lld",
                  parked());
    CK(cuGraphExecDestroy(t.x));
    CK(cuGraphDestroy(t.g));
    CK(cuStreamDestroy_v2(s));
}

/* cuMemcpy/cuMemcpyAsync under unified addressing: the direction follows the
 * pointers; cuGraphUpload checks its exec and stream. */
Test(simcuda, unified_copies_and_upload)
{
    setup();
    CUdeviceptr a, b;
    CK(cuMemAlloc_v2(&a, 64));
    CK(cuMemAlloc_v2(&b, 64));
    unsigned char host[64], back[64];
    for (int i = 0; i < 64; i++)
        host[i] = (unsigned char)(i * 7);
    CK(cuMemcpy(a, (CUdeviceptr)(uintptr_t)host, 64));  /* host -> device */
    CK(cuMemcpy(b, a, 64));                             /* device -> device */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    memset(back, 0, sizeof back);
    CK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)back, b, 64, s)); /* device -> host */
    CK(cuStreamSynchronize(s));
    cr_assert_eq(memcmp(host, back, 64), 0);
    CKE(cuMemcpy(a, b, 128), CUDA_ERROR_INVALID_VALUE); /* runs past both allocations */

    CUgraph g;
    CUgraphExec ex;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n;
    CK(cuGraphAddEmptyNode(&n, g, NULL, 0));
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    CK(cuGraphUpload(ex, s));
    CK(cuGraphExecDestroy(ex));
    CKE(cuGraphUpload(ex, s), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(s));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
}

/* Managed memory: the host reads and writes it directly; cuMemFree frees it. */
Test(simcuda, managed_memory)
{
    setup();
    CUdeviceptr m;
    CKE(cuMemAllocManaged(&m, 64, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAllocManaged(&m, 64, CU_MEM_ATTACH_GLOBAL));
    ((unsigned char *)(uintptr_t)m)[5] = 42;
    unsigned char b = 0;
    CK(cuMemcpyDtoH_v2(&b, m + 5, 1));
    cr_assert_eq(b, 42);
    CK(cuMemFree_v2(m));
    CKE(cuMemFree_v2(m), CUDA_ERROR_INVALID_VALUE);
}

/* ---- memcpy, memset, host and event nodes ----------------------------------- */

static void CUDA_CB count_host(void *p)
{
    (*(int *)p)++;
}

static CUDA_MEMCPY3D copy_1d(CUdeviceptr dst, CUdeviceptr src, size_t bytes)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static CUDA_MEMSET_NODE_PARAMS set_1d(CUdeviceptr dst, unsigned value, size_t n)
{
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = dst;
    m.value = value;
    m.elementSize = 4;
    m.width = n;
    m.height = 1;
    return m;
}

/* memset A -> memcpy A to B -> host, then an event record: run in order at
 * every launch; the exec setters change only later launches; a clone and
 * its exec hold the same parameters. */
Test(simcuda, graph_memset_memcpy_host_event_nodes, .init = start)
{
    enum { N = 256 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N), c = alloc_f32(N);
    union { float f; unsigned u; } one = {1.0f}, two = {2.0f}, three = {3.0f};
    int hits[2] = {0, 0};
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode ms, cp, hn, er;
    CUDA_MEMSET_NODE_PARAMS m = set_1d(a, one.u, N);
    CK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, g_ctx));
    CUDA_MEMCPY3D cpy = copy_1d(b, a, N * 4);
    CK(cuGraphAddMemcpyNode(&cp, g, &ms, 1, &cpy, g_ctx));
    CUDA_HOST_NODE_PARAMS h = {count_host, &hits[0]};
    CK(cuGraphAddHostNode(&hn, g, &cp, 1, &h));
    CK(cuGraphAddEventRecordNode(&er, g, &hn, 1, ev));

    CUgraphNodeType t;
    CK(cuGraphNodeGetType(cp, &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_MEMCPY);
    CUDA_MEMSET_NODE_PARAMS mg;
    CK(cuGraphMemsetNodeGetParams(ms, &mg));
    cr_assert_eq(mg.dst, a);
    cr_assert_eq(mg.value, one.u);
    CUDA_HOST_NODE_PARAMS hg;
    CK(cuGraphHostNodeGetParams(hn, &hg));
    cr_assert_eq(hg.userData, &hits[0]);
    CUevent eg;
    CK(cuGraphEventRecordNodeGetEvent(er, &eg));
    cr_assert_eq(eg, ev);
    CKE(cuGraphMemsetNodeGetParams(cp, &mg), CUDA_ERROR_INVALID_VALUE);

    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuEventSynchronize(ev));
    expect_all(b, N, 1.0f);
    cr_assert_eq(hits[0], 1);

    /* A launch snapshots the parameters: set after it, seen only later. */
    m.value = two.u;
    CK(cuGraphExecMemsetNodeSetParams(x, ms, &m, g_ctx));
    cpy = copy_1d(c, a, N * 4);
    CK(cuGraphExecMemcpyNodeSetParams(x, cp, &cpy, g_ctx));
    h.userData = &hits[1];
    CK(cuGraphExecHostNodeSetParams(x, hn, &h));
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 1.0f);
    expect_all(c, N, 2.0f);
    cr_assert_eq(hits[0], 1);
    cr_assert_eq(hits[1], 1);

    /* The generic entry point, with the v2 memset's own context. */
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    gp.memset.dst = a;
    gp.memset.value = three.u;
    gp.memset.elementSize = 4;
    gp.memset.width = N;
    gp.memset.height = 1;
    gp.memset.ctx = g_ctx;
    CK(cuGraphExecNodeSetParams(x, ms, &gp));
    CK(cuGraphNodeSetEnabled(x, cp, 0)); /* memcpy nodes can be disabled */
    unsigned en = 1;
    CK(cuGraphNodeGetEnabled(x, cp, &en));
    cr_assert_eq(en, 0);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(a, N, 3.0f);
    expect_all(c, N, 2.0f); /* the copy did not run */
    cr_assert_eq(hits[1], 2);

    /* The graph's nodes were not changed by the exec's: a clone holds the
     * instantiation's parameters. */
    CUgraph cl;
    CK(cuGraphClone(&cl, g));
    CUgraphExec y;
    CK(cuGraphInstantiateWithFlags(&y, cl, 0));
    CK(cuGraphLaunch(y, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 1.0f);
    cr_assert_eq(hits[0], 2);
    CK(cuGraphExecDestroy(y));
    CK(cuGraphDestroy(cl));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuEventDestroy_v2(ev));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    CK(cuMemFree_v2(c));
}

/* What the driver refuses, as cuda.h documents it. */
Test(simcuda, graph_other_node_checks, .init = start)
{
    enum { N = 64 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    float host[N];
    int hits = 0;
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUgraph g, other;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphCreate(&other, 0));
    CUgraphNode ms, cp, hn, ew, stranger;
    CUDA_MEMSET_NODE_PARAMS m = set_1d(a, 0, N);
    CUDA_MEMCPY3D cpy = copy_1d(b, a, N * 4);
    CUDA_HOST_NODE_PARAMS h = {count_host, &hits};

    /* at the graph */
    m.width = 0;
    CKE(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, g_ctx), CUDA_ERROR_INVALID_VALUE);
    m = set_1d(a, 0, N);
    m.elementSize = 3;
    CKE(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, g_ctx), CUDA_ERROR_INVALID_VALUE);
    m = set_1d(a, 0, N + 1); /* past the allocation */
    CKE(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, g_ctx), CUDA_ERROR_INVALID_VALUE);
    m = set_1d(a, 0, N);
    CKE(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, NULL), CUDA_ERROR_INVALID_CONTEXT);
    cpy.WidthInBytes = 0;
    CKE(cuGraphAddMemcpyNode(&cp, g, NULL, 0, &cpy, g_ctx), CUDA_ERROR_INVALID_VALUE);
    cpy = copy_1d(b, a, N * 4);
    cpy.Height = 2;
    CKE(cuGraphAddMemcpyNode(&cp, g, NULL, 0, &cpy, g_ctx), CUDA_ERROR_NOT_SUPPORTED);
    cpy = copy_1d(b, a, N * 4);
    h.fn = NULL;
    CKE(cuGraphAddHostNode(&hn, g, NULL, 0, &h), CUDA_ERROR_INVALID_VALUE);
    h.fn = count_host;
    CKE(cuGraphAddEventWaitNode(&ew, g, NULL, 0, (CUevent)&hits), CUDA_ERROR_INVALID_VALUE);

    CK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, g_ctx));
    CK(cuGraphAddMemcpyNode(&cp, g, &ms, 1, &cpy, g_ctx));
    CK(cuGraphAddHostNode(&hn, g, &cp, 1, &h));
    CK(cuGraphAddEventWaitNode(&ew, g, NULL, 0, ev));
    CK(cuGraphAddMemsetNode(&stranger, other, NULL, 0, &m, g_ctx));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));

    /* a node of another graph, a node of another type, NULL */
    CKE(cuGraphExecMemsetNodeSetParams(x, stranger, &m, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecMemsetNodeSetParams(x, cp, &m, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecMemcpyNodeSetParams(x, ms, &cpy, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecHostNodeSetParams(x, NULL, &h), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecEventWaitNodeSetEvent(x, hn, ev), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecEventRecordNodeSetEvent(x, ew, ev), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecEventWaitNodeSetEvent(x, ew, ev));
    /* memcpy: the memory operands' kind may not change */
    CUDA_MEMCPY3D toh = cpy;
    toh.dstMemoryType = CU_MEMORYTYPE_HOST;
    toh.dstHost = host;
    CKE(cuGraphExecMemcpyNodeSetParams(x, cp, &toh, g_ctx), CUDA_ERROR_INVALID_VALUE);
    /* memset: the height may not change, nor a zero width */
    CUDA_MEMSET_NODE_PARAMS m2 = set_1d(a, 0, N / 2);
    m2.height = 2;
    m2.pitch = N * 2;
    CKE(cuGraphExecMemsetNodeSetParams(x, ms, &m2, g_ctx), CUDA_ERROR_INVALID_VALUE);
    m2 = set_1d(b, 7, 0);
    CKE(cuGraphExecMemsetNodeSetParams(x, ms, &m2, g_ctx), CUDA_ERROR_INVALID_VALUE);
    /* the generic entry: type must match the node's */
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_HOST;
    gp.host.fn = count_host;
    gp.host.userData = &hits;
    CKE(cuGraphExecNodeSetParams(x, ms, &gp), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecNodeSetParams(x, hn, &gp));
    /* host and event nodes cannot be disabled */
    CKE(cuGraphNodeSetEnabled(x, hn, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphNodeSetEnabled(x, ew, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphNodeSetEnabled(x, ms, 0));
    CK(cuGraphNodeSetEnabled(x, ms, 1));
    /* refused calls changed nothing */
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    expect_all(b, N, 0.0f);
    cr_assert_eq(hits, 1);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(other));
    CK(cuEventDestroy_v2(ev));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
}

static atomic_int gate_open;

static void CUDA_CB hold(void *p)
{
    (void)p;
    while (!atomic_load(&gate_open))
        usleep(100);
}

/* An event wait node: the launch waits for the event's record in another
 * stream (held by a host function); the record node's event completes only
 * after the launch's work. */
Test(simcuda, graph_event_wait_node_orders_the_launch, .init = start)
{
    enum { N = 64 };
    CUdeviceptr a = alloc_f32(N), b = alloc_f32(N);
    CUstream s1, s2;
    CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent before, after;
    CK(cuEventCreate(&before, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&after, CU_EVENT_DISABLE_TIMING));
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode w, cp, r;
    CK(cuGraphAddEventWaitNode(&w, g, NULL, 0, before));
    CUDA_MEMCPY3D cpy = copy_1d(b, a, N * 4);
    CK(cuGraphAddMemcpyNode(&cp, g, &w, 1, &cpy, g_ctx));
    CK(cuGraphAddEventRecordNode(&r, g, &cp, 1, after));
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    atomic_store(&gate_open, 0);
    CK(cuLaunchHostFunc(s1, hold, NULL));
    launch_fill(s1, a, 5.0f, N);
    CK(cuEventRecord(before, s1));
    CK(cuGraphLaunch(x, s2));
    usleep(20 * 1000);
    CKE(cuEventQuery(after), CUDA_ERROR_NOT_READY);
    atomic_store(&gate_open, 1);
    CK(cuEventSynchronize(after));
    expect_all(b, N, 5.0f);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuEventDestroy_v2(before));
    CK(cuEventDestroy_v2(after));
    CK(cuStreamDestroy_v2(s1));
    CK(cuStreamDestroy_v2(s2));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
}

/* simcuda_entry_name/_calls/_cost_ns: a benchmark reads the driver calls of
 * part of one run from them; each call counts once, under its exported name,
 * and the price is SIMCUDA_COST's. */
Test(simcuda, call_counters)
{
    setenv("SIMCUDA_COST", "cuCtxSynchronize:7", 1);
    start();
    const char *(*name)(int) = NULL;
    unsigned long long (*calls)(int) = NULL, (*cost)(int) = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "simcuda_entry_name");
    memcpy(&name, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_entry_calls");
    memcpy(&calls, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_entry_cost_ns");
    memcpy(&cost, &sym, sizeof sym);
    cr_assert(name && calls && cost, "simcuda exports its call counters");
    int sync = -1, n = 0;
    for (; name(n); n++)
        if (strcmp(name(n), "cuCtxSynchronize") == 0)
            sync = n;
    cr_assert_gt(n, 100, "every implemented entry point has a counter: %d", n);
    cr_assert_geq(sync, 0, "cuCtxSynchronize is listed");
    cr_assert_null(name(n), "the list ends");
    cr_assert_eq(cost(sync), 7, "priced at SIMCUDA_COST: %llu", cost(sync));
    cr_assert_eq(cost(sync ? sync - 1 : 1), 0, "an unpriced entry costs nothing");
    unsigned long long before = calls(sync);
    CK(cuCtxSynchronize());
    CK(cuCtxSynchronize());
    cr_assert_eq(calls(sync) - before, 2, "two calls counted: %llu", calls(sync) - before);
    cr_assert_eq(calls(-1), 0, "out of range answers 0");
    cr_assert_eq(calls(n), 0, "out of range answers 0");
}
