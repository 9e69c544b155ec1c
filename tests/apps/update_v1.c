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

#include "fill_probe.h"

int main(int argc, char **argv)
{
    struct fill_probe f;
    fill_open(&f, argc > 1 ? argv[1] : getenv("VR_PTX"));
    float value = 1.0f;
    unsigned long long n = FILL_N;
    void *args[] = {&f.out, &value, &n};
    CUgraphNode node, node2;
    CUgraph g1 = fill_graph(&f, args, &node);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g1, 0));
    CUDA_KERNEL_NODE_PARAMS p;
    CK(cuGraphKernelNodeGetParams_v2(node, &p));
    p.kernelParams = args;
    for (int i = 0; i < 4; i++) {
        CK(cuGraphExecKernelNodeSetParams_v2(x, node, &p));
        fill_step(&f, x, "before");
    }

    value = 2.0f;
    CUgraph g2 = fill_graph(&f, args, &node2);
    CUgraphNode error_node = NULL;
    CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_ERROR;
    CK(cuGraphExecUpdate(x, g2, &error_node, &result));
    printf("update result=%d\n", (int)result);
    fill_step(&f, x, "updated");

    value = 1.0f; /* what the exec held before the update */
    for (int i = 0; i < 2; i++) {
        CK(cuGraphExecKernelNodeSetParams_v2(x, node, &p));
        fill_step(&f, x, "after");
    }
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g2));
    CK(cuGraphDestroy(g1));
    fill_close(&f);
    return 0;
}
