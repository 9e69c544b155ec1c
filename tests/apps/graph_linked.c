/* graph_linked: the scenario with the driver's entry points taken straight
 * from the link (NEEDED libcuda.so.1), as a program written against the
 * driver API is. */
#include "scenario.h"

int main(int argc, char **argv)
{
    static const struct vr_drv d = {
        .GetErrorName = cuGetErrorName,
        .Init = cuInit,
        .DeviceGet = cuDeviceGet,
        .DevicePrimaryCtxRetain = cuDevicePrimaryCtxRetain,
        .DevicePrimaryCtxRelease_v2 = cuDevicePrimaryCtxRelease_v2,
        .CtxSetCurrent = cuCtxSetCurrent,
        .ModuleLoadData = cuModuleLoadData,
        .ModuleGetFunction = cuModuleGetFunction,
        .ModuleUnload = cuModuleUnload,
        .MemAlloc_v2 = cuMemAlloc_v2,
        .MemFree_v2 = cuMemFree_v2,
        .MemsetD32Async = cuMemsetD32Async,
        .MemcpyDtoH_v2 = cuMemcpyDtoH_v2,
        .StreamCreate = cuStreamCreate,
        .StreamDestroy_v2 = cuStreamDestroy_v2,
        .StreamSynchronize = cuStreamSynchronize,
        .StreamBeginCapture_v2 = cuStreamBeginCapture_v2,
        .StreamEndCapture = cuStreamEndCapture,
        .LaunchKernel = cuLaunchKernel,
        .GraphCreate = cuGraphCreate,
        .GraphDestroy = cuGraphDestroy,
        .GraphAddKernelNode_v2 = cuGraphAddKernelNode_v2,
        .GraphGetNodes = cuGraphGetNodes,
        .GraphNodeGetType = cuGraphNodeGetType,
        .GraphKernelNodeGetParams_v2 = cuGraphKernelNodeGetParams_v2,
        .GraphInstantiateWithFlags = cuGraphInstantiateWithFlags,
        .GraphExecDestroy = cuGraphExecDestroy,
        .GraphLaunch = cuGraphLaunch,
        .GraphExecKernelNodeSetParams = cuGraphExecKernelNodeSetParams,
        .GraphExecKernelNodeSetParams_v2 = cuGraphExecKernelNodeSetParams_v2,
        .GraphExecNodeSetParams = cuGraphExecNodeSetParams,
        .GraphExecUpdate_v2 = cuGraphExecUpdate_v2,
        .GraphInstantiateWithParams = cuGraphInstantiateWithParams,
    };
    return vr_scenario_main("graph_linked", argc, argv, &d);
}
