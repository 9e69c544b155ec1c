// rt_cg: conjugate gradients on A = tridiag(-1, 2 + shift, -1), the whole
// iteration one graph with its scalars on the device, so no iteration waits
// for the host:
//   Ap = A p;  pAp = p.Ap;  alpha = rr / pAp;  x += alpha p;  r -= alpha Ap;
//   rr_new = r.r;  beta = rr_new / rr;  p = r + beta p;  rr = rr_new
// The dot products are block reductions (shared memory, warp shuffles) with
// one double atomicAdd per block. Like a framework, the program re-sets every
// kernel node before each launch; the scalars live in a history buffer with
// one slot per iteration, so the pointers to them move every iteration while
// the vectors stay.
//
//   rt_cg [--n N] [--iters I] [--out FILE]
//
// Output: see rt_common.h; --out holds x and the history of rr. Exit 3 when
// they differ from the host reference beyond rounding.
#include "rt_common.h"

#include <cmath>

constexpr int kBlock = 128;
constexpr double kShift = 0.05;

struct Scalars {
    double pAp, rr_new, rr;
};

__device__ double block_sum(double v)
{
    __shared__ double part[kBlock / 32];
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < kBlock / 32 ? part[threadIdx.x] : 0.0;
    if (threadIdx.x < 32)
        for (int off = 16; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off);
    return v; // thread 0 holds the block's sum
}

extern "C" __global__ void cg_spmv(const double *p, double *ap, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        ap[i] = (2.0 + kShift) * p[i] - (i > 0 ? p[i - 1] : 0.0) - (i + 1 < n ? p[i + 1] : 0.0);
}

extern "C" __global__ void cg_dot(const double *a, const double *b, double *sum, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double v = block_sum(i < n ? a[i] * b[i] : 0.0);
    if (threadIdx.x == 0)
        atomicAdd(sum, v);
}

// x += alpha p, r -= alpha Ap, with alpha = rr / pAp of this iteration.
extern "C" __global__ void cg_update_xr(double *x, double *r, const double *p, const double *ap,
                                        const Scalars *s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double alpha = s->rr / s->pAp;
    if (i < n) {
        x[i] += alpha * p[i];
        r[i] -= alpha * ap[i];
    }
}

// p = r + beta p; the next iteration's rr is this one's rr_new.
extern "C" __global__ void cg_update_p(double *p, const double *r, const Scalars *s,
                                       Scalars *next, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double beta = s->rr_new / s->rr;
    if (i < n)
        p[i] = r[i] + beta * p[i];
    if (i == 0)
        next->rr = s->rr_new;
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long n = 2048, iters = 30;
    rt_options("rt_cg", argc, argv, {{"--out", &out}, {"--n", &n}, {"--iters", &iters}});
    const size_t bytes = std::max((size_t)2 << 20, n * sizeof(double));
    double *x, *r, *p, *ap;
    Scalars *hist;
    CK(cudaMalloc((void **)&x, bytes));
    CK(cudaMalloc((void **)&r, bytes));
    CK(cudaMalloc((void **)&p, bytes));
    CK(cudaMalloc((void **)&ap, bytes));
    CK(cudaMalloc((void **)&hist, std::max((size_t)2 << 20, (iters + 1) * sizeof(Scalars))));
    // b = 1 + small ripple; x0 = 0, so r = p = b and rr = b.b.
    std::vector<double> b(n);
    double bb = 0.0;
    for (unsigned long i = 0; i < n; i++) {
        b[i] = 1.0 + 0.01 * (double)(i % 7);
        bb += b[i] * b[i];
    }
    CK(cudaMemset(x, 0, n * sizeof(double)));
    CK(cudaMemcpy(r, b.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(p, b.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CK(cudaMemset(hist, 0, (iters + 1) * sizeof(Scalars)));
    Scalars s0 = {0.0, 0.0, bb};
    CK(cudaMemcpy(hist, &s0, sizeof s0, cudaMemcpyHostToDevice));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));

    const unsigned grid = (unsigned)((n + kBlock - 1) / kBlock);
    int ni = (int)n;
    Scalars *cur, *next;
    double *pAp, *rr_new;
    void *kp_spmv[] = {&p, &ap, &ni};
    void *kp_dot1[] = {&p, &ap, &pAp, &ni};
    void *kp_xr[] = {&x, &r, &p, &ap, &cur, &ni};
    void *kp_dot2[] = {&r, &r, &rr_new, &ni};
    void *kp_p[] = {&p, &r, &cur, &next, &ni};
    void *const fns[] = {(void *)cg_spmv, (void *)cg_dot, (void *)cg_update_xr, (void *)cg_dot,
                         (void *)cg_update_p};
    void **kps[] = {kp_spmv, kp_dot1, kp_xr, kp_dot2, kp_p};
    const int nk = 5;
    auto set_iter = [&](unsigned long it) {
        cur = hist + it;
        next = hist + it + 1;
        pAp = &cur->pAp;
        rr_new = &cur->rr_new;
    };
    std::vector<cudaKernelNodeParams> kn(nk);
    for (int k = 0; k < nk; k++) {
        kn[k] = {};
        kn[k].func = fns[k];
        kn[k].gridDim = dim3(grid);
        kn[k].blockDim = dim3(kBlock);
        kn[k].kernelParams = kps[k];
    }
    set_iter(0);
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    std::vector<cudaGraphNode_t> nodes(nk);
    for (int k = 0; k < nk; k++)
        CK(cudaGraphAddKernelNode(&nodes[k], g, k ? &nodes[k - 1] : nullptr, k ? 1 : 0, &kn[k]));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g, 0));

    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long it = 0; it < iters; it++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        set_iter(it);
        for (int k = 0; k < nk; k++) {
            CK(cudaGraphExecKernelNodeSetParams(exec, nodes[k], &kn[k]));
            setparams++;
        }
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(st));

    // The host reference.
    std::vector<double> hx(n, 0.0), hr = b, hp = b, hap(n), hrr(iters);
    double rr = bb;
    for (unsigned long it = 0; it < iters; it++) {
        double pap = 0.0;
        for (unsigned long i = 0; i < n; i++) {
            hap[i] = (2.0 + kShift) * hp[i] - (i > 0 ? hp[i - 1] : 0.0) - (i + 1 < n ? hp[i + 1] : 0.0);
            pap += hp[i] * hap[i];
        }
        double alpha = rr / pap, rn = 0.0;
        for (unsigned long i = 0; i < n; i++) {
            hx[i] += alpha * hp[i];
            hr[i] -= alpha * hap[i];
            rn += hr[i] * hr[i];
        }
        double beta = rn / rr;
        for (unsigned long i = 0; i < n; i++)
            hp[i] = hr[i] + beta * hp[i];
        hrr[it] = rn;
        rr = rn;
    }
    std::vector<double> gx(n);
    std::vector<Scalars> gs(iters + 1);
    CK(cudaMemcpy(gx.data(), x, n * sizeof(double), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gs.data(), hist, (iters + 1) * sizeof(Scalars), cudaMemcpyDeviceToHost));
    std::vector<double> grr(iters);
    for (unsigned long it = 0; it < iters; it++)
        grr[it] = gs[it].rr_new;
    int bad = 0;
    // Sums in another order (and fused multiply-adds on a GPU): CG amplifies
    // rounding as the residual shrinks, so compare relative to the start.
    for (unsigned long i = 0; i < n && !bad; i++)
        if (std::fabs(gx[i] - hx[i]) > 1e-9 * std::fabs(hx[i]) + 1e-12) {
            std::fprintf(stderr, "rt_cg: x[%lu] = %.17g, expected %.17g\n", i, gx[i], hx[i]);
            bad = 1;
        }
    for (unsigned long it = 0; it < iters && !bad; it++)
        if (std::fabs(grr[it] - hrr[it]) > 1e-9 * bb) {
            std::fprintf(stderr, "rt_cg: rr[%lu] = %.17g, expected %.17g\n", it, grr[it], hrr[it]);
            bad = 1;
        }
    rt_result res;
    res.bytes.assign((unsigned char *)gx.data(), (unsigned char *)(gx.data() + n));
    res.bytes.insert(res.bytes.end(), (unsigned char *)grr.data(),
                     (unsigned char *)(grr.data() + iters));
    res.write("rt_cg", out);
    rt_report("rt_cg", "cg", iters, launches, setparams, res, wall, cpu);
    std::fprintf(stderr, "rt_cg: residual %.3g of %.3g\n", std::sqrt(grr[iters - 1]), std::sqrt(bb));
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(x));
    CK(cudaFree(r));
    CK(cudaFree(p));
    CK(cudaFree(ap));
    CK(cudaFree(hist));
    CK(cudaStreamDestroy(st));
    return bad ? 3 : 0;
}
