/* graph_rec: the recorder of graphs as they are made (graph_rec.h states the
 * contract). One mutex guards three small tables: graph -> record, stream
 * -> its capture state, event -> the capture dependency set it carries.
 * A kernel launched into a capture is recorded by graph_rec_launch.c.
 */
#include "graph_rec_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "driver.h"
#include "err.h"
#include "layout.h"
#include "lock.h"
#include "lockrank.h"
#include "stats.h"

/* Records of destroyed graphs, kept with their arrays for the next ones
 * (a program re-capturing every step makes and drops one per step: its
 * arrays are grown once). Under mu. */
#define NSPARE 4
static struct vr_grec *spare[NSPARE];
static unsigned nspare;

struct vr_grec *vr_gr_new_locked(void)
{
    struct vr_grec *r = nspare ? spare[--nspare] : calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->n = r->nkernels = r->ne = 0;
    r->nb = 0;
    r->nsid = 0;
    r->loose = false;
    r->sorted = true;
    r->unknown = false;
    r->checked = false;
    r->born_seen = false;
    return r;
}

/* A table record goes: kept as a spare when there is room. */
static void rec_drop_locked(struct vr_grec *r)
{
    if (r && nspare < NSPARE && !r->kidx) {
        spare[nspare++] = r;
        return;
    }
    vr_grec_free(r);
}

/* ---- the tables ------------------------------------------------------------ */

#define NBUCKETS 256u

struct graph_ent {
    CUgraph g;
    struct vr_grec *r;
    struct graph_ent *next;
};

vr_mutex vr_gr_mu = VR_MUTEX_INIT; /* graph_rec_int.h */
static struct graph_ent *graphs[NBUCKETS];
static struct dep_ent *streams[NBUCKETS];
static struct dep_ent *events[NBUCKETS];
static struct capture *captures;
static uint64_t capture_ids;
atomic_uint vr_grec_live_captures;
/* The per-thread default stream: one key per thread (graph_rec_int.h). */
_Thread_local char vr_gr_ptds_tag;

static inline unsigned bucket(const void *h)
{
    uintptr_t k = (uintptr_t)h;
    return (unsigned)((k >> 4) ^ (k >> 12) ^ (k >> 20)) & (NBUCKETS - 1);
}

void vr_gr_lock(void)
{
    vr_mutex_lock(&vr_gr_mu);
    vr_rank_take(VR_RANK_GREC);
}

void vr_gr_unlock(void)
{
    vr_rank_drop(VR_RANK_GREC);
    vr_mutex_unlock(&vr_gr_mu);
}

static inline CUstream stream_key(CUstream s, bool ptsz)
{
    return vr_gr_stream_key(s, ptsz);
}

static struct graph_ent **graph_slot(CUgraph g)
{
    struct graph_ent **pp = &graphs[bucket(g)];
    while (*pp && (*pp)->g != g)
        pp = &(*pp)->next;
    return pp;
}

struct vr_grec *vr_gr_graph(CUgraph g)
{
    struct graph_ent *e = *graph_slot(g);
    return e ? e->r : NULL;
}

/* Replaces graph g's record with r (NULL: drops it). */
void vr_gr_put(CUgraph g, struct vr_grec *r)
{
    struct graph_ent **pp = graph_slot(g);
    if (*pp) {
        rec_drop_locked((*pp)->r);
        if (r) {
            (*pp)->r = r;
        } else {
            struct graph_ent *e = *pp;
            *pp = e->next;
            free(e);
        }
        return;
    }
    if (!r)
        return;
    struct graph_ent *e = malloc(sizeof *e);
    if (!e) {
        vr_grec_free(r);
        return;
    }
    e->g = g;
    e->r = r;
    e->next = graphs[bucket(g)];
    graphs[bucket(g)] = e;
}

/* The entry of `key` in `table` (made when `make`), or NULL. */
static struct dep_ent *dep_find(struct dep_ent **table, const void *key, bool make)
{
    if (!key)
        return NULL;
    struct dep_ent *e = table[bucket(key)];
    while (e && e->key != key)
        e = e->next;
    if (e || !make)
        return e;
    e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = key;
    e->next = table[bucket(key)];
    table[bucket(key)] = e;
    return e;
}

static struct dep_ent *stream_find(CUstream key, bool make)
{
    return dep_find(streams, key, make);
}

struct dep_ent *vr_gr_stream_find(CUstream key)
{
    return stream_find(key, false);
}

static struct dep_ent *event_find(CUevent ev, bool make)
{
    return dep_find(events, ev, make);
}

static bool set_deps(uint32_t **v, uint32_t *n, uint32_t *ncap, const uint32_t *src, uint32_t k)
{
    if (!vr_gr_grow((void **)v, ncap, k ? k : 1, sizeof **v))
        return false;
    if (k)
        memcpy(*v, src, k * sizeof *src);
    *n = k;
    return true;
}

static struct capture *capture_of(uint64_t id)
{
    for (struct capture *c = captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* The record holding node handle h, and its index there. */
struct vr_grec *vr_gr_of_node(CUgraphNode h, uint32_t *idx)
{
    if (!h)
        return NULL;
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct graph_ent *e = graphs[b]; e; e = e->next) {
            uint32_t i = vr_gr_index_of(e->r, h);
            if (i != UINT32_MAX) {
                *idx = i;
                return e->r;
            }
        }
    return NULL;
}

void vr_gr_unknown_handleless(void)
{
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct graph_ent *e = graphs[b]; e; e = e->next)
            for (uint32_t i = 0; i < e->r->n && !e->r->unknown; i++)
                if (!e->r->v[i].handle)
                    e->r->unknown = true;
}

/* ---- capture ------------------------------------------------------------- */

static void leave(struct dep_ent *se)
{
    se->cap = NULL;
    se->n = 0;
}

static void end_locked(struct capture *c)
{
    for (unsigned b = 0; b < NBUCKETS; b++)
        for (struct dep_ent *e = streams[b]; e; e = e->next)
            if (e->cap == c)
                leave(e);
    for (struct capture **pp = &captures; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    atomic_fetch_sub_explicit(&vr_grec_live_captures, 1, memory_order_relaxed);
}

void vr_grec_capture_begin(CUstream s, bool ptsz)
{
    CUstream key = stream_key(s, ptsz);
    struct capture *c = calloc(1, sizeof *c);
    vr_gr_lock();
    struct vr_grec *r = vr_gr_new_locked();
    struct dep_ent *se = stream_find(key, true);
    if (!c || !r || !se || se->cap) {
        /* A capture the shim cannot follow: its graph gets no record. */
        if (se && se->cap)
            se->cap->r->unknown = true;
        rec_drop_locked(r);
        vr_gr_unlock();
        free(c);
        return;
    }
    c->id = ++capture_ids;
    c->r = r;
    c->origin = key;
    c->next = captures;
    captures = c;
    se->cap = c;
    se->n = 0;
    atomic_fetch_add_explicit(&vr_grec_live_captures, 1, memory_order_relaxed);
    vr_gr_unlock();
}

/* ---- the record against the driver's graph ---------------------------- */

/* The driver's node types of graph, in its order; NULL when it could not
 * tell (or memory ran out). No lock held: driver calls. */
static CUgraphNodeType *driver_types(CUgraph graph, size_t *n)
{
    size_t total = 0;
    if (vr_real.cuGraphGetNodes(graph, NULL, &total) != CUDA_SUCCESS || total >= UINT32_MAX)
        return NULL;
    CUgraphNode *all = malloc((total ? total : 1) * sizeof *all);
    CUgraphNodeType *t = malloc((total ? total : 1) * sizeof *t);
    bool ok = all && t;
    size_t got = total;
    if (ok && total)
        ok = vr_real.cuGraphGetNodes(graph, all, &got) == CUDA_SUCCESS && got == total;
    for (size_t i = 0; ok && i < total; i++)
        ok = vr_real.cuGraphNodeGetType(all[i], &t[i]) == CUDA_SUCCESS;
    free(all);
    if (!ok) {
        free(t);
        return NULL;
    }
    *n = total;
    return t;
}

/* Under the lock: r checked against the driver's types (NULL: unknown). A
 * record that does not match, node for node, is stale for good: a node
 * added where the shim did not look, or one recorded that the driver did
 * not add; counts alone can cancel out (issue 30 item 3). */
static void check_against(struct vr_grec *r, const CUgraphNodeType *t, size_t n)
{
    if (!r || r->unknown || r->checked)
        return;
    if (t && vr_grec_types_match(r, t, n))
        r->checked = true;
    else
        r->unknown = true;
}

/* A graph whose making the recorder may not have seen entirely is checked
 * once, at its first use. One recorded from its cuGraphCreate on was seen
 * entirely while no entry point escaped the shim: every node-adding call
 * is either recorded or makes the record stale, and a program can reach
 * the driver past the hooks only through a cuGetProcAddress answer the
 * shim could not route (unrouted_procs). So such a graph costs no
 * per-node driver call at each update (a program that rebuilds its graph
 * every step would pay one per node every step). */
static void check_once(CUgraph graph)
{
    bool escaped = vr_stat_get(VR_C_unrouted_procs) != 0;
    vr_gr_lock();
    const struct vr_grec *have = vr_gr_graph(graph);
    bool need = have && !have->unknown && !have->checked && (escaped || !have->born_seen);
    vr_gr_unlock();
    if (!need)
        return;
    size_t n = 0;
    CUgraphNodeType *t = driver_types(graph, &n);
    vr_gr_lock();
    check_against(vr_gr_graph(graph), t, n);
    vr_gr_unlock();
    free(t);
}

void vr_grec_capture_end(CUstream s, bool ptsz, CUresult r, CUgraph graph)
{
    /* Only these end the capture (cuda.h; UNJOINED: assumed to end it, as
     * simcuda does); after any other error it goes on. */
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED &&
        r != CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        return;
    CUstream key = stream_key(s, ptsz);
    /* The captured graph's node types, asked before the lock (driver calls),
     * only when the shim followed this capture. */
    CUgraphNodeType *types = NULL;
    size_t ntypes = 0;
    vr_gr_lock();
    struct dep_ent *se = stream_find(key, false);
    bool followed = se && se->cap && se->cap->origin == key && !se->cap->r->unknown;
    vr_gr_unlock();
    if (followed && r == CUDA_SUCCESS && graph)
        types = driver_types(graph, &ntypes);
    vr_gr_lock();
    se = stream_find(key, false);
    struct capture *c = se ? se->cap : NULL;
    if (!c || c->origin != key) {
        vr_gr_unlock();
        free(types);
        return;
    }
    end_locked(c);
    if (r == CUDA_SUCCESS && graph) {
        check_against(c->r, types, ntypes);
        vr_gr_put(graph, c->r);
    } else {
        rec_drop_locked(c->r);
    }
    vr_gr_unlock();
    free(c);
    free(types);
}

void vr_grec_capture_unknown(CUstream s, bool ptsz)
{
    vr_gr_lock();
    struct dep_ent *se = stream_find(stream_key(s, ptsz), false);
    if (se && se->cap)
        se->cap->r->unknown = true;
    vr_gr_unlock();
}

/* Node i of r joins the capture of stream se: it depends on the stream's
 * set and becomes it. */
static void chain(struct dep_ent *se, struct vr_grec *r, uint32_t i)
{
    for (uint32_t d = 0; d < se->n; d++)
        vr_gr_edge(r, se->deps[d], i);
    if (se->ncap) { /* the common case: the new node is the stream's set */
        se->deps[0] = i;
        se->n = 1;
    } else if (!set_deps(&se->deps, &se->n, &se->ncap, &i, 1)) {
        r->unknown = true;
    }
}

struct vr_grec *vr_gr_capture_rec(CUstream s, bool ptsz, struct dep_ent **se)
{
    *se = stream_find(stream_key(s, ptsz), false);
    return *se && (*se)->cap ? (*se)->cap->r : NULL;
}

void vr_gr_chain(struct dep_ent *se, struct vr_grec *r, uint32_t i)
{
    chain(se, r, i);
}

void vr_grec_capture_plain(CUstream s, bool ptsz, CUresult res, CUgraphNodeType type,
                           const void *params, size_t bytes, CUcontext ctx)
{
    vr_gr_lock();
    struct dep_ent *se = stream_find(stream_key(s, ptsz), false);
    struct capture *c = se ? se->cap : NULL;
    if (c && (res != CUDA_SUCCESS || (!ctx && type != CU_GRAPH_NODE_TYPE_HOST))) {
        c->r->unknown = true;
    } else if (c) {
        uint32_t i = vr_gr_add_node(c->r, type, NULL);
        if (i != UINT32_MAX) {
            c->r->v[i].ctx = ctx;
            vr_gr_set_plain(c->r, &c->r->v[i], params, bytes);
            chain(se, c->r, i);
        }
    }
    vr_gr_unlock();
}

void vr_grec_event_record(CUevent ev, CUstream s, bool ptsz)
{
    if (!ev)
        return;
    vr_gr_lock();
    struct dep_ent *se = stream_find(stream_key(s, ptsz), false);
    struct dep_ent *ee = event_find(ev, se && se->cap);
    if (ee) {
        ee->cap_id = 0;
        if (se && se->cap) {
            if (set_deps(&ee->deps, &ee->n, &ee->ncap, se->deps, se->n))
                ee->cap_id = se->cap->id;
            else
                se->cap->r->unknown = true;
        }
    }
    vr_gr_unlock();
}

void vr_grec_stream_wait(CUstream s, bool ptsz, CUevent ev)
{
    vr_gr_lock();
    struct dep_ent *ee = ev ? event_find(ev, false) : NULL;
    struct capture *c = ee && ee->cap_id ? capture_of(ee->cap_id) : NULL;
    CUstream key = stream_key(s, ptsz);
    struct dep_ent *se = stream_find(key, c != NULL);
    if (!c) {
        vr_gr_unlock();
        return;
    }
    if (!se) {
        c->r->unknown = true;
    } else if (se->cap == c) {
        /* The stream's set grows by the event's (a set: no duplicates). */
        for (uint32_t i = 0; i < ee->n; i++) {
            bool have = false;
            for (uint32_t j = 0; j < se->n && !have; j++)
                have = se->deps[j] == ee->deps[i];
            if (have)
                continue;
            if (!vr_gr_grow((void **)&se->deps, &se->ncap, se->n + 1, sizeof *se->deps)) {
                c->r->unknown = true;
                break;
            }
            se->deps[se->n++] = ee->deps[i];
        }
    } else if (!se->cap) {
        se->cap = c; /* joins the capture with the event's set */
        if (!set_deps(&se->deps, &se->n, &se->ncap, ee->deps, ee->n))
            c->r->unknown = true;
    } else {
        /* Two captures merged: the driver refuses that; if it did not, the
         * shim cannot follow. */
        c->r->unknown = true;
        se->cap->r->unknown = true;
    }
    vr_gr_unlock();
}

struct vr_grec *vr_grec_take(CUgraph graph)
{
    check_once(graph);
    size_t total = 0;
    CUresult cr = vr_real.cuGraphGetNodes(graph, NULL, &total);
    struct vr_grec *r = NULL;
    vr_gr_lock();
    const struct vr_grec *have = vr_gr_graph(graph);
    if (have && !have->unknown && cr == CUDA_SUCCESS && total == have->n)
        r = vr_gr_copy(have);
    vr_gr_unlock();
    if (!r)
        r = vr_gr_read(graph);
    if (!r)
        return NULL;
    vr_gr_sort_edges(r);
    r->kidx = malloc((r->nkernels ? r->nkernels : 1) * sizeof *r->kidx);
    if (!r->kidx) {
        vr_grec_free(r);
        return NULL;
    }
    for (uint32_t i = 0, k = 0; i < r->n; i++) {
        r->v[i].handle = NULL; /* a copy belongs to no graph */
        if (r->v[i].type == CU_GRAPH_NODE_TYPE_KERNEL)
            r->kidx[k++] = i;
    }
    return r;
}

/* ---- comparing ------------------------------------------------------------- */

const char *vr_grec_diff_graph(const struct vr_grec *cur, CUgraph graph, const struct vr_nodes *ns,
                               uint32_t *changed, size_t *nchanged, size_t *nodes, bool *known)
{
    check_once(graph);
    size_t total = 0;
    CUresult cr = vr_real.cuGraphGetNodes(graph, NULL, &total);
    const char *why = NULL;
    *known = false;
    *nchanged = 0;
    vr_gr_lock();
    struct vr_grec *have = vr_gr_graph(graph);
    if (have && !have->unknown && cr == CUDA_SUCCESS && total == have->n) {
        *known = true;
        *nodes = have->n;
        vr_gr_sort_edges(have);
        why = vr_grec_diff(cur, have, ns, changed, nchanged);
    }
    vr_gr_unlock();
    return why;
}

bool vr_grec_same_graph(const struct vr_grec *cur, CUgraph graph, const struct vr_nodes *ns,
                        size_t *nodes)
{
    /* The exec's side first: when it cannot be packed-compared, no driver
     * call is spent on the attempt. */
    if (!cur || cur->unknown || cur->loose || ns->fields_moved || ns->nopaque)
        return false;
    check_once(graph);
    size_t total = 0;
    CUresult cr = vr_real.cuGraphGetNodes(graph, NULL, &total);
    bool same = false;
    vr_gr_lock();
    struct vr_grec *have = vr_gr_graph(graph);
    if (have && !have->unknown && cr == CUDA_SUCCESS && total == have->n) {
        vr_gr_sort_edges(have);
        same = vr_gr_packed_same(cur, have, ns);
        if (same)
            *nodes = have->n;
    }
    vr_gr_unlock();
    return same;
}

void vr_grec_after_fork(void)
{
    vr_gr_mu = (vr_mutex)VR_MUTEX_INIT;
}
