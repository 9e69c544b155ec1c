/* graph_rec_pack: a record's packed form (graph_rec_int.h), so that an
 * update that changes nothing is judged by three memcmp's over contiguous
 * memory instead of a walk over every node of three structures (issue 31
 * item 5: at most 5 ns per node; docs/design.md, "The packed compare").
 *
 * A node's shape (type, function, launch shape, layout) becomes a 32-bit
 * id from one process-wide table that never forgets a shape, so equal
 * shapes have equal ids in every record, however it was made (capture,
 * the explicit API, a copy). A record's packed form is its id array, its
 * sorted edges and its argument bytes, the kernels' back to back; the
 * exec's argument truth (its intended shadows, node.c) is laid out the same
 * way, so the update's bytes are compared with it directly. Anything the
 * packed form does not describe makes the record `loose`, and the
 * node-by-node compare (vr_grec_diff) judges it as before.
 * Under graph_rec.c's lock (the table); the compare reads records only.
 */
#include "graph_rec_int.h"

#include <stdlib.h>
#include <string.h>

#include "node.h"

/* Shapes are few (a program's kernels times their launch shapes); past
 * this many, new ones are not interned and their records judged node by
 * node (the table must not grow without bound). */
#define VR_GR_MAX_SHAPES (1u << 20)

struct vr_gshape *vr_gr_shapes;
uint32_t vr_gr_shape_hint[VR_GR_HINTS]; /* id + 1 of a shape of the slot's function; 0: none */
static uint32_t nshapes, scap;
static uint32_t *slots; /* id + 1, open addressing; 0: empty */
static uint32_t smask;

/* Over the fields that tell shapes apart in practice (the compare is over
 * all of them): the function and the grid and block widths. */
static uint32_t shape_hash(const struct gnode *g)
{
    uint64_t h = ((uint64_t)(uintptr_t)g->f.func ^ (uint64_t)(uintptr_t)g->f.kern ^
                  ((uint64_t)g->f.dims[0] << 32 | g->f.dims[3]) ^ (uint64_t)g->type) *
                 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h >> 32);
}

static bool rehash(uint32_t want)
{
    uint32_t *s = calloc(want, sizeof *s);
    if (!s)
        return false;
    for (uint32_t id = 0; id < nshapes; id++) {
        const struct vr_gshape *e = &vr_gr_shapes[id];
        struct gnode g = {.type = e->type, .f = e->f, .layout = e->layout};
        uint32_t k = shape_hash(&g) & (want - 1);
        while (s[k])
            k = (k + 1) & (want - 1);
        s[k] = id + 1;
    }
    free(slots);
    slots = s;
    smask = want - 1;
    return true;
}

uint32_t vr_gr_shape_find(const struct gnode *g)
{
    if (slots) {
        for (uint32_t k = shape_hash(g) & smask; slots[k]; k = (k + 1) & smask)
            if (vr_gr_shape_is(&vr_gr_shapes[slots[k] - 1], g))
                return slots[k] - 1;
    }
    if (nshapes >= VR_GR_MAX_SHAPES)
        return UINT32_MAX;
    if (nshapes == scap) {
        uint32_t c = scap ? 2 * scap : 64;
        struct vr_gshape *q = realloc(vr_gr_shapes, c * sizeof *q);
        if (!q)
            return UINT32_MAX;
        vr_gr_shapes = q;
        scap = c;
    }
    /* Load factor at most 1/2. */
    if (!slots || 2 * (nshapes + 1) > smask + 1) {
        if (!rehash(slots ? 2 * (smask + 1) : 128))
            return UINT32_MAX;
    }
    uint32_t id = nshapes++;
    struct vr_gshape *e = &vr_gr_shapes[id];
    memset(e, 0, sizeof *e);
    e->type = g->type;
    e->f.func = g->f.func;
    e->f.kern = g->f.kern;
    e->f.ctx = g->f.ctx;
    memcpy(e->f.dims, g->f.dims, VR_DIMS_BYTES);
    e->layout = g->layout;
    uint32_t k = shape_hash(g) & smask;
    while (slots[k])
        k = (k + 1) & smask;
    slots[k] = id + 1;
    return id;
}

void vr_gr_shape_slow(struct vr_grec *r, uint32_t i)
{
    if (r->loose)
        return;
    if (i != r->nsid || !vr_gr_grow((void **)&r->sid, &r->sidcap, r->nsid + 1, sizeof *r->sid)) {
        r->loose = true;
        return;
    }
    const struct gnode *g = &r->v[i];
    uint32_t id = vr_gr_shape_find(g);
    if (id == UINT32_MAX) {
        r->loose = true;
        return;
    }
    vr_gr_shape_hint[vr_gr_hint_slot(g)] = id + 1;
    r->sid[r->nsid++] = id;
}

bool vr_gr_packed_same(const struct vr_grec *a, const struct vr_grec *b,
                       const struct vr_nodes *ns)
{
    /* The exec's side: a's shapes say the fields the driver holds only
     * while no node's fields moved since ns was read with a; the intended
     * shadows are laid out as b's bytes only without opaque nodes. */
    if (a->loose || b->loose || a->nsid != a->n || b->nsid != b->n || a->n != b->n ||
        a->ne != b->ne || ns->fields_moved || ns->nopaque || a->nkernels != ns->n ||
        b->nkernels != ns->n || b->nb != ns->half || (ns->n && ns->v[0].intended != ns->shadows))
        return false;
    return (!a->n || memcmp(a->sid, b->sid, (size_t)a->n * sizeof *a->sid) == 0) &&
           (!a->ne || memcmp(a->edges, b->edges, (size_t)a->ne * sizeof *a->edges) == 0) &&
           (!b->nb || memcmp(b->bytes, ns->shadows, b->nb) == 0);
}
