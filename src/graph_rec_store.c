/* graph_rec_store: a graph record itself (graph_rec_int.h): its growing
 * arrays, copies, a graph read through the driver's getters, and the
 * comparison cuGraphExecUpdate's decision rests on (graph_rec.h).
 */
#include "graph_rec_int.h"

#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "driver.h"

/* ---- growing arrays ------------------------------------------------------ */

bool vr_gr_reserve(struct vr_grec *r, size_t more)
{
    if (r->nb + more <= r->bcap)
        return true;
    size_t c = r->bcap ? r->bcap : 1024;
    while (c < r->nb + more)
        c *= 2;
    uint8_t *q = realloc(r->bytes, c);
    if (!q)
        return false;
    r->bytes = q;
    r->bcap = c;
    return true;
}

void vr_gr_add_edge(struct vr_grec *r, uint32_t from, uint32_t to)
{
    if (!vr_gr_grow((void **)&r->edges, &r->ecap, r->ne + 1, sizeof *r->edges)) {
        r->unknown = true;
        return;
    }
    uint64_t e = (uint64_t)to << 32 | from;
    if (r->ne && r->edges[r->ne - 1] >= e)
        r->sorted = false;
    r->edges[r->ne++] = e;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void vr_gr_sort_edges(struct vr_grec *r)
{
    if (r->sorted)
        return;
    qsort(r->edges, r->ne, sizeof *r->edges, cmp_u64);
    /* A set: the driver keeps one edge per pair. */
    uint32_t k = 0;
    for (uint32_t i = 0; i < r->ne; i++)
        if (k == 0 || r->edges[k - 1] != r->edges[i])
            r->edges[k++] = r->edges[i];
    r->ne = k;
    r->sorted = true;
}

struct vr_grec *vr_gr_new(void)
{
    struct vr_grec *r = calloc(1, sizeof *r);
    if (r)
        r->sorted = true;
    return r;
}

void vr_grec_free(struct vr_grec *r)
{
    if (!r)
        return;
    free(r->v);
    free(r->edges);
    free(r->bytes);
    free(r->kidx);
    free(r->sid);
    free(r);
}

uint32_t vr_gr_add_node(struct vr_grec *r, CUgraphNodeType type, CUgraphNode handle)
{
    if (r->unknown || !vr_gr_grow((void **)&r->v, &r->cap, r->n + 1, sizeof *r->v)) {
        r->unknown = true;
        return UINT32_MAX;
    }
    r->v[r->n] = (struct gnode){.type = type, .handle = handle};
    if (type == CU_GRAPH_NODE_TYPE_KERNEL)
        r->nkernels++;
    else if (type == CU_GRAPH_NODE_TYPE_EMPTY)
        vr_gr_shape_node(r, r->n); /* complete as it is (a kernel: at vr_gr_set_args) */
    else
        r->loose = true;
    return r->n++;
}

/* The node's arguments, packed (padding zero, as node.c packs them). */
void vr_gr_set_args(struct vr_grec *r, struct gnode *g, const struct vr_layout *l, void **kp)
{
    g->layout = NULL;
    g->off = g->len = 0;
    g->aoff = g->alen = 0; /* aoff too: a node written in place (launch_slow) has it unset */
    if (!l || (l->nparams && !kp)) {
        r->loose = true; /* opaque: no bytes to compare */
        return;
    }
    size_t bytes = ((size_t)l->bytes + 7) & ~(size_t)7;
    if (!vr_gr_reserve(r, bytes)) {
        r->unknown = true;
        return;
    }
    /* Padding compares equal: zeroed word by word (a few stores, no call),
     * then the arguments packed unit by unit. vr_layout_pack2 with both
     * buffers the same: fixed-size moves, no memset call and no switch per
     * argument (callgrind, 4 arguments: 22 instructions fewer per captured
     * kernel than vr_layout_pack); the second store repeats the first. */
    uint8_t *dst = r->bytes + r->nb;
    if (l->gaps)
        for (size_t w = 0; w < bytes; w += 8)
            memcpy(dst + w, &(uint64_t){0}, 8);
    else if (bytes != l->bytes)
        memcpy(dst + bytes - 8, &(uint64_t){0}, 8); /* the rounding past the end */
    vr_layout_pack2(l, kp, dst, dst);
    g->off = (uint32_t)r->nb;
    g->len = l->bytes;
    r->nb += bytes;
    g->layout = l;
    /* The node is complete now; one set again (a setter) is not the next
     * to intern, and its old bytes stay in the arena: the record goes loose. */
    vr_gr_shape_node(r, (uint32_t)(g - r->v));
}

void vr_gr_set_plain(struct vr_grec *r, struct gnode *g, const void *params, size_t bytes)
{
    r->loose = true; /* the arena holds more than arguments */
    if (!params || bytes == 0)
        return;
    if (!vr_gr_reserve(r, bytes)) {
        r->unknown = true;
        return;
    }
    memcpy(r->bytes + r->nb, params, bytes);
    g->off = (uint32_t)r->nb;
    g->len = (uint32_t)bytes;
    r->nb += bytes;
}

struct vr_grec *vr_gr_copy(const struct vr_grec *s)
{
    struct vr_grec *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    *r = *s;
    r->kidx = NULL;
    r->sid = malloc((s->nsid ? s->nsid : 1) * sizeof *r->sid);
    r->sidcap = s->nsid;
    r->v = malloc((s->n ? s->n : 1) * sizeof *r->v);
    r->edges = malloc((s->ne ? s->ne : 1) * sizeof *r->edges);
    r->bytes = malloc(s->nb ? s->nb : 1);
    r->cap = s->n;
    r->ecap = s->ne;
    r->bcap = s->nb;
    if (!r->v || !r->edges || !r->bytes || !r->sid) {
        vr_grec_free(r);
        return NULL;
    }
    if (s->n)
        memcpy(r->v, s->v, s->n * sizeof *r->v);
    if (s->ne)
        memcpy(r->edges, s->edges, s->ne * sizeof *r->edges);
    if (s->nb)
        memcpy(r->bytes, s->bytes, s->nb);
    if (s->nsid)
        memcpy(r->sid, s->sid, s->nsid * sizeof *r->sid);
    return r;
}

/* The index of node handle h in r (recent nodes first: dependencies are
 * usually the nodes just made), or UINT32_MAX. */
uint32_t vr_gr_index_of(const struct vr_grec *r, CUgraphNode h)
{
    for (uint32_t i = r->n; i-- > 0;)
        if (r->v[i].handle == h)
            return i;
    return UINT32_MAX;
}

void vr_gr_add_deps(struct vr_grec *r, uint32_t i, const CUgraphNode *deps, size_t ndeps)
{
    for (size_t d = 0; d < ndeps && !r->unknown; d++) {
        uint32_t j = deps ? vr_gr_index_of(r, deps[d]) : UINT32_MAX;
        if (j == UINT32_MAX)
            r->unknown = true;
        else
            vr_gr_add_edge(r, j, i);
    }
}

/* ---- reading a graph through the getters ------------------------------- */

struct vr_grec *vr_gr_read(CUgraph graph)
{
    size_t total = 0;
    if (vr_real.cuGraphGetNodes(graph, NULL, &total) != CUDA_SUCCESS || total >= UINT32_MAX)
        return NULL;
    CUgraphNode *all = calloc(total ? total : 1, sizeof *all);
    struct vr_grec *r = vr_gr_new();
    if (r)
        r->loose = true; /* read without the lock: no shape is interned */
    if (!all || !r || vr_real.cuGraphGetNodes(graph, all, &total) != CUDA_SUCCESS) {
        free(all);
        vr_grec_free(r);
        return NULL;
    }
    for (size_t i = 0; i < total; i++) {
        CUgraphNodeType type;
        if (vr_real.cuGraphNodeGetType(all[i], &type) != CUDA_SUCCESS)
            type = VR_GN_UNMODELLED;
        if (type != CU_GRAPH_NODE_TYPE_KERNEL && type != CU_GRAPH_NODE_TYPE_EMPTY)
            type = VR_GN_UNMODELLED;
        uint32_t k = vr_gr_add_node(r, type, all[i]);
        if (k == UINT32_MAX)
            break;
        if (type != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        CUDA_KERNEL_NODE_PARAMS_v2 p = {0};
        struct gnode *g = &r->v[k];
        if (vr_real.cuGraphKernelNodeGetParams_v2(all[i], &p) != CUDA_SUCCESS) {
            g->type = VR_GN_UNMODELLED;
            continue;
        }
        g->f.func = p.func;
        g->f.kern = p.func ? NULL : p.kern;
        g->f.ctx = p.func ? NULL : p.ctx;
        memcpy(g->f.dims, &p.gridDimX, VR_DIMS_BYTES);
        const struct vr_layout *l = NULL;
        if (!p.extra && vr_layout_get(p.func, p.kern, &l) == 0)
            vr_gr_set_args(r, g, l, p.kernelParams);
    }
    /* The edges, by each node's dependencies. */
    size_t dcap = 16;
    CUgraphNode *deps = malloc(dcap * sizeof *deps);
    for (uint32_t i = 0; i < r->n && deps && !r->unknown; i++) {
        size_t nd = 0;
        if (vr_real.cuGraphNodeGetDependencies(all[i], NULL, &nd) != CUDA_SUCCESS) {
            r->unknown = true;
            break;
        }
        if (nd > dcap) {
            CUgraphNode *q = realloc(deps, nd * sizeof *deps);
            if (!q) {
                r->unknown = true;
                break;
            }
            deps = q;
            dcap = nd;
        }
        if (nd && vr_real.cuGraphNodeGetDependencies(all[i], deps, &nd) != CUDA_SUCCESS) {
            r->unknown = true;
            break;
        }
        vr_gr_add_deps(r, i, deps, nd);
    }
    if (!deps)
        r->unknown = true;
    free(deps);
    free(all);
    /* Handles of a graph read this way are not kept: no setter finds it. */
    for (uint32_t i = 0; i < r->n; i++)
        r->v[i].handle = NULL;
    return r;
}

bool vr_grec_types_match(const struct vr_grec *r, const CUgraphNodeType *types, size_t n)
{
    if (!r || n != r->n)
        return false;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->v[i].type != types[i])
            return false;
    return true;
}

size_t vr_grec_nodes(const struct vr_grec *r)
{
    return r ? r->n : 0;
}

size_t vr_grec_kernels(const struct vr_grec *r)
{
    return r ? r->nkernels : 0;
}

const char *vr_grec_diff(const struct vr_grec *cur, const struct vr_grec *upd,
                         const struct vr_nodes *ns, uint32_t *changed, size_t *nchanged)
{
    *nchanged = 0;
    if (!cur || !upd || cur->unknown || upd->unknown)
        return "unknown";
    VR_ASSERT(cur->sorted && upd->sorted);
    if (vr_gr_packed_same(cur, upd, ns))
        return NULL; /* the common no-change update: no walk over the nodes */
    if (cur->n != upd->n || cur->ne != upd->ne || cur->nkernels != ns->n ||
        upd->nkernels != ns->n)
        return "topology";
    if (cur->ne && memcmp(cur->edges, upd->edges, cur->ne * sizeof *cur->edges) != 0)
        return "topology";
    size_t k = 0;
    for (uint32_t i = 0; i < cur->n; i++) {
        const struct gnode *a = &cur->v[i], *b = &upd->v[i];
        if (a->type != b->type)
            return "node_type";
        if (a->type == VR_GN_UNMODELLED)
            return "unmodelled";
        if (a->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            const struct vr_node *n = &ns->v[k];
            if (!n->layout || !b->layout)
                return "opaque";
            if (!vr_same_fields(&n->f, &b->f) || n->layout != b->layout)
                return "kernel_fields";
            /* Launch attributes: not an argument, the driver's to apply. */
            if (a->alen != b->alen ||
                memcmp(cur->bytes + a->aoff, upd->bytes + b->aoff, a->alen) != 0)
                return "attributes";
            if (memcmp(upd->bytes + b->off, n->intended, n->layout->bytes) != 0)
                changed[(*nchanged)++] = (uint32_t)k;
            k++;
            continue;
        }
        if (a->type != CU_GRAPH_NODE_TYPE_EMPTY &&
            (a->len != b->len || a->ctx != b->ctx ||
             memcmp(cur->bytes + a->off, upd->bytes + b->off, a->len) != 0))
            return "params";
    }
    return NULL;
}

void vr_grec_kernel_params(const struct vr_grec *r, size_t k, CUDA_KERNEL_NODE_PARAMS_v2 *p,
                           void **kp)
{
    VR_ASSERT(r->kidx && k < r->nkernels);
    const struct gnode *g = &r->v[r->kidx[k]];
    VR_ASSERT(g->layout);
    memset(p, 0, sizeof *p);
    p->func = g->f.func;
    p->kern = g->f.kern;
    p->ctx = g->f.ctx;
    memcpy(&p->gridDimX, g->f.dims, VR_DIMS_BYTES);
    vr_layout_point(g->layout, r->bytes + g->off, kp);
    p->kernelParams = kp;
}

