/* bad_calls: every intercepted entry point called with bad input (NULL
 * pointers, handles that were never valid or no longer are, foreign nodes),
 * printing the CUresult name of each. With the shim the names must be the
 * driver's own, so the e2e suite compares this output with and without it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "bad_calls"
#include "vr_check.h"

#define SHOW(call) printf("%-58s %s\n", #call, vr_err_name(call))

int main(int argc, char **argv)
{
    const char *ptx_path = argc > 1 ? argv[1] : getenv("VR_PTX");
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill;
    CK(cuInit(0));
    vr_ctx_current(0, &ctx);
    void *ptx = vr_ptx_or_die(ptx_path);
    CUresult loaded = cuModuleLoadData(&mod, ptx);
    free(ptx);
    CK(loaded);
    CK(cuModuleGetFunction(&fill, mod, "vr_fill_f32"));

    CUdeviceptr buf;
    CK(cuMemAlloc_v2(&buf, 2u << 20));
    float value = 1.0f;
    unsigned long long n = 1024;
    void *args[] = {&buf, &value, &n};
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = fill;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 128, p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraph g, other;
    CUgraphNode node, foreign;
    CUgraphExec ex, gone;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode_v2(&node, g, NULL, 0, &p));
    CK(cuGraphCreate(&other, 0));
    CK(cuGraphAddKernelNode_v2(&foreign, other, NULL, 0, &p));
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    CK(cuGraphInstantiateWithFlags(&gone, g, 0));
    CK(cuGraphExecDestroy(gone));
    for (int i = 0; i < 4; i++) /* past any profile window */
        CK(cuGraphLaunch(ex, NULL));
    CK(cuCtxSynchronize());

    CUDA_KERNEL_NODE_PARAMS_v1 p1;
    memset(&p1, 0, sizeof p1);
    p1.func = fill;
    p1.gridDimX = p1.gridDimY = p1.gridDimZ = 1;
    p1.blockDimX = 128, p1.blockDimY = p1.blockDimZ = 1;
    p1.kernelParams = args;
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET; /* not a kernel: the driver's to judge */
    CUDA_KERNEL_NODE_PARAMS nofunc = p;
    nofunc.func = NULL;
    CUDA_KERNEL_NODE_PARAMS noargs = p;
    noargs.kernelParams = NULL;
    void *pfn = NULL;
    CUdeviceptr out = 0, base = 0;
    size_t size = 0;

    SHOW(cuMemAlloc_v2(NULL, 4096));
    SHOW(cuMemAlloc_v2(&out, 0));
    SHOW(cuMemFree_v2(buf + 8));
    SHOW(cuMemFree_v2((CUdeviceptr)0x1000));
    SHOW(cuMemFreeAsync((CUdeviceptr)0x1000, NULL));
    SHOW(cuMemGetAddressRange_v2(&base, &size, (CUdeviceptr)0x1000));
    SHOW(cuGraphInstantiateWithFlags(NULL, g, 0));
    SHOW(cuGraphInstantiateWithParams(&gone, g, NULL));
    SHOW(cuGraphExecKernelNodeSetParams_v2(ex, node, NULL));
    SHOW(cuGraphExecKernelNodeSetParams_v2(ex, node, &nofunc));
    SHOW(cuGraphExecKernelNodeSetParams_v2(ex, node, &noargs));
    SHOW(cuGraphExecKernelNodeSetParams_v2(ex, foreign, &p));
    SHOW(cuGraphExecKernelNodeSetParams_v2(gone, node, &p));
    SHOW(cuGraphExecKernelNodeSetParams(ex, node, NULL));
    SHOW(cuGraphExecKernelNodeSetParams(ex, foreign, &p1));
    SHOW(cuGraphExecNodeSetParams(ex, node, NULL));
    SHOW(cuGraphExecNodeSetParams(ex, node, &np));
    SHOW(cuGraphLaunch(gone, NULL));
    SHOW(cuGraphLaunch_ptsz(gone, NULL));
    SHOW(cuGraphExecUpdate_v2(gone, g, NULL));
    SHOW(cuGraphExecDestroy(gone));
    SHOW(cuGetProcAddress_v2("cuNoSuchFunction", &pfn, 12000, 0, NULL));
    SHOW(cuGetProcAddress_v2("cuGraphLaunch", NULL, 12000, 0, NULL));
    SHOW(cuGetProcAddress_v2(NULL, &pfn, 12000, 0, NULL));
    SHOW(cuCtxEnablePeerAccess(ctx, 0));
    /* After all that, the good calls still work and the exec still runs. */
    SHOW(cuGraphExecKernelNodeSetParams_v2(ex, node, &p));
    SHOW(cuGraphLaunch(ex, NULL));
    SHOW(cuCtxSynchronize());
    float back = 0;
    CK(cuMemcpyDtoH_v2(&back, buf, sizeof back));
    printf("value %g\n", (double)back);
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(other));
    CK(cuMemFree_v2(buf));
    return 0;
}
