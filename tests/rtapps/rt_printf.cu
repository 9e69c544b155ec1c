// rt_printf: device printf as NVIDIA's samples use it (issue 32): a plain
// launch whose threads each print a line, then a graph whose kernel node
// (updated every step, ping-pong) prints one line per launch from its first
// thread. The host prints its own lines around them; device output appears
// at the synchronization that follows it, so stdout's order is fixed:
//   host: launched
//   thread T: ...      (4 lines, T = 0..3)
//   host: graph steps queued
//   step S: ...        (one per step)
//   host: done
//   steps=... (rt_common.h's line)
//
//   rt_printf [--steps S] [--elems E] [--out FILE]
//
// Exit 3 when the result differs from the host reference.
#include "rt_common.h"

extern "C" __global__ void hello(float base)
{
    unsigned t = threadIdx.x;
    printf("thread %u: %s %5.2f %c %lld%%\n", t, "hello", base + (float)t, 'a' + (int)t,
           -1000000000000ll * (long long)t);
}

// out[i] = in[i] + 1; the first thread says what it saw.
extern "C" __global__ void step_print(float *out, const float *in, int step,
                                      unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] + 1.0f;
    if (i == 0)
        printf("step %d: in[0]=%g in[n-1]=%.1f\n", step, in[0], in[n - 1]);
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long steps = 6, elems = 300;
    rt_options("rt_printf", argc, argv, {{"--out", &out}, {"--steps", &steps},
                                         {"--elems", &elems}});
    const unsigned block = 128;
    const unsigned grid = (unsigned)((elems + block - 1) / block);
    hello<<<1, 4>>>(0.25f);
    CK(cudaGetLastError());
    std::printf("host: launched\n");
    CK(cudaDeviceSynchronize());

    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    float *p[2];
    CK(cudaMalloc((void **)&p[0], elems * 4));
    CK(cudaMalloc((void **)&p[1], elems * 4));
    CK(cudaMemset(p[0], 0, elems * 4));
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    unsigned long long n = elems;
    int step = 0;
    float *k_out = p[1], *k_in = p[0];
    void *kp[] = {&k_out, &k_in, &step, &n};
    cudaKernelNodeParams kn = {};
    kn.func = (void *)step_print;
    kn.gridDim = dim3(grid);
    kn.blockDim = dim3(block);
    kn.kernelParams = kp;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, nullptr, 0, &kn));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g, 0));
    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long s = 0; s < steps; s++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        step = (int)s;
        k_out = p[(s + 1) % 2];
        k_in = p[s % 2];
        CK(cudaGraphExecKernelNodeSetParams(exec, node, &kn));
        setparams++;
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    std::printf("host: graph steps queued\n");
    CK(cudaStreamSynchronize(st));
    std::printf("host: done\n");
    rt_result res;
    res.add(p[steps % 2], elems);
    int bad = 0;
    const float *dev = (const float *)(const void *)res.bytes.data();
    for (unsigned long i = 0; i < elems && !bad; i++)
        if (dev[i] != (float)steps) {
            std::fprintf(stderr, "rt_printf: element %lu: %g, expected %lu\n", i, dev[i], steps);
            bad = 1;
        }
    res.write("rt_printf", out);
    rt_report("rt_printf", "printf", steps, launches, setparams, res, wall, cpu);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(p[0]));
    CK(cudaFree(p[1]));
    CK(cudaStreamDestroy(st));
    return bad ? 3 : 0;
}
