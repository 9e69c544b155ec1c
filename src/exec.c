#include "exec.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "driver.h"
#include "err.h"
#include "layout.h"
#include "lock.h"
#include "log.h"
#include "slice.h"
#include "stats.h"

static struct vr_config cfg;

void vr_exec_configure(const struct vr_config *c)
{
    cfg = *c;
}

/* The fields of a kernel node other than its arguments. */
struct fields {
    CUfunction func;
    CUkernel kern;
    CUcontext ctx;
    unsigned dims[7]; /* grid x y z, block x y z, shared memory bytes */
};

/* gridDimX .. sharedMemBytes are seven consecutive unsigned ints in every
 * kernel-node params struct version. */
#define VR_DIMS_BYTES (7 * sizeof(unsigned))

struct call {
    struct fields f;
    void **kernelParams;
    void **extra;
};

struct node {
    CUgraphNode handle;
    const struct vr_layout *layout; /* NULL: opaque, always passed through */
    struct fields f;                /* what the driver holds */
    uint8_t *intended;
    uint8_t *installed;
    uint32_t word0;                 /* first profile position of this node */
};

enum state { ST_PROFILING, ST_ACTIVE, ST_DISABLED, ST_OBSERVED, ST_DEDUP };

struct counters {
    uint64_t seen, skipped, forwarded, transition, launches, rebinds, rebind_waits;
};

struct vr_exec {
    CUgraphExec handle;
    CUgraph graph;
    struct vr_exec *next; /* table chain */
    vr_mutex lock;
    enum state state;

    struct node *nodes;
    size_t nnodes, nopaque;
    CUgraphNode *hkeys; /* node handle -> index, open addressing */
    uint32_t *hvals;
    size_t hmask;

    size_t nwords;
    unsigned profiled;
    uint64_t *pval, *pid, *pbase; /* per position, during the profile */
    int32_t *anchor_slot;         /* per position once active, -1 = none */

    struct vr_slices *slices;
    bool reconcile;   /* a binding changed since the last launch */
    CUevent done;     /* recorded after each active launch */
    bool in_flight;   /* done was recorded at least once */
    unsigned peers;   /* vr_alloc_peer_generation() the slices' access reflects */

    uint8_t *scratch, *xlat;
    void **kp;
    struct counters c;
};

/* ---- the table of execs ---------------------------------------------- */

#define VR_EXEC_BUCKETS 1024
static vr_rwlock table_lock = VR_RWLOCK_INIT;
static struct vr_exec *buckets[VR_EXEC_BUCKETS];

static size_t bucket_of(const void *h)
{
    uintptr_t k = (uintptr_t)h;
    return (size_t)((k >> 4) ^ (k >> 14)) & (VR_EXEC_BUCKETS - 1);
}

/* Returns the exec locked, or NULL. */
static struct vr_exec *lock_exec(CUgraphExec h)
{
    vr_read_lock(&table_lock);
    struct vr_exec *e = buckets[bucket_of(h)];
    while (e && e->handle != h)
        e = e->next;
    if (e)
        vr_mutex_lock(&e->lock);
    vr_read_unlock(&table_lock);
    return e;
}

static struct vr_exec *unlink_exec(CUgraphExec h)
{
    vr_write_lock(&table_lock);
    struct vr_exec **pp = &buckets[bucket_of(h)];
    while (*pp && (*pp)->handle != h)
        pp = &(*pp)->next;
    struct vr_exec *e = *pp;
    if (e)
        *pp = e->next;
    vr_write_unlock(&table_lock);
    return e;
}

/* ---- helpers ------------------------------------------------------------ */

static void hexbuf(char *buf, size_t n, uint64_t v)
{
    snprintf(buf, n, "0x%llx", (unsigned long long)v);
}

/* Every event about an exec starts the same way. */
static void begin_exec_event(struct vr_jw *w, char *buf, size_t cap, const char *event,
                             CUgraphExec exec)
{
    char hex[32];
    vr_jw_begin(w, buf, cap, event);
    hexbuf(hex, sizeof hex, (uint64_t)(uintptr_t)exec);
    vr_jw_str(w, "exec", hex);
}

static uint64_t load_word(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void store_word(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

static bool decode(enum vr_sp_entry entry, const void *params, struct call *c)
{
    memset(c, 0, sizeof *c);
    if (!params)
        return false;
    if (entry == VR_SP_V1) {
        const CUDA_KERNEL_NODE_PARAMS_v1 *p = params;
        c->f.func = p->func;
        memcpy(c->f.dims, &p->gridDimX, VR_DIMS_BYTES);
        c->kernelParams = p->kernelParams;
        c->extra = p->extra;
        return true;
    }
    const CUDA_KERNEL_NODE_PARAMS_v2 *p;
    if (entry == VR_SP_NODE) {
        const CUgraphNodeParams *np = params;
        if (np->type != CU_GRAPH_NODE_TYPE_KERNEL)
            return false;
        /* v3 has the v2 layout */
        p = (const CUDA_KERNEL_NODE_PARAMS_v2 *)(const void *)&np->kernel;
    } else {
        p = params;
    }
    c->f.func = p->func;
    c->f.kern = p->func ? NULL : p->kern;
    c->f.ctx = p->func ? NULL : p->ctx;
    memcpy(c->f.dims, &p->gridDimX, VR_DIMS_BYTES);
    c->kernelParams = p->kernelParams;
    c->extra = p->extra;
    return true;
}

/* The driver ignores kern and ctx when func is set, so they never count as
 * a change then. */
static bool same_function(const struct fields *a, const struct fields *b)
{
    return a->func == b->func && (a->func || (a->kern == b->kern && a->ctx == b->ctx));
}

static bool same_fields(const struct fields *a, const struct fields *b)
{
    return same_function(a, b) && memcmp(a->dims, b->dims, VR_DIMS_BYTES) == 0;
}

static CUresult forward_raw(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                            const void *params)
{
    switch (entry) {
    case VR_SP_V1: return vr_real.cuGraphExecKernelNodeSetParams(exec, node, params);
    case VR_SP_V2: return vr_real.cuGraphExecKernelNodeSetParams_v2(exec, node, params);
    default: return vr_real.cuGraphExecNodeSetParams(exec, node, (CUgraphNodeParams *)params);
    }
}

/* Sends the program's struct with only the argument pointers replaced, through
 * the entry point the program used. */
static CUresult forward_args(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                             const void *params, void **kp)
{
    switch (entry) {
    case VR_SP_V1: {
        CUDA_KERNEL_NODE_PARAMS_v1 p = *(const CUDA_KERNEL_NODE_PARAMS_v1 *)params;
        p.kernelParams = kp;
        return vr_real.cuGraphExecKernelNodeSetParams(exec, node, &p);
    }
    case VR_SP_V2: {
        CUDA_KERNEL_NODE_PARAMS_v2 p = *(const CUDA_KERNEL_NODE_PARAMS_v2 *)params;
        p.kernelParams = kp;
        return vr_real.cuGraphExecKernelNodeSetParams_v2(exec, node, &p);
    }
    default: {
        CUgraphNodeParams p = *(const CUgraphNodeParams *)params;
        p.kernel.kernelParams = kp;
        return vr_real.cuGraphExecNodeSetParams(exec, node, &p);
    }
    }
}

/* Sends a node's stored fields with the given argument bytes (the shim's own
 * updates: transition and reconciliation). */
static CUresult issue(struct vr_exec *e, struct node *n, uint8_t *args)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p = {0};
    p.func = n->f.func;
    p.kern = n->f.kern;
    p.ctx = n->f.ctx;
    memcpy(&p.gridDimX, n->f.dims, VR_DIMS_BYTES);
    vr_layout_point(n->layout, args, e->kp);
    p.kernelParams = e->kp;
    return vr_real.cuGraphExecKernelNodeSetParams_v2(e->handle, n->handle, &p);
}

/* Writes the translation of src into dst. Only words can hold pointers. */
static void translate(const struct vr_exec *e, const struct node *n, const uint8_t *src, uint8_t *dst)
{
    memcpy(dst, src, n->layout->bytes);
    for (uint32_t i = 0; i < n->layout->nwords; i++) {
        uint32_t off = n->layout->words[i];
        uint64_t v = load_word(src + off);
        uint64_t t = vr_slices_translate(e->slices, v);
        if (t != v)
            store_word(dst + off, t);
    }
}

static struct node *find_node(const struct vr_exec *e, CUgraphNode h)
{
    if (!e->hkeys)
        return NULL;
    uintptr_t k = (uintptr_t)h;
    size_t i = (size_t)((k >> 4) ^ (k >> 17)) & e->hmask;
    for (;; i = (i + 1) & e->hmask) {
        if (e->hkeys[i] == h)
            return &e->nodes[e->hvals[i]];
        if (!e->hkeys[i])
            return NULL;
    }
}

static void make_opaque(struct vr_exec *e, struct node *n)
{
    if (!n->layout)
        return;
    n->layout = NULL;
    e->nopaque++;
}

/* ---- building the record --------------------------------------------- */

static void free_nodes(struct vr_exec *e)
{
    for (size_t i = 0; i < e->nnodes; i++)
        free(e->nodes[i].intended);
    free(e->nodes);
    free(e->hkeys);
    free(e->hvals);
    free(e->pval);
    free(e->pid);
    free(e->pbase);
    free(e->anchor_slot);
    free(e->scratch);
    free(e->xlat);
    free(e->kp);
    e->nodes = NULL;
    e->hkeys = NULL;
    e->hvals = NULL;
    e->pval = e->pid = e->pbase = NULL;
    e->anchor_slot = NULL;
    e->scratch = e->xlat = NULL;
    e->kp = NULL;
    e->nnodes = e->nopaque = e->nwords = 0;
}

static int read_graph(struct vr_exec *e, CUgraph graph)
{
    size_t count = 0;
    CUresult r = vr_real.cuGraphGetNodes(graph, NULL, &count);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    CUgraphNode *all = calloc(count ? count : 1, sizeof *all);
    if (!all)
        return -ENOMEM;
    r = vr_real.cuGraphGetNodes(graph, all, &count);
    if (r != CUDA_SUCCESS) {
        free(all);
        return vr_err_cu(r);
    }
    e->nodes = calloc(count ? count : 1, sizeof *e->nodes);
    size_t hcap = 16;
    while (hcap < count * 2)
        hcap *= 2;
    e->hkeys = calloc(hcap, sizeof *e->hkeys);
    e->hvals = calloc(hcap, sizeof *e->hvals);
    e->hmask = hcap - 1;
    if (!e->nodes || !e->hkeys || !e->hvals) {
        free(all);
        return -ENOMEM;
    }
    size_t max_bytes = 8, max_params = 1;
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        if (vr_real.cuGraphNodeGetType(all[i], &type) != CUDA_SUCCESS ||
            type != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        struct node *n = &e->nodes[e->nnodes];
        CUDA_KERNEL_NODE_PARAMS_v2 p = {0};
        n->handle = all[i];
        if (vr_real.cuGraphKernelNodeGetParams_v2(all[i], &p) != CUDA_SUCCESS)
            goto opaque;
        n->f.func = p.func;
        n->f.kern = p.func ? NULL : p.kern;
        n->f.ctx = p.func ? NULL : p.ctx;
        memcpy(n->f.dims, &p.gridDimX, VR_DIMS_BYTES);
        const struct vr_layout *l;
        if (p.extra || vr_layout_get(p.func, p.kern, &l) != 0 ||
            (l->nparams && !p.kernelParams))
            goto opaque;
        n->intended = calloc(2, l->bytes ? l->bytes : 1);
        if (!n->intended)
            goto opaque;
        n->installed = n->intended + (l->bytes ? l->bytes : 1);
        vr_layout_pack(l, p.kernelParams, n->intended);
        memcpy(n->installed, n->intended, l->bytes);
        n->layout = l;
        n->word0 = (uint32_t)e->nwords;
        e->nwords += l->nwords;
        if (l->bytes > max_bytes)
            max_bytes = l->bytes;
        if (l->nparams > max_params)
            max_params = l->nparams;
        goto index;
    opaque:
        n->layout = NULL;
        e->nopaque++;
    index:;
        uintptr_t k = (uintptr_t)n->handle;
        size_t h = (size_t)((k >> 4) ^ (k >> 17)) & e->hmask;
        while (e->hkeys[h])
            h = (h + 1) & e->hmask;
        e->hkeys[h] = n->handle;
        e->hvals[h] = (uint32_t)e->nnodes;
        e->nnodes++;
    }
    free(all);
    size_t nw = e->nwords ? e->nwords : 1;
    e->pval = calloc(nw, sizeof *e->pval);
    e->pid = calloc(nw, sizeof *e->pid);
    e->pbase = calloc(nw, sizeof *e->pbase);
    e->scratch = calloc(1, max_bytes);
    e->xlat = calloc(1, max_bytes);
    e->kp = calloc(max_params, sizeof *e->kp);
    if (!e->pval || !e->pid || !e->pbase || !e->scratch || !e->xlat || !e->kp)
        return -ENOMEM;
    return 0;
}

static void log_exec_event(const char *event, const struct vr_exec *e)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[1024];
    struct vr_jw w;
    begin_exec_event(&w, buf, sizeof buf, event, e->handle);
    vr_jw_u64(&w, "setparams_seen", e->c.seen);
    vr_jw_u64(&w, "setparams_skipped", e->c.skipped);
    vr_jw_u64(&w, "setparams_forwarded", e->c.forwarded);
    vr_jw_u64(&w, "transition_updates", e->c.transition);
    vr_jw_u64(&w, "launches", e->c.launches);
    vr_jw_u64(&w, "rebinds", e->c.rebinds);
    vr_jw_u64(&w, "rebind_waits", e->c.rebind_waits);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

static enum state first_state(void)
{
    return cfg.mode == VR_MODE_DEDUP ? ST_DEDUP : ST_PROFILING;
}

void vr_exec_track(CUgraphExec handle, CUgraph graph)
{
    if (cfg.mode == VR_MODE_OFF)
        return;
    struct vr_exec *e = calloc(1, sizeof *e);
    if (!e)
        return;
    e->handle = handle;
    e->graph = graph;
    int rc = read_graph(e, graph);
    if (rc != 0) {
        vr_warn("cannot read graph %p (%d): exec %p passes through", (void *)graph, rc, (void *)handle);
        free_nodes(e);
        free(e);
        return;
    }
    e->state = first_state();

    /* An exec handle the driver reuses after a destroy we did not see. */
    struct vr_exec *stale = unlink_exec(handle);
    if (stale) {
        vr_mutex_lock(&stale->lock);
        vr_mutex_unlock(&stale->lock);
        vr_slices_destroy(stale->slices);
        free_nodes(stale);
        free(stale);
    }
    vr_write_lock(&table_lock);
    size_t b = bucket_of(handle);
    e->next = buckets[b];
    buckets[b] = e;
    vr_write_unlock(&table_lock);

    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char buf[256];
        struct vr_jw w;
        begin_exec_event(&w, buf, sizeof buf, "exec_instantiated", handle);
        vr_jw_u64(&w, "kernel_nodes", e->nnodes);
        vr_jw_u64(&w, "opaque_nodes", e->nopaque);
        vr_log_emit(&w, VR_LEVEL_INFO);
    }
}

/* ---- SetParams --------------------------------------------------------- */

/* An anchor now names another allocation: retarget its slot when the new one
 * is VMM-backed and fits; otherwise the word simply passes untranslated. */
static void maybe_retarget(struct vr_exec *e, int32_t slot, uint64_t word)
{
    if (vr_slices_target_slot(e->slices, word) >= 0)
        return;
    struct vr_alloc_info a;
    if (vr_alloc_find(word, &a) != 0 || !a.vmm)
        return;
    struct vr_slice_bind b = {a.id, a.base, a.size, a.padded, a.handle};
    if (vr_slices_retarget(e->slices, (size_t)slot, &b) == 0)
        e->reconcile = true;
}

/* Counts an update sent to the driver; at log level debug, says why, so a
 * low skip rate can be traced to its nodes. */
static void note_forward(struct vr_exec *e, const struct node *n, const char *why)
{
    e->c.forwarded++;
    vr_stat_inc(VR_C_setparams_forwarded);
    if (!vr_log_enabled(VR_LEVEL_DEBUG))
        return;
    char buf[256];
    struct vr_jw w;
    begin_exec_event(&w, buf, sizeof buf, "setparams_forwarded", e->handle);
    if (n)
        vr_jw_u64(&w, "node", (uint64_t)(n - e->nodes));
    vr_jw_str(&w, "reason", why);
    vr_log_emit(&w, VR_LEVEL_DEBUG);
}

static int setparams_locked(struct vr_exec *e, CUgraphNode node, enum vr_sp_entry entry,
                            const void *params)
{
    struct call c;
    struct node *n = find_node(e, node);
    bool kernel = decode(entry, params, &c);
    CUresult r;

    if (!n || !n->layout || !kernel || e->state == ST_OBSERVED)
        goto raw;
    const struct vr_layout *l = n->layout;
    if (c.extra || (l->nparams && !c.kernelParams) || !same_function(&c.f, &n->f)) {
        /* The arguments can no longer be read with this layout. */
        const char *why = c.extra ? "extra" : same_function(&c.f, &n->f) ? "no_arguments"
                                                                         : "function";
        r = forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS) {
            make_opaque(e, n);
            n->f = c.f;
        }
        note_forward(e, n, why);
        return vr_err_cu(r);
    }

    vr_layout_pack(l, c.kernelParams, e->scratch);
    bool same = same_fields(&c.f, &n->f);
    if (cfg.mode == VR_MODE_OBSERVE) {
        r = forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS) {
            memcpy(n->intended, e->scratch, l->bytes);
            memcpy(n->installed, e->scratch, l->bytes);
            n->f = c.f;
        }
        note_forward(e, n, "observe");
        return vr_err_cu(r);
    }
    if (same && memcmp(e->scratch, n->intended, l->bytes) == 0)
        goto skip; /* installed already matches; a binding change is reconciled at launch */

    const uint8_t *send = e->scratch;
    if (e->state == ST_ACTIVE) {
        for (uint32_t i = 0; i < l->nwords; i++) {
            int32_t slot = e->anchor_slot[n->word0 + i];
            if (slot >= 0)
                maybe_retarget(e, slot, load_word(e->scratch + l->words[i]));
        }
        translate(e, n, e->scratch, e->xlat);
        send = e->xlat;
    }
    if (same && memcmp(send, n->installed, l->bytes) == 0) {
        memcpy(n->intended, e->scratch, l->bytes);
        goto skip;
    }
    vr_layout_point(l, (uint8_t *)send, e->kp);
    r = forward_args(e->handle, node, entry, params, e->kp);
    note_forward(e, n, same ? "arguments" : "shape");
    if (r == CUDA_SUCCESS) {
        memcpy(n->intended, e->scratch, l->bytes);
        memcpy(n->installed, send, l->bytes);
        n->f = c.f;
    }
    return vr_err_cu(r);

skip:
    e->c.skipped++;
    vr_stat_inc(VR_C_setparams_skipped);
    return 0;

raw:
    r = forward_raw(e->handle, node, entry, params);
    note_forward(e, n, !n ? "unknown_node" : !kernel ? "not_kernel"
                     : e->state == ST_OBSERVED ? "observe" : "opaque");
    return vr_err_cu(r);
}

/* The common case, checked without decoding or copying anything: the same
 * function, launch shape and arguments as the program last asked for. Then
 * the driver already holds their translation (a binding change since is
 * reconciled at the next launch). */
static bool absorbable(const struct vr_exec *e, CUgraphNode node, enum vr_sp_entry entry,
                       const void *params)
{
    if (!params || e->state == ST_OBSERVED || cfg.mode == VR_MODE_OBSERVE)
        return false;
    const struct node *n = find_node(e, node);
    if (!n || !n->layout)
        return false;
    const CUDA_KERNEL_NODE_PARAMS_v2 *p = params; /* v1 shares every field read here */
    if (entry == VR_SP_NODE) {
        const CUgraphNodeParams *np = params;
        if (np->type != CU_GRAPH_NODE_TYPE_KERNEL)
            return false;
        p = (const CUDA_KERNEL_NODE_PARAMS_v2 *)(const void *)&np->kernel;
    }
    if (!p->func || p->func != n->f.func || p->extra || !p->kernelParams ||
        memcmp(&p->gridDimX, n->f.dims, VR_DIMS_BYTES) != 0)
        return false;
    return vr_layout_equal(n->layout, p->kernelParams, n->intended);
}

int vr_exec_setparams(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry, const void *params)
{
    vr_stat_inc(VR_C_setparams_seen);
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : lock_exec(exec);
    if (!e) {
        vr_stat_inc(VR_C_setparams_forwarded);
        return vr_err_cu(forward_raw(exec, node, entry, params));
    }
    e->c.seen++;
    if (absorbable(e, node, entry, params)) {
        e->c.skipped++;
        vr_mutex_unlock(&e->lock);
        vr_stat_inc(VR_C_setparams_skipped);
        return 0;
    }
    int rc = setparams_locked(e, node, entry, params);
    vr_mutex_unlock(&e->lock);
    return rc;
}

/* ---- profile and decision ---------------------------------------------- */

static void observe_launch(struct vr_exec *e)
{
    bool first = e->profiled == 0;
    for (size_t i = 0; i < e->nnodes; i++) {
        const struct node *n = &e->nodes[i];
        if (!n->layout)
            continue;
        for (uint32_t k = 0; k < n->layout->nwords; k++) {
            size_t w = n->word0 + k;
            if (!first && !e->pid[w])
                continue;
            uint64_t v = load_word(n->intended + n->layout->words[k]);
            struct vr_alloc_info a;
            uint64_t id = 0, base = 0;
            if (vr_alloc_find(v, &a) == 0) {
                id = a.id;
                base = a.base;
            }
            if (first) {
                e->pval[w] = v;
                e->pid[w] = id;
                e->pbase[w] = base;
            } else if (e->pval[w] != v || e->pid[w] != id) {
                e->pid[w] = 0;
            }
        }
    }
    e->profiled++;
}

struct candidate {
    uint64_t id;
    uint64_t ptr;
    size_t size, padded;
    unsigned anchors;
    const char *verdict;
    struct vr_alloc_info info;
    int slot;
};

static const char *const V_SELECTED = "selected";

static void log_decision(const struct vr_exec *e, const struct candidate *cand, size_t ncand,
                         bool active, size_t reserved)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    size_t cap = 2048 + ncand * 160;
    char *buf = malloc(cap); /* once per exec: not a hot path */
    if (!buf)
        return;
    char hex[32];
    struct vr_jw w;
    begin_exec_event(&w, buf, cap, "profile_decision", e->handle);
    vr_jw_str(&w, "state", active ? "active" : "disabled");
    vr_jw_u64(&w, "launches", e->profiled);
    vr_jw_array_begin(&w, "candidates");
    for (size_t i = 0; i < ncand; i++) {
        vr_jw_object_begin(&w, NULL);
        hexbuf(hex, sizeof hex, cand[i].ptr);
        vr_jw_str(&w, "ptr", hex);
        vr_jw_u64(&w, "size", cand[i].size);
        vr_jw_u64(&w, "anchors", cand[i].anchors);
        vr_jw_str(&w, "verdict", cand[i].verdict);
        vr_jw_object_end(&w);
    }
    vr_jw_array_end(&w);
    vr_jw_u64(&w, "reserved_bytes", reserved);
    /* Why a buffer is missing from the candidates: its pointer moved. */
    vr_jw_array_begin(&w, "unstable");
    uint64_t listed[64];
    size_t nlisted = 0;
    for (size_t i = 0; i < e->nwords && nlisted < 64; i++) {
        if (e->pid[i] || !e->pbase[i])
            continue;
        bool dup = false;
        for (size_t j = 0; j < nlisted && !dup; j++)
            dup = listed[j] == e->pbase[i];
        if (dup)
            continue;
        listed[nlisted++] = e->pbase[i];
        hexbuf(hex, sizeof hex, e->pbase[i]);
        vr_jw_str(&w, NULL, hex);
    }
    vr_jw_array_end(&w);
    if (cfg.mode == VR_MODE_OBSERVE)
        vr_jw_bool(&w, "observe", true);
    vr_log_emit(&w, VR_LEVEL_INFO);
    free(buf);
}

/* Sends the node the translation of what it intends, unless the driver
 * holds it already. Returns false when nothing had to be sent. */
static bool sync_node(struct vr_exec *e, struct node *n, CUresult *r)
{
    translate(e, n, n->intended, e->xlat);
    if (memcmp(e->xlat, n->installed, n->layout->bytes) == 0)
        return false;
    *r = issue(e, n, e->xlat);
    if (*r == CUDA_SUCCESS)
        memcpy(n->installed, e->xlat, n->layout->bytes);
    return true;
}

/* Points every node whose intended words fall into a bound slice at it. */
static void transition(struct vr_exec *e)
{
    for (size_t i = 0; i < e->nnodes; i++) {
        struct node *n = &e->nodes[i];
        CUresult r = CUDA_SUCCESS;
        if (!n->layout || !sync_node(e, n, &r))
            continue;
        e->c.transition++;
        vr_stat_inc(VR_C_transition_updates);
        if (r != CUDA_SUCCESS) {
            /* The driver keeps the old arguments; stop translating this node. */
            vr_warn("transition update of a node of exec %p failed (%s); node passes through",
                    (void *)e->handle, vr_cu_name(r));
            make_opaque(e, n);
        }
    }
}

static void decide(struct vr_exec *e)
{
    struct candidate *cand = calloc(e->nwords ? e->nwords : 1, sizeof *cand);
    size_t ncand = 0;
    if (!cand) {
        e->state = ST_DISABLED;
        vr_stat_inc(VR_C_execs_disabled);
        return;
    }
    bool observe = cfg.mode == VR_MODE_OBSERVE;
    /* Anchors grouped by allocation id through a transient hash: a graph of
     * many nodes with as many buffers must not cost anchors x candidates. */
    size_t hcap = 16;
    while (hcap < e->nwords * 2)
        hcap *= 2;
    uint64_t *hid = calloc(hcap, sizeof *hid);
    uint32_t *hk = calloc(hcap, sizeof *hk);
    int32_t *cidx = malloc((e->nwords ? e->nwords : 1) * sizeof *cidx);
    if (!hid || !hk || !cidx) {
        free(hid);
        free(hk);
        free(cidx);
        free(cand);
        e->state = ST_DISABLED;
        vr_stat_inc(VR_C_execs_disabled);
        return;
    }
    for (size_t w = 0; w < e->nwords; w++) {
        cidx[w] = -1;
        uint64_t id = e->pid[w];
        if (!id)
            continue;
        size_t h = (size_t)(id * UINT64_C(0x9e3779b97f4a7c15) >> 20) & (hcap - 1);
        while (hid[h] && hid[h] != id)
            h = (h + 1) & (hcap - 1);
        if (!hid[h]) {
            hid[h] = id;
            hk[h] = (uint32_t)ncand;
            cand[ncand].id = id;
            cand[ncand].ptr = e->pbase[w];
            cand[ncand].slot = -1;
            ncand++;
        }
        cidx[w] = (int32_t)hk[h];
        cand[hk[h]].anchors++;
    }
    free(hid);
    free(hk);
    size_t nsel = 0, reserved = 0;
    size_t *sizes = calloc(ncand ? ncand : 1, sizeof *sizes);
    for (size_t k = 0; k < ncand; k++) {
        struct vr_alloc_info *a = &cand[k].info;
        if (vr_alloc_find(cand[k].ptr, a) != 0 || a->id != cand[k].id) {
            cand[k].verdict = "freed";
            continue;
        }
        cand[k].size = a->size;
        if (!(observe ? a->eligible : a->vmm)) {
            cand[k].verdict = "not_vmm_backed";
            continue;
        }
        cand[k].verdict = V_SELECTED;
        if (sizes)
            sizes[nsel] = a->padded;
        reserved += a->padded;
        nsel++;
    }
    bool active = nsel > 0;
    if (active && !observe) {
        int rc = sizes ? vr_slices_create(&e->slices, sizes, nsel) : -ENOMEM;
        if (rc != 0) {
            for (size_t k = 0; k < ncand; k++)
                if (cand[k].verdict == V_SELECTED)
                    cand[k].verdict = "too_large";
            active = false;
            reserved = 0;
        } else {
            size_t slot = 0, bound = 0;
            for (size_t k = 0; k < ncand; k++) {
                if (cand[k].verdict != V_SELECTED)
                    continue;
                const struct vr_alloc_info *a = &cand[k].info;
                struct vr_slice_bind b = {a->id, a->base, a->size, a->padded, a->handle};
                if (vr_slices_bind(e->slices, slot, &b) == 0) {
                    cand[k].slot = (int)slot;
                    bound++;
                } else {
                    cand[k].verdict = "map_failed";
                }
                slot++;
            }
            if (bound == 0) {
                vr_slices_destroy(e->slices);
                e->slices = NULL;
                active = false;
                reserved = 0;
            }
        }
    }
    if (active && !observe) {
        CUresult r = vr_real.cuEventCreate(&e->done, CU_EVENT_DISABLE_TIMING);
        e->anchor_slot = malloc((e->nwords ? e->nwords : 1) * sizeof *e->anchor_slot);
        if (r != CUDA_SUCCESS || !e->anchor_slot) {
            vr_warn("exec %p: cannot create its completion event (%s); not remapped",
                    (void *)e->handle, vr_cu_name(r));
            if (r == CUDA_SUCCESS)
                vr_real.cuEventDestroy_v2(e->done);
            e->done = NULL;
            vr_slices_destroy(e->slices);
            e->slices = NULL;
            active = false;
            reserved = 0;
            for (size_t k = 0; k < ncand; k++)
                if (cand[k].verdict == V_SELECTED)
                    cand[k].verdict = "map_failed";
        } else {
            for (size_t w = 0; w < e->nwords; w++)
                e->anchor_slot[w] = cidx[w] >= 0 ? cand[cidx[w]].slot : -1;
        }
    }
    log_decision(e, cand, ncand, active, reserved);
    if (observe) {
        e->state = ST_OBSERVED;
    } else if (active) {
        e->state = ST_ACTIVE;
        e->peers = vr_alloc_peer_generation();
        vr_stat_inc(VR_C_execs_active);
        transition(e);
    } else {
        e->state = ST_DISABLED;
        vr_stat_inc(VR_C_execs_disabled);
    }
    free(sizes);
    free(cidx);
    free(cand);
}

/* ---- launch ------------------------------------------------------------ */

/* Blocks until the exec's last active launch is done; true if it had to. */
static bool wait_last_launch(struct vr_exec *e)
{
    if (!e->in_flight)
        return false;
    if (vr_real.cuEventQuery(e->done) == CUDA_SUCCESS)
        return false;
    vr_real.cuEventSynchronize(e->done);
    e->c.rebind_waits++;
    vr_stat_inc(VR_C_rebind_waits);
    return true;
}

struct rebind_ctx {
    struct vr_exec *e;
    bool waited;
};

static void on_rebind(void *ctx, size_t slot, const struct vr_slice_bind *from,
                      const struct vr_slice_bind *to, int rc)
{
    struct rebind_ctx *rb = ctx;
    struct vr_exec *e = rb->e;
    e->c.rebinds++;
    vr_stat_inc(VR_C_rebinds);
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[512], hex[32];
    struct vr_jw w;
    begin_exec_event(&w, buf, sizeof buf, "slice_rebind", e->handle);
    vr_jw_u64(&w, "slice", slot);
    hexbuf(hex, sizeof hex, from->base);
    vr_jw_str(&w, "from", hex);
    hexbuf(hex, sizeof hex, rc == 0 ? to->base : 0);
    vr_jw_str(&w, "to", hex);
    vr_jw_bool(&w, "waited", rb->waited);
    if (rc != 0)
        vr_jw_str(&w, "error", vr_cu_name(vr_err_to_cu(rc)));
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* Restores the invariant after bindings changed: installed == translation. */
static int reconcile(struct vr_exec *e)
{
    int rc = 0;
    for (size_t i = 0; i < e->nnodes; i++) {
        struct node *n = &e->nodes[i];
        CUresult r = CUDA_SUCCESS;
        if (!n->layout || !sync_node(e, n, &r))
            continue;
        note_forward(e, n, "rebind");
        if (r != CUDA_SUCCESS && rc == 0)
            rc = vr_err_cu(r);
    }
    /* A node the driver refused still reads a remapped slice: try again
     * before the next launch rather than launch it. */
    e->reconcile = rc != 0;
    return rc;
}

static int launch_locked(struct vr_exec *e, CUstream stream, bool per_thread)
{
    e->c.launches++;
    if (e->state == ST_PROFILING && e->profiled >= cfg.profile_launches)
        decide(e);
    if (e->state == ST_ACTIVE) {
        unsigned peers = vr_alloc_peer_generation();
        if (peers != e->peers) {
            vr_slices_reaccess(e->slices);
            e->peers = peers;
        }
        if (vr_slices_pending(e->slices)) {
            struct rebind_ctx rb = {e, wait_last_launch(e)};
            vr_slices_apply(e->slices, on_rebind, &rb);
            e->reconcile = true;
        }
        if (e->reconcile) {
            int rc = reconcile(e);
            if (rc != 0)
                return rc; /* the graph would read what the program did not ask for */
        }
    }
    CUresult r = per_thread ? vr_real.cuGraphLaunch_ptsz(e->handle, stream)
                            : vr_real.cuGraphLaunch(e->handle, stream);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    if (e->state == ST_PROFILING)
        observe_launch(e);
    else if (e->state == ST_ACTIVE) {
        CUresult er = per_thread && vr_real.cuEventRecord_ptsz
                          ? vr_real.cuEventRecord_ptsz(e->done, stream)
                          : vr_real.cuEventRecord(e->done, stream);
        if (er == CUDA_SUCCESS) {
            e->in_flight = true;
        } else {
            /* Without the event, wait for the launch itself before any unmap. */
            vr_real.cuCtxSynchronize();
        }
    }
    return 0;
}

int vr_exec_launch(CUgraphExec exec, CUstream stream, bool per_thread)
{
    vr_stat_inc(VR_C_launches);
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : lock_exec(exec);
    if (!e) {
        CUresult r = per_thread ? vr_real.cuGraphLaunch_ptsz(exec, stream)
                                : vr_real.cuGraphLaunch(exec, stream);
        return vr_err_cu(r);
    }
    int rc = launch_locked(e, stream, per_thread);
    vr_mutex_unlock(&e->lock);
    return rc;
}

/* ---- lifecycle --------------------------------------------------------- */

static void drop_slices(struct vr_exec *e)
{
    if (e->state == ST_ACTIVE) {
        wait_last_launch(e);
        vr_stat_add(VR_C_execs_active, -1);
    }
    vr_slices_destroy(e->slices);
    e->slices = NULL;
    if (e->done)
        vr_real.cuEventDestroy_v2(e->done);
    e->done = NULL;
    e->in_flight = false;
}

int vr_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : lock_exec(exec);
    CUresult r = vr_real.cuGraphExecUpdate_v2(exec, graph, info);
    if (!e)
        return vr_err_cu(r);
    if (r == CUDA_SUCCESS) {
        /* The driver now holds the new graph's raw parameters: no node reads a
         * slice, so the slices go once the last launch is done. */
        drop_slices(e);
        log_exec_event("exec_reset", e);
        free_nodes(e);
        memset(&e->c, 0, sizeof e->c);
        e->profiled = 0;
        e->reconcile = false;
        e->graph = graph;
        if (read_graph(e, graph) != 0) {
            free_nodes(e);
            e->state = ST_OBSERVED; /* nothing known: pass everything through */
        } else {
            e->state = first_state();
        }
    }
    vr_mutex_unlock(&e->lock);
    return vr_err_cu(r);
}

int vr_exec_destroy(CUgraphExec exec)
{
    struct vr_exec *e = unlink_exec(exec);
    if (e) {
        vr_mutex_lock(&e->lock);
        if (e->state == ST_ACTIVE)
            wait_last_launch(e);
    }
    CUresult r = vr_real.cuGraphExecDestroy(exec);
    if (e) {
        drop_slices(e);
        log_exec_event("exec_destroyed", e);
        free_nodes(e);
        vr_mutex_unlock(&e->lock);
        free(e);
    }
    return vr_err_cu(r);
}

void vr_exec_forget_alloc(uint64_t id)
{
    vr_read_lock(&table_lock);
    for (size_t b = 0; b < VR_EXEC_BUCKETS; b++) {
        for (struct vr_exec *e = buckets[b]; e; e = e->next) {
            vr_mutex_lock(&e->lock);
            if (e->slices && vr_slices_holds(e->slices, id)) {
                wait_last_launch(e);
                if (vr_slices_drop(e->slices, id))
                    e->reconcile = true;
            }
            vr_mutex_unlock(&e->lock);
        }
    }
    vr_read_unlock(&table_lock);
}

/* ---- appended by the init branch: minimal versions for the lead ---------- */

void vr_exec_updated(CUgraphExec exec, CUgraph graph)
{
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : lock_exec(exec);
    if (!e)
        return;
    drop_slices(e);
    log_exec_event("exec_reset", e);
    free_nodes(e);
    memset(&e->c, 0, sizeof e->c);
    e->profiled = 0;
    e->reconcile = false;
    e->graph = graph;
    if (read_graph(e, graph) != 0) {
        free_nodes(e);
        e->state = ST_OBSERVED; /* nothing known: pass everything through */
    } else {
        e->state = first_state();
    }
    vr_mutex_unlock(&e->lock);
}

#include <stdatomic.h>

/* Once set, execs behave as in dedup (the lead's rewrite reads it). */
static atomic_bool degraded;

void vr_exec_degrade(const char *why)
{
    if (atomic_exchange(&degraded, true))
        return;
    char reason[200], buf[384];
    snprintf(reason, sizeof reason, "%s; dedup from now on", why ? why : "unknown");
    struct vr_jw w;
    vr_jw_begin(&w, buf, sizeof buf, "fallback");
    vr_jw_str(&w, "what", "mode");
    vr_jw_str(&w, "reason", reason);
    vr_log_emit(&w, VR_LEVEL_INFO);
}
