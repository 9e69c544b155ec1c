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
#include <pthread.h>

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

/* What a zero-byte async memset or copy adds to a capture (issue 30 item 3;
 * cuda.h is silent): the capture is the zero-byte call and then one fill
 * kernel, and the line gives the end's answer, the node count and the
 * types in cuGraphGetNodes order. simcuda and the shim assume no node. */
static const char *type_name(CUgraphNodeType t)
{
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    default: return "other";
    }
}

enum zero_op { ZERO_D8, ZERO_D32, ZERO_D2D32, ZERO_COPY, ZERO_N };

static void zero_byte_capture(void)
{
    static const char *const names[ZERO_N] = {
        "capture.memset_d8.zero_bytes", "capture.memset_d32.zero_bytes",
        "capture.memset_d2d32.zero_width", "capture.memcpy.zero_bytes"};
    for (int op = 0; op < ZERO_N; op++) {
        const char *q = names[op];
        CUstream s;
        SETUP(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        if (cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS) {
            printf("%s SETUP-FAILED\n", q);
            cuStreamDestroy(s);
            continue;
        }
        CUresult r = op == ZERO_D8    ? cuMemsetD8Async(buf, 0, 0, s)
                     : op == ZERO_D32 ? cuMemsetD32Async(buf, 0, 0, s)
                     : op == ZERO_D2D32
                         ? cuMemsetD2D32Async(buf, 64, 0, 0, 4, s)
                         : cuMemcpyAsync(buf, buf + 512, 0, s);
        CUresult k = cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 0, s, args, NULL);
        CUgraph g = NULL;
        CUresult end = cuStreamEndCapture(s, &g);
        printf("%s %s kernel=%s end=%s", q, vr_err_name(r), vr_err_name(k), vr_err_name(end));
        size_t n = 0;
        CUgraphNode nodes[8];
        if (g && cuGraphGetNodes(g, NULL, &n) == CUDA_SUCCESS) {
            printf(" nodes=%zu types=", n);
            size_t got = n < 8 ? n : 8;
            if (got && cuGraphGetNodes(g, nodes, &got) == CUDA_SUCCESS) {
                for (size_t i = 0; i < got; i++) {
                    CUgraphNodeType t;
                    printf("%s%s", i ? "," : "",
                           cuGraphNodeGetType(nodes[i], &t) == CUDA_SUCCESS ? type_name(t) : "?");
                }
            } else {
                printf("-");
            }
        }
        printf("\n");
        if (g)
            cuGraphDestroy(g);
        cuStreamDestroy(s);
    }
}

/* cuMemFreeAsync of memory allocated outside the capture, into a capturing
 * stream (issue 30 item 7): an H200 refuses it, CUDA_ERROR_INVALID_VALUE,
 * and the capture goes on. */
static void free_in_capture(void)
{
    const char *q = "capture.mem_free_async.outside_allocation";
    CUstream s;
    CUdeviceptr p;
    SETUP(cuMemAlloc(&p, 4 << 20)); /* one the shim backs with VMM memory */
    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        printf("%s SETUP-FAILED\n", q);
        cuMemFree(p);
        return;
    }
    if (cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS) {
        CUresult r = cuMemFreeAsync(p, s);
        CUgraph g = NULL;
        CUresult end = cuStreamEndCapture(s, &g);
        printf("%s %s end=%s\n", q, vr_err_name(r), vr_err_name(end));
        if (g)
            cuGraphDestroy(g);
    } else {
        printf("%s SETUP-FAILED\n", q);
    }
    answer("capture.mem_free_async.then_mem_free", cuMemFree(p));
    cuStreamDestroy(s);
}

/* What the shim's exit-time releases meet: the driver may already have shut
 * down. Registered before cuInit, so it runs after any handler the driver
 * registers there; library destructors run later still. */
/* Legacy IPC and POSIX-fd shareable handles (issue 30): the shim's export
 * of VMM-backed memory rests on these answers. One process only: what a
 * second process sees is ipc_share's (the e2e suite, gpu-check's apps). */
static void ipc(CUdevice dev)
{
    const char *q = "ipc";
    CUmemAllocationProp prop = device_prop(dev);
    size_t gran = 0;
    SETUP(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUipcMemHandle h, h2;
    CUdeviceptr nat, opened = 0;
    SETUP(cuMemAlloc(&nat, 2 * gran));
    answer("ipc.get_native", cuIpcGetMemHandle(&h, nat));
    answer("ipc.get_native_interior", cuIpcGetMemHandle(&h2, nat + 256));
    CUresult r = cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    answer("ipc.open_own_handle", r);
    if (r == CUDA_SUCCESS)
        cuIpcCloseMemHandle(opened);
    memset(&h2, 0, sizeof h2);
    r = cuIpcOpenMemHandle(&opened, h2, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    answer("ipc.open_zero_handle", r);
    if (r == CUDA_SUCCESS)
        cuIpcCloseMemHandle(opened);
    answer("ipc.close_not_opened", cuIpcCloseMemHandle(nat));
    cuMemFree(nat);

    CUmemGenericAllocationHandle mh, ih;
    CUdeviceptr va;
    int fd = -1;
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    SETUP(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    SETUP(cuMemCreate(&mh, gran, &prop, 0));
    r = cuMemExportToShareableHandle(&fd, mh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    answer("ipc.export_fd_not_requested", r);
    if (r == CUDA_SUCCESS)
        close(fd);
    SETUP(cuMemMap(va, gran, 0, mh, 0));
    SETUP(cuMemSetAccess(va, gran, &acc, 1));
    answer("ipc.get_vmm", cuIpcGetMemHandle(&h, va));
    SETUP(cuMemUnmap(va, gran));
    SETUP(cuMemRelease(mh));

    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    r = cuMemCreate(&mh, gran, &prop, 0);
    answer("ipc.create_fd_type", r);
    if (r != CUDA_SUCCESS)
        return;
    r = cuMemExportToShareableHandle(&fd, mh, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    answer("ipc.export_fd", r);
    if (r == CUDA_SUCCESS) {
        r = cuMemImportFromShareableHandle(&ih, (void *)(intptr_t)fd,
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        answer("ipc.import_fd", r);
        if (r == CUDA_SUCCESS) {
            /* the same memory twice: written through one, read through the other */
            unsigned got = 0;
            SETUP(cuMemMap(va, gran, 0, mh, 0));
            SETUP(cuMemMap(va + gran, gran, 0, ih, 0));
            SETUP(cuMemSetAccess(va, 2 * gran, &acc, 1));
            SETUP(cuMemsetD32(va, 0x5eedf00du, gran / 4));
            SETUP(cuCtxSynchronize());
            SETUP(cuMemcpyDtoH(&got, va + gran + gran - 4, sizeof got));
            printf("ipc.import_same_memory %s\n", got == 0x5eedf00du ? "yes" : "no");
            SETUP(cuMemUnmap(va, gran));
            SETUP(cuMemUnmap(va + gran, gran));
            SETUP(cuMemRelease(ih));
        }
        close(fd);
    }
    SETUP(cuMemRelease(mh));
    SETUP(cuMemAddressFree(va, 2 * gran));
    answer("ipc.import_bad_fd", cuMemImportFromShareableHandle(&ih, (void *)(intptr_t)-1,
                                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
}

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

/* ---- stream capture in global mode, another thread calling ------------ */

/* The calls the shim makes itself (and the program's own cuMemAlloc and
 * cuMemFree), each made by a second thread while this one holds a
 * CU_STREAM_CAPTURE_MODE_GLOBAL capture (PyTorch's default): "RESULT
 * end=END" with END what cuStreamEndCapture then answered. cuda.h
 * prohibits "potentially unsafe API calls" there unless the calling thread
 * exchanged its mode to relaxed (cuThreadExchangeStreamCaptureMode): the
 * second set asks the same calls from a relaxed thread. */
struct cap_state {
    CUcontext ctx;
    CUdevice dev;
    CUstream side;               /* not capturing: the shim's own work goes there */
    CUevent ev, ev_new;          /* ev recorded on side before the capture */
    CUmemAllocationProp prop;
    size_t gran;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va, p;
    CUgraph g;
    CUgraphExec e;
};

enum cap_call {
    CAP_EVENT_CREATE, CAP_EVENT_RECORD, CAP_EVENT_QUERY, CAP_EVENT_SYNCHRONIZE,
    CAP_STREAM_SYNCHRONIZE, CAP_CTX_SYNCHRONIZE, CAP_ADDRESS_RESERVE, CAP_MEM_CREATE,
    CAP_MEM_MAP, CAP_MEM_SET_ACCESS, CAP_MEM_UNMAP, CAP_MEM_RELEASE, CAP_ADDRESS_FREE,
    CAP_GRAPH_INSTANTIATE, CAP_GRAPH_LAUNCH, CAP_MEM_ALLOC, CAP_MEM_FREE, CAP_MEM_ALLOC_2M,
    CAP_MEM_FREE_2M, CAP_N
};
static const char *const cap_names[CAP_N] = {
    "cuEventCreate", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuMemAddressReserve", "cuMemCreate",
    "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree",
    "cuGraphInstantiate", "cuGraphLaunch", "cuMemAlloc", "cuMemFree",
    /* sizes the shim serves with VMM: its answers must be the driver's too */
    "cuMemAlloc.2M", "cuMemFree.2M",
};

struct cap_job {
    struct cap_state *st;
    enum cap_call call;
    bool relaxed;
    CUresult r;
};

/* What each call needs that is not itself under test, made before the
 * capture begins. */
static CUresult cap_prepare(struct cap_state *st, enum cap_call c)
{
    CUresult r = CUDA_SUCCESS;
    CUmemAccessDesc acc = { .location = st->prop.location,
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    switch (c) {
    case CAP_MEM_MAP: case CAP_MEM_SET_ACCESS: case CAP_MEM_UNMAP: case CAP_MEM_RELEASE:
        r = cuMemCreate(&st->h, st->gran, &st->prop, 0);
        if (!r && c != CAP_MEM_RELEASE)
            r = cuMemAddressReserve(&st->va, st->gran, 0, 0, 0);
        if (!r && (c == CAP_MEM_SET_ACCESS || c == CAP_MEM_UNMAP))
            r = cuMemMap(st->va, st->gran, 0, st->h, 0);
        if (!r && c == CAP_MEM_UNMAP)
            r = cuMemSetAccess(st->va, st->gran, &acc, 1);
        break;
    case CAP_ADDRESS_FREE:
        r = cuMemAddressReserve(&st->va, st->gran, 0, 0, 0);
        break;
    case CAP_GRAPH_INSTANTIATE: case CAP_GRAPH_LAUNCH: {
        CUgraphNode n;
        r = one_node_graph(&st->g, &n);
        if (!r && c == CAP_GRAPH_LAUNCH)
            r = cuGraphInstantiateWithFlags(&st->e, st->g, 0);
        break;
    }
    case CAP_MEM_FREE:
        r = cuMemAlloc(&st->p, 4096);
        break;
    case CAP_MEM_FREE_2M:
        r = cuMemAlloc(&st->p, (size_t)2 << 20);
        break;
    default:
        break;
    }
    return r;
}

static CUresult cap_do(struct cap_state *st, enum cap_call c)
{
    CUmemAccessDesc acc = { .location = st->prop.location,
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    switch (c) {
    case CAP_EVENT_CREATE: return cuEventCreate(&st->ev_new, CU_EVENT_DISABLE_TIMING);
    case CAP_EVENT_RECORD: return cuEventRecord(st->ev, st->side);
    case CAP_EVENT_QUERY: return cuEventQuery(st->ev);
    case CAP_EVENT_SYNCHRONIZE: return cuEventSynchronize(st->ev);
    case CAP_STREAM_SYNCHRONIZE: return cuStreamSynchronize(st->side);
    case CAP_CTX_SYNCHRONIZE: return cuCtxSynchronize();
    case CAP_ADDRESS_RESERVE: return cuMemAddressReserve(&st->va, st->gran, 0, 0, 0);
    case CAP_MEM_CREATE: return cuMemCreate(&st->h, st->gran, &st->prop, 0);
    case CAP_MEM_MAP: return cuMemMap(st->va, st->gran, 0, st->h, 0);
    case CAP_MEM_SET_ACCESS: return cuMemSetAccess(st->va, st->gran, &acc, 1);
    case CAP_MEM_UNMAP: return cuMemUnmap(st->va, st->gran);
    case CAP_MEM_RELEASE: return cuMemRelease(st->h);
    case CAP_ADDRESS_FREE: return cuMemAddressFree(st->va, st->gran);
    case CAP_GRAPH_INSTANTIATE: return cuGraphInstantiateWithFlags(&st->e, st->g, 0);
    case CAP_GRAPH_LAUNCH: return cuGraphLaunch(st->e, st->side);
    case CAP_MEM_ALLOC: return cuMemAlloc(&st->p, 4096);
    case CAP_MEM_FREE: return cuMemFree(st->p);
    case CAP_MEM_ALLOC_2M: return cuMemAlloc(&st->p, (size_t)2 << 20);
    case CAP_MEM_FREE_2M: return cuMemFree(st->p);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Undoes whatever cap_prepare and cap_do (if it succeeded) left. */
static void cap_cleanup(struct cap_state *st, enum cap_call c, CUresult did)
{
    cuStreamSynchronize(st->side);
    switch (c) {
    case CAP_EVENT_CREATE:
        if (!did)
            cuEventDestroy(st->ev_new);
        break;
    case CAP_ADDRESS_RESERVE:
        if (!did)
            cuMemAddressFree(st->va, st->gran);
        break;
    case CAP_MEM_CREATE:
        if (!did)
            cuMemRelease(st->h);
        break;
    case CAP_MEM_MAP: case CAP_MEM_SET_ACCESS: case CAP_MEM_UNMAP:
        cuMemUnmap(st->va, st->gran);
        cuMemRelease(st->h);
        cuMemAddressFree(st->va, st->gran);
        break;
    case CAP_MEM_RELEASE:
        if (did)
            cuMemRelease(st->h);
        break;
    case CAP_ADDRESS_FREE:
        if (did)
            cuMemAddressFree(st->va, st->gran);
        break;
    case CAP_GRAPH_INSTANTIATE: case CAP_GRAPH_LAUNCH:
        if (!did || c == CAP_GRAPH_LAUNCH) {
            cuCtxSynchronize();
            cuGraphExecDestroy(st->e);
        }
        cuGraphDestroy(st->g);
        break;
    case CAP_MEM_ALLOC: case CAP_MEM_ALLOC_2M:
        if (!did)
            cuMemFree(st->p);
        break;
    case CAP_MEM_FREE: case CAP_MEM_FREE_2M:
        if (did)
            cuMemFree(st->p);
        break;
    default:
        break;
    }
}

static void *cap_thread(void *arg)
{
    struct cap_job *j = arg;
    j->r = cuCtxSetCurrent(j->st->ctx);
    if (j->r != CUDA_SUCCESS)
        return NULL;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (j->relaxed && (j->r = cuThreadExchangeStreamCaptureMode(&mode)) != CUDA_SUCCESS)
        return NULL;
    j->r = cap_do(j->st, j->call);
    if (j->relaxed)
        cuThreadExchangeStreamCaptureMode(&mode);
    return NULL;
}

static void capture_global(CUdevice dev)
{
    const char *q = "capture_global";
    struct cap_state st;
    memset(&st, 0, sizeof st);
    st.dev = dev;
    st.prop = device_prop(dev);
    SETUP(cuCtxGetCurrent(&st.ctx));
    SETUP(cuMemGetAllocationGranularity(&st.gran, &st.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    SETUP(cuStreamCreate(&st.side, CU_STREAM_NON_BLOCKING));
    SETUP(cuEventCreate(&st.ev, CU_EVENT_DISABLE_TIMING));
    SETUP(cuEventRecord(st.ev, st.side));
    SETUP(cuStreamSynchronize(st.side));
    CUstream cs;
    SETUP(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    for (int relaxed = 0; relaxed < 2; relaxed++) {
        for (int c = 0; c < CAP_N; c++) {
            char name[128];
            snprintf(name, sizeof name, "%s.%s.%s", q, relaxed ? "relaxed_thread" : "other_thread",
                     cap_names[c]);
            if (cap_prepare(&st, (enum cap_call)c) != CUDA_SUCCESS) {
                printf("%s SETUP-FAILED\n", name);
                continue;
            }
            CUgraph g = NULL;
            struct cap_job j = { &st, (enum cap_call)c, relaxed != 0, CUDA_ERROR_UNKNOWN };
            pthread_t th;
            CUresult b = cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL);
            if (b == CUDA_SUCCESS)
                b = cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 0, cs, args, NULL);
            if (b != CUDA_SUCCESS || pthread_create(&th, NULL, cap_thread, &j) != 0) {
                printf("%s SETUP-FAILED\n", name);
                cuStreamEndCapture(cs, &g);
                if (g)
                    cuGraphDestroy(g);
                cap_cleanup(&st, (enum cap_call)c, CUDA_ERROR_UNKNOWN);
                continue;
            }
            pthread_join(th, NULL);
            CUresult end = cuStreamEndCapture(cs, &g);
            printf("%s %s end=%s\n", name, vr_err_name(j.r), vr_err_name(end));
            if (g)
                cuGraphDestroy(g);
            cap_cleanup(&st, (enum cap_call)c, j.r);
        }
    }
    cuStreamDestroy(cs);
    cuEventDestroy(st.ev);
    cuStreamDestroy(st.side);
}

/* ---- contexts: events and streams of another context ------------------ */

static void other_context(CUdevice dev)
{
    const char *q = "other_context";
    CUcontext a, b, got;
    CUstream sb, sa, s2;
    CUevent ea;
    SETUP(cuCtxGetCurrent(&a));
    SETUP(cuCtxCreate(&b, NULL, 0, dev)); /* made current */
    SETUP(cuStreamCreate(&sb, 0));
    SETUP(cuCtxPopCurrent(&got));
    SETUP(cuStreamCreate(&sa, 0));
    SETUP(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    answer("event_record.stream_of_other_context", cuEventRecord(ea, sb));
    SETUP(cuEventRecord(ea, sa));
    answer("stream_wait_event.event_of_other_context", cuStreamWaitEvent(sb, ea, 0));
    /* 2 MiB: VMM-backed under the shim, whose stream-ordered free records
     * an event of its own on that stream */
    CUdeviceptr big;
    SETUP(cuMemAlloc(&big, (size_t)2 << 20));
    answer("mem_free_async.stream_of_other_context", cuMemFreeAsync(big, sb));
    SETUP(cuStreamSynchronize(sb));
    CUresult r = cuStreamGetCtx(sb, &got);
    printf("stream_get_ctx.created %s%s\n", vr_err_name(r),
           r == CUDA_SUCCESS ? (got == b ? " its_context" : " other") : "");
    r = cuStreamGetCtx(NULL, &got);
    printf("stream_get_ctx.null %s%s\n", vr_err_name(r),
           r == CUDA_SUCCESS ? (got == a ? " current" : " other") : "");
    r = cuStreamGetCtx(CU_STREAM_PER_THREAD, &got);
    printf("stream_get_ctx.per_thread %s%s\n", vr_err_name(r),
           r == CUDA_SUCCESS ? (got == a ? " current" : " other") : "");
    unsigned long long ids[6] = { 0 };
    bool ok = cuStreamGetId(sa, &ids[0]) == CUDA_SUCCESS &&
              cuStreamGetId(sb, &ids[1]) == CUDA_SUCCESS &&
              cuStreamGetId(CU_STREAM_LEGACY, &ids[2]) == CUDA_SUCCESS &&
              cuStreamGetId(CU_STREAM_PER_THREAD, &ids[3]) == CUDA_SUCCESS &&
              cuStreamGetId(NULL, &ids[4]) == CUDA_SUCCESS;
    /* a stream destroyed, then a new one: its id is not the old one's */
    ok = ok && cuStreamCreate(&s2, 0) == CUDA_SUCCESS;
    unsigned long long old = 0;
    ok = ok && cuStreamGetId(s2, &old) == CUDA_SUCCESS && cuStreamDestroy(s2) == CUDA_SUCCESS &&
         cuStreamCreate(&s2, 0) == CUDA_SUCCESS && cuStreamGetId(s2, &ids[5]) == CUDA_SUCCESS;
    if (ok)
        cuStreamDestroy(s2);
    bool distinct = ok;
    for (int i = 0; i < 6 && ok; i++)
        for (int k = i + 1; k < 6; k++)
            distinct = distinct && (ids[i] != ids[k] || (i == 2 && k == 4));
    printf("stream_get_id %s%s%s\n", ok ? "CUDA_SUCCESS" : "FAILED",
           ok ? (distinct && ids[5] != old ? " distinct" : " reused") : "",
           ok ? (ids[2] == ids[4] ? " null=legacy" : " null!=legacy") : "");
    cuCtxSynchronize();
    cuEventDestroy(ea);
    cuStreamDestroy(sa);
    cuStreamDestroy(sb);
    cuCtxDestroy(b);
}

/* ---- what goes with a context ------------------------------------------ */

static void context_memory(CUdevice dev)
{
    const char *q = "ctx_destroy";
    CUcontext b;
    CUdeviceptr p, base;
    size_t size, gran;
    CUmemAllocationProp prop = device_prop(dev);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    SETUP(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    SETUP(cuCtxCreate(&b, NULL, 0, dev));
    SETUP(cuMemAlloc(&p, 4096));
    SETUP(cuMemCreate(&h, gran, &prop, 0));
    SETUP(cuMemAddressReserve(&va, gran, 0, 0, 0));
    SETUP(cuMemMap(va, gran, 0, h, 0));
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    SETUP(cuMemSetAccess(va, gran, &acc, 1));
    SETUP(cuCtxDestroy(b)); /* popped: the primary context is current again */
    answer("ctx_destroy.mem_get_address_range", cuMemGetAddressRange(&base, &size, p));
    answer("ctx_destroy.mem_free", cuMemFree(p));
    unsigned char byte = 7;
    answer("ctx_destroy.vmm_copy", cuMemcpyHtoD(va, &byte, 1));
    /* A copy from pageable memory may return before its DMA lands (cuda.h's
     * \note_sync for cuMemcpyHtoD): unmapped under it, the copy faulted
     * on an H200 and left the primary context CUDA_ERROR_LAUNCH_FAILED
     * (sticky), so the probe died at its next check. */
    cuCtxSynchronize();
    cuMemUnmap(va, gran);
    cuMemRelease(h);
    cuMemAddressFree(va, gran);
}

/* Graph memory nodes (issue 32, item 4): what cuda.h leaves open and
 * simcuda assumes (docs/design.md, "Graph memory nodes"). A graph of
 * alloc -> fill -> free on one granule. */
static CUresult mem_graph(CUgraph *g, CUdeviceptr *p)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.poolProps.location.id = 0;
    a.bytesize = (size_t)2 << 20;
    CUgraphNode na, nf, nfree;
    CUresult r = cuGraphCreate(g, 0);
    if (r == CUDA_SUCCESS && (r = cuGraphAddMemAllocNode(&na, *g, NULL, 0, &a)) == CUDA_SUCCESS) {
        *p = a.dptr;
        CUDA_KERNEL_NODE_PARAMS k = kp;
        static void *margs[3];
        static CUdeviceptr mp;
        mp = a.dptr;
        margs[0] = &mp;
        margs[1] = &value;
        margs[2] = &count;
        k.kernelParams = margs;
        if ((r = cuGraphAddKernelNode(&nf, *g, &na, 1, &k)) == CUDA_SUCCESS)
            r = cuGraphAddMemFreeNode(&nfree, *g, &nf, 1, a.dptr);
    }
    return r;
}

static const char *zero_or_not(cuuint64_t v)
{
    return v ? "nonzero" : "zero";
}

static void graph_mem(CUdevice dev)
{
    const char *q = "graph_mem";
    CUgraph g, g2, c = NULL;
    CUdeviceptr p, p2;
    CUgraphExec x, y = NULL;
    SETUP(mem_graph(&g, &p));
    SETUP(mem_graph(&g2, &p2));
    SETUP(cuGraphInstantiateWithFlags(&x, g, 0));
    answer("graph_mem.instantiate_twice", cuGraphInstantiateWithFlags(&y, g, 0));
    if (y)
        cuGraphExecDestroy(y);
    answer("graph_mem.clone", cuGraphClone(&c, g));
    if (c)
        cuGraphDestroy(c);
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult r = cuGraphExecUpdate(x, g2, &info);
    printf("graph_mem.update_from_other_graph %s result=%d\n", vr_err_name(r), (int)info.result);
    r = cuGraphExecUpdate(x, g, &info);
    printf("graph_mem.update_from_own_graph %s result=%d\n", vr_err_name(r), (int)info.result);
    cuuint64_t used = 0, resv = 0, high = 0, zero = 0;
    SETUP(cuGraphLaunch(x, NULL));
    SETUP(cuCtxSynchronize());
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &resv);
    printf("graph_mem.after_launch used=%s reserved=%s\n", zero_or_not(used), zero_or_not(resv));
    r = cuDeviceSetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &high);
    printf("graph_mem.reset_high_watermark %s high=%s\n", vr_err_name(r),
           high == used ? "current" : high ? "other" : "zero");
    cuGraphExecDestroy(x);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &resv);
    printf("graph_mem.after_exec_destroy used=%s reserved=%s\n", zero_or_not(used),
           zero_or_not(resv));
    cuGraphDestroy(g);
    cuGraphDestroy(g2);
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &resv);
    printf("graph_mem.after_graph_destroy reserved=%s\n", zero_or_not(resv));
    answer("graph_mem.trim", cuDeviceGraphMemTrim(dev));
    cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &resv);
    printf("graph_mem.after_trim reserved=%s\n", zero_or_not(resv));
}

/* ---- cond.*: conditional nodes, simcuda's assumptions (docs/design.md) ---- */

/* set_zero(h): cudaGraphSetConditional(h, 0); bump(p): *p += 1. The call is
 * the one nvcc -ptx writes for the device runtime's function. */
static const char k_cond_ptx[] =
    ".version 8.0\n.target sm_80\n.address_size 64\n"
    ".extern .func cudaGraphSetConditional\n(\n"
    "\t.param .b64 cudaGraphSetConditional_param_0,\n"
    "\t.param .b32 cudaGraphSetConditional_param_1\n)\n;\n"
    ".visible .entry set_zero(\n\t.param .u64 set_zero_h\n)\n{\n"
    "\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [set_zero_h];\n"
    "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0+0], %rd1;\n"
    "\t.param .b32 param1;\n\tst.param.b32 [param1+0], 0;\n"
    "\tcall.uni cudaGraphSetConditional, (param0, param1);\n\t}\n\tret;\n}\n"
    ".visible .entry bump(\n\t.param .u64 bump_p\n)\n{\n"
    "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [bump_p];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tld.global.u32 %r1, [%rd2];\n\tadd.s32 %r2, %r1, 1;\n\tst.global.u32 [%rd2], %r2;\n"
    "\tret;\n}\n";

/* simcuda runs cudaGraphSetConditional as a builtin; a GPU's driver needs
 * the device runtime library linked in (CUDA_HOME, else /usr/local/cuda). */
static CUresult cond_module(CUmodule *m)
{
    if (cuModuleLoadData(m, k_cond_ptx) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    char lib[4096];
    const char *home = getenv("CUDA_HOME");
    snprintf(lib, sizeof lib, "%s/lib64/libcudadevrt.a", home ? home : "/usr/local/cuda");
    CUlinkState ls;
    CUresult r = cuLinkCreate(0, NULL, NULL, &ls);
    if (r != CUDA_SUCCESS)
        return r;
    void *cubin;
    size_t size;
    if ((r = cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)k_cond_ptx, sizeof k_cond_ptx, "cond",
                           0, NULL, NULL)) == CUDA_SUCCESS &&
        (r = cuLinkAddFile(ls, CU_JIT_INPUT_LIBRARY, lib, 0, NULL, NULL)) == CUDA_SUCCESS &&
        (r = cuLinkComplete(ls, &cubin, &size)) == CUDA_SUCCESS)
        r = cuModuleLoadData(m, cubin);
    cuLinkDestroy(ls);
    return r;
}

/* A graph of one IF node on a new handle; *body receives its body. */
static CUresult cond_graph(CUgraph *g, CUgraphConditionalHandle *h, unsigned dflt,
                           unsigned flags, CUgraph *body)
{
    CUcontext ctx;
    CUresult r = cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS || (r = cuGraphCreate(g, 0)) != CUDA_SUCCESS)
        return r;
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    p.conditional.type = CU_GRAPH_COND_TYPE_IF;
    p.conditional.size = 1;
    p.conditional.ctx = ctx;
    CUgraphNode n;
    if ((r = cuGraphConditionalHandleCreate(h, *g, ctx, dflt, flags)) != CUDA_SUCCESS ||
        (p.conditional.handle = *h,
         (r = cuGraphAddNode(&n, *g, NULL, NULL, 0, &p)) != CUDA_SUCCESS)) {
        cuGraphDestroy(*g);
        return r;
    }
    *body = p.conditional.phGraph_out[0];
    return CUDA_SUCCESS;
}

static void no_op(void *user)
{
    (void)user;
}

/* How often an IF body ran in three launches when its first kernel clears
 * the handle: 1 when the value a kernel set stays (no ASSIGN_DEFAULT), 3
 * when the default (1) is applied at each launch. */
static CUresult cond_runs(CUmodule m, unsigned flags, unsigned *runs)
{
    CUfunction set, bump;
    CUgraph g, body;
    CUgraphConditionalHandle h;
    CUdeviceptr counter;
    CUresult r;
    if ((r = cuModuleGetFunction(&set, m, "set_zero")) != CUDA_SUCCESS ||
        (r = cuModuleGetFunction(&bump, m, "bump")) != CUDA_SUCCESS ||
        (r = cuMemAlloc(&counter, 4)) != CUDA_SUCCESS)
        return r;
    if ((r = cuMemsetD32(counter, 0, 1)) != CUDA_SUCCESS ||
        (r = cond_graph(&g, &h, 1, flags, &body)) != CUDA_SUCCESS) {
        cuMemFree(counter);
        return r;
    }
    void *set_args[] = {&h}, *bump_args[] = {&counter};
    CUDA_KERNEL_NODE_PARAMS k = {.func = set, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                 .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                 .kernelParams = set_args};
    CUgraphNode ns, nb;
    CUgraphExec x;
    if ((r = cuGraphAddKernelNode(&ns, body, NULL, 0, &k)) == CUDA_SUCCESS) {
        k.func = bump;
        k.kernelParams = bump_args;
        r = cuGraphAddKernelNode(&nb, body, &ns, 1, &k);
    }
    if (r == CUDA_SUCCESS && (r = cuGraphInstantiateWithFlags(&x, g, 0)) == CUDA_SUCCESS) {
        for (int i = 0; i < 3 && r == CUDA_SUCCESS; i++)
            r = cuGraphLaunch(x, NULL);
        if (r == CUDA_SUCCESS && (r = cuCtxSynchronize()) == CUDA_SUCCESS)
            r = cuMemcpyDtoH(runs, counter, 4);
        cuGraphExecDestroy(x);
    }
    cuGraphDestroy(g);
    cuMemFree(counter);
    return r;
}

static void cond_nodes(void)
{
    const char *q = "cond";
    CUgraph g, body, c = NULL;
    CUgraphConditionalHandle h;
    CUgraphExec x, y = NULL;
    CUgraphNode n;
    SETUP(cond_graph(&g, &h, 0, 0, &body));
    SETUP(cuGraphAddKernelNode(&n, body, NULL, 0, &kp));
    SETUP(cuGraphInstantiateWithFlags(&x, g, 0));
    answer("cond.instantiate_twice", cuGraphInstantiateWithFlags(&y, g, 0));
    if (y)
        cuGraphExecDestroy(y);
    answer("cond.clone", cuGraphClone(&c, g));
    if (c)
        cuGraphDestroy(c);
    cuGraphExecDestroy(x);
    cuGraphDestroy(g);

    SETUP(cond_graph(&g, &h, 0, 0, &body));
    CUDA_HOST_NODE_PARAMS hp = {.fn = no_op, .userData = NULL};
    CUresult r = cuGraphAddHostNode(&n, body, NULL, 0, &hp);
    if (r == CUDA_SUCCESS) {
        x = NULL;
        r = cuGraphInstantiateWithFlags(&x, g, 0);
        if (r == CUDA_SUCCESS)
            cuGraphExecDestroy(x);
        printf("cond.body_host_node add=CUDA_SUCCESS instantiate=%s\n", vr_err_name(r));
    } else {
        printf("cond.body_host_node add=%s\n", vr_err_name(r));
    }
    cuGraphDestroy(g);

    q = "cond.body_runs";
    CUmodule m;
    SETUP(cond_module(&m));
    unsigned kept = 0, reset = 0;
    CUresult r0 = cond_runs(m, 0, &kept), r1 = cond_runs(m, CU_GRAPH_COND_ASSIGN_DEFAULT, &reset);
    printf("cond.body_runs.without_assign_default %s runs=%u\n", vr_err_name(r0), kept);
    printf("cond.body_runs.with_assign_default %s runs=%u\n", vr_err_name(r1), reset);
    cuModuleUnload(m);
}

/* Last: it takes the primary context's memory (and, on a GPU, its modules). */
static void primary_reset(CUdevice dev)
{
    const char *q = "primary_ctx_reset";
    CUdeviceptr p, base;
    size_t size;
    SETUP(cuMemAlloc(&p, 4096));
    answer(q, cuDevicePrimaryCtxReset(dev));
    CUcontext ctx;
    SETUP(cuDevicePrimaryCtxRetain(&ctx, dev));
    SETUP(cuCtxSetCurrent(ctx));
    answer("primary_ctx_reset.mem_get_address_range", cuMemGetAddressRange(&base, &size, p));
    cuDevicePrimaryCtxRelease(dev);
}

int main(int argc, char **argv)
{
    /* Whole lines even into a file: the shim's exit summary on stderr
     * lands between answers, never inside one (gpu-check drops its line). */
    setvbuf(stdout, NULL, _IOLBF, 0);
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
    ipc(dev);
    capture_global(dev);
    zero_byte_capture();
    free_in_capture();
    graph_mem(dev);
    cond_nodes();
    other_context(dev);
    context_memory(dev);
    keep_for_exit(dev);
    CK(cuCtxSynchronize());
    cuMemFree(buf); /* an answer above may have freed it already */
    CK(cuModuleUnload(mod));
    primary_reset(dev);
    return 0;
}
