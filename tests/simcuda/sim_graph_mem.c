/*
 * simcuda graph memory nodes: allocation and free nodes (added, or captured
 * from cuMemAllocAsync / cuMemFreeAsync), the one-exec and relaunch rules,
 * and the device's graph memory footprint (cuDeviceGraphMemTrim and the
 * graph memory attributes), as cuda.h and the programming guide's "Graph
 * Memory Nodes" describe them.
 *
 * An allocation node owns an address range from its creation (cuda.h: the
 * address stays fixed across instantiations and launches), reserved
 * PROT_NONE. A launch maps pages there (the exec now "uses" them: USED),
 * and those pages stay the pool's (RESERVED) until trimmed: a free inside
 * the graph leaves them mapped for the next launch, as the guide says graphs
 * keep their memory across launches. The exec's destruction unmaps them
 * from it (no longer used, still reserved); cuDeviceGraphMemTrim returns
 * every page no unfreed allocation and no pending launch holds, and a later
 * launch maps fresh ones. A range whose nodes are all gone keeps its pages
 * in the pool (the guide: destroying a graph returns no memory to the OS)
 * and is handed to the next allocation node of that device and size.
 * All of it happens when the calling thread makes the call (a launch's
 * allocations are made when it is queued, its frees too): the stream
 * orders the work, and trim waits for nothing but skips what a queued
 * launch or free still touches.
 */
#include "sim.h"

#include <string.h>
#include <sys/mman.h>

struct sim_gmem {
    int refs;                 /* onodes naming it, +1 while live (under g_mu) */
    uintptr_t base;
    size_t size, len;         /* requested; reserved (granularity rounded) */
    int dev;
    CUmemPoolProps props;     /* what GetParams returns (the node's) */
    CUmemAccessDesc *acc;
    size_t nacc;
    uint64_t graph_id;        /* the graph owning its allocation node */
    uint64_t freed_by;        /* the graph holding its free node, or 0 */
    bool live;                /* allocated by a launch and not freed since */
    bool backed;              /* pages mapped at base: counted as reserved */
    bool mapped;              /* an exec (or its unfreed allocation) uses them */
    bool cached;              /* no node left: the pool's block, for reuse */
    struct sim_gexec *holder; /* the exec it is mapped for */
    struct sim_stream *last_s; /* the last work queued that may touch it */
    uint64_t last_seq;
    struct sim_gmem *next;
};

struct sim_gexec {
    uint64_t graph_id;
    bool auto_free;
    struct sim_gmem **allocs, **frees;
    size_t nallocs, nfrees;
    struct sim_gexec *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_gmem *g_all;     /* every range, cached ones too */
static struct sim_gexec *g_execs;
static uint64_t g_used[SIM_MAX_DEVICES], g_used_high[SIM_MAX_DEVICES];
static uint64_t g_resv[SIM_MAX_DEVICES], g_resv_high[SIM_MAX_DEVICES];

/* ---- the footprint ---------------------------------------------------------------- */

static void count(uint64_t *cur, uint64_t *high, int dev, size_t len, bool add)
{
    cur[dev] = add ? cur[dev] + len : cur[dev] - len;
    if (cur[dev] > high[dev])
        high[dev] = cur[dev];
}

static bool back(struct sim_gmem *gm)
{
    if (gm->backed)
        return true;
    if (mmap((void *)gm->base, gm->len, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        return false;
    gm->backed = true;
    count(g_resv, g_resv_high, gm->dev, gm->len, true);
    return true;
}

/* The pages go back to the system; the range stays reserved. */
static void unback(struct sim_gmem *gm)
{
    if (!gm->backed)
        return;
    mmap((void *)gm->base, gm->len, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    gm->backed = false;
    count(g_resv, g_resv_high, gm->dev, gm->len, false);
}

static void set_mapped(struct sim_gmem *gm, bool on)
{
    if (gm->mapped != on)
        count(g_used, g_used_high, gm->dev, gm->len, on);
    gm->mapped = on;
}

static bool idle(const struct sim_gmem *gm)
{
    return !gm->last_s || sim_stream_done(gm->last_s, gm->last_seq);
}

static void set_last(struct sim_gmem *gm, struct sim_stream *s, uint64_t seq)
{
    sim_stream_ref(s);
    if (gm->last_s)
        sim_stream_unref(gm->last_s);
    gm->last_s = s;
    gm->last_seq = seq;
}

/* ---- allocations ------------------------------------------------------------------- */

/* Under g_mu: a range for a new allocation node, from the pool's cached
 * blocks when one of this device and size is there. */
static struct sim_gmem *gmem_new(int dev, size_t size)
{
    size_t g = sim_knob.granularity;
    size_t len = (size + g - 1) / g * g;
    if (len < size)
        return NULL;
    struct sim_gmem *gm = NULL;
    for (struct sim_gmem *c = g_all; c; c = c->next)
        if (c->cached && c->dev == dev && c->len == len) {
            gm = c;
            break;
        }
    if (gm) {
        gm->cached = false;
        gm->graph_id = gm->freed_by = 0;
        gm->live = false;
    } else {
        if (!(gm = sim_calloc(1, sizeof *gm)))
            return NULL;
        void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            sim_free(gm);
            return NULL;
        }
        gm->base = (uintptr_t)p;
        gm->len = len;
        gm->dev = dev;
        gm->next = g_all;
        g_all = gm;
    }
    gm->size = size;
    gm->refs = 1;
    gm->props = (CUmemPoolProps){.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .handleTypes = CU_MEM_HANDLE_TYPE_NONE,
                                 .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
    sim_mem_add_graph(gm->base, size, dev);
    return gm;
}

static void unlink_gm(struct sim_gmem *gm)
{
    for (struct sim_gmem **pp = &g_all; *pp; pp = &(*pp)->next)
        if (*pp == gm) {
            *pp = gm->next;
            return;
        }
}

/* Under g_mu: the last reference went; the pages stay in the pool. */
static void gmem_release(struct sim_gmem *gm)
{
    sim_mem_del_graph(gm->base);
    set_mapped(gm, false);
    sim_free(gm->acc);
    gm->acc = NULL;
    gm->nacc = 0;
    gm->holder = NULL;
    if (gm->backed) {
        gm->cached = true;
        return;
    }
    unlink_gm(gm);
    munmap((void *)gm->base, gm->len);
    if (gm->last_s)
        sim_stream_unref(gm->last_s);
    sim_free(gm);
}

static void unref_locked(struct sim_gmem *gm)
{
    if (--gm->refs == 0)
        gmem_release(gm);
}

void sim_gmem_ref(struct sim_gmem *gm)
{
    pthread_mutex_lock(&g_mu);
    gm->refs++;
    pthread_mutex_unlock(&g_mu);
}

void sim_gmem_unref(struct sim_gmem *gm)
{
    pthread_mutex_lock(&g_mu);
    unref_locked(gm);
    pthread_mutex_unlock(&g_mu);
}

/* Under g_mu: the live allocation based at p (not a cached block). */
static struct sim_gmem *find(uintptr_t p)
{
    for (struct sim_gmem *gm = g_all; gm; gm = gm->next)
        if (!gm->cached && gm->base == p)
            return gm;
    return NULL;
}

/* Under g_mu: freed (not by a launch of its owning exec's free node). */
static void freed(struct sim_gmem *gm)
{
    gm->live = false;
    if (!gm->holder)
        set_mapped(gm, false); /* its exec is gone: nothing uses the pages */
    unref_locked(gm);          /* the live reference */
}

/* cuGraphAddMemFreeNode's rules (cuda.h): an address an allocation node
 * returned, freed once in its owning graph, or else in other graphs, never
 * in both; twice in one graph is refused. */
CUresult sim_gmem_node_added(const struct sim_onode *o, uint64_t graph_id)
{
    if (!o->gm)
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    struct sim_gmem *gm = o->gm;
    if (o->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        gm->graph_id = graph_id;
    } else if (gm->freed_by == graph_id || gm->freed_by == gm->graph_id ||
               (gm->freed_by && graph_id == gm->graph_id)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        gm->freed_by = graph_id;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

static CUresult alloc_onode(int dev, size_t size, struct sim_onode *o)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct sim_gmem *gm = gmem_new(dev, size);
    pthread_mutex_unlock(&g_mu);
    if (!gm)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *o = (struct sim_onode){.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .gm = gm};
    return CUDA_SUCCESS;
}

static CUresult free_onode(uintptr_t dptr, struct sim_onode *o)
{
    pthread_mutex_lock(&g_mu);
    struct sim_gmem *gm = dptr ? find(dptr) : NULL;
    if (gm)
        gm->refs++;
    pthread_mutex_unlock(&g_mu);
    if (!gm)
        return CUDA_ERROR_INVALID_VALUE; /* not an allocation node's address */
    *o = (struct sim_onode){.type = CU_GRAPH_NODE_TYPE_MEM_FREE, .gm = gm};
    return CUDA_SUCCESS;
}

CUresult sim_gmem_capture_alloc(struct sim_stream *s, int dev, size_t size, CUdeviceptr *dptr)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_onode o;
    CUresult r = alloc_onode(dev, size, &o);
    if (r)
        return r;
    uintptr_t base = o.gm->base;
    if ((r = sim_capture_add_other(s, &o)) == CUDA_SUCCESS)
        *dptr = (CUdeviceptr)base;
    return r;
}

CUresult sim_gmem_capture_free(struct sim_stream *s, uintptr_t dptr)
{
    struct sim_onode o;
    CUresult r = free_onode(dptr, &o);
    if (r)
        return r;
    return sim_capture_add_other(s, &o);
}

/* cuda.h: an allocation not freed in its graph may be freed by cuMemFree
 * or cuMemFreeAsync; one freed in its graph may not. */
CUresult sim_gmem_free_outside(uintptr_t dptr, struct sim_stream *s)
{
    uint64_t seq = 0;
    if (s) {
        /* where the free stands in the stream: trim leaves the pages alone
         * until the work queued before it has run */
        struct sim_op *op = sim_op_new(SIM_OP_NOP, 0);
        if (!op)
            return CUDA_ERROR_OUT_OF_MEMORY;
        seq = sim_stream_submit(s, op, NULL, 0);
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    struct sim_gmem *gm = find(dptr);
    if (!gm || !gm->live || gm->freed_by == gm->graph_id) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        if (s)
            set_last(gm, s, seq);
        freed(gm);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* ---- execs and launches -------------------------------------------------------------- */

CUresult sim_gmem_exec_new(const struct sim_onode *const *nodes, size_t n, uint64_t graph_id,
                           unsigned long long flags, struct sim_gexec **out)
{
    struct sim_gexec *gx = sim_calloc(1, sizeof *gx);
    struct sim_gmem **v = sim_malloc(n * sizeof *v);
    if (!gx || !v) {
        sim_free(gx);
        sim_free(v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    gx->graph_id = graph_id;
    gx->auto_free = flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    gx->allocs = v;
    for (size_t i = 0; i < n; i++)
        if (nodes[i]->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            v[gx->nallocs++] = nodes[i]->gm;
    gx->frees = v + gx->nallocs;
    for (size_t i = 0; i < n; i++)
        if (nodes[i]->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
            gx->frees[gx->nfrees++] = nodes[i]->gm;
    pthread_mutex_lock(&g_mu);
    for (struct sim_gexec *e = g_execs; e; e = e->next)
        if (e->graph_id == graph_id) {
            /* cuda.h: one exec of such a graph at a time */
            pthread_mutex_unlock(&g_mu);
            sim_free(v);
            sim_free(gx);
            return CUDA_ERROR_INVALID_VALUE;
        }
    for (size_t i = 0; i < n; i++)
        v[i]->refs++;
    for (size_t i = 0; i < gx->nallocs; i++)
        gx->allocs[i]->holder = gx;
    gx->next = g_execs;
    g_execs = gx;
    pthread_mutex_unlock(&g_mu);
    *out = gx;
    return CUDA_SUCCESS;
}

void sim_gmem_exec_free(struct sim_gexec *gx)
{
    pthread_mutex_lock(&g_mu);
    for (struct sim_gexec **pp = &g_execs; *pp; pp = &(*pp)->next)
        if (*pp == gx) {
            *pp = gx->next;
            break;
        }
    for (size_t i = 0; i < gx->nallocs; i++) {
        struct sim_gmem *gm = gx->allocs[i];
        gm->holder = NULL;
        if (!gm->live)
            set_mapped(gm, false); /* back to the pool: reserved, not used */
    }
    for (size_t i = 0; i < gx->nallocs + gx->nfrees; i++)
        unref_locked(gx->allocs[i]);
    pthread_mutex_unlock(&g_mu);
    sim_free(gx->allocs);
    sim_free(gx);
}

CUresult sim_gmem_launch(struct sim_gexec *gx)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < gx->nallocs && !r; i++)
        if (gx->allocs[i]->live && !gx->auto_free)
            r = CUDA_ERROR_INVALID_VALUE; /* cuda.h: unfreed from a previous launch */
    /* Assumption: a free node of another graph's allocation that is not
     * allocated now would free it twice; refused like a double free. */
    for (size_t i = 0; i < gx->nfrees && !r; i++) {
        struct sim_gmem *gm = gx->frees[i];
        if (gm->graph_id != gx->graph_id && !gm->live)
            r = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < gx->nallocs && !r; i++)
        if (!back(gx->allocs[i]))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r) {
        pthread_mutex_unlock(&g_mu);
        return r;
    }
    for (size_t i = 0; i < gx->nallocs; i++) {
        struct sim_gmem *gm = gx->allocs[i];
        if (gm->live)
            freed(gm); /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
        gm->live = true;
        gm->refs++;
        set_mapped(gm, true);
    }
    for (size_t i = 0; i < gx->nfrees; i++)
        freed(gx->frees[i]);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

void sim_gmem_launched(struct sim_gexec *gx, struct sim_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < gx->nallocs + gx->nfrees; i++)
        set_last(gx->allocs[i], s, seq);
    pthread_mutex_unlock(&g_mu);
}

/* ---- entry points --------------------------------------------------------------------- */

static bool dev_ok(CUdevice d)
{
    return d >= 0 && d < sim_knob.devices;
}

/* cuGraphAddMemAllocNode's and cuGraphAddNode's (CU_GRAPH_NODE_TYPE_MEM_ALLOC)
 * one set of rules; _v2 of the parameters is _v1's layout. */
CUresult sim_gmem_add_alloc(struct sim_graph *g, const CUgraphNode *dependencies,
                            size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams,
                            CUgraphNode *phGraphNode)
{
    const CUmemPoolProps *pp = &nodeParams->poolProps;
    /* cuda.h: pinned device memory, no IPC handle types, at most one
     * access descriptor per device */
    if (pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !dev_ok(pp->location.id) ||
        nodeParams->accessDescCount > (size_t)sim_knob.devices ||
        (nodeParams->accessDescCount && !nodeParams->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nodeParams->accessDescCount; i++) {
        const CUmemAccessDesc *a = &nodeParams->accessDescs[i];
        if (a->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !dev_ok(a->location.id) ||
            (a->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && a->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             a->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_onode o;
    CUresult r = alloc_onode(pp->location.id, nodeParams->bytesize, &o);
    if (r)
        return r;
    size_t na = nodeParams->accessDescCount;
    CUmemAccessDesc *acc = na ? sim_malloc(na * sizeof *acc) : NULL;
    if (na && !acc) {
        sim_onode_clear(&o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (na)
        memcpy(acc, nodeParams->accessDescs, na * sizeof *acc);
    pthread_mutex_lock(&g_mu);
    o.gm->props = *pp;
    o.gm->acc = acc;
    o.gm->nacc = na;
    pthread_mutex_unlock(&g_mu);
    uintptr_t base = o.gm->base;
    CUgraphNode nd;
    r = sim_graph_add_other(g, dependencies, numDependencies, &o, &nd);
    if (r) {
        sim_onode_clear(&o);
        return r;
    }
    nodeParams->dptr = (CUdeviceptr)base;
    *phGraphNode = nd;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                const CUgraphNode *dependencies, size_t numDependencies,
                                CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphAddMemAllocNode);
    SIM_CHECK_INIT();
    if (!phGraphNode || !nodeParams || !sim_reg_has(hGraph, SIM_T_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    return sim_gmem_add_alloc((struct sim_graph *)hGraph, dependencies, numDependencies,
                              nodeParams, phGraphNode);
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    SIM_ENTER(cuGraphMemAllocNodeGetParams);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!params_out || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &o))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    params_out->poolProps = o.gm->props;
    params_out->accessDescs = o.gm->acc; /* the node's, valid while it is */
    params_out->accessDescCount = o.gm->nacc;
    params_out->bytesize = o.gm->size;
    params_out->dptr = (CUdeviceptr)o.gm->base;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

CUresult sim_gmem_add_free(struct sim_graph *g, const CUgraphNode *dependencies,
                           size_t numDependencies, CUdeviceptr dptr, CUgraphNode *phGraphNode)
{
    struct sim_onode o;
    CUresult r = free_onode((uintptr_t)dptr, &o);
    if (r)
        return r;
    CUgraphNode nd;
    r = sim_graph_add_other(g, dependencies, numDependencies, &o, &nd);
    if (r) {
        sim_onode_clear(&o);
        return r;
    }
    *phGraphNode = nd;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                               const CUgraphNode *dependencies, size_t numDependencies,
                               CUdeviceptr dptr)
{
    SIM_ENTER(cuGraphAddMemFreeNode);
    SIM_CHECK_INIT();
    if (!phGraphNode || !sim_reg_has(hGraph, SIM_T_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    return sim_gmem_add_free((struct sim_graph *)hGraph, dependencies, numDependencies, dptr,
                             phGraphNode);
}

CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    SIM_ENTER(cuGraphMemFreeNodeGetParams);
    SIM_CHECK_INIT();
    struct sim_onode o;
    if (!dptr_out || !sim_graph_node_onode(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, &o))
        return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = (CUdeviceptr)o.gm->base;
    return CUDA_SUCCESS;
}

/* The guide: trim unmaps and releases the physical memory of graph memory
 * nodes not actively in use; unfreed allocations and graphs scheduled or
 * running keep theirs. */
CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    SIM_ENTER(cuDeviceGraphMemTrim);
    SIM_CHECK_INIT();
    if (!dev_ok(device))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    for (struct sim_gmem *gm = g_all, *nx; gm; gm = nx) {
        nx = gm->next;
        if (gm->dev != device || gm->live || !gm->backed || !idle(gm))
            continue;
        set_mapped(gm, false);
        unback(gm);
        if (gm->cached) {
            unlink_gm(gm);
            munmap((void *)gm->base, gm->len);
            if (gm->last_s)
                sim_stream_unref(gm->last_s);
            sim_free(gm);
        }
    }
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_ENTER(cuDeviceGetGraphMemAttribute);
    SIM_CHECK_INIT();
    if (!dev_ok(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t v;
    pthread_mutex_lock(&g_mu);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: v = g_used[device]; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: v = g_used_high[device]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = g_resv[device]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = g_resv_high[device]; break;
    default:
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&g_mu);
    memcpy(value, &v, sizeof v);
    return CUDA_SUCCESS;
}

/* cuda.h: only the high watermarks, and only to zero. Assumption: a reset
 * watermark starts again from the current amount (what it reads at once). */
CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_ENTER(cuDeviceSetGraphMemAttribute);
    SIM_CHECK_INIT();
    if (!dev_ok(device))
        return CUDA_ERROR_INVALID_DEVICE;
    cuuint64_t v;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&v, value, sizeof v);
    if (v != 0 ||
        (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        g_used_high[device] = g_used[device];
    else
        g_resv_high[device] = g_resv[device];
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}
