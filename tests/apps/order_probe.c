/* order_probe: the adversarial programs of issue 15 (one exec's launch
 * order with variants, buffers freed and re-made, contexts, destroyed
 * streams). Each case checks its own result against a host replay and
 * prints "ok CASE" plus the final values, or names the first wrong value
 * and exits 1; a crash or a hang (alarm) is a failure too.
 *
 * The graph: T = 0.5 * A (vr_scale_f32), then A = T + C (vr_add_f32), C one
 * of three buffers.
 * Launches do not commute when C changes between them, so two launches run
 * out of order change A. Every ordering case holds the earlier launch
 * behind a host function the program opens only after it has queued the
 * later one and slept: a later launch that is not ordered behind it runs in
 * that time, deterministically, not by timing luck.
 *
 *   --case realloc-set    an active exec (stable buffers); each step frees
 *                         the scratch T and allocates it again (same size,
 *                         usually the same address), then sets both nodes
 *   --case realloc-keep   the same, but the graph is not touched when the
 *                         address came back the same
 *   --case realloc-async  the same as realloc-keep with cuMemFreeAsync +
 *                         cuStreamSynchronize
 *   --case realloc-vary   pingpong on two streams (variants serve it), T freed
 *                         and made again before every step
 *   --case ptds           C alternates (pingpong, so variants serve it); two
 *                         threads take turns (a mutex and a baton), each
 *                         launching into CU_STREAM_PER_THREAD
 *   --case ptsz           the same with the NULL stream through
 *                         cuGraphLaunch_ptsz / _v2 SetParams
 *   --case update         pingpong on two streams; a launch held on one
 *                         stream, then cuGraphExecUpdate_v2 with the exec's
 *                         own graph, then a launch on the other stream
 *   --case update-v1      the same with cuGraphExecUpdate (v1)
 *   --case destroy        pingpong in two threads' per-thread streams; a
 *                         launch held in a worker's stream while the main
 *                         thread destroys the exec
 *   --case ctx            (SIMCUDA_DEVICES=2) everything made on device 1;
 *                         the steps run while device 0's context is current
 *   --case ctx-none       the same, the steps run in a thread with no
 *                         current context
 *   --case dead-stream    pingpong; a launch held on stream 1, stream 1
 *                         destroyed, a new stream made (its handle may be
 *                         stream 1's), the next launch on it
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *case_name = "";
#define VR_PROG "order_probe"
#define VR_PROG_DETAIL case_name
#include "vr_check.h"

#define N (1u << 19) /* floats: 2 MiB buffers, VMM-backed at the default granularity */
#define BYTES ((size_t)N * 4)
#define WARM 12

static CUmodule mod;
static CUcontext ctx;
static CUstream st[2];
static atomic_int released;
static bool use_ptsz;

static CUdeviceptr buffer(float value)
{
    return vr_buffer_f32(N, value);
}

static float read1(CUdeviceptr p, size_t i)
{
    return vr_read_f32(p, i);
}

/* The program's state and its host replay. */
static const float cval[3] = {0.5f, -0.25f, 0.125f};
static CUdeviceptr a, t, c[3], cin;
static float half = 0.5f;
static unsigned long long n = N; /* the floats the kernels cover (main) */
static void *kp0[] = {&t, &a, &half, &n};
static void *kp1[] = {&a, &t, &cin, &n};
static CUfunction fns[2];
static CUgraphNode nodes[2];
static CUgraph graph;
static CUgraphExec ex;
static float ha = 1.0f, ht = 0.0f;
static unsigned step;

static CUDA_KERNEL_NODE_PARAMS params(int i)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = fns[i];
    p.gridDimX = 64, p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256, p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = i ? kp1 : kp0;
    return p;
}

static void set_nodes(void)
{
    for (int i = 0; i < 2; i++) {
        CUDA_KERNEL_NODE_PARAMS p = params(i);
        CK(cuGraphExecKernelNodeSetParams_v2(ex, nodes[i], &p));
    }
}

/* One step: point the add at C[phase], launch in s. */
static void run_step(unsigned phase, CUstream s)
{
    cin = c[phase % 3];
    set_nodes();
    if (use_ptsz)
        CK(cuGraphLaunch_ptsz(ex, s));
    else
        CK(cuGraphLaunch(ex, s));
    ht = 0.5f * ha;
    ha = ht + cval[phase % 3];
    step++;
}

static void build(void)
{
    CK(cuModuleGetFunction(&fns[0], mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&fns[1], mod, "vr_add_f32"));
    a = buffer(1.0f), t = buffer(0.0f), c[0] = buffer(cval[0]), c[1] = buffer(cval[1]);
    c[2] = buffer(cval[2]);
    cin = c[0];
    CK(cuGraphCreate(&graph, 0));
    for (int i = 0; i < 2; i++) {
        CUDA_KERNEL_NODE_PARAMS p = params(i);
        CK(cuGraphAddKernelNode_v2(&nodes[i], graph, i ? &nodes[0] : NULL, i ? 1 : 0, &p));
    }
    CK(cuGraphInstantiateWithFlags(&ex, graph, 0));
    for (int i = 0; i < 2; i++)
        CK(cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING));
}

static int check(void)
{
    CK(cuCtxSynchronize());
    const size_t at[] = {0, n / 3, n - 1};
    for (size_t k = 0; k < 3; k++) {
        float ga = read1(a, at[k]);
        if (ga != ha) {
            fprintf(stderr, "order_probe %s: A[%zu] = %.9g after %u steps, expected %.9g\n",
                    case_name, at[k], ga, step, ha);
            return 1;
        }
    }
    printf("ok %s steps=%u a=%.9g\n", case_name, step, ha);
    return 0;
}

/* ---- buffers freed and made again --------------------------------------- */

static int realloc_loop(bool keep, bool async)
{
    for (int i = 0; i < WARM; i++) {
        run_step(0, st[0]);
        CK(cuStreamSynchronize(st[0]));
    }
    unsigned same = 0;
    /* A grows by C at every step from here: no fixed point hides a node
     * reading the wrong memory. */
    half = 1.0f;
    set_nodes();
    for (int i = 0; i < 16; i++) {
        CUdeviceptr old = t;
        if (async) {
            CK(cuMemFreeAsync(t, st[0]));
            CK(cuStreamSynchronize(st[0]));
        } else {
            CK(cuMemFree_v2(t));
        }
        CK(cuMemAlloc_v2(&t, BYTES));
        same += t == old;
        /* T is written whole before it is read: its contents need no set-up. */
        if (!keep || t != old)
            set_nodes();
        if (use_ptsz)
            CK(cuGraphLaunch_ptsz(ex, st[0]));
        else
            CK(cuGraphLaunch(ex, st[0]));
        ht = ha;
        ha = ht + cval[0];
        step++;
        if (i % 2)
            CK(cuStreamSynchronize(st[0]));
    }
    fprintf(stderr, "order_probe %s: the address came back %u of 16 times\n", case_name, same);
    return check();
}

static void pingpong_warm(void);

static int realloc_vary(void)
{
    pingpong_warm();
    for (int i = 0; i < 16; i++) {
        CK(cuMemFree_v2(t));
        CK(cuMemAlloc_v2(&t, BYTES));
        run_step(step % 2, st[step % 2]);
    }
    return check();
}

/* ---- two threads, per-thread default streams ----------------------------- */

static pthread_mutex_t baton_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t baton_cv = PTHREAD_COND_INITIALIZER;
static int turn;            /* whose step it is: 0 or 1; 2: quit */
static int gated_at = -1;   /* the step whose launch is held */
static bool destroy_case;
static unsigned total; /* steps the threads make in all */

static CUstream my_stream(void)
{
    return use_ptsz ? NULL : CU_STREAM_PER_THREAD;
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    CK(cuCtxSetCurrent(ctx));
    for (;;) {
        pthread_mutex_lock(&baton_lock);
        while (turn != me && turn != 2)
            pthread_cond_wait(&baton_cv, &baton_lock);
        if (turn == 2) {
            pthread_mutex_unlock(&baton_lock);
            break;
        }
        if ((int)step == gated_at)
            CK(use_ptsz ? cuLaunchHostFunc_ptsz(my_stream(), vr_gate, &released)
                        : cuLaunchHostFunc(my_stream(), vr_gate, &released));
        run_step((unsigned)me, my_stream());
        if ((int)step <= WARM)
            CK(use_ptsz ? cuStreamSynchronize_ptsz(my_stream())
                        : cuStreamSynchronize(my_stream()));
        turn = destroy_case && (int)step == gated_at + 1 ? 3 : step >= total ? 2 : 1 - me;
        pthread_cond_broadcast(&baton_cv);
        pthread_mutex_unlock(&baton_lock);
    }
    /* Its per-thread stream's work must be done before the thread goes. */
    CK(use_ptsz ? cuStreamSynchronize_ptsz(my_stream()) : cuStreamSynchronize(my_stream()));
    return NULL;
}

static void wait_turn(int want)
{
    pthread_mutex_lock(&baton_lock);
    while (turn != want)
        pthread_cond_wait(&baton_cv, &baton_lock);
    pthread_mutex_unlock(&baton_lock);
}

static int threads(unsigned steps)
{
    total = steps;
    pthread_t th[2];
    gated_at = WARM + 2;
    for (intptr_t i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    if (destroy_case) {
        /* The gated launch is the exec's last: destroyed while it is held. */
        wait_turn(3);
        usleep(20 * 1000);
        CK(cuGraphExecDestroy(ex));
        ex = NULL;
        usleep(20 * 1000);
        atomic_store(&released, 1);
        pthread_mutex_lock(&baton_lock);
        turn = 2;
        pthread_cond_broadcast(&baton_cv);
        pthread_mutex_unlock(&baton_lock);
    } else {
        /* Once the step after the held one is queued, let the held one go. */
        for (;;) {
            pthread_mutex_lock(&baton_lock);
            bool past = (int)step > gated_at + 1;
            pthread_mutex_unlock(&baton_lock);
            if (past)
                break;
            usleep(1000);
        }
        usleep(50 * 1000);
        atomic_store(&released, 1);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return check();
}

/* ---- a held launch, then something else, then the next launch ------------ */

static void pingpong_warm(void)
{
    for (int i = 0; i < WARM; i++) {
        run_step(step % 2, st[step % 2]);
        CK(cuCtxSynchronize());
    }
}

static int update(bool v1)
{
    pingpong_warm();
    CK(cuLaunchHostFunc(st[step % 2], vr_gate, &released));
    run_step(step % 2, st[step % 2]);
    if (v1) {
        CUgraphNode err = NULL;
        CUgraphExecUpdateResult res;
        CK(cuGraphExecUpdate(ex, graph, &err, &res));
    } else {
        CUgraphExecUpdateResultInfo info;
        CK(cuGraphExecUpdate_v2(ex, graph, &info));
    }
    /* The update set the graph's own parameters (C = c[0]): the next step
     * sets its own again. */
    for (int i = 0; i < 3; i++)
        run_step(step % 2, st[step % 2]);
    usleep(50 * 1000);
    atomic_store(&released, 1);
    for (int i = 0; i < 8; i++)
        run_step(step % 2, st[step % 2]);
    return check();
}

static int dead_stream(void)
{
    /* Twice: the shim's events after every launch that follows VMM work
     * stop, and only the program's order is left to keep. */
    pingpong_warm();
    pingpong_warm();
    CK(cuLaunchHostFunc(st[1], vr_gate, &released));
    run_step(1, st[1]);
    CK(cuStreamDestroy_v2(st[1])); /* its work still runs (cuda.h) */
    CK(cuStreamCreate(&st[1], CU_STREAM_NON_BLOCKING));
    run_step(0, st[1]);
    run_step(1, st[0]);
    usleep(50 * 1000);
    atomic_store(&released, 1);
    for (int i = 0; i < 8; i++)
        run_step(step % 2, st[step % 2]);
    return check();
}

/* ---- contexts ------------------------------------------------------------ */

/* The steps after the warm-up: the first ones behind a held launch, so
 * every variant is still running when the next needs one and new ones are
 * made from here (in the exec's context, whatever the thread's). */
static void ctx_steps(void)
{
    atomic_store(&released, 0);
    CK(cuLaunchHostFunc(st[step % 2], vr_gate, &released));
    for (int i = 0; i < 6; i++)
        run_step(step % 3, st[step % 2]);
    usleep(50 * 1000);
    atomic_store(&released, 1);
    for (int i = 0; i < 18; i++) {
        run_step(step % 3, st[step % 2]);
        if (i % 4 == 3)
            CK(cuStreamSynchronize(st[0]));
    }
    CK(cuStreamSynchronize(st[0]));
    CK(cuStreamSynchronize(st[1]));
}

static void *ctx_none_steps(void *arg)
{
    (void)arg;
    CUcontext cur = (CUcontext)1;
    CK(cuCtxGetCurrent(&cur));
    if (cur) {
        fprintf(stderr, "order_probe ctx-none: a new thread has a current context\n");
        exit(1);
    }
    ctx_steps();
    return NULL;
}

static int contexts(bool none)
{
    CUcontext ctx0;
    vr_ctx_current(0, &ctx0);
    CK(cuCtxSetCurrent(ctx)); /* device 1's, made in main */
    pingpong_warm();
    if (none) {
        pthread_t th;
        pthread_create(&th, NULL, ctx_none_steps, NULL);
        pthread_join(th, NULL);
    } else {
        CK(cuCtxSetCurrent(ctx0));
        ctx_steps();
    }
    CK(cuCtxSetCurrent(ctx));
    return check();
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--case"))
            case_name = argv[i + 1];
    alarm(30); /* a hang is a failure with a name */
    n = vr_extent_f32(N);
    static const char *const known[] = {"realloc-set", "realloc-keep", "realloc-async", "realloc-vary", "ptds",
                                        "ptsz", "update", "update-v1", "destroy", "ctx",
                                        "ctx-none", "dead-stream"};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        ok |= !strcmp(case_name, known[i]);
    if (!ok) {
        fprintf(stderr, "usage: VR_PTX=... order_probe --case realloc-set|realloc-keep|"
                        "realloc-async|realloc-vary|ptds|ptsz|update|update-v1|destroy|ctx|ctx-none|"
                        "dead-stream\n");
        return 2;
    }
    char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
    CK(cuInit(0));
    bool ctxs = !strncmp(case_name, "ctx", 3);
    vr_ctx_current(ctxs ? 1 : 0, &ctx);
    CK(cuModuleLoadData(&mod, ptx));
    free(ptx);
    use_ptsz = !strcmp(case_name, "ptsz");
    build();
    if (!strcmp(case_name, "realloc-vary"))
        return realloc_vary();
    if (!strncmp(case_name, "realloc-", 8))
        return realloc_loop(strcmp(case_name, "realloc-set") != 0,
                            !strcmp(case_name, "realloc-async"));
    if (!strcmp(case_name, "ptds") || use_ptsz)
        return threads(WARM + 24);
    if (!strcmp(case_name, "destroy")) {
        destroy_case = true;
        return threads(WARM + 24);
    }
    if (!strncmp(case_name, "update", 6))
        return update(!strcmp(case_name, "update-v1"));
    if (!strcmp(case_name, "dead-stream"))
        return dead_stream();
    return contexts(!strcmp(case_name, "ctx-none"));
}
