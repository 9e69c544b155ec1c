/* update_retry: a SetParams the driver refuses, then the same SetParams
 * again.
 *
 *   update_retry [--entry v1|v2|node] [PTX]
 *
 * One fill node, instantiated writing 1.0. Every update writes a new value,
 * so each reaches the driver with or without the shim, and the second one
 * (3.0) is the driver's second call of the entry point: SIMCUDA_FAIL=ENTRY:2
 * makes it fail in both runs. The program says so, sets 3.0 again and
 * launches. The driver still holds 2.0 after the refusal: a shim that took
 * the refused arguments as what the driver holds would absorb the retry,
 * and the launch would write 2.0. stdout: each step's values and each
 * update's result; compared with and without the shim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "update_retry"
#include "vr_check.h"

#include "fill_probe.h"

static const char *entry = "v2";

static CUresult update(CUgraphExec x, CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!strcmp(entry, "v1")) {
        CUDA_KERNEL_NODE_PARAMS_v1 p1;
        memset(&p1, 0, sizeof p1);
        p1.func = p->func;
        p1.gridDimX = p->gridDimX;
        p1.gridDimY = p->gridDimY;
        p1.gridDimZ = p->gridDimZ;
        p1.blockDimX = p->blockDimX;
        p1.blockDimY = p->blockDimY;
        p1.blockDimZ = p->blockDimZ;
        p1.sharedMemBytes = p->sharedMemBytes;
        p1.kernelParams = p->kernelParams;
        return cuGraphExecKernelNodeSetParams(x, node, &p1);
    }
    if (!strcmp(entry, "node")) {
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        memcpy(&np.kernel, p, sizeof *p);
        return cuGraphExecNodeSetParams(x, node, &np);
    }
    return cuGraphExecKernelNodeSetParams_v2(x, node, p);
}

int main(int argc, char **argv)
{
    const char *ptx_path = getenv("VR_PTX");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--entry") && i + 1 < argc)
            entry = argv[++i];
        else
            ptx_path = argv[i];
    }
    if (strcmp(entry, "v1") && strcmp(entry, "v2") && strcmp(entry, "node")) {
        fprintf(stderr, "update_retry: --entry v1, v2 or node, not %s\n", entry);
        return 2;
    }
    struct fill_probe f;
    fill_open(&f, ptx_path);
    float value = 1.0f;
    unsigned long long n = FILL_N;
    void *args[] = {&f.out, &value, &n};
    CUDA_KERNEL_NODE_PARAMS p = fill_params(&f, args);
    CUgraphNode node;
    CUgraph g = fill_graph(&f, args, &node);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    fill_step(&f, x, "instantiated");

    value = 2.0f;
    printf("set 2.0: %s\n", vr_err_name(update(x, node, &p)));
    fill_step(&f, x, "second");
    value = 3.0f;
    printf("set 3.0: %s\n", vr_err_name(update(x, node, &p)));
    fill_step(&f, x, "refused");
    printf("set 3.0 again: %s\n", vr_err_name(update(x, node, &p)));
    fill_step(&f, x, "retried");
    /* And once more: now the driver holds 3.0, so the shim may absorb it. */
    printf("set 3.0 once more: %s\n", vr_err_name(update(x, node, &p)));
    fill_step(&f, x, "repeated");

    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    fill_close(&f);
    return 0;
}
