// rt_graph_mem: graphs that allocate their own scratch memory (graph memory
// nodes, issue 32 item 4), as the runtime offers them:
//   - a graph built with cudaGraphAddMemAllocNode / cudaGraphAddMemFreeNode:
//     alloc T; fill(T, s + 1); scale(P[s % 2], T, 3); free T, its scale
//     node set every step (cudaGraphExecKernelNodeSetParams, ping-pong);
//   - a graph captured from cudaMallocAsync / kernels / cudaFreeAsync:
//     alloc U; fill(U, 2); add(Q, Q, U); free U (Q grows by 2 a launch);
//   - the graph memory footprint: in use after the launches, none reserved
//     once the execs are destroyed and cudaDeviceGraphMemTrim has run
//     (cudaDeviceGetGraphMemAttribute).
//
//   rt_graph_mem [--steps S] [--elems E] [--out FILE]
//
// Output: see rt_common.h. Exit 3 when a result differs from the host
// reference (small whole numbers: exact on any device).
#include "rt_common.h"

static unsigned long long graph_mem(cudaGraphMemAttributeType a)
{
    unsigned long long v = 0; // the attribute's value type (64 bits)
    CK(cudaDeviceGetGraphMemAttribute(0, a, &v));
    return (unsigned long long)v;
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long steps = 10, elems = 1000;
    rt_options("rt_graph_mem", argc, argv, {{"--out", &out}, {"--steps", &steps},
                                            {"--elems", &elems}});
    const unsigned block = 128;
    const unsigned grid = (unsigned)((elems + block - 1) / block);
    unsigned long long n = elems;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *p[2], *q;
    CK(cudaMalloc((void **)&p[0], elems * 4));
    CK(cudaMalloc((void **)&p[1], elems * 4));
    CK(cudaMalloc((void **)&q, elems * 4));
    CK(cudaMemset(p[0], 0, elems * 4));
    CK(cudaMemset(p[1], 0, elems * 4));
    CK(cudaMemset(q, 0, elems * 4));
    CK(cudaDeviceSynchronize()); // the memsets ran on the legacy stream; st does not wait for it

    // The built graph.
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap = {};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = elems * 4;
    cudaGraphNode_t n_alloc, n_fill, n_scale, n_free;
    CK(cudaGraphAddMemAllocNode(&n_alloc, g, nullptr, 0, &ap));
    float *t = (float *)ap.dptr;
    float fill_v = 1.0f, three = 3.0f;
    float *scale_o = p[0];
    void *kp_fill[] = {&t, &fill_v, &n};
    void *kp_scale[] = {&scale_o, &t, &three, &n};
    cudaKernelNodeParams kf = {}, ks = {};
    kf.func = (void *)vr_fill_f32;
    kf.gridDim = dim3(grid);
    kf.blockDim = dim3(block);
    kf.kernelParams = kp_fill;
    ks = kf;
    ks.func = (void *)vr_scale_f32;
    ks.kernelParams = kp_scale;
    CK(cudaGraphAddKernelNode(&n_fill, g, &n_alloc, 1, &kf));
    CK(cudaGraphAddKernelNode(&n_scale, g, &n_fill, 1, &ks));
    CK(cudaGraphAddMemFreeNode(&n_free, g, &n_scale, 1, t));
    cudaMemAllocNodeParams got = {};
    void *freed = nullptr;
    CK(cudaGraphMemAllocNodeGetParams(n_alloc, &got));
    CK(cudaGraphMemFreeNodeGetParams(n_free, &freed));
    if (got.dptr != (void *)t || freed != (void *)t || got.bytesize != elems * 4) {
        std::fprintf(stderr, "rt_graph_mem: the memory nodes' parameters are not the ones given\n");
        return 1;
    }

    // The captured graph.
    cudaGraph_t cg;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    float *u, two = 2.0f;
    CK(cudaMallocAsync((void **)&u, elems * 4, st));
    {
        void *a[] = {&u, &two, &n};
        CK(cudaLaunchKernel((const void *)vr_fill_f32, dim3(grid), dim3(block), a, 0, st));
        void *b[] = {&q, &q, &u, &n};
        CK(cudaLaunchKernel((const void *)vr_add_f32, dim3(grid), dim3(block), b, 0, st));
    }
    CK(cudaFreeAsync(u, st));
    CK(cudaStreamEndCapture(st, &cg));

    cudaGraphExec_t x, cx;
    CK(cudaGraphInstantiate(&x, g, 0));
    CK(cudaGraphInstantiate(&cx, cg, 0));
    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long s = 0; s < steps; s++) {
        uint64_t t0 = rt_clock(CLOCK_MONOTONIC), c0 = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        scale_o = p[s % 2];
        fill_v = (float)(s + 1);
        CK(cudaGraphExecKernelNodeSetParams(x, n_fill, &kf));
        CK(cudaGraphExecKernelNodeSetParams(x, n_scale, &ks));
        setparams += 2;
        CK(cudaGraphLaunch(x, st));
        CK(cudaGraphLaunch(cx, st));
        launches += 2;
        wall += rt_clock(CLOCK_MONOTONIC) - t0;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    CK(cudaStreamSynchronize(st));
    unsigned long long used = graph_mem(cudaGraphMemAttrUsedMemCurrent);
    CK(cudaGraphExecDestroy(x));
    CK(cudaGraphExecDestroy(cx));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphDestroy(cg));
    CK(cudaDeviceGraphMemTrim(0));
    unsigned long long left = graph_mem(cudaGraphMemAttrReservedMemCurrent);

    rt_result res;
    res.add(p[0], elems);
    res.add(p[1], elems);
    res.add(q, elems);
    int bad = 0;
    if (used < 2 * elems * 4 || left != 0) {
        std::fprintf(stderr, "rt_graph_mem: graph memory used %llu, %llu reserved after trim\n",
                     used, left);
        bad = 1;
    }
    const float *v = (const float *)(const void *)res.bytes.data();
    // P[s % 2] holds the last step of its parity: 3 (s + 1).
    unsigned long last[2] = {steps - 1 - (steps - 1) % 2, steps >= 2 ? steps - 1 - steps % 2 : 0};
    for (unsigned long i = 0; i < elems && !bad; i++) {
        float want0 = 3.0f * (float)(last[0] + 1);
        float want1 = steps >= 2 ? 3.0f * (float)(last[1] + 1) : 0.0f;
        float wantq = 2.0f * (float)steps;
        if (v[i] != want0 || v[elems + i] != want1 || v[2 * elems + i] != wantq) {
            std::fprintf(stderr, "rt_graph_mem: element %lu: %g %g %g, expected %g %g %g\n", i,
                         v[i], v[elems + i], v[2 * elems + i], want0, want1, wantq);
            bad = 3;
        }
    }
    res.write("rt_graph_mem", out);
    rt_report("rt_graph_mem", "graph_mem", steps, launches, setparams, res, wall, cpu);
    CK(cudaFree(p[0]));
    CK(cudaFree(p[1]));
    CK(cudaFree(q));
    CK(cudaStreamDestroy(st));
    return bad;
}
