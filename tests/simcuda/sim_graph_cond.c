/*
 * simcuda conditional graph nodes (CU_GRAPH_NODE_TYPE_CONDITIONAL): their
 * handles, the body graphs a node owns, their instantiation as execs of
 * their own, and running them on the stream worker as the handle's value
 * says when the node's turn comes; cudaGraphSetConditional from device code
 * (the interpreter calls sim_cond_set). Also cuGraphAddNode_v2, the generic
 * entry point conditional nodes are added through. (The toolkit's cuda.h,
 * 13.0, declares no cuGraphNodeGetParams: simcuda has none either.)
 *
 * The value lives in the handle, not in each exec: cuda.h allows one
 * instantiation of a graph holding conditional nodes at a time, so the two
 * are one (assumption, docs/design.md).
 */
#include "sim.h"

#include <errno.h>
#include <string.h>

struct sim_condh {
    _Atomic uint32_t value;
    uint32_t dflt;
    unsigned flags;
    struct sim_ctx *ctx;
    const struct sim_graph *graph; /* created for; NULL once destroyed */
    int refs;                      /* the graph, each node, each exec's list (g_cond_mu) */
    int uses;                      /* conditional nodes naming it (g_cond_mu) */
    struct sim_condh *next;
};

struct sim_cond {
    atomic_int refs;               /* the graph's node and each copy of it */
    struct sim_condh *h;           /* referenced */
    CUgraphConditionalNodeType type;
    unsigned size;
    struct sim_ctx *ctx;
    const struct sim_graph *parent; /* the node's graph; NULL once destroyed */
    CUgraph *bodies;               /* owned; the array phGraph_out points at */
    atomic_int instances;          /* execs holding it (cuda.h: at most one) */
    struct sim_cond *next;
};

struct sim_condx {
    struct sim_cond *c;            /* the exec's node holds the reference */
    struct sim_exec *x[];          /* one per body */
};

struct sim_cond_list {
    size_t n;
    struct sim_condh *h[];         /* referenced */
};

static pthread_mutex_t g_cond_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_condh *g_handles; /* under g_cond_mu */
static struct sim_cond *g_conds;
/* Handles and nodes alive: while 0, graph destruction takes no lock. */
static _Atomic long g_cond_objs;

/* g_cond_mu held. */
static void handle_unref_locked(struct sim_condh *h)
{
    if (--h->refs)
        return;
    for (struct sim_condh **pp = &g_handles; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    sim_reg_del(h);
    atomic_fetch_sub(&g_cond_objs, 1);
    sim_free(h);
}

/* g_cond_mu held: the conditional node whose body g is, or NULL. */
static struct sim_cond *body_owner(const struct sim_graph *g)
{
    for (struct sim_cond *c = g_conds; c; c = c->next)
        for (unsigned i = 0; i < c->size; i++)
            if (c->bodies[i] == (CUgraph)g)
                return c;
    return NULL;
}

bool sim_cond_is_body(const struct sim_graph *g)
{
    if (!atomic_load(&g_cond_objs))
        return false;
    pthread_mutex_lock(&g_cond_mu);
    bool r = body_owner(g) != NULL;
    pthread_mutex_unlock(&g_cond_mu);
    return r;
}

void sim_cond_graph_gone(const struct sim_graph *g)
{
    if (!atomic_load(&g_cond_objs))
        return;
    pthread_mutex_lock(&g_cond_mu);
    for (struct sim_cond *c = g_conds; c; c = c->next)
        if (c->parent == g)
            c->parent = NULL;
    for (struct sim_condh *h = g_handles, *next; h; h = next) {
        next = h->next;
        if (h->graph == g) {
            h->graph = NULL;
            handle_unref_locked(h);
        }
    }
    pthread_mutex_unlock(&g_cond_mu);
}

CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out, CUgraph hGraph,
                                        CUcontext ctx, unsigned int defaultLaunchValue,
                                        unsigned int flags)
{
    SIM_ENTER(cuGraphConditionalHandleCreate);
    SIM_CHECK_INIT();
    struct sim_ctx *c = (struct sim_ctx *)ctx;
    if (!pHandle_out || !sim_reg_has(hGraph, SIM_T_GRAPH) || (flags & ~CU_GRAPH_COND_ASSIGN_DEFAULT))
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx || !sim_reg_has(ctx, SIM_T_CTX) || !atomic_load(&c->alive))
        return CUDA_ERROR_INVALID_VALUE; /* the runtime passes the current one */
    struct sim_condh *h = sim_calloc(1, sizeof *h);
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* "Optional initial value": the value until a kernel sets it, also
     * without CU_GRAPH_COND_ASSIGN_DEFAULT (then never re-applied). */
    atomic_init(&h->value, defaultLaunchValue);
    h->dflt = defaultLaunchValue;
    h->flags = flags;
    h->ctx = c;
    h->graph = (const struct sim_graph *)hGraph;
    h->refs = 1;
    pthread_mutex_lock(&g_cond_mu);
    h->next = g_handles;
    g_handles = h;
    atomic_fetch_add(&g_cond_objs, 1);
    sim_reg_add(h, SIM_T_COND);
    pthread_mutex_unlock(&g_cond_mu);
    *pHandle_out = (CUgraphConditionalHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

int sim_cond_set(uint64_t handle, uint32_t value)
{
    struct sim_condh *h = (struct sim_condh *)(uintptr_t)handle;
    if (!handle || !sim_reg_has(h, SIM_T_COND))
        return -EINVAL;
    atomic_store_explicit(&h->value, value, memory_order_relaxed);
    return 0;
}

static void cond_free(struct sim_cond *c)
{
    pthread_mutex_lock(&g_cond_mu);
    for (struct sim_cond **pp = &g_conds; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    c->h->uses--;
    handle_unref_locked(c->h);
    atomic_fetch_sub(&g_cond_objs, 1);
    pthread_mutex_unlock(&g_cond_mu);
    /* No lock held: a body's own conditional nodes come back here. */
    for (unsigned i = 0; i < c->size; i++)
        if (c->bodies[i])
            sim_graph_free((struct sim_graph *)c->bodies[i]);
    sim_free(c->bodies);
    sim_free(c);
}

void sim_cond_ref(struct sim_cond *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void sim_cond_unref(struct sim_cond *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        cond_free(c);
}

/* g_cond_mu held: h was created for g or for a graph g is (nested) a body of. */
static bool handle_in_scope(const struct sim_condh *h, const struct sim_graph *g)
{
    for (const struct sim_graph *p = g; p;) {
        if (h->graph == p)
            return true;
        const struct sim_cond *c = body_owner(p);
        p = c ? c->parent : NULL;
    }
    return false;
}

CUresult sim_cond_new(struct sim_onode *o, struct sim_graph *g, CUDA_CONDITIONAL_NODE_PARAMS *p)
{
    struct sim_condh *h = (struct sim_condh *)(uintptr_t)p->handle;
    if (!p->handle || !sim_reg_has(h, SIM_T_COND))
        return CUDA_ERROR_INVALID_VALUE;
    bool size_ok = (p->type == CU_GRAPH_COND_TYPE_IF && (p->size == 1 || p->size == 2)) ||
                   (p->type == CU_GRAPH_COND_TYPE_WHILE && p->size == 1) ||
                   (p->type == CU_GRAPH_COND_TYPE_SWITCH && p->size > 0);
    if (!size_ok || (struct sim_ctx *)p->ctx != h->ctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_cond *c = sim_calloc(1, sizeof *c);
    CUgraph *bodies = c ? sim_calloc(p->size, sizeof *bodies) : NULL;
    if (!bodies) {
        sim_free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->bodies = bodies;
    c->size = p->size;
    for (unsigned i = 0; i < p->size; i++) {
        if (!(bodies[i] = (CUgraph)sim_graph_new())) {
            for (unsigned j = 0; j < i; j++)
                sim_graph_free((struct sim_graph *)bodies[j]);
            sim_free(bodies);
            sim_free(c);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    atomic_init(&c->refs, 1);
    c->h = h;
    c->type = p->type;
    c->ctx = h->ctx;
    c->parent = g;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_cond_mu);
    if (!handle_in_scope(h, g)) {
        r = CUDA_ERROR_INVALID_VALUE; /* cuda.h: this graph's or an enclosing one's */
    } else {
        h->refs++;
        h->uses++;
        c->next = g_conds;
        g_conds = c;
        atomic_fetch_add(&g_cond_objs, 1);
    }
    pthread_mutex_unlock(&g_cond_mu);
    if (r) {
        for (unsigned i = 0; i < p->size; i++)
            sim_graph_free((struct sim_graph *)bodies[i]);
        sim_free(bodies);
        sim_free(c);
        return r;
    }
    *o = (struct sim_onode){ .type = CU_GRAPH_NODE_TYPE_CONDITIONAL, .ctx = c->ctx, .cond = c };
    return CUDA_SUCCESS;
}

CUresult sim_cond_instantiate(struct sim_onode *o, struct sim_ctx *ctx,
                              CUgraphInstantiateResult *res)
{
    (void)ctx; /* the bodies run in the node's context */
    struct sim_cond *c = o->cond;
    *res = CUDA_GRAPH_INSTANTIATE_ERROR;
    /* cuda.h: only one instantiation of such a graph may exist at a time. */
    if (atomic_fetch_add(&c->instances, 1) != 0) {
        atomic_fetch_sub(&c->instances, 1);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_condx *cx = sim_calloc(1, sizeof *cx + c->size * sizeof cx->x[0]);
    if (!cx) {
        atomic_fetch_sub(&c->instances, 1);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cx->c = c;
    o->condx = cx; /* sim_onode_clear frees it, also a partial one */
    for (unsigned i = 0; i < c->size; i++) {
        CUresult r = sim_graph_instantiate_body((struct sim_graph *)c->bodies[i], c->ctx,
                                                &cx->x[i], res);
        if (r)
            return r;
    }
    return CUDA_SUCCESS;
}

void sim_condx_free(struct sim_condx *cx)
{
    for (unsigned i = 0; i < cx->c->size; i++)
        if (cx->x[i])
            sim_exec_release(cx->x[i]);
    atomic_fetch_sub(&cx->c->instances, 1);
    sim_free(cx);
}

CUgraphExecUpdateResult sim_cond_update_check(const struct sim_onode *xo,
                                              const struct sim_onode *no)
{
    const struct sim_cond *a = xo->cond, *b = no->cond;
    /* "Changing node parameters is not supported" */
    if (a->type != b->type || a->size != b->size)
        return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    for (unsigned i = 0; i < b->size; i++) {
        CUgraphExecUpdateResult r =
            sim_exec_update_body_check(xo->condx->x[i], (struct sim_graph *)b->bodies[i]);
        if (r != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            return r;
    }
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

/* The node's handle is b's from now on: the updated kernels set b's (a
 * handle stands for its node's value, as a graph-local index would). */
CUresult sim_cond_update_apply(struct sim_onode *xo, const struct sim_onode *no)
{
    struct sim_cond *a = xo->cond, *b = no->cond;
    struct sim_condx *cx = xo->condx;
    for (unsigned i = 0; i < b->size; i++) {
        CUresult r = sim_exec_update_body_apply(cx->x[i], (struct sim_graph *)b->bodies[i]);
        if (r)
            return r;
    }
    if (a != b) {
        sim_cond_ref(b);
        atomic_fetch_add(&b->instances, 1);
        atomic_fetch_sub(&a->instances, 1);
        cx->c = b;
        xo->cond = b;
        sim_cond_unref(a);
    }
    return CUDA_SUCCESS;
}

void sim_cond_run(const struct sim_condx *cx, struct sim_seen *seen)
{
    const struct sim_cond *c = cx->c;
    _Atomic uint32_t *v = &c->h->value;
    uint32_t now = atomic_load_explicit(v, memory_order_relaxed);
    switch (c->type) {
    case CU_GRAPH_COND_TYPE_IF:
        if (now)
            sim_exec_run_body(cx->x[0], seen);
        else if (c->size == 2)
            sim_exec_run_body(cx->x[1], seen);
        break;
    case CU_GRAPH_COND_TYPE_WHILE:
        /* checked before each iteration: a body that never clears it loops
         * for ever, as on a GPU */
        while (atomic_load_explicit(v, memory_order_relaxed))
            sim_exec_run_body(cx->x[0], seen);
        break;
    case CU_GRAPH_COND_TYPE_SWITCH:
        if (now < c->size)
            sim_exec_run_body(cx->x[now], seen);
        break;
    }
}

CUresult sim_cond_exec_handles(const struct sim_graph *g, struct sim_cond_list **out)
{
    *out = NULL;
    if (!atomic_load(&g_cond_objs))
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    size_t n = 0;
    pthread_mutex_lock(&g_cond_mu);
    for (struct sim_condh *h = g_handles; h; h = h->next) {
        if (h->graph != g)
            continue;
        n++;
        if (!h->uses)
            r = CUDA_ERROR_INVALID_VALUE; /* CUDA_GRAPH_INSTANTIATE_CONDITIONAL_HANDLE_UNUSED */
    }
    struct sim_cond_list *l = NULL;
    if (!r && n && !(l = sim_malloc(sizeof *l + n * sizeof l->h[0])))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (l) {
        l->n = 0;
        for (struct sim_condh *h = g_handles; h; h = h->next)
            if (h->graph == g) {
                h->refs++;
                l->h[l->n++] = h;
            }
    }
    pthread_mutex_unlock(&g_cond_mu);
    *out = l;
    return r;
}

void sim_cond_exec_start(const struct sim_cond_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->h[i]->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)
            atomic_store_explicit(&l->h[i]->value, l->h[i]->dflt, memory_order_relaxed);
}

void sim_cond_list_free(struct sim_cond_list *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&g_cond_mu);
    for (size_t i = 0; i < l->n; i++)
        handle_unref_locked(l->h[i]);
    pthread_mutex_unlock(&g_cond_mu);
    sim_free(l);
}

/* ---- the generic entry points ------------------------------------------------ */

static bool zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

/* Child graph nodes are not modelled; the refusals cuda.h spells out for
 * CUDA_CHILD_GRAPH_NODE_PARAMS come first, so a program sees the error a
 * driver would give where one is documented: "The graph must not contain
 * conditional nodes", and a graph holding memory allocation or free nodes
 * must be moved (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE: "memory
 * allocation/free nodes can't be present in the child graph"). Anything
 * else is CUDA_ERROR_NOT_SUPPORTED, one of cuGraphAddNode's documented
 * returns. */
static CUresult child_graph(const CUDA_CHILD_GRAPH_NODE_PARAMS *c)
{
    if (!sim_reg_has(c->graph, SIM_T_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    if (c->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
        c->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph *child = (struct sim_graph *)c->graph;
    if (sim_graph_has_type(child, CU_GRAPH_NODE_TYPE_CONDITIONAL))
        return CUDA_ERROR_INVALID_VALUE;
    if (c->ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
        (sim_graph_has_type(child, CU_GRAPH_NODE_TYPE_MEM_ALLOC) ||
         sim_graph_has_type(child, CU_GRAPH_NODE_TYPE_MEM_FREE)))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The bytes of the union the type uses; the rest "must be set to zero"
 * (cuda.h). Types simcuda does not model count all of it: their node is
 * refused anyway. */
static size_t union_used(const CUgraphNodeParams *p)
{
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return sizeof p->kernel;
    case CU_GRAPH_NODE_TYPE_MEMCPY: return sizeof p->memcpy;
    case CU_GRAPH_NODE_TYPE_MEMSET: return sizeof p->memset;
    case CU_GRAPH_NODE_TYPE_HOST: return sizeof p->host;
    case CU_GRAPH_NODE_TYPE_GRAPH: return sizeof p->graph;
    case CU_GRAPH_NODE_TYPE_EMPTY: return 0;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return sizeof p->eventWait;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return sizeof p->eventRecord;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return sizeof p->alloc;
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return sizeof p->free;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return sizeof p->conditional;
    default: return sizeof p->reserved1;
    }
}

static CUresult add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps,
                         const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    SIM_CHECK_INIT();
    if (!out || !p || !sim_reg_has(hg, SIM_T_GRAPH) || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    size_t used = union_used(p);
    if (!zero(p->reserved0, sizeof p->reserved0) || p->reserved2 ||
        !zero((const char *)p->reserved1 + used, sizeof p->reserved1 - used))
        return CUDA_ERROR_INVALID_VALUE; /* "must be zero" */
    for (size_t i = 0; edges && i < n; i++)
        if (edges[i].from_port || edges[i].to_port || edges[i].type)
            return CUDA_ERROR_NOT_SUPPORTED; /* only default edges are modelled */
    struct sim_graph *g = (struct sim_graph *)hg;
    struct sim_onode o;
    CUresult r;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        memcpy(&k, &p->kernel, sizeof k); /* _v3 is _v2's layout */
        return sim_graph_add_kernel(g, deps, n, &k, out);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        o = (struct sim_onode){ .type = CU_GRAPH_NODE_TYPE_EMPTY };
        return sim_graph_add_other(g, deps, n, &o, out);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        r = sim_cond_new(&o, g, &p->conditional);
        break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
        CUDA_MEM_ALLOC_NODE_PARAMS a;
        memcpy(&a, &p->alloc, sizeof a); /* _v2 is _v1's layout */
        if ((r = sim_gmem_add_alloc(g, deps, n, &a, out)) == CUDA_SUCCESS)
            p->alloc.dptr = a.dptr; /* the one out parameter (cuda.h) */
        return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return sim_gmem_add_free(g, deps, n, p->free.dptr, out);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        return child_graph(&p->graph);
    default:
        r = sim_onode_generic(&o, p);
        break;
    }
    if (r)
        return r;
    CUgraph *bodies = o.cond ? o.cond->bodies : NULL;
    if ((r = sim_graph_add_other(g, deps, n, &o, out)) != CUDA_SUCCESS) {
        sim_onode_clear(&o);
        return r;
    }
    if (p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
        p->conditional.phGraph_out = bodies; /* CUDA-owned, the node's lifetime */
    return CUDA_SUCCESS;
}

CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                           const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
                           size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    SIM_ENTER(cuGraphAddNode_v2);
    return add_node(phGraphNode, hGraph, dependencies, dependencyData, numDependencies,
                    nodeParams);
}

/* 12.2's flavour, without edge data. */
CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                        size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    SIM_ENTER(cuGraphAddNode);
    return add_node(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}
