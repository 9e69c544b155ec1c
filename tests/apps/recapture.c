/* recapture: a step re-made every iteration and applied to one exec with
 * cuGraphExecUpdate (issue 19), the way TensorRT-LLM, GROMACS and llama.cpp
 * do: capture (or build) N scale kernels with this step's buffers, update,
 * launch, destroy the step's graph.
 *
 *   recapture [--pattern stable|pingpong|move|topology|memset_value|node_change|set_captured]
 *             [--mode global|thread|relaxed] [--explicit] [--join] [--thread] [--v1]
 *             [--memset] [--node KIND] [--ptds] [--steps S] [--nodes N]
 *
 * stable: the same buffers every step; pingpong: the outputs alternate
 * between two buffers; move: a freshly allocated input every step;
 * topology: one more node from the middle step on (the update fails with
 * the driver's answer and the program instantiates again); memset_value:
 * the captured memset's value changes from the middle step on (with
 * --memset). --memset starts each capture with an async memset of a
 * scratch buffer and an async device-to-device copy of it (memset and
 * memcpy nodes, whose result is summed too). --node KIND adds one node of
 * that kind to each capture, whose result is summed too: memcpy (a
 * cuMemcpyAsync, unified addressing), memset16 (cuMemsetD16Async),
 * memset2d (cuMemsetD2D32Async), host (cuLaunchHostFunc; with --explicit
 * cuGraphAddHostNode) or attrs (the first kernel launched by
 * cuLaunchKernelEx with a priority attribute); pattern node_change changes
 * that node from the middle step on: the copy's source, the memset's
 * value, the host function's userData, the priority. set_captured: from
 * the middle step on, the captured graph's first kernel gets factor 7
 * through cuGraphKernelNodeSetParams before the update. --explicit builds
 * the graph with cuGraphAddKernelNode instead of capturing; --join sends the
 * middle node through a second stream joined by an event; --thread has
 * another thread capture and update its own exec meanwhile; --v1 updates
 * through cuGraphExecUpdate's v1 entry point; --clone updates from a clone
 * of the step's graph (made behind the recorder's back); --async does not
 * wait for a launch before the next step's update (for stable and
 * pingpong); --orphan destroys the graph the exec is instantiated from
 * right after the instantiate; --unjoined also makes, at step 1, a capture
 * whose fork never joins back (its end is refused); --ptds captures on the
 * per-thread default stream as cudart's --default-stream per-thread code
 * does: cuStreamBeginCapture_v2_ptsz and cuStreamEndCapture_ptsz on stream
 * 0, the kernels by turns through cuLaunchKernel_ptsz on stream 0 and
 * cuLaunchKernel on CU_STREAM_PER_THREAD (both name that stream). stdout: per step the update's
 * CUresult, result and whether an error node came back, and the outputs'
 * sum: compared with and without the shim.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "recapture"
#include "vr_check.h"

enum { M = 256 };

static CUfunction scale;
static bool ptds; /* --ptds */

/* The per-thread default stream's entry points: cuda.h declares them only
 * for per-thread compilation units, where they replace the plain names. */
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph *graph);
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                     CUstream s, void **kp, void **extra);
static CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

struct work {
    CUstream st, st2;
    CUevent ev, ev2;
    CUdeviceptr in, out;  /* n * M floats each */
    bool memset;
    unsigned memset_bits;
    const char *node;     /* --node KIND, or NULL */
    bool changed;         /* node_change: from the middle step on */
    CUdeviceptr aux3;     /* M floats: the changed copy's source */
    CUdeviceptr aux, aux2; /* M floats each: the memset's and the copy's */
    unsigned n;
    float factor[64];
    unsigned long long elems;
    /* the argument slots the kernels read, per node */
    CUdeviceptr a_out[64], a_in[64];
    void *kp[64][4];
};

static void args_for(struct work *w, unsigned i)
{
    w->a_out[i] = w->out + (CUdeviceptr)i * M * sizeof(float);
    w->a_in[i] = w->in + (CUdeviceptr)i * M * sizeof(float);
    w->kp[i][0] = &w->a_out[i];
    w->kp[i][1] = &w->a_in[i];
    w->kp[i][2] = &w->factor[i];
    w->kp[i][3] = &w->elems;
}

/* The host nodes' counters: each run of the host function adds 1 to the
 * one its userData names (read after the stream is synchronized). */
static double host_count[2];

static void CUDA_CB host_add(void *arg)
{
    *(double *)arg += 1.0;
}

static bool node_is(const struct work *w, const char *kind)
{
    return w->node && !strcmp(w->node, kind);
}

static void launch_node(struct work *w, unsigned i, CUstream s)
{
    args_for(w, i);
    if (i == 0 && node_is(w, "attrs")) {
        CUlaunchAttribute a;
        memset(&a, 0, sizeof a);
        a.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        a.value.priority = w->changed ? 1 : 0;
        CUlaunchConfig c;
        memset(&c, 0, sizeof c);
        c.gridDimX = c.gridDimY = c.gridDimZ = 1;
        c.blockDimX = 64;
        c.blockDimY = c.blockDimZ = 1;
        c.hStream = s;
        c.attrs = &a;
        c.numAttrs = 1;
        CK(cuLaunchKernelEx(&c, scale, w->kp[i], NULL));
        return;
    }
    if (ptds && i % 2 == 0)
        CK(cuLaunchKernel_ptsz(scale, 1, 1, 1, 64, 1, 1, 0, NULL, w->kp[i], NULL));
    else
        CK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, ptds ? CU_STREAM_PER_THREAD : s, w->kp[i],
                          NULL));
}

/* --node's node, into the capture of s (not attrs: that one is a kernel). */
static void capture_extra_node(struct work *w, CUstream s)
{
    if (node_is(w, "memcpy"))
        CK(cuMemcpyAsync(w->aux2, w->changed ? w->aux3 : w->aux, M * sizeof(float), s));
    else if (node_is(w, "memset16"))
        CK(cuMemsetD16Async(w->aux2, w->changed ? 0x4080 : 0x4040, 2 * M, s));
    else if (node_is(w, "memset2d")) /* half of each of 4 rows of 64 floats */
        CK(cuMemsetD2D32Async(w->aux2, 64 * sizeof(float), w->changed ? 0x40a00000u : 0x40400000u,
                              32, M / 64, s));
    else if (node_is(w, "host"))
        CK(cuLaunchHostFunc(s, host_add, &host_count[w->changed]));
}

static CUgraph capture(struct work *w, bool join)
{
    CUgraph g;
    if (ptds) {
        CK(cuStreamBeginCapture_v2_ptsz(NULL, mode));
        for (unsigned i = 0; i < w->n; i++)
            launch_node(w, i, NULL);
        CK(cuStreamEndCapture_ptsz(NULL, &g));
        return g;
    }
    CK(cuStreamBeginCapture_v2(w->st, mode));
    if (w->memset) {
        CK(cuMemsetD32Async(w->aux, w->memset_bits, M, w->st));
        CK(cuMemcpyDtoDAsync_v2(w->aux2, w->aux, M * sizeof(float), w->st));
    }
    capture_extra_node(w, w->st);
    for (unsigned i = 0; i < w->n; i++) {
        if (join && i == w->n / 2) {
            CK(cuEventRecord(w->ev, w->st));
            CK(cuStreamWaitEvent(w->st2, w->ev, 0));
            launch_node(w, i, w->st2);
            CK(cuEventRecord(w->ev2, w->st2));
            CK(cuStreamWaitEvent(w->st, w->ev2, 0));
        } else {
            launch_node(w, i, w->st);
        }
    }
    CK(cuStreamEndCapture(w->st, &g));
    return g;
}

/* A fork never joined back: the driver refuses to end the capture
 * (CUDA_ERROR_STREAM_CAPTURE_UNJOINED) and the capture is over. */
static CUresult capture_unjoined(struct work *w)
{
    CUgraph g = NULL;
    CK(cuStreamBeginCapture_v2(w->st, mode));
    launch_node(w, 0, w->st);
    CK(cuEventRecord(w->ev, w->st));
    CK(cuStreamWaitEvent(w->st2, w->ev, 0));
    launch_node(w, 1, w->st2);
    CUresult r = cuStreamEndCapture(w->st, &g);
    if (r == CUDA_SUCCESS)
        CK(cuGraphDestroy(g));
    return r;
}

static CUgraph build(struct work *w)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode prev = NULL;
    if (node_is(w, "host")) {
        CUDA_HOST_NODE_PARAMS hp = {host_add, &host_count[w->changed]};
        CK(cuGraphAddHostNode(&prev, g, NULL, 0, &hp));
    }
    for (unsigned i = 0; i < w->n; i++) {
        args_for(w, i);
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.func = scale;
        p.gridDimX = p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = 64;
        p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = w->kp[i];
        CUgraphNode node;
        CK(cuGraphAddKernelNode_v2(&node, g, prev ? &prev : NULL, prev ? 1 : 0, &p));
        prev = node;
    }
    return g;
}

/* The graph's first kernel node gets another factor through
 * cuGraphKernelNodeSetParams (a node of a captured graph: the program
 * found it with cuGraphGetNodes). */
static void set_first_kernel(struct work *w, CUgraph g)
{
    CUgraphNode nodes[80];
    size_t n = 80;
    CK(cuGraphGetNodes(g, nodes, &n));
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(nodes[i], &t));
        if (t != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        static float seven = 7.0f;
        void *kp[4] = {&w->a_out[0], &w->a_in[0], &seven, &w->elems};
        CUDA_KERNEL_NODE_PARAMS p;
        CK(cuGraphKernelNodeGetParams_v2(nodes[i], &p));
        p.kernelParams = kp;
        p.extra = NULL;
        CK(cuGraphKernelNodeSetParams_v2(nodes[i], &p));
        return;
    }
}

struct opts {
    const char *pattern;
    const char *node;
    bool explicit_api, join, v1, clone, async, orphan, unjoined, memset;
    unsigned steps, nodes;
};

static CUdeviceptr filled(size_t floats, float v)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, floats * sizeof(float)));
    unsigned bits;
    memcpy(&bits, &v, sizeof bits);
    CK(cuMemsetD32_v2(p, bits, floats));
    CK(cuStreamSynchronize(NULL)); /* not the context: see run()'s steps */
    return p;
}

static unsigned bits_of(float v)
{
    unsigned b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static double sum_of(CUdeviceptr p, size_t floats)
{
    float *h = malloc(floats * sizeof *h);
    if (!h)
        abort();
    CK(cuMemcpyDtoH_v2(h, p, floats * sizeof *h));
    double s = 0;
    for (size_t i = 0; i < floats; i++)
        s += h[i];
    free(h);
    return s;
}

/* One exec through its steps; `tag` prefixes its lines (NULL: silent). */
static double run(const struct opts *o, const char *tag)
{
    struct work w;
    memset(&w, 0, sizeof w);
    w.n = o->nodes;
    w.elems = M;
    for (unsigned i = 0; i < 64; i++)
        w.factor[i] = (float)(i % 5 + 1);
    CK(cuStreamCreate(&w.st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&w.st2, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&w.ev, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&w.ev2, CU_EVENT_DISABLE_TIMING));
    const size_t floats = 64 * M;
    CUdeviceptr outs[2] = {filled(floats, 0.0f), filled(floats, 0.0f)};
    w.in = filled(floats, 1.0f);
    w.out = outs[0];
    w.memset = o->memset && !o->explicit_api;
    w.memset_bits = bits_of(3.0f);
    w.node = o->node;
    if (w.memset || w.node) {
        w.aux = filled(M, w.node ? 3.0f : 0.0f);
        w.aux2 = filled(M, 0.0f);
        w.aux3 = filled(M, 5.0f);
    }
    CUgraph g0 = o->explicit_api ? build(&w) : capture(&w, o->join);
    CUgraphExec x;
    CK(cuGraphInstantiateWithFlags(&x, g0, 0));
    if (o->orphan) {
        /* As TensorRT-LLM does: the captured graph goes right after the
         * instantiate; the exec lives on and is updated. */
        CK(cuGraphDestroy(g0));
        g0 = NULL;
    }
    double total = 0;
    for (unsigned s = 0; s < o->steps; s++) {
        CUdeviceptr old_in = 0;
        if (!strcmp(o->pattern, "pingpong")) {
            w.out = outs[s % 2];
        } else if (!strcmp(o->pattern, "move")) {
            old_in = w.in;
            w.in = filled(floats, (float)(s % 3 + 1));
        } else if (!strcmp(o->pattern, "topology") && s == o->steps / 2) {
            w.n = o->nodes + 1;
        } else if (!strcmp(o->pattern, "memset_value") && s == o->steps / 2) {
            w.memset_bits = bits_of(4.0f);
        } else if (!strcmp(o->pattern, "node_change") && s == o->steps / 2) {
            w.changed = true;
        }
        if (o->unjoined && s == 1 && tag)
            printf("%s unjoined capture r=%d\n", tag, (int)capture_unjoined(&w));
        CUgraph g = o->explicit_api ? build(&w) : capture(&w, o->join);
        if (!strcmp(o->pattern, "set_captured") && s >= o->steps / 2)
            set_first_kernel(&w, g);
        if (o->clone) {
            /* A graph the shim never saw made (cuGraphClone is not
             * recorded): the update reads it through the getters. */
            CUgraph c;
            CK(cuGraphClone(&c, g));
            CK(cuGraphDestroy(g));
            g = c;
        }
        CUresult r;
        int result;
        bool err_node;
        if (o->v1) {
            CUgraphNode en = NULL;
            CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
            r = cuGraphExecUpdate(x, g, &en, &res);
            result = (int)res;
            err_node = en != NULL;
        } else {
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0xff, sizeof info); /* every field must be written */
            r = cuGraphExecUpdate_v2(x, g, &info);
            result = (int)info.result;
            err_node = info.errorNode != NULL;
        }
        if (r != CUDA_SUCCESS) {
            /* What programs do on a failed update: instantiate again. */
            CK(cuGraphExecDestroy(x));
            CK(cuGraphInstantiateWithFlags(&x, g, 0));
        }
        CK(cuGraphDestroy(g)); /* right after the update */
        if (!o->async) {
            /* A launch that writes elsewhere shows as a zero sum. */
            CK(cuMemsetD32_v2(w.out, 0, floats));
            if (w.memset || w.node)
                CK(cuMemsetD32_v2(w.aux2, 0, M));
            /* The legacy stream, not the context: with --thread another
             * thread may be capturing, and a context's synchronize is
             * refused then (the programming guide; the H200 refused it) and
             * ends that capture. The workers' streams are non-blocking. */
            CK(cuStreamSynchronize(NULL));
        }
        CK(cuGraphLaunch(x, w.st));
        if (o->async) {
            /* The next step's capture and update meet this launch still
             * running (SIMCUDA_KERNEL_DELAY_US): only the end is waited for. */
            if (s + 1 < o->steps)
                continue;
        }
        CK(cuStreamSynchronize(w.st));
        if (old_in)
            CK(cuMemFree_v2(old_in));
        double sum = sum_of(w.out, floats);
        if (w.memset || w.node)
            sum += 1000.0 * sum_of(w.aux2, M);
        if (node_is(&w, "host"))
            sum += host_count[0] + 1e6 * host_count[1];
        total += sum;
        if (tag)
            printf("%s step %u r=%d result=%d error_node=%d sum=%.1f\n", tag, s, (int)r, result,
                   (int)err_node, sum);
    }
    CK(cuGraphExecDestroy(x));
    if (g0)
        CK(cuGraphDestroy(g0));
    CK(cuMemFree_v2(outs[0]));
    CK(cuMemFree_v2(outs[1]));
    CK(cuMemFree_v2(w.in));
    if (w.memset || w.node) {
        CK(cuMemFree_v2(w.aux));
        CK(cuMemFree_v2(w.aux2));
        CK(cuMemFree_v2(w.aux3));
    }
    CK(cuEventDestroy_v2(w.ev));
    CK(cuEventDestroy_v2(w.ev2));
    CK(cuStreamDestroy_v2(w.st));
    CK(cuStreamDestroy_v2(w.st2));
    return total;
}

static CUcontext main_ctx;
static struct opts other_opts;
static double other_total;

static void *other(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(main_ctx));
    other_total = run(&other_opts, NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    struct opts o = {.pattern = "stable", .steps = 8, .nodes = 8};
    bool thread = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--pattern") && v) {
            o.pattern = v;
            i++;
        } else if (!strcmp(a, "--mode") && v) {
            mode = !strcmp(v, "thread")    ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                   : !strcmp(v, "relaxed") ? CU_STREAM_CAPTURE_MODE_RELAXED
                                           : CU_STREAM_CAPTURE_MODE_GLOBAL;
            i++;
        } else if (!strcmp(a, "--steps") && v) {
            o.steps = (unsigned)atoi(v);
            i++;
        } else if (!strcmp(a, "--nodes") && v) {
            o.nodes = (unsigned)atoi(v);
            i++;
        } else if (!strcmp(a, "--explicit")) {
            o.explicit_api = true;
        } else if (!strcmp(a, "--join")) {
            o.join = true;
        } else if (!strcmp(a, "--thread")) {
            thread = true;
        } else if (!strcmp(a, "--v1")) {
            o.v1 = true;
        } else if (!strcmp(a, "--clone")) {
            o.clone = true;
        } else if (!strcmp(a, "--async")) {
            o.async = true;
        } else if (!strcmp(a, "--orphan")) {
            o.orphan = true;
        } else if (!strcmp(a, "--unjoined")) {
            o.unjoined = true;
        } else if (!strcmp(a, "--ptds")) {
            ptds = true;
        } else if (!strcmp(a, "--memset")) {
            o.memset = true;
        } else if (!strcmp(a, "--node") && v) {
            o.node = v;
            i++;
        } else {
            fprintf(stderr, "usage: recapture [--pattern stable|pingpong|move|topology|memset_value|node_change|set_captured] "
                            "[--mode global|thread|relaxed] [--explicit] [--join] [--thread] "
                            "[--v1] [--clone] [--async] [--orphan] [--unjoined] [--memset] [--node KIND] [--ptds] "
                            "[--steps S] [--nodes N]\n");
            return 2;
        }
    }
    if (ptds && (o.explicit_api || o.join || thread || o.unjoined || o.memset || o.node)) {
        fprintf(stderr, "recapture: --ptds captures kernels only, on this thread's stream\n");
        return 2;
    }
    if (o.nodes == 0 || o.nodes > 62 || o.steps == 0) {
        fprintf(stderr, "recapture: 1 <= --nodes <= 62, --steps >= 1\n");
        return 2;
    }
    const char *ptx_path = getenv("VR_PTX");
    char *ptx = vr_ptx_or_die(ptx_path);
    CK(cuInit(0));
    CUdevice dev = vr_ctx_current(0, &main_ctx);
    CUmodule mod;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&scale, mod, "vr_scale_f32"));
    pthread_t t;
    if (thread) {
        other_opts = o;
        other_opts.pattern = "pingpong";
        if (pthread_create(&t, NULL, other, NULL) != 0)
            return 1;
    }
    double total = run(&o, "main");
    if (thread) {
        pthread_join(t, NULL);
        printf("other total=%.1f\n", other_total);
    }
    printf("total=%.1f\n", total);
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    free(ptx);
    return 0;
}
