/* reprofile_probe: adversarial programs for the profile again (issue 31,
 * item 1). One exec of NODES axpy nodes reads X, which stays still while
 * first profiled (the exec decides against slices) and from step MOVE_AT
 * on is rebound to another buffer of a pool every REBIND steps; at a dear
 * SetParams price the first rebind's forwarded updates call for a profile
 * again, whose window (until it sees X move again) covers steps
 * MOVE_AT + 1 .. MOVE_AT + REBIND. At step ACT_AT, inside it, each --case
 * does one thing to the exec or its buffers:
 *
 *   plain         nothing (the reference; SIMCUDA_FAIL runs use it)
 *   free_reuse    the current X and the next pool buffer are freed and
 *                 allocated again (the same size: the same addresses, as a
 *                 caching allocator hands them out), with new values; again
 *                 at ACT2_AT, once the profile again took a slice for X
 *   destroy_reuse the exec destroyed and instantiated again from its graph
 *                 (the driver may hand out the same handle)
 *   update        cuGraphExecUpdate from a new graph of the same shape
 *                 whose nodes scale by other factors
 *   bad_calls     SetParams on the empty node, with NULL params and with a
 *                 stale node (each the driver's own error, printed), and a
 *                 node pointed at a small cuMemAlloc buffer (not VMM-backed)
 *   two_threads   from ACT_AT on, even steps launch from one thread on one
 *                 stream, odd steps from another thread on another, each
 *                 launch ordered behind the last by an event, no host wait
 *   stored_ptr    node 0 stores X's addresses into a table, at step STORE_AT
 *                 only (once the profile again took a slice for X; other
 *                 steps it stores none); after every later step a plain
 *                 kernel reads through the table, after X was rebound: the
 *                 X of step STORE_AT, as the program wrote it
 *
 *   reprofile_probe --case C [--out FILE] [--map FILE] [--steps S]
 *
 * stdout: a line per driver error the program saw (bad_calls), then the
 * final `steps= launches= setparams= checksum=` line; --out: every Y (and
 * the loaded values) after the last step.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "reprofile_probe"
static const char *which = "plain";
#define VR_PROG_DETAIL which
#include "vr_check.h"

enum { NODES = 16, M = 1024, POOL = 8, MOVE_AT = 8, REBIND = 4, ACT_AT = 10, STORE_AT = 15, ACT2_AT = 14 };
#define BYTES ((size_t)2 << 20) /* VMM-backed at the default threshold */

static CUfunction f_axpy, f_store, f_load;
static CUdeviceptr xs[POOL], ys, tables[2], loaded;
static unsigned long long m = M;
static float coef[NODES];
static unsigned long long setparams, launches;

static CUdeviceptr x_at(unsigned step)
{
    return step < MOVE_AT ? xs[0] : xs[(1 + (step - MOVE_AT) / REBIND) % POOL];
}

static void fill(CUdeviceptr p, unsigned seed)
{
    float h[M];
    for (size_t i = 0; i < M; i++)
        h[i] = (float)((i * 7 + seed * 13) % 31) * 0.125f - 1.0f;
    CK(cuMemcpyHtoD_v2(p, h, sizeof h));
}

/* Node i's parameters at `step` (x the buffer it reads, table the store
 * node's). */
struct node_args {
    CUdeviceptr y, x, table;
    unsigned long long count;
    float a;
    void *kp[4];
};

static void params(CUDA_KERNEL_NODE_PARAMS *p, struct node_args *a, unsigned i, CUdeviceptr x,
                   unsigned step, bool store)
{
    memset(p, 0, sizeof *p);
    p->gridDimX = 4;
    p->gridDimY = p->gridDimZ = 1;
    p->blockDimX = 256;
    p->blockDimY = p->blockDimZ = 1;
    a->x = x;
    if (store && i == 0) {
        a->table = tables[0];
        a->count = step == STORE_AT ? M : 0;
        a->kp[0] = &a->table;
        a->kp[1] = &a->x;
        a->kp[2] = &a->count;
        p->func = f_store;
    } else {
        a->y = ys + (CUdeviceptr)i * M * sizeof(float);
        a->a = coef[i];
        a->kp[0] = &a->y;
        a->kp[1] = &a->x;
        a->kp[2] = &a->a;
        a->kp[3] = &m;
        p->func = f_axpy;
    }
    p->kernelParams = a->kp;
}

static CUgraph build(CUgraphNode *nodes, CUgraphNode *empty, bool store)
{
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddEmptyNode(empty, g, NULL, 0));
    for (unsigned i = 0; i < NODES; i++) {
        CUDA_KERNEL_NODE_PARAMS p;
        struct node_args a;
        params(&p, &a, i, xs[0], 0, store);
        CK(cuGraphAddKernelNode_v2(&nodes[i], g, i ? &nodes[i - 1] : empty, 1, &p));
    }
    return g;
}

static void set_all(CUgraphExec ex, const CUgraphNode *nodes, unsigned step, bool store)
{
    for (unsigned i = 0; i < NODES; i++) {
        CUDA_KERNEL_NODE_PARAMS p;
        struct node_args a;
        params(&p, &a, i, x_at(step), step, store);
        CK(cuGraphExecKernelNodeSetParams_v2(ex, nodes[i], &p));
        setparams++;
    }
}

/* two_threads: the steps from ACT_AT on, alternating between two threads
 * and two streams; each launch waits on the event the one before recorded. */
struct relay {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned next, steps;
    CUgraphExec ex;
    const CUgraphNode *nodes;
    CUevent done;
    CUcontext ctx;
};

struct lane {
    struct relay *r;
    unsigned parity;
    CUstream st;
};

static void *lane_main(void *arg)
{
    struct lane *l = arg;
    struct relay *r = l->r;
    CK(cuCtxSetCurrent(r->ctx));
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->next < r->steps && r->next % 2 != l->parity)
            pthread_cond_wait(&r->cv, &r->mu);
        unsigned step = r->next;
        if (step >= r->steps) {
            pthread_mutex_unlock(&r->mu);
            return NULL;
        }
        set_all(r->ex, r->nodes, step, false);
        CK(cuStreamWaitEvent(l->st, r->done, 0));
        CK(cuGraphLaunch(r->ex, l->st));
        launches++;
        CK(cuEventRecord(r->done, l->st));
        r->next++;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
}

static void bad(const char *what, CUresult r)
{
    printf("%s: %s\n", what, vr_err_name(r));
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    unsigned steps = 24;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--map") && i + 1 < argc)
            i++;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc)
            which = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: reprofile_probe --case C [--out F] [--map F] [--steps S]\n");
            return 2;
        }
    }
    bool store = !strcmp(which, "stored_ptr");
    CUmodule mod;
    CUcontext ctx;
    vr_module_start(&mod, &ctx);
    CK(cuModuleGetFunction(&f_axpy, mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&f_store, mod, "vr_store_ptr"));
    CK(cuModuleGetFunction(&f_load, mod, "vr_load_ptr_f32"));
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (unsigned i = 0; i < NODES; i++)
        coef[i] = 0.5f + 0.25f * (float)i;
    for (unsigned i = 0; i < POOL; i++) {
        CK(cuMemAlloc_v2(&xs[i], BYTES));
        fill(xs[i], i);
    }
    CK(cuMemAlloc_v2(&ys, BYTES));
    CK(cuMemsetD32_v2(ys, 0, BYTES / 4));
    CK(cuMemAlloc_v2(&loaded, BYTES));
    CK(cuMemsetD32_v2(loaded, 0, BYTES / 4));
    for (unsigned i = 0; i < 2; i++) {
        CK(cuMemAlloc_v2(&tables[i], BYTES));
        CK(cuMemsetD32_v2(tables[i], 0, BYTES / 4));
    }
    CK(cuCtxSynchronize());

    CUgraphNode nodes[NODES], empty;
    CUgraph g = build(nodes, &empty, store);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, g, 0));
    CUgraph g2 = NULL;
    CUdeviceptr small = 0;
    for (unsigned s = 0; s < steps; s++) {
        if ((s == ACT_AT || s == ACT2_AT) && !strcmp(which, "free_reuse")) {
            CK(cuStreamSynchronize(st));
            /* the X in use and the next one the program will bind */
            unsigned cur = 0;
            for (unsigned i = 0; i < POOL; i++)
                if (xs[i] == x_at(s))
                    cur = i;
            unsigned nxt = (cur + 1) % POOL;
            CK(cuMemFree_v2(xs[cur]));
            CK(cuMemFree_v2(xs[nxt]));
            CK(cuMemAlloc_v2(&xs[nxt], BYTES));
            CK(cuMemAlloc_v2(&xs[cur], BYTES));
            fill(xs[cur], 10 + cur);
            fill(xs[nxt], 10 + nxt);
            CK(cuCtxSynchronize());
        } else if (s == ACT_AT && !strcmp(which, "destroy_reuse")) {
            CK(cuStreamSynchronize(st));
            CK(cuGraphExecDestroy(ex));
            CK(cuGraphInstantiateWithFlags(&ex, g, 0));
        } else if (s == ACT_AT && !strcmp(which, "update")) {
            for (unsigned i = 0; i < NODES; i++)
                coef[i] = 1.5f - 0.0625f * (float)i;
            CUgraphNode n2[NODES], e2;
            g2 = build(n2, &e2, false);
            CUgraphExecUpdateResultInfo info;
            CK(cuGraphExecUpdate_v2(ex, g2, &info));
        } else if (s == ACT_AT && !strcmp(which, "bad_calls")) {
            CUDA_KERNEL_NODE_PARAMS p;
            struct node_args a;
            params(&p, &a, 1, x_at(s), s, false);
            bad("setparams on the empty node", cuGraphExecKernelNodeSetParams_v2(ex, empty, &p));
            bad("setparams with NULL params", cuGraphExecKernelNodeSetParams_v2(ex, nodes[1], NULL));
            CUgraphNode gone;
            CK(cuGraphAddEmptyNode(&gone, g, NULL, 0));
            bad("setparams on a node the exec lacks",
                cuGraphExecKernelNodeSetParams_v2(ex, gone, &p));
            CK(cuMemAlloc_v2(&small, 64 << 10));
            fill(small, 99);
            CK(cuCtxSynchronize());
        } else if (s == ACT_AT && !strcmp(which, "two_threads")) {
            struct relay r = {.next = s, .steps = steps, .ex = ex, .nodes = nodes, .ctx = ctx};
            pthread_mutex_init(&r.mu, NULL);
            pthread_cond_init(&r.cv, NULL);
            CK(cuEventCreate(&r.done, CU_EVENT_DISABLE_TIMING));
            CK(cuEventRecord(r.done, st));
            struct lane lanes[2] = {{&r, 0, NULL}, {&r, 1, NULL}};
            pthread_t th[2];
            for (unsigned i = 0; i < 2; i++) {
                CK(cuStreamCreate(&lanes[i].st, CU_STREAM_NON_BLOCKING));
                if (pthread_create(&th[i], NULL, lane_main, &lanes[i]) != 0)
                    return 1;
            }
            for (unsigned i = 0; i < 2; i++)
                pthread_join(th[i], NULL);
            CK(cuCtxSynchronize());
            for (unsigned i = 0; i < 2; i++)
                CK(cuStreamDestroy_v2(lanes[i].st));
            CK(cuEventDestroy_v2(r.done));
            break;
        }
        set_all(ex, nodes, s, store);
        if (small && s >= ACT_AT) {
            /* node 2 reads the small buffer instead */
            CUDA_KERNEL_NODE_PARAMS p;
            struct node_args a;
            params(&p, &a, 2, small, s, false);
            CK(cuGraphExecKernelNodeSetParams_v2(ex, nodes[2], &p));
            setparams++;
        }
        CK(cuGraphLaunch(ex, st));
        launches++;
        if (store && s > STORE_AT) {
            /* X of step STORE_AT, through the pointers stored then */
            CUdeviceptr t = tables[0];
            void *kp[] = {&loaded, &t, &m, &m};
            CK(cuLaunchKernel(f_load, 4, 1, 1, 256, 1, 1, 0, st, kp,
                              NULL));
            /* accumulate into Y's last slot so every step counts */
            float one = 1.0f;
            CUdeviceptr ylast = ys + (CUdeviceptr)(NODES) * M * sizeof(float);
            void *kq[] = {&ylast, &loaded, &one, &m};
            CK(cuLaunchKernel(f_axpy, 4, 1, 1, 256, 1, 1, 0, st, kq, NULL));
        }
        CK(cuStreamSynchronize(st));
    }
    CK(cuCtxSynchronize());
    size_t n = (size_t)(NODES + 1) * M;
    float *h = malloc(n * sizeof *h);
    if (!h)
        return 1;
    CK(cuMemcpyDtoH_v2(h, ys, n * sizeof *h));
    unsigned long long sum = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)h;
    for (size_t i = 0; i < n * sizeof *h; i++)
        sum = (sum ^ b[i]) * 1099511628211ull;
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(h, sizeof *h, n, f) != n || fclose(f) != 0)
            return 1;
    }
    free(h);
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    if (g2)
        CK(cuGraphDestroy(g2));
    if (small)
        CK(cuMemFree_v2(small));
    for (unsigned i = 0; i < POOL; i++)
        CK(cuMemFree_v2(xs[i]));
    CK(cuMemFree_v2(ys));
    CK(cuStreamDestroy_v2(st));
    printf("steps=%u launches=%llu setparams=%llu checksum=%016llx\n", steps, launches, setparams,
           sum);
    return 0;
}
