/* The packed compare of graph records (graph_rec_pack.c): an update that
 * changes nothing is judged by the packed forms alone, and a change in any
 * one field of any node (type, function, launch shape, one argument byte,
 * an edge) must never pass it: each is mutated in turn, and the full
 * compare (vr_grec_diff) must still name what changed. The driver is a
 * fake that only describes layouts: two 8-byte arguments per function. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "graph_rec.h"
#include "graph_rec_int.h"
#include "layout.h"
#include "node.h"

static CUresult CUDAAPI fake_param_info(CUfunction f, size_t i, size_t *off, size_t *size)
{
    (void)f;
    if (i >= 2)
        return CUDA_ERROR_INVALID_VALUE;
    *off = i * 8;
    *size = 8;
    return CUDA_SUCCESS;
}

static void fake_driver(void)
{
    vr_real.cuFuncGetParamInfo = fake_param_info;
}

TestSuite(graph_pack, .init = fake_driver);

#define F ((CUfunction)(void *)0x1000)
#define G ((CUfunction)(void *)0x2000)
#define K ((CUfunction)(void *)0x5000) /* F's layout, another function */

enum { NN = 4, NK = 3, MAXE = 8 };

/* A graph: NN nodes (NK kernels, one empty node) and its edges. */
struct spec {
    CUgraphNodeType type[NN];
    CUfunction func[NN];
    unsigned dims[NN][7];
    uint8_t args[NN][16];
    uint64_t edge[MAXE][2]; /* from, to */
    unsigned ne;
};

static struct spec base(void)
{
    struct spec s;
    memset(&s, 0, sizeof s);
    static const CUgraphNodeType t[NN] = {CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_EMPTY,
                                          CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_KERNEL};
    static const CUfunction f[NN] = {F, NULL, G, F};
    for (unsigned i = 0; i < NN; i++) {
        s.type[i] = t[i];
        s.func[i] = f[i];
        if (t[i] != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        const unsigned d[7] = {2 + i, 1, 1, 64, 1, 1, 16 * i};
        memcpy(s.dims[i], d, sizeof d);
        for (unsigned b = 0; b < 16; b++)
            s.args[i][b] = (uint8_t)(0x10 * i + b + 1);
    }
    /* 0 -> 1 -> 2 -> 3, and 0 -> 3 */
    static const uint64_t e[][2] = {{0, 1}, {1, 2}, {2, 3}, {0, 3}};
    memcpy(s.edge, e, sizeof e);
    s.ne = 4;
    return s;
}

/* The record of s, as the explicit API records one. */
static struct vr_grec *record(const struct spec *s)
{
    vr_gr_lock();
    struct vr_grec *r = vr_gr_new();
    cr_assert_not_null(r);
    for (unsigned i = 0; i < NN; i++) {
        uint32_t k = vr_gr_add_node(r, s->type[i], NULL);
        cr_assert_eq(k, i);
        if (s->type[i] != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        const struct vr_layout *l;
        cr_assert_eq(vr_layout_get(s->func[i], NULL, &l), 0);
        r->v[k].f.func = s->func[i];
        memcpy(r->v[k].f.dims, s->dims[i], sizeof s->dims[i]);
        void *kp[2] = {(void *)s->args[i], (void *)(s->args[i] + 8)};
        vr_gr_set_args(r, &r->v[k], l, kp);
    }
    for (unsigned e = 0; e < s->ne; e++)
        vr_gr_add_edge(r, (uint32_t)s->edge[e][0], (uint32_t)s->edge[e][1]);
    vr_gr_sort_edges(r);
    vr_gr_unlock();
    return r;
}

/* The exec's kernel nodes of s as node.c lays them out: the fields the
 * driver holds and the intended arguments back to back in one arena. */
struct exec_view {
    struct vr_nodes ns;
    struct vr_node v[NN];
    uint8_t shadows[2 * NN * 16];
};

static void exec_view(struct exec_view *x, const struct spec *s)
{
    memset(x, 0, sizeof *x);
    size_t k = 0;
    for (unsigned i = 0; i < NN; i++) {
        if (s->type[i] != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        struct vr_node *n = &x->v[k];
        cr_assert_eq(vr_layout_get(s->func[i], NULL, &n->layout), 0);
        n->f.func = s->func[i];
        memcpy(n->f.dims, s->dims[i], sizeof s->dims[i]);
        n->intended = x->shadows + 16 * k;
        memcpy(n->intended, s->args[i], 16);
        k++;
    }
    x->ns.v = x->v;
    x->ns.n = k;
    x->ns.shadows = x->shadows;
    x->ns.half = 16 * k;
    x->ns.max_params = 2;
}

/* The kernel index of node i of s. */
static unsigned kernel_index(const struct spec *s, unsigned i)
{
    unsigned k = 0;
    for (unsigned j = 0; j < i; j++)
        k += s->type[j] == CU_GRAPH_NODE_TYPE_KERNEL;
    return k;
}

/* cur is the exec's graph (base), upd the mutated one: the packed compare
 * must not call them the same, and the full compare must see the change:
 * a reason, or (when only node `arg_node`'s arguments differ) that node. */
static void expect_change(const struct spec *m, int arg_node, const char *what)
{
    struct spec b = base();
    struct vr_grec *cur = record(&b), *upd = record(m);
    struct exec_view x;
    exec_view(&x, &b);
    cr_assert_not(cur->loose || upd->loose, "%s: loose", what);
    cr_assert_not(vr_gr_packed_same(cur, upd, &x.ns), "%s: the packed compare missed it", what);
    uint32_t changed[NN];
    size_t n = 99;
    const char *why = vr_grec_diff(cur, upd, &x.ns, changed, &n);
    if (arg_node < 0) {
        cr_assert_not_null(why, "%s: the full compare missed it", what);
    } else {
        cr_assert_null(why, "%s: %s", what, why);
        cr_assert_eq(n, 1, "%s: %zu changed", what, n);
        cr_assert_eq(changed[0], kernel_index(&b, (unsigned)arg_node), "%s", what);
    }
    vr_grec_free(cur);
    vr_grec_free(upd);
}

Test(graph_pack, equal_graphs_compare_equal_packed)
{
    struct spec b = base();
    struct vr_grec *cur = record(&b), *upd = record(&b);
    struct exec_view x;
    exec_view(&x, &b);
    cr_assert_not(cur->loose);
    cr_assert_eq(cur->nsid, NN);
    cr_assert(vr_gr_packed_same(cur, upd, &x.ns));
    uint32_t changed[NN];
    size_t n = 99;
    cr_assert_null(vr_grec_diff(cur, upd, &x.ns, changed, &n));
    cr_assert_eq(n, 0);
    /* A copy (the exec's own record) compares the same. */
    struct vr_grec *copy = vr_gr_copy(cur);
    cr_assert(vr_gr_packed_same(copy, upd, &x.ns));
    vr_grec_free(copy);
    vr_grec_free(cur);
    vr_grec_free(upd);
}

Test(graph_pack, a_changed_type_is_seen)
{
    struct spec m = base();
    /* Kernel and empty node trade places: the counts stay. */
    m.type[0] = CU_GRAPH_NODE_TYPE_EMPTY;
    m.type[1] = CU_GRAPH_NODE_TYPE_KERNEL;
    m.func[1] = F;
    memcpy(m.dims[1], m.dims[0], sizeof m.dims[0]);
    memcpy(m.args[1], m.args[0], sizeof m.args[0]);
    memset(m.dims[0], 0, sizeof m.dims[0]);
    memset(m.args[0], 0, sizeof m.args[0]);
    m.func[0] = NULL;
    expect_change(&m, -1, "type");
}

Test(graph_pack, a_changed_function_is_seen_in_every_node)
{
    for (unsigned i = 0; i < NN; i++) {
        struct spec m = base();
        if (m.type[i] != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        m.func[i] = m.func[i] == K ? F : K;
        expect_change(&m, -1, "function");
    }
}

Test(graph_pack, every_launch_dimension_is_seen_in_every_node)
{
    for (unsigned i = 0; i < NN; i++)
        for (unsigned d = 0; d < 7; d++) {
            struct spec m = base();
            if (m.type[i] != CU_GRAPH_NODE_TYPE_KERNEL)
                continue;
            m.dims[i][d] += 1;
            expect_change(&m, -1, "dims");
        }
}

Test(graph_pack, every_argument_byte_is_seen_and_named)
{
    for (unsigned i = 0; i < NN; i++)
        for (unsigned b = 0; b < 16; b++) {
            struct spec m = base();
            if (m.type[i] != CU_GRAPH_NODE_TYPE_KERNEL)
                continue;
            m.args[i][b] ^= 0x80;
            expect_change(&m, (int)i, "argument byte");
        }
}

Test(graph_pack, every_edge_change_is_seen)
{
    /* Each edge redirected in turn (the count stays), dropped, and one
     * added. */
    for (unsigned e = 0; e < 4; e++) {
        struct spec m = base();
        m.edge[e][0] = m.edge[e][0] == 0 ? 1 : 0;
        if (m.edge[e][0] == m.edge[e][1])
            m.edge[e][0] = 2;
        expect_change(&m, -1, "edge redirected");
        m = base();
        m.edge[e][0] = m.edge[3][0];
        m.edge[e][1] = m.edge[3][1];
        m.ne = 3;
        expect_change(&m, -1, "edge dropped");
    }
    struct spec m = base();
    m.edge[4][0] = 1;
    m.edge[4][1] = 3;
    m.ne = 5;
    expect_change(&m, -1, "edge added");
}

/* The exec side: what the driver holds is ns's, not cur's. */
Test(graph_pack, the_exec_nodes_are_the_truth)
{
    struct spec b = base();
    struct vr_grec *cur = record(&b), *upd = record(&b);
    struct exec_view x;
    exec_view(&x, &b);
    /* A program's SetParams changed an argument: the update puts it back. */
    x.shadows[16 + 3] ^= 1;
    cr_assert_not(vr_gr_packed_same(cur, upd, &x.ns));
    uint32_t changed[NN];
    size_t n = 0;
    cr_assert_null(vr_grec_diff(cur, upd, &x.ns, changed, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(changed[0], 1);
    x.shadows[16 + 3] ^= 1;
    /* ... or a node's launch shape: the packed form cannot say it. */
    x.ns.fields_moved = true;
    x.v[2].f.dims[0] += 1;
    cr_assert_not(vr_gr_packed_same(cur, upd, &x.ns));
    cr_assert_str_eq(vr_grec_diff(cur, upd, &x.ns, changed, &n), "kernel_fields");
    /* An opaque node has no intended bytes in the arena. */
    exec_view(&x, &b);
    x.ns.nopaque = 1;
    cr_assert_not(vr_gr_packed_same(cur, upd, &x.ns));
    vr_grec_free(cur);
    vr_grec_free(upd);
}

/* What the packed form does not describe leaves the record loose. */
Test(graph_pack, what_it_cannot_describe_goes_loose)
{
    struct spec b = base();
    struct exec_view x;
    exec_view(&x, &b);
    /* A node set again (a setter): its old bytes stay in the arena. */
    struct vr_grec *r = record(&b);
    vr_gr_lock();
    void *kp[2] = {(void *)b.args[0], (void *)(b.args[0] + 8)};
    vr_gr_set_args(r, &r->v[0], x.v[0].layout, kp);
    vr_gr_unlock();
    cr_assert(r->loose);
    vr_grec_free(r);
    /* A memset node, launch attributes, an opaque kernel. */
    vr_gr_lock();
    r = vr_gr_new();
    vr_gr_add_node(r, CU_GRAPH_NODE_TYPE_MEMSET, NULL);
    cr_assert(r->loose);
    vr_grec_free(r);
    r = vr_gr_new();
    uint32_t k = vr_gr_add_node(r, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    r->v[k].f.func = F;
    vr_gr_set_args(r, &r->v[k], x.v[0].layout, kp);
    cr_assert_not(r->loose);
    CUlaunchAttribute a = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY};
    vr_gr_set_attrs(r, &r->v[k], &a, 1);
    cr_assert(r->loose);
    vr_grec_free(r);
    r = vr_gr_new();
    k = vr_gr_add_node(r, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    vr_gr_set_args(r, &r->v[k], NULL, NULL);
    cr_assert(r->loose);
    vr_grec_free(r);
    vr_gr_unlock();
}

/* Shape ids are one table's: a captured record and one made node by node
 * of the same graph compare equal packed, also where a function comes
 * back in another launch shape (the capture's hint misses) and in the
 * first one again. */
static const unsigned cap_d[2][7] = {{1, 1, 1, 64, 1, 1, 0}, {2, 1, 1, 64, 1, 1, 0}};
static CUfunction cap_fn(unsigned i)
{
    return i == 1 ? G : F;
}
static const unsigned *cap_dims(unsigned i)
{
    return cap_d[i == 2];
}

Test(graph_pack, a_capture_and_an_explicit_graph_share_ids)
{
    enum { C = 5 };
    CUstream s = (CUstream)(void *)0x10;
    uint8_t args[C][16];
    vr_grec_capture_begin(s, false);
    for (unsigned i = 0; i < C; i++) {
        memset(args[i], (int)i + 1, 16);
        void *kp[2] = {args[i], args[i] + 8};
        vr_grec_launch(s, false, CUDA_SUCCESS, cap_fn(i), cap_dims(i), kp, NULL, false);
    }
    /* The capture's record as it stands (ending it would ask the driver). */
    vr_gr_lock();
    struct dep_ent *se = vr_gr_stream_find(s);
    cr_assert_not_null(se);
    cr_assert_not_null(se->cap);
    struct vr_grec *cap = vr_gr_copy(se->cap->r);
    vr_gr_unlock();
    cr_assert_not_null(cap);
    vr_gr_sort_edges(cap);
    vr_gr_lock();
    struct vr_grec *ex = vr_gr_new();
    for (unsigned i = 0; i < C; i++) {
        uint32_t k = vr_gr_add_node(ex, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
        const struct vr_layout *l;
        cr_assert_eq(vr_layout_get(cap_fn(i), NULL, &l), 0);
        ex->v[k].f.func = cap_fn(i);
        memcpy(ex->v[k].f.dims, cap_dims(i), sizeof cap_d[0]);
        void *kp[2] = {args[i], args[i] + 8};
        vr_gr_set_args(ex, &ex->v[k], l, kp);
        if (i)
            vr_gr_add_edge(ex, i - 1, i);
    }
    vr_gr_sort_edges(ex);
    vr_gr_unlock();
    cr_assert_not(cap->loose);
    cr_assert_eq(cap->nsid, C);
    cr_assert_eq(memcmp(cap->sid, ex->sid, C * sizeof *cap->sid), 0);
    cr_assert_eq(cap->sid[0], cap->sid[3]);
    cr_assert_neq(cap->sid[0], cap->sid[2]);
    cr_assert_neq(cap->sid[0], cap->sid[1]);
    struct exec_view x;
    memset(&x, 0, sizeof x);
    static struct vr_node v[C];
    static uint8_t shadows[C * 16];
    for (unsigned i = 0; i < C; i++) {
        cr_assert_eq(vr_layout_get(cap_fn(i), NULL, &v[i].layout), 0);
        v[i].f.func = cap_fn(i);
        memcpy(v[i].f.dims, cap_dims(i), sizeof cap_d[0]);
        v[i].intended = shadows + 16 * i;
        memcpy(v[i].intended, args[i], 16);
    }
    x.ns.v = v;
    x.ns.n = C;
    x.ns.shadows = shadows;
    x.ns.half = sizeof shadows;
    cr_assert(vr_gr_packed_same(ex, cap, &x.ns));
    cr_assert(vr_gr_packed_same(cap, ex, &x.ns));
    vr_grec_capture_end(s, false, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, NULL);
    vr_grec_free(cap);
    vr_grec_free(ex);
}
