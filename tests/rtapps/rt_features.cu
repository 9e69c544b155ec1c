// rt_features: the runtime calls real graph programs make besides kernel
// nodes, in one program whose result a host reference checks:
//   - device properties size the launch (cudaGetDeviceProperties);
//   - pinned host memory (cudaHostAlloc, cudaMallocHost, cudaFreeHost) takes
//     the input in and the result out with async copies;
//   - the kernels' attributes are read and the dynamic shared memory limit
//     set (cudaFuncGetAttributes, cudaFuncSetAttribute), and a launch asks
//     for dynamic shared memory (cudaLaunchKernel with sharedMem > 0);
//   - a graph of a memset node, a memcpy node, kernel nodes and a host node,
//     whose kernel nodes swap two buffers every step
//     (cudaGraphExecKernelNodeSetParams) before each launch;
//   - a host function on the stream (cudaLaunchHostFunc), events, and the
//     error a bad call leaves (cudaGetLastError clears it).
//
//   rt_features [--steps S] [--elems E] [--out FILE]
//
// Output: see rt_common.h. Exit 3 when the result differs from the host
// reference.
#include "rt_common.h"

#include <atomic>
#include <cmath>

static std::atomic<int> host_calls{0};

static void CUDART_CB count_call(void *arg)
{
    host_calls.fetch_add(*static_cast<int *>(arg));
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long steps = 12, elems = 1000;
    rt_options("rt_features", argc, argv, {{"--out", &out}, {"--steps", &steps},
                                           {"--elems", &elems}});
    const size_t bytes = (size_t)2 << 20;
    if (elems * 4 > bytes) {
        std::fprintf(stderr, "rt_features: --elems too large\n");
        return 2;
    }

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.warpSize != 32 || prop.maxThreadsPerBlock < 128 || prop.multiProcessorCount < 1 ||
        prop.totalGlobalMem == 0 || !prop.name[0]) {
        std::fprintf(stderr, "rt_features: implausible device properties\n");
        return 1;
    }
    const unsigned block = 128;
    const unsigned grid = (unsigned)((elems + block - 1) / block);

    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, (const void *)vr_axpy_f32));
    if (fa.maxThreadsPerBlock < (int)block) {
        std::fprintf(stderr, "rt_features: kernel allows %d threads\n", fa.maxThreadsPerBlock);
        return 1;
    }
    CK(cudaFuncSetAttribute((const void *)vr_scale_f32, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            4096));
    CK(cudaFuncGetAttributes(&fa, (const void *)vr_scale_f32));
    if (fa.maxDynamicSharedSizeBytes != 4096) {
        std::fprintf(stderr, "rt_features: dynamic shared limit reads %d\n",
                     fa.maxDynamicSharedSizeBytes);
        return 1;
    }
    // A bad call fails with the runtime's error and leaves it as the last one.
    if (cudaFuncSetAttribute((const void *)vr_scale_f32,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, -1) == cudaSuccess ||
        cudaGetLastError() == cudaSuccess || cudaGetLastError() != cudaSuccess) {
        std::fprintf(stderr, "rt_features: a bad attribute was accepted or its error kept\n");
        return 1;
    }

    float *pin_in, *pin_out;
    CK(cudaHostAlloc((void **)&pin_in, elems * 4, cudaHostAllocPortable));
    CK(cudaMallocHost((void **)&pin_out, elems * 4 * 3));
    for (unsigned long i = 0; i < elems; i++)
        pin_in[i] = 0.001f * (float)(i % 97);

    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    float *in, *p[2], *tmp;
    CK(cudaMalloc((void **)&in, bytes));
    CK(cudaMalloc((void **)&p[0], bytes));
    CK(cudaMalloc((void **)&p[1], bytes));
    CK(cudaMalloc((void **)&tmp, bytes));
    CK(cudaMemcpyAsync(in, pin_in, elems * 4, cudaMemcpyHostToDevice, st));
    // p[0] = 2 * in, launched with dynamic shared memory the kernel does not use.
    {
        float s = 2.0f;
        unsigned long long n = elems;
        float *o = p[0], *a = in;
        void *kp[] = {&o, &a, &s, &n};
        CK(cudaLaunchKernel((const void *)vr_scale_f32, dim3(grid), dim3(block), kp, 1024, st));
    }
    CK(cudaMemsetAsync(p[1], 0, elems * 4, st));

    // The step's graph: tmp = 0 (memset node); tmp += 1.0 * in (kernel);
    // dst = tmp + src (kernel); a copy of p[1] into tmp (memcpy node); a
    // host node counting the launches.
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n_set, n_axpy, n_add, n_copy, n_host;
    cudaMemsetParams ms = {};
    ms.dst = tmp;
    ms.value = 0;
    ms.elementSize = 4;
    ms.width = elems;
    ms.height = 1;
    CK(cudaGraphAddMemsetNode(&n_set, g, nullptr, 0, &ms));
    unsigned long long n = elems;
    float one = 1.0f;
    float *ax_y = tmp, *ax_x = in;
    void *kp_axpy[] = {&ax_y, &ax_x, &one, &n};
    cudaKernelNodeParams kaxpy = {};
    kaxpy.func = (void *)vr_axpy_f32;
    kaxpy.gridDim = dim3(grid);
    kaxpy.blockDim = dim3(block);
    kaxpy.kernelParams = kp_axpy;
    CK(cudaGraphAddKernelNode(&n_axpy, g, &n_set, 1, &kaxpy));
    float *add_o = p[1], *add_a = tmp, *add_b = p[0];
    void *kp_add[] = {&add_o, &add_a, &add_b, &n};
    cudaKernelNodeParams kadd = {};
    kadd.func = (void *)vr_add_f32;
    kadd.gridDim = dim3(grid);
    kadd.blockDim = dim3(block);
    kadd.kernelParams = kp_add;
    CK(cudaGraphAddKernelNode(&n_add, g, &n_axpy, 1, &kadd));
    CK(cudaGraphAddMemcpyNode1D(&n_copy, g, &n_add, 1, tmp, p[1], elems * 4,
                                cudaMemcpyDeviceToDevice));
    int one_call = 1;
    cudaHostNodeParams hp = {count_call, &one_call};
    CK(cudaGraphAddHostNode(&n_host, g, &n_copy, 1, &hp));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g, 0));

    cudaEvent_t done;
    CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long step = 0; step < steps; step++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        // Step s reads p[s%2] and writes p[(s+1)%2].
        add_o = p[(step + 1) % 2];
        add_b = p[step % 2];
        CK(cudaGraphExecKernelNodeSetParams(exec, n_add, &kadd));
        CK(cudaGraphExecKernelNodeSetParams(exec, n_axpy, &kaxpy));
        setparams += 2;
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    int two_calls = 2;
    CK(cudaLaunchHostFunc(st, count_call, &two_calls));
    CK(cudaEventRecord(done, st));
    CK(cudaEventSynchronize(done));
    if (cudaEventQuery(done) != cudaSuccess) {
        std::fprintf(stderr, "rt_features: event not complete after its synchronize\n");
        return 1;
    }
    CK(cudaMemcpyAsync(pin_out, p[steps % 2], elems * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(pin_out + elems, tmp, elems * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaMemcpyAsync(pin_out + 2 * elems, in, elems * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));

    // Host reference: p0 = 2 in; each step p_new = in + p_old.
    int bad = host_calls.load() != (int)steps + 2;
    if (bad)
        std::fprintf(stderr, "rt_features: host functions ran %d times, expected %lu\n",
                     host_calls.load(), steps + 2);
    for (unsigned long i = 0; i < elems && !bad; i++) {
        // The memcpy node copies p[1] (its source is not updated): the last
        // state written there.
        float x = pin_in[i], v[2] = {2.0f * x, 0.0f};
        for (unsigned long s = 0; s < steps; s++)
            v[(s + 1) % 2] = (0.0f + 1.0f * x) + v[s % 2];
        float want = v[steps % 2];
        if (std::fabs(pin_out[i] - want) > 1e-5f * std::fabs(want) + 1e-6f ||
            std::fabs(pin_out[elems + i] - v[1]) > 1e-5f * std::fabs(v[1]) + 1e-6f ||
            pin_out[2 * elems + i] != x) {
            std::fprintf(stderr, "rt_features: element %lu: %g (copy %g), expected %g (%g)\n", i,
                         pin_out[i], pin_out[elems + i], want, v[1]);
            bad = 1;
        }
    }

    rt_result res;
    res.bytes.assign((unsigned char *)pin_out, (unsigned char *)(pin_out + 3 * elems));
    res.write("rt_features", out);
    rt_report("rt_features", "features", steps, launches, setparams, res, wall, cpu);
    CK(cudaEventDestroy(done));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(in));
    CK(cudaFree(p[0]));
    CK(cudaFree(p[1]));
    CK(cudaFree(tmp));
    CK(cudaFreeHost(pin_in));
    CK(cudaFreeHost(pin_out));
    CK(cudaStreamDestroy(st));
    return bad ? 3 : 0;
}
