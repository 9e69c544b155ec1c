// rt_explicit: a graph built node by node (cudaGraphAddKernelNode with
// explicit dependencies), instantiated once, its nodes set every step with
// cudaGraphExecKernelNodeSetParams, and every U steps replaced wholesale by
// cudaGraphExecUpdate from a new graph of the same shape on the other
// buffer set. Nodes stay named by the handles of the graph the exec was
// instantiated from, as cuda.h says.
//
//   rt_explicit [--nodes N] [--steps S] [--update-every U] [--elems E] [--out FILE]
//
// Output: see rt_common.h.
#include "rt_common.h"

enum { NBUF = 4 };

struct Args {
    float *o, *a, *b;
    float s;
    unsigned long long n;
    void *kp[4];
};

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long nodes = 48, steps = 40, every = 12, elems = 256;
    rt_options("rt_explicit", argc, argv, {{"--out", &out}, {"--nodes", &nodes},
                                           {"--steps", &steps}, {"--update-every", &every},
                                           {"--elems", &elems}});
    const size_t bytes = (size_t)2 << 20; // large enough for VMM backing
    if (elems * 4 > bytes) {
        std::fprintf(stderr, "rt_explicit: --elems too large\n");
        return 2;
    }
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    float *set[2][NBUF], *x;
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < NBUF; b++) {
            CK(cudaMalloc((void **)&set[k][b], bytes));
            std::vector<float> h(elems, 0.25f * (float)(b + 1) + (float)k);
            CK(cudaMemcpy(set[k][b], h.data(), elems * 4, cudaMemcpyHostToDevice));
        }
    CK(cudaMalloc((void **)&x, bytes));

    std::vector<Args> args(nodes);
    auto fill = [&](unsigned long i, int k) -> cudaKernelNodeParams {
        Args &a = args[i];
        float **buf = set[k];
        a.o = buf[i % NBUF];
        a.a = i % 8 == 0 ? x : buf[(i + 1) % NBUF];
        a.b = buf[(i + 2) % NBUF];
        a.s = 0.5f + 0.125f * (float)(i % 3);
        a.n = elems;
        cudaKernelNodeParams p = {};
        p.gridDim = dim3((unsigned)((elems + 127) / 128));
        p.blockDim = dim3(128);
        p.kernelParams = a.kp;
        switch (i % 3) {
        case 0: // out = s * in
            p.func = (void *)vr_scale_f32;
            a.kp[0] = &a.o, a.kp[1] = &a.a, a.kp[2] = &a.s, a.kp[3] = &a.n;
            break;
        case 1: // y += s * x
            p.func = (void *)vr_axpy_f32;
            a.kp[0] = &a.o, a.kp[1] = &a.b, a.kp[2] = &a.s, a.kp[3] = &a.n;
            break;
        default: // out = a + b
            p.func = (void *)vr_add_f32;
            a.kp[0] = &a.o, a.kp[1] = &a.a, a.kp[2] = &a.b, a.kp[3] = &a.n;
            break;
        }
        return p;
    };
    auto build = [&](int k, std::vector<cudaGraphNode_t> &h) {
        cudaGraph_t g;
        CK(cudaGraphCreate(&g, 0));
        h.assign(nodes, nullptr);
        for (unsigned long i = 0; i < nodes; i++) {
            cudaKernelNodeParams p = fill(i, k);
            CK(cudaGraphAddKernelNode(&h[i], g, i ? &h[i - 1] : nullptr, i ? 1 : 0, &p));
        }
        return g;
    };

    std::vector<cudaGraphNode_t> h0, h1;
    cudaGraph_t g0 = build(0, h0);
    cudaKernelNodeParams back;
    CK(cudaGraphKernelNodeGetParams(h0[1], &back));
    if (back.func != (void *)vr_axpy_f32) {
        std::fprintf(stderr, "rt_explicit: cudaGraphKernelNodeGetParams names another kernel\n");
        return 1;
    }
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g0, 0));

    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    int k = 0;
    for (unsigned long step = 0; step < steps; step++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        if (step > 0 && step % every == 0) {
            k ^= 1;
            cudaGraph_t g = build(k, h1);
            cudaGraphExecUpdateResultInfo info = {};
            CK(cudaGraphExecUpdate(exec, g, &info));
            if (info.result != cudaGraphExecUpdateSuccess) {
                std::fprintf(stderr, "rt_explicit: update result %d\n", (int)info.result);
                return 1;
            }
            CK(cudaGraphDestroy(g));
        }
        CK(cudaMemsetAsync(x, 0x3c + (int)(step % 5), elems * 4, st));
        for (unsigned long i = 0; i < nodes; i++) {
            cudaKernelNodeParams p = fill(i, k);
            CK(cudaGraphExecKernelNodeSetParams(exec, h0[i], &p));
            setparams++;
        }
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(st));

    rt_result res;
    for (int kk = 0; kk < 2; kk++)
        for (int b = 0; b < NBUF; b++)
            res.add(set[kk][b], elems);
    res.add(x, elems);
    res.write("rt_explicit", out);
    rt_report("rt_explicit", "update", steps, launches, setparams, res, wall, cpu);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g0));
    for (int kk = 0; kk < 2; kk++)
        for (int b = 0; b < NBUF; b++)
            CK(cudaFree(set[kk][b]));
    CK(cudaFree(x));
    CK(cudaStreamDestroy(st));
    return 0;
}
