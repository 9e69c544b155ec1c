// rt_jacobi: a Jacobi solver shaped like NVIDIA's graph sample, in its two
// methods of replaying the step:
//   --method setparams  one graph instantiated once; every iteration swaps
//                       the two vectors with cudaGraphExecKernelNodeSetParams
//   --method recapture  every iteration captured again on a stream with this
//                       iteration's vectors and applied with cudaGraphExecUpdate
// The system is A x = b with A = tridiag(-1, 4, -1) (diagonally dominant, so
// Jacobi converges). Each sweep also reduces sum (x_new - x_old)^2: a
// shared-memory and warp-shuffle reduction per block, then one double
// atomicAdd per block into that iteration's slot of a history buffer.
//
//   rt_jacobi [--method setparams|recapture] [--n N] [--iters I] [--out FILE]
//
// Output: see rt_common.h; --out holds x and the error history. Exit 3 when
// x or the history differs from the host reference beyond rounding.
#include "rt_common.h"

#include <cmath>

constexpr int kBlock = 256;

__device__ double warp_sum(double v)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void jacobi_sweep(const double *x_old, double *x_new, const double *b,
                                        double *err_slot, int n)
{
    __shared__ double warp_part[kBlock / 32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double d = 0.0;
    if (i < n) {
        double left = i > 0 ? x_old[i - 1] : 0.0;
        double right = i + 1 < n ? x_old[i + 1] : 0.0;
        double v = (b[i] + left + right) / 4.0;
        x_new[i] = v;
        d = (v - x_old[i]) * (v - x_old[i]);
    }
    d = warp_sum(d);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0)
        warp_part[warp] = d;
    __syncthreads();
    if (warp == 0) {
        d = lane < (int)(blockDim.x / 32) ? warp_part[lane] : 0.0;
        d = warp_sum(d);
        if (lane == 0)
            atomicAdd(err_slot, d);
    }
}

static void host_reference(int n, int iters, std::vector<double> &x, std::vector<double> &errs)
{
    std::vector<double> b(n), xo(n, 0.0), xn(n);
    for (int i = 0; i < n; i++)
        b[i] = 1.0 + 0.001 * (double)(i % 13);
    errs.assign(iters, 0.0);
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) {
            double left = i > 0 ? xo[i - 1] : 0.0, right = i + 1 < n ? xo[i + 1] : 0.0;
            xn[i] = (b[i] + left + right) / 4.0;
            errs[it] += (xn[i] - xo[i]) * (xn[i] - xo[i]);
        }
        xo.swap(xn);
    }
    x = xo;
}

int main(int argc, char **argv)
{
    const char *out = nullptr, *method = "setparams";
    unsigned long n = 4096, iters = 60;
    rt_options("rt_jacobi", argc, argv, {{"--out", &out}, {"--method", &method}, {"--n", &n},
                                         {"--iters", &iters}});
    const bool recapture = !std::strcmp(method, "recapture");
    if (!recapture && std::strcmp(method, "setparams")) {
        std::fprintf(stderr, "rt_jacobi: --method setparams or recapture\n");
        return 2;
    }
    // 2 MiB at least: what the shim backs with VMM.
    const size_t bytes = std::max((size_t)2 << 20, n * sizeof(double));
    double *x[2], *b, *errs;
    CK(cudaMalloc((void **)&x[0], bytes));
    CK(cudaMalloc((void **)&x[1], bytes));
    CK(cudaMalloc((void **)&b, bytes));
    CK(cudaMalloc((void **)&errs, std::max((size_t)2 << 20, iters * sizeof(double))));
    std::vector<double> hb(n);
    for (unsigned long i = 0; i < n; i++)
        hb[i] = 1.0 + 0.001 * (double)(i % 13);
    CK(cudaMemcpy(b, hb.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMemset(x[0], 0, n * sizeof(double)));
    CK(cudaMemset(errs, 0, iters * sizeof(double)));
    // cudaMemset of device memory returns before it is done, on the legacy
    // stream: the non-blocking stream below must not overtake it.
    CK(cudaDeviceSynchronize());
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    const unsigned grid = (unsigned)((n + kBlock - 1) / kBlock);
    int ni = (int)n;
    const double *a_old;
    double *a_new, *a_err;
    void *kp[] = {&a_old, &a_new, &b, &a_err, &ni};
    auto set_iter = [&](unsigned long it) {
        a_old = x[it % 2];
        a_new = x[(it + 1) % 2];
        a_err = errs + it;
    };
    cudaKernelNodeParams kn = {};
    kn.func = (void *)jacobi_sweep;
    kn.gridDim = dim3(grid);
    kn.blockDim = dim3(kBlock);
    kn.kernelParams = kp;

    // One capture of this iteration's sweep: the graph the exec starts
    // from, or the one an update applies.
    auto capture = [&](unsigned long it) {
        set_iter(it);
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        jacobi_sweep<<<grid, kBlock, 0, st>>>(a_old, a_new, b, a_err, ni);
        CK(cudaGetLastError());
        CK(cudaStreamEndCapture(st, &g));
        return g;
    };
    cudaGraph_t g0;
    cudaGraphNode_t node = nullptr;
    if (recapture) {
        g0 = capture(0);
    } else {
        set_iter(0);
        CK(cudaGraphCreate(&g0, 0));
        CK(cudaGraphAddKernelNode(&node, g0, nullptr, 0, &kn));
    }
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g0, 0));

    unsigned long long setparams = 0, launches = 0, updates = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long it = 0; it < iters; it++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        if (recapture && it > 0) {
            cudaGraph_t g = capture(it);
            cudaGraphExecUpdateResultInfo info = {};
            CK(cudaGraphExecUpdate(exec, g, &info));
            if (info.result != cudaGraphExecUpdateSuccess) {
                std::fprintf(stderr, "rt_jacobi: update result %d\n", (int)info.result);
                return 1;
            }
            CK(cudaGraphDestroy(g));
            updates++;
        } else if (!recapture) {
            set_iter(it);
            CK(cudaGraphExecKernelNodeSetParams(exec, node, &kn));
            setparams++;
        }
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(st));

    std::vector<double> rx(n), rerr(iters), wx, werr;
    CK(cudaMemcpy(rx.data(), x[iters % 2], n * sizeof(double), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(rerr.data(), errs, iters * sizeof(double), cudaMemcpyDeviceToHost));
    host_reference((int)n, (int)iters, wx, werr);
    int bad = 0;
    for (unsigned long i = 0; i < n && !bad; i++)
        if (std::fabs(rx[i] - wx[i]) > 1e-12 * std::fabs(wx[i])) {
            std::fprintf(stderr, "rt_jacobi: x[%lu] = %.17g, expected %.17g\n", i, rx[i], wx[i]);
            bad = 1;
        }
    // The sums' order differs from the host's (blocks, warps, atomics).
    for (unsigned long it = 0; it < iters && !bad; it++)
        if (std::fabs(rerr[it] - werr[it]) > 1e-9 * werr[it] + 1e-300) {
            std::fprintf(stderr, "rt_jacobi: error[%lu] = %.17g, expected %.17g\n", it, rerr[it],
                         werr[it]);
            bad = 1;
        }

    rt_result res;
    res.bytes.assign((unsigned char *)rx.data(), (unsigned char *)(rx.data() + n));
    res.bytes.insert(res.bytes.end(), (unsigned char *)rerr.data(),
                     (unsigned char *)(rerr.data() + iters));
    res.write("rt_jacobi", out);
    rt_report("rt_jacobi", method, iters, launches, setparams, res, wall, cpu);
    std::fprintf(stderr, "rt_jacobi: %llu updates, final error %.3g\n", updates, rerr[iters - 1]);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g0));
    CK(cudaFree(x[0]));
    CK(cudaFree(x[1]));
    CK(cudaFree(b));
    CK(cudaFree(errs));
    CK(cudaStreamDestroy(st));
    return bad ? 3 : 0;
}
