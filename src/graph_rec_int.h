/* graph_rec_int: a graph record's representation, shared by the recorder's
 * two files: graph_rec.c (the tables and the hooks' feeding) and
 * graph_rec_store.c (the record itself: growing it, copying it, reading a
 * graph through the getters, comparing two records). Private to them.
 * A record is not thread-safe: graph_rec.c's mutex guards the records in
 * its tables; a copy (vr_grec_take) belongs to its caller alone.
 */
#ifndef VR_GRAPH_REC_INT_H
#define VR_GRAPH_REC_INT_H

#include "graph_rec.h"
#include "layout.h"
#include "lock.h"

#include <stdlib.h>
#include <string.h>

/* A node of a type the record cannot describe: never equal to anything. */
#define VR_GN_UNMODELLED ((CUgraphNodeType)0x7fffffff)
#define VR_DIMS_BYTES (7 * sizeof(unsigned))

struct gnode {
    CUgraphNodeType type;
    struct vr_fields f;             /* kernel */
    const struct vr_layout *layout; /* kernel; NULL: opaque */
    CUcontext ctx;                  /* memset, memcpy */
    uint32_t off, len;              /* argument or parameter bytes in `bytes` */
    uint32_t aoff, alen;            /* kernel: its launch attributes' bytes in `bytes`
                                     * (alen 0: none; vr_gr_set_args clears it) */
    CUgraphNode handle;             /* explicit API only (captured nodes: NULL) */
};

struct vr_grec {
    struct gnode *v;
    uint32_t n, cap, nkernels;
    uint64_t *edges;                /* (to << 32 | from), sorted when `sorted` */
    uint32_t ne, ecap;
    bool sorted, unknown;
    bool checked;                   /* its node types matched the driver's once */
    bool born_seen;                 /* recorded from its cuGraphCreate on */
    uint8_t *bytes;
    size_t nb, bcap;
    uint32_t *kidx;                 /* private copies: the k-th kernel's node index */
    /* The packed form (graph_rec_pack.c): node i's shape id, for nodes
     * 0 .. nsid-1, interned in node order as each node is complete.
     * `loose`: the packed form does not describe the record (a node of
     * another type than kernel or empty, an opaque kernel, launch
     * attributes, plain parameters, a node changed after it was added, a
     * record read through the getters): only the node-by-node compare
     * judges it. Otherwise `bytes` holds exactly the kernels' argument
     * bytes back to back, each rounded up to 8, in node order. */
    uint32_t *sid;
    uint32_t nsid, sidcap;
    bool loose;
};

/* What the packed form says of a node besides its argument bytes: equal
 * shapes, equal ids (one process-wide table, never shrinking). */
struct vr_gshape {
    CUgraphNodeType type;
    struct vr_fields f;
    const struct vr_layout *layout;
};

/* The shape table, under graph_rec.c's lock: the id of node g's shape
 * (UINT32_MAX: the table is full), looked up by a hint per function (a
 * direct-mapped slot: functions that share one, or one function launched
 * in alternating shapes, miss it) and then a hash. */
extern struct vr_gshape *vr_gr_shapes;
#define VR_GR_HINTS 1024
extern uint32_t vr_gr_shape_hint[VR_GR_HINTS];
uint32_t vr_gr_shape_find(const struct gnode *g);
/* Node i of r is complete: its shape joins the packed form (r goes loose
 * when i is not the next node to intern, or on any failure). Under the
 * lock, or on a record already loose. */
void vr_gr_shape_slow(struct vr_grec *r, uint32_t i);

static inline uint32_t vr_gr_hint_slot(const struct gnode *g)
{
    /* Multiplied, top bits: handles are often allocated at a power-of-two
     * stride, whose low bits alone would put every function in one slot. */
    uint64_t k = (uint64_t)(uintptr_t)g->f.func ^ (uint64_t)(uintptr_t)g->f.kern;
    return (uint32_t)((k * 0x9e3779b97f4a7c15ull) >> 54); /* 10 bits: VR_GR_HINTS */
}

/* The seven launch dimensions, equal (a few loads, no memcmp call). */
static inline bool vr_gr_dims_eq(const unsigned *a, const unsigned *b)
{
    uint64_t x[3], y[3];
    memcpy(x, a, sizeof x);
    memcpy(y, b, sizeof y);
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (uint64_t)(a[6] ^ b[6])) == 0;
}

static inline bool vr_gr_shape_is(const struct vr_gshape *s, const struct gnode *g)
{
    return s->type == g->type && s->f.func == g->f.func && s->f.kern == g->f.kern &&
           s->f.ctx == g->f.ctx && s->layout == g->layout && vr_gr_dims_eq(s->f.dims, g->f.dims);
}

/* Node i's shape is shape h - 1 when h says so (0: no hint); else the
 * table is asked. Returns the id + 1 interned (0: none, r is loose). */
static inline uint32_t vr_gr_shape_node_hint(struct vr_grec *r, uint32_t i, uint32_t h)
{
    if (r->loose)
        return 0;
    const struct gnode *g = &r->v[i];
    if (__builtin_expect(i == r->nsid && r->nsid < r->sidcap && h != 0 &&
                         vr_gr_shape_is(&vr_gr_shapes[h - 1], g), 1)) {
        r->sid[r->nsid++] = h - 1;
        return h;
    }
    vr_gr_shape_slow(r, i);
    return r->loose ? 0 : r->sid[i] + 1;
}

/* The common case inline: room left, the function's hint right. */
static inline void vr_gr_shape_node(struct vr_grec *r, uint32_t i)
{
    if (!r->loose)
        vr_gr_shape_node_hint(r, i, vr_gr_shape_hint[vr_gr_hint_slot(&r->v[i])]);
}

/* Whether a and b describe the same graph with the exec's kernel
 * arguments ns (vr_grec_diff's question when nothing changed), judged by
 * the packed forms alone; false also when they cannot tell. */
bool vr_gr_packed_same(const struct vr_grec *a, const struct vr_grec *b,
                       const struct vr_nodes *ns);

/* Grows *p to hold `want` elements of `elem` bytes (capacity doubling).
 * Inline: every file of the recorder grows arrays, and a shared helper in
 * one of them would point the others at it. */
static inline bool vr_gr_grow(void **p, uint32_t *cap, uint32_t want, size_t elem)
{
    if (want <= *cap)
        return true;
    uint32_t c = *cap ? *cap : 16;
    while (c < want)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* Room for `more` bytes in r's arena; false when memory ran out. */
bool vr_gr_reserve(struct vr_grec *r, size_t more);
/* A failed allocation below makes the record UNKNOWN instead of failing. */
void vr_gr_add_edge(struct vr_grec *r, uint32_t from, uint32_t to);

/* vr_gr_add_edge inlined where room is left (every captured node makes
 * one edge: the call and the capacity check cost more than the store). */
static inline void vr_gr_edge(struct vr_grec *r, uint32_t from, uint32_t to)
{
    if (__builtin_expect(r->ne == r->ecap, 0)) {
        vr_gr_add_edge(r, from, to);
        return;
    }
    uint64_t e = (uint64_t)to << 32 | from;
    if (r->ne && r->edges[r->ne - 1] >= e)
        r->sorted = false;
    r->edges[r->ne++] = e;
}
void vr_gr_sort_edges(struct vr_grec *r);
struct vr_grec *vr_gr_new(void);
/* Appends a node; its index, or UINT32_MAX (the record is then UNKNOWN). */
uint32_t vr_gr_add_node(struct vr_grec *r, CUgraphNodeType type, CUgraphNode handle);
void vr_gr_set_args(struct vr_grec *r, struct gnode *g, const struct vr_layout *l, void **kp);
void vr_gr_set_plain(struct vr_grec *r, struct gnode *g, const void *params, size_t bytes);
struct vr_grec *vr_gr_copy(const struct vr_grec *s);
uint32_t vr_gr_index_of(const struct vr_grec *r, CUgraphNode h);
void vr_gr_add_deps(struct vr_grec *r, uint32_t i, const CUgraphNode *deps, size_t ndeps);
/* graph_rec.c's tables, for graph_rec_explicit.c: its one lock
 * (VR_RANK_GREC), graph -> record (NULL: none), a record put in place
 * (NULL: dropped; the old one recycled), a new record from the spares, and
 * the record holding a node handle (and the node's index). Under the lock. */
void vr_gr_lock(void);
void vr_gr_unlock(void);
struct vr_grec *vr_gr_graph(CUgraph g);
void vr_gr_put(CUgraph g, struct vr_grec *r);
struct vr_grec *vr_gr_new_locked(void);
struct vr_grec *vr_gr_of_node(CUgraphNode h, uint32_t *idx);
/* A node handle no record holds was changed: every record that holds
 * captured nodes (whose handles it does not keep) goes UNKNOWN. */
void vr_gr_unknown_handleless(void);
/* The record of the capture stream s is in, and its capture state (NULL:
 * none the shim follows), for a node the caller adds and then chains with
 * vr_gr_chain (it depends on the stream's set and becomes it). */
struct dep_ent;
struct vr_grec *vr_gr_capture_rec(CUstream s, bool ptsz, struct dep_ent **se);
void vr_gr_chain(struct dep_ent *se, struct vr_grec *r, uint32_t i);
/* Appends the attributes' bytes to node g (kernel) of r. */
void vr_gr_set_attrs(struct vr_grec *r, struct gnode *g, const CUlaunchAttribute *a, unsigned n);
/* The graph as the driver's getters tell it (no lock held): NULL on failure. */
struct vr_grec *vr_gr_read(CUgraph graph);

/* ---- graph_rec.c's capture state, for graph_rec_launch.c (under the lock) ---- */

/* A function's layout as a capture uses it (see struct capture). */
struct cap_layout {
    CUfunction f;
    const struct vr_layout *l;
    uint64_t gen;                   /* the layout generation it was looked up in */
    uint32_t bytes;                 /* l's argument bytes, rounded up to words */
    uint8_t pad;                    /* how launch_fast pads them (enum pad) */
    uint32_t sid;                   /* id + 1 of its last launch's shape (0: none) */
};
#define VR_GR_LAYOUTS 8

/* A capture the shim follows. */
struct capture {
    uint64_t id;
    struct vr_grec *r;
    CUstream origin;
    struct capture *next;
    /* The layout of the function launched last, while no eviction ran
     * (most captures launch few functions many times). Under mu. */
    CUfunction last_f;
    const struct vr_layout *last_l;
    uint64_t last_gen;
    uint32_t last_bytes;            /* last_l's argument bytes, rounded up to words */
    uint8_t last_pad;               /* how launch_fast pads them (enum pad) */
    uint32_t last_sid;              /* id + 1 of last_f's last shape (0: none): the
                                     * packed form's hint (graph_rec_pack.c) */
    /* The layouts of the functions launched before (a step's kernels take
     * turns: one remembered function would miss at every launch), the
     * last_* fields' source; nl used, lnext the next one replaced. */
    struct cap_layout lc[VR_GR_LAYOUTS];
    uint8_t nl, lnext;
};

/* A stream's capture state, or the capture dependency set an event
 * carries: one shape, two tables. */
struct dep_ent {
    const void *key;                /* the CUstream or the CUevent */
    struct capture *cap;            /* stream: NULL, not capturing (as far as the shim saw) */
    uint64_t cap_id;                /* event: 0, carries no capture dependencies */
    uint32_t *deps;
    uint32_t n, ncap;
    struct dep_ent *next;
};

/* The key of the calling thread's per-thread default stream. */
extern _Thread_local char vr_gr_ptds_tag;

/* The key of a stream: the legacy stream cannot capture (NULL). */
static inline CUstream vr_gr_stream_key(CUstream s, bool ptsz)
{
    if (s == CU_STREAM_PER_THREAD || (ptsz && !s))
        return (CUstream)(void *)&vr_gr_ptds_tag;
    if (s == CU_STREAM_LEGACY)
        return NULL;
    return s;
}

/* The lock vr_gr_lock takes, for graph_rec_launch.c's inline copy. */
extern vr_mutex vr_gr_mu;

/* Stream key -> its entry (NULL: none); entries are never freed. */
struct dep_ent *vr_gr_stream_find(CUstream key);
/* Node i of r joins the capture of stream se: it depends on the stream's
 * set and becomes it. */
void vr_gr_chain(struct dep_ent *se, struct vr_grec *r, uint32_t i);

#endif
