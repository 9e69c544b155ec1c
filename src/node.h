/* node: the kernel nodes of one exec and their two parameter shadows.
 *
 * For every kernel node of the graph an exec was *instantiated* from, the
 * argument bytes the program last asked for (`intended`) and those the driver
 * holds (`installed`), plus the node's non-argument fields. Nodes are named by
 * the instantiating graph's handles for the exec's whole life (cuda.h: every
 * exec call takes a node of that graph), also after cuGraphExecUpdate, which
 * only refreshes the shadows. A node whose arguments cannot be read (no
 * layout, an `extra` that is not one argument buffer: extra.h) is opaque:
 * always passed through. Not thread-safe: the
 * owning exec's lock serializes every call.
 */
#ifndef VR_NODE_H
#define VR_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cuda.h>

#include "layout.h"

/* The fields of a kernel node other than its arguments. */
struct vr_fields {
    CUfunction func;
    CUkernel kern;
    CUcontext ctx;
    unsigned dims[7]; /* grid x y z, block x y z, shared memory bytes */
};

struct vr_node {
    CUgraphNode handle;
    const struct vr_layout *layout; /* NULL: opaque */
    struct vr_fields f;             /* what the driver holds */
    uint8_t *intended;              /* installed: vr_installed() */
    uint32_t word0;                 /* index of the node's first scanned word */
    struct vr_node *next;           /* the node the program updated after this one, last time
                                     * (v[0] before any): one load finds it */
};

struct vr_nodes {
    struct vr_node *v;
    size_t n, nopaque;
    size_t nwords;                  /* scanned words over all nodes */
    size_t max_bytes, max_params;
    uint8_t *shadows;               /* every node's intended and installed bytes */
    size_t half;                    /* a node's installed bytes follow its intended ones
                                     * at this distance (one pointer less per node) */
    uint32_t *hidx;                 /* handle -> index, open addressing, UINT32_MAX: empty */
    size_t hmask;
    struct vr_node *cur;            /* the node found last (v[0] before any) */
    bool fields_moved;              /* a node's fields changed since the graph was read
                                     * (a SetParams, vr_nodes_forget): the exec's graph
                                     * record no longer says them (graph_rec_pack.c) */
};

/* A SetParams struct as the shim reads it. */
struct vr_call {
    struct vr_fields f;
    void **kernelParams;
    void **extra;
};

enum vr_sp_entry { VR_SP_V1, VR_SP_V2, VR_SP_NODE };

/* Reads every kernel node of graph. Returns 0 or a negative code. */
int vr_nodes_read(struct vr_nodes *ns, CUgraph graph);

/* After a successful cuGraphExecUpdate from `graph`: pairs its kernel nodes
 * with ours by the driver's rule (creation order, identical topology) and
 * makes both shadows what the driver now holds. -EINVAL when the kernel
 * nodes do not pair up (the caller then stops tracking the exec). */
int vr_nodes_refresh(struct vr_nodes *ns, CUgraph graph);

void vr_nodes_free(struct vr_nodes *ns);

/* Every node's shadows may be stale (updates went to the driver unrecorded):
 * each node's launch shape is made one no call has (grid x 0), so its next
 * update fails every compare and goes to the driver whole, which records
 * it again. Nothing may issue a node from its record before that update. */
void vr_nodes_forget(struct vr_nodes *ns);

static inline size_t vr_node_hash(CUgraphNode h, size_t mask)
{
    uintptr_t k = (uintptr_t)h;
    return (size_t)((k >> 4) ^ (k >> 17)) & mask;
}

/* The node of handle h (NULL: none), by its hash; remembers it as the one
 * that follows the node found before it. */
static inline struct vr_node *vr_nodes_find(struct vr_nodes *ns, CUgraphNode h)
{
    if (!ns->hidx || !h)
        return NULL;
    for (size_t i = vr_node_hash(h, ns->hmask);; i = (i + 1) & ns->hmask) {
        uint32_t x = ns->hidx[i];
        if (x == UINT32_MAX)
            return NULL;
        if (ns->v[x].handle == h) {
            if (ns->cur != &ns->v[x]) /* x may have been guessed (vr_nodes_next) already */
                ns->cur->next = &ns->v[x];
            ns->cur = &ns->v[x];
            return ns->cur;
        }
    }
}

/* The node of handle h when it is the one that followed the node found
 * last, last time (programs update nodes in the same order every step);
 * NULL otherwise, then ask vr_nodes_find. Needs ns read successfully (a
 * graph without kernel nodes has one placeholder whose handle no program
 * passes). */
static inline struct vr_node *vr_nodes_next(struct vr_nodes *ns, CUgraphNode h)
{
    struct vr_node *n = ns->cur->next;
    if (n->handle != h)
        return NULL;
    ns->cur = n;
    return n;
}

void vr_node_make_opaque(struct vr_nodes *ns, struct vr_node *n);

/* What the driver holds for a node that has a layout. */
static inline uint8_t *vr_installed(const struct vr_nodes *ns, const struct vr_node *n)
{
    return n->intended + ns->half;
}

/* Reads the program's struct; false when params is NULL or not a kernel. */
bool vr_call_decode(enum vr_sp_entry entry, const void *params, struct vr_call *c);

/* The kernel-node struct viewed as v2 (v1 shares every field read here), or
 * NULL when params is not a kernel node's. */
static inline const CUDA_KERNEL_NODE_PARAMS_v2 *vr_call_v2(enum vr_sp_entry entry, const void *params)
{
    if (entry != VR_SP_NODE)
        return params;
    const CUgraphNodeParams *np = params;
    return np->type == CU_GRAPH_NODE_TYPE_KERNEL
               ? (const CUDA_KERNEL_NODE_PARAMS_v2 *)(const void *)&np->kernel : NULL;
}

/* The same code, so the same argument layout (the driver ignores kern when
 * func is set). The context is a field like the launch shape: a changed one
 * is forwarded, the node stays readable. */
static inline bool vr_same_function(const struct vr_fields *a, const struct vr_fields *b)
{
    return a->func == b->func && (a->func || a->kern == b->kern);
}

bool vr_same_fields(const struct vr_fields *a, const struct vr_fields *b);

/* The one unaligned 8-byte load of the shim (argument words, launch shape). */
static inline uint64_t vr_load_word(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The seven launch-shape words of a params struct (from &gridDimX) against
 * dims: zero when equal; three 8-byte compares and one 4-byte, no call, no
 * branch (the caller folds it into its own test). */
static inline uint64_t vr_dims_diff(const unsigned *p, const unsigned *dims)
{
    return (vr_load_word(p) ^ vr_load_word(dims)) | (vr_load_word(p + 2) ^ vr_load_word(dims + 2)) |
           (vr_load_word(p + 4) ^ vr_load_word(dims + 4)) | (uint64_t)(p[6] ^ dims[6]);
}

/* One 8-byte unit (an argument or a struct's chunk) and one 4-byte argument
 * of kernelParams against their bytes in buf. */
static inline __attribute__((always_inline)) bool vr_unit8_same(const struct vr_arg *a,
                                                                void *const *kp,
                                                                const uint8_t *buf)
{
    return vr_load_word((const uint8_t *)kp[a->index] + a->skew) == vr_load_word(buf + a->offset);
}

static inline __attribute__((always_inline)) bool vr_unit4_same(const struct vr_arg *a,
                                                                void *const *kp,
                                                                const uint8_t *buf)
{
    uint32_t x, y;
    memcpy(&x, kp[a->index], 4);
    memcpy(&y, buf + a->offset, 4);
    return x == y;
}

/* vr_args_same's loop, for layouts with more units than a plan covers:
 * written for few registers (each loop counts a byte offset up to zero
 * from the end of its units, so it keeps no end pointer). */
static inline __attribute__((always_inline)) bool vr_args_same_loop(const struct vr_layout *l,
                                                                    void *const *kp,
                                                                    const uint8_t *buf)
{
    const char *end = (const char *)l->end8;
    for (ptrdiff_t k = (const char *)l->args - end; k; k += (ptrdiff_t)sizeof(struct vr_arg))
        if (!vr_unit8_same((const struct vr_arg *)(const void *)(end + k), kp, buf))
            return false;
    const char *end4 = (const char *)l->end4;
    for (ptrdiff_t k = end - end4; k; k += (ptrdiff_t)sizeof(struct vr_arg))
        if (!vr_unit4_same((const struct vr_arg *)(const void *)(end4 + k), kp, buf))
            return false;
    return true;
}

/* The units of a plan (layout.h) compared in straight-line code: inline
 * with a constant plan, it is that plan's code alone. */
static inline __attribute__((always_inline)) bool vr_plan_same(unsigned plan,
                                                               const struct vr_arg *a,
                                                               void *const *kp,
                                                               const uint8_t *buf)
{
    switch (plan) {
    case VR_PLAN(0, 0):
        return true;
    case VR_PLAN(0, 1):
        return vr_unit4_same(a + 0, kp, buf);
    case VR_PLAN(0, 2):
        return vr_unit4_same(a + 0, kp, buf) &&
               vr_unit4_same(a + 1, kp, buf);
    case VR_PLAN(0, 3):
        return vr_unit4_same(a + 0, kp, buf) &&
               vr_unit4_same(a + 1, kp, buf) &&
               vr_unit4_same(a + 2, kp, buf);
    case VR_PLAN(1, 0):
        return vr_unit8_same(a + 0, kp, buf);
    case VR_PLAN(1, 1):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit4_same(a + 1, kp, buf);
    case VR_PLAN(1, 2):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit4_same(a + 1, kp, buf) &&
               vr_unit4_same(a + 2, kp, buf);
    case VR_PLAN(1, 3):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit4_same(a + 1, kp, buf) &&
               vr_unit4_same(a + 2, kp, buf) &&
               vr_unit4_same(a + 3, kp, buf);
    case VR_PLAN(2, 0):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf);
    case VR_PLAN(2, 1):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit4_same(a + 2, kp, buf);
    case VR_PLAN(2, 2):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit4_same(a + 2, kp, buf) &&
               vr_unit4_same(a + 3, kp, buf);
    case VR_PLAN(2, 3):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit4_same(a + 2, kp, buf) &&
               vr_unit4_same(a + 3, kp, buf) &&
               vr_unit4_same(a + 4, kp, buf);
    case VR_PLAN(3, 0):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf);
    case VR_PLAN(3, 1):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit4_same(a + 3, kp, buf);
    case VR_PLAN(3, 2):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit4_same(a + 3, kp, buf) &&
               vr_unit4_same(a + 4, kp, buf);
    case VR_PLAN(3, 3):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit4_same(a + 3, kp, buf) &&
               vr_unit4_same(a + 4, kp, buf) &&
               vr_unit4_same(a + 5, kp, buf);
    case VR_PLAN(4, 0):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf);
    case VR_PLAN(4, 1):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit4_same(a + 4, kp, buf);
    case VR_PLAN(4, 2):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit4_same(a + 4, kp, buf) &&
               vr_unit4_same(a + 5, kp, buf);
    case VR_PLAN(4, 3):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit4_same(a + 4, kp, buf) &&
               vr_unit4_same(a + 5, kp, buf) &&
               vr_unit4_same(a + 6, kp, buf);
    case VR_PLAN(5, 0):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf);
    case VR_PLAN(5, 1):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit4_same(a + 5, kp, buf);
    case VR_PLAN(5, 2):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit4_same(a + 5, kp, buf) &&
               vr_unit4_same(a + 6, kp, buf);
    case VR_PLAN(5, 3):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit4_same(a + 5, kp, buf) &&
               vr_unit4_same(a + 6, kp, buf) &&
               vr_unit4_same(a + 7, kp, buf);
    case VR_PLAN(6, 0):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit8_same(a + 5, kp, buf);
    case VR_PLAN(6, 1):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit8_same(a + 5, kp, buf) &&
               vr_unit4_same(a + 6, kp, buf);
    case VR_PLAN(6, 2):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit8_same(a + 5, kp, buf) &&
               vr_unit4_same(a + 6, kp, buf) &&
               vr_unit4_same(a + 7, kp, buf);
    case VR_PLAN(6, 3):
        return vr_unit8_same(a + 0, kp, buf) &&
               vr_unit8_same(a + 1, kp, buf) &&
               vr_unit8_same(a + 2, kp, buf) &&
               vr_unit8_same(a + 3, kp, buf) &&
               vr_unit8_same(a + 4, kp, buf) &&
               vr_unit8_same(a + 5, kp, buf) &&
               vr_unit4_same(a + 6, kp, buf) &&
               vr_unit4_same(a + 7, kp, buf) &&
               vr_unit4_same(a + 8, kp, buf);
    default:
        return false;
    }
}

/* Whether kernelParams equals the bytes at buf under layout l, for the
 * absorbed path: vr_layout_equal_fast by the layout's plan, one dispatch
 * and then each unit's three loads and compare, with no loop counter and
 * no end pointer (the plan was laid out once per kernel signature, so a
 * unit costs about 7 instructions instead of 9, and there is no loop
 * set-up). False when l has units under 4 bytes (vr_layout_equal decides
 * those). */
static inline __attribute__((always_inline)) bool vr_args_same(const struct vr_layout *l,
                                                               void *const *kp,
                                                               const uint8_t *buf)
{
    if (l->plan == VR_PLAN_LOOP)
        return vr_args_same_loop(l, kp, buf);
    return vr_plan_same(l->plan, l->args, kp, buf);
}

/* The program's struct through its own entry point. */
CUresult vr_forward_raw(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                        const void *params);
/* The program's struct with only kernelParams replaced. */
CUresult vr_forward_args(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                         const void *params, void **kp);
/* The node's stored fields with the given argument bytes (the shim's own
 * updates); kp is scratch of at least max_params pointers. */
CUresult vr_node_issue(CUgraphExec exec, const struct vr_node *n, uint8_t *args, void **kp);

static inline void vr_store_word(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

#endif
