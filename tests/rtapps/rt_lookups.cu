// rt_lookups: the smallest program that uses what a graph-replaying CUDA
// runtime program uses (cudaMalloc, a kernel, stream capture,
// cudaGraphExecKernelNodeSetParams, cudaGraphLaunch). scripts/
// record-cudart-lookups links it with the toolkit's STATIC runtime and runs it
// on simcuda with SIMCUDA_PROC_LOG: NVIDIA's runtime resolves its driver entry
// points first, then stops at its first call (it needs driver internals
// simcuda does not have). The recorded requests are the point; the exit
// status is not.
#include <cuda_runtime.h>

#include <cstdio>

#include "vr_kernels.cu"

#define CK(call)                                                                     \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            std::fprintf(stderr, "rt_lookups: %s: %s\n", #call, cudaGetErrorName(e_)); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main()
{
    const unsigned long long n = 1024;
    float *a, *b;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    CK(cudaMalloc((void **)&a, n * sizeof(float)));
    CK(cudaMalloc((void **)&b, n * sizeof(float)));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    vr_fill_f32<<<4, 128, 0, s>>>(a, 1.0f, n);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&x, g, 0));
    size_t count = 1;
    cudaGraphNode_t node;
    CK(cudaGraphGetNodes(g, &node, &count));
    float v = 2.0f;
    unsigned long long len = n;
    void *args[] = { &b, &v, &len };
    cudaKernelNodeParams p = {};
    p.func = (void *)vr_fill_f32;
    p.gridDim = dim3(4);
    p.blockDim = dim3(128);
    p.kernelParams = args;
    CK(cudaGraphExecKernelNodeSetParams(x, node, &p));
    CK(cudaGraphLaunch(x, s));
    CK(cudaStreamSynchronize(s));
    std::printf("rt_lookups: ok\n");
    return 0;
}
