/* setters: the calls that change one non-kernel node of an executable
 * graph (cuGraphExec{Memcpy,Memset,Host,ChildGraph}NodeSetParams, the event
 * and external semaphore setters, batch memops, and cuGraphExecNodeSetParams
 * on a node that is not a kernel), as one value that can be made on any exec
 * instantiated from a graph holding that node, and kept to be made again
 * later (on a variant instantiated after the program's call).
 *
 * Each such call sets the whole node "as though it had contained these
 * parameters at instantiation" (cuda.h), so the last kept call of a node is
 * all a later exec needs.
 */
#ifndef VR_SETTERS_H
#define VR_SETTERS_H

#include <cuda.h>

enum vr_set_kind {
    VR_SET_MEMCPY,       /* params: const CUDA_MEMCPY3D *, ctx */
    VR_SET_MEMSET,       /* params: const CUDA_MEMSET_NODE_PARAMS *, ctx */
    VR_SET_HOST,         /* params: const CUDA_HOST_NODE_PARAMS * */
    VR_SET_CHILD,        /* child */
    VR_SET_EVENT_RECORD, /* event */
    VR_SET_EVENT_WAIT,   /* event */
    VR_SET_SEM_SIGNAL,   /* params: const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS * */
    VR_SET_SEM_WAIT,     /* params: const CUDA_EXT_SEM_WAIT_NODE_PARAMS * */
    VR_SET_BATCH,        /* params: const CUDA_BATCH_MEM_OP_NODE_PARAMS * */
    VR_SET_NODE,         /* params: CUgraphNodeParams * (any type but kernel) */
};

struct vr_set {
    enum vr_set_kind kind;
    const void *params;
    CUcontext ctx;
    CUevent event;
    CUgraph child;
};

/* The call on (exec, node), through the real driver. */
CUresult vr_set_issue(CUgraphExec exec, CUgraphNode node, const struct vr_set *s);

/* The node type the call is for. */
CUgraphNodeType vr_set_type(const struct vr_set *s);

/* A copy of s that owns what it points to. Only calls whose parameters are
 * plain values are kept (memcpy, memset, host, events, and the generic call
 * for those types): -ENOTSUP for the others (child graphs, semaphores,
 * batch memops: graphs holding them are never varied), -ENOMEM. */
int vr_set_keep(struct vr_set **out, const struct vr_set *s);
void vr_set_free(struct vr_set *s);

#endif
