// rt_alloc_kinds: the runtime calls NVIDIA's samples make around a graph
// that plain cudaMalloc programs do not, in one program whose result a host
// reference checks (issue 32):
//   - a profiler range around the work (cudaProfilerStart/Stop);
//   - managed memory the host writes and reads directly (cudaMallocManaged);
//   - stream-ordered buffers (cudaMallocAsync, cudaFreeAsync);
//   - a graph built once, cloned (cudaGraphClone), the original destroyed,
//     and the clone instantiated and updated every step
//     (cudaGraphExecKernelNodeSetParams, ping-pong between two buffers).
//
//   rt_alloc_kinds [--steps S] [--elems E] [--out FILE]
//
// Output: see rt_common.h. Exit 3 when the result differs from the host
// reference (small whole numbers: exact on any device).
#include "rt_common.h"

#include <cuda_profiler_api.h>

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long steps = 10, elems = 1000;
    rt_options("rt_alloc_kinds", argc, argv, {{"--out", &out}, {"--steps", &steps},
                                              {"--elems", &elems}});
    const unsigned block = 128;
    const unsigned grid = (unsigned)((elems + block - 1) / block);
    CK(cudaProfilerStart());

    float *m;
    CK(cudaMallocManaged((void **)&m, elems * 4));
    for (unsigned long i = 0; i < elems; i++)
        m[i] = (float)(i % 13);
    // Documented: size 0 and unknown flags are refused.
    void *none;
    if (cudaMallocManaged(&none, 0) != cudaErrorInvalidValue ||
        cudaMallocManaged(&none, 64, 4) != cudaErrorInvalidValue) {
        std::fprintf(stderr, "rt_alloc_kinds: a bad cudaMallocManaged was accepted\n");
        return 1;
    }
    (void)cudaGetLastError();

    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    float *p[2];
    CK(cudaMallocAsync((void **)&p[0], elems * 4, st));
    CK(cudaMallocAsync((void **)&p[1], elems * 4, st));
    CK(cudaMemsetAsync(p[0], 0, elems * 4, st));

    // p[(s+1)%2] = m + p[s%2]
    cudaGraph_t g, clone;
    CK(cudaGraphCreate(&g, 0));
    unsigned long long n = elems;
    float *add_o = p[1], *add_a = m, *add_b = p[0];
    void *kp[] = {&add_o, &add_a, &add_b, &n};
    cudaKernelNodeParams kadd = {};
    kadd.func = (void *)vr_add_f32;
    kadd.gridDim = dim3(grid);
    kadd.blockDim = dim3(block);
    kadd.kernelParams = kp;
    cudaGraphNode_t orig_node;
    CK(cudaGraphAddKernelNode(&orig_node, g, nullptr, 0, &kadd));
    CK(cudaGraphClone(&clone, g));
    CK(cudaGraphDestroy(g));
    cudaGraphNode_t node;
    size_t nnodes = 1;
    CK(cudaGraphGetNodes(clone, &node, &nnodes));
    cudaKernelNodeParams got;
    CK(cudaGraphKernelNodeGetParams(node, &got));
    if (nnodes != 1 || got.func != (void *)vr_add_f32 || got.gridDim.x != grid) {
        std::fprintf(stderr, "rt_alloc_kinds: the clone is not the graph cloned\n");
        return 1;
    }
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, clone, 0));

    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long s = 0; s < steps; s++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        add_o = p[(s + 1) % 2];
        add_b = p[s % 2];
        CK(cudaGraphExecKernelNodeSetParams(exec, node, &kadd));
        setparams++;
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    // m = 2 m, then read by the host without a copy.
    {
        float two = 2.0f;
        void *kps[] = {&m, &m, &two, &n};
        CK(cudaLaunchKernel((const void *)vr_scale_f32, dim3(grid), dim3(block), kps, 0, st));
    }
    rt_result res;
    res.add(p[steps % 2], elems);
    CK(cudaFreeAsync(p[0], st));
    CK(cudaFreeAsync(p[1], st));
    CK(cudaStreamSynchronize(st));
    size_t at = res.bytes.size();
    res.bytes.resize(at + elems * 4);
    std::memcpy(res.bytes.data() + at, m, elems * 4);

    int bad = 0;
    const float *dev = (const float *)(const void *)res.bytes.data();
    for (unsigned long i = 0; i < elems && !bad; i++) {
        float x = (float)(i % 13);
        if (dev[i] != (float)steps * x || dev[elems + i] != 2.0f * x) {
            std::fprintf(stderr, "rt_alloc_kinds: element %lu: %g and %g, expected %g and %g\n",
                         i, dev[i], dev[elems + i], (float)steps * x, 2.0f * x);
            bad = 1;
        }
    }
    res.write("rt_alloc_kinds", out);
    rt_report("rt_alloc_kinds", "alloc_kinds", steps, launches, setparams, res, wall, cpu);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(clone));
    CK(cudaFree(m));
    CK(cudaStreamDestroy(st));
    CK(cudaProfilerStop());
    return bad ? 3 : 0;
}
