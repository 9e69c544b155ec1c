// rt_conditional: conditional graph nodes as NVIDIA's samples use them
// (issue 32 item 4). One graph, built node by node:
//   step -> IF (else body) -> SWITCH (3 bodies) -> WHILE
// `step` (updated every step: ping-pong buffers) advances a device step
// counter and sets the IF's value (step odd) and the SWITCH's (step % 4,
// where 3 matches no body) from device code with cudaGraphSetConditional,
// and the WHILE's trip count (step % 3 + 1). The WHILE's handle starts at 1
// each launch (cudaGraphCondAssignDefault); its body, filled by
// cudaStreamBeginCaptureToGraph with cudaStreamGetCaptureInfo,
// cudaGraphAddNode and cudaStreamUpdateCaptureDependencies in the middle,
// counts the trip count down and clears the value at 0. With
// --remake-every K the graph is made again every K steps, its IF body
// adding another value, and the exec updated from it (cudaGraphExecUpdate):
// the new bodies' arguments and the new graph's handles take over.
//
//   rt_conditional [--steps S] [--elems E] [--remake-every K] [--out FILE]
//
// Output: see rt_common.h. Exit 3 when the result differs from the host
// reference (unsigned arithmetic: exact on any device).
#include "rt_common.h"

// ctr[0]: steps run, ctr[1]: the WHILE's trips left.
extern "C" __global__ void cond_step(unsigned *out, const unsigned *in, unsigned long long n,
                                     cudaGraphConditionalHandle hif,
                                     cudaGraphConditionalHandle hsw, unsigned *ctr)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * 3u + 1u;
    if (i == 0) {
        unsigned s = ctr[0];
        cudaGraphSetConditional(hif, s & 1u);
        cudaGraphSetConditional(hsw, s % 4u);
        ctr[1] = s % 3u + 1u;
        ctr[0] = s + 1u;
    }
}

extern "C" __global__ void cond_add(unsigned *acc, unsigned long long n, unsigned v)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        acc[i] += v + (unsigned)i;
}

extern "C" __global__ void cond_mul(unsigned *acc, unsigned long long n, unsigned k)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        acc[i] = acc[i] * k + 1u;
}

extern "C" __global__ void cond_trip(unsigned *acc, unsigned long long n, const unsigned *ctr)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n)
        acc[i] ^= ctr[1] * 0x9e3779b9u + (acc[i] >> 7);
}

extern "C" __global__ void cond_countdown(unsigned *ctr, cudaGraphConditionalHandle hw)
{
    unsigned left = ctr[1] - 1u;
    ctr[1] = left;
    cudaGraphSetConditional(hw, left);
}

static cudaGraphNode_t add_kernel(cudaGraph_t g, const cudaGraphNode_t *deps, size_t n,
                                  void *fn, unsigned grid, unsigned block, void **args)
{
    cudaKernelNodeParams kn = {};
    kn.func = fn;
    kn.gridDim = dim3(grid);
    kn.blockDim = dim3(block);
    kn.kernelParams = args;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, g, deps, n, &kn));
    return node;
}

static cudaGraphNode_t add_cond(cudaGraph_t g, cudaGraphNode_t dep, cudaGraphConditionalHandle h,
                                cudaGraphConditionalNodeType type, unsigned size,
                                cudaGraph_t *bodies)
{
    cudaGraphNodeParams p = {};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    cudaGraphNode_t node;
    CK(cudaGraphAddNode(&node, g, &dep, nullptr, 1, &p));
    for (unsigned i = 0; i < size; i++)
        bodies[i] = p.conditional.phGraph_out[i];
    return node;
}

// The graph's kernel node and what its arguments point at (the loop sets
// k_out and k_in; the handles are the newest graph's).
static unsigned *k_out, *k_in, *acc, *ctr;
static unsigned long long n;
static cudaGraphConditionalHandle hif, hsw, hw;
static void *sp[] = {&k_out, &k_in, &n, &hif, &hsw, &ctr};
static cudaKernelNodeParams kn;
static unsigned ks[3] = {2, 3, 4};

// The graph, its IF body adding v on odd steps; *step: its kernel node.
static cudaGraph_t make_graph(cudaStream_t cap, unsigned v, unsigned grid, unsigned block,
                              cudaGraphNode_t *step_out)
{
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    CK(cudaGraphConditionalHandleCreate(&hif, g, 0, 0));
    CK(cudaGraphConditionalHandleCreate(&hsw, g, 0, 0));
    CK(cudaGraphConditionalHandleCreate(&hw, g, 1, cudaGraphCondAssignDefault));

    kn = {};
    kn.func = (void *)cond_step;
    kn.gridDim = dim3(grid);
    kn.blockDim = dim3(block);
    kn.kernelParams = sp;
    cudaGraphNode_t step;
    CK(cudaGraphAddKernelNode(&step, g, nullptr, 0, &kn));

    // IF: +5 on odd steps, else +7
    cudaGraph_t ifb[2];
    cudaGraphNode_t nif = add_cond(g, step, hif, cudaGraphCondTypeIf, 2, ifb);
    unsigned v7 = 7;
    void *a5[] = {&acc, &n, &v}, *a7[] = {&acc, &n, &v7};
    add_kernel(ifb[0], nullptr, 0, (void *)cond_add, grid, block, a5);
    add_kernel(ifb[1], nullptr, 0, (void *)cond_add, grid, block, a7);

    // SWITCH: body k multiplies by k + 2
    cudaGraph_t swb[3];
    cudaGraphNode_t nsw = add_cond(g, nif, hsw, cudaGraphCondTypeSwitch, 3, swb);
    for (int k = 0; k < 3; k++) {
        void *am[] = {&acc, &n, &ks[k]};
        add_kernel(swb[k], nullptr, 0, (void *)cond_mul, grid, block, am);
    }

    // WHILE: its body captured into the node's graph
    cudaGraph_t wb;
    add_cond(g, nsw, hw, cudaGraphCondTypeWhile, 1, &wb);
    CK(cudaStreamBeginCaptureToGraph(cap, wb, nullptr, nullptr, 0, cudaStreamCaptureModeGlobal));
    cond_trip<<<grid, block, 0, cap>>>(acc, n, ctr);
    CK(cudaGetLastError());
    cudaStreamCaptureStatus cs;
    cudaGraph_t capg;
    const cudaGraphNode_t *deps;
    size_t ndeps = 0;
    CK(cudaStreamGetCaptureInfo(cap, &cs, nullptr, &capg, &deps, nullptr, &ndeps));
    if (cs != cudaStreamCaptureStatusActive || capg != wb || ndeps != 1) {
        std::fprintf(stderr, "rt_conditional: capture info: status %d, %zu dependencies\n",
                     (int)cs, ndeps);
        std::exit(1);
    }
    cudaGraphNodeParams ep = {};
    ep.type = cudaGraphNodeTypeEmpty;
    cudaGraphNode_t mid;
    CK(cudaGraphAddNode(&mid, wb, deps, nullptr, ndeps, &ep));
    CK(cudaStreamUpdateCaptureDependencies(cap, &mid, nullptr, 1,
                                           cudaStreamSetCaptureDependencies));
    cond_countdown<<<1, 1, 0, cap>>>(ctr, hw);
    CK(cudaGetLastError());
    CK(cudaStreamEndCapture(cap, &capg));

    *step_out = step;
    return g;
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long steps = 12, elems = 1000, remake = 0;
    rt_options("rt_conditional", argc, argv, {{"--out", &out}, {"--steps", &steps},
                                              {"--elems", &elems}, {"--remake-every", &remake}});
    const unsigned block = 128;
    const unsigned grid = (unsigned)((elems + block - 1) / block);
    n = elems;
    std::vector<unsigned> init(elems), acc0(elems);
    for (unsigned long i = 0; i < elems; i++) {
        init[i] = (unsigned)(i * 2654435761u);
        acc0[i] = (unsigned)i;
    }
    unsigned *p[2];
    CK(cudaMalloc((void **)&p[0], elems * 4));
    CK(cudaMalloc((void **)&p[1], elems * 4));
    CK(cudaMalloc((void **)&acc, elems * 4));
    CK(cudaMalloc((void **)&ctr, 8));
    CK(cudaMemcpy(p[0], init.data(), elems * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(acc, acc0.data(), elems * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(ctr, 0, 8));
    cudaStream_t st, cap;
    CK(cudaStreamCreate(&st));
    CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));

    k_out = p[1];
    k_in = p[0];
    cudaGraphNode_t step;
    cudaGraph_t g = make_graph(cap, 5, grid, block, &step);
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g, 0));
    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long s = 0; s < steps; s++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        if (remake && s && s % remake == 0) {
            cudaGraphNode_t again;
            cudaGraph_t ng = make_graph(cap, 5 + (unsigned)s, grid, block, &again);
            cudaGraphExecUpdateResultInfo info;
            CK(cudaGraphExecUpdate(exec, ng, &info));
            CK(cudaGraphDestroy(ng));
        }
        k_out = p[(s + 1) % 2];
        k_in = p[s % 2];
        CK(cudaGraphExecKernelNodeSetParams(exec, step, &kn));
        setparams++;
        CK(cudaGraphLaunch(exec, st));
        launches++;
        wall += rt_clock(CLOCK_MONOTONIC) - t;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(st));
    rt_result res;
    res.add((const float *)(const void *)p[steps % 2], elems);
    res.add((const float *)(const void *)acc, elems);
    res.add((const float *)(const void *)ctr, 2);

    // Host reference.
    std::vector<unsigned> x = init, a = acc0;
    for (unsigned long s = 0; s < steps; s++) {
        for (unsigned long i = 0; i < elems; i++)
            x[i] = x[i] * 3u + 1u;
        for (unsigned long i = 0; i < elems; i++)
            a[i] += (s & 1 ? 5u + (remake ? (unsigned)(s / remake * remake) : 0u) : 7u) +
                    (unsigned)i;
        if (s % 4 < 3)
            for (unsigned long i = 0; i < elems; i++)
                a[i] = a[i] * ks[s % 4] + 1u;
        for (unsigned left = (unsigned)(s % 3 + 1); left; left--)
            for (unsigned long i = 0; i < elems; i++)
                a[i] ^= left * 0x9e3779b9u + (a[i] >> 7);
    }
    const unsigned *dev = (const unsigned *)(const void *)res.bytes.data();
    int bad = 0;
    for (unsigned long i = 0; i < elems && !bad; i++) {
        if (dev[i] != x[i] || dev[elems + i] != a[i]) {
            std::fprintf(stderr, "rt_conditional: element %lu: %u %u, expected %u %u\n", i,
                         dev[i], dev[elems + i], x[i], a[i]);
            bad = 1;
        }
    }
    if (dev[2 * elems] != steps || dev[2 * elems + 1] != 0) {
        std::fprintf(stderr, "rt_conditional: counters %u %u, expected %lu 0\n", dev[2 * elems],
                     dev[2 * elems + 1], steps);
        bad = 1;
    }
    res.write("rt_conditional", out);
    rt_report("rt_conditional", "conditional", steps, launches, setparams, res, wall, cpu);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
    CK(cudaFree(p[0]));
    CK(cudaFree(p[1]));
    CK(cudaFree(acc));
    CK(cudaFree(ctr));
    CK(cudaStreamDestroy(cap));
    CK(cudaStreamDestroy(st));
    return bad ? 3 : 0;
}
