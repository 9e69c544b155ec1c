/* driver_probe: asks the driver the questions whose answers the shim depends
 * on and cuda.h leaves open, one line each: "QUESTION RESULT" where RESULT is
 * the CUresult's name (or a value). Run on a GPU by scripts/gpu-check, its
 * output there is recorded in tests/simcuda/driver-answers.txt; the suite
 * runs it on simcuda and compares, so simcuda answers as the real driver did.
 *
 *   driver_probe [--ptx FILE]      (default: $VR_PTX)
 *
 * Every question builds what it needs and destroys it; a question that cannot
 * be set up prints SETUP-FAILED and the probe goes on. Exit status 0 unless
 * the context or module could not be made.
 */
/* The plain names, as a program sees them (gpu-check builds every app with
 * __CUDA_API_VERSION_INTERNAL, which would turn them into the v1 ABI). */
#undef __CUDA_API_VERSION_INTERNAL
#define VR_PROG "driver_probe"
#include "vr_check.h"

static CUmodule mod;
static CUfunction fill;
static CUdeviceptr buf;
static float value = 1.0f;
static unsigned long long count = 256;
static void *args[3];
static CUDA_KERNEL_NODE_PARAMS kp;

static void answer(const char *q, CUresult r)
{
    printf("%s %s\n", q, vr_err_name(r));
}

/* A graph of one fill node; *node receives it. */
static CUresult one_node_graph(CUgraph *g, CUgraphNode *node)
{
    CUresult r = cuGraphCreate(g, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = cuGraphAddKernelNode(node, *g, NULL, 0, &kp);
    if (r != CUDA_SUCCESS)
        cuGraphDestroy(*g);
    return r;
}

#define SETUP(call)                                                                \
    do {                                                                           \
        if ((call) != CUDA_SUCCESS) {                                              \
            printf("%s SETUP-FAILED\n", q);                                        \
            return;                                                                \
        }                                                                          \
    } while (0)

/* Exec calls name the nodes of the graph the exec was instantiated from:
 * are they still good once that graph is destroyed? */
static void nodes_of_destroyed_graph(void)
{
    const char *q = "exec_setparams.after_graph_destroyed";
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    SETUP(one_node_graph(&g, &n));
    SETUP(cuGraphInstantiateWithFlags(&e, g, 0));
    cuGraphDestroy(g);
    answer(q, cuGraphExecKernelNodeSetParams(e, n, &kp));
    answer("exec_node_set_enabled.after_graph_destroyed", cuGraphNodeSetEnabled(e, n, 1));
    answer("exec_launch.after_graph_destroyed", cuGraphLaunch(e, 0));
    cuCtxSynchronize();
    cuGraphExecDestroy(e);
}

/* After cuGraphExecUpdate(e, g2): which graph's nodes name the exec's nodes? */
static void nodes_after_update(void)
{
    const char *q = "exec_update";
    CUgraph g1, g2, other;
    CUgraphNode n1, n2, no;
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    SETUP(one_node_graph(&g1, &n1));
    SETUP(one_node_graph(&g2, &n2));
    SETUP(one_node_graph(&other, &no));
    SETUP(cuGraphInstantiateWithFlags(&e, g1, 0));
    answer("exec_setparams.node_of_other_graph", cuGraphExecKernelNodeSetParams(e, no, &kp));
    memset(&info, 0, sizeof info);
    answer(q, cuGraphExecUpdate(e, g2, &info));
    answer("exec_setparams.after_update.original_node", cuGraphExecKernelNodeSetParams(e, n1, &kp));
    answer("exec_setparams.after_update.update_graph_node",
           cuGraphExecKernelNodeSetParams(e, n2, &kp));
    cuGraphDestroy(g2);
    answer("exec_setparams.after_update.update_graph_destroyed.original_node",
           cuGraphExecKernelNodeSetParams(e, n1, &kp));
    cuGraphDestroy(g1);
    answer("exec_setparams.after_update.both_destroyed.original_node",
           cuGraphExecKernelNodeSetParams(e, n1, &kp));
    cuGraphExecDestroy(e);
    cuGraphDestroy(other);
}

/* The update graph destroyed first, the instantiation graph kept. */
static void update_then_destroy_original(void)
{
    const char *q = "exec_setparams.after_update.original_destroyed";
    CUgraph g1, g2;
    CUgraphNode n1, n2;
    CUgraphExec e;
    CUgraphExecUpdateResultInfo info;
    SETUP(one_node_graph(&g1, &n1));
    SETUP(one_node_graph(&g2, &n2));
    SETUP(cuGraphInstantiateWithFlags(&e, g1, 0));
    memset(&info, 0, sizeof info);
    SETUP(cuGraphExecUpdate(e, g2, &info));
    cuGraphDestroy(g1);
    answer("exec_setparams.after_update.original_destroyed.update_graph_node",
           cuGraphExecKernelNodeSetParams(e, n2, &kp));
    cuGraphExecDestroy(e);
    cuGraphDestroy(g2);
}

static void clone_nodes(void)
{
    const char *q = "exec_setparams.clone_node";
    CUgraph g, c;
    CUgraphNode n, cn;
    CUgraphExec e;
    SETUP(one_node_graph(&g, &n));
    SETUP(cuGraphClone(&c, g));
    SETUP(cuGraphNodeFindInClone(&cn, n, c));
    SETUP(cuGraphInstantiateWithFlags(&e, g, 0));
    answer(q, cuGraphExecKernelNodeSetParams(e, cn, &kp));
    cuGraphExecDestroy(e);
    /* and the other way: instantiated from the clone, named by the original */
    SETUP(cuGraphInstantiateWithFlags(&e, c, 0));
    answer("exec_setparams.clone_exec.original_node", cuGraphExecKernelNodeSetParams(e, n, &kp));
    cuGraphExecDestroy(e);
    cuGraphDestroy(c);
    cuGraphDestroy(g);
}

static void setparams_edges(void)
{
    const char *q = "exec_setparams.null_params";
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    SETUP(one_node_graph(&g, &n));
    SETUP(cuGraphInstantiateWithFlags(&e, g, 0));
    answer(q, cuGraphExecKernelNodeSetParams(e, n, NULL));
    CUDA_KERNEL_NODE_PARAMS none = kp;
    none.kernelParams = NULL;
    none.extra = NULL;
    answer("exec_setparams.no_args_no_extra", cuGraphExecKernelNodeSetParams(e, n, &none));
    answer("exec_setparams.null_node", cuGraphExecKernelNodeSetParams(e, NULL, &kp));
    answer("exec_setparams.null_exec", cuGraphExecKernelNodeSetParams(NULL, n, &kp));
    cuGraphExecDestroy(e);
    cuGraphDestroy(g);
}

/* Pinned device memory on dev, as the shim asks for it. */
static CUmemAllocationProp device_prop(CUdevice dev)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    return prop;
}

static void vmm(CUdevice dev)
{
    const char *q = "vmm";
    CUmemAllocationProp prop = device_prop(dev);
    size_t gran = 0;
    SETUP(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    CUdeviceptr va, va2;
    SETUP(cuMemCreate(&h, gran, &prop, 0));
    SETUP(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    va2 = va + gran;
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    answer("vmm.set_access_unmapped", cuMemSetAccess(va, gran, &acc, 1));
    SETUP(cuMemMap(va, gran, 0, h, 0));
    answer("vmm.map_over_mapped", cuMemMap(va, gran, 0, h, 0));
    answer("vmm.map_twice_same_handle", cuMemMap(va2, gran, 0, h, 0));
    SETUP(cuMemSetAccess(va, 2 * gran, &acc, 1));
    CUipcMemHandle ipc;
    CUresult (*ipc_get)(CUipcMemHandle *, CUdeviceptr) = NULL;
    CUdriverProcAddressQueryResult found;
    if (cuGetProcAddress("cuIpcGetMemHandle", (void **)&ipc_get, 4000, 0, &found) == CUDA_SUCCESS &&
        ipc_get)
        answer("vmm.ipc_get_mem_handle", ipc_get(&ipc, va));
    else
        printf("vmm.ipc_get_mem_handle NOT-EXPORTED\n");
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = cuMemGetAddressRange(&base, &size, va + 16);
    printf("vmm.get_address_range %s%s\n", vr_err_name(r),
           r == CUDA_SUCCESS ? (base == va && size == gran ? " base=slice size=granularity"
                                                           : " other")
                             : "");
    answer("vmm.mem_free_of_mapping", cuMemFree(va));
    answer("vmm.address_free_while_mapped", cuMemAddressFree(va, 2 * gran));
    answer("vmm.release_while_mapped", cuMemRelease(h));
    answer("vmm.unmap_after_release", cuMemUnmap(va, gran));
    answer("vmm.unmap_second", cuMemUnmap(va2, gran));
    answer("vmm.unmap_unmapped", cuMemUnmap(va, gran));
    answer("vmm.address_free", cuMemAddressFree(va, 2 * gran));
    answer("vmm.retain_handle_native", cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)buf));
}

static void native(void)
{
    answer("mem_free.null", cuMemFree(0));
    answer("mem_free.interior", cuMemFree(buf + 64));
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, 0);
    answer("mem_alloc.zero_bytes", r);
    CUevent ev;
    if (cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        answer("event_query.never_recorded", cuEventQuery(ev));
        answer("stream_wait_event.never_recorded", cuStreamWaitEvent(0, ev, 0));
        answer("event_synchronize.never_recorded", cuEventSynchronize(ev));
        cuEventDestroy(ev);
    }
}

/* What the shim's exit-time releases meet: the driver may already have shut
 * down. Registered before cuInit, so it runs after any handler the driver
 * registers there; library destructors run later still. */
static CUdeviceptr kept_native, kept_va;
static size_t kept_size;
static void at_exit(void)
{
    if (kept_native)
        answer("exit.mem_free", cuMemFree(kept_native));
    if (kept_va)
        answer("exit.vmm_unmap", cuMemUnmap(kept_va, kept_size));
    fflush(stdout);
}

static void keep_for_exit(CUdevice dev)
{
    CUmemAllocationProp prop = device_prop(dev);
    CUmemGenericAllocationHandle h;
    if (cuMemGetAllocationGranularity(&kept_size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
        cuMemCreate(&h, kept_size, &prop, 0) || cuMemAddressReserve(&kept_va, kept_size, 0, 0, 0) ||
        cuMemMap(kept_va, kept_size, 0, h, 0)) {
        printf("exit SETUP-FAILED\n");
        kept_va = 0;
        return;
    }
    cuMemRelease(h);
    if (cuMemAlloc(&kept_native, 4096) != CUDA_SUCCESS)
        kept_native = 0;
}

int main(int argc, char **argv)
{
    atexit(at_exit);
    const char *ptx = getenv("VR_PTX");
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--ptx") && i + 1 < argc)
            ptx = argv[++i];
    char *text = vr_ptx_or_die(ptx);
    CK(cuInit(0));
    CUdevice dev = vr_ctx_current(0, NULL);
    CK(cuModuleLoadData(&mod, text));
    free(text);
    CK(cuModuleGetFunction(&fill, mod, "vr_fill_f32"));
    CK(cuMemAlloc(&buf, count * sizeof(float)));
    args[0] = &buf;
    args[1] = &value;
    args[2] = &count;
    kp = (CUDA_KERNEL_NODE_PARAMS){ .func = fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                    .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1,
                                    .kernelParams = args };
    nodes_of_destroyed_graph();
    nodes_after_update();
    update_then_destroy_original();
    clone_nodes();
    setparams_edges();
    vmm(dev);
    native();
    keep_for_exit(dev);
    CK(cuCtxSynchronize());
    cuMemFree(buf); /* an answer above may have freed it already */
    CK(cuModuleUnload(mod));
    return 0;
}
