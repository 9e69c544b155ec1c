/* graph_rec_explicit: the records of graphs the program builds node by node
 * (cuGraphCreate, cuGraphAdd*Node, edges, node setters); graph_rec.h states
 * the contract, graph_rec.c keeps the tables these work on under its lock.
 */
#include "graph_rec_int.h"

#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "lockrank.h"

/* ---- explicit graphs ------------------------------------------------------- */

void vr_grec_created(CUgraph g)
{
    vr_gr_lock();
    struct vr_grec *r = vr_gr_new_locked();
    if (r) {
        r->born_seen = true;
        vr_gr_put(g, r);
    }
    else
        vr_gr_put(g, NULL);
    vr_gr_unlock();
}

void vr_grec_destroyed(CUgraph g)
{
    vr_gr_lock();
    vr_gr_put(g, NULL);
    vr_gr_unlock();
}

void vr_grec_add_kernel(CUgraph g, CUgraphNode node, const CUgraphNode *deps, size_t ndeps,
                        const struct vr_fields *f, void **kernelParams, void **extra)
{
    const struct vr_layout *l = NULL;
    if (!extra && vr_layout_get(f->func, f->kern, &l) != 0)
        l = NULL;
    vr_gr_lock();
    struct vr_grec *r = vr_gr_graph(g);
    if (r && !r->unknown) {
        uint32_t i = vr_gr_add_node(r, CU_GRAPH_NODE_TYPE_KERNEL, node);
        if (i != UINT32_MAX) {
            r->v[i].f = *f;
            vr_gr_set_args(r, &r->v[i], l, kernelParams);
            vr_gr_add_deps(r, i, deps, ndeps);
        }
    }
    vr_gr_unlock();
}

void vr_grec_add_plain(CUgraph g, CUgraphNode node, const CUgraphNode *deps, size_t ndeps,
                       CUgraphNodeType type, const void *params, size_t bytes, CUcontext ctx)
{
    vr_gr_lock();
    struct vr_grec *r = vr_gr_graph(g);
    if (r && !r->unknown) {
        uint32_t i = vr_gr_add_node(r, type, node);
        if (i != UINT32_MAX) {
            r->v[i].ctx = ctx;
            vr_gr_set_plain(r, &r->v[i], params, bytes);
            vr_gr_add_deps(r, i, deps, ndeps);
        }
    }
    vr_gr_unlock();
}

void vr_grec_set_kernel(CUgraphNode node, const struct vr_fields *f, void **kernelParams,
                        void **extra)
{
    const struct vr_layout *l = NULL;
    if (!extra && vr_layout_get(f->func, f->kern, &l) != 0)
        l = NULL;
    vr_gr_lock();
    uint32_t i;
    struct vr_grec *r = vr_gr_of_node(node, &i);
    if (!r)
        vr_gr_unknown_handleless(); /* a captured graph's node, perhaps */
    if (r && !r->unknown) {
        if (r->v[i].type != CU_GRAPH_NODE_TYPE_KERNEL) {
            r->unknown = true;
        } else {
            /* The old bytes stay unused in the arena: setters are rare. */
            r->v[i].f = *f;
            vr_gr_set_args(r, &r->v[i], l, kernelParams);
        }
    }
    vr_gr_unlock();
}

void vr_grec_edges(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n,
                   bool add)
{
    vr_gr_lock();
    struct vr_grec *r = vr_gr_graph(g);
    for (size_t k = 0; r && k < n && !r->unknown; k++) {
        uint32_t a = vr_gr_index_of(r, from[k]), b = vr_gr_index_of(r, to[k]);
        if (a == UINT32_MAX || b == UINT32_MAX) {
            r->unknown = true;
        } else if (add) {
            vr_gr_add_edge(r, a, b);
        } else {
            uint64_t e = (uint64_t)b << 32 | a;
            for (uint32_t x = 0; x < r->ne; x++)
                if (r->edges[x] == e) {
                    r->edges[x] = r->edges[--r->ne];
                    r->sorted = false;
                    break;
                }
        }
    }
    vr_gr_unlock();
}

void vr_grec_mark_unknown(CUgraph g, CUgraphNode node)
{
    vr_gr_lock();
    uint32_t i;
    struct vr_grec *r = g ? vr_gr_graph(g) : vr_gr_of_node(node, &i);
    if (r)
        r->unknown = true;
    else if (!g)
        vr_gr_unknown_handleless(); /* a captured graph's node, perhaps */
    vr_gr_unlock();
}
