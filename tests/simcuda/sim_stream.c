/*
 * simcuda streams, events and stream capture.
 *
 * Every stream has a worker thread that runs its operations in order. An
 * operation may carry dependencies (stream, sequence number) that the worker
 * waits for first: that is how the legacy default stream, events and graph
 * launch ordering are modelled.
 */
#include "sim.h"
#include "ptx.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void sim_graph_free(struct sim_graph *g);

static pthread_mutex_t g_streams_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream *g_streams; /* streams whose worker still runs */
static pthread_mutex_t g_submit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_capture_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t g_stream_ids;

/* ---- operations ------------------------------------------------------------ */

struct sim_event {
    atomic_int refs;
    unsigned flags;
    struct sim_ctx *ctx; /* current at cuEventCreate: records only in its streams */
    pthread_mutex_t mu;
    bool recorded;
    struct sim_stream *s; /* referenced */
    uint64_t seq;
    uint64_t gen;
    uint64_t t_ns;
    bool t_valid;
    /* recorded in a capture (under g_capture_mu) */
    struct sim_capture *cap;
    uint64_t cap_id;
    CUgraphNode *cap_nodes;
    size_t n_cap_nodes;
};

static void event_unref(struct sim_event *e)
{
    if (atomic_fetch_sub(&e->refs, 1) != 1)
        return;
    if (e->s)
        sim_stream_unref(e->s);
    pthread_mutex_destroy(&e->mu);
    sim_free(e->cap_nodes);
    sim_free(e);
}

/* Only the op itself is zeroed: the caller writes its `extra` bytes (a
 * graph launch's calls and arguments, tens of kilobytes at 1,000 nodes).
 * Zeroing them made a launch's cost follow glibc's heap state (a fresh
 * mmap comes zeroed, a reused chunk must be cleared): up to 10% of a
 * 1,000-node launch, and more in one shim mode than another. */
struct sim_op *sim_op_new(int kind, size_t extra)
{
    struct sim_op *op = sim_malloc(sizeof *op + extra);
    if (op) {
        memset(op, 0, sizeof *op);
        op->kind = kind;
    }
    return op;
}

void sim_op_free(struct sim_op *op)
{
    for (size_t i = 0; i < op->ndeps; i++)
        sim_stream_unref(op->deps[i].s);
    sim_free(op->deps);
    if (op->kind == SIM_OP_COPY)
        sim_free(op->u.copy.staging);
    if (op->kind == SIM_OP_EVENT)
        event_unref(op->u.ev.ev);
    if (op->kind == SIM_OP_KERNELS)
        for (size_t i = 0; i < op->u.k.ncalls; i++)
            ptx_kernel_unref(op->u.k.calls[i].pk);
    if (op->kind == SIM_OP_GRAPH)
        sim_exec_op_release(op);
    sim_free(op);
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static void set_rows(const struct sim_work *w)
{
    for (size_t r = 0; r < w->rows; r++) {
        unsigned char *d = (unsigned char *)w->dst + r * w->pitch;
        for (size_t i = 0; i < w->n; i++) {
            if (w->kind == SIM_OP_SET8)
                d[i] = (unsigned char)w->value;
            else if (w->kind == SIM_OP_SET16)
                ((uint16_t *)(void *)d)[i] = (uint16_t)w->value;
            else
                ((uint32_t *)(void *)d)[i] = w->value;
        }
    }
}

void sim_work_run(const struct sim_work *w)
{
    switch (w->kind) {
    case SIM_OP_COPY:
        memmove(w->dst, w->src, w->n);
        break;
    case SIM_OP_SET8:
    case SIM_OP_SET16:
    case SIM_OP_SET32:
        set_rows(w);
        break;
    case SIM_OP_HOST:
        w->fn(w->arg);
        break;
    default:
        break;
    }
}

void sim_run_kcall(const struct sim_kcall *c, struct sim_ctx *ctx, struct sim_seen *seen)
{
    if (!c->fn && !c->pk) {
        sim_work_run(&c->w);
        return;
    }
    if (sim_knob.kernel_delay_us)
        sleep_us(sim_knob.kernel_delay_us);
    sim_mem_check_kernel(ctx, c, seen);
    if (c->fn) {
        c->fn(c->args);
        return;
    }
    struct ptx_launch l = {
        .grid = {c->dims[0], c->dims[1], c->dims[2]},
        .block = {c->dims[3], c->dims[4], c->dims[5]},
        .shmem = c->shmem,
        .args = c->args,
        .argsize = c->argsize,
        .dev = ctx ? ctx->dev : 0,
        .print = ctx ? sim_print_append : NULL,
        .print_arg = ctx,
        .set_cond = sim_cond_set,
    };
    ptx_run(c->pk, &l);
}

static void run_op(struct sim_op *op, struct sim_seen *seen)
{
    switch (op->kind) {
    case SIM_OP_KERNELS:
        for (size_t i = 0; i < op->u.k.ncalls; i++)
            sim_run_kcall(&op->u.k.calls[i], op->u.k.ctx, seen);
        break;
    case SIM_OP_GRAPH:
        sim_exec_run(op, seen);
        break;
    case SIM_OP_COPY:
        memmove(op->u.copy.dst, op->u.copy.staging ? op->u.copy.staging : op->u.copy.src,
                op->u.copy.n);
        break;
    case SIM_OP_SET8:
    case SIM_OP_SET16:
    case SIM_OP_SET32: {
        if (op->kind == SIM_OP_SET8 && op->u.set.rows <= 1) {
            memset(op->u.set.dst, (int)(op->u.set.value & 0xff), op->u.set.n);
            break;
        }
        struct sim_work w = {.kind = op->kind, .dst = op->u.set.dst, .n = op->u.set.n,
                             .rows = op->u.set.rows ? op->u.set.rows : 1,
                             .pitch = op->u.set.pitch, .value = op->u.set.value};
        set_rows(&w);
        break;
    }
    case SIM_OP_EVENT: {
        struct sim_event *e = op->u.ev.ev;
        pthread_mutex_lock(&e->mu);
        if (e->gen == op->u.ev.gen) {
            e->t_ns = sim_now_ns();
            e->t_valid = true;
        }
        pthread_mutex_unlock(&e->mu);
        break;
    }
    case SIM_OP_FREE:
        sim_mem_free_now(op->u.free.base);
        break;
    case SIM_OP_HOST:
        op->u.host.fn(op->u.host.arg);
        break;
    default:
        break;
    }
}

/* ---- streams ----------------------------------------------------------------- */

void sim_stream_ref(struct sim_stream *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void sim_stream_unref(struct sim_stream *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    sim_free(s->cap_deps);
    sim_free(s);
}

static bool stream_blocking(const struct sim_stream *s)
{
    return s->kind == SIM_S_PER_THREAD ||
           (s->kind == SIM_S_USER && !(s->flags & CU_STREAM_NON_BLOCKING));
}

static uint64_t stream_completed(struct sim_stream *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t c = s->completed;
    pthread_mutex_unlock(&s->mu);
    return c;
}

bool sim_stream_done(struct sim_stream *s, uint64_t seq)
{
    return stream_completed(s) >= seq;
}

void sim_stream_wait(struct sim_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq)
        pthread_cond_wait(&s->cv_done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
    struct sim_stream *s = arg;
    struct sim_seen seen = { 0 };
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&s->cv_work, &s->mu);
        struct sim_op *op = s->head;
        pthread_mutex_unlock(&s->mu);
        if (!op)
            break;
        for (size_t i = 0; i < op->ndeps; i++)
            sim_stream_wait(op->deps[i].s, op->deps[i].seq);
        run_op(op, &seen);
        pthread_mutex_lock(&s->mu);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->completed = op->seq;
        pthread_cond_broadcast(&s->cv_done);
        pthread_mutex_unlock(&s->mu);
        sim_op_free(op);
    }
    pthread_mutex_lock(&g_streams_mu);
    if (s->prev_all)
        s->prev_all->next_all = s->next_all;
    else
        g_streams = s->next_all;
    if (s->next_all)
        s->next_all->prev_all = s->prev_all;
    pthread_mutex_unlock(&g_streams_mu);
    sim_stream_unref(s);
    return NULL;
}

struct sim_stream *sim_stream_new(struct sim_ctx *ctx, int kind, unsigned flags, int priority)
{
    struct sim_stream *s = sim_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = ctx;
    s->kind = kind;
    s->id = atomic_fetch_add(&g_stream_ids, 1) + 1;
    s->flags = flags;
    s->priority = priority;
    atomic_init(&s->refs, 2); /* owner + worker */
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, NULL);

    pthread_mutex_lock(&g_streams_mu);
    s->next_all = g_streams;
    if (g_streams)
        g_streams->prev_all = s;
    g_streams = s;
    pthread_mutex_unlock(&g_streams_mu);

    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&g_streams_mu);
        if (s->prev_all)
            s->prev_all->next_all = s->next_all;
        else
            g_streams = s->next_all;
        if (s->next_all)
            s->next_all->prev_all = s->prev_all;
        pthread_mutex_unlock(&g_streams_mu);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv_work);
        pthread_cond_destroy(&s->cv_done);
        sim_free(s);
        return NULL;
    }
    return s;
}

void sim_stream_release(struct sim_stream *s)
{
    pthread_mutex_lock(&s->mu);
    s->destroyed = true;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    sim_stream_unref(s);
}

static void deps_push(struct sim_dep **v, size_t *n, size_t *cap, struct sim_stream *s, uint64_t seq)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*v)[i].s == s) {
            if ((*v)[i].seq < seq)
                (*v)[i].seq = seq;
            return;
        }
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct sim_dep *nv = sim_realloc(*v, nc * sizeof *nv);
        if (!nv)
            abort();
        *v = nv;
        *cap = nc;
    }
    sim_stream_ref(s);
    (*v)[(*n)++] = (struct sim_dep){s, seq};
}

uint64_t sim_stream_submit(struct sim_stream *s, struct sim_op *op, const struct sim_dep *extra,
                           size_t nextra)
{
    struct sim_dep *deps = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&g_submit_mu);
    for (size_t i = 0; i < nextra; i++)
        if (extra[i].s != s && stream_completed(extra[i].s) < extra[i].seq)
            deps_push(&deps, &n, &cap, extra[i].s, extra[i].seq);
    if (s->kind == SIM_S_LEGACY) {
        /* The legacy stream waits for all blocking streams of its context. */
        pthread_mutex_lock(&g_streams_mu);
        for (struct sim_stream *t = g_streams; t; t = t->next_all) {
            if (t == s || t->ctx != s->ctx || !stream_blocking(t))
                continue;
            uint64_t sub = t->submitted;
            if (stream_completed(t) < sub)
                deps_push(&deps, &n, &cap, t, sub);
        }
        pthread_mutex_unlock(&g_streams_mu);
    } else if (stream_blocking(s) && s->ctx) {
        /* ... and blocking streams wait for the legacy stream. */
        struct sim_stream *l = s->ctx->legacy;
        uint64_t sub = l->submitted;
        if (stream_completed(l) < sub)
            deps_push(&deps, &n, &cap, l, sub);
    }
    op->deps = deps;
    op->ndeps = n;
    pthread_mutex_lock(&s->mu);
    op->seq = ++s->submitted;
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->cv_work);
    uint64_t seq = op->seq;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&g_submit_mu);
    return seq;
}

void sim_stream_throttle(struct sim_stream *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->submitted - s->completed >= SIM_LAUNCH_QUEUE && !s->destroyed)
        pthread_cond_wait(&s->cv_done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static uint64_t stream_submitted(struct sim_stream *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t v = s->submitted;
    pthread_mutex_unlock(&s->mu);
    return v;
}

void sim_stream_sync(struct sim_stream *s)
{
    if (s->kind == SIM_S_LEGACY) {
        struct sim_op *op = sim_op_new(SIM_OP_NOP, 0);
        if (op) {
            sim_stream_wait(s, sim_stream_submit(s, op, NULL, 0));
            return;
        }
    }
    sim_stream_wait(s, stream_submitted(s));
}

void sim_ctx_sync(struct sim_ctx *ctx)
{
    struct sim_dep *v = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&g_streams_mu);
    for (struct sim_stream *t = g_streams; t; t = t->next_all)
        if (!ctx || t->ctx == ctx)
            deps_push(&v, &n, &cap, t, stream_submitted(t));
    pthread_mutex_unlock(&g_streams_mu);
    for (size_t i = 0; i < n; i++) {
        sim_stream_wait(v[i].s, v[i].seq);
        sim_stream_unref(v[i].s);
    }
    sim_free(v);
}

/* Per-thread default stream: one per thread, created on first use with the
 * thread's current context, released (after draining) at thread exit. */
static pthread_key_t g_pts_key;
static pthread_once_t g_pts_once = PTHREAD_ONCE_INIT;
static __thread struct sim_stream *t_pts;

static void pts_dtor(void *p)
{
    t_pts = NULL;
    sim_stream_release(p); /* pending work still completes */
}

static void pts_key_init(void)
{
    pthread_key_create(&g_pts_key, pts_dtor);
}

CUresult sim_stream_resolve(CUstream h, bool ptsz, struct sim_stream **out)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        struct sim_ctx *c;
        CUresult r = sim_ctx_need(&c);
        if (r)
            return r;
        bool per_thread = h == CU_STREAM_PER_THREAD || (h == NULL && ptsz);
        if (!per_thread) {
            *out = c->legacy;
            return CUDA_SUCCESS;
        }
        if (!t_pts) {
            pthread_once(&g_pts_once, pts_key_init);
            t_pts = sim_stream_new(c, SIM_S_PER_THREAD, 0, 0);
            if (!t_pts)
                return CUDA_ERROR_OUT_OF_MEMORY;
            pthread_setspecific(g_pts_key, t_pts);
        }
        *out = t_pts;
        return CUDA_SUCCESS;
    }
    if (!sim_reg_has(h, SIM_T_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (struct sim_stream *)h;
    return CUDA_SUCCESS;
}

/* ---- stream capture ------------------------------------------------------------ */

struct sim_capture {
    struct sim_graph *graph;
    CUstreamCaptureMode mode;
    bool strict;  /* not relaxed, and endable: counted in g_strict_captures */
    bool invalid;
    struct sim_stream *origin;
    pthread_t thread;
    uint64_t id;
    bool to_graph;    /* cuStreamBeginCaptureToGraph: the graph is the caller's */
    CUgraphEdgeData *edges; /* cuStreamGetCaptureInfo_v3: default edges, zeroed */
    size_t nedges;
    struct sim_capture *next;
};

static struct sim_capture *g_captures; /* active captures, under g_capture_mu */
static uint64_t g_capture_ids;
/* Captures that prohibit potentially unsafe calls somewhere (written under
 * g_capture_mu): while 0, sim_capture_unsafe takes no lock. */
static _Atomic long g_strict_captures;
/* cuThreadExchangeStreamCaptureMode: this thread's mode, global by default. */
static _Thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static void capture_unstrict(struct sim_capture *c)
{
    if (c->strict) {
        c->strict = false;
        atomic_fetch_sub(&g_strict_captures, 1);
    }
}

CUresult sim_capture_unsafe(void)
{
    if (atomic_load_explicit(&g_strict_captures, memory_order_acquire) == 0 ||
        t_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_t me = pthread_self();
    pthread_mutex_lock(&g_capture_mu);
    for (struct sim_capture *c = g_captures; c; c = c->next) {
        if (!c->strict)
            continue;
        bool own = pthread_equal(c->thread, me);
        if (own || (t_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                    c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalid = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&g_capture_mu);
    return r;
}

CUresult sim_capture_ctx_sync(struct sim_ctx *ctx)
{
    CUresult r = sim_capture_unsafe();
    pthread_mutex_lock(&g_capture_mu);
    for (struct sim_capture *c = g_captures; c; c = c->next) {
        if (c->origin && c->origin->ctx == ctx) {
            c->invalid = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&g_capture_mu);
    return r;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    SIM_ENTER(cuThreadExchangeStreamCaptureMode);
    SIM_CHECK_INIT();
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode prev = t_capture_mode;
    t_capture_mode = *mode;
    *mode = prev;
    return CUDA_SUCCESS;
}

static bool capture_live(struct sim_capture *c, uint64_t id)
{
    for (struct sim_capture *p = g_captures; p; p = p->next)
        if (p == c && p->id == id)
            return true;
    return false;
}

bool sim_capture_active(struct sim_stream *s)
{
    return atomic_load(&s->capturing);
}

void sim_capture_invalidate(struct sim_stream *s)
{
    pthread_mutex_lock(&g_capture_mu);
    if (s->cap)
        s->cap->invalid = true;
    pthread_mutex_unlock(&g_capture_mu);
}

CUresult sim_capture_check_legacy(struct sim_stream *s)
{
    if (s->kind != SIM_S_LEGACY)
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_capture_mu);
    if (g_captures) {
        pthread_mutex_lock(&g_streams_mu);
        for (struct sim_stream *t = g_streams; t; t = t->next_all) {
            if (t->cap && t->ctx == s->ctx && stream_blocking(t) &&
                t->cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
                t->cap->invalid = true;
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            }
        }
        pthread_mutex_unlock(&g_streams_mu);
    }
    pthread_mutex_unlock(&g_capture_mu);
    return r;
}

static bool set_cap_deps(struct sim_stream *s, const CUgraphNode *nodes, size_t n)
{
    if (n > s->cap_deps_cap) {
        CUgraphNode *v = sim_realloc(s->cap_deps, n * sizeof *v);
        if (!v)
            return false;
        s->cap_deps = v;
        s->cap_deps_cap = n;
    }
    if (n)
        memcpy(s->cap_deps, nodes, n * sizeof *nodes);
    s->n_cap_deps = n;
    return true;
}

static bool add_cap_deps(struct sim_stream *s, const CUgraphNode *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool have = false;
        for (size_t j = 0; j < s->n_cap_deps; j++)
            have = have || s->cap_deps[j] == nodes[i];
        if (have)
            continue;
        if (s->n_cap_deps == s->cap_deps_cap) {
            size_t nc = s->cap_deps_cap ? s->cap_deps_cap * 2 : 4;
            CUgraphNode *v = sim_realloc(s->cap_deps, nc * sizeof *v);
            if (!v)
                return false;
            s->cap_deps = v;
            s->cap_deps_cap = nc;
        }
        s->cap_deps[s->n_cap_deps++] = nodes[i];
    }
    return true;
}

static void stream_leave_capture(struct sim_stream *s)
{
    s->cap = NULL;
    s->n_cap_deps = 0;
    atomic_store(&s->capturing, false);
}

/* One node (a kernel: p; else o) into the capture of s, depending on the
 * stream's set and becoming it. */
static CUresult capture_add(struct sim_stream *s, const CUDA_KERNEL_NODE_PARAMS *p,
                            const struct sim_kattrs *a, struct sim_onode *o)
{
    CUresult r;
    pthread_mutex_lock(&g_capture_mu);
    struct sim_capture *c = s->cap;
    if (!c) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->invalid) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        CUgraphNode node;
        r = p ? sim_graph_add_kernel_attrs(c->graph, s->cap_deps, s->n_cap_deps, p, a, &node)
              : sim_graph_add_other(c->graph, s->cap_deps, s->n_cap_deps, o, &node);
        if (r == CUDA_SUCCESS && !set_cap_deps(s, &node, 1))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r != CUDA_SUCCESS)
            c->invalid = true; /* a failed capture call invalidates the sequence */
    }
    pthread_mutex_unlock(&g_capture_mu);
    return r;
}

CUresult sim_capture_add_kernel(struct sim_stream *s, const CUDA_KERNEL_NODE_PARAMS *p,
                                const struct sim_kattrs *a)
{
    return capture_add(s, p, a, NULL);
}

/* On failure before the node is made, o is the caller's: cleared here so
 * that both outcomes leave nothing to the caller. Memset and memcpy
 * parameters hold no reference, so clearing an added node's copy is not
 * needed (the node keeps the struct by value). */
CUresult sim_capture_add_other(struct sim_stream *s, struct sim_onode *o)
{
    CUresult r = capture_add(s, NULL, NULL, o);
    if (r != CUDA_SUCCESS)
        sim_onode_clear(o);
    return r;
}

/* into: the graph to capture into (cuStreamBeginCaptureToGraph, its nodes
 * deps the first node's dependencies), or NULL for a new one. */
static CUresult begin_capture_in(CUstream h, CUstreamCaptureMode mode, bool ptsz,
                                 struct sim_graph *into, const CUgraphNode *deps, size_t ndeps)
{
    SIM_CHECK_INIT();
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    if (s->kind == SIM_S_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* documented: not the legacy stream */
    struct sim_capture *c = sim_calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->to_graph = into != NULL;
    c->graph = into ? into : sim_graph_new();
    if (!c->graph) {
        sim_free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->mode = mode;
    c->origin = s;
    c->thread = pthread_self();
    pthread_mutex_lock(&g_capture_mu);
    if (s->cap || !set_cap_deps(s, deps, ndeps)) {
        r = s->cap ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_unlock(&g_capture_mu);
        if (!into)
            sim_graph_free(c->graph);
        sim_free(c);
        return r;
    }
    c->id = ++g_capture_ids;
    c->strict = mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    if (c->strict)
        atomic_fetch_add(&g_strict_captures, 1);
    c->next = g_captures;
    g_captures = c;
    s->cap = c;
    atomic_store(&s->capturing, true);
    pthread_mutex_unlock(&g_capture_mu);
    return CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptsz)
{
    return begin_capture_in(h, mode, ptsz, NULL, NULL, 0);
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCapture_v2);
    return begin_capture(hStream, mode, false);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCapture_v2_ptsz);
    return begin_capture(hStream, mode, true);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, bool ptsz)
{
    SIM_CHECK_INIT();
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    pthread_mutex_lock(&g_capture_mu);
    struct sim_capture *c = s->cap;
    if (!c) {
        pthread_mutex_unlock(&g_capture_mu);
        return phGraph ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_VALUE;
    }
    /* A capture into the caller's graph hands nothing over: phGraph may be
     * NULL (the programming guide ends a body's capture so; assumption). */
    if (!phGraph && !c->to_graph) {
        pthread_mutex_unlock(&g_capture_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (c->origin != s) {
        pthread_mutex_unlock(&g_capture_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        pthread_mutex_unlock(&g_capture_mu);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    /* Every stream that joined the capture must have been joined back into
     * the origin (cuda.h, cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_
     * UNJOINED); assumption: the capture ends then, its graph discarded. */
    bool unjoined = false;
    pthread_mutex_lock(&g_streams_mu);
    for (struct sim_stream *t = g_streams; t && !unjoined; t = t->next_all)
        for (size_t i = 0; t != s && t->cap == c && i < t->n_cap_deps && !unjoined; i++)
            unjoined = !sim_graph_reaches(c->graph, s->cap_deps, s->n_cap_deps, t->cap_deps[i]);
    pthread_mutex_unlock(&g_streams_mu);
    /* Every stream that joined the capture leaves it. */
    pthread_mutex_lock(&g_streams_mu);
    for (struct sim_stream *t = g_streams; t; t = t->next_all)
        if (t->cap == c)
            stream_leave_capture(t);
    pthread_mutex_unlock(&g_streams_mu);
    stream_leave_capture(s);
    for (struct sim_capture **pp = &g_captures; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    capture_unstrict(c);
    pthread_mutex_unlock(&g_capture_mu);
    struct sim_graph *g = c->graph;
    bool invalid = c->invalid, to_graph = c->to_graph;
    sim_free(c->edges);
    sim_free(c);
    if (invalid || unjoined) {
        if (!to_graph)
            sim_graph_free(g); /* the caller's graph stays the caller's */
        if (phGraph)
            *phGraph = NULL;
        return invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
    if (phGraph)
        *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    SIM_ENTER(cuStreamEndCapture);
    return end_capture(hStream, phGraph, false);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    SIM_ENTER(cuStreamEndCapture_ptsz);
    return end_capture(hStream, phGraph, true);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_capture_mu);
    if (!s->cap)
        *st = CU_STREAM_CAPTURE_STATUS_NONE;
    else
        *st = s->cap->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&g_capture_mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SIM_ENTER(cuStreamIsCapturing);
    return is_capturing(hStream, captureStatus, false);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SIM_ENTER(cuStreamIsCapturing_ptsz);
    return is_capturing(hStream, captureStatus, true);
}

/* ---- capture into a graph, capture info, dependency updates ------------------ */

/* Only default edges are modelled (no programmatic ports). */
static bool edges_default(const CUgraphEdgeData *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++)
        if (e[i].from_port || e[i].to_port || e[i].type)
            return false;
    return true;
}

static CUresult begin_capture_to_graph(CUstream h, CUgraph hg, const CUgraphNode *deps,
                                       const CUgraphEdgeData *edges, size_t n,
                                       CUstreamCaptureMode mode, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!sim_reg_has(hg, SIM_T_GRAPH) || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    if (!edges_default(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_graph *g = (struct sim_graph *)hg;
    for (size_t i = 0; i < n; i++)
        if (!sim_graph_owns(g, deps[i]))
            return CUDA_ERROR_INVALID_VALUE;
    return begin_capture_in(h, mode, ptsz, g, deps, n);
}

CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                     const CUgraphNode *dependencies,
                                     const CUgraphEdgeData *dependencyData,
                                     size_t numDependencies, CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCaptureToGraph);
    return begin_capture_to_graph(hStream, hGraph, dependencies, dependencyData,
                                  numDependencies, mode, false);
}

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *n, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!st || (edges && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&g_capture_mu);
    struct sim_capture *c = s->cap;
    if (c && !c->invalid && edges && c->nedges < s->n_cap_deps) {
        CUgraphEdgeData *v = sim_calloc(s->n_cap_deps, sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&g_capture_mu);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        sim_free(c->edges);
        c->edges = v;
        c->nedges = s->n_cap_deps;
    }
    if (!c) {
        *st = CU_STREAM_CAPTURE_STATUS_NONE;
    } else if (c->invalid) {
        *st = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    } else {
        *st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id)
            *id = c->id;
        if (graph)
            *graph = (CUgraph)c->graph;
        if (deps)
            *deps = s->n_cap_deps ? s->cap_deps : NULL;
        if (edges)
            *edges = s->n_cap_deps ? c->edges : NULL;
        if (n)
            *n = s->n_cap_deps;
    }
    pthread_mutex_unlock(&g_capture_mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out,
                                   size_t *numDependencies_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_v3);
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out, false);
}

/* The older flavours: without edge data, and (10010) status and id only. */
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_v2);
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                        numDependencies_out, false);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                cuuint64_t *id_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo);
    return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, false);
}

static CUresult update_capture_deps(CUstream h, CUgraphNode *deps, const CUgraphEdgeData *edges,
                                    size_t n, unsigned flags, bool ptsz)
{
    SIM_CHECK_INIT();
    if ((n && !deps) ||
        (flags != 0 && flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES &&
         flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES))
        return CUDA_ERROR_INVALID_VALUE;
    if (!edges_default(edges, n))
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    pthread_mutex_lock(&g_capture_mu);
    struct sim_capture *c = s->cap;
    if (!c) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else if (c->invalid) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        for (size_t i = 0; i < n && !r; i++)
            if (!sim_graph_owns(c->graph, deps[i]))
                r = CUDA_ERROR_INVALID_VALUE; /* nodes of the capture's graph only */
        if (!r && !(flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES ? set_cap_deps(s, deps, n)
                                                                 : add_cap_deps(s, deps, n)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&g_capture_mu);
    return r;
}

CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                           size_t numDependencies, unsigned int flags)
{
    SIM_ENTER(cuStreamUpdateCaptureDependencies);
    return update_capture_deps(hStream, dependencies, NULL, numDependencies, flags, false);
}

CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream, CUgraphNode *dependencies,
                                              const CUgraphEdgeData *dependencyData,
                                              size_t numDependencies, unsigned int flags)
{
    SIM_ENTER(cuStreamUpdateCaptureDependencies_v2);
    return update_capture_deps(hStream, dependencies, dependencyData, numDependencies, flags,
                               false);
}

/* ---- stream entry points ---------------------------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if (priority > 0)
        priority = 0; /* clamped to the range, as documented */
    if (priority < -5)
        priority = -5;
    struct sim_stream *s = sim_stream_new(c, SIM_S_USER, flags, priority);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sim_reg_add(s, SIM_T_STREAM);
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    SIM_ENTER(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    SIM_ENTER(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

static CUresult stream_synchronize(CUstream h, bool ptsz)
{
    SIM_CHECK_INIT();
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    if (sim_capture_active(s)) {
        sim_capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    sim_stream_sync(s);
    sim_print_flush(s->ctx);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    SIM_ENTER(cuStreamSynchronize);
    return stream_synchronize(hStream, false);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    SIM_ENTER(cuStreamSynchronize_ptsz);
    return stream_synchronize(hStream, true);
}

static CUresult stream_query(CUstream h, bool ptsz)
{
    SIM_CHECK_INIT();
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    if (sim_capture_active(s)) {
        sim_capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&s->mu);
    bool idle = s->completed == s->submitted;
    pthread_mutex_unlock(&s->mu);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamQuery(CUstream hStream)
{
    SIM_ENTER(cuStreamQuery);
    return stream_query(hStream, false);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    SIM_ENTER(cuStreamQuery_ptsz);
    return stream_query(hStream, true);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    SIM_ENTER(cuStreamDestroy_v2);
    SIM_CHECK_INIT();
    struct sim_stream *s = (struct sim_stream *)hStream;
    if (!sim_reg_has(s, SIM_T_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    sim_reg_del(s);
    pthread_mutex_lock(&g_capture_mu);
    if (s->cap) {
        s->cap->invalid = true;
        if (s->cap->origin == s) {
            s->cap->origin = NULL; /* the capture can no longer be ended */
            capture_unstrict(s->cap); /* nor prohibit anything for good */
        }
        stream_leave_capture(s);
    }
    pthread_mutex_unlock(&g_capture_mu);
    sim_stream_release(s); /* pending work still completes */
    return CUDA_SUCCESS;
}

static CUresult stream_get_flags(CUstream h, unsigned *flags, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    *flags = s->flags;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    SIM_ENTER(cuStreamGetFlags);
    return stream_get_flags(hStream, flags, false);
}

CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    SIM_ENTER(cuStreamGetFlags_ptsz);
    return stream_get_flags(hStream, flags, true);
}

/* A created stream answers the context it was created in; the special
 * handles (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) the calling
 * thread's current one, INVALID_CONTEXT without (documented). No green
 * contexts here: *green is always NULL. */
static CUresult stream_get_ctx(CUstream h, CUcontext *pctx, CUgreenCtx *green, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    bool special = h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
    *pctx = (CUcontext)(special ? sim_ctx_current() : s->ctx);
    if (green)
        *green = NULL;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    SIM_ENTER(cuStreamGetCtx);
    return stream_get_ctx(hStream, pctx, NULL, false);
}

CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    SIM_ENTER(cuStreamGetCtx_ptsz);
    return stream_get_ctx(hStream, pctx, NULL, true);
}

CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    SIM_ENTER(cuStreamGetCtx_v2);
    if (!pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_get_ctx(hStream, pCtx, pGreenCtx, false);
}

CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    SIM_ENTER(cuStreamGetCtx_v2_ptsz);
    if (!pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_get_ctx(hStream, pCtx, pGreenCtx, true);
}

/* The special handles name the stream they resolve to for the calling
 * thread: its current context's legacy stream, or its per-thread stream.
 * Ids come from one counter and are never reused. */
static CUresult stream_get_id(CUstream h, unsigned long long *id, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r)
        return r;
    *id = s->id;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    SIM_ENTER(cuStreamGetId);
    return stream_get_id(hStream, streamId, false);
}

CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
{
    SIM_ENTER(cuStreamGetId_ptsz);
    return stream_get_id(hStream, streamId, true);
}

/* ---- events ------------------------------------------------------------------------- */

static CUresult event_get(CUevent h, struct sim_event **out)
{
    if (!sim_reg_has(h, SIM_T_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (struct sim_event *)h;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    SIM_ENTER(cuEventCreate);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!phEvent || (Flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE; /* documented requirement */
    struct sim_event *e = sim_calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_init(&e->refs, 1);
    e->flags = Flags;
    e->ctx = c;
    pthread_mutex_init(&e->mu, NULL);
    sim_reg_add(e, SIM_T_EVENT);
    atomic_fetch_add(&sim_live_events, 1);
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent h, CUstream hs, unsigned flags, bool ptsz)
{
    SIM_CHECK_INIT();
    struct sim_event *e;
    struct sim_stream *s;
    CUresult r = event_get(h, &e);
    if (r)
        return r;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_stream_resolve(hs, ptsz, &s)) != CUDA_SUCCESS)
        return r;
    if (s->ctx != e->ctx)
        return CUDA_ERROR_INVALID_HANDLE; /* documented: the same context */
    if (sim_capture_active(s)) {
        /* Recorded into the capture: the event stands for the stream's
         * current capture dependencies (used by cuStreamWaitEvent). */
        pthread_mutex_lock(&g_capture_mu);
        pthread_mutex_lock(&e->mu);
        if (s->cap) {
            CUgraphNode *v = NULL;
            if (s->n_cap_deps) {
                v = sim_malloc(s->n_cap_deps * sizeof *v);
                if (!v) {
                    pthread_mutex_unlock(&e->mu);
                    pthread_mutex_unlock(&g_capture_mu);
                    return CUDA_ERROR_OUT_OF_MEMORY;
                }
                memcpy(v, s->cap_deps, s->n_cap_deps * sizeof *v);
            }
            sim_free(e->cap_nodes);
            e->cap_nodes = v;
            e->n_cap_nodes = s->n_cap_deps;
            e->cap = s->cap;
            e->cap_id = s->cap->id;
        }
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_unlock(&g_capture_mu);
        return CUDA_SUCCESS;
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    return sim_event_record_in(e, s);
}

CUresult sim_event_record_in(struct sim_event *e, struct sim_stream *s)
{
    struct sim_op *op = sim_op_new(SIM_OP_EVENT, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&e->mu);
    atomic_fetch_add(&e->refs, 1);
    op->u.ev.ev = e;
    op->u.ev.gen = ++e->gen;
    e->t_valid = false;
    e->cap = NULL;
    uint64_t seq = sim_stream_submit(s, op, NULL, 0);
    sim_stream_ref(s);
    if (e->s)
        sim_stream_unref(e->s);
    e->s = s;
    e->seq = seq;
    e->recorded = true;
    pthread_mutex_unlock(&e->mu);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    SIM_ENTER(cuEventRecord);
    return event_record(hEvent, hStream, 0, false);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    SIM_ENTER(cuEventRecord_ptsz);
    return event_record(hEvent, hStream, 0, true);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    SIM_ENTER(cuEventRecordWithFlags);
    return event_record(hEvent, hStream, flags, false);
}

CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    SIM_ENTER(cuEventRecordWithFlags_ptsz);
    return event_record(hEvent, hStream, flags, true);
}

static bool event_snapshot(struct sim_event *e, struct sim_dep *d);

struct sim_event *sim_event_ref(CUevent h)
{
    struct sim_event *e;
    if (event_get(h, &e) != CUDA_SUCCESS)
        return NULL;
    atomic_fetch_add(&e->refs, 1);
    return e;
}

void sim_event_unref(struct sim_event *e)
{
    event_unref(e);
}

bool sim_event_dep(struct sim_event *e, struct sim_dep *d)
{
    return event_snapshot(e, d);
}

/* Snapshot what the event stands for: (stream, seq) with a reference. */
static bool event_snapshot(struct sim_event *e, struct sim_dep *d)
{
    pthread_mutex_lock(&e->mu);
    bool rec = e->recorded && e->s;
    if (rec) {
        d->s = e->s;
        d->seq = e->seq;
        sim_stream_ref(d->s);
    }
    pthread_mutex_unlock(&e->mu);
    return rec;
}

CUresult cuEventQuery(CUevent hEvent)
{
    SIM_ENTER(cuEventQuery);
    SIM_CHECK_INIT();
    struct sim_event *e;
    CUresult r = event_get(hEvent, &e);
    if (r)
        return r;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    struct sim_dep d;
    if (!event_snapshot(e, &d))
        return CUDA_SUCCESS; /* an event never recorded is complete */
    bool done = sim_stream_done(d.s, d.seq);
    sim_stream_unref(d.s);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    SIM_ENTER(cuEventSynchronize);
    SIM_CHECK_INIT();
    struct sim_event *e;
    CUresult r = event_get(hEvent, &e);
    if (r)
        return r;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    struct sim_dep d;
    if (!event_snapshot(e, &d))
        return CUDA_SUCCESS;
    sim_stream_wait(d.s, d.seq);
    sim_print_flush(d.s->ctx);
    sim_stream_unref(d.s);
    return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    SIM_ENTER(cuEventDestroy_v2);
    SIM_CHECK_INIT();
    struct sim_event *e;
    CUresult r = event_get(hEvent, &e);
    if (r)
        return r;
    sim_reg_del(e);
    atomic_fetch_sub(&sim_live_events, 1);
    event_unref(e); /* a pending record keeps it alive until it completes */
    return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent hs, CUevent he)
{
    SIM_CHECK_INIT();
    struct sim_event *a, *b;
    if (event_get(hs, &a) || event_get(he, &b))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_dep da, db;
    if (!event_snapshot(a, &da))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!event_snapshot(b, &db)) {
        sim_stream_unref(da.s);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    bool done = sim_stream_done(da.s, da.seq) && sim_stream_done(db.s, db.seq);
    sim_stream_unref(da.s);
    sim_stream_unref(db.s);
    if (!done)
        return CUDA_ERROR_NOT_READY;
    pthread_mutex_lock(&a->mu);
    uint64_t ta = a->t_ns;
    bool va = a->t_valid;
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_lock(&b->mu);
    uint64_t tb = b->t_ns;
    bool vb = b->t_valid;
    pthread_mutex_unlock(&b->mu);
    if (!va || !vb)
        return CUDA_ERROR_NOT_READY; /* re-recorded meanwhile */
    *ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    SIM_ENTER(cuEventElapsedTime);
    return elapsed(pMilliseconds, hStart, hEnd);
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    SIM_ENTER(cuEventElapsedTime_v2);
    return elapsed(pMilliseconds, hStart, hEnd);
}

static CUresult stream_wait_event(CUstream hs, CUevent he, unsigned flags, bool ptsz)
{
    SIM_CHECK_INIT();
    struct sim_event *e;
    struct sim_stream *s;
    CUresult r = event_get(he, &e);
    if (r)
        return r;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_stream_resolve(hs, ptsz, &s)) != CUDA_SUCCESS)
        return r;

    /* An event recorded in a live capture makes s join (or merge into) it. */
    pthread_mutex_lock(&g_capture_mu);
    pthread_mutex_lock(&e->mu);
    struct sim_capture *c = e->cap && capture_live(e->cap, e->cap_id) ? e->cap : NULL;
    if (c) {
        r = CUDA_SUCCESS;
        if (s->kind == SIM_S_LEGACY) {
            r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            c->invalid = true;
        } else if (s->cap && s->cap != c) {
            r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
            c->invalid = true;
        } else if (!s->cap) {
            if (!set_cap_deps(s, e->cap_nodes, e->n_cap_nodes))
                r = CUDA_ERROR_OUT_OF_MEMORY;
            s->cap = c;
            atomic_store(&s->capturing, true);
        } else if (!add_cap_deps(s, e->cap_nodes, e->n_cap_nodes)) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&g_capture_mu);
    if (c)
        return r;

    if (sim_capture_active(s)) {
        /* Waiting on work outside the capture sequence. */
        sim_capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    struct sim_dep d;
    if (!event_snapshot(e, &d))
        return CUDA_SUCCESS; /* empty set of work */
    if (d.s != s && !sim_stream_done(d.s, d.seq)) {
        struct sim_op *op = sim_op_new(SIM_OP_NOP, 0);
        if (!op) {
            sim_stream_unref(d.s);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        sim_stream_submit(s, op, &d, 1);
    }
    sim_stream_unref(d.s);
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    SIM_ENTER(cuStreamWaitEvent);
    return stream_wait_event(hStream, hEvent, Flags, false);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    SIM_ENTER(cuStreamWaitEvent_ptsz);
    return stream_wait_event(hStream, hEvent, Flags, true);
}

/* ---- host functions ------------------------------------------------------------------- */

static CUresult launch_host_func(CUstream hs, CUhostFn fn, void *arg, bool ptsz)
{
    SIM_CHECK_INIT();
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(hs, ptsz, &s);
    if (r)
        return r;
    if (sim_capture_active(s)) {
        /* cuda.h: a host function launched into a capturing stream becomes a
         * host node, called at each launch of the graph. */
        CUDA_HOST_NODE_PARAMS p = {fn, arg};
        struct sim_onode o = {0};
        if ((r = sim_onode_host(&o, &p)) != CUDA_SUCCESS) {
            sim_capture_invalidate(s);
            return r;
        }
        return sim_capture_add_other(s, &o);
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    struct sim_op *op = sim_op_new(SIM_OP_HOST, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.fn = fn;
    op->u.host.arg = arg;
    sim_stream_submit(s, op, NULL, 0);
    return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    SIM_ENTER(cuLaunchHostFunc);
    return launch_host_func(hStream, fn, userData, false);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    SIM_ENTER(cuLaunchHostFunc_ptsz);
    return launch_host_func(hStream, fn, userData, true);
}
