/* update_v1: an executable graph updated through the v1 entry point
 * cuGraphExecUpdate(exec, graph, &errorNode, &result).
 *
 * The exec is instantiated from a graph whose fill node writes 1.0, replayed
 * with SetParams writing 1.0, then updated from a graph writing 2.0. The
 * next SetParams writes 1.0 again through the original node handle: the
 * driver now holds 2.0, so a shim that did not see the update and believes
 * 1.0 is installed would absorb it. stdout: the value each step wrote;
 * compared with and without the shim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "update_v1"
#include "vr_check.h"

enum { N = 64 };

static CUgraph fill_graph(CUfunction fill, void **args, CUgraphNode *node)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = fill;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode_v2(node, g, NULL, 0, &p));
    return g;
}

static void step(CUgraphExec x, CUstream s, CUdeviceptr out, const char *what)
{
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    float got[N];
    CK(cuMemcpyDtoH_v2(got, out, sizeof got));
    printf("%s first=%.1f last=%.1f\n", what, got[0], got[N - 1]);
}

int main(int argc, char **argv)
{
    const char *ptx_path = argc > 1 ? argv[1] : getenv("VR_PTX");
    char *ptx = vr_ptx_or_die(ptx_path);
    CUstream s;
    CUmodule mod;
    CUfunction fill;
    CK(cuInit(0));
    CUdevice dev = vr_ctx_current(0, NULL);
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&fill, mod, "vr_fill_f32"));
    CUdeviceptr out;
    CK(cuMemAlloc_v2(&out, N * sizeof(float)));

    float value = 1.0f;
    unsigned long long n = N;
    void *args[] = {&out, &value, &n};
    CUgraphNode node, node2;
    CUgraph g1 = fill_graph(fill, args, &node);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g1, 0));
    CUDA_KERNEL_NODE_PARAMS p;
    CK(cuGraphKernelNodeGetParams_v2(node, &p));
    p.kernelParams = args;
    for (int i = 0; i < 4; i++) {
        CK(cuGraphExecKernelNodeSetParams_v2(x, node, &p));
        step(x, s, out, "before");
    }

    value = 2.0f;
    CUgraph g2 = fill_graph(fill, args, &node2);
    CUgraphNode error_node = NULL;
    CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_ERROR;
    CK(cuGraphExecUpdate(x, g2, &error_node, &result));
    printf("update result=%d\n", (int)result);
    step(x, s, out, "updated");

    value = 1.0f; /* what the exec held before the update */
    for (int i = 0; i < 2; i++) {
        CK(cuGraphExecKernelNodeSetParams_v2(x, node, &p));
        step(x, s, out, "after");
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g2));
    CK(cuGraphDestroy(g1));
    CK(cuMemFree_v2(out));
    CK(cuModuleUnload(mod));
    CK(cuStreamDestroy_v2(s));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    free(ptx);
    return 0;
}
