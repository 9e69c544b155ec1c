/* The graph recorder (graph_rec.h): what capture and the explicit API
 * record, and how an update graph compares with an exec's. The driver is
 * a fake: layouts of two pointer arguments, and a node count per graph. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "graph_rec.h"
#include "layout.h"
#include "node.h"
#include "stats.h"

static size_t driver_count; /* what cuGraphGetNodes reports for every graph */

/* Layouts with padding (the recorder zeroes it, so records compare whole):
 * G int, pointer (the int's word widened); H int, 16-byte struct at 16 (the
 * words zeroed); J three ints (the rounding past the end zeroed). */
#define G ((CUfunction)(void *)0x2000)
#define H ((CUfunction)(void *)0x3000)
#define J ((CUfunction)(void *)0x4000)
static const size_t g_off[] = {0, 8}, g_size[] = {4, 8};
static const size_t h_off[] = {0, 16}, h_size[] = {4, 16};
static const size_t j_off[] = {0, 4, 8}, j_size[] = {4, 4, 4};

static CUresult CUDAAPI fake_param_info(CUfunction f, size_t i, size_t *off, size_t *size)
{
    const size_t *o = f == G ? g_off : f == H ? h_off : f == J ? j_off : NULL;
    const size_t *z = f == G ? g_size : f == H ? h_size : f == J ? j_size : NULL;
    if (o) {
        if (i >= (f == J ? 3u : 2u))
            return CUDA_ERROR_INVALID_VALUE;
        *off = o[i];
        *size = z[i];
        return CUDA_SUCCESS;
    }
    if (i >= 2)
        return CUDA_ERROR_INVALID_VALUE;
    *off = i * 8;
    *size = 8;
    return CUDA_SUCCESS;
}

/* The driver lists driver_count nodes (handles 1..n) of the types in
 * driver_types (0: kernel), as cuGraphGetNodes and cuGraphNodeGetType tell
 * them; the recorder checks its records against those. Reading a graph's
 * kernels and edges through the getters fails, so a record vr_grec_take
 * does not trust comes back unusable (see trusted). */
static CUgraphNodeType driver_types[64];

static CUresult CUDAAPI fake_get_nodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
    (void)g;
    if (nodes)
        for (size_t i = 0; i < *n && i < driver_count; i++)
            nodes[i] = (CUgraphNode)(uintptr_t)(i + 1);
    *n = driver_count;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_node_type(CUgraphNode node, CUgraphNodeType *t)
{
    uintptr_t i = (uintptr_t)node - 1;
    *t = i < 64 ? driver_types[i] : CU_GRAPH_NODE_TYPE_KERNEL;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_kernel_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    (void)node;
    (void)p;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult CUDAAPI fake_deps(CUgraphNode node, CUgraphNode *deps, size_t *n)
{
    (void)node;
    (void)deps;
    (void)n;
    return CUDA_ERROR_INVALID_VALUE;
}

static void fake_driver(void)
{
    vr_real.cuFuncGetParamInfo = fake_param_info;
    vr_real.cuGraphGetNodes = fake_get_nodes;
    vr_real.cuGraphNodeGetType = fake_node_type;
    vr_real.cuGraphKernelNodeGetParams_v2 = fake_kernel_params;
    vr_real.cuGraphNodeGetDependencies = fake_deps;
}

TestSuite(graph_rec, .init = fake_driver);

#define F ((CUfunction)(void *)0x1000)
static const unsigned dims[7] = {1, 1, 1, 64, 1, 1, 0};

static void launch(CUstream s, uint64_t a, uint64_t b)
{
    void *kp[] = {&a, &b};
    vr_grec_launch(s, false, CUDA_SUCCESS, F, dims, kp, NULL, false);
}

/* A capture of `n` kernels on s, argument a0 + i, into graph g. */
static struct vr_grec *chain(CUstream s, CUgraph g, size_t n, uint64_t a0)
{
    vr_grec_capture_begin(s, false);
    cr_assert(vr_grec_capturing());
    for (size_t i = 0; i < n; i++)
        launch(s, a0 + i, 7);
    driver_count = n;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    struct vr_grec *r = vr_grec_take(g);
    cr_assert_not_null(r);
    return r;
}

/* The exec's kernel nodes as the exec layer holds them: r's fields, and
 * intended arguments (a0 + i, 7). */
struct fake_ns {
    struct vr_nodes ns;
    struct vr_node v[8];
    uint8_t bytes[8][16];
};

static void exec_nodes(struct fake_ns *x, size_t n, uint64_t a0)
{
    memset(x, 0, sizeof *x);
    const struct vr_layout *l;
    cr_assert_eq(vr_layout_get(F, NULL, &l), 0);
    for (size_t i = 0; i < n; i++) {
        x->v[i].layout = l;
        x->v[i].f.func = F;
        memcpy(x->v[i].f.dims, dims, sizeof dims);
        uint64_t a = a0 + i, b = 7;
        memcpy(x->bytes[i], &a, 8);
        memcpy(x->bytes[i] + 8, &b, 8);
        x->v[i].intended = x->bytes[i];
    }
    x->ns.v = x->v;
    x->ns.n = n;
    x->ns.max_params = 2;
}

/* Whether vr_grec_take(g) gives the recorder's record (all kernels of F,
 * compared with itself: equal), not the unusable read of the getters. */
static bool trusted(CUgraph g)
{
    struct vr_grec *r = vr_grec_take(g);
    if (!r)
        return false;
    struct fake_ns x;
    exec_nodes(&x, vr_grec_kernels(r) <= 8 ? vr_grec_kernels(r) : 8, 0);
    uint32_t changed[8];
    size_t n;
    bool ok = vr_grec_kernels(r) <= 8 && vr_grec_diff(r, r, &x.ns, changed, &n) == NULL;
    vr_grec_free(r);
    return ok;
}

Test(graph_rec, same_capture_compares_equal)
{
    CUstream s = (CUstream)(void *)0x10;
    struct vr_grec *cur = chain(s, (CUgraph)(void *)0x100, 4, 50);
    struct vr_grec *upd = chain(s, (CUgraph)(void *)0x101, 4, 50);
    cr_assert_not(vr_grec_capturing());
    cr_assert_eq(vr_grec_nodes(upd), 4);
    cr_assert_eq(vr_grec_kernels(upd), 4);
    struct fake_ns x;
    exec_nodes(&x, 4, 50);
    uint32_t changed[8];
    size_t n = 99;
    cr_assert_null(vr_grec_diff(cur, upd, &x.ns, changed, &n));
    cr_assert_eq(n, 0);
    vr_grec_free(cur);
    vr_grec_free(upd);
    vr_grec_destroyed((CUgraph)(void *)0x100);
    vr_grec_destroyed((CUgraph)(void *)0x101);
}

Test(graph_rec, moved_arguments_name_their_nodes)
{
    CUstream s = (CUstream)(void *)0x20;
    struct vr_grec *cur = chain(s, (CUgraph)(void *)0x200, 4, 50);
    struct vr_grec *upd = chain(s, (CUgraph)(void *)0x201, 4, 51); /* nodes 0..2 moved */
    struct fake_ns x;
    exec_nodes(&x, 4, 50);
    uint32_t changed[8];
    size_t n = 0;
    cr_assert_null(vr_grec_diff(cur, upd, &x.ns, changed, &n));
    cr_assert_eq(n, 4);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert_eq(changed[i], i);
    /* The params of a changed node are the update graph's. */
    CUDA_KERNEL_NODE_PARAMS_v2 p;
    void *kp[2];
    vr_grec_kernel_params(upd, 2, &p, kp);
    cr_assert_eq(p.func, F);
    cr_assert_eq(p.blockDimX, 64);
    uint64_t a;
    memcpy(&a, p.kernelParams[0], 8);
    cr_assert_eq(a, 53);
    /* The exec's intended shadows are the truth, not cur's bytes. */
    exec_nodes(&x, 4, 51);
    cr_assert_null(vr_grec_diff(cur, upd, &x.ns, changed, &n));
    cr_assert_eq(n, 0);
    vr_grec_free(cur);
    vr_grec_free(upd);
}

Test(graph_rec, an_event_join_is_an_edge)
{
    CUstream s = (CUstream)(void *)0x30, s2 = (CUstream)(void *)0x31;
    CUevent ev = (CUevent)(void *)0x32, ev2 = (CUevent)(void *)0x33;
    CUgraph g = (CUgraph)(void *)0x300;
    vr_grec_capture_begin(s, false);
    launch(s, 1, 7);                  /* A */
    vr_grec_event_record(ev, s, false);
    vr_grec_stream_wait(s2, false, ev);
    launch(s2, 2, 7);                 /* B: after A, on s2 */
    vr_grec_event_record(ev2, s2, false);
    launch(s, 3, 7);                  /* C: after A only */
    vr_grec_stream_wait(s, false, ev2);
    launch(s, 4, 7);                  /* D: after C and B */
    driver_count = 4;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    struct vr_grec *joined = vr_grec_take(g);
    cr_assert_not_null(joined);
    struct vr_grec *plain = chain(s, (CUgraph)(void *)0x301, 4, 1);
    struct fake_ns x;
    exec_nodes(&x, 4, 1);
    uint32_t changed[8];
    size_t n;
    cr_assert_str_eq(vr_grec_diff(plain, joined, &x.ns, changed, &n), "topology");
    /* The same join again compares equal. */
    vr_grec_capture_begin(s, false);
    launch(s, 1, 7);
    vr_grec_event_record(ev, s, false);
    vr_grec_stream_wait(s2, false, ev);
    launch(s2, 2, 7);
    vr_grec_event_record(ev2, s2, false);
    launch(s, 3, 7);
    vr_grec_stream_wait(s, false, ev2);
    launch(s, 4, 7);
    vr_grec_capture_end(s, false, CUDA_SUCCESS, (CUgraph)(void *)0x302);
    struct vr_grec *again = vr_grec_take((CUgraph)(void *)0x302);
    cr_assert_not_null(again);
    cr_assert_null(vr_grec_diff(joined, again, &x.ns, changed, &n));
    cr_assert_eq(n, 0);
    vr_grec_free(joined);
    vr_grec_free(plain);
    vr_grec_free(again);
}

Test(graph_rec, nodes_it_never_saw_make_it_untrusted)
{
    CUstream s = (CUstream)(void *)0x40;
    CUgraph g = (CUgraph)(void *)0x400;
    vr_grec_capture_begin(s, false);
    launch(s, 1, 7);
    driver_count = 1;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    driver_count = 2; /* an unhooked call added a node */
    cr_assert_not(trusted(g), "a record that misses a node was trusted");
    driver_count = 1;
    cr_assert(trusted(g));
    /* Unmodelled changes of the capture's dependencies. */
    vr_grec_capture_begin(s, false);
    launch(s, 1, 7);
    vr_grec_capture_unknown(s, false);
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    cr_assert_not(trusted(g));
    /* A failed launch into the capture. */
    vr_grec_capture_begin(s, false);
    void *kp[] = {&driver_count, &driver_count};
    vr_grec_launch(s, false, CUDA_ERROR_INVALID_VALUE, F, dims, kp, NULL, false);
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    driver_count = 1;
    cr_assert_not(trusted(g));
    vr_grec_destroyed(g);
}

Test(graph_rec, explicit_graphs_and_their_edges)
{
    CUgraph g = (CUgraph)(void *)0x500, h = (CUgraph)(void *)0x501;
    CUgraphNode a = (CUgraphNode)(void *)0x510, b = (CUgraphNode)(void *)0x511;
    CUgraphNode c = (CUgraphNode)(void *)0x520, d = (CUgraphNode)(void *)0x521;
    struct vr_fields f = {.func = F};
    memcpy(f.dims, dims, sizeof dims);
    uint64_t x0 = 1, y = 7, x1 = 2;
    void *k0[] = {&x0, &y}, *k1[] = {&x1, &y};
    vr_grec_created(g);
    vr_grec_add_kernel(g, a, NULL, 0, &f, k0, NULL);
    vr_grec_add_kernel(g, b, &a, 1, &f, k1, NULL);
    vr_grec_created(h);
    vr_grec_add_kernel(h, c, NULL, 0, &f, k0, NULL);
    vr_grec_add_kernel(h, d, NULL, 0, &f, k1, NULL);
    driver_count = 2;
    struct fake_ns x;
    exec_nodes(&x, 2, 1);
    uint32_t changed[8];
    size_t n;
    struct vr_grec *rg = vr_grec_take(g), *rh = vr_grec_take(h);
    cr_assert_str_eq(vr_grec_diff(rg, rh, &x.ns, changed, &n), "topology");
    vr_grec_free(rh);
    vr_grec_edges(h, &c, &d, 1, true);
    rh = vr_grec_take(h);
    cr_assert_null(vr_grec_diff(rg, rh, &x.ns, changed, &n));
    vr_grec_free(rh);
    /* A setter moves node d's argument; removing the edge changes the
     * topology again. */
    uint64_t x2 = 9;
    void *k2[] = {&x2, &y};
    vr_grec_set_kernel(d, &f, k2, NULL);
    rh = vr_grec_take(h);
    cr_assert_null(vr_grec_diff(rg, rh, &x.ns, changed, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(changed[0], 1);
    vr_grec_free(rh);
    vr_grec_edges(h, &c, &d, 1, false);
    rh = vr_grec_take(h);
    cr_assert_str_eq(vr_grec_diff(rg, rh, &x.ns, changed, &n), "topology");
    vr_grec_free(rh);
    /* Another function is not an argument change. */
    struct vr_fields f2 = f;
    f2.dims[3] = 128;
    vr_grec_set_kernel(a, &f2, k0, NULL);
    struct vr_grec *rg2 = vr_grec_take(g);
    cr_assert_str_eq(vr_grec_diff(rg, rg2, &x.ns, changed, &n), "kernel_fields");
    vr_grec_free(rg2);
    vr_grec_mark_unknown(NULL, b);
    cr_assert_not(trusted(g));
    vr_grec_free(rg);
    vr_grec_destroyed(g);
    vr_grec_destroyed(h);
}

/* The padding of a captured kernel's arguments is zero, whatever the
 * record's recycled buffer held before: a capture of all-ones arguments
 * (two pointers, 16 bytes a node) leaves its record to the next capture,
 * whose kernels (the second and third of each function take the fast
 * path) have gaps where those ones were. */
static void padding_zero(CUfunction f, uint32_t bytes, const uint32_t *pad, size_t npad,
                         CUgraph g1, CUgraph g2)
{
    CUstream s = (CUstream)(void *)0x70;
    vr_grec_capture_begin(s, false);
    for (int i = 0; i < 8; i++)
        launch(s, ~(uint64_t)0, ~(uint64_t)0);
    driver_count = 8;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g1);
    vr_grec_destroyed(g1); /* its record becomes the next one's */
    uint8_t arg[16];
    memset(arg, 0x5a, sizeof arg);
    void *kp[3] = {arg, arg, arg};
    vr_grec_capture_begin(s, false);
    for (int i = 0; i < 3; i++)
        vr_grec_launch(s, false, CUDA_SUCCESS, f, dims, kp, NULL, false);
    driver_count = 3;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g2);
    struct vr_grec *r = vr_grec_take(g2);
    cr_assert_not_null(r);
    for (size_t k = 0; k < 3; k++) {
        CUDA_KERNEL_NODE_PARAMS_v2 p;
        void *out[3];
        vr_grec_kernel_params(r, k, &p, out);
        const uint8_t *base = p.kernelParams[0];
        for (size_t b = 0; b < npad; b++)
            cr_assert_eq(base[pad[b]], 0, "node %zu, byte %u of %u", k, pad[b], bytes);
        cr_assert_eq(base[0], 0x5a);
    }
    vr_grec_free(r);
    vr_grec_destroyed(g2);
}

Test(graph_rec, captured_padding_is_zero)
{
    static const uint32_t g_pad[] = {4, 5, 6, 7};
    static const uint32_t h_pad[] = {4, 7, 8, 15};
    static const uint32_t j_pad[] = {12, 15};
    padding_zero(G, 16, g_pad, 4, (CUgraph)(void *)0x700, (CUgraph)(void *)0x701);
    padding_zero(H, 32, h_pad, 4, (CUgraph)(void *)0x702, (CUgraph)(void *)0x703);
    padding_zero(J, 12, j_pad, 2, (CUgraph)(void *)0x704, (CUgraph)(void *)0x705);
}

/* A step's kernels take turns among a few functions: each function's layout
 * is looked up once per capture, not at every change of function (the
 * capture's layout cache), and every node still gets its own function and
 * arguments. */
Test(graph_rec, alternating_functions_look_each_layout_up_once)
{
    static const CUfunction fs[] = {F, G, H, J};
    CUstream s = (CUstream)(void *)0x80;
    CUgraph g = (CUgraph)(void *)0x800;
    uint64_t before = vr_grec_layout_lookups();
    vr_grec_capture_begin(s, false);
    for (uint32_t i = 0; i < 40; i++) {
        uint8_t arg[3][16];
        for (int a = 0; a < 3; a++)
            memset(arg[a], (int)(i + 1), sizeof arg[a]);
        void *kp[3] = {arg[0], arg[1], arg[2]};
        vr_grec_launch(s, false, CUDA_SUCCESS, fs[i % 4], dims, kp, NULL, false);
    }
    driver_count = 40;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    cr_assert_eq(vr_grec_layout_lookups() - before, 4, "layout lookups: %llu",
                 (unsigned long long)(vr_grec_layout_lookups() - before));
    struct vr_grec *r = vr_grec_take(g);
    cr_assert_not_null(r);
    cr_assert_eq(vr_grec_kernels(r), 40);
    for (uint32_t k = 0; k < 40; k++) {
        CUDA_KERNEL_NODE_PARAMS_v2 p;
        void *out[3];
        vr_grec_kernel_params(r, k, &p, out);
        cr_assert_eq(p.func, fs[k % 4], "node %u", k);
        cr_assert_eq(*(const uint8_t *)p.kernelParams[0], (uint8_t)(k + 1), "node %u", k);
    }
    vr_grec_free(r);
    vr_grec_destroyed(g);
}

/* The pure check: the same types in the same order, and as many. */
Test(graph_rec, types_match_node_for_node)
{
    CUstream s = (CUstream)(void *)0x90;
    CUgraph g = (CUgraph)(void *)0x900;
    driver_count = 2;
    struct vr_grec *r = chain(s, g, 2, 1);
    const CUgraphNodeType kk[] = {CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_KERNEL};
    const CUgraphNodeType ke[] = {CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_EVENT_RECORD};
    cr_assert(vr_grec_types_match(r, kk, 2));
    cr_assert_not(vr_grec_types_match(r, kk, 1));
    cr_assert_not(vr_grec_types_match(r, ke, 2));
    cr_assert_not(vr_grec_types_match(NULL, kk, 0));
    vr_grec_free(r);
    vr_grec_destroyed(g);
}

/* Issue 30 item 3: a node recorded that the driver did not add (a memset
 * of zero bytes, say) and a node the driver added where the recorder did
 * not look (an event record node) leave the counts equal; the types, in
 * order, tell them apart at capture end, and the record is stale for good. */
Test(graph_rec, miscounts_that_cancel_make_it_stale)
{
    CUstream s = (CUstream)(void *)0xa0;
    CUgraph g = (CUgraph)(void *)0xa00;
    CUDA_MEMSET_NODE_PARAMS p = {.dst = 0x1000, .elementSize = 1, .width = 4, .height = 1};
    vr_grec_capture_begin(s, false);
    vr_grec_capture_plain(s, false, CUDA_SUCCESS, CU_GRAPH_NODE_TYPE_MEMSET, &p, sizeof p,
                          (CUcontext)(void *)0x1);
    launch(s, 1, 7);
    driver_count = 2;
    driver_types[0] = CU_GRAPH_NODE_TYPE_KERNEL;
    driver_types[1] = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    driver_types[1] = CU_GRAPH_NODE_TYPE_KERNEL; /* later answers do not bring it back */
    cr_assert_not(trusted(g), "a record whose types differ from the driver's was trusted");
    /* The same capture where the driver's types agree is trusted. */
    vr_grec_capture_begin(s, false);
    vr_grec_capture_plain(s, false, CUDA_SUCCESS, CU_GRAPH_NODE_TYPE_MEMSET, &p, sizeof p,
                          (CUcontext)(void *)0x1);
    launch(s, 1, 7);
    driver_types[0] = CU_GRAPH_NODE_TYPE_MEMSET;
    driver_types[1] = CU_GRAPH_NODE_TYPE_KERNEL;
    vr_grec_capture_end(s, false, CUDA_SUCCESS, g);
    struct vr_grec *r = vr_grec_take(g);
    cr_assert_not_null(r);
    struct fake_ns x;
    exec_nodes(&x, 1, 1);
    uint32_t changed[8];
    size_t n;
    cr_assert_null(vr_grec_diff(r, r, &x.ns, changed, &n));
    vr_grec_free(r);
    memset(driver_types, 0, sizeof driver_types);
    vr_grec_destroyed(g);
}

/* While no entry point escaped the shim, a graph recorded from its
 * cuGraphCreate on was seen entirely: no per-node type query at its use
 * (the fake driver's differing type is never asked). */
Test(graph_rec, explicit_graph_seen_from_birth_is_not_asked)
{
    CUgraph g = (CUgraph)(void *)0xb20;
    CUgraphNode a = (CUgraphNode)(void *)0xb30, b = (CUgraphNode)(void *)0xb31;
    struct vr_fields f = {.func = F};
    memcpy(f.dims, dims, sizeof dims);
    uint64_t x0 = 1, y = 7;
    void *k0[] = {&x0, &y};
    cr_assert_eq(vr_stat_get(VR_C_unrouted_procs), 0);
    vr_grec_created(g);
    vr_grec_add_kernel(g, a, NULL, 0, &f, k0, NULL);
    vr_grec_add_kernel(g, b, NULL, 0, &f, k0, NULL);
    driver_count = 2;
    driver_types[1] = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    cr_assert(trusted(g));
    memset(driver_types, 0, sizeof driver_types);
    vr_grec_destroyed(g);
}

/* A graph built node by node, once an entry point escaped the shim
 * (unrouted_procs), is checked once, at its first use: a node the driver
 * holds in place of one recorded makes it stale. */
Test(graph_rec, explicit_graph_checked_once)
{
    vr_stat_inc(VR_C_unrouted_procs);
    CUgraph g = (CUgraph)(void *)0xb00;
    CUgraphNode a = (CUgraphNode)(void *)0xb10, b = (CUgraphNode)(void *)0xb11;
    struct vr_fields f = {.func = F};
    memcpy(f.dims, dims, sizeof dims);
    uint64_t x0 = 1, y = 7;
    void *k0[] = {&x0, &y};
    vr_grec_created(g);
    vr_grec_add_kernel(g, a, NULL, 0, &f, k0, NULL);
    vr_grec_add_kernel(g, b, NULL, 0, &f, k0, NULL);
    driver_count = 2;
    driver_types[1] = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    cr_assert_not(trusted(g));
    driver_types[1] = CU_GRAPH_NODE_TYPE_KERNEL;
    cr_assert_not(trusted(g), "a stale record came back");
    vr_grec_destroyed(g);
    /* Matching: trusted, and the check is not repeated (the driver's later
     * answers are not asked; the count still is). */
    vr_grec_created(g);
    vr_grec_add_kernel(g, a, NULL, 0, &f, k0, NULL);
    vr_grec_add_kernel(g, b, NULL, 0, &f, k0, NULL);
    cr_assert(trusted(g));
    driver_types[1] = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    cr_assert(trusted(g));
    memset(driver_types, 0, sizeof driver_types);
    vr_grec_destroyed(g);
}
