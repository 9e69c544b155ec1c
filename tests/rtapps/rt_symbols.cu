// rt_symbols: device variables as NVIDIA's samples use them (issue 32): a
// `__constant__` table and a `__device__` array with an initializer read by
// a kernel, a `__device__` counter it increments; the host sets them with
// cudaMemcpyToSymbol (synchronous, at an offset, and cudaMemcpyToSymbolAsync
// ordered between graph launches), reads them back with
// cudaMemcpyFromSymbol, and finds them with cudaGetSymbolAddress/Size. A
// `__managed__` counter (with an initializer) is read and written by the
// host directly and incremented by the kernel. The kernel runs as a graph's node updated every step (ping-pong), and a bad
// symbol, offset or direction gets the documented error.
//
//   rt_symbols [--steps S] [--elems E] [--out FILE]
//
// Output: see rt_common.h. Exit 3 when the result differs from the host
// reference (every value is exact in float on any device).
#include "rt_common.h"

__constant__ float coef[8];
__device__ float bias[4] = {1.0f, 2.0f, 3.0f, 0.5f};
__device__ unsigned int blocks_run;
__device__ __managed__ unsigned int managed_steps = 7;

// out[i] = in[i] * coef[i % 8] + bias[i % 4]; one count per block.
extern "C" __global__ void sym_step(float *out, const float *in, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * coef[i % 8] + bias[i % 4];
    if (threadIdx.x == 0)
        atomicAdd(&blocks_run, 1u);
    if (i == 0)
        managed_steps += 1;
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long steps = 12, elems = 1000;
    rt_options("rt_symbols", argc, argv, {{"--out", &out}, {"--steps", &steps},
                                          {"--elems", &elems}});
    const unsigned block = 128;
    const unsigned grid = (unsigned)((elems + block - 1) / block);
    const float c0[8] = {1.0f, 0.5f, 2.0f, -1.0f, 1.0f, 0.5f, 2.0f, -1.0f};
    const float ones[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    CK(cudaMemcpyToSymbol(coef, c0, sizeof c0));
    const float b3 = 4.0f; // bias[3] = 4 through an offset
    CK(cudaMemcpyToSymbol(bias, &b3, sizeof b3, 3 * sizeof(float)));
    unsigned int zero = 0;
    CK(cudaMemcpyToSymbol(blocks_run, &zero, sizeof zero, 0, cudaMemcpyHostToDevice));
    void *counter;
    size_t size;
    CK(cudaGetSymbolAddress(&counter, blocks_run));
    CK(cudaGetSymbolSize(&size, coef));
    if (size != sizeof c0 || !counter) {
        std::fprintf(stderr, "rt_symbols: coef has %zu bytes\n", size);
        return 1;
    }
    static int not_a_symbol;
    if (cudaMemcpyToSymbol(bias, c0, 8, 12) != cudaErrorInvalidValue ||
        cudaMemcpyToSymbol(not_a_symbol, c0, 4) != cudaErrorInvalidSymbol ||
        cudaMemcpyToSymbol(coef, c0, 4, 0, cudaMemcpyDeviceToHost) !=
            cudaErrorInvalidMemcpyDirection ||
        cudaGetLastError() != cudaErrorInvalidMemcpyDirection) {
        std::fprintf(stderr, "rt_symbols: a bad symbol copy got the wrong answer\n");
        return 1;
    }

    if (managed_steps != 7) {
        std::fprintf(stderr, "rt_symbols: the managed variable reads %u, not its initializer 7\n",
                     managed_steps);
        return 1;
    }
    managed_steps = 100;

    std::vector<float> init(elems);
    for (unsigned long i = 0; i < elems; i++)
        init[i] = (float)(i % 11) - 5.0f;
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    float *p[2];
    CK(cudaMalloc((void **)&p[0], elems * 4));
    CK(cudaMalloc((void **)&p[1], elems * 4));
    CK(cudaMemcpy(p[0], init.data(), elems * 4, cudaMemcpyHostToDevice));

    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    unsigned long long n = elems;
    float *k_out = p[1], *k_in = p[0];
    void *kp[] = {&k_out, &k_in, &n};
    cudaKernelNodeParams kn = {};
    kn.func = (void *)sym_step;
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
        if (s == steps / 2) // ordered between this step's launch and the last
            CK(cudaMemcpyToSymbolAsync(coef, ones, sizeof ones, 0, cudaMemcpyHostToDevice, st));
        k_out = p[(s + 1) % 2];
        k_in = p[s % 2];
        CK(cudaGraphExecKernelNodeSetParams(exec, node, &kn));
        setparams++;
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(st));
    rt_result res;
    res.add(p[steps % 2], elems);
    float back[12];
    CK(cudaMemcpyFromSymbol(back, coef, sizeof ones));
    CK(cudaMemcpyFromSymbolAsync(back + 8, bias, 4 * sizeof(float), 0, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    unsigned int counted = 0;
    CK(cudaMemcpy(&counted, counter, sizeof counted, cudaMemcpyDeviceToHost));
    size_t at = res.bytes.size();
    unsigned int managed = managed_steps;
    res.bytes.resize(at + sizeof back + sizeof counted + sizeof managed);
    std::memcpy(res.bytes.data() + at, back, sizeof back);
    std::memcpy(res.bytes.data() + at + sizeof back, &counted, sizeof counted);
    std::memcpy(res.bytes.data() + at + sizeof back + sizeof counted, &managed, sizeof managed);

    // Host reference.
    const float bias_want[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    int bad = counted != (unsigned)(steps * grid) || managed != 100 + steps ||
              std::memcmp(back, ones, sizeof ones) != 0 ||
              std::memcmp(back + 8, bias_want, sizeof bias_want) != 0;
    if (bad)
        std::fprintf(stderr, "rt_symbols: %u blocks counted (expected %lu), %u managed steps "
                     "(expected %lu), or coef/bias read back wrong\n", counted, steps * grid,
                     managed, 100 + steps);
    const float *dev = (const float *)(const void *)res.bytes.data();
    for (unsigned long i = 0; i < elems && !bad; i++) {
        float x = init[i];
        for (unsigned long s = 0; s < steps; s++)
            x = x * (s < steps / 2 ? c0[i % 8] : 1.0f) + bias_want[i % 4];
        if (dev[i] != x) {
            std::fprintf(stderr, "rt_symbols: element %lu: %g, expected %g\n", i, dev[i], x);
            bad = 1;
        }
    }
    res.write("rt_symbols", out);
    rt_report("rt_symbols", "symbols", steps, launches, setparams, res, wall, cpu);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(p[0]));
    CK(cudaFree(p[1]));
    CK(cudaStreamDestroy(st));
    return bad ? 3 : 0;
}
