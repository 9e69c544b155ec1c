/*
 * simcuda graph nodes that are neither kernels nor empty: memcpy (one
 * dimension), memset, host, event record and event wait. Their parameters
 * are checked here as cuda.h documents, once for every way they reach a
 * node (cuGraphAdd*Node, cuGraphExec*SetParams, cuGraphExecNodeSetParams).
 */
#include "sim.h"

#include <string.h>

static CUresult need_ctx(CUcontext h, struct sim_ctx **out)
{
    struct sim_ctx *c = (struct sim_ctx *)h;
    if (!h || !sim_reg_has(h, SIM_T_CTX) || !atomic_load(&c->alive))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

/* One side of a copy: its address, or 0 when simcuda does not model it
 * (arrays). Device memory must be valid for n bytes. */
static uintptr_t side(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t n,
                      bool write, CUresult *r)
{
    *r = CUDA_SUCCESS;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        if (!host)
            *r = CUDA_ERROR_INVALID_VALUE;
        return (uintptr_t)host + x;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        if (!dev || !sim_mem_valid((uintptr_t)dev + x, n, write))
            *r = CUDA_ERROR_INVALID_VALUE;
        return (uintptr_t)dev + x;
    case CU_MEMORYTYPE_ARRAY:
        *r = CUDA_ERROR_NOT_SUPPORTED;
        return 0;
    default:
        *r = CUDA_ERROR_INVALID_VALUE;
        return 0;
    }
}

CUresult sim_onode_memcpy(struct sim_onode *o, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    struct sim_ctx *c;
    CUresult r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = need_ctx(ctx, &c)) != CUDA_SUCCESS)
        return r;
    /* Zero-length copies are not supported (cuda.h); simcuda models the
     * one-dimensional ones only. */
    if (p->WidthInBytes == 0 || p->Height == 0 || p->Depth == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->Height != 1 || p->Depth != 1 || p->srcY || p->srcZ || p->dstY || p->dstZ)
        return CUDA_ERROR_NOT_SUPPORTED;
    uintptr_t s = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes,
                       p->WidthInBytes, false, &r);
    if (r)
        return r;
    uintptr_t d = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes,
                       p->WidthInBytes, true, &r);
    if (r)
        return r;
    if (s < d + p->WidthInBytes && d < s + p->WidthInBytes)
        return CUDA_ERROR_INVALID_VALUE; /* overlapping ranges */
    *o = (struct sim_onode){ .type = CU_GRAPH_NODE_TYPE_MEMCPY, .ctx = c, .cp = *p };
    return CUDA_SUCCESS;
}

CUresult sim_onode_memset(struct sim_onode *o, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    struct sim_ctx *c;
    CUresult r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = need_ctx(ctx, &c)) != CUDA_SUCCESS)
        return r;
    unsigned es = p->elementSize;
    if ((es != 1 && es != 2 && es != 4) || p->width == 0 || p->height == 0 || !p->dst ||
        p->dst % es)
        return CUDA_ERROR_INVALID_VALUE;
    size_t row = p->width * es;
    if (row / es != p->width || (p->height > 1 && (p->pitch < row || p->pitch % es)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t span = (p->height - 1) * (p->height > 1 ? p->pitch : 0) + row;
    if (!sim_mem_valid((uintptr_t)p->dst, span, true))
        return CUDA_ERROR_INVALID_VALUE;
    *o = (struct sim_onode){ .type = CU_GRAPH_NODE_TYPE_MEMSET, .ctx = c, .ms = *p };
    /* Only the bytes of one element are meaningful. */
    if (es < 4)
        o->ms.value &= es == 1 ? 0xffu : 0xffffu;
    return CUDA_SUCCESS;
}

CUresult sim_onode_host(struct sim_onode *o, const CUDA_HOST_NODE_PARAMS *p)
{
    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    *o = (struct sim_onode){ .type = CU_GRAPH_NODE_TYPE_HOST, .host = *p };
    return CUDA_SUCCESS;
}

CUresult sim_onode_event(struct sim_onode *o, CUgraphNodeType type, CUevent e)
{
    struct sim_event *ev = sim_event_ref(e);
    if (!ev)
        return CUDA_ERROR_INVALID_VALUE;
    *o = (struct sim_onode){ .type = type, .ev = ev };
    return CUDA_SUCCESS;
}

CUresult sim_onode_generic(struct sim_onode *o, const CUgraphNodeParams *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (p->memcpy.flags || p->memcpy.reserved)
            return CUDA_ERROR_INVALID_VALUE; /* must be zero */
        return sim_onode_memcpy(o, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m = {p->memset.dst,   p->memset.pitch, p->memset.value,
                                     p->memset.elementSize, p->memset.width,
                                     p->memset.height};
        return sim_onode_memset(o, &m, p->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = {p->host.fn, p->host.userData};
        return sim_onode_host(o, &h);
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return sim_onode_event(o, p->type, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return sim_onode_event(o, p->type, p->eventWait.event);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* cuGraphExecMemcpyNodeSetParams: one dimension before and after, and "the
 * memory operands' mappings" unchanged: the same kind of memory on each
 * side. cuGraphExecMemsetNodeSetParams: value and pointer may change; a 2-D
 * memset keeps its shape; a 1-D one keeps its height (one row) and may
 * change width and element size (simcuda has no work resources to run out
 * of: assumption). Both keep the context they were made in. */
CUresult sim_onode_exec_check(const struct sim_onode *from, const struct sim_onode *to)
{
    if (from->type != to->type)
        return CUDA_ERROR_INVALID_VALUE;
    switch (to->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (to->ctx != from->ctx || to->cp.srcMemoryType != from->cp.srcMemoryType ||
            to->cp.dstMemoryType != from->cp.dstMemoryType)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if (to->ctx != from->ctx || to->ms.height != from->ms.height)
            return CUDA_ERROR_INVALID_VALUE;
        if (from->ms.height > 1 &&
            (to->ms.width != from->ms.width || to->ms.elementSize != from->ms.elementSize ||
             to->ms.pitch != from->ms.pitch))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        /* the same allocation (sim_graph_mem.c: an address is fixed at node creation) */
        return to->gm == from->gm ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_SUCCESS; /* host and events: unrestricted */
    }
}

/* A conditional node's copy shares its parameters and bodies; an exec's
 * instantiation of the bodies is its own (condx). */
void sim_onode_copy(struct sim_onode *dst, const struct sim_onode *src)
{
    *dst = *src;
    if (dst->ev)
        sim_event_ref((CUevent)dst->ev);
    if (dst->gm)
        sim_gmem_ref(dst->gm);
    if (dst->cond)
        sim_cond_ref(dst->cond);
    dst->condx = NULL;
}

void sim_onode_clear(struct sim_onode *o)
{
    if (o->ev)
        sim_event_unref(o->ev);
    if (o->gm)
        sim_gmem_unref(o->gm);
    if (o->condx)
        sim_condx_free(o->condx);
    if (o->cond)
        sim_cond_unref(o->cond);
    memset(o, 0, sizeof *o);
}

static void *addr(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x)
{
    return (void *)((type == CU_MEMORYTYPE_HOST ? (uintptr_t)host : (uintptr_t)dev) + x);
}

void sim_onode_work(const struct sim_onode *o, struct sim_work *w)
{
    memset(w, 0, sizeof *w);
    switch (o->type) {
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        w->kind = SIM_OP_COPY;
        w->dst = addr(o->cp.dstMemoryType, o->cp.dstHost, o->cp.dstDevice, o->cp.dstXInBytes);
        w->src = addr(o->cp.srcMemoryType, o->cp.srcHost, o->cp.srcDevice, o->cp.srcXInBytes);
        w->n = o->cp.WidthInBytes;
        w->rows = 1;
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        w->kind = o->ms.elementSize == 1 ? SIM_OP_SET8
                  : o->ms.elementSize == 2 ? SIM_OP_SET16 : SIM_OP_SET32;
        w->dst = (void *)(uintptr_t)o->ms.dst;
        w->n = o->ms.width;
        w->rows = o->ms.height;
        w->pitch = o->ms.pitch;
        w->value = o->ms.value;
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        w->kind = SIM_OP_HOST;
        w->fn = o->host.fn;
        w->arg = o->host.userData;
        break;
    default:
        w->kind = SIM_OP_NOP;
        break;
    }
}
