#include "node.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "err.h"
#include "extra.h"

/* gridDimX .. sharedMemBytes are seven consecutive unsigned ints in every
 * kernel-node params struct version. */
#define VR_DIMS_BYTES (7 * sizeof(unsigned))

bool vr_same_fields(const struct vr_fields *a, const struct vr_fields *b)
{
    return vr_same_function(a, b) && a->ctx == b->ctx && memcmp(a->dims, b->dims, VR_DIMS_BYTES) == 0;
}

bool vr_call_decode(enum vr_sp_entry entry, const void *params, struct vr_call *c)
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
    const CUDA_KERNEL_NODE_PARAMS_v2 *p = vr_call_v2(entry, params);
    if (!p)
        return false;
    c->f.func = p->func;
    c->f.kern = p->func ? NULL : p->kern;
    c->f.ctx = p->func ? NULL : p->ctx;
    memcpy(c->f.dims, &p->gridDimX, VR_DIMS_BYTES);
    c->kernelParams = p->kernelParams;
    c->extra = p->extra;
    return true;
}

CUresult vr_forward_raw(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                        const void *params)
{
    switch (entry) {
    case VR_SP_V1: return vr_real.cuGraphExecKernelNodeSetParams(exec, node, params);
    case VR_SP_V2: return vr_real.cuGraphExecKernelNodeSetParams_v2(exec, node, params);
    default: return vr_real.cuGraphExecNodeSetParams(exec, node, (CUgraphNodeParams *)params);
    }
}

CUresult vr_forward_args(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
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

CUresult vr_node_issue(CUgraphExec exec, const struct vr_node *n, uint8_t *args, void **kp)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p = {0};
    p.func = n->f.func;
    p.kern = n->f.kern;
    p.ctx = n->f.ctx;
    memcpy(&p.gridDimX, n->f.dims, VR_DIMS_BYTES);
    vr_layout_point(n->layout, args, kp);
    p.kernelParams = kp;
    return vr_real.cuGraphExecKernelNodeSetParams_v2(exec, n->handle, &p);
}

void vr_node_make_opaque(struct vr_nodes *ns, struct vr_node *n)
{
    if (!n->layout)
        return;
    n->layout = NULL;
    ns->nopaque++;
}

void vr_nodes_forget(struct vr_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        ns->v[i].f.dims[0] = 0; /* the driver refuses gridDimX 0: never a program's */
    ns->fields_moved = true;
}

void vr_nodes_free(struct vr_nodes *ns)
{
    free(ns->v);
    free(ns->shadows);
    free(ns->hidx);
    memset(ns, 0, sizeof *ns);
}

/* The kernel nodes of graph, in the driver's order. */
static int kernel_nodes(CUgraph graph, CUgraphNode **out, size_t *count)
{
    size_t total = 0;
    CUresult r = vr_real.cuGraphGetNodes(graph, NULL, &total);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    CUgraphNode *all = calloc(total ? total : 1, sizeof *all);
    if (!all)
        return -ENOMEM;
    r = vr_real.cuGraphGetNodes(graph, all, &total);
    if (r != CUDA_SUCCESS) {
        free(all);
        return vr_err_cu(r);
    }
    size_t k = 0;
    for (size_t i = 0; i < total; i++) {
        CUgraphNodeType type;
        if (vr_real.cuGraphNodeGetType(all[i], &type) == CUDA_SUCCESS &&
            type == CU_GRAPH_NODE_TYPE_KERNEL)
            all[k++] = all[i];
    }
    *out = all;
    *count = k;
    return 0;
}

/* Loads node n's fields from the graph node g and packs its arguments at
 * *used in *buf (grown as needed; n->intended holds the offset until
 * place() turns it into a pointer). A node whose arguments cannot be read
 * ends opaque. Arguments passed through `extra` are read from its buffer
 * (extra.h). */
static void load(struct vr_node *n, CUgraphNode g, uint8_t **buf, size_t *cap, size_t *used)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p = {0};
    const struct vr_layout *l = NULL;
    n->intended = NULL;
    n->layout = NULL;
    if (vr_real.cuGraphKernelNodeGetParams_v2(g, &p) != CUDA_SUCCESS)
        return;
    n->f.func = p.func;
    n->f.kern = p.func ? NULL : p.kern;
    n->f.ctx = p.func ? NULL : p.ctx;
    memcpy(n->f.dims, &p.gridDimX, VR_DIMS_BYTES);
    struct vr_extra x = {0};
    if (vr_layout_get(p.func, p.kern, &l) != 0)
        return;
    if (p.extra ? p.kernelParams || !vr_extra_read(p.extra, l, &x)
                : l->nparams && !p.kernelParams)
        return;
    size_t bytes = ((size_t)l->bytes + 7) & ~(size_t)7; /* words stay 8-byte aligned */
    if (*used + bytes > *cap) {
        size_t want = *cap ? *cap : 4096;
        while (want < *used + bytes)
            want *= 2;
        uint8_t *grown = realloc(*buf, want);
        if (!grown)
            return;
        *buf = grown;
        *cap = want;
    }
    memset(*buf + *used, 0, bytes); /* padding between arguments compares equal */
    if (p.extra)
        vr_extra_pack(l, &x, *buf + *used);
    else
        vr_layout_pack(l, p.kernelParams, *buf + *used);
    n->intended = (uint8_t *)(uintptr_t)*used;
    *used += bytes;
    n->layout = l;
}

/* One allocation for every node's two shadows, both as loaded: the
 * intended halves first, then the installed ones. */
static int place(struct vr_nodes *ns, uint8_t *buf, size_t used)
{
    uint8_t *arena = malloc(used ? 2 * used : 1);
    if (!arena)
        return -ENOMEM;
    if (used) {
        memcpy(arena, buf, used);
        memcpy(arena + used, buf, used);
    }
    for (size_t i = 0; i < ns->n; i++) {
        struct vr_node *n = &ns->v[i];
        if (!n->layout)
            continue;
        size_t off = (size_t)(uintptr_t)n->intended;
        n->intended = arena + off;
    }
    free(ns->shadows);
    ns->shadows = arena;
    ns->half = used;
    return 0;
}

/* Loads every node from the graph's nodes `all`; on failure the nodes are
 * opaque and the old shadows kept. */
static int load_all(struct vr_nodes *ns, CUgraphNode *all)
{
    uint8_t *buf = NULL;
    size_t cap = 0, used = 0;
    for (size_t i = 0; i < ns->n; i++)
        load(&ns->v[i], all[i], &buf, &cap, &used);
    int rc = place(ns, buf, used);
    free(buf);
    if (rc != 0)
        for (size_t i = 0; i < ns->n; i++)
            ns->v[i].layout = NULL;
    return rc;
}

/* Word indices and scratch sizes follow the layouts. */
static void index_words(struct vr_nodes *ns)
{
    ns->nwords = 0;
    ns->nopaque = 0;
    ns->max_bytes = 8;
    ns->max_params = 1;
    for (size_t i = 0; i < ns->n; i++) {
        struct vr_node *n = &ns->v[i];
        if (!n->layout) {
            ns->nopaque++;
            continue;
        }
        n->word0 = (uint32_t)ns->nwords;
        ns->nwords += n->layout->nwords;
        if (n->layout->bytes > ns->max_bytes)
            ns->max_bytes = n->layout->bytes;
        if (n->layout->nparams > ns->max_params)
            ns->max_params = n->layout->nparams;
    }
}

int vr_nodes_read(struct vr_nodes *ns, CUgraph graph)
{
    CUgraphNode *all;
    size_t count;
    memset(ns, 0, sizeof *ns);
    int rc = kernel_nodes(graph, &all, &count);
    if (rc != 0)
        return rc;
    if (count >= UINT32_MAX) { /* hidx holds 32-bit indices */
        free(all);
        return -ENOMEM;
    }
    /* Load factor at most 3/4: the hash is only the fallback of the
     * learned order (vr_nodes_next), so it is kept small. */
    size_t hcap = 16;
    while (hcap * 3 < count * 4)
        hcap *= 2;
    ns->v = calloc(count ? count : 1, sizeof *ns->v);
    ns->hidx = malloc(hcap * sizeof *ns->hidx);
    ns->hmask = hcap - 1;
    if (!ns->v || !ns->hidx) {
        free(all);
        vr_nodes_free(ns);
        return -ENOMEM;
    }
    memset(ns->hidx, 0xff, hcap * sizeof *ns->hidx);
    ns->n = count;
    for (size_t i = 0; i < count; i++) {
        struct vr_node *n = &ns->v[i];
        n->handle = all[i];
        n->next = &ns->v[0];
        size_t h = vr_node_hash(n->handle, ns->hmask);
        while (ns->hidx[h] != UINT32_MAX)
            h = (h + 1) & ns->hmask;
        ns->hidx[h] = (uint32_t)i;
    }
    if (count == 0) {
        ns->v[0].handle = (CUgraphNode)(void *)ns; /* never a node of the program's */
        ns->v[0].next = &ns->v[0];
    }
    ns->cur = &ns->v[0];
    rc = load_all(ns, all);
    free(all);
    if (rc != 0) {
        vr_nodes_free(ns);
        return rc;
    }
    index_words(ns);
    return 0;
}

int vr_nodes_refresh(struct vr_nodes *ns, CUgraph graph)
{
    CUgraphNode *all;
    size_t count;
    int rc = kernel_nodes(graph, &all, &count);
    if (rc != 0)
        return rc;
    if (count != ns->n) {
        free(all);
        return -EINVAL;
    }
    /* Our handles stay: only what they hold changes. */
    rc = load_all(ns, all);
    free(all);
    index_words(ns);
    ns->fields_moved = false; /* what the update graph says (or opaque) */
    return rc;
}
