// rt_threads: several host threads, each capturing its own graph on its
// per-thread default stream and replaying it with
// cudaGraphExecKernelNodeSetParams on every node before every launch, all at
// once. Built with --default-stream per-thread, so stream 0 is the thread's
// own stream and the runtime calls the driver's per-thread (_ptsz/_ptds)
// entry points.
//
//   rt_threads [--threads T] [--nodes N] [--steps S] [--elems E] [--out FILE]
//
// Odd threads swap two state buffers every step (pingpong), even ones keep
// them. Output: see rt_common.h (buffers in thread order).
#include "rt_common.h"

#include <pthread.h>

enum { NBUF = 4 };

struct Work {
    unsigned long id, nodes, steps, elems;
    pthread_barrier_t *start;
    float *buf[NBUF], *pp[2];
    rt_result res;
    unsigned long long setparams, launches;
    uint64_t wall, cpu;
};

struct Node {
    float *o, *i;
    float s;
    unsigned long long n;
    void *kp[4];
    cudaGraphNode_t h;
};

static void *run(void *arg)
{
    Work &w = *(Work *)arg;
    const size_t bytes = (size_t)2 << 20;
    for (int b = 0; b < NBUF; b++) {
        CK(cudaMalloc((void **)&w.buf[b], bytes));
        CK(cudaMemset(w.buf[b], 0x3e, w.elems * 4)); // 0.18 in every float
    }
    for (int b = 0; b < 2; b++) {
        CK(cudaMalloc((void **)&w.pp[b], bytes));
        CK(cudaMemset(w.pp[b], 0x3f, w.elems * 4));
    }
    bool pingpong = w.id % 2 == 1;
    std::vector<Node> nd(w.nodes);
    auto fill = [&](unsigned long i, unsigned long step) -> cudaKernelNodeParams {
        Node &n = nd[i];
        n.o = i + 1 == w.nodes ? w.pp[pingpong ? (step + 1) % 2 : 0] : w.buf[i % NBUF];
        n.i = i == 0 ? w.pp[pingpong ? step % 2 : 0] : w.buf[(i + 3) % NBUF];
        n.s = 0.5f + 0.0625f * (float)((i + w.id) % 5);
        n.n = w.elems;
        n.kp[0] = &n.o, n.kp[1] = &n.i, n.kp[2] = &n.s, n.kp[3] = &n.n;
        cudaKernelNodeParams p = {};
        p.func = i % 2 ? (void *)vr_axpy_f32 : (void *)vr_scale_f32;
        p.gridDim = dim3((unsigned)((w.elems + 127) / 128));
        p.blockDim = dim3(128);
        p.kernelParams = n.kp;
        return p;
    };
    pthread_barrier_wait(w.start);

    cudaGraph_t g;
    CK(cudaStreamBeginCapture(0, cudaStreamCaptureModeThreadLocal));
    for (unsigned long i = 0; i < w.nodes; i++) {
        cudaKernelNodeParams p = fill(i, 0);
        CK(cudaLaunchKernel(p.func, p.gridDim, p.blockDim, p.kernelParams, 0, 0));
    }
    CK(cudaStreamEndCapture(0, &g));
    size_t count = 0;
    CK(cudaGraphGetNodes(g, nullptr, &count));
    if (count != w.nodes) {
        std::fprintf(stderr, "rt_threads: %zu nodes captured, want %lu\n", count, w.nodes);
        std::exit(1);
    }
    std::vector<cudaGraphNode_t> all(count);
    CK(cudaGraphGetNodes(g, all.data(), &count));
    for (unsigned long i = 0; i < w.nodes; i++)
        nd[i].h = all[i]; // a chain captured on one stream: creation order
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, g, 0));
    for (unsigned long step = 0; step < w.steps; step++) {
        uint64_t t = rt_clock(CLOCK_MONOTONIC), c = rt_clock(CLOCK_THREAD_CPUTIME_ID);
        for (unsigned long i = 0; i < w.nodes; i++) {
            cudaKernelNodeParams p = fill(i, step);
            CK(cudaGraphExecKernelNodeSetParams(exec, nd[i].h, &p));
            w.setparams++;
        }
        // The toolkit's header maps cudaGraphLaunch to its legacy export even
        // here; the per-thread stream is named, as portable code does.
        CK(cudaGraphLaunch(exec, cudaStreamPerThread));
        w.launches++;
        w.wall += rt_clock(CLOCK_MONOTONIC) - t;
        w.cpu += rt_clock(CLOCK_THREAD_CPUTIME_ID) - c;
    }
    CK(cudaStreamSynchronize(0));
    for (int b = 0; b < NBUF; b++)
        w.res.add(w.buf[b], w.elems);
    for (int b = 0; b < 2; b++)
        w.res.add(w.pp[b], w.elems);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(g));
    for (int b = 0; b < NBUF; b++)
        CK(cudaFree(w.buf[b]));
    for (int b = 0; b < 2; b++)
        CK(cudaFree(w.pp[b]));
    return nullptr;
}

int main(int argc, char **argv)
{
    const char *out = nullptr;
    unsigned long threads = 3, nodes = 32, steps = 30, elems = 256;
    rt_options("rt_threads", argc, argv, {{"--out", &out}, {"--threads", &threads},
                                          {"--nodes", &nodes}, {"--steps", &steps},
                                          {"--elems", &elems}});
    if (threads > 64 || nodes < 2 || elems * 4 > ((size_t)2 << 20)) {
        std::fprintf(stderr, "rt_threads: need threads <= 64, nodes >= 2, elems <= 512K\n");
        return 2;
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, nullptr, (unsigned)threads);
    std::vector<Work> w(threads);
    std::vector<pthread_t> t(threads);
    for (unsigned long i = 0; i < threads; i++) {
        w[i].id = i, w[i].nodes = nodes, w[i].steps = steps, w[i].elems = elems;
        w[i].start = &start;
        if (pthread_create(&t[i], nullptr, run, &w[i])) {
            std::fprintf(stderr, "rt_threads: pthread_create failed\n");
            return 1;
        }
    }
    rt_result res;
    unsigned long long setparams = 0, launches = 0;
    uint64_t wall = 0, cpu = 0;
    for (unsigned long i = 0; i < threads; i++) {
        pthread_join(t[i], nullptr);
        res.bytes.insert(res.bytes.end(), w[i].res.bytes.begin(), w[i].res.bytes.end());
        setparams += w[i].setparams, launches += w[i].launches;
        wall += w[i].wall, cpu += w[i].cpu;
    }
    res.write("rt_threads", out);
    rt_report("rt_threads", "threads", steps * threads, launches, setparams, res, wall, cpu);
    return 0;
}
