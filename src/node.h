/* node: the kernel nodes of one exec and their two parameter shadows.
 *
 * For every kernel node of the graph an exec was *instantiated* from, the
 * argument bytes the program last asked for (`intended`) and those the driver
 * holds (`installed`), plus the node's non-argument fields. Nodes are named by
 * the instantiating graph's handles for the exec's whole life (cuda.h: every
 * exec call takes a node of that graph), also after cuGraphExecUpdate, which
 * only refreshes the shadows. A node whose arguments cannot be read (no
 * layout, `extra`) is opaque: always passed through. Not thread-safe: the
 * owning exec's lock serializes every call.
 */
#ifndef VR_NODE_H
#define VR_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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
    uint8_t *intended;
    uint8_t *installed;
    uint32_t word0;                 /* index of the node's first scanned word */
};

struct vr_nodes {
    struct vr_node *v;
    size_t n, nopaque;
    size_t nwords;                  /* scanned words over all nodes */
    size_t max_bytes, max_params;
    CUgraphNode *hkeys;             /* handle -> index, open addressing */
    uint32_t *hvals;
    size_t hmask;
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

static inline struct vr_node *vr_nodes_find(const struct vr_nodes *ns, CUgraphNode h)
{
    if (!ns->hkeys || !h)
        return NULL;
    uintptr_t k = (uintptr_t)h;
    for (size_t i = (size_t)((k >> 4) ^ (k >> 17)) & ns->hmask;; i = (i + 1) & ns->hmask) {
        if (ns->hkeys[i] == h)
            return &ns->v[ns->hvals[i]];
        if (!ns->hkeys[i])
            return NULL;
    }
}

void vr_node_make_opaque(struct vr_nodes *ns, struct vr_node *n);

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

/* The driver ignores kern and ctx when func is set. */
static inline bool vr_same_function(const struct vr_fields *a, const struct vr_fields *b)
{
    return a->func == b->func && (a->func || (a->kern == b->kern && a->ctx == b->ctx));
}

bool vr_same_fields(const struct vr_fields *a, const struct vr_fields *b);

/* The program's struct through its own entry point. */
CUresult vr_forward_raw(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                        const void *params);
/* The program's struct with only kernelParams replaced. */
CUresult vr_forward_args(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                         const void *params, void **kp);
/* The node's stored fields with the given argument bytes (the shim's own
 * updates); kp is scratch of at least max_params pointers. */
CUresult vr_node_issue(CUgraphExec exec, const struct vr_node *n, uint8_t *args, void **kp);

static inline uint64_t vr_load_word(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vr_store_word(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

#endif
