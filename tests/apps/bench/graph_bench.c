/* graph_bench: the host cost of a naive framework that re-sets every kernel
 * node's parameters before every graph launch.
 *
 * A graph of N kernel nodes (a dependency chain over the standard kernels)
 * reads and writes Bs working buffers (--buffers) plus four role buffers:
 *   X      input, refilled every step (cuMemsetD32Async); under `rebind` it
 *          is replaced by a new allocation every k steps
 *   O      output of the last node; under `realloc` a new allocation every step
 *   P0/P1  state carried from step to step: read early in the chain, written
 *          by the next-to-last node; under `pingpong` the graph reads P[s%2]
 *          and writes P[(s+1)%2]
 * The fan patterns add B fan buffers (--fan, default 8); node i references
 * fan buffer i % B, so each one is referenced by N/B nodes, and every step
 * each fan buffer is replaced:
 *   fanout    by another member of its own pool of M allocations (--pool,
 *             default 4), chosen at random (seeded by --seed: reproducible,
 *             no period)
 *   periodic  by the next member of its pool of P allocations (--period,
 *             default 3), cycled in a fixed order
 *   churn     by a new allocation (cuMemAlloc) made this step; the previous
 *             step's B are freed (cuMemFree) after the launch, so two
 *             generations are alive at once
 * --still-from S stops fanout's and periodic's replacements at step S (each
 * fan buffer keeps the member it had): buffers that move for a while, then
 * settle. --moving-from S starts them at step S: buffers still for a while
 * (a profile sees them still), then moving.
 * Two patterns make a new graph every step instead of re-setting the
 * exec's nodes, and update the exec from it (cuGraphExecUpdate_v2), as
 * programs that capture or rebuild their step do; the buffers move as
 * --moves says (stable, rebind, realloc, pingpong: as those patterns):
 *   recapture  cuStreamBeginCapture (--capture-mode global|thread|relaxed)
 *              on the program's stream, N cuLaunchKernel with this step's
 *              buffers, cuStreamEndCapture; the exec is instantiated from
 *              the same capture of step 0
 *   rebuild    cuGraphCreate and N cuGraphAddKernelNode_v2 (the chain of
 *              the other patterns)
 * then cuGraphExecUpdate_v2 (its result must be success), cuGraphLaunch and
 * cuGraphDestroy of the step's graph. The exec keeps naming the nodes of
 * the graph it was instantiated from, which lives to the end.
 * The first B nodes add X (or the carried state) into their pool member;
 * under churn they write it, so a fresh allocation needs no initialization.
 * Every step: pattern work (alloc/free), refill X, SetParams on all N nodes
 * (recapture, rebuild: the new graph and the update), one cuGraphLaunch, the pattern's frees, and every --sync-every steps a
 * cuStreamSynchronize (default 0: only after the last step). The first
 * --warmup steps are not timed (they contain the shim's profile window and
 * transition; their wall times are printed one by one); the rest are: wall
 * time per step (the steps' own clock), the calling thread's and the whole
 * process's CPU time per step, and the time inside the SetParams loop and
 * inside cuGraphLaunch (wall, and the calling thread's CPU); recapture also
 * prints capture_ns_per_kernel (and _median): the calling thread's CPU time
 * of one step's capture, least (median) over the timed steps, divided by N,
 * whose difference with and without the shim is the shim's own work per
 * captured kernel (scripts/bench: capture_ns.* checks). The heap in use (mallinfo2: arena + mmapped chunks)
 * is read right after the timed steps, before anything is freed, and with it
 * the part of it that simcuda holds for its own objects (graphs, execs,
 * streams: driver memory on a GPU), from the simcuda-only query
 * simcuda_heap_bytes (null on a real driver, which has no such symbol).
 * Both leave out what simcuda parks in its free lists for reuse
 * (simcuda_heap_parked_bytes): how much that is follows timing.
 *
 * The program verifies itself twice: it replays every step on the host (the
 * standard kernels' formulas on host arrays) and compares the first --elems
 * floats of every buffer (every pool member of the fan patterns) with that
 * reference (relative error <= 1e-4: a GPU may fuse multiply-adds); and it
 * prints a checksum (FNV-1a 64 of the same floats) that must be identical
 * with and without the shim, in every mode. A failed comparison makes the
 * exit status 3.
 *
 * Output: a few human lines, then one JSON object as the last line of stdout
 * (fields documented in scripts/bench). Only documented driver API calls, so
 * it builds against simcuda and against the real libcuda.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <varemap/varemap.h>

#include "../ptx_text.h"

#ifndef VR_PTX_DEFAULT
#define VR_PTX_DEFAULT "vr_kernels.ptx"
#endif

enum pattern {
    P_STABLE, P_REBIND, P_REALLOC, P_PINGPONG, P_FANOUT, P_PERIODIC, P_CHURN,
    P_RECAPTURE, P_REBUILD, NPATTERN
};
static const char *const pattern_names[NPATTERN] = { "stable",  "rebind",   "realloc",   "pingpong",
                                                     "fanout",  "periodic", "churn",     "recapture",
                                                     "rebuild" };

/* recapture and rebuild: how the buffers move under the graph, as the
 * pattern of the same name does (the first four patterns, in order). */
enum moves { M_STABLE, M_REBIND, M_REALLOC, M_PINGPONG, NMOVES };
static const char *const moves_names[NMOVES] = { "stable", "rebind", "realloc", "pingpong" };

/* recapture: the mode of every step's cuStreamBeginCapture. */
static const char *const cmode_names[] = { "global", "thread", "relaxed" };
static const CUstreamCaptureMode cmodes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                             CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                             CU_STREAM_CAPTURE_MODE_RELAXED };
#define NCMODE (sizeof cmodes / sizeof cmodes[0])

enum kmix { KM_MIX, KM_SCALE, KM_STRUCT, NKMIX };
static const char *const kmix_names[NKMIX] = { "mix", "scale", "struct" };

enum order { O_FORWARD, O_REVERSE, O_SHUFFLE, NORDER };
static const char *const order_names[NORDER] = { "forward", "reverse", "shuffle" };

enum api { API_V2, API_V1, API_NODE, NAPI };
static const char *const api_names[NAPI] = { "v2", "v1", "node" };
static const char *const api_syms[NAPI] = {
    "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecKernelNodeSetParams",
    "cuGraphExecNodeSetParams",
};

enum kern { K_SCALE, K_AXPY, K_ADD, K_AFFINE, NKERN };
static const char *const kern_names[NKERN] = { "vr_scale_f32", "vr_axpy_f32", "vr_add_f32",
                                               "vr_affine_struct" };

/* Buffer roles: 0..Bs-1 are working buffers, R_FAN - b is fan buffer b, the
 * rest resolve per step. */
enum { R_X = -1, R_PCUR = -2, R_PNEXT = -3, R_O = -4, R_NONE = -5, R_FAN = -100 };

struct vr_affine {
    CUdeviceptr out;
    CUdeviceptr in;
    float scale;
    float shift;
    unsigned long long n;
};

struct node {
    enum kern k;
    int out, a, b; /* roles */
    float s, t;
    CUgraphNode h;
    /* argument storage the kernelParams array points at */
    CUdeviceptr p[3];
    float f;
    unsigned long long n;
    struct vr_affine aff;
    void *kp[4];
};

struct opts {
    enum pattern pattern;
    enum kmix kmix;
    enum api api;
    enum order order;
    enum moves moves;  /* recapture, rebuild */
    unsigned cmode;    /* recapture: index into cmodes */
    unsigned nodes, buffers, steps, warmup, k, sync_every, fan, pool, period;
    unsigned still_from; /* fanout, periodic: no buffer moves from this step on (0: never) */
    unsigned moving_from; /* fanout, periodic: no buffer moves before this step */
    bool destroy_graph; /* recapture, rebuild: the exec's graph destroyed right after the
                         * instantiate (PyTorch's, TensorRT-LLM's way) */
    unsigned long long seed;
    size_t bytes, elems;
    const char *ptx;
};

static struct {
    struct opts o;
    CUcontext ctx;
    CUdevice dev;
    CUmodule mod;
    CUfunction fn[NKERN];
    CUstream stream;
    CUgraph graph;
    CUgraphExec exec;
    CUdeviceptr *w;
    CUdeviceptr x, out, pp[2];
    /* fan patterns: the current allocation of each fan buffer, its pool
     * (fanout: M members, periodic: P; churn: the previous generation) */
    CUdeviceptr *fan, *pool, *prev;
    unsigned *member;
    uint64_t rng, order_rng;
    struct node *nodes;
    unsigned *order; /* the order of this step's SetParams calls */
    unsigned grid, block;
    int (*stats)(struct varemap_stats *, size_t);
    long long (*driver_heap)(void); /* simcuda only */
    long long (*driver_parked)(void); /* simcuda only: its free lists */
    /* simcuda only: its entry points' names, call counters and prices. */
    const char *(*entry_name)(int);
    unsigned long long (*entry_calls)(int);
    unsigned long long (*entry_cost)(int);
    /* calls this program made during the timed steps */
    unsigned long long c_setparams, c_launch, c_memset, c_alloc, c_free, c_sync;
    /* recapture and rebuild: their graph calls in the timed steps, and the
     * nodes whose arguments differ from the previous step's */
    unsigned long long c_update, c_changed;
    unsigned char *prev_args; /* each node's argument bytes at the previous step */
    size_t arg_stride;
    uint64_t *warm_ns; /* wall time of each untimed step */
    void *sink;
} G;

static const char *prog = "graph_bench";

__attribute__((format(printf, 1, 2))) static _Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void check(const char *what, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        return;
    const char *name = NULL;
    if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == NULL)
        name = "CUDA_ERROR_UNKNOWN_CODE";
    die("%s: %s (%d)", what, name, (int)rc);
}

#define CK(call) check(#call, (call))

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

static _Noreturn void usage(void)
{
    fprintf(stderr,
            "usage: %s [--pattern stable|rebind|realloc|pingpong|fanout|periodic|churn|\n"
            "                     recapture|rebuild]\n"
            "  [--nodes N] [--buffers Bs] [--fan B] [--pool M] [--period P] [--seed S]\n"
            "  [--steps S] [--warmup W] [--k K] [--bytes N] [--elems N]\n"
            "  [--kernel mix|scale|struct] [--api v2|v1|node] [--sync-every K] [--ptx PATH]\n"
            "  [--order forward|reverse|shuffle] [--still-from S] [--moving-from S]\n"
            "  [--moves stable|rebind|realloc|pingpong] [--capture-mode global|thread|relaxed]\n"
            "  [--destroy-graph no|yes]\n"
            "defaults: stable, 1000 nodes, 16 buffers, fan 8, pool 4, period 3, seed 1,\n"
            "  200 steps, warmup 10, k 10, bytes 1M, elems 256, kernel mix, api v2,\n"
            "  sync-every 0 (only after the last step), order forward (shuffle: a new\n"
            "  random order of the SetParams calls every step), still-from 0 (fanout\n"
            "  and periodic move their buffers at every step; S: at steps before S only),\n"
            "  moving-from 0 (S: fanout and periodic move their buffers from step S on)\n"
            "recapture and rebuild make a new graph every step (stream capture, or\n"
            "  cuGraphCreate + cuGraphAddKernelNode) with this step's buffers and update\n"
            "  the exec from it (cuGraphExecUpdate_v2) instead of SetParams; --moves\n"
            "  (default stable) moves their buffers as the pattern of that name does;\n"
            "  --capture-mode (recapture; default global) is cuStreamBeginCapture's mode;\n"
            "  --destroy-graph yes (recapture, rebuild) destroys the graph the exec is\n"
            "  instantiated from right after the instantiate\n",
            prog);
    exit(2);
}

static unsigned long long parse_num(const char *s, unsigned long long max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    if (mul != 1)
        end++;
    if (errno || end == s || *end || s[0] == '-' || v > max / mul) {
        fprintf(stderr, "%s: bad number '%s'\n", prog, s);
        usage();
    }
    return v * mul;
}

static unsigned pick(const char *v, const char *const *names, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    fprintf(stderr, "%s: unknown value '%s'\n", prog, v);
    usage();
}

static void parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .pattern = P_STABLE, .kmix = KM_MIX, .api = API_V2, .nodes = 1000,
                        .buffers = 16, .steps = 200, .warmup = 10, .k = 10, .bytes = 1u << 20,
                        .elems = 256, .fan = 8, .pool = 4, .period = 3, .seed = 1 };
    const char *env = getenv("VR_PTX");
    o->ptx = env && *env ? env : VR_PTX_DEFAULT;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            usage();
        if (!v)
            usage();
        if (!strcmp(a, "--pattern"))
            o->pattern = (enum pattern)pick(v, pattern_names, NPATTERN);
        else if (!strcmp(a, "--kernel"))
            o->kmix = (enum kmix)pick(v, kmix_names, NKMIX);
        else if (!strcmp(a, "--api"))
            o->api = (enum api)pick(v, api_names, NAPI);
        else if (!strcmp(a, "--order"))
            o->order = (enum order)pick(v, order_names, NORDER);
        else if (!strcmp(a, "--moves"))
            o->moves = (enum moves)pick(v, moves_names, NMOVES);
        else if (!strcmp(a, "--capture-mode"))
            o->cmode = pick(v, cmode_names, NCMODE);
        else if (!strcmp(a, "--nodes"))
            o->nodes = (unsigned)parse_num(v, 1000000);
        else if (!strcmp(a, "--buffers"))
            o->buffers = (unsigned)parse_num(v, 4096);
        else if (!strcmp(a, "--fan"))
            o->fan = (unsigned)parse_num(v, 4096);
        else if (!strcmp(a, "--pool"))
            o->pool = (unsigned)parse_num(v, 1024);
        else if (!strcmp(a, "--period"))
            o->period = (unsigned)parse_num(v, 1024);
        else if (!strcmp(a, "--seed"))
            o->seed = parse_num(v, ~0ull);
        else if (!strcmp(a, "--steps"))
            o->steps = (unsigned)parse_num(v, 100000000);
        else if (!strcmp(a, "--warmup"))
            o->warmup = (unsigned)parse_num(v, 100000000);
        else if (!strcmp(a, "--k"))
            o->k = (unsigned)parse_num(v, 100000000);
        else if (!strcmp(a, "--still-from"))
            o->still_from = (unsigned)parse_num(v, 100000000);
        else if (!strcmp(a, "--moving-from"))
            o->moving_from = (unsigned)parse_num(v, 100000000);
        else if (!strcmp(a, "--sync-every"))
            o->sync_every = (unsigned)parse_num(v, 100000000);
        else if (!strcmp(a, "--bytes"))
            o->bytes = (size_t)parse_num(v, 1ull << 34);
        else if (!strcmp(a, "--elems"))
            o->elems = (size_t)parse_num(v, 1ull << 32);
        else if (!strcmp(a, "--ptx"))
            o->ptx = v;
        else if (!strcmp(a, "--destroy-graph"))
            o->destroy_graph = pick(v, (const char *const[]){"no", "yes"}, 2) == 1;
        else
            usage();
    }
    if (o->nodes < 4 || o->buffers < 4 || o->steps == 0 || o->warmup >= o->steps || o->k == 0 ||
        o->elems == 0 || o->bytes % 4 || o->elems > o->bytes / 4 || o->fan < 2 ||
        o->fan + 2 > o->nodes || o->pool < 2 || o->period < 2) {
        fprintf(stderr, "%s: need nodes >= 4, buffers >= 4, warmup < steps, k >= 1,\n"
                        "  0 < elems <= bytes/4, 2 <= fan <= nodes - 2, pool >= 2, period >= 2\n",
                prog);
        usage();
    }
    bool updates = o->pattern == P_RECAPTURE || o->pattern == P_REBUILD;
    for (int i = 1; i < argc; i += 2) {
        bool moves = !strcmp(argv[i], "--moves") || !strcmp(argv[i], "--destroy-graph"),
             cmode = !strcmp(argv[i], "--capture-mode");
        if ((moves && !updates) || (cmode && o->pattern != P_RECAPTURE) ||
            (updates && (!strcmp(argv[i], "--api") || !strcmp(argv[i], "--order")))) {
            fprintf(stderr, "%s: %s does not apply to --pattern %s\n", prog, argv[i],
                    pattern_names[o->pattern]);
            usage();
        }
    }
}

/* ---- graph ------------------------------------------------------------- */

static unsigned bits(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float x_value(unsigned step)
{
    return 1.0f + 0.5f * (float)(step % 7);
}

/* The patterns that update the exec from a new graph every step. */
static bool update_pattern(void)
{
    return G.o.pattern == P_RECAPTURE || G.o.pattern == P_REBUILD;
}

/* How the role buffers move: the pattern's own rule, or --moves. */
static enum pattern moves(void)
{
    static const enum pattern as[NMOVES] = { P_STABLE, P_REBIND, P_REALLOC, P_PINGPONG };
    return update_pattern() ? as[G.o.moves] : G.o.pattern;
}

static bool fan_pattern(void)
{
    return G.o.pattern == P_FANOUT || G.o.pattern == P_PERIODIC || G.o.pattern == P_CHURN;
}

/* Members of each fan buffer's pool; churn allocates instead. */
static unsigned pool_size(void)
{
    return G.o.pattern == P_FANOUT ? G.o.pool : G.o.pattern == P_PERIODIC ? G.o.period : 0;
}

static uint64_t next_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The pool member each fan buffer uses at this step (>= 1), from the
 * previous step's; the run and the host replay both call it, so they see one
 * sequence. fanout: any other member, at random; periodic: step mod P. */
static void choose(unsigned step, unsigned *member, uint64_t *rng)
{
    if ((G.o.still_from && step >= G.o.still_from) || step < G.o.moving_from)
        return; /* the buffers settle (or have not started moving): each keeps its member */
    for (unsigned b = 0; b < G.o.fan; b++) {
        if (G.o.pattern == P_FANOUT)
            member[b] = (member[b] + 1 + (unsigned)(next_rand(rng) % (G.o.pool - 1))) % G.o.pool;
        else if (G.o.pattern == P_PERIODIC)
            member[b] = step % G.o.period;
    }
}

static CUdeviceptr resolve(int role, unsigned step)
{
    if (role <= R_FAN)
        return G.fan[R_FAN - role];
    switch (role) {
    case R_X: return G.x;
    case R_O: return G.out;
    case R_PCUR: return moves() == P_PINGPONG ? G.pp[step % 2] : G.pp[0];
    case R_PNEXT: return moves() == P_PINGPONG ? G.pp[(step + 1) % 2] : G.pp[0];
    case R_NONE: return 0;
    default: return G.w[role];
    }
}

/* The fan patterns' plan: node i references fan buffer i % B. The first B
 * nodes update their fan buffer from X or the carried state: a pool member
 * accumulates (F += src/2) and nothing else writes it, so its contents are
 * the sum over the steps it was used in, exactly (no rounding at these
 * sizes), and a step that updated the wrong member shows in the checksum
 * to the end. churn's fresh allocations are written (F = src/2) before
 * anything reads them. Every later node reads its fan buffer into a
 * working buffer of its own in its round (W[(b + r) mod Bs]), so no node's
 * read is lost to another's write in the same round: the mix cycles
 * S = F + S', S = F/4, S += F/2, S = F/2 + t. Values grow with the steps
 * (a member used k times holds about 1.25 k), never faster.
 * (Before, every round wrote one shared W and rounds wrote F back from it:
 * all members converged to one value within a few dozen steps, and a wrong
 * member after that changed no output byte.) */
static void plan_fan(void)
{
    const unsigned n = G.o.nodes, nb = G.o.buffers, nf = G.o.fan;
    for (unsigned i = 0; i < n; i++) {
        struct node *nd = &G.nodes[i];
        int f = R_FAN - (int)(i % nf);
        unsigned r = i / nf - 1; /* rounds of B nodes after the first */
        int w = (int)((i % nf + r) % nb), w2 = (int)((i % nf + r + 1) % nb);
        float t = 0.25f * (float)(i % 4);
        if (i < nf) {
            *nd = (struct node){ .k = G.o.pattern == P_CHURN ? K_SCALE : K_AXPY, .out = f,
                                 .a = i % 2 ? R_PCUR : R_X, .b = R_NONE, .s = 0.5f };
            continue;
        }
        if (G.o.kmix == KM_MIX) {
            switch (r % 4) {
            case 0: *nd = (struct node){ .k = K_ADD, .out = w, .a = f, .b = w2 }; break;
            case 1: *nd = (struct node){ .k = K_SCALE, .out = w, .a = f, .b = R_NONE, .s = 0.25f };
                break;
            case 2: *nd = (struct node){ .k = K_AXPY, .out = w, .a = f, .b = R_NONE, .s = 0.5f };
                break;
            default:
                *nd = (struct node){ .k = K_AFFINE, .out = w, .a = f, .b = R_NONE, .s = 0.5f,
                                     .t = t };
                break;
            }
        } else {
            enum kern k = G.o.kmix == KM_SCALE ? K_SCALE : K_AFFINE;
            *nd = (struct node){ .k = k, .out = w, .a = f, .b = R_NONE, .s = 0.5f, .t = t };
        }
    }
}

/* The node plan. Every node's result stays bounded (no inf/NaN): adds and
 * accumulations are followed by scalings by 1/4 or 1/2. */
static void plan(void)
{
    const unsigned n = G.o.nodes, b = G.o.buffers;
    for (unsigned i = 0; i < n && !fan_pattern(); i++) {
        struct node *nd = &G.nodes[i];
        unsigned g = i / 4;
        int d = (int)(g % b);
        if (G.o.kmix == KM_MIX) {
            int c = g % 16 == 0 ? R_X : g % 16 == 8 ? R_PCUR : (int)((g + 3) % b);
            switch (i % 4) {
            case 0: *nd = (struct node){ .k = K_ADD, .out = d, .a = (int)((g + 1) % b),
                                         .b = (int)((g + 2) % b) }; break;
            case 1: *nd = (struct node){ .k = K_AXPY, .out = d, .a = c, .b = R_NONE, .s = 0.5f };
                break;
            case 2: *nd = (struct node){ .k = K_SCALE, .out = d, .a = d, .b = R_NONE, .s = 0.25f };
                break;
            default:
                *nd = (struct node){ .k = K_AFFINE, .out = (int)((g + 4) % b), .a = d,
                                     .b = R_NONE, .s = 0.5f, .t = 0.25f * (float)(g % 4) };
                break;
            }
        } else {
            int src = i % 64 == 0 ? R_X : i % 64 == 32 ? R_PCUR : (int)((i + 1) % b);
            *nd = (struct node){ .k = G.o.kmix == KM_SCALE ? K_SCALE : K_AFFINE,
                                 .out = (int)(i % b), .a = src, .b = R_NONE, .s = 0.5f,
                                 .t = 0.25f };
        }
    }
    if (fan_pattern())
        plan_fan();
    /* the last two nodes write the carried state and the output */
    enum kern last = G.o.kmix == KM_SCALE ? K_SCALE : K_AFFINE;
    G.nodes[n - 2] = (struct node){ .k = last, .out = R_PNEXT, .a = (int)((n - 2) % b),
                                    .b = R_NONE, .s = 0.5f, .t = 0.125f };
    G.nodes[n - 1] = (struct node){ .k = last, .out = R_O, .a = (int)((n - 1) % b),
                                    .b = R_NONE, .s = 0.5f, .t = 0.375f };
}

/* Fill a node's argument storage for this step; returns its kernelParams. */
static void **args(struct node *nd, unsigned step)
{
    nd->n = G.o.elems;
    switch (nd->k) {
    case K_SCALE: /* (out, in, s, n) */
    case K_AXPY:  /* (y, x, a, n) */
        nd->p[0] = resolve(nd->out, step);
        nd->p[1] = resolve(nd->a, step);
        nd->f = nd->s;
        nd->kp[0] = &nd->p[0];
        nd->kp[1] = &nd->p[1];
        nd->kp[2] = &nd->f;
        nd->kp[3] = &nd->n;
        break;
    case K_ADD: /* (out, a, b, n) */
        nd->p[0] = resolve(nd->out, step);
        nd->p[1] = resolve(nd->a, step);
        nd->p[2] = resolve(nd->b, step);
        nd->kp[0] = &nd->p[0];
        nd->kp[1] = &nd->p[1];
        nd->kp[2] = &nd->p[2];
        nd->kp[3] = &nd->n;
        break;
    default: /* (struct vr_affine) */
        nd->aff = (struct vr_affine){ resolve(nd->out, step), resolve(nd->a, step), nd->s,
                                      nd->t, G.o.elems };
        nd->kp[0] = &nd->aff;
        break;
    }
    return nd->kp;
}

static CUDA_KERNEL_NODE_PARAMS kparams(struct node *nd, unsigned step)
{
    return (CUDA_KERNEL_NODE_PARAMS){ .func = G.fn[nd->k], .gridDimX = G.grid, .gridDimY = 1,
                                      .gridDimZ = 1, .blockDimX = G.block, .blockDimY = 1,
                                      .blockDimZ = 1, .kernelParams = args(nd, step) };
}

/* The chain of nodes with this step's buffers, as an explicit graph; keep:
 * the nodes' handles are the exec's (the graph it is instantiated from). */
static CUgraph chain(unsigned step, bool keep)
{
    CUgraph g;
    CUgraphNode prev = NULL, h;
    CK(cuGraphCreate(&g, 0));
    for (unsigned i = 0; i < G.o.nodes; i++) {
        CUDA_KERNEL_NODE_PARAMS p = kparams(&G.nodes[i], step);
        CK(cuGraphAddKernelNode_v2(&h, g, prev ? &prev : NULL, prev ? 1 : 0, &p));
        if (keep)
            G.nodes[i].h = h;
        prev = h;
    }
    return g;
}

/* recapture: the same chain launched into the program's stream while it
 * captures (each launch depends on the one before, as in the chain). */
static CUgraph capture(unsigned step)
{
    CUgraph g;
    CK(cuStreamBeginCapture_v2(G.stream, cmodes[G.o.cmode]));
    for (unsigned i = 0; i < G.o.nodes; i++) {
        struct node *nd = &G.nodes[i];
        CK(cuLaunchKernel(G.fn[nd->k], G.grid, 1, 1, G.block, 1, 1, 0, G.stream, args(nd, step),
                          NULL));
    }
    CK(cuStreamEndCapture(G.stream, &g));
    return g;
}

/* A node's argument bytes as its kernelParams give them (at most 32). */
enum { ARG_STRIDE = 32 };
static size_t arg_bytes(const struct node *nd, unsigned char *out)
{
    static const size_t sizes[NKERN][4] = {
        [K_SCALE] = { 8, 8, 4, 8 }, [K_AXPY] = { 8, 8, 4, 8 }, [K_ADD] = { 8, 8, 8, 8 },
        [K_AFFINE] = { sizeof(struct vr_affine) },
    };
    size_t n = 0;
    for (unsigned j = 0; j < 4 && sizes[nd->k][j]; j++) {
        memcpy(out + n, nd->kp[j], sizes[nd->k][j]);
        n += sizes[nd->k][j];
    }
    return n;
}

/* Nodes whose arguments (as last built) differ from the previous step's:
 * what an update has to change at the least. */
static unsigned changed_nodes(void)
{
    unsigned changed = 0;
    for (unsigned i = 0; i < G.o.nodes; i++) {
        unsigned char now[ARG_STRIDE] = { 0 };
        arg_bytes(&G.nodes[i], now);
        unsigned char *was = G.prev_args + (size_t)i * ARG_STRIDE;
        if (memcmp(now, was, ARG_STRIDE)) {
            changed++;
            memcpy(was, now, ARG_STRIDE);
        }
    }
    return changed;
}

static void build(void)
{
    G.graph = G.o.pattern == P_RECAPTURE ? capture(0) : chain(0, true);
    CK(cuGraphInstantiateWithFlags(&G.exec, G.graph, 0));
    if (G.o.destroy_graph) {
        CK(cuGraphDestroy(G.graph));
        G.graph = NULL;
    }
    if (update_pattern()) {
        G.prev_args = calloc(G.o.nodes, ARG_STRIDE);
        if (!G.prev_args)
            die("out of memory");
        changed_nodes();
    }
}

/* recapture, rebuild: the exec takes this step's graph; the update's wall
 * time is added to *ns. */
static void update_from(CUgraph g, uint64_t *ns)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    uint64_t t0 = now_ns();
    CUresult rc = cuGraphExecUpdate_v2(G.exec, g, &info);
    *ns += now_ns() - t0;
    check("cuGraphExecUpdate_v2", rc);
    if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        die("cuGraphExecUpdate_v2: update result %d", (int)info.result);
}

static void set_params(struct node *nd, unsigned step)
{
    CUDA_KERNEL_NODE_PARAMS p = kparams(nd, step);
    switch (G.o.api) {
    case API_V2:
        CK(cuGraphExecKernelNodeSetParams_v2(G.exec, nd->h, &p));
        break;
    case API_V1: {
        CUDA_KERNEL_NODE_PARAMS_v1 p1 = {
            .func = p.func, .gridDimX = p.gridDimX, .gridDimY = p.gridDimY,
            .gridDimZ = p.gridDimZ, .blockDimX = p.blockDimX, .blockDimY = p.blockDimY,
            .blockDimZ = p.blockDimZ, .sharedMemBytes = p.sharedMemBytes,
            .kernelParams = p.kernelParams, .extra = p.extra };
        CK(cuGraphExecKernelNodeSetParams(G.exec, nd->h, &p1));
        break;
    }
    default: {
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        np.kernel.func = p.func;
        np.kernel.gridDimX = p.gridDimX;
        np.kernel.gridDimY = p.gridDimY;
        np.kernel.gridDimZ = p.gridDimZ;
        np.kernel.blockDimX = p.blockDimX;
        np.kernel.blockDimY = p.blockDimY;
        np.kernel.blockDimZ = p.blockDimZ;
        np.kernel.kernelParams = p.kernelParams;
        CK(cuGraphExecNodeSetParams(G.exec, nd->h, &np));
        break;
    }
    }
}

/* ---- buffers ------------------------------------------------------------ */

/* Only the first elems words are ever read (kernels and checksum). */
static CUdeviceptr alloc_filled(float value)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, G.o.bytes));
    CK(cuMemsetD32Async(p, bits(value), G.o.elems, G.stream));
    return p;
}

/* ---- verification ------------------------------------------------------ */

/* Fan arrays after the role buffers: every pool member (b * pool + m), or
 * churn's current generation. */
static size_t fan_arrays(void)
{
    return !fan_pattern() ? 0 : pool_size() ? (size_t)G.o.fan * pool_size() : G.o.fan;
}

static float fan_initial(size_t j)
{
    return 0.125f * (float)(j % 5 + 1);
}

/* Host arrays in the role order of the checksum: W[0..Bs-1], X, O, P0, P1,
 * then the fan arrays; member: the pool member each fan buffer uses now. */
static float *host_buf(float *h, int role, unsigned step, const unsigned *member)
{
    const size_t n = G.o.elems, b = G.o.buffers;
    if (role <= R_FAN) {
        size_t f = (size_t)(R_FAN - role);
        size_t j = pool_size() ? f * pool_size() + member[f] : f;
        return h + (b + 4 + j) * n;
    }
    switch (role) {
    case R_X: return h + b * n;
    case R_O: return h + (b + 1) * n;
    case R_PCUR: return h + (b + 2 + (moves() == P_PINGPONG ? step % 2 : 0)) * n;
    case R_PNEXT: return h + (b + 2 + (moves() == P_PINGPONG ? (step + 1) % 2 : 0)) * n;
    default: return h + (size_t)role * n;
    }
}

/* The whole run again on the host, with the kernels' formulas. */
static float *reference(void)
{
    const size_t n = G.o.elems, nb = G.o.buffers + 4 + fan_arrays();
    float *h = malloc(nb * n * sizeof *h);
    unsigned *member = calloc(G.o.fan, sizeof *member);
    uint64_t rng = G.o.seed;
    if (!h || !member)
        die("out of memory");
    for (size_t b = 0; b < nb; b++) {
        float v = b < G.o.buffers ? 0.01f * (float)(b + 1)
                  : b == G.o.buffers ? x_value(0)
                  : b == G.o.buffers + 1 ? 0.0f
                  : b < G.o.buffers + 4 ? 0.5f
                                        : fan_initial(b - G.o.buffers - 4);
        for (size_t i = 0; i < n; i++)
            h[b * n + i] = v;
    }
    for (unsigned step = 0; step < G.o.steps; step++) {
        if (step > 0)
            choose(step, member, &rng);
        float *x = host_buf(h, R_X, step, member);
        for (size_t i = 0; i < n; i++)
            x[i] = x_value(step);
        for (unsigned k = 0; k < G.o.nodes; k++) {
            const struct node *nd = &G.nodes[k];
            float *out = host_buf(h, nd->out, step, member);
            const float *a = host_buf(h, nd->a, step, member);
            switch (nd->k) {
            case K_SCALE:
                for (size_t i = 0; i < n; i++)
                    out[i] = nd->s * a[i];
                break;
            case K_AXPY:
                for (size_t i = 0; i < n; i++)
                    out[i] += nd->s * a[i];
                break;
            case K_ADD: {
                const float *bb = host_buf(h, nd->b, step, member);
                for (size_t i = 0; i < n; i++)
                    out[i] = a[i] + bb[i];
                break;
            }
            default:
                for (size_t i = 0; i < n; i++)
                    out[i] = a[i] * nd->s + nd->t;
                break;
            }
        }
    }
    free(member);
    return h;
}

/* Reads the first elems floats of every buffer; FNV-1a 64 over them in a
 * fixed order, their sum, and the largest relative difference from the host
 * reference. */
static uint64_t checksum(double *sum, double *max_err)
{
    size_t nb = G.o.buffers + 4 + fan_arrays();
    size_t n = G.o.elems;
    float *h = malloc(n * sizeof *h);
    float *ref = reference();
    if (!h)
        die("out of memory");
    uint64_t fnv = 0xcbf29ce484222325ull;
    *sum = 0;
    *max_err = 0;
    for (size_t b = 0; b < nb; b++) {
        CUdeviceptr p = b < G.o.buffers ? G.w[b]
                        : b == G.o.buffers ? G.x
                        : b == G.o.buffers + 1 ? G.out
                        : b < G.o.buffers + 4 ? G.pp[b - G.o.buffers - 2]
                        : pool_size() ? G.pool[b - G.o.buffers - 4]
                                      : G.fan[b - G.o.buffers - 4];
        CK(cuMemcpyDtoH_v2(h, p, n * sizeof *h));
        const unsigned char *c = (const unsigned char *)h;
        for (size_t i = 0; i < n * sizeof *h; i++) {
            fnv ^= c[i];
            fnv *= 0x100000001b3ull;
        }
        for (size_t i = 0; i < n; i++) {
            double r = ref[b * n + i], d = h[i] - r;
            double e = (d < 0 ? -d : d) / (r < 0 ? (-r > 1 ? -r : 1) : (r > 1 ? r : 1));
            if (!(e <= *max_err)) /* NaN counts as an error */
                *max_err = e;
            *sum += h[i];
        }
    }
    free(ref);
    free(h);
    return fnv;
}

/* ---- output ------------------------------------------------------------- */

/* Bytes of heap in use (arena and mmapped chunks); -1 where unknown. */
static long long heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (long long)(mi.uordblks + mi.hblkhd);
#else
    return -1;
#endif
}

static void stats_json(const char *key, const struct varemap_stats *s)
{
    printf("\"%s\": {\"setparams_seen\": %" PRIu64 ", \"setparams_skipped\": %" PRIu64
           ", \"setparams_forwarded\": %" PRIu64 ", \"transition_updates\": %" PRIu64
           ", \"launches\": %" PRIu64 ", \"execs_active\": %" PRIu64
           ", \"execs_disabled\": %" PRIu64 ", \"slices_bound\": %" PRIu64
           ", \"rebinds\": %" PRIu64 ", \"rebind_waits\": %" PRIu64 ", \"vmm_bytes\": %" PRIu64
           ", \"padding_bytes\": %" PRIu64 ", \"vmm_fallbacks\": %" PRIu64
           ", \"unrouted_procs\": %" PRIu64 ", \"variants\": %" PRIu64
           ", \"updates_seen\": %" PRIu64 ", \"updates_absorbed\": %" PRIu64 "}",
           key, s->setparams_seen, s->setparams_skipped, s->setparams_forwarded,
           s->transition_updates, s->launches, s->execs_active, s->execs_disabled,
           s->slices_bound, s->rebinds, s->rebind_waits, s->vmm_bytes, s->padding_bytes,
           s->vmm_fallbacks, s->unrouted_procs, s->variants, s->updates_seen,
           s->updates_absorbed);
}

int main(int argc, char **argv)
{
    parse(argc, argv, &G.o);
    const struct opts *o = &G.o;

    /* The shim exports this; without it the lookup finds nothing. */
    void *sym = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    memcpy(&G.stats, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_heap_bytes");
    memcpy(&G.driver_heap, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_heap_parked_bytes");
    memcpy(&G.driver_parked, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_entry_name");
    memcpy(&G.entry_name, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_entry_calls");
    memcpy(&G.entry_calls, &sym, sizeof sym);
    sym = dlsym(RTLD_DEFAULT, "simcuda_entry_cost_ns");
    memcpy(&G.entry_cost, &sym, sizeof sym);
    if (!G.entry_name || !G.entry_calls || !G.entry_cost)
        G.entry_name = NULL;
    int nentries = 0;
    while (G.entry_name && G.entry_name(nentries))
        nentries++;
    unsigned long long *calls0 = calloc((size_t)nentries + 1, sizeof *calls0);
    unsigned long long *calls1 = calloc((size_t)nentries + 1, sizeof *calls1);
    if (!calls0 || !calls1)
        die("out of memory");

    CK(cuInit(0));
    CK(cuDeviceGet(&G.dev, 0));
    CK(cuDevicePrimaryCtxRetain(&G.ctx, G.dev));
    CK(cuCtxSetCurrent(G.ctx));
    char *image = vr_read_text(o->ptx);
    if (!image)
        die("cannot open kernels '%s': %s (set --ptx or VR_PTX)", o->ptx, strerror(errno));
    CK(cuModuleLoadData(&G.mod, image));
    free(image);
    for (int k = 0; k < NKERN; k++)
        CK(cuModuleGetFunction(&G.fn[k], G.mod, kern_names[k]));
    CK(cuStreamCreate(&G.stream, 0));
    G.block = 128;
    size_t grid = (o->elems + G.block - 1) / G.block;
    G.grid = grid > 1024 ? 1024 : (unsigned)grid;

    G.w = calloc(o->buffers, sizeof *G.w);
    G.nodes = calloc(o->nodes, sizeof *G.nodes);
    G.fan = calloc(o->fan, sizeof *G.fan);
    G.prev = calloc(o->fan, sizeof *G.prev);
    G.member = calloc(o->fan, sizeof *G.member);
    G.pool = calloc(fan_arrays() + 1, sizeof *G.pool);
    G.warm_ns = calloc(o->warmup + 1, sizeof *G.warm_ns);
    G.rng = o->seed;
    G.order_rng = o->seed ^ 0x5bd1e995u;
    G.order = calloc(o->nodes, sizeof *G.order);
    for (unsigned i = 0; G.order && i < o->nodes; i++)
        G.order[i] = o->order == O_REVERSE ? o->nodes - 1 - i : i;
    if (!G.order || !G.w || !G.nodes || !G.fan || !G.prev || !G.member || !G.pool || !G.warm_ns)
        die("out of memory");
    for (unsigned b = 0; b < o->buffers; b++)
        G.w[b] = alloc_filled(0.01f * (float)(b + 1));
    G.x = alloc_filled(x_value(0));
    G.out = alloc_filled(0.0f);
    G.pp[0] = alloc_filled(0.5f);
    G.pp[1] = alloc_filled(0.5f);
    for (size_t j = 0; j < fan_arrays(); j++)
        G.pool[j] = alloc_filled(fan_initial(j));
    for (unsigned b = 0; b < o->fan && fan_pattern(); b++)
        G.fan[b] = G.pool[pool_size() ? (size_t)b * pool_size() : b];
    plan();
    build();
    CK(cuStreamSynchronize(G.stream));

    struct varemap_stats s0 = { 0 }, s1 = { 0 };
    uint64_t t_total = 0, t_setparams = 0, t_launch = 0, t_start = now_ns(), cpu0 = 0, pcpu0 = 0;
    uint64_t t_update = 0, t_launch_cpu = 0;
    /* recapture: the calling thread's CPU time of each timed step's capture
     * (cuStreamBeginCapture .. cuStreamEndCapture), least and median over
     * the timed steps, per captured kernel: run with and without the shim,
     * the difference is the shim's own work per captured kernel. */
    uint64_t *cap_ns = calloc(o->steps, sizeof *cap_ns);
    unsigned ncap = 0;
    if (!cap_ns)
        die("out of memory");
    for (unsigned step = 0; step < o->steps; step++) {
        bool timed = step >= o->warmup;
        if (step == o->warmup) {
            if (G.stats)
                G.stats(&s0, sizeof s0);
            cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            pcpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            for (int i = 0; i < nentries; i++)
                calls0[i] = G.entry_calls(i);
        }
        uint64_t t0 = now_ns();
        CUdeviceptr old_x = 0, old_out = 0;
        unsigned calls_alloc = 0;
        if (moves() == P_REBIND && step > 0 && step % o->k == 0) {
            old_x = G.x;
            CK(cuMemAlloc_v2(&G.x, o->bytes));
            calls_alloc++;
        }
        if (moves() == P_REALLOC && step > 0) {
            old_out = G.out;
            CK(cuMemAlloc_v2(&G.out, o->bytes));
            calls_alloc++;
        }
        if (pool_size() && step > 0) {
            choose(step, G.member, &G.rng);
            for (unsigned b = 0; b < o->fan; b++)
                G.fan[b] = G.pool[(size_t)b * pool_size() + G.member[b]];
        }
        if (o->pattern == P_CHURN && step > 0) {
            for (unsigned b = 0; b < o->fan; b++) {
                G.prev[b] = G.fan[b];
                CK(cuMemAlloc_v2(&G.fan[b], o->bytes));
                calls_alloc++;
            }
        }
        CK(cuMemsetD32Async(G.x, bits(x_value(step)), o->elems, G.stream));
        for (unsigned i = o->nodes - 1; o->order == O_SHUFFLE && i > 0; i--) {
            unsigned j = (unsigned)(next_rand(&G.order_rng) % (i + 1)), t = G.order[i];
            G.order[i] = G.order[j];
            G.order[j] = t;
        }
        uint64_t t1 = now_ns();
        CUgraph step_graph = NULL;
        unsigned changed = 0;
        uint64_t tu = 0;
        if (update_pattern()) {
            if (o->pattern == P_RECAPTURE) {
                /* The previous step's small frees (the graph destroyed, the
                 * update's) wait in malloc's fast bins until some large
                 * request consolidates them: without the shim the driver's
                 * update makes it, with the shim (no update sent) the next
                 * capture would, and pay for it. Consolidated here, outside
                 * the timed capture, in both runs alike. */
                void *volatile big = malloc(64 << 10);
                free(big);
            }
            uint64_t cc0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            step_graph = o->pattern == P_RECAPTURE ? capture(step) : chain(step, false);
            uint64_t cc1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
            if (timed && o->pattern == P_RECAPTURE)
                cap_ns[ncap++] = cc1 - cc0;
            changed = changed_nodes();
            update_from(step_graph, &tu);
        } else {
            for (unsigned i = 0; i < o->nodes; i++)
                set_params(&G.nodes[G.order[i]], step);
        }
        uint64_t t2 = now_ns(), c2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        CK(cuGraphLaunch(G.exec, G.stream));
        uint64_t t3 = now_ns(), c3 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (step_graph)
            CK(cuGraphDestroy(step_graph));
        unsigned calls_free = 0;
        if (old_x) {
            CK(cuMemFree_v2(old_x));
            calls_free++;
        }
        if (old_out) {
            CK(cuMemFree_v2(old_out));
            calls_free++;
        }
        if (o->pattern == P_CHURN && step > 0) {
            for (unsigned b = 0; b < o->fan; b++) {
                CK(cuMemFree_v2(G.prev[b]));
                calls_free++;
            }
        }
        bool sync = o->sync_every && (step + 1) % o->sync_every == 0;
        if (sync)
            CK(cuStreamSynchronize(G.stream));
        uint64_t t4 = now_ns();
        if (!timed)
            G.warm_ns[step] = t4 - t0;
        if (timed) {
            t_total += t4 - t0;
            t_setparams += t2 - t1;
            t_launch += t3 - t2;
            t_launch_cpu += c3 - c2;
            t_update += tu;
            G.c_update += step_graph != NULL;
            G.c_changed += changed;
            G.c_setparams += update_pattern() ? 0 : o->nodes;
            G.c_launch++;
            G.c_memset++;
            G.c_alloc += calls_alloc;
            G.c_free += calls_free;
            G.c_sync += sync;
        }
    }
    uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    uint64_t pcpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - pcpu0;
    /* The timed steps' driver calls, before the final synchronize (not a step's). */
    for (int i = 0; i < nentries; i++)
        calls1[i] = G.entry_calls(i);
    uint64_t t_issue = now_ns() - t_start;
    CK(cuStreamSynchronize(G.stream));
    uint64_t t_all = now_ns() - t_start;
    if (G.stats)
        G.stats(&s1, sizeof s1);
    long long heap = heap_in_use();
    long long driver_heap = G.driver_heap ? G.driver_heap() : -1;
    long long parked = G.driver_parked ? G.driver_parked() : -1;
    /* as simcuda_heap_bytes leaves them out; a sanitizer's allocator makes
     * mallinfo2 read 0, which must stay 0 ("no heap figure"), not go negative */
    if (heap > 0 && parked > 0)
        heap = heap > parked ? heap - parked : 0;
    /* What the SetParams loop costs the program itself (building each node's
     * parameters), so that the shim's share of a call can be told apart. */
    uint64_t tb = now_ns();
    for (unsigned r = 0; r < 5; r++)
        for (unsigned i = 0; i < o->nodes; i++) {
            CUDA_KERNEL_NODE_PARAMS p = kparams(&G.nodes[i], o->steps - 1);
            *(void *volatile *)&G.sink = p.kernelParams;
        }
    double build_ns = (double)(now_ns() - tb) / (5.0 * o->nodes);

    double sum, max_err;
    uint64_t ck = checksum(&sum, &max_err);
    const bool verified = max_err <= 1e-4;

    CK(cuGraphExecDestroy(G.exec));
    if (G.graph)
        CK(cuGraphDestroy(G.graph));
    for (unsigned b = 0; b < o->buffers; b++)
        CK(cuMemFree_v2(G.w[b]));
    for (size_t j = 0; j < fan_arrays() && pool_size(); j++)
        CK(cuMemFree_v2(G.pool[j]));
    for (unsigned b = 0; b < o->fan && o->pattern == P_CHURN; b++)
        CK(cuMemFree_v2(G.fan[b]));
    CK(cuMemFree_v2(G.x));
    CK(cuMemFree_v2(G.out));
    CK(cuMemFree_v2(G.pp[0]));
    CK(cuMemFree_v2(G.pp[1]));
    CK(cuStreamDestroy_v2(G.stream));
    CK(cuModuleUnload(G.mod));
    CK(cuDevicePrimaryCtxRelease_v2(G.dev));

    struct varemap_stats fin = { 0 };
    if (G.stats)
        G.stats(&fin, sizeof fin);

    const unsigned timed = o->steps - o->warmup;
    const double per = (double)timed;
    /* On simcuda, how its standard kernels ran (SIMCUDA_KERNELS): a
     * benchmark's figures are for host versions unless it says ptx. */
    const char *sk = getenv("SIMCUDA_KERNELS");
    const char *sim_kernels = !nentries ? "none" : sk && !strcmp(sk, "host") ? "host" : "ptx";
    printf("graph_bench: pattern=%s%s%s kernel=%s api=%s nodes=%u buffers=%u fan=%u steps=%u "
           "warmup=%u simcuda_kernels=%s\n",
           pattern_names[o->pattern], update_pattern() ? " moves=" : "",
           update_pattern() ? moves_names[o->moves] : "", kmix_names[o->kmix], api_names[o->api], o->nodes,
           o->buffers, fan_pattern() ? o->fan : 0, o->steps, o->warmup, sim_kernels);
    printf("graph_bench: host ns/step %.0f (setparams %.1f ns/call, launch %.0f ns)\n",
           (double)t_total / per, (double)t_setparams / (per * o->nodes),
           (double)t_launch / per);
    printf("graph_bench: checksum %016" PRIx64 " sum %.6g shim %s; host reference %s "
           "(max relative error %.3g)\n",
           ck, sum, G.stats ? "loaded" : "absent", verified ? "matches" : "DIFFERS", max_err);

    printf("{\"pattern\": \"%s\", \"kernel\": \"%s\", \"api\": \"%s\", \"order\": \"%s\", "
           "\"nodes\": %u, \"buffers\": %u, \"steps\": %u, \"warmup\": %u, \"timed_steps\": %u, \"k\": %u, "
           "\"bytes\": %zu, \"elems\": %zu, \"sync_every\": %u, ",
           pattern_names[o->pattern], kmix_names[o->kmix], api_names[o->api],
           order_names[o->order], o->nodes, o->buffers, o->steps, o->warmup, timed, o->k, o->bytes, o->elems, o->sync_every);
    if (fan_pattern())
        printf("\"fan\": %u, \"pool\": %u, \"seed\": %llu, ", o->fan, pool_size(), o->seed);
    if (update_pattern()) {
        printf("\"moves\": \"%s\", ", moves_names[o->moves]);
        if (o->pattern == P_RECAPTURE)
            printf("\"capture_mode\": \"%s\", ", cmode_names[o->cmode]);
        if (o->pattern == P_RECAPTURE && ncap) {
            qsort(cap_ns, ncap, sizeof *cap_ns, cmp_u64);
            printf("\"capture_ns_per_kernel\": %.2f, \"capture_ns_per_kernel_median\": %.2f, ",
                   (double)cap_ns[0] / o->nodes, (double)cap_ns[ncap / 2] / o->nodes);
        } else if (o->pattern == P_RECAPTURE) {
            printf("\"capture_ns_per_kernel\": null, \"capture_ns_per_kernel_median\": null, ");
        }
        printf("\"update_ns_per_call\": %.1f, \"changed_nodes_per_step\": %.4g, ",
               G.c_update ? (double)t_update / (double)G.c_update : 0.0,
               (double)G.c_changed / per);
    }
    printf("\"process_cpu_ns_per_step\": %.1f, \"heap_bytes\": %lld, ", (double)pcpu / per, heap);
    if (driver_heap >= 0)
        printf("\"driver_heap_bytes\": %lld, ", driver_heap);
    else
        printf("\"driver_heap_bytes\": null, ");
    printf("\"live_bytes\": %zu, \"build_ns_per_call\": %.2f, \"warmup_step_ns\": [",
           (o->buffers + 4 + fan_arrays()) * o->bytes, build_ns);
    for (unsigned i = 0; i < o->warmup; i++)
        printf("%s%" PRIu64, i ? ", " : "", G.warm_ns[i]);
    printf("], ");
    printf("\"wall_ns_per_step\": %.1f, \"cpu_ns_per_step\": %.1f, "
           "\"setparams_ns_per_call\": %.2f, \"launch_ns_per_call\": %.1f, "
           "\"launch_cpu_ns_per_call\": %.1f, "
           "\"issue_ns_total\": %" PRIu64 ", \"wall_ns_total\": %" PRIu64 ", ",
           (double)t_total / per, (double)cpu / per, (double)t_setparams / (per * o->nodes),
           (double)t_launch / per, (double)t_launch_cpu / per, t_issue, t_all);
    printf("\"app_calls_per_step\": {");
    if (o->pattern == P_RECAPTURE)
        printf("\"cuStreamBeginCapture_v2\": %.4g, \"cuLaunchKernel\": %.4g, "
               "\"cuStreamEndCapture\": %.4g, ", (double)G.c_update / per,
               (double)G.c_update * o->nodes / per, (double)G.c_update / per);
    else if (o->pattern == P_REBUILD)
        printf("\"cuGraphCreate\": %.4g, \"cuGraphAddKernelNode_v2\": %.4g, ",
               (double)G.c_update / per, (double)G.c_update * o->nodes / per);
    if (update_pattern())
        printf("\"cuGraphExecUpdate_v2\": %.4g, \"cuGraphDestroy\": %.4g, ",
               (double)G.c_update / per, (double)G.c_update / per);
    else
        printf("\"%s\": %.4g, ", api_syms[o->api], (double)G.c_setparams / per);
    printf("\"cuGraphLaunch\": %.4g, "
           "\"cuMemsetD32Async\": %.4g, \"cuMemAlloc_v2\": %.4g, \"cuMemFree_v2\": %.4g, "
           "\"cuStreamSynchronize\": %.4g}, ",
           (double)G.c_launch / per, (double)G.c_memset / per, (double)G.c_alloc / per,
           (double)G.c_free / per, (double)G.c_sync / per);
    if (nentries) {
        /* Every call that reached the driver in the timed steps (the
         * program's and the shim's), and what they cost at SIMCUDA_COST's
         * prices: noise-free, unlike the clocks above. */
        unsigned long long priced = 0, updates = 0, priced_updates = 0, update_price = 0;
        printf("\"driver_calls_per_step\": {");
        for (int i = 0, first = 1; i < nentries; i++) {
            unsigned long long d = calls1[i] - calls0[i];
            /* both update entry points (v2 and the CUDA 10.2 one) */
            bool update = !strcmp(G.entry_name(i), "cuGraphExecUpdate_v2") ||
                          !strcmp(G.entry_name(i), "cuGraphExecUpdate");
            if (!strcmp(G.entry_name(i), "cuGraphExecUpdate_v2"))
                update_price = G.entry_cost(i);
            updates += update ? d : 0;
            priced_updates += update ? d * G.entry_cost(i) : 0;
            if (!d)
                continue;
            priced += d * G.entry_cost(i);
            printf("%s\"%s\": %.4g", first ? "" : ", ", G.entry_name(i), (double)d / per);
            first = 0;
        }
        printf("}, \"priced_ns_per_step\": %.1f, \"simcuda_kernels\": \"%s\", ", (double)priced / per,
               sim_kernels);
        /* What the updates that reached the driver cost, so that "the run
         * without the shim minus the update's price" can be read off. */
        if (update_pattern())
            printf("\"update_price_ns\": %llu, \"driver_updates_per_step\": %.4g, "
                   "\"priced_update_ns_per_step\": %.1f, "
                   "\"priced_ns_per_step_less_updates\": %.1f, ",
                   update_price, (double)updates / per, (double)priced_updates / per,
                   (double)(priced - priced_updates) / per);
    } else {
        printf("\"driver_calls_per_step\": null, \"priced_ns_per_step\": null, "
               "\"simcuda_kernels\": null, ");
        if (update_pattern())
            printf("\"update_price_ns\": null, \"driver_updates_per_step\": null, "
                   "\"priced_update_ns_per_step\": null, "
                   "\"priced_ns_per_step_less_updates\": null, ");
    }
    printf("\"checksum\": \"%016" PRIx64 "\", \"sum\": %.9g, \"verified\": %s, "
           "\"max_rel_error\": %.3g, ",
           ck, sum, verified ? "true" : "false", max_err);
    if (G.stats) {
        uint64_t seen = s1.setparams_seen - s0.setparams_seen;
        uint64_t skipped = s1.setparams_skipped - s0.setparams_skipped;
        printf("\"shim\": true, ");
        stats_json("shim_final", &fin);
        printf(", ");
        stats_json("shim_at_warmup", &s0);
        printf(", ");
        stats_json("shim_at_end", &s1);
        if (seen)
            printf(", \"skip_rate_after_warmup\": %.6f}\n", (double)skipped / (double)seen);
        else
            printf(", \"skip_rate_after_warmup\": null}\n");
    } else {
        printf("\"shim\": false, \"skip_rate_after_warmup\": null}\n");
    }
    free(G.w);
    free(G.nodes);
    free(G.fan);
    free(G.prev);
    free(G.member);
    free(G.pool);
    free(G.warm_ns);
    free(cap_ns);
    free(G.prev_args);
    free(calls0);
    free(calls1);
    if (!verified)
        fprintf(stderr, "%s: results differ from the host reference (max relative error %.3g)\n",
                prog, max_err);
    return verified ? 0 : 3;
}
