// rt_capture: a CUDA-runtime program that captures a stream into a graph
// and then, like a naive framework, calls cudaGraphExecKernelNodeSetParams on
// every kernel node before every cudaGraphLaunch. The runtime reaches the
// driver through cuGetProcAddress, so under the shim this checks the routing
// for cudart-built programs.
//
//   rt_capture [--pattern stable|rebind|pingpong] [--nodes N] [--steps S]
//              [--k K] [--bytes B] [--elems E] [--out FILE]
//
// stable: the same buffers every step; rebind: the input is re-allocated
// every K steps; pingpong: the state buffers swap every step. Output: see
// rt_common.h.
#include "rt_common.h"

struct Node {
    bool mix;    // vr_axpy_f32 (y += a*x) or vr_scale_f32 (out = s*in)
    int out, in; // buffer roles: >= 0 working, -1 input, -2 state in, -3 state out
    float s;     // distinct per node: also how the node is found after capture
    float *p_out, *p_in;
    unsigned long long n;
    void *kp[4];
    cudaGraphNode_t h;
    void *func;
};

static float scalar_of(unsigned long i)
{
    return 0.5f + (float)i / 1048576.0f; // exact for i < 2^19
}

int main(int argc, char **argv)
{
    const char *pattern = "stable", *out = nullptr;
    unsigned long nodes = 256, steps = 100, k = 10, bytes = 1ul << 20, elems = 256;
    const unsigned long nbuf = 8;
    rt_options("rt_capture", argc, argv, {{"--pattern", &pattern}, {"--out", &out},
                                          {"--nodes", &nodes}, {"--steps", &steps}, {"--k", &k},
                                          {"--bytes", &bytes}, {"--elems", &elems}});
    bool rebind = !std::strcmp(pattern, "rebind"), pingpong = !std::strcmp(pattern, "pingpong");
    if (!rebind && !pingpong && std::strcmp(pattern, "stable")) {
        std::fprintf(stderr, "rt_capture: pattern must be stable, rebind or pingpong\n");
        return 2;
    }
    if (elems * 4 > bytes || nodes < 4 || nodes >= (1ul << 19)) {
        std::fprintf(stderr, "rt_capture: need elems*4 <= bytes and 4 <= nodes < 2^19\n");
        return 2;
    }

    cudaStream_t st;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::vector<float *> w(nbuf);
    float *x, *pp[2];
    auto alloc = [&](float **p, float v) {
        CK(cudaMalloc((void **)p, bytes));
        std::vector<float> h(bytes / 4, v);
        CK(cudaMemcpy(*p, h.data(), bytes, cudaMemcpyHostToDevice));
    };
    for (unsigned long b = 0; b < nbuf; b++)
        alloc(&w[b], 0.1f * (float)(b + 1));
    alloc(&x, 1.0f);
    alloc(&pp[0], 0.5f);
    alloc(&pp[1], 0.5f);

    std::vector<Node> nd(nodes);
    for (unsigned long i = 0; i < nodes; i++) {
        Node &n = nd[i];
        n = Node{};
        n.mix = i % 2 == 1;
        n.out = (int)(i % nbuf);
        n.in = i % 32 == 0 ? -1 : i % 32 == 16 ? -2 : (int)((i + 1) % nbuf);
        n.s = scalar_of(i);
    }
    nd[nodes - 1].mix = false;
    nd[nodes - 1].out = -3;
    nd[nodes - 1].in = (int)((nodes - 2) % nbuf);

    auto resolve = [&](int role, unsigned long step) -> float * {
        if (role == -1)
            return x;
        if (role == -2)
            return pingpong ? pp[step % 2] : pp[0];
        if (role == -3)
            return pingpong ? pp[(step + 1) % 2] : pp[0];
        return w[(size_t)role];
    };
    unsigned grid = (unsigned)((elems + 127) / 128), block = 128;
    auto fill_args = [&](Node &n, unsigned long step) {
        n.p_out = resolve(n.out, step);
        n.p_in = resolve(n.in, step);
        n.n = elems;
        n.kp[0] = &n.p_out;
        n.kp[1] = &n.p_in;
        n.kp[2] = &n.s;
        n.kp[3] = &n.n;
    };

    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (unsigned long i = 0; i < nodes; i++) {
        Node &n = nd[i];
        fill_args(n, 0);
        if (n.mix)
            vr_axpy_f32<<<grid, block, 0, st>>>(n.p_out, n.p_in, n.s, n.n);
        else
            vr_scale_f32<<<grid, block, 0, st>>>(n.p_out, n.p_in, n.s, n.n);
    }
    CK(cudaStreamEndCapture(st, &graph));
    CK(cudaGetLastError());

    // find each node by its scalar argument (distinct per node)
    size_t count = 0;
    CK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> all(count);
    CK(cudaGraphGetNodes(graph, all.data(), &count));
    void *f_axpy = (void *)vr_axpy_f32, *f_scale = (void *)vr_scale_f32;
    size_t found = 0;
    for (size_t j = 0; j < count; j++) {
        cudaGraphNodeType type;
        CK(cudaGraphNodeGetType(all[j], &type));
        if (type != cudaGraphNodeTypeKernel)
            continue;
        cudaKernelNodeParams kp;
        CK(cudaGraphKernelNodeGetParams(all[j], &kp));
        if (kp.func != f_axpy && kp.func != f_scale)
            continue;
        float s;
        std::memcpy(&s, kp.kernelParams[2], sizeof s);
        unsigned long i = (unsigned long)((s - 0.5f) * 1048576.0f + 0.5f);
        if (i < nodes && scalar_of(i) == s && !nd[i].h) {
            nd[i].h = all[j];
            nd[i].func = kp.func;
            found++;
        }
    }
    if (found != nodes) {
        std::fprintf(stderr, "rt_capture: found %zu of %lu kernel nodes\n", found, nodes);
        return 1;
    }
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));

    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long step = 0; step < steps; step++) {
        uint64_t a = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        float *old = nullptr;
        if (rebind && step > 0 && step % k == 0) {
            old = x;
            CK(cudaMalloc((void **)&x, bytes));
        }
        // a step-dependent input: bytes 0x3c..0x40 make floats 0.0115 .. 3.0
        CK(cudaMemsetAsync(x, 0x3c + (int)(step % 5), elems * 4, st));
        for (unsigned long i = 0; i < nodes; i++) {
            Node &n = nd[i];
            fill_args(n, step);
            cudaKernelNodeParams p = {};
            p.func = n.func;
            p.gridDim = dim3(grid);
            p.blockDim = dim3(block);
            p.kernelParams = n.kp;
            CK(cudaGraphExecKernelNodeSetParams(exec, n.h, &p));
            setparams++;
        }
        CK(cudaGraphLaunch(exec, st));
        launches++;
        if (old)
            CK(cudaFree(old));
        wall += rt_clock(CLOCK_MONOTONIC) - a;
        cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(st));

    rt_result res;
    for (float *p : w)
        res.add(p, elems);
    res.add(x, elems);
    res.add(pp[0], elems);
    res.add(pp[1], elems);
    res.write("rt_capture", out);
    rt_report("rt_capture", pattern, steps, launches, setparams, res, wall, cpu);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    for (float *p : w)
        CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(pp[0]));
    CK(cudaFree(pp[1]));
    CK(cudaStreamDestroy(st));
    return 0;
}
