/* scenario: the graph-replay engine shared by graph_linked, graph_procaddr
 * and graph_dlsym.
 *
 * The three programs differ only in how they obtain the driver's entry
 * points (linked, cuGetProcAddress, dlsym); the engine calls the driver only
 * through the table below, so the e2e suites can compare the same workload
 * reached three ways with and without the shim.
 */
#ifndef VR_SCENARIO_H
#define VR_SCENARIO_H

#include <stddef.h>

#include <cuda.h>

/* Members are named after the exported symbol they hold, minus "cu"; the
 * versioned exports (_v2, v1 SetParams struct) are spelled out because the
 * project builds with __CUDA_API_VERSION_INTERNAL. */
struct vr_drv {
    CUresult (*GetErrorName)(CUresult err, const char **name);
    CUresult (*Init)(unsigned flags);
    CUresult (*DeviceGet)(CUdevice *dev, int ordinal);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
    CUresult (*DevicePrimaryCtxRelease_v2)(CUdevice dev);
    CUresult (*CtxSetCurrent)(CUcontext ctx);
    CUresult (*ModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*ModuleUnload)(CUmodule mod);
    CUresult (*MemAlloc_v2)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree_v2)(CUdeviceptr ptr);
    CUresult (*MemsetD32Async)(CUdeviceptr dst, unsigned value, size_t n, CUstream s);
    CUresult (*MemcpyDtoH_v2)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*StreamCreate)(CUstream *s, unsigned flags);
    CUresult (*StreamDestroy_v2)(CUstream s);
    CUresult (*StreamSynchronize)(CUstream s);
    CUresult (*StreamBeginCapture_v2)(CUstream s, CUstreamCaptureMode mode);
    CUresult (*StreamEndCapture)(CUstream s, CUgraph *graph);
    CUresult (*LaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                             CUstream s, void **params, void **extra);
    CUresult (*GraphCreate)(CUgraph *graph, unsigned flags);
    CUresult (*GraphDestroy)(CUgraph graph);
    CUresult (*GraphAddKernelNode_v2)(CUgraphNode *node, CUgraph graph,
                                      const CUgraphNode *deps, size_t ndeps,
                                      const CUDA_KERNEL_NODE_PARAMS *p);
    CUresult (*GraphGetNodes)(CUgraph graph, CUgraphNode *nodes, size_t *n);
    CUresult (*GraphNodeGetType)(CUgraphNode node, CUgraphNodeType *type);
    CUresult (*GraphKernelNodeGetParams_v2)(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p);
    CUresult (*GraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph graph,
                                          unsigned long long flags);
    CUresult (*GraphExecDestroy)(CUgraphExec exec);
    /* cuGraphLaunch, or cuGraphLaunch_ptsz where the program resolved it so */
    CUresult (*GraphLaunch)(CUgraphExec exec, CUstream s);
    CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                             const CUDA_KERNEL_NODE_PARAMS_v1 *p);
    CUresult (*GraphExecKernelNodeSetParams_v2)(CUgraphExec exec, CUgraphNode node,
                                                const CUDA_KERNEL_NODE_PARAMS *p);
    CUresult (*GraphExecNodeSetParams)(CUgraphExec exec, CUgraphNode node,
                                       CUgraphNodeParams *p);
    CUresult (*GraphExecUpdate_v2)(CUgraphExec exec, CUgraph graph,
                                   CUgraphExecUpdateResultInfo *info);
    CUresult (*GraphInstantiateWithParams)(CUgraphExec *exec, CUgraph graph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *params);
};

/* How the dlsym and cuGetProcAddress programs find each member: the exported
 * symbol, and the base name, version and flags the CUDA runtime would ask
 * cuGetProcAddress_v2 for. */
struct vr_sym {
    size_t off;              /* offsetof(struct vr_drv, member) */
    const char *sym;
    const char *proc;
    int version;
    unsigned long long flags;
};

extern const struct vr_sym vr_syms[];
extern const size_t vr_nsyms;

/* Stores a pointer obtained from dlsym/cuGetProcAddress into the member at
 * `off` (object and function pointers have one size on every target the
 * driver API exists for). */
void vr_drv_put(struct vr_drv *drv, size_t off, void *fn);

/* Parses the options, runs the scenario, prints the final line. Returns the
 * process exit status. */
int vr_scenario_main(const char *prog, int argc, char **argv, const struct vr_drv *drv);

#endif
