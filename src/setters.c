#include "setters.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

CUresult vr_set_issue(CUgraphExec exec, CUgraphNode node, const struct vr_set *s)
{
    /* An entry point the driver lacks: as the driver would answer a call
     * it does not know. */
#define CALL(fn, args) (vr_real.fn ? vr_real.fn args : CUDA_ERROR_NOT_SUPPORTED)
    switch (s->kind) {
    case VR_SET_MEMCPY:
        return CALL(cuGraphExecMemcpyNodeSetParams, (exec, node, s->params, s->ctx));
    case VR_SET_MEMSET:
        return CALL(cuGraphExecMemsetNodeSetParams, (exec, node, s->params, s->ctx));
    case VR_SET_HOST:
        return CALL(cuGraphExecHostNodeSetParams, (exec, node, s->params));
    case VR_SET_CHILD:
        return CALL(cuGraphExecChildGraphNodeSetParams, (exec, node, s->child));
    case VR_SET_EVENT_RECORD:
        return CALL(cuGraphExecEventRecordNodeSetEvent, (exec, node, s->event));
    case VR_SET_EVENT_WAIT:
        return CALL(cuGraphExecEventWaitNodeSetEvent, (exec, node, s->event));
    case VR_SET_SEM_SIGNAL:
        return CALL(cuGraphExecExternalSemaphoresSignalNodeSetParams, (exec, node, s->params));
    case VR_SET_SEM_WAIT:
        return CALL(cuGraphExecExternalSemaphoresWaitNodeSetParams, (exec, node, s->params));
    case VR_SET_BATCH:
        return CALL(cuGraphExecBatchMemOpNodeSetParams, (exec, node, s->params));
    case VR_SET_NODE:
        /* The driver's prototype takes a non-const pointer; it only reads. */
        return CALL(cuGraphExecNodeSetParams, (exec, node, (CUgraphNodeParams *)(uintptr_t)s->params));
    }
#undef CALL
    return CUDA_ERROR_INVALID_VALUE;
}

CUgraphNodeType vr_set_type(const struct vr_set *s)
{
    switch (s->kind) {
    case VR_SET_MEMCPY: return CU_GRAPH_NODE_TYPE_MEMCPY;
    case VR_SET_MEMSET: return CU_GRAPH_NODE_TYPE_MEMSET;
    case VR_SET_HOST: return CU_GRAPH_NODE_TYPE_HOST;
    case VR_SET_CHILD: return CU_GRAPH_NODE_TYPE_GRAPH;
    case VR_SET_EVENT_RECORD: return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    case VR_SET_EVENT_WAIT: return CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    case VR_SET_SEM_SIGNAL: return CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    case VR_SET_SEM_WAIT: return CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT;
    case VR_SET_BATCH: return CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    case VR_SET_NODE: return s->params ? ((const CUgraphNodeParams *)s->params)->type
                                       : CU_GRAPH_NODE_TYPE_EMPTY;
    }
    return CU_GRAPH_NODE_TYPE_EMPTY;
}

/* What a kept call points to lives right after it. */
struct kept {
    struct vr_set s;
    union {
        CUDA_MEMCPY3D memcpy;
        CUDA_MEMSET_NODE_PARAMS memset;
        CUDA_HOST_NODE_PARAMS host;
        CUgraphNodeParams node;
    } p;
};

static size_t params_size(const struct vr_set *s)
{
    switch (s->kind) {
    case VR_SET_MEMCPY: return sizeof(CUDA_MEMCPY3D);
    case VR_SET_MEMSET: return sizeof(CUDA_MEMSET_NODE_PARAMS);
    case VR_SET_HOST: return sizeof(CUDA_HOST_NODE_PARAMS);
    case VR_SET_EVENT_RECORD:
    case VR_SET_EVENT_WAIT: return 0;
    case VR_SET_NODE:
        /* The union members of these types hold values only. */
        switch (vr_set_type(s)) {
        case CU_GRAPH_NODE_TYPE_MEMCPY:
        case CU_GRAPH_NODE_TYPE_MEMSET:
        case CU_GRAPH_NODE_TYPE_HOST:
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return sizeof(CUgraphNodeParams);
        default: return SIZE_MAX;
        }
    default: return SIZE_MAX;
    }
}

int vr_set_keep(struct vr_set **out, const struct vr_set *s)
{
    size_t size = params_size(s);
    if (size == SIZE_MAX)
        return -ENOTSUP;
    if (size && !s->params)
        return -EINVAL;
    struct kept *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    k->s = *s;
    if (size) {
        memcpy(&k->p, s->params, size);
        k->s.params = &k->p;
    }
    *out = &k->s;
    return 0;
}

void vr_set_free(struct vr_set *s)
{
    free(s); /* s is the first member of its struct kept */
}
