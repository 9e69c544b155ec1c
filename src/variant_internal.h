/* variant_internal: the variants' record, private to variant.c (making,
 * picking and syncing variants) and variant_ops.c (what reaches every
 * variant from the program's calls, and the variants checker). */
#ifndef VR_VARIANT_INTERNAL_H
#define VR_VARIANT_INTERNAL_H

#include <stdlib.h>

#include "variant.h"

/* ---- the variants -------------------------------------------------------- */

struct variant {
    uint64_t id;     /* never reused: orders launches (vr_track.var) */
    CUgraphExec handle; /* NULL: a free entry */
    struct vr_slices *slices;
    uint64_t last;   /* the track's sequence number of its last launch */
    uint32_t synced; /* the set's clock when its nodes were last brought up to date */
};

/* A node of another type than kernel (other_type()): its handle in the
 * program's graph and in the clone, and what the program last set it to
 * on its exec (made again on each variant made later). */
struct other {
    CUgraphNode orig, clone;
    CUgraphNodeType type;
    struct vr_set *last; /* NULL: as instantiated */
    bool disabled;       /* cuGraphNodeSetEnabled(0) seen */
};

static inline int cmp_other(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct other *)a)->orig;
    uintptr_t y = (uintptr_t)((const struct other *)b)->orig;
    return x < y ? -1 : x > y;
}

static inline struct other *find_other(struct other *o, size_t n, CUgraphNode h)
{
    struct other key = {.orig = h};
    return h && n ? bsearch(&key, o, n, sizeof *o, cmp_other) : NULL;
}

struct vr_variants {
    CUgraph clone;
    CUgraphNode *cnode;     /* per kernel node index: its node in the clone */
    size_t n;
    /* Per node: the clock of its last change (0: never changed since the
     * instantiation). Four bytes a node: the clock restarts when it would
     * wrap (restart_clock). */
    uint32_t *gen;
    uint32_t clock;
    /* The nodes changed since the least recently synced variant's sync,
     * each once: a sync costs O(changed nodes), not O(nodes). */
    uint32_t *log;
    size_t nlog;
    uint8_t *nflags;        /* per node: VR_IN_LOG, VR_DISABLED */
    struct other *other;    /* the nodes of other types, sorted by handle */
    size_t nother;
    unsigned long long flags;
    unsigned max, nv;       /* nv of v[1..cap-1] in use; v[0] is the program's exec */
    unsigned cap;           /* max, or up to twice that while every exec is busy */
    bool frozen;
    uint64_t ids;
    uint64_t recent[8];     /* what the program's exec was remapped to lately (hashes) */
    size_t *weight;         /* per slot: nodes with an anchor in it (set at the first pick) */
    size_t total;           /* nodes with an anchor */
    unsigned nrecent;
    struct variant v[VR_VARIANTS_MAX];
};

#define VR_IN_LOG 1u   /* the node is in the log */
#define VR_DISABLED 2u /* cuGraphNodeSetEnabled(0) seen */

/* Destroys variant k (its slices buried through cx, or forgotten). */
void vr_var_drop_one(struct vr_variants *vs, const struct vr_var_ctx *cx, unsigned k);

#endif
