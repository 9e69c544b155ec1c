/*
 * simcuda graphs: kernel, empty, memcpy, memset, host and event record/wait
 * nodes (the others: sim_gnode.c; conditional nodes: sim_graph_cond.c,
 * which runs their bodies as execs of their own), dependencies, executable graphs
 * (exec), O(1) exec node parameter updates, O(1) launches, cuGraphExecUpdate.
 *
 * A launch returns to the calling thread in O(1) (plus its event nodes):
 * it queues one operation naming the exec and the launch's number, and the
 * stream's worker runs the nodes. A launch must still run the parameters
 * set before it, never later ones (cuda.h: SetParams affects launches made
 * after it), so every work node (kernel, memcpy, memset, host) keeps its
 * parameters as a list of versions, oldest first, each tagged with the
 * number of launches issued when it was written:
 *   - a setter writes the newest version in place when no launch was issued
 *     since it was written (no launch can see it), and otherwise pushes a
 *     new version (a recycled one: no allocation in the steady state);
 *   - launch k runs, of each node, the newest version written before it
 *     (tag < k), found from the oldest one still kept; the versions older
 *     than it are needed by no launch any more (an exec's launches run one
 *     after the other), so the worker recycles them: each version is passed
 *     once, O(1) per node and launch however far the caller runs ahead.
 * Only the setter (under x->mu) writes a version's parameters and the
 * newest one's link, and only while no issued launch can see it; a worker
 * reads only versions some launch sees, and recycles only versions that
 * have a newer one (never the setter's). Memory: one version per node set
 * after a launch that has not run yet. The exec is referenced by its queued launches, so
 * cuGraphExecDestroy with launches pending is legal and frees it after the
 * last one (as the driver defers).
 */
#include "sim.h"
#include "ptx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kernel parameters as a graph node or an exec node holds them. */
struct knode {
    CUfunction func;  /* what runs: the CUfunction, or the CUkernel given as kern */
    CUkernel kern;    /* the node was given kern (func NULL) */
    sim_kernel_fn fn;
    const struct sim_kernel_impl *impl;
    struct ptx_kernel *pk;  /* referenced: the interpreter runs it (fn NULL) */
    size_t nparams;
    unsigned dims[6];
    unsigned shmem;
    bool use_extra;
    unsigned char *args;
    size_t argsize;
    size_t argcap;   /* bytes args holds (exec nodes: at least 64, so a recycled
                      * version takes another kernel's arguments in place) */
    void **argptrs;  /* graph nodes: the kernelParams GetParams returns */
    void *extra[5];  /* graph nodes: the extra GetParams returns */
    size_t extra_size;
    /* launch attributes (cuLaunchKernelEx into a capture): the two simcuda
     * models, no effect on how the kernel runs; 0 when never given */
    int priority, cooperative;
};

/* A node's memory outlives its graph while an exec instantiated from that
 * graph lives (refs: the graph + each such exec), so its handle value is
 * never reused for another node while an exec may still be named by it. */
struct sim_node {
    atomic_int refs;
    struct sim_graph *graph;
    uint64_t graph_id;
    uint32_t index;
    CUgraphNodeType type;
    struct knode k;
    struct sim_onode o;     /* the other types' parameters */
    struct sim_node **deps; /* incoming edges, in the order added */
    size_t ndeps, depcap;
};

struct sim_graph {
    uint64_t id;
    uint64_t origin;        /* cuGraphClone: the graph cloned (its id), else 0 */
    pthread_mutex_t mu;
    struct sim_node **nodes;
    size_t n, cap;
};

/* One version of a work node's parameters (see the top of the file). */
struct xver {
    _Atomic(struct xver *) next; /* the version after it (newer), or NULL; in a
                             * free list, the next free one */
    uint64_t gen;           /* launches issued when it was written */
    bool disabled;          /* cuGraphNodeSetEnabled */
    bool holds_k;           /* which member of the union it holds */
    union {                 /* one version per pending launch and node: small */
        struct knode k;     /* kernel nodes */
        struct sim_onode o; /* memcpy, memset, host nodes */
    };
};

struct xnode {
    struct sim_node *key;   /* the instantiating graph's node (referenced) */
    CUgraphNodeType type;
    struct xver *oldest;    /* work nodes: the oldest version kept (workers') */
    struct xver *newest;    /* the setters' (under the exec's mu) */
    struct sim_onode o;     /* event nodes (read by the calling thread only) */
    uint32_t *deps; /* sorted indices */
    size_t ndeps;
};

struct sim_exec {
    atomic_int refs;          /* the handle + each queued launch */
    pthread_mutex_t mu;
    uint64_t launches;        /* issued (under mu) */
    struct xver *spare;       /* recycled versions for setters (under mu) */
    _Atomic(struct xver *) recycled; /* pushed by workers, taken by setters */
    uint64_t graph_id;        /* graph instantiated from */
    struct sim_ctx *ctx;      /* context instantiated in (contexts are never freed) */
    size_t n;
    struct xnode *nodes;
    uint32_t *slots;          /* open addressing: key -> index + 1 (0: empty) */
    size_t nslots;            /* power of two, > 2n */
    uint32_t *order;          /* nodes with work (kernel, memcpy, memset, host) in
                               * dependency order */
    size_t norder;
    uint32_t *events;         /* event record and wait nodes */
    size_t nevents;
    struct sim_stream *last_s; /* previous launch (referenced) */
    uint64_t last_seq;
    struct sim_gexec *gm;     /* memory alloc and free nodes (sim_graph_mem.c), or NULL */
    struct sim_cond_list *conds; /* the graph's conditional handles, or NULL */
};

static _Atomic uint64_t g_graph_ids;

/* ---- kernel parameters --------------------------------------------------------- */

static void knode_clear(struct knode *k)
{
    ptx_kernel_unref(k->pk);
    sim_free(k->args);
    sim_free(k->argptrs);
    memset(k, 0, sizeof *k);
}

static CUresult knode_set(struct knode *k, const CUDA_KERNEL_NODE_PARAMS *p, bool graph_node)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    /* func, or when it is NULL the CUkernel kern (documented) */
    CUfunction h = p->func ? p->func : (CUfunction)p->kern;
    struct sim_func *f;
    if (!h || sim_func_get(h, &f) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_check_dims(p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                       p->blockDimZ, p->sharedMemBytes) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->kernelParams && p->extra)
        return CUDA_ERROR_INVALID_VALUE;
    sim_kernel_fn fn;
    struct ptx_kernel *pk;
    CUresult r = sim_func_plan(f, p->sharedMemBytes, &fn, &pk);
    if (r)
        return r == CUDA_ERROR_NOT_SUPPORTED ? r : CUDA_ERROR_INVALID_VALUE;
    unsigned char stackbuf[1024];
    unsigned char *tmp = f->argsize <= sizeof stackbuf ? stackbuf : sim_malloc(f->argsize);
    if (!tmp) {
        ptx_kernel_unref(pk);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = sim_pack_args(f, p->kernelParams, p->extra, tmp);
    if (r) {
        if (tmp != stackbuf)
            sim_free(tmp);
        ptx_kernel_unref(pk);
        return r;
    }
    /* Storage is reused while the layout size stays the same, so pointers
     * from GetParams stay valid across updates of the same kernel. */
    bool reuse = k->args && (graph_node ? k->argsize == f->argsize && k->nparams == f->nparams
                                        : k->argcap >= f->argsize);
    if (!reuse) {
        size_t cap = f->argsize > 64 || graph_node ? f->argsize : 64;
        unsigned char *na = sim_malloc(cap ? cap : 1);
        void **np = graph_node ? sim_malloc((f->nparams ? f->nparams : 1) * sizeof *np) : NULL;
        if (!na || (graph_node && !np)) {
            sim_free(na);
            sim_free(np);
            if (tmp != stackbuf)
                sim_free(tmp);
            ptx_kernel_unref(pk);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        sim_free(k->args);
        sim_free(k->argptrs);
        k->args = na;
        k->argptrs = np;
        k->argcap = cap;
    }
    memcpy(k->args, tmp, f->argsize);
    if (tmp != stackbuf)
        sim_free(tmp);
    k->argsize = f->argsize;
    k->nparams = f->nparams;
    if (graph_node)
        for (size_t i = 0; i < f->nparams; i++)
            k->argptrs[i] = k->args + f->offsets[i];
    k->func = h;
    k->kern = p->func ? NULL : p->kern;
    k->fn = fn;
    k->impl = f->impl;
    ptx_kernel_unref(k->pk);
    k->pk = pk;
    k->dims[0] = p->gridDimX;
    k->dims[1] = p->gridDimY;
    k->dims[2] = p->gridDimZ;
    k->dims[3] = p->blockDimX;
    k->dims[4] = p->blockDimY;
    k->dims[5] = p->blockDimZ;
    k->shmem = p->sharedMemBytes;
    k->use_extra = p->extra != NULL;
    k->extra_size = k->argsize;
    k->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    k->extra[1] = k->args;
    k->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    k->extra[3] = &k->extra_size;
    k->extra[4] = CU_LAUNCH_PARAM_END;
    return CUDA_SUCCESS;
}

static bool knode_copy(struct knode *dst, const struct knode *src)
{
    memset(dst, 0, sizeof *dst);
    dst->func = src->func;
    dst->kern = src->kern;
    dst->fn = src->fn;
    dst->impl = src->impl;
    dst->pk = NULL; /* referenced once the copy succeeded */
    dst->nparams = src->nparams;
    memcpy(dst->dims, src->dims, sizeof dst->dims);
    dst->shmem = src->shmem;
    dst->use_extra = src->use_extra;
    dst->priority = src->priority;
    dst->cooperative = src->cooperative;
    dst->argsize = src->argsize;
    dst->argcap = src->argsize;
    dst->args = sim_malloc(src->argsize ? src->argsize : 1);
    if (!dst->args)
        return false;
    memcpy(dst->args, src->args, src->argsize);
    ptx_kernel_ref(src->pk);
    dst->pk = src->pk;
    return true;
}

static void v1_to_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *a, CUDA_KERNEL_NODE_PARAMS *b)
{
    memset(b, 0, sizeof *b);
    b->func = a->func;
    b->gridDimX = a->gridDimX;
    b->gridDimY = a->gridDimY;
    b->gridDimZ = a->gridDimZ;
    b->blockDimX = a->blockDimX;
    b->blockDimY = a->blockDimY;
    b->blockDimZ = a->blockDimZ;
    b->sharedMemBytes = a->sharedMemBytes;
    b->kernelParams = a->kernelParams;
    b->extra = a->extra;
}

/* ---- graphs ------------------------------------------------------------------------- */

struct sim_graph *sim_graph_new(void)
{
    struct sim_graph *g = sim_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->id = atomic_fetch_add(&g_graph_ids, 1) + 1;
    pthread_mutex_init(&g->mu, NULL);
    sim_reg_add(g, SIM_T_GRAPH);
    return g;
}

static void node_unref(struct sim_node *nd)
{
    if (atomic_fetch_sub(&nd->refs, 1) == 1)
        sim_free(nd);
}

void sim_graph_free(struct sim_graph *g)
{
    sim_reg_del(g);
    sim_cond_graph_gone(g);
    for (size_t i = 0; i < g->n; i++) {
        struct sim_node *nd = g->nodes[i];
        sim_reg_del(nd);
        knode_clear(&nd->k);
        sim_onode_clear(&nd->o);
        sim_free(nd->deps);
        nd->deps = NULL;
        node_unref(nd);
    }
    sim_free(g->nodes);
    pthread_mutex_destroy(&g->mu);
    sim_free(g);
}

static struct sim_graph *graph_get(CUgraph h)
{
    return sim_reg_has(h, SIM_T_GRAPH) ? (struct sim_graph *)h : NULL;
}

static struct sim_node *node_get(CUgraphNode h)
{
    return sim_reg_has(h, SIM_T_NODE) ? (struct sim_node *)h : NULL;
}

static bool add_dep(struct sim_node *to, struct sim_node *from)
{
    if (to->ndeps == to->depcap) {
        size_t nc = to->depcap ? to->depcap * 2 : 4;
        struct sim_node **v = sim_realloc(to->deps, nc * sizeof *v);
        if (!v)
            return false;
        to->deps = v;
        to->depcap = nc;
    }
    to->deps[to->ndeps++] = from;
    return true;
}

/* Under g->mu: dependencies must be distinct nodes of g. */
static CUresult check_deps(struct sim_graph *g, const CUgraphNode *deps, size_t n)
{
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        struct sim_node *d = node_get(deps[i]);
        if (!d || d->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Under g->mu. */
/* Under g->mu. o: the parameters of another type, owned by the node once
 * added (the caller's to clear on failure). */
static CUresult add_node(struct sim_graph *g, CUgraphNodeType type, const CUgraphNode *deps,
                         size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *p,
                         const struct sim_onode *o, CUgraphNode *out)
{
    CUresult r = check_deps(g, deps, ndeps);
    if (r)
        return r;
    if (o && (r = sim_gmem_node_added(o, g->id)) != CUDA_SUCCESS)
        return r;
    if (g->n >= UINT32_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_node *nd = sim_calloc(1, sizeof *nd);
    if (!nd)
        return CUDA_ERROR_OUT_OF_MEMORY;
    nd->type = type;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL && (r = knode_set(&nd->k, p, true)) != CUDA_SUCCESS) {
        sim_free(nd);
        return r;
    }
    for (size_t i = 0; i < ndeps; i++) {
        if (!add_dep(nd, (struct sim_node *)deps[i])) {
            knode_clear(&nd->k);
            sim_free(nd->deps);
            sim_free(nd);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 16;
        struct sim_node **v = sim_realloc(g->nodes, nc * sizeof *v);
        if (!v) {
            knode_clear(&nd->k);
            sim_free(nd->deps);
            sim_free(nd);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        g->nodes = v;
        g->cap = nc;
    }
    if (o)
        nd->o = *o;
    atomic_init(&nd->refs, 1);
    nd->graph = g;
    nd->graph_id = g->id;
    nd->index = (uint32_t)g->n;
    g->nodes[g->n++] = nd;
    sim_reg_add(nd, SIM_T_NODE);
    *out = (CUgraphNode)nd;
    return CUDA_SUCCESS;
}

CUresult sim_graph_add_kernel(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_KERNEL_NODE_PARAMS *p, CUgraphNode *out)
{
    pthread_mutex_lock(&g->mu);
    CUresult r = add_node(g, CU_GRAPH_NODE_TYPE_KERNEL, deps, ndeps, p, NULL, out);
    pthread_mutex_unlock(&g->mu);
    return r;
}

CUresult sim_graph_add_kernel_attrs(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                                    const CUDA_KERNEL_NODE_PARAMS *p,
                                    const struct sim_kattrs *a, CUgraphNode *out)
{
    pthread_mutex_lock(&g->mu);
    CUresult r = add_node(g, CU_GRAPH_NODE_TYPE_KERNEL, deps, ndeps, p, NULL, out);
    if (r == CUDA_SUCCESS && a) {
        ((struct sim_node *)*out)->k.priority = a->priority;
        ((struct sim_node *)*out)->k.cooperative = a->cooperative;
    }
    pthread_mutex_unlock(&g->mu);
    return r;
}

CUresult sim_graph_add_other(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                             struct sim_onode *o, CUgraphNode *out)
{
    pthread_mutex_lock(&g->mu);
    CUresult r = add_node(g, o->type, deps, ndeps, NULL, o, out);
    pthread_mutex_unlock(&g->mu);
    return r;
}

bool sim_graph_owns(struct sim_graph *g, CUgraphNode h)
{
    struct sim_node *nd = node_get(h);
    return nd && nd->graph == g;
}

bool sim_graph_has_type(struct sim_graph *g, CUgraphNodeType t)
{
    pthread_mutex_lock(&g->mu);
    bool found = false;
    for (size_t i = 0; i < g->n && !found; i++)
        found = g->nodes[i]->type == t;
    pthread_mutex_unlock(&g->mu);
    return found;
}

bool sim_graph_reaches(struct sim_graph *g, const CUgraphNode *from, size_t nfrom,
                       CUgraphNode target)
{
    pthread_mutex_lock(&g->mu);
    bool *seen = sim_calloc(g->n ? g->n : 1, sizeof *seen);
    struct sim_node **stack = sim_calloc(g->n ? g->n : 1, sizeof *stack);
    bool found = false;
    size_t top = 0;
    for (size_t i = 0; seen && stack && i < nfrom; i++) {
        struct sim_node *nd = (struct sim_node *)from[i];
        if (nd && nd->graph == g && !seen[nd->index]) {
            seen[nd->index] = true;
            stack[top++] = nd;
        }
    }
    while (top && !found) {
        struct sim_node *nd = stack[--top];
        found = (CUgraphNode)nd == target;
        for (size_t d = 0; d < nd->ndeps; d++)
            if (!seen[nd->deps[d]->index]) {
                seen[nd->deps[d]->index] = true;
                stack[top++] = nd->deps[d];
            }
    }
    bool oom = !seen || !stack;
    sim_free(seen);
    sim_free(stack);
    pthread_mutex_unlock(&g->mu);
    return found || oom;
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    SIM_ENTER(cuGraphCreate);
    SIM_CHECK_INIT();
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph *g = sim_graph_new();
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    SIM_ENTER(cuGraphDestroy);
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!g || sim_cond_is_body(g)) /* a body is its conditional node's */
        return CUDA_ERROR_INVALID_VALUE;
    sim_graph_free(g); /* executable graphs are independent copies */
    return CUDA_SUCCESS;
}

/* A copy with new node handles, in the same creation order and edges. */
CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    SIM_ENTER(cuGraphClone);
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(originalGraph);
    if (!phGraphClone || !g)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph *c = sim_graph_new();
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n && !r; i++)
        if (sim_gmem_type(g->nodes[i]->type))
            r = CUDA_ERROR_NOT_SUPPORTED; /* cuda.h: not for memory nodes */
    for (size_t i = 0; i < g->n && !r; i++) {
        struct sim_node *nd = g->nodes[i];
        if (nd->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            r = CUDA_ERROR_NOT_SUPPORTED; /* cuda.h: such a graph cannot be cloned */
            break;
        }
        CUgraphNode *deps = sim_malloc((nd->ndeps ? nd->ndeps : 1) * sizeof *deps);
        if (!deps) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        /* A dependency on a node made later (cuGraphAddDependencies can add
         * one) is added once that node exists, below. */
        size_t nearlier = 0;
        for (size_t d = 0; d < nd->ndeps; d++)
            if (nd->deps[d]->index < i)
                deps[nearlier++] = (CUgraphNode)c->nodes[nd->deps[d]->index];
        CUDA_KERNEL_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (nd->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            const struct knode *k = &nd->k;
            p.func = k->kern ? NULL : k->func;
            p.kern = k->kern;
            p.gridDimX = k->dims[0];
            p.gridDimY = k->dims[1];
            p.gridDimZ = k->dims[2];
            p.blockDimX = k->dims[3];
            p.blockDimY = k->dims[4];
            p.blockDimZ = k->dims[5];
            p.sharedMemBytes = k->shmem;
            if (k->use_extra)
                p.extra = (void **)k->extra;
            else
                p.kernelParams = k->argptrs;
        }
        CUgraphNode out;
        struct sim_onode o;
        sim_onode_copy(&o, &nd->o);
        pthread_mutex_lock(&c->mu);
        r = add_node(c, nd->type, deps, nearlier, &p, &o, &out);
        if (!r && nd->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            ((struct sim_node *)out)->k.priority = nd->k.priority;
            ((struct sim_node *)out)->k.cooperative = nd->k.cooperative;
        }
        pthread_mutex_unlock(&c->mu);
        if (r)
            sim_onode_clear(&o);
        sim_free(deps);
    }
    for (size_t i = 0; i < g->n && !r; i++) {
        const struct sim_node *nd = g->nodes[i];
        for (size_t d = 0; d < nd->ndeps && !r; d++)
            if (nd->deps[d]->index >= i &&
                !add_dep(c->nodes[i], c->nodes[nd->deps[d]->index]))
                r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&g->mu);
    if (r) {
        sim_graph_free(c);
        return r;
    }
    c->origin = g->id;
    *phGraphClone = (CUgraph)c;
    return CUDA_SUCCESS;
}

/* The clone's node at the original's creation index: the clone made its
 * nodes in that order. A node added to the original after the cloning, or a
 * graph not cloned from the node's graph: CUDA_ERROR_INVALID_VALUE. */
CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                CUgraph hClonedGraph)
{
    SIM_ENTER(cuGraphNodeFindInClone);
    SIM_CHECK_INIT();
    struct sim_graph *c = graph_get(hClonedGraph);
    struct sim_node *nd = node_get(hOriginalNode);
    if (!phNode || !c || !nd)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&c->mu);
    CUgraphNode out = NULL;
    if (c->origin && c->origin == nd->graph_id && nd->index < c->n)
        out = (CUgraphNode)c->nodes[nd->index];
    pthread_mutex_unlock(&c->mu);
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *phNode = out;
    return CUDA_SUCCESS;
}

static CUresult add_kernel_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                                const CUDA_KERNEL_NODE_PARAMS *p)
{
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(hg);
    if (!out || !g || !p)
        return CUDA_ERROR_INVALID_VALUE;
    return sim_graph_add_kernel(g, deps, n, p, out);
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphAddKernelNode_v2);
    return add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SIM_ENTER(cuGraphAddKernelNode);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    v1_to_v2(nodeParams, &p);
    return add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                             const CUgraphNode *dependencies, size_t numDependencies)
{
    SIM_ENTER(cuGraphAddEmptyNode);
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!phGraphNode || !g)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g->mu);
    CUresult r = add_node(g, CU_GRAPH_NODE_TYPE_EMPTY, dependencies, numDependencies, NULL,
                          NULL, phGraphNode);
    pthread_mutex_unlock(&g->mu);
    return r;
}

/* Adds a node of another type whose parameters `made` (a sim_onode_*
 * result) produced. */
static CUresult add_other(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                          struct sim_onode *o, CUresult made)
{
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(hg);
    if (made == CUDA_SUCCESS && (!out || !g))
        made = CUDA_ERROR_INVALID_VALUE;
    if (made != CUDA_SUCCESS) {
        if (made != CUDA_SUCCESS && o->type)
            sim_onode_clear(o);
        return made;
    }
    pthread_mutex_lock(&g->mu);
    CUresult r = add_node(g, o->type, deps, n, NULL, o, out);
    pthread_mutex_unlock(&g->mu);
    if (r)
        sim_onode_clear(o);
    return r;
}

CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    SIM_ENTER(cuGraphAddMemcpyNode);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_memcpy(&o, copyParams, ctx);
    return add_other(phGraphNode, hGraph, dependencies, numDependencies, &o, r);
}

CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    SIM_ENTER(cuGraphAddMemsetNode);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_memset(&o, memsetParams, ctx);
    return add_other(phGraphNode, hGraph, dependencies, numDependencies, &o, r);
}

CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                            const CUgraphNode *dependencies, size_t numDependencies,
                            const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphAddHostNode);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_host(&o, nodeParams);
    return add_other(phGraphNode, hGraph, dependencies, numDependencies, &o, r);
}

CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                   const CUgraphNode *dependencies, size_t numDependencies,
                                   CUevent event)
{
    SIM_ENTER(cuGraphAddEventRecordNode);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_event(&o, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
    return add_other(phGraphNode, hGraph, dependencies, numDependencies, &o, r);
}

CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 CUevent event)
{
    SIM_ENTER(cuGraphAddEventWaitNode);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_event(&o, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
    return add_other(phGraphNode, hGraph, dependencies, numDependencies, &o, r);
}

/* A graph node's parameters of another type, copied out under its graph's
 * lock; false when h is not a node of that type. */
bool sim_graph_node_onode(CUgraphNode h, CUgraphNodeType type, struct sim_onode *o)
{
    struct sim_node *nd = node_get(h);
    if (!nd || nd->type != type)
        return false;
    pthread_mutex_lock(&nd->graph->mu);
    *o = nd->o;
    pthread_mutex_unlock(&nd->graph->mu);
    return true;
}

CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    SIM_ENTER(cuGraphMemcpyNodeGetParams);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!nodeParams || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_MEMCPY, &o))
        return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = o.cp;
    return CUDA_SUCCESS;
}

CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphMemsetNodeGetParams);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!nodeParams || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_MEMSET, &o))
        return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = o.ms;
    return CUDA_SUCCESS;
}

CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphHostNodeGetParams);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!nodeParams || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_HOST, &o))
        return CUDA_ERROR_INVALID_VALUE;
    *nodeParams = o.host;
    return CUDA_SUCCESS;
}

CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    SIM_ENTER(cuGraphEventRecordNodeGetEvent);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!event_out || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, &o))
        return CUDA_ERROR_INVALID_VALUE;
    *event_out = (CUevent)o.ev;
    return CUDA_SUCCESS;
}

CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    SIM_ENTER(cuGraphEventWaitNodeGetEvent);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!event_out || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, &o))
        return CUDA_ERROR_INVALID_VALUE;
    *event_out = (CUevent)o.ev;
    return CUDA_SUCCESS;
}

static CUresult add_dependencies(CUgraph hg, const CUgraphNode *from, const CUgraphNode *to,
                                 const CUgraphEdgeData *edge, size_t n)
{
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(hg);
    if (!g || (n && (!from || !to)))
        return CUDA_ERROR_INVALID_VALUE;
    if (edge) {
        for (size_t i = 0; i < n; i++) /* only default edges are modelled */
            if (edge[i].from_port || edge[i].to_port || edge[i].type)
                return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&g->mu);
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < n && !r; i++) {
        struct sim_node *a = node_get(from[i]), *b = node_get(to[i]);
        if (!a || !b || a->graph != g || b->graph != g || a == b) {
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        for (size_t j = 0; j < b->ndeps; j++)
            if (b->deps[j] == a)
                r = CUDA_ERROR_INVALID_VALUE; /* the edge exists already */
        for (size_t j = 0; j < i; j++)
            if (from[j] == from[i] && to[j] == to[i])
                r = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < n && !r; i++)
        if (!add_dep((struct sim_node *)to[i], (struct sim_node *)from[i]))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g->mu);
    return r;
}

CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                size_t numDependencies)
{
    SIM_ENTER(cuGraphAddDependencies);
    return add_dependencies(hGraph, from, to, NULL, numDependencies);
}

CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                   const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    SIM_ENTER(cuGraphAddDependencies_v2);
    return add_dependencies(hGraph, from, to, edgeData, numDependencies);
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    SIM_ENTER(cuGraphGetNodes);
    SIM_CHECK_INIT();
    struct sim_graph *g = graph_get(hGraph);
    if (!g || !numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g->mu);
    if (!nodes) {
        *numNodes = g->n;
    } else {
        size_t want = *numNodes;
        for (size_t i = 0; i < want; i++)
            nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (want > g->n)
            *numNodes = g->n;
    }
    pthread_mutex_unlock(&g->mu);
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    SIM_ENTER(cuGraphNodeGetType);
    SIM_CHECK_INIT();
    struct sim_node *nd = node_get(hNode);
    if (!nd || !type)
        return CUDA_ERROR_INVALID_VALUE;
    *type = nd->type;
    return CUDA_SUCCESS;
}

/* The device-updatable attribute: simcuda has no way to make a node
 * device-updatable (cuGraphKernelNodeSetAttribute is not exported), so it
 * reads 0. Priority and cooperative: what cuLaunchKernelEx gave the
 * captured node (0 when none). Other attributes: CUDA_ERROR_NOT_SUPPORTED. */
CUresult cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                       CUkernelNodeAttrValue *value_out)
{
    SIM_ENTER(cuGraphKernelNodeGetAttribute);
    SIM_CHECK_INIT();
    struct sim_node *nd = node_get(hNode);
    if (!nd || !value_out || nd->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr != CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE &&
        attr != CU_LAUNCH_ATTRIBUTE_PRIORITY && attr != CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&nd->graph->mu);
    memset(value_out, 0, sizeof *value_out);
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY)
        value_out->priority = nd->k.priority;
    else if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
        value_out->cooperative = nd->k.cooperative;
    else
        value_out->deviceUpdatableKernelNode.deviceUpdatable = 0;
    pthread_mutex_unlock(&nd->graph->mu);
    return CUDA_SUCCESS;
}

static CUresult node_deps(CUgraphNode h, CUgraphNode *deps, CUgraphEdgeData *edge, size_t *n)
{
    SIM_CHECK_INIT();
    struct sim_node *nd = node_get(h);
    if (!nd || !n)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&nd->graph->mu);
    if (!deps) {
        *n = nd->ndeps;
    } else {
        size_t want = *n;
        for (size_t i = 0; i < want; i++) {
            deps[i] = i < nd->ndeps ? (CUgraphNode)nd->deps[i] : NULL;
            if (edge)
                memset(&edge[i], 0, sizeof edge[i]);
        }
        if (want > nd->ndeps)
            *n = nd->ndeps;
    }
    pthread_mutex_unlock(&nd->graph->mu);
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                    size_t *numDependencies)
{
    SIM_ENTER(cuGraphNodeGetDependencies);
    return node_deps(hNode, dependencies, NULL, numDependencies);
}

CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                       CUgraphEdgeData *edgeData, size_t *numDependencies)
{
    SIM_ENTER(cuGraphNodeGetDependencies_v2);
    return node_deps(hNode, dependencies, edgeData, numDependencies);
}

static CUresult kernel_get_params(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *p)
{
    SIM_CHECK_INIT();
    struct sim_node *nd = node_get(h);
    if (!nd || !p || nd->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&nd->graph->mu);
    const struct knode *k = &nd->k;
    memset(p, 0, sizeof *p);
    p->func = k->kern ? NULL : k->func;
    p->kern = k->kern;
    p->gridDimX = k->dims[0];
    p->gridDimY = k->dims[1];
    p->gridDimZ = k->dims[2];
    p->blockDimX = k->dims[3];
    p->blockDimY = k->dims[4];
    p->blockDimZ = k->dims[5];
    p->sharedMemBytes = k->shmem;
    /* node-owned storage, valid while the node lives and keeps its kernel */
    if (k->use_extra)
        p->extra = (void **)nd->k.extra;
    else
        p->kernelParams = nd->k.argptrs;
    pthread_mutex_unlock(&nd->graph->mu);
    return CUDA_SUCCESS;
}

CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphKernelNodeGetParams_v2);
    return kernel_get_params(hNode, nodeParams);
}

CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SIM_ENTER(cuGraphKernelNodeGetParams);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    CUresult r = kernel_get_params(hNode, &p);
    if (r)
        return r;
    nodeParams->func = p.func;
    nodeParams->gridDimX = p.gridDimX;
    nodeParams->gridDimY = p.gridDimY;
    nodeParams->gridDimZ = p.gridDimZ;
    nodeParams->blockDimX = p.blockDimX;
    nodeParams->blockDimY = p.blockDimY;
    nodeParams->blockDimZ = p.blockDimZ;
    nodeParams->sharedMemBytes = p.sharedMemBytes;
    nodeParams->kernelParams = p.kernelParams;
    nodeParams->extra = p.extra;
    return CUDA_SUCCESS;
}

static CUresult kernel_set_params(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS *p)
{
    SIM_CHECK_INIT();
    struct sim_node *nd = node_get(h);
    if (!nd || !p || nd->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&nd->graph->mu);
    CUresult r = knode_set(&nd->k, p, true);
    pthread_mutex_unlock(&nd->graph->mu);
    return r;
}

CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphKernelNodeSetParams_v2);
    return kernel_set_params(hNode, nodeParams);
}

CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SIM_ENTER(cuGraphKernelNodeSetParams);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    v1_to_v2(nodeParams, &p);
    return kernel_set_params(hNode, &p);
}

/* ---- executable graphs ------------------------------------------------------------------ */

/* Empties a version (either member), ready for another node's parameters. */
static void ver_clear(struct xver *v)
{
    if (v->holds_k)
        knode_clear(&v->k);
    else
        sim_onode_clear(&v->o);
    memset(&v->o, 0, sizeof v->o > sizeof v->k ? sizeof v->o : sizeof v->k);
    v->holds_k = false;
}

/* The heap a version holds: itself and its kernel arguments, kept while it
 * waits in a free list so that reusing it allocates nothing. */
static long long ver_bytes(const struct xver *v)
{
    long long b = sim_heap_chunk(v);
    if (v->holds_k)
        b += sim_heap_chunk(v->k.args) + sim_heap_chunk(v->k.argptrs);
    return b;
}

/* parked: the list is a free list (spare, recycled), counted as parked. */
static void ver_free_list(struct xver *v, bool parked)
{
    while (v) {
        struct xver *next = atomic_load_explicit(&v->next, memory_order_relaxed);
        if (parked)
            sim_heap_park(-ver_bytes(v));
        ver_clear(v);
        sim_free(v);
        v = next;
    }
}

static bool work_node(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY ||
           t == CU_GRAPH_NODE_TYPE_MEMSET || t == CU_GRAPH_NODE_TYPE_HOST;
}

/* A work node's newest version (the setters' and the calling thread's
 * view, under the exec's mu), or NULL. */
static struct xver *ver_cur(const struct xnode *xn)
{
    return xn->newest;
}

/* The other-type parameters an exec node holds now: a kernel node's are
 * empty (type 0). */
static const struct sim_onode *xnode_onode(const struct xnode *xn)
{
    static const struct sim_onode none;
    if (xn->type == CU_GRAPH_NODE_TYPE_KERNEL)
        return &none;
    return work_node(xn->type) ? &ver_cur(xn)->o : &xn->o;
}

static void exec_free(struct sim_exec *x)
{
    for (size_t i = 0; i < x->n; i++) {
        ver_free_list(x->nodes[i].oldest, false);
        sim_onode_clear(&x->nodes[i].o);
        sim_free(x->nodes[i].deps);
        if (x->nodes[i].key)
            node_unref(x->nodes[i].key);
    }
    if (x->gm)
        sim_gmem_exec_free(x->gm);
    ver_free_list(x->spare, true);
    ver_free_list(atomic_load(&x->recycled), true);
    sim_free(x->nodes);
    sim_free(x->slots);
    sim_free(x->order);
    sim_free(x->events);
    sim_cond_list_free(x->conds);
    if (x->last_s)
        sim_stream_unref(x->last_s);
    pthread_mutex_destroy(&x->mu);
    sim_free(x);
}

static void exec_unref(struct sim_exec *x)
{
    if (atomic_fetch_sub(&x->refs, 1) == 1)
        exec_free(x);
}

/* A copy of src's parameters into dst (a recycled or new version; its
 * argument storage reused where the size matches). */
static bool ver_copy(struct xver *dst, const struct xver *src, CUgraphNodeType t)
{
    /* recycled versions come from any node of the exec */
    dst->disabled = src->disabled;
    if (t != CU_GRAPH_NODE_TYPE_KERNEL) {
        ver_clear(dst);
        sim_onode_copy(&dst->o, &src->o);
        return true;
    }
    if (!dst->holds_k) {
        ver_clear(dst);
        dst->holds_k = true;
    }
    if (dst->k.args && dst->k.argcap < src->k.argsize) {
        sim_free(dst->k.args);
        dst->k.args = NULL;
    }
    size_t cap = dst->k.args ? dst->k.argcap : src->k.argsize > 64 ? src->k.argsize : 64;
    unsigned char *args = dst->k.args ? dst->k.args : sim_malloc(cap);
    if (!args) {
        ver_clear(dst);
        return false;
    }
    ptx_kernel_unref(dst->k.pk);
    sim_free(dst->k.argptrs);
    dst->k = src->k;
    dst->k.argptrs = NULL;
    dst->k.args = args;
    dst->k.argcap = cap;
    memcpy(args, src->k.args, src->k.argsize);
    ptx_kernel_ref(dst->k.pk);
    return true;
}

/* x->mu held. The version of a work node a setter may write: the newest
 * one when no launch was issued since it was written, else a new copy of
 * it (*fresh: not yet published; ver_put publishes it or gives it back);
 * whole: the setter writes all of a kernel's parameters (knode_set), so
 * only the enable state is copied. */
static struct xver *ver_get(struct sim_exec *x, struct xnode *xn, bool *fresh, bool whole)
{
    struct xver *v = ver_cur(xn);
    *fresh = v->gen != x->launches;
    if (!*fresh)
        return v;
    struct xver *nv = x->spare;
    if (!nv)
        nv = x->spare = atomic_exchange_explicit(&x->recycled, NULL, memory_order_acquire);
    if (nv) {
        x->spare = atomic_load_explicit(&nv->next, memory_order_relaxed);
        sim_heap_park(-ver_bytes(nv));
    } else if (!(nv = sim_calloc(1, sizeof *nv)))
        return NULL;
    atomic_store_explicit(&nv->next, NULL, memory_order_relaxed);
    if (whole && xn->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        if (!nv->holds_k) {
            ver_clear(nv);
            nv->holds_k = true;
        }
        nv->disabled = v->disabled;
        return nv;
    }
    if (!ver_copy(nv, v, xn->type)) {
        sim_free(nv);
        return NULL;
    }
    return nv;
}

/* x->mu held. After ver_get: publishes a fresh version that was written
 * (ok), or keeps it for the next setter. */
static void ver_put(struct sim_exec *x, struct xnode *xn, struct xver *v, bool fresh, bool ok)
{
    if (!fresh)
        return;
    if (!ok) {
        atomic_store_explicit(&v->next, x->spare, memory_order_relaxed);
        x->spare = v;
        sim_heap_park(ver_bytes(v));
        return;
    }
    v->gen = x->launches;
    atomic_store_explicit(&xn->newest->next, v, memory_order_release);
    xn->newest = v;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted dependency indices of a graph node. */
static uint32_t *dep_indices(const struct sim_node *nd)
{
    uint32_t *v = sim_malloc((nd->ndeps ? nd->ndeps : 1) * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < nd->ndeps; i++)
        v[i] = nd->deps[i]->index;
    qsort(v, nd->ndeps, sizeof *v, cmp_u32);
    return v;
}

static size_t key_hash(const void *k, size_t mask)
{
    uint64_t h = (uint64_t)(uintptr_t)k * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 31)) & mask;
}

/* Build the handle -> index table of x (from its nodes' keys). */
static bool exec_index(struct sim_exec *x)
{
    size_t ns = 16;
    while (ns <= 2 * x->n)
        ns *= 2;
    x->slots = sim_calloc(ns, sizeof *x->slots);
    if (!x->slots)
        return false;
    x->nslots = ns;
    for (size_t i = 0; i < x->n; i++) {
        size_t j = key_hash(x->nodes[i].key, ns - 1);
        while (x->slots[j])
            j = (j + 1) & (ns - 1);
        x->slots[j] = (uint32_t)i + 1;
    }
    return true;
}

/* The exec node a handle names: only the instantiating graph's node handles
 * do (cuda.h), and only while that graph exists: an H200 with driver 580
 * answers CUDA_ERROR_INVALID_VALUE for the nodes of a destroyed graph, also
 * after cuGraphExecUpdate from a graph that still exists
 * (driver-answers.txt). NULL if it names none. */
static struct xnode *exec_node(struct sim_exec *x, CUgraphNode h)
{
    if (!h)
        return NULL;
    size_t mask = x->nslots - 1;
    for (size_t j = key_hash(h, mask); x->slots[j]; j = (j + 1) & mask) {
        struct xnode *xn = &x->nodes[x->slots[j] - 1];
        if ((CUgraphNode)xn->key == h)
            return sim_reg_has(h, SIM_T_NODE) ? xn : NULL;
    }
    return NULL;
}

/* Under g->mu. */
static CUresult instantiate(struct sim_graph *g, struct sim_ctx *ctx, struct sim_exec **out,
                            CUgraphNode *err_node, CUgraphInstantiateResult *res)
{
    *res = CUDA_GRAPH_INSTANTIATE_ERROR;
    size_t n = g->n;
    for (size_t i = 0; i < n; i++) {
        struct sim_func *f;
        if (g->nodes[i]->type == CU_GRAPH_NODE_TYPE_KERNEL &&
            sim_func_get(g->nodes[i]->k.func, &f) != CUDA_SUCCESS) {
            *err_node = (CUgraphNode)g->nodes[i]; /* its module was unloaded */
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    struct sim_exec *x = sim_calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&x->mu, NULL);
    atomic_init(&x->refs, 1);
    x->graph_id = g->id;
    x->n = n;
    x->nodes = sim_calloc(n ? n : 1, sizeof *x->nodes);
    x->order = sim_malloc((n ? n : 1) * sizeof *x->order);
    x->events = sim_malloc((n ? n : 1) * sizeof *x->events);
    uint32_t *indeg = sim_calloc(n ? n : 1, sizeof *indeg);
    uint32_t *queue = sim_malloc((n ? n : 1) * sizeof *queue);
    CUresult r = CUDA_SUCCESS;
    if (!x->nodes || !x->order || !x->events || !indeg || !queue) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        struct sim_node *nd = g->nodes[i];
        struct xnode *xn = &x->nodes[i];
        xn->type = nd->type;
        xn->ndeps = nd->ndeps;
        xn->deps = dep_indices(nd);
        struct xver *v = work_node(nd->type) ? sim_calloc(1, sizeof *v) : NULL;
        xn->oldest = xn->newest = v;
        bool kernel = nd->type == CU_GRAPH_NODE_TYPE_KERNEL;
        if (v)
            v->holds_k = kernel;
        if (!xn->deps || (work_node(nd->type) && !v) || (kernel && !knode_copy(&v->k, &nd->k))) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
            goto fail;
        }
        if (!kernel)
            sim_onode_copy(v ? &v->o : &xn->o, &nd->o);
        atomic_fetch_add(&nd->refs, 1);
        xn->key = nd;
        if (nd->type == CU_GRAPH_NODE_TYPE_CONDITIONAL &&
            (r = sim_cond_instantiate(&xn->o, ctx, res)) != CUDA_SUCCESS) {
            *err_node = (CUgraphNode)nd;
            goto fail;
        }
        if (nd->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD || nd->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT)
            x->events[x->nevents++] = (uint32_t)i;
        indeg[i] = (uint32_t)nd->ndeps;
    }
    if ((r = sim_cond_exec_handles(g, &x->conds)) != CUDA_SUCCESS) {
        *res = r == CUDA_ERROR_INVALID_VALUE ? CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED
                                             : CUDA_GRAPH_INSTANTIATE_ERROR;
        goto fail;
    }
    if (!exec_index(x)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto fail;
    }
    /* Kahn's algorithm over dependents (found by scanning: graphs are small). */
    size_t qh = 0, qt = 0, seen = 0;
    for (size_t i = 0; i < n; i++)
        if (!indeg[i])
            queue[qt++] = (uint32_t)i;
    while (qh < qt) {
        uint32_t u = queue[qh++];
        seen++;
        CUgraphNodeType t = x->nodes[u].type;
        if (work_node(t) || t == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            x->order[x->norder++] = u;
        for (size_t v = 0; v < n; v++)
            for (size_t d = 0; d < x->nodes[v].ndeps; d++)
                if (x->nodes[v].deps[d] == u && --indeg[v] == 0)
                    queue[qt++] = (uint32_t)v;
    }
    if (seen != n) {
        *res = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE; /* a cycle */
        r = CUDA_ERROR_INVALID_VALUE;
        goto fail;
    }
    sim_free(indeg);
    sim_free(queue);
    *res = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    *out = x;
    return CUDA_SUCCESS;
fail:
    sim_free(indeg);
    sim_free(queue);
    if (x->nodes) {
        exec_free(x);
    } else {
        sim_free(x->order);
        sim_free(x->events);
        pthread_mutex_destroy(&x->mu);
        sim_free(x);
    }
    return r;
}

/* The exec's memory alloc and free nodes, for sim_graph_mem.c. */
static CUresult exec_mem_nodes(struct sim_exec *x, cuuint64_t flags)
{
    const struct sim_onode **v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < x->n; i++) {
        if (!sim_gmem_type(x->nodes[i].type))
            continue;
        if (!v && !(v = sim_malloc(x->n * sizeof *v)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        v[n++] = &x->nodes[i].o;
    }
    CUresult r = n ? sim_gmem_exec_new(v, n, x->graph_id, flags, &x->gm) : CUDA_SUCCESS;
    sim_free(v);
    return r;
}

static const cuuint64_t k_inst_flags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

static CUresult instantiate_entry(CUgraphExec *out, CUgraph hg, cuuint64_t flags,
                                  CUgraphNode *err_node, CUgraphInstantiateResult *res)
{
    *err_node = NULL;
    *res = CUDA_GRAPH_INSTANTIATE_ERROR;
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    /* Measured (H200, driver 580): refused during another thread's global
     * capture from a thread in global mode, and the capture invalidated. */
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    struct sim_graph *g = graph_get(hg);
    if (!out || !g || (flags & ~k_inst_flags))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_exec *x = NULL;
    pthread_mutex_lock(&g->mu);
    r = instantiate(g, c, &x, err_node, res);
    pthread_mutex_unlock(&g->mu);
    if (r)
        return r;
    if ((r = exec_mem_nodes(x, flags)) != CUDA_SUCCESS) {
        *res = CUDA_GRAPH_INSTANTIATE_ERROR;
        exec_free(x);
        return r;
    }
    x->ctx = c;
    sim_reg_add(x, SIM_T_EXEC);
    atomic_fetch_add(&sim_live_execs, 1);
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    SIM_ENTER(cuGraphInstantiateWithFlags);
    CUgraphNode err;
    CUgraphInstantiateResult res;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
        return CUDA_ERROR_INVALID_VALUE; /* upload needs the WithParams stream */
    return instantiate_entry(phGraphExec, hGraph, flags, &err, &res);
}

/* The legacy entry points (cuda.h 11's cuGraphInstantiate, whose name CUDA 12
 * gave to cuGraphInstantiateWithFlags; bindings that resolve by exported
 * name still call them): flags 0; on an instantiation error the node in
 * phErrorNode when given, and a diagnostic in logBuffer, NUL-terminated
 * within bufferSize. Assumption (cuda.h 11 is silent): the log is written
 * only on failure, and a NULL logBuffer or a bufferSize of 0 means no log,
 * not an error. */
static CUresult instantiate_legacy(CUgraphExec *out, CUgraph hg, CUgraphNode *phErrorNode,
                                   char *logBuffer, size_t bufferSize)
{
    CUgraphNode err;
    CUgraphInstantiateResult res;
    CUresult r = instantiate_entry(out, hg, 0, &err, &res);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_INITIALIZED && r != CUDA_ERROR_INVALID_CONTEXT &&
        r != CUDA_ERROR_DEINITIALIZED) {
        if (phErrorNode && err)
            *phErrorNode = err;
        if (logBuffer && bufferSize)
            snprintf(logBuffer, bufferSize, "graph instantiation failed: result %d", (int)res);
    }
    return r;
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    SIM_ENTER(cuGraphInstantiate);
    return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    SIM_ENTER(cuGraphInstantiate_v2);
    return instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult instantiate_params(CUgraphExec *out, CUgraph hg, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                   bool pt)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode err;
    CUgraphInstantiateResult res;
    CUresult r = instantiate_entry(out, hg, p->flags, &err, &res);
    if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
        /* Uploading is a no-op; the stream must still be valid. */
        struct sim_stream *s;
        if (sim_stream_resolve(p->hUploadStream, pt, &s) != CUDA_SUCCESS) {
            struct sim_exec *x = (struct sim_exec *)*out;
            sim_reg_del(x);
            atomic_fetch_sub(&sim_live_execs, 1);
            exec_unref(x);
            *out = NULL;
            res = CUDA_GRAPH_INSTANTIATE_ERROR;
            r = CUDA_ERROR_INVALID_VALUE;
        }
    }
    p->hErrNode_out = err;
    p->result_out = res;
    return r;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_ENTER(cuGraphInstantiateWithParams);
    return instantiate_params(phGraphExec, hGraph, instantiateParams, false);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_ENTER(cuGraphInstantiateWithParams_ptsz);
    return instantiate_params(phGraphExec, hGraph, instantiateParams, true);
}

static struct sim_exec *exec_get(CUgraphExec h)
{
    return sim_reg_has(h, SIM_T_EXEC) ? (struct sim_exec *)h : NULL;
}

/* O(1): a hash lookup of the handle among the instantiating graph's nodes. */
static CUresult exec_set_kernel(CUgraphExec hx, CUgraphNode hn, const CUDA_KERNEL_NODE_PARAMS *p)
{
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hx);
    if (!x || !hn || !p)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&x->mu);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    struct xnode *xn = exec_node(x, hn);
    if (xn && xn->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        bool fresh;
        struct xver *v = ver_get(x, xn, &fresh, true); /* affects future launches only */
        r = v ? knode_set(&v->k, p, false) : CUDA_ERROR_OUT_OF_MEMORY;
        if (v)
            ver_put(x, xn, v, fresh, r == CUDA_SUCCESS);
    }
    pthread_mutex_unlock(&x->mu);
    return r;
}

CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SIM_ENTER(cuGraphExecKernelNodeSetParams);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    v1_to_v2(nodeParams, &p);
    return exec_set_kernel(hGraphExec, hNode, &p);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphExecKernelNodeSetParams_v2);
    return exec_set_kernel(hGraphExec, hNode, nodeParams);
}

static CUresult exec_set_other(CUgraphExec hx, CUgraphNode hn, struct sim_onode *o,
                               CUresult made);

CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                  CUgraphNodeParams *nodeParams)
{
    SIM_ENTER(cuGraphExecNodeSetParams);
    SIM_CHECK_INIT();
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        CUDA_KERNEL_NODE_PARAMS p;
        _Static_assert(sizeof p == sizeof nodeParams->kernel, "v2 and v3 kernel params match");
        memcpy(&p, &nodeParams->kernel, sizeof p);
        return exec_set_kernel(hGraphExec, hNode, &p);
    }
    struct sim_exec *x = exec_get(hGraphExec);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&x->mu);
    struct xnode *xn = exec_node(x, hNode);
    CUgraphNodeType t = xn ? xn->type : CU_GRAPH_NODE_TYPE_KERNEL;
    pthread_mutex_unlock(&x->mu);
    if (!xn || t != nodeParams->type)
        return CUDA_ERROR_INVALID_VALUE;
    if (t == CU_GRAPH_NODE_TYPE_EMPTY)
        return CUDA_SUCCESS; /* nothing to update */
    struct sim_onode o = {0};
    CUresult r = sim_onode_generic(&o, nodeParams);
    return exec_set_other(hGraphExec, hNode, &o, r);
}

/* ---- exec updates of the other node types ----------------------------------------------- */

/* Sets the exec node hn to o (made by a sim_onode_* call with result
 * `made`; consumed): a node of the instantiating graph, of o's type, within
 * what an exec update may change. */
static CUresult exec_set_other(CUgraphExec hx, CUgraphNode hn, struct sim_onode *o, CUresult made)
{
    struct sim_exec *x = exec_get(hx);
    CUresult r = made;
    if (r == CUDA_SUCCESS && (!x || !hn))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&x->mu);
        struct xnode *xn = exec_node(x, hn);
        /* a kernel node's empty parameters never match o's type */
        bool work = xn && work_node(xn->type), fresh = false;
        struct xver *v = NULL;
        r = !xn ? CUDA_ERROR_INVALID_VALUE : sim_onode_exec_check(xnode_onode(xn), o);
        if (r == CUDA_SUCCESS && work && !(v = ver_get(x, xn, &fresh, false)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS) {
            struct sim_onode *dst = v ? &v->o : &xn->o; /* affects future launches only */
            sim_onode_clear(dst);
            *dst = *o;
            memset(o, 0, sizeof *o);
            if (v)
                ver_put(x, xn, v, fresh, true);
        }
        pthread_mutex_unlock(&x->mu);
    }
    if (r != CUDA_SUCCESS)
        sim_onode_clear(o);
    return r;
}

CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    SIM_ENTER(cuGraphExecMemcpyNodeSetParams);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_memcpy(&o, copyParams, ctx);
    return exec_set_other(hGraphExec, hNode, &o, r);
}

CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                        const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                        CUcontext ctx)
{
    SIM_ENTER(cuGraphExecMemsetNodeSetParams);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_memset(&o, memsetParams, ctx);
    return exec_set_other(hGraphExec, hNode, &o, r);
}

CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                      const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphExecHostNodeSetParams);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_host(&o, nodeParams);
    return exec_set_other(hGraphExec, hNode, &o, r);
}

CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                            CUevent event)
{
    SIM_ENTER(cuGraphExecEventRecordNodeSetEvent);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_event(&o, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
    return exec_set_other(hGraphExec, hNode, &o, r);
}

CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                          CUevent event)
{
    SIM_ENTER(cuGraphExecEventWaitNodeSetEvent);
    SIM_CHECK_INIT();
    struct sim_onode o = {0};
    CUresult r = sim_onode_event(&o, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
    return exec_set_other(hGraphExec, hNode, &o, r);
}

/* Kernel, memset and memcpy nodes (cuda.h); the state survives SetParams
 * and cuGraphExecUpdate (assumption). */
static bool can_disable(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMSET ||
           t == CU_GRAPH_NODE_TYPE_MEMCPY;
}

CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
    SIM_ENTER(cuGraphNodeSetEnabled);
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hGraphExec);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&x->mu);
    struct xnode *xn = exec_node(x, hNode);
    bool ok = xn && can_disable(xn->type);
    CUresult r = ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (ok) {
        bool fresh;
        struct xver *v = ver_get(x, xn, &fresh, false); /* affects future launches only */
        if (v) {
            v->disabled = isEnabled == 0;
            ver_put(x, xn, v, fresh, true);
        } else {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&x->mu);
    return r;
}

CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
    SIM_ENTER(cuGraphNodeGetEnabled);
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hGraphExec);
    if (!x || !isEnabled)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&x->mu);
    struct xnode *xn = exec_node(x, hNode);
    bool ok = xn && can_disable(xn->type);
    unsigned v = ok && !ver_cur(xn)->disabled;
    pthread_mutex_unlock(&x->mu);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    *isEnabled = v;
    return CUDA_SUCCESS;
}

/* Submits op (a launch or an upload of x) to s, ordered behind the
 * previous launch or upload of x on any stream, as the driver orders one
 * exec's work. x->mu held. */
static void exec_submit(struct sim_exec *x, struct sim_stream *s, struct sim_op *op,
                        struct sim_dep *deps, size_t ndeps)
{
    /* deps[ndeps] is the caller's spare slot for the previous launch. */
    if (x->last_s)
        deps[ndeps++] = (struct sim_dep){x->last_s, x->last_seq};
    uint64_t seq = sim_stream_submit(s, op, deps, ndeps);
    sim_stream_ref(s);
    if (x->last_s)
        sim_stream_unref(x->last_s);
    x->last_s = s;
    x->last_seq = seq;
}

static CUresult graph_launch(CUgraphExec hx, CUstream hs, bool pt)
{
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hx);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(hs, pt, &s);
    if (r)
        return r;
    if (sim_capture_active(s)) {
        /* child-graph capture is not modelled */
        sim_capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    /* The one wait a launch makes: a full launch queue (before any lock,
     * so the worker it waits for never waits for the caller). */
    sim_stream_throttle(s);
    struct sim_op *op = sim_op_new(SIM_OP_GRAPH, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&x->mu);
    /* Event wait nodes: the launch waits for what their events stand for
     * now (the whole launch, not only the nodes after them: assumption).
     * Event record nodes: recorded after the launch (never before the
     * work that precedes them). */
    struct sim_dep deps_small[9];
    struct sim_dep *deps = x->nevents < 9 ? deps_small
                                          : sim_malloc((x->nevents + 1) * sizeof *deps);
    if (!deps) {
        sim_op_free(op);
        pthread_mutex_unlock(&x->mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* cuda.h: an allocation still unfreed from the previous launch refuses it */
    if (x->gm && (r = sim_gmem_launch(x->gm)) != CUDA_SUCCESS) {
        if (deps != deps_small)
            sim_free(deps);
        sim_op_free(op);
        pthread_mutex_unlock(&x->mu);
        return r;
    }
    size_t ndeps = 0;
    for (size_t i = 0; i < x->nevents; i++) {
        const struct xnode *xn = &x->nodes[x->events[i]];
        if (xn->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT && sim_event_dep(xn->o.ev, &deps[ndeps]))
            ndeps++;
    }
    /* The nodes are not copied: the launch runs each node's version
     * written before it (see the top of the file). */
    op->u.g.x = x;
    op->u.g.gen = ++x->launches;
    atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
    exec_submit(x, s, op, deps, ndeps);
    if (x->gm)
        sim_gmem_launched(x->gm, x->last_s, x->last_seq);
    for (size_t i = 0; i < ndeps; i++)
        sim_stream_unref(deps[i].s);
    if (deps != deps_small)
        sim_free(deps);
    for (size_t i = 0; i < x->nevents && r == CUDA_SUCCESS; i++) {
        const struct xnode *xn = &x->nodes[x->events[i]];
        if (xn->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
            r = sim_event_record_in(xn->o.ev, s);
    }
    pthread_mutex_unlock(&x->mu);
    return r;
}

/* On the worker of the launch's stream: each node in dependency order as
 * launch `gen` saw it. The exec's earlier launches have finished (they
 * are ordered before it), so the versions older than the one this launch
 * runs are needed by no launch: recycled for the setters. */
static void exec_run_gen(struct sim_exec *x, uint64_t gen, struct sim_seen *seen)
{
    struct xver *done = NULL, *done_tail = NULL;
    long long parked = 0;
    if (x->conds)
        sim_cond_exec_start(x->conds); /* CU_GRAPH_COND_ASSIGN_DEFAULT */
    for (size_t i = 0; i < x->norder; i++) {
        struct xnode *xn = &x->nodes[x->order[i]];
        if (xn->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            sim_cond_run(xn->o.condx, seen);
            continue;
        }
        struct xver *v = xn->oldest, *nx;
        while ((nx = atomic_load_explicit(&v->next, memory_order_acquire)) && nx->gen < gen) {
            atomic_store_explicit(&v->next, NULL, memory_order_relaxed);
            if (done_tail)
                atomic_store_explicit(&done_tail->next, v, memory_order_relaxed);
            else
                done = v;
            done_tail = v;
            parked += ver_bytes(v);
            v = nx;
        }
        xn->oldest = v;
        if (v->disabled)
            continue; /* an empty node until re-enabled */
        struct sim_kcall c = {.fn = NULL};
        if (xn->type != CU_GRAPH_NODE_TYPE_KERNEL) {
            sim_onode_work(&v->o, &c.w); /* fn and pk NULL: not a kernel */
        } else {
            const struct knode *k = &v->k;
            c.fn = k->fn;
            c.pk = k->pk; /* the version holds the reference while it runs */
            c.name = k->pk ? ptx_kernel_name(k->pk) : NULL;
            memcpy(c.dims, k->dims, sizeof c.dims);
            c.shmem = k->shmem;
            c.args = k->args;
            c.impl = k->impl;
            c.argsize = k->argsize;
        }
        sim_run_kcall(&c, x->ctx, seen); /* an exec runs in the context it was instantiated in */
    }
    if (done) {
        sim_heap_park(parked);
        struct xver *head = atomic_load_explicit(&x->recycled, memory_order_relaxed);
        do
            atomic_store_explicit(&done_tail->next, head, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&x->recycled, &head, done,
                                                      memory_order_release,
                                                      memory_order_relaxed));
    }
}

void sim_exec_run(const struct sim_op *op, struct sim_seen *seen)
{
    exec_run_gen(op->u.g.x, op->u.g.gen, seen);
}

/* A body exec is never launched or set: its first versions are the ones. */
void sim_exec_run_body(struct sim_exec *x, struct sim_seen *seen)
{
    exec_run_gen(x, 1, seen);
}

CUresult sim_graph_instantiate_body(struct sim_graph *g, struct sim_ctx *ctx,
                                    struct sim_exec **out, CUgraphInstantiateResult *res)
{
    CUgraphNode err;
    pthread_mutex_lock(&g->mu);
    CUresult r = instantiate(g, ctx, out, &err, res);
    pthread_mutex_unlock(&g->mu);
    if (r)
        return r;
    (*out)->ctx = ctx;
    /* cuda.h: a body holds kernel, empty, child graph, memset, memcpy and
     * conditional nodes only. */
    for (size_t i = 0; i < (*out)->n; i++) {
        CUgraphNodeType t = (*out)->nodes[i].type;
        if (t == CU_GRAPH_NODE_TYPE_HOST || t == CU_GRAPH_NODE_TYPE_EVENT_RECORD ||
            t == CU_GRAPH_NODE_TYPE_WAIT_EVENT || t == CU_GRAPH_NODE_TYPE_MEM_ALLOC ||
            t == CU_GRAPH_NODE_TYPE_MEM_FREE) {
            exec_unref(*out);
            *out = NULL;
            *res = CUDA_GRAPH_INSTANTIATE_ERROR;
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    return CUDA_SUCCESS;
}

void sim_exec_release(struct sim_exec *x)
{
    exec_unref(x);
}

void sim_exec_op_release(struct sim_op *op)
{
    if (op->u.g.x) /* NULL: the launch failed before it was queued */
        exec_unref(op->u.g.x);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphLaunch);
    return graph_launch(hGraphExec, hStream, false);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphLaunch_ptsz);
    return graph_launch(hGraphExec, hStream, true);
}

/* Uploading prepares a launch; simcuda has nothing to prepare, but the
 * upload is stream work all the same (cuda.h): ordered behind earlier work
 * in the stream and the exec's earlier launches (so later work in the
 * stream is too), and uploads of one exec are serialized: an empty
 * operation that the exec's next launch or upload is ordered behind. */
static CUresult graph_upload(CUgraphExec hGraphExec, CUstream hStream, bool pt)
{
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hGraphExec);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    CUresult r = sim_stream_resolve(hStream, pt, &s);
    if (r)
        return r;
    if (sim_capture_active(s)) {
        sim_capture_invalidate(s); /* as a launch: not modelled in a capture */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    struct sim_op *op = sim_op_new(SIM_OP_NOP, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_dep spare[1];
    pthread_mutex_lock(&x->mu);
    exec_submit(x, s, op, spare, 0);
    pthread_mutex_unlock(&x->mu);
    return CUDA_SUCCESS;
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphUpload);
    return graph_upload(hGraphExec, hStream, false);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphUpload_ptsz);
    return graph_upload(hGraphExec, hStream, true);
}

/* Internal entries: the same work, counted under the exported name the
 * program asked cuGetProcAddress for, but without a dynamic symbol. */
static CUresult internal_graph_launch(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphLaunch);
    return graph_launch(hGraphExec, hStream, false);
}

static CUresult internal_graph_launch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphLaunch_ptsz);
    return graph_launch(hGraphExec, hStream, true);
}

void *sim_internal_entry(const char *symbol)
{
    if (strcmp(symbol, "cuGraphLaunch") == 0)
        return __extension__(void *)internal_graph_launch;
    if (strcmp(symbol, "cuGraphLaunch_ptsz") == 0)
        return __extension__(void *)internal_graph_launch_ptsz;
    return NULL;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    SIM_ENTER(cuGraphExecDestroy);
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hGraphExec);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    sim_reg_del(x);
    atomic_fetch_sub(&sim_live_execs, 1);
    pthread_mutex_lock(&x->mu); /* no call still inside */
    if (x->gm) /* the graph may be instantiated again; its memory unmapped */
        sim_gmem_exec_free(x->gm);
    x->gm = NULL;
    pthread_mutex_unlock(&x->mu);
    exec_unref(x); /* freed after its queued launches (the driver defers too) */
    return CUDA_SUCCESS;
}

/* x->mu and g->mu held: whether g's nodes may replace x's, and if not,
 * the first node that says why. */
static CUgraphExecUpdateResult update_check(struct sim_exec *x, struct sim_graph *g,
                                            CUgraphNode *errp, CUgraphNode *err_fromp)
{
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    CUgraphNode err = NULL, err_from = NULL;
    /* Nodes are paired by creation order. */
    if (g->n != x->n)
        res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < g->n && res == CU_GRAPH_EXEC_UPDATE_SUCCESS; i++) {
        struct sim_node *nd = g->nodes[i];
        struct xnode *xn = &x->nodes[i];
        if (nd->type != xn->type) {
            res = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            err = (CUgraphNode)nd;
            break;
        }
        if (nd->ndeps != xn->ndeps) {
            res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            err = (CUgraphNode)nd;
            break;
        }
        for (size_t d = 0; d < nd->ndeps; d++) {
            uint32_t idx = nd->deps[d]->index;
            bool found = false;
            for (size_t e = 0; e < xn->ndeps; e++)
                found = found || xn->deps[e] == idx;
            if (!found) {
                res = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                err = (CUgraphNode)nd;
                err_from = (CUgraphNode)nd->deps[d];
                break;
            }
        }
        if (res == CU_GRAPH_EXEC_UPDATE_SUCCESS && nd->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            if ((res = sim_cond_update_check(&xn->o, &nd->o)) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                err = (CUgraphNode)nd;
            continue;
        }
        if (res == CU_GRAPH_EXEC_UPDATE_SUCCESS &&
            sim_onode_exec_check(xnode_onode(xn), &nd->o) != CUDA_SUCCESS) {
            res = CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
            err = (CUgraphNode)nd;
        }
        struct sim_func *f;
        if (res == CU_GRAPH_EXEC_UPDATE_SUCCESS && nd->type == CU_GRAPH_NODE_TYPE_KERNEL &&
            sim_func_get(nd->k.func, &f) != CUDA_SUCCESS) {
            res = CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
            err = (CUgraphNode)nd;
        }
    }
    *errp = err;
    *err_fromp = err_from;
    return res;
}

/* x->mu and g->mu held, after update_check said yes. */
static CUresult update_apply(struct sim_exec *x, struct sim_graph *g)
{
    CUresult r = CUDA_SUCCESS;
    /* Each node's new parameters are a version of it, as a setter's
     * (launches already made keep theirs); a node's enabled state
     * survives (assumption, as for SetParams). */
    for (size_t i = 0; i < g->n && !r; i++) {
        struct xnode *xn = &x->nodes[i];
        const struct sim_node *nd = g->nodes[i];
        if (xn->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            r = sim_cond_update_apply(&xn->o, &nd->o);
            continue;
        }
        if (!work_node(xn->type)) {
            sim_onode_clear(&xn->o);
            sim_onode_copy(&xn->o, &nd->o);
            continue;
        }
        bool fresh;
        struct xver *v = ver_get(x, xn, &fresh, true);
        struct knode nk;
        bool kernel = xn->type == CU_GRAPH_NODE_TYPE_KERNEL;
        if (!v || (kernel && !knode_copy(&nk, &nd->k))) {
            if (v)
                ver_put(x, xn, v, fresh, false);
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        if (kernel) {
            knode_clear(&v->k);
            v->k = nk;
        } else {
            sim_onode_clear(&v->o);
            sim_onode_copy(&v->o, &nd->o);
        }
        ver_put(x, xn, v, fresh, true);
    }
    /* The defaults now come from g's handles (cuda.h: "Conditional handle
     * flags and default values are updated as part of the graph update"). */
    struct sim_cond_list *l;
    if (!r && x->conds && sim_cond_exec_handles(g, &l) == CUDA_SUCCESS) {
        sim_cond_list_free(x->conds);
        x->conds = l;
    }
    /* Node identity stays the instantiating graph's handles (cuda.h:
     * exec calls name nodes of the graph the exec was instantiated
     * from); hGraph's nodes name nothing in the exec. */
    return r;
}

CUgraphExecUpdateResult sim_exec_update_body_check(struct sim_exec *x, struct sim_graph *g)
{
    CUgraphNode err, err_from;
    pthread_mutex_lock(&x->mu);
    pthread_mutex_lock(&g->mu);
    CUgraphExecUpdateResult res = update_check(x, g, &err, &err_from);
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_unlock(&x->mu);
    return res;
}

CUresult sim_exec_update_body_apply(struct sim_exec *x, struct sim_graph *g)
{
    pthread_mutex_lock(&x->mu);
    pthread_mutex_lock(&g->mu);
    CUresult r = update_apply(x, g);
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_unlock(&x->mu);
    return r;
}

static CUresult exec_update(CUgraphExec hGraphExec, CUgraph hGraph,
                            CUgraphExecUpdateResultInfo *resultInfo)
{
    SIM_CHECK_INIT();
    struct sim_exec *x = exec_get(hGraphExec);
    struct sim_graph *g = graph_get(hGraph);
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    resultInfo->errorNode = NULL;
    resultInfo->errorFromNode = NULL;
    if (!x || !g)
        return CUDA_ERROR_INVALID_VALUE;
    /* Conditional bodies' execs have no versions of their own: they are
     * written in place once the launches already made have run (with no
     * lock held while waiting). */
    pthread_mutex_lock(&x->mu);
    struct sim_stream *ls = x->conds ? x->last_s : NULL;
    uint64_t lseq = x->last_seq;
    if (ls)
        sim_stream_ref(ls);
    pthread_mutex_unlock(&x->mu);
    if (ls) {
        sim_stream_wait(ls, lseq);
        sim_stream_unref(ls);
    }
    pthread_mutex_lock(&x->mu);
    pthread_mutex_lock(&g->mu);
    CUgraphNode err, err_from;
    CUgraphExecUpdateResult res = update_check(x, g, &err, &err_from);
    CUresult r = res == CU_GRAPH_EXEC_UPDATE_SUCCESS ? update_apply(x, g)
                                                     : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    pthread_mutex_unlock(&g->mu);
    pthread_mutex_unlock(&x->mu);
    resultInfo->result = r == CUDA_ERROR_OUT_OF_MEMORY ? CU_GRAPH_EXEC_UPDATE_ERROR : res;
    resultInfo->errorNode = err;
    resultInfo->errorFromNode = err_from;
    return r;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                              CUgraphExecUpdateResultInfo *resultInfo)
{
    SIM_ENTER(cuGraphExecUpdate_v2);
    return exec_update(hGraphExec, hGraph, resultInfo);
}

/* The CUDA 10.2 entry point (cuda.h now maps the name to _v2). */
CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                           CUgraphExecUpdateResult *updateResult_out)
{
    SIM_ENTER(cuGraphExecUpdate);
    if (!hErrorNode_out || !updateResult_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult r = exec_update(hGraphExec, hGraph, &info);
    *hErrorNode_out = info.errorNode;
    *updateResult_out = info.result;
    return r;
}
