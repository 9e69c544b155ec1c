/* The graph-replay engine: a naive framework that re-sets every kernel
 * node's parameters before every launch.
 *
 * Every step's bytes depend on which buffers the graph really reads: inputs
 * get a step-dependent value, an accumulator carries history across steps,
 * and pingpong/rebind/realloc change addresses under the graph. If a remap
 * made the graph read or write the wrong memory, the output bytes change.
 */
#include "scenario.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varemap/varemap.h>
#include "ptx_text.h"

#ifndef VR_PTX_DEFAULT
#define VR_PTX_DEFAULT "vr_kernels.ptx"
#endif

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "dlsym results are stored into function pointers");

#define SYM(m, s, p, v, f) { offsetof(struct vr_drv, m), s, p, v, f }
const struct vr_sym vr_syms[] = {
    SYM(GetErrorName, "cuGetErrorName", "cuGetErrorName", 6000, 0),
    SYM(Init, "cuInit", "cuInit", 2000, 0),
    SYM(DeviceGet, "cuDeviceGet", "cuDeviceGet", 2000, 0),
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, 0),
    SYM(DevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",
        11000, 0),
    SYM(CtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent", 4000, 0),
    SYM(ModuleLoadData, "cuModuleLoadData", "cuModuleLoadData", 2000, 0),
    SYM(ModuleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction", 2000, 0),
    SYM(ModuleUnload, "cuModuleUnload", "cuModuleUnload", 2000, 0),
    SYM(MemAlloc_v2, "cuMemAlloc_v2", "cuMemAlloc", 3020, 0),
    SYM(MemFree_v2, "cuMemFree_v2", "cuMemFree", 3020, 0),
    SYM(MemsetD32Async, "cuMemsetD32Async", "cuMemsetD32Async", 3020, 0),
    SYM(MemcpyDtoH_v2, "cuMemcpyDtoH_v2", "cuMemcpyDtoH", 3020, 0),
    SYM(StreamCreate, "cuStreamCreate", "cuStreamCreate", 2000, 0),
    SYM(StreamDestroy_v2, "cuStreamDestroy_v2", "cuStreamDestroy", 4000, 0),
    SYM(StreamSynchronize, "cuStreamSynchronize", "cuStreamSynchronize", 2000, 0),
    SYM(StreamBeginCapture_v2, "cuStreamBeginCapture_v2", "cuStreamBeginCapture", 10010, 0),
    SYM(StreamEndCapture, "cuStreamEndCapture", "cuStreamEndCapture", 10000, 0),
    SYM(LaunchKernel, "cuLaunchKernel", "cuLaunchKernel", 4000, 0),
    SYM(GraphCreate, "cuGraphCreate", "cuGraphCreate", 10000, 0),
    SYM(GraphDestroy, "cuGraphDestroy", "cuGraphDestroy", 10000, 0),
    SYM(GraphAddKernelNode_v2, "cuGraphAddKernelNode_v2", "cuGraphAddKernelNode", 12000, 0),
    SYM(GraphGetNodes, "cuGraphGetNodes", "cuGraphGetNodes", 10000, 0),
    SYM(GraphNodeGetType, "cuGraphNodeGetType", "cuGraphNodeGetType", 10000, 0),
    SYM(GraphKernelNodeGetParams_v2, "cuGraphKernelNodeGetParams_v2", "cuGraphKernelNodeGetParams",
        12000, 0),
    SYM(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags",
        11040, 0),
    SYM(GraphExecDestroy, "cuGraphExecDestroy", "cuGraphExecDestroy", 10000, 0),
    /* The runtime asks for per-thread-default-stream variants where they
     * exist; only the launch matters here (it yields cuGraphLaunch_ptsz). */
    SYM(GraphLaunch, "cuGraphLaunch", "cuGraphLaunch", 10000,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
    /* Same base name, two versions: 10010 is the v1 struct, 12000 the v2. */
    SYM(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams",
        "cuGraphExecKernelNodeSetParams", 10010, 0),
    SYM(GraphExecKernelNodeSetParams_v2, "cuGraphExecKernelNodeSetParams_v2",
        "cuGraphExecKernelNodeSetParams", 12000, 0),
    SYM(GraphExecNodeSetParams, "cuGraphExecNodeSetParams", "cuGraphExecNodeSetParams", 12020, 0),
    SYM(GraphExecUpdate_v2, "cuGraphExecUpdate_v2", "cuGraphExecUpdate", 12000, 0),
    SYM(GraphInstantiateWithParams, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams",
        12000, 0),
};
const size_t vr_nsyms = sizeof vr_syms / sizeof vr_syms[0];

void vr_drv_put(struct vr_drv *drv, size_t off, void *fn)
{
    memcpy((char *)drv + off, &fn, sizeof fn);
}

/* ---- the workload ---------------------------------------------------- */

enum kern { K_FILL, K_SCALE, K_AXPY, K_ADD, K_AFFINE, K_COPY, NKERN };
static const char *const kern_names[NKERN] = {
    "vr_fill_f32", "vr_scale_f32", "vr_axpy_f32", "vr_add_f32", "vr_affine_struct", "vr_copy_u8",
};

/* Buffers by role. IN2 is not a buffer: it resolves per step to Y, or to
 * P0/P1 alternately under pingpong. */
enum buf {
    B_X, B_Y, B_P0, B_P1,
    B_T0, B_T1, B_T2, B_T3, B_T4, B_T5, B_T6, B_T7, B_T8, B_T9,
    B_ACC, B_O, B_O2, B_B8, B_B8A,
    NBUF,
    B_IN2 = NBUF,
    B_NONE = -1,
};
static const char *const buf_names[NBUF] = {
    "X", "Y", "P0", "P1", "T0", "T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9",
    "ACC", "O", "O2", "B8", "B8A",
};

struct vr_affine {
    CUdeviceptr out;
    CUdeviceptr in;
    float scale;
    float shift;
    unsigned long long n;
};

struct spec {
    enum kern k;
    int out, a, b;
    float s, t;
};

/* A chain of 18 nodes over the six kernels. ACC is never reset, so every
 * step's inputs leave a trace in the final bytes. */
static const struct spec graph_spec[] = {
    { K_FILL, B_T0, B_NONE, B_NONE, 1.0f, 0.0f },
    { K_SCALE, B_T1, B_X, B_NONE, 0.5f, 0.0f },
    { K_AXPY, B_T0, B_IN2, B_NONE, 2.0f, 0.0f },
    { K_ADD, B_T2, B_T0, B_T1, 0.0f, 0.0f },
    { K_AFFINE, B_T3, B_T2, B_NONE, 0.25f, 1.0f },
    { K_AXPY, B_ACC, B_T3, B_NONE, 0.125f, 0.0f },
    { K_SCALE, B_T4, B_ACC, B_NONE, 0.5f, 0.0f },
    { K_AFFINE, B_T5, B_T4, B_NONE, 0.5f, -1.0f },
    { K_ADD, B_O, B_T5, B_T3, 0.0f, 0.0f },
    { K_COPY, B_B8, B_O, B_NONE, 0.0f, 0.0f },
    { K_FILL, B_T6, B_NONE, B_NONE, 0.25f, 0.0f },
    { K_AXPY, B_T6, B_X, B_NONE, 0.5f, 0.0f },
    { K_AFFINE, B_T7, B_T6, B_NONE, 2.0f, 0.5f },
    { K_ADD, B_T8, B_T7, B_IN2, 0.0f, 0.0f },
    { K_AXPY, B_ACC, B_T8, B_NONE, 0.0625f, 0.0f },
    { K_SCALE, B_T9, B_T8, B_NONE, 0.25f, 0.0f },
    { K_ADD, B_O2, B_T9, B_O, 0.0f, 0.0f },
    { K_COPY, B_B8A, B_ACC, B_NONE, 0.0f, 0.0f },
};
#define NNODE (sizeof graph_spec / sizeof graph_spec[0])
#define MAXEXEC 4

enum pattern { P_STABLE, P_STRUCT, P_REBIND, P_REALLOC, P_PINGPONG, P_MIXED, P_SWAP, NPATTERN };
static const char *const pattern_names[NPATTERN] = {
    "stable", "struct", "rebind", "realloc", "pingpong", "mixed", "swap",
};

struct opts {
    enum pattern pattern;
    unsigned steps;
    unsigned k;
    size_t bytes;
    size_t extent; /* the bytes of each buffer the kernels cover, from its start */
    const char *out;
    const char *map;
    const char *ptx;
    bool capture;
    unsigned execs;
    unsigned cycles;
    bool threads;
    /* launches alternate between two streams: two created ones
     * (--two-streams), or two threads' per-thread default streams
     * (--ptds-threads); fills and copies go to the legacy stream, which
     * orders them with both */
    bool two_streams, ptds;
    bool tolerate;
    bool trace;
    unsigned update_at; /* 0: never */
    /* from this step on, every step captures the chain with its arguments
     * and updates the exec from the capture instead of SetParams; 0: never */
    unsigned recapture_from;
    unsigned regrid;    /* every N steps, every node launches half the blocks; 0: never */
    bool with_params;   /* instantiate with cuGraphInstantiateWithParams */
};

struct node {
    struct spec sp;
    CUfunction fn;
    CUgraphNode h;
    CUdeviceptr p[3];
    float f;
    unsigned long long n;
    struct vr_affine aff;
    void *kp[4];
    unsigned nargs;
    size_t argsz[4];
};

struct bytes {
    unsigned char *p;
    size_t len, cap;
};

/* Static, so the sanitizers' leak check sees everything reachable when an
 * error path exits early. */
static struct {
    const char *prog;
    const struct vr_drv *d;
    struct opts o;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn[NKERN];
    CUstream stream;
    CUgraph graph;
    CUgraphExec ex[MAXEXEC];
    CUdeviceptr buf[NBUF];
    struct node nodes[NNODE];
    unsigned long long launches, setparams;
    FILE *map;
    struct bytes res;
    int (*stats)(struct varemap_stats *out, size_t size);
    bool decided;
    bool half; /* this step launches half the blocks (--regrid) */
    /* --pattern swap: replaced X buffers, freed only at the end, so nothing
     * synchronizes between a replacement and the next launch */
    CUdeviceptr retired[256];
    unsigned nretired;
    /* the launcher thread of --stream-threads, the two of --ptds-threads */
    pthread_t thr[2];
    unsigned nthr, ready;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool job, quit;
    unsigned job_step;
    CUstream ls[2]; /* --two-streams */
} R;

static const char *errname(CUresult rc)
{
    const char *s = NULL;
    if (R.d->GetErrorName == NULL || R.d->GetErrorName(rc, &s) != CUDA_SUCCESS || s == NULL)
        return "CUDA_ERROR_UNKNOWN_CODE";
    return s;
}

static void check(const char *what, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        return;
    fprintf(stderr, "%s: cu%s: %s (%d)\n", R.prog, what, errname(rc), (int)rc);
    exit(1);
}

#define CK(fn, ...) check(#fn, R.d->fn(__VA_ARGS__))

__attribute__((format(printf, 1, 2))) static _Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", R.prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static _Noreturn void usage(void)
{
    fprintf(stderr,
            "usage: %s [--pattern stable|struct|rebind|realloc|pingpong|mixed|swap] [--steps N]\n"
            "  [--k N] [--bytes N] [--extent N] [--out FILE] [--map FILE] [--ptx PATH] [--capture]\n"
            "  [--execs N] [--cycles N] [--stream-threads] [--tolerate-launch-failure]\n"
            "  [--trace-decision] [--update-at STEP] [--regrid N] [--instantiate-with-params]\n"
            "  [--two-streams | --ptds-threads] [--recapture-from STEP]\n",
            R.prog);
    exit(2);
}

static unsigned long long parse_num(const char *s, unsigned long long max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    if (mul != 1)
        end++;
    if (errno || end == s || *end || s[0] == '-' || v > max / mul) {
        fprintf(stderr, "%s: bad number '%s'\n", R.prog, s);
        usage();
    }
    return v * mul;
}

static void parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .pattern = P_STABLE, .steps = 60, .k = 5, .bytes = 4u << 20,
                        .execs = 1 };
    const char *env = getenv("VR_PTX");
    o->ptx = env && *env ? env : VR_PTX_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool takes = true;
        if (!strcmp(a, "--pattern") && v) {
            unsigned p = 0;
            while (p < NPATTERN && strcmp(v, pattern_names[p]))
                p++;
            if (p == NPATTERN)
                usage();
            o->pattern = (enum pattern)p;
        } else if (!strcmp(a, "--steps") && v) {
            o->steps = (unsigned)parse_num(v, 1000000);
        } else if (!strcmp(a, "--k") && v) {
            o->k = (unsigned)parse_num(v, 1000000);
        } else if (!strcmp(a, "--bytes") && v) {
            o->bytes = (size_t)parse_num(v, 1ull << 36);
        } else if (!strcmp(a, "--extent") && v) {
            o->extent = (size_t)parse_num(v, 1ull << 36);
        } else if (!strcmp(a, "--out") && v) {
            o->out = v;
        } else if (!strcmp(a, "--map") && v) {
            o->map = v;
        } else if (!strcmp(a, "--ptx") && v) {
            o->ptx = v;
        } else if (!strcmp(a, "--execs") && v) {
            o->execs = (unsigned)parse_num(v, MAXEXEC);
        } else if (!strcmp(a, "--regrid") && v) {
            o->regrid = (unsigned)parse_num(v, 1000000);
        } else if (!strcmp(a, "--update-at") && v) {
            o->update_at = (unsigned)parse_num(v, 1000000);
        } else if (!strcmp(a, "--recapture-from") && v) {
            o->recapture_from = (unsigned)parse_num(v, 1000000);
        } else if (!strcmp(a, "--cycles") && v) {
            o->cycles = (unsigned)parse_num(v, 1000000);
        } else {
            takes = false;
            if (!strcmp(a, "--capture"))
                o->capture = true;
            else if (!strcmp(a, "--stream-threads"))
                o->threads = true;
            else if (!strcmp(a, "--two-streams"))
                o->two_streams = true;
            else if (!strcmp(a, "--ptds-threads"))
                o->ptds = true;
            else if (!strcmp(a, "--tolerate-launch-failure"))
                o->tolerate = true;
            else if (!strcmp(a, "--trace-decision"))
                o->trace = true;
            else if (!strcmp(a, "--instantiate-with-params"))
                o->with_params = true;
            else
                usage();
        }
        if (takes)
            i++;
    }
    /* --extent, or VR_EXTENT (how the suites ask for it): the kernels cover
     * the first N bytes of each buffer; the rest keeps its fills and is
     * read back and compared all the same. 0 or more than --bytes: all. */
    const char *ext = getenv("VR_EXTENT");
    if (!o->extent && ext && *ext)
        o->extent = (size_t)parse_num(ext, 1ull << 36);
    if (!o->extent || o->extent > o->bytes)
        o->extent = o->bytes;
    /* Whole floats only: a trailing partial word would be left unwritten by
     * the f32 kernels and make the byte comparison meaningless. */
    if (o->steps == 0 || o->k == 0 || o->execs == 0 || o->cycles >= o->steps ||
        o->bytes < 1024 || o->bytes % 4 || o->extent % 4 ||
        ((o->two_streams || o->ptds) && (o->capture || o->threads || o->recapture_from)))
        usage();
}

/* ---- buffers ------------------------------------------------------------ */

static bool pingpong(void)
{
    return R.o.pattern == P_PINGPONG || R.o.pattern == P_MIXED;
}
static bool rebind(void)
{
    return R.o.pattern == P_REBIND || R.o.pattern == P_MIXED;
}
static bool swap(void)
{
    return R.o.pattern == P_SWAP;
}

static bool realloc_out(void)
{
    return R.o.pattern == P_REALLOC || R.o.pattern == P_MIXED;
}
static bool structs(void)
{
    return R.o.pattern == P_STRUCT || R.o.pattern == P_MIXED;
}

static CUdeviceptr ptr(int b, unsigned step)
{
    if (b == B_NONE)
        return 0;
    if (b == B_IN2)
        return pingpong() ? R.buf[step % 2 ? B_P1 : B_P0] : R.buf[B_Y];
    return R.buf[b];
}

static bool struct_buf(int b)
{
    for (size_t i = 0; i < NNODE; i++)
        if (R.nodes[i].sp.k == K_AFFINE && (R.nodes[i].sp.out == b || R.nodes[i].sp.a == b))
            return true;
    return false;
}

static unsigned bits(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void fill(int b, float value)
{
    CK(MemsetD32Async, R.buf[b], bits(value), R.o.bytes / 4, R.stream);
}

/* The --map file lists every allocation ever made, so the suites can tell
 * which of the shim's candidates is which buffer. */
static void alloc_buf(int b)
{
    CK(MemAlloc_v2, &R.buf[b], R.o.bytes);
    if (R.map)
        fprintf(R.map, "buf %s 0x%llx %zu %s\n", buf_names[b], (unsigned long long)R.buf[b],
                R.o.bytes, struct_buf(b) ? "struct" : "plain");
}

/* New allocation first, then the old one freed: the address really changes,
 * and the free happens while earlier launches may still use the old one. */
static void replace_buf(int b, float value)
{
    CUdeviceptr old = R.buf[b];
    alloc_buf(b);
    fill(b, value);
    CK(MemFree_v2, old);
}

/* Replaced without a free: nothing synchronizes, so a launch still reading
 * the old X may be running when the next launch wants the new one. */
static void swap_buf(int b, float value)
{
    if (R.nretired == sizeof R.retired / sizeof R.retired[0])
        die("--pattern swap: too many replacements (raise --k)");
    R.retired[R.nretired++] = R.buf[b];
    alloc_buf(b);
    fill(b, value);
}

static float x_value(unsigned step)
{
    return 1.0f + 0.5f * (float)(step % 7);
}

/* ---- graph ------------------------------------------------------------- */

static void node_init(struct node *n, const struct spec *sp)
{
    n->sp = *sp;
    /* Under the struct pattern every scale goes through the by-value
     * struct, so most pointers the graph holds live inside structs. */
    if (structs() && n->sp.k == K_SCALE)
        n->sp.k = K_AFFINE;
    n->fn = R.fn[n->sp.k];
    switch (n->sp.k) {
    case K_FILL:
        n->nargs = 3;
        n->kp[0] = &n->p[0], n->argsz[0] = 8;
        n->kp[1] = &n->f, n->argsz[1] = 4;
        n->kp[2] = &n->n, n->argsz[2] = 8;
        break;
    case K_SCALE:
    case K_AXPY:
        n->nargs = 4;
        n->kp[0] = &n->p[0], n->argsz[0] = 8;
        n->kp[1] = &n->p[1], n->argsz[1] = 8;
        n->kp[2] = &n->f, n->argsz[2] = 4;
        n->kp[3] = &n->n, n->argsz[3] = 8;
        break;
    case K_ADD:
        n->nargs = 4;
        for (unsigned j = 0; j < 3; j++)
            n->kp[j] = &n->p[j], n->argsz[j] = 8;
        n->kp[3] = &n->n, n->argsz[3] = 8;
        break;
    case K_AFFINE:
        n->nargs = 1;
        n->kp[0] = &n->aff, n->argsz[0] = sizeof n->aff;
        break;
    case K_COPY:
        n->nargs = 3;
        n->kp[0] = &n->p[0], n->argsz[0] = 8;
        n->kp[1] = &n->p[1], n->argsz[1] = 8;
        n->kp[2] = &n->n, n->argsz[2] = 8;
        break;
    case NKERN:
        break;
    }
}

/* The values this step asks for; the kernelParams array stays the same. */
static void node_args(struct node *n, unsigned step)
{
    n->p[0] = ptr(n->sp.out, step);
    n->p[1] = ptr(n->sp.a, step);
    n->p[2] = ptr(n->sp.b, step);
    n->f = n->sp.s;
    n->n = n->sp.k == K_COPY ? R.o.extent : R.o.extent / 4;
    n->aff = (struct vr_affine){ n->p[0], n->p[1], n->sp.s, n->sp.t, R.o.extent / 4 };
}

static unsigned grid(const struct node *n)
{
    unsigned long long g = (n->n + 255) / 256;
    return g > 4096 ? 4096 : (unsigned)g;
}

static void build_by_nodes(void)
{
    CK(GraphCreate, &R.graph, 0);
    for (size_t i = 0; i < NNODE; i++) {
        struct node *n = &R.nodes[i];
        CUDA_KERNEL_NODE_PARAMS p = {
            .func = n->fn, .gridDimX = grid(n), .gridDimY = 1, .gridDimZ = 1,
            .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1, .kernelParams = n->kp,
        };
        CK(GraphAddKernelNode_v2, &n->h, R.graph, i ? &R.nodes[i - 1].h : NULL, i ? 1 : 0, &p);
    }
}

/* Captured nodes come back from cuGraphGetNodes in no documented order, so
 * each is matched to its spec by function and argument bytes (all 18
 * differ). */
static void build_by_capture(void)
{
    CK(StreamBeginCapture_v2, R.stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (size_t i = 0; i < NNODE; i++) {
        struct node *n = &R.nodes[i];
        CK(LaunchKernel, n->fn, grid(n), 1, 1, 256, 1, 1, 0, R.stream, n->kp, NULL);
    }
    CK(StreamEndCapture, R.stream, &R.graph);

    CUgraphNode got[NNODE + 1];
    size_t count = 0;
    CK(GraphGetNodes, R.graph, NULL, &count);
    if (count != NNODE)
        die("capture produced %zu nodes, expected %zu", count, (size_t)NNODE);
    CK(GraphGetNodes, R.graph, got, &count);
    bool taken[NNODE] = { false };
    for (size_t g = 0; g < count; g++) {
        CUgraphNodeType type;
        CK(GraphNodeGetType, got[g], &type);
        if (type != CU_GRAPH_NODE_TYPE_KERNEL)
            die("captured node %zu is not a kernel", g);
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        CK(GraphKernelNodeGetParams_v2, got[g], &p);
        size_t i = 0;
        for (; i < NNODE; i++) {
            struct node *n = &R.nodes[i];
            if (taken[i] || p.func != n->fn || !p.kernelParams)
                continue;
            unsigned j = 0;
            while (j < n->nargs && !memcmp(p.kernelParams[j], n->kp[j], n->argsz[j]))
                j++;
            if (j == n->nargs)
                break;
        }
        if (i == NNODE)
            die("captured node %zu matches no launch", g);
        taken[i] = true;
        R.nodes[i].h = got[g];
    }
}

static void instantiate(void)
{
    for (unsigned e = 0; e < R.o.execs; e++) {
        if (R.o.with_params) {
            CUDA_GRAPH_INSTANTIATE_PARAMS ip;
            memset(&ip, 0, sizeof ip);
            CK(GraphInstantiateWithParams, &R.ex[e], R.graph, &ip);
            if (ip.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS)
                die("instantiate result %d", (int)ip.result_out);
        } else {
            CK(GraphInstantiateWithFlags, &R.ex[e], R.graph, 0);
        }
    }
}

/* cuGraphExecUpdate from a freshly built graph of the same topology holding
 * this step's arguments. Exec calls keep naming the nodes of the graph the
 * execs were instantiated from (cuda.h), and only while that graph exists (a
 * GPU refuses them once it is destroyed: driver-answers.txt), so that graph
 * stays and the update graph goes. */
static void update_execs(unsigned step)
{
    CUgraph kept = R.graph;
    CUgraphNode keep[NNODE];
    for (size_t i = 0; i < NNODE; i++) {
        node_args(&R.nodes[i], step);
        keep[i] = R.nodes[i].h;
    }
    build_by_nodes();
    for (unsigned e = 0; e < R.o.execs; e++) {
        CUgraphExecUpdateResultInfo info;
        memset(&info, 0, sizeof info);
        CK(GraphExecUpdate_v2, R.ex[e], R.graph, &info);
    }
    CK(GraphDestroy, R.graph);
    R.graph = kept;
    for (size_t i = 0; i < NNODE; i++)
        R.nodes[i].h = keep[i];
}

static void destroy_execs(void)
{
    for (unsigned e = 0; e < R.o.execs; e++) {
        CK(GraphExecDestroy, R.ex[e]);
        R.ex[e] = NULL;
    }
}

/* The kernels are grid-stride loops: any grid computes the same bytes, so a
 * changed launch shape must reach the driver without changing the result. */
static unsigned shape(const struct node *n)
{
    unsigned g = grid(n);
    return R.half && g > 1 ? g / 2 : g;
}

/* Rotates the three SetParams entry points over the nodes. */
static void set_params(CUgraphExec ex, struct node *n, unsigned which)
{
    CUresult rc;
    R.setparams++;
    if (which == 0) {
        CUDA_KERNEL_NODE_PARAMS_v1 p = {
            .func = n->fn, .gridDimX = shape(n), .gridDimY = 1, .gridDimZ = 1,
            .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1, .kernelParams = n->kp,
        };
        rc = R.d->GraphExecKernelNodeSetParams(ex, n->h, &p);
        check("GraphExecKernelNodeSetParams", rc);
    } else if (which == 1) {
        CUDA_KERNEL_NODE_PARAMS p = {
            .func = n->fn, .gridDimX = shape(n), .gridDimY = 1, .gridDimZ = 1,
            .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1, .kernelParams = n->kp,
        };
        rc = R.d->GraphExecKernelNodeSetParams_v2(ex, n->h, &p);
        check("GraphExecKernelNodeSetParams_v2", rc);
    } else {
        CUgraphNodeParams p;
        memset(&p, 0, sizeof p); /* reserved fields must be zero */
        p.type = CU_GRAPH_NODE_TYPE_KERNEL;
        p.kernel.func = n->fn;
        p.kernel.gridDimX = shape(n), p.kernel.gridDimY = 1, p.kernel.gridDimZ = 1;
        p.kernel.blockDimX = 256, p.kernel.blockDimY = 1, p.kernel.blockDimZ = 1;
        p.kernel.kernelParams = n->kp;
        rc = R.d->GraphExecNodeSetParams(ex, n->h, &p);
        check("GraphExecNodeSetParams", rc);
    }
}

static void trace_decision(void)
{
    struct varemap_stats st;
    if (!R.o.trace || R.decided || !R.stats || R.stats(&st, sizeof st) != 0)
        return;
    if (st.execs_active + st.execs_disabled > 0) {
        R.decided = true;
        fprintf(stderr, "decided_after_launch=%llu\n", R.launches);
    }
}

/* --recapture-from: the step's chain captured from the program's stream
 * (each launch behind the one before: the chain's edges) and the exec
 * updated from it, as programs that capture every step do; the caller
 * destroys the capture after the launch. */
static CUgraph recapture(CUgraphExec ex, unsigned step)
{
    CUgraph g;
    CK(StreamBeginCapture_v2, R.stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (size_t i = 0; i < NNODE; i++) {
        struct node *n = &R.nodes[i];
        node_args(n, step);
        CK(LaunchKernel, n->fn, shape(n), 1, 1, 256, 1, 1, 0, R.stream, n->kp, NULL);
    }
    CK(StreamEndCapture, R.stream, &g);
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CK(GraphExecUpdate_v2, ex, g, &info);
    return g;
}

/* What a framework does per step: re-point every node (or recapture), then
 * launch. */
static void launch_step(unsigned step)
{
    CUgraphExec ex = R.ex[step % R.o.execs];
    R.half = R.o.regrid && step > 0 && step % R.o.regrid == 0;
    CUgraph captured = NULL;
    if (R.o.recapture_from && step >= R.o.recapture_from)
        captured = recapture(ex, step);
    for (size_t i = 0; i < NNODE && !captured; i++) {
        node_args(&R.nodes[i], step);
        set_params(ex, &R.nodes[i], (unsigned)(i % 3));
    }
    R.launches++;
    CUstream s = R.o.ptds ? CU_STREAM_PER_THREAD : R.o.two_streams ? R.ls[step % 2] : R.stream;
    CUresult rc = R.d->GraphLaunch(ex, s);
    if (rc != CUDA_SUCCESS && R.o.tolerate)
        fprintf(stderr, "%s: launch %llu failed: %s\n", R.prog, R.launches, errname(rc));
    else
        check("GraphLaunch", rc);
    if (captured)
        CK(GraphDestroy, captured);
    trace_decision();
}

static void *launcher(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    CK(CtxSetCurrent, R.ctx);
    pthread_mutex_lock(&R.mu);
    /* Started before the first step: a failing step's exit finds no thread
     * still starting (the error lines stay the same run after run). */
    R.ready++;
    pthread_cond_broadcast(&R.cv);
    for (;;) {
        while (!(R.job && R.job_step % R.nthr == me) && !R.quit)
            pthread_cond_wait(&R.cv, &R.mu);
        if (R.quit)
            break;
        pthread_mutex_unlock(&R.mu);
        launch_step(R.job_step);
        pthread_mutex_lock(&R.mu);
        R.job = false;
        pthread_cond_broadcast(&R.cv);
    }
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

/* Hands the step to the launcher thread and waits for its calls to return
 * (not for the GPU work), so the run stays deterministic. */
static void launch(unsigned step)
{
    if (!R.nthr) {
        launch_step(step);
        return;
    }
    pthread_mutex_lock(&R.mu);
    R.job_step = step;
    R.job = true;
    pthread_cond_broadcast(&R.cv);
    while (R.job)
        pthread_cond_wait(&R.cv, &R.mu);
    pthread_mutex_unlock(&R.mu);
}

/* ---- results ----------------------------------------------------------- */

static void keep(int b)
{
    if (R.res.cap - R.res.len < R.o.bytes) {
        size_t cap = R.res.cap ? R.res.cap * 2 : R.o.bytes * 8;
        while (cap - R.res.len < R.o.bytes)
            cap *= 2;
        unsigned char *p = realloc(R.res.p, cap);
        if (!p)
            die("out of host memory");
        R.res.p = p;
        R.res.cap = cap;
    }
    CK(MemcpyDtoH_v2, R.res.p + R.res.len, R.buf[b], R.o.bytes);
    R.res.len += R.o.bytes;
}

static void snapshot(void)
{
    CK(StreamSynchronize, R.stream);
    keep(B_ACC);
    keep(B_O);
}

/* FNV-1a over 8-byte words with a final avalanche: cheap, and a change in
 * any result byte shows in the printed line (plain byte-wise FNV kept its low
 * bits fixed over our 64 KiB-multiple buffers). */
static uint64_t checksum(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 31;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static void write_out(void)
{
    FILE *f = fopen(R.o.out, "wb");
    if (!f || fwrite(R.res.p, 1, R.res.len, f) != R.res.len || fclose(f) != 0)
        die("cannot write %s", R.o.out);
}

/* ---- main -------------------------------------------------------------- */

static void setup(void)
{
    CK(Init, 0);
    CK(DeviceGet, &R.dev, 0);
    CK(DevicePrimaryCtxRetain, &R.ctx, R.dev);
    CK(CtxSetCurrent, R.ctx);

    char *ptx = vr_read_text(R.o.ptx);
    if (!ptx)
        die("cannot open PTX %s", R.o.ptx);
    CK(ModuleLoadData, &R.mod, ptx);
    free(ptx);
    for (unsigned k = 0; k < NKERN; k++)
        CK(ModuleGetFunction, &R.fn[k], R.mod, kern_names[k]);
    if (R.o.two_streams || R.o.ptds) {
        R.stream = NULL;
        for (int i = 0; R.o.two_streams && i < 2; i++)
            CK(StreamCreate, &R.ls[i], CU_STREAM_DEFAULT);
    } else {
        CK(StreamCreate, &R.stream, CU_STREAM_DEFAULT);
    }

    for (size_t i = 0; i < NNODE; i++)
        node_init(&R.nodes[i], &graph_spec[i]);
    for (int b = 0; b < NBUF; b++) {
        alloc_buf(b);
        fill(b, 0.0f);
    }
    fill(B_X, x_value(0));
    fill(B_Y, 3.0f);
    fill(B_P0, 2.0f);
    fill(B_P1, -1.5f);
    for (size_t i = 0; i < NNODE; i++)
        node_args(&R.nodes[i], 0);
    /* Capture must not see the fills; the nodes only ever run after them. */
    CK(StreamSynchronize, R.stream);
    if (R.o.capture)
        build_by_capture();
    else
        build_by_nodes();
    instantiate();

    R.nthr = R.o.ptds ? 2 : R.o.threads ? 1 : 0;
    if (R.nthr) {
        pthread_mutex_init(&R.mu, NULL);
        pthread_cond_init(&R.cv, NULL);
        for (uintptr_t i = 0; i < R.nthr; i++)
            if (pthread_create(&R.thr[i], NULL, launcher, (void *)i) != 0)
                die("cannot start the launcher thread");
        pthread_mutex_lock(&R.mu);
        while (R.ready < R.nthr)
            pthread_cond_wait(&R.cv, &R.mu);
        pthread_mutex_unlock(&R.mu);
    }
}

static void teardown(void)
{
    if (R.nthr) {
        pthread_mutex_lock(&R.mu);
        R.quit = true;
        pthread_cond_broadcast(&R.cv);
        pthread_mutex_unlock(&R.mu);
        for (unsigned i = 0; i < R.nthr; i++)
            pthread_join(R.thr[i], NULL);
        pthread_cond_destroy(&R.cv);
        pthread_mutex_destroy(&R.mu);
    }
    destroy_execs();
    CK(GraphDestroy, R.graph);
    for (int b = 0; b < NBUF; b++)
        CK(MemFree_v2, R.buf[b]);
    while (R.nretired)
        CK(MemFree_v2, R.retired[--R.nretired]);
    if (R.stream)
        CK(StreamDestroy_v2, R.stream);
    for (int i = 0; i < 2; i++)
        if (R.ls[i])
            CK(StreamDestroy_v2, R.ls[i]);
    CK(ModuleUnload, R.mod);
    CK(DevicePrimaryCtxRelease_v2, R.dev);
}

static void run(void)
{
    unsigned S = R.o.steps;
    unsigned next_cycle = 1;
    for (unsigned s = 0; s < S; s++) {
        /* --cycles N: N evenly spaced destroy + re-instantiate points */
        if (next_cycle <= R.o.cycles && s == (unsigned)((unsigned long long)S * next_cycle /
                                                        (R.o.cycles + 1))) {
            destroy_execs();
            instantiate();
            next_cycle++;
        }
        if (R.o.update_at && s == R.o.update_at)
            update_execs(s);
        if (rebind() && s > 0 && s % R.o.k == 0)
            replace_buf(B_X, x_value(s));
        else if (swap() && s > 0 && s % R.o.k == 0)
            swap_buf(B_X, x_value(s));
        else if (s > 0)
            fill(B_X, x_value(s));
        if (realloc_out() && s > 0)
            replace_buf(B_O, 0.0f);

        launch(s);

        if (S >= 4 && (s + 1 == S / 4 || s + 1 == S / 2 || s + 1 == 3 * S / 4))
            snapshot();
    }
    CK(StreamSynchronize, R.stream);
    for (int b = 0; b < NBUF; b++)
        keep(b);
}

int vr_scenario_main(const char *prog, int argc, char **argv, const struct vr_drv *drv)
{
    R.prog = prog;
    R.d = drv;
    parse(argc, argv, &R.o);
    if (R.o.map && !(R.map = fopen(R.o.map, "w")))
        die("cannot write %s", R.o.map);
    if (R.o.trace) {
        void *fn = dlsym(RTLD_DEFAULT, "varemap_get_stats");
        memcpy(&R.stats, &fn, sizeof fn);
    }

    setup();
    run();
    teardown();

    if (R.o.out)
        write_out();
    if (R.map && fclose(R.map) != 0)
        die("cannot write %s", R.o.map);
    R.map = NULL;
    printf("steps=%u launches=%llu setparams=%llu checksum=%016" PRIx64 "\n", R.o.steps,
           R.launches, R.setparams, checksum(R.res.p, R.res.len));
    free(R.res.p);
    R.res = (struct bytes){ 0 };
    return 0;
}
