/*
 * simcuda's legacy entry points that bindings resolving by exported name
 * still call (issue 30, item 5): cuCtxCreate_v2/_v3,
 * cuDeviceComputeCapability, cuGraphInstantiate/_v2, cuMemHostAlloc,
 * cuMemFreeHost, each as cuda.h documents it, bad arguments included; and
 * kernel arguments passed through `extra` to launches and kernel nodes.
 */
#include <criterion/criterion.h>

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "sim_ck.h"

static CUfunction f_scale;

static void start(void)
{
    CUdevice d;
    CUcontext c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    const char *path = getenv("SIMCUDA_TEST_PTX");
    cr_assert(path, "SIMCUDA_TEST_PTX is not set");
    CUmodule m;
    CK(cuModuleLoad(&m, path));
    CK(cuModuleGetFunction(&f_scale, m, "vr_scale_f32"));
}

Test(simcuda_legacy, before_init)
{
    CUcontext c;
    int major, minor;
    void *p;
    CKE(cuCtxCreate_v2(&c, 0, 0), CUDA_ERROR_NOT_INITIALIZED);
    CKE(cuDeviceComputeCapability(&major, &minor, 0), CUDA_ERROR_NOT_INITIALIZED);
    CKE(cuMemHostAlloc(&p, 64, 0), CUDA_ERROR_NOT_INITIALIZED);
    CKE(cuMemFreeHost(&major), CUDA_ERROR_NOT_INITIALIZED);
}

Test(simcuda_legacy, ctx_create_v2_and_v3)
{
    CK(cuInit(0));
    CUcontext c = NULL, cur = NULL;
    CKE(cuCtxCreate_v2(NULL, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuCtxCreate_v2(&c, 0, 7), CUDA_ERROR_INVALID_DEVICE);
    cr_assert_null(c);
    CK(cuCtxCreate_v2(&c, 0, 0));
    CK(cuCtxGetCurrent(&cur));
    cr_assert_eq(cur, c, "the new context is current");
    CUexecAffinityParam a;
    memset(&a, 0, sizeof a);
    CUcontext c3 = NULL;
    CKE(cuCtxCreate_v3(&c3, NULL, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuCtxCreate_v3(&c3, &a, -1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxCreate_v3(&c3, NULL, 0, 0, 0));
    CK(cuCtxDestroy_v2(c3));
    CK(cuCtxDestroy_v2(c));
}

Test(simcuda_legacy, compute_capability)
{
    CK(cuInit(0));
    int major = -1, minor = -1, attr_major, attr_minor;
    CKE(cuDeviceComputeCapability(NULL, &minor, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceComputeCapability(&major, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceComputeCapability(&major, &minor, 3), CUDA_ERROR_INVALID_DEVICE);
    cr_assert_eq(major, -1, "nothing written on failure");
    CK(cuDeviceComputeCapability(&major, &minor, 0));
    CK(cuDeviceGetAttribute(&attr_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    CK(cuDeviceGetAttribute(&attr_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
    cr_assert_eq(major, attr_major);
    cr_assert_eq(minor, attr_minor);
}

Test(simcuda_legacy, host_alloc_and_free)
{
    CK(cuInit(0));
    void *p = NULL;
    CKE(cuMemHostAlloc(&p, 64, 0), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
    start();
    CKE(cuMemHostAlloc(NULL, 64, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemHostAlloc(&p, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemHostAlloc(&p, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(p);
    CK(cuMemHostAlloc(&p, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                    CU_MEMHOSTALLOC_WRITECOMBINED));
    cr_assert_not_null(p);
    /* usable as the host side of copies */
    memset(p, 0x5a, 4096);
    CUdeviceptr d;
    CK(cuMemAlloc_v2(&d, 4096));
    CK(cuMemcpyHtoD_v2(d, p, 4096));
    memset(p, 0, 4096);
    CK(cuMemcpyDtoH_v2(p, d, 4096));
    cr_assert_eq(((unsigned char *)p)[4095], 0x5a);
    int local;
    CKE(cuMemFreeHost(&local), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemFreeHost(NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemFreeHost((char *)p + 8), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeHost(p));
    CKE(cuMemFreeHost(p), CUDA_ERROR_INVALID_VALUE); /* twice */
    CK(cuMemFree_v2(d));
}

/* One scale node, its arguments through `extra`: out = 2 * in. */
static CUgraph scale_graph(CUdeviceptr out, CUdeviceptr in, unsigned char *args, size_t *size,
                           void **extra, CUgraphNode *node)
{
    float k = 2.0f;
    unsigned long long n = 64;
    memset(args, 0xee, 32);
    memcpy(args, &out, 8);
    memcpy(args + 8, &in, 8);
    memcpy(args + 16, &k, 4);
    memcpy(args + 24, &n, 8);
    *size = 32;
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    extra[1] = args;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    extra[3] = size;
    extra[4] = CU_LAUNCH_PARAM_END;
    CUDA_KERNEL_NODE_PARAMS_v1 p;
    memset(&p, 0, sizeof p);
    p.func = f_scale;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 64;
    p.blockDimY = p.blockDimZ = 1;
    p.extra = extra;
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode(node, g, NULL, 0, &p));
    return g;
}

static float first_of(CUdeviceptr p)
{
    float f;
    CK(cuMemcpyDtoH_v2(&f, p, sizeof f));
    return f;
}

Test(simcuda_legacy, graph_instantiate_legacy_entry_points)
{
    start();
    CUdeviceptr in, out;
    CK(cuMemAlloc_v2(&in, 256));
    CK(cuMemAlloc_v2(&out, 256));
    CK(cuMemsetD32_v2(in, 0x40400000u, 64)); /* 3.0f */
    CK(cuCtxSynchronize());
    unsigned char args[32];
    size_t size;
    void *extra[5];
    CUgraphNode node;
    CUgraph g = scale_graph(out, in, args, &size, extra, &node);
    CUgraphExec x = NULL;
    CUgraphNode err = NULL;
    char log[64] = "untouched";
    CKE(cuGraphInstantiate_v2(NULL, g, &err, log, sizeof log), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphInstantiate_v2(&x, (CUgraph)(void *)args, &err, log, sizeof log),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphInstantiate(NULL, g, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(x);
    cr_assert(strncmp(log, "graph instantiation failed", 26) == 0, "%s", log);
    strcpy(log, "untouched");
    CK(cuGraphInstantiate_v2(&x, g, &err, log, sizeof log));
    cr_assert_str_eq(log, "untouched", "the log is written only on failure");
    cr_assert_null(err);
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
    cr_assert_eq(first_of(out), 6.0f);
    CUgraphExec x1 = NULL;
    CK(cuGraphInstantiate(&x1, g, NULL, NULL, 0)); /* as tinygrad passes them */
    /* SetParams with `extra` on the exec: the new buffer's bytes run */
    float k = 5.0f;
    memcpy(args + 16, &k, 4);
    CUDA_KERNEL_NODE_PARAMS_v1 p;
    memset(&p, 0, sizeof p);
    p.func = f_scale;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 64;
    p.blockDimY = p.blockDimZ = 1;
    p.extra = extra;
    CK(cuGraphExecKernelNodeSetParams(x1, node, &p));
    memset(args, 0, sizeof args); /* the driver copied them */
    CK(cuGraphLaunch(x1, NULL));
    CK(cuCtxSynchronize());
    cr_assert_eq(first_of(out), 15.0f);
    /* a buffer smaller than the parameters, or both ways at once */
    size = 16;
    CKE(cuGraphExecKernelNodeSetParams(x1, node, &p), CUDA_ERROR_INVALID_VALUE);
    size = 32;
    void *kp[4] = {args, args + 8, args + 16, args + 24};
    p.kernelParams = kp;
    CKE(cuGraphExecKernelNodeSetParams(x1, node, &p), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecDestroy(x1));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

Test(simcuda_legacy, launch_kernel_with_extra)
{
    start();
    CUdeviceptr in, out;
    CK(cuMemAlloc_v2(&in, 256));
    CK(cuMemAlloc_v2(&out, 256));
    CK(cuMemsetD32_v2(in, 0x3f800000u, 64)); /* 1.0f */
    unsigned char args[32];
    size_t size;
    void *extra[5];
    CUgraphNode node;
    CUgraph g = scale_graph(out, in, args, &size, extra, &node);
    CK(cuLaunchKernel(f_scale, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, extra));
    CK(cuCtxSynchronize());
    cr_assert_eq(first_of(out), 2.0f);
    void *bad[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_END};
    CKE(cuLaunchKernel(f_scale, 1, 1, 1, 64, 1, 1, 0, NULL, NULL, bad), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(g));
}
