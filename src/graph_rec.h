/* graph_rec: what a CUgraph is made of, recorded as the program makes it, so
 * that cuGraphExecUpdate can tell what changed without asking the driver
 * node by node (issue 19).
 *
 * A record lists the graph's nodes in creation order (the order the driver
 * pairs nodes by in cuGraphExecUpdate): type; for a kernel its function,
 * launch shape and packed argument bytes (layout.h; NULL layout: opaque);
 * and the bytes of its launch attributes (cuLaunchKernelEx); for memset,
 * memcpy and host nodes their parameter bytes, in one fixed form per kind
 * of call (equal calls, equal bytes); and the edges as (to, from) index
 * pairs. It is fed by
 *   - stream capture: begin, end, kernel launches into a capturing stream
 *     (with attributes too), async memsets (D8, D16, D32, 2-D), async 1-D
 *     copies (unified addressing too) and host functions into one,
 *     event records in one and waits on such an event from another stream
 *     (the waiting stream joins the capture with the event's dependency
 *     set). Per stream the current dependency set is kept as the driver
 *     keeps it; each captured node depends on it and becomes it;
 *   - the explicit API: cuGraphCreate, cuGraphAdd{Kernel,Empty,Memset,
 *     Memcpy,Host}Node, cuGraphAdd/RemoveDependencies,
 *     cuGraphKernelNodeSetParams, cuGraphNodeSetParams; cuGraphDestroy
 *     drops the record.
 * Invariants:
 *   - a record that is not UNKNOWN lists exactly the nodes and edges of its
 *     graph, as far as the hooked calls made them. Anything the recorder
 *     cannot describe (a launch with `extra`, a failed call into a
 *     capture, cuStreamUpdateCaptureDependencies, a node setter it does
 *     not model, a setter naming a node no record holds (a captured
 *     graph's: every record holding captured nodes), an edge with data, a
 *     capture it saw only partly) makes it UNKNOWN. Calls it does not hook
 *     (2-D/3-D copies into a capture, graph launches into a capture) add
 *     nodes it never sees; the node-adding entry points of cuda.h it does
 *     not model (event, semaphore, memory, batch op, child graph nodes,
 *     cuGraphAddNode, capture into a graph) are hooked and make the record
 *     UNKNOWN. A record is checked against the driver's node types in
 *     order at capture end, and once (at its first take or update) for a
 *     graph built node by node: a mismatch makes it UNKNOWN for good;
 *     vr_grec_take also compares the node count every time (one
 *     cuGraphGetNodes(graph, NULL, &n)). A zero-byte memset or copy adds
 *     no node (docs/design.md).
 *   - a graph without a usable record is read once through the driver's
 *     getters at vr_grec_take (kernel and empty nodes modelled; any other
 *     type is kept as an unmodelled node that never compares equal).
 *   - the program always gets the driver's own answer: every hook forwards
 *     first and records only what succeeded.
 * Cost: per captured kernel one lookup of the stream (hash, under the
 * module's one mutex), the cached layout, a pack into an amortized growing
 * array, its shape's id (graph_rec_pack.c: the capture's hint per
 * function, the shape table on a miss); no allocation per node. An update
 * that changes nothing is judged by the packed forms alone
 * (vr_grec_same_graph). While no capture the shim saw is running,
 * a launch hook does one relaxed load and forwards.
 * Lock: VR_RANK_GREC, a leaf: memory only under it, no driver call; layouts
 * are looked up before it is taken.
 */
#ifndef VR_GRAPH_REC_H
#define VR_GRAPH_REC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "node.h"

struct vr_grec;

/* ---- feeding (the hooks, after the driver said CUDA_SUCCESS) ---- */

/* `ptsz`: the call came through a per-thread entry point (a NULL stream is
 * then the calling thread's default stream). */
void vr_grec_capture_begin(CUstream s, bool ptsz);
/* After cuStreamEndCapture returned r (graph set on success). */
void vr_grec_capture_end(CUstream s, bool ptsz, CUresult r, CUgraph graph);
/* Whether any capture the shim saw is running: the launch hooks' filter,
 * inline (one relaxed load, no call, on every launch). */
extern atomic_uint vr_grec_live_captures;
static inline bool vr_grec_capturing(void)
{
    return atomic_load_explicit(&vr_grec_live_captures, memory_order_relaxed) != 0;
}
/* A kernel launch into s returned r; attrs: the launch had attributes. */
void vr_grec_launch(CUstream s, bool ptsz, CUresult r, CUfunction f, const unsigned dims[7],
                    void **kernelParams, void **extra, bool attrs);
/* vr_grec_launch without extra and attributes (the common cuLaunchKernel). */
void vr_grec_launch_kp(CUstream s, bool ptsz, CUresult r, CUfunction f, const unsigned dims[7],
                       void **kernelParams);
/* cuLaunchKernelEx with n > 0 attributes into s returned res: a kernel
 * node with the attributes' bytes beside it (graph_rec_attrs.c). */
void vr_grec_launch_attrs(CUstream s, bool ptsz, CUresult res, CUfunction f,
                          const unsigned dims[7], void **kernelParams, void **extra,
                          const CUlaunchAttribute *attrs, unsigned n);
/* An async memset or memcpy, or a host function, into s returned res:
 * params (bytes long) in a fixed form per kind of call (equal calls, equal
 * bytes), ctx the context a memset or copy runs in (NULL for one: unknown,
 * the capture's record becomes UNKNOWN; host nodes have none). */
void vr_grec_capture_plain(CUstream s, bool ptsz, CUresult res, CUgraphNodeType type,
                           const void *params, size_t bytes, CUcontext ctx);
void vr_grec_event_record(CUevent ev, CUstream s, bool ptsz);
void vr_grec_stream_wait(CUstream s, bool ptsz, CUevent ev);
/* Something changed the capture of s in a way not modelled. */
void vr_grec_capture_unknown(CUstream s, bool ptsz);

void vr_grec_created(CUgraph g);
void vr_grec_destroyed(CUgraph g);
void vr_grec_add_kernel(CUgraph g, CUgraphNode node, const CUgraphNode *deps, size_t ndeps,
                        const struct vr_fields *f, void **kernelParams, void **extra);
void vr_grec_add_plain(CUgraph g, CUgraphNode node, const CUgraphNode *deps, size_t ndeps,
                       CUgraphNodeType type, const void *params, size_t bytes, CUcontext ctx);
void vr_grec_set_kernel(CUgraphNode node, const struct vr_fields *f, void **kernelParams,
                        void **extra);
void vr_grec_edges(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, size_t n,
                   bool add);
/* The graph's record can no longer be trusted (NULL node: graph g; else
 * the graph holding node). */
void vr_grec_mark_unknown(CUgraph g, CUgraphNode node);
/* How many captured launches so far had to look their function's layout
 * up (the miss path of a capture's layout cache): what the tests hold the
 * cache to. */
uint64_t vr_grec_layout_lookups(void);

/* Whether r lists exactly n nodes of these types, in this order (the
 * driver's cuGraphGetNodes order): pure, no driver call. The recorder
 * checks each record so, at capture end and once for a graph it did not
 * see made by one capture; a record that fails is UNKNOWN for good. */
bool vr_grec_types_match(const struct vr_grec *r, const CUgraphNodeType *types, size_t n);

/* ---- use (the exec layer) ---- */

/* A private copy of graph's record, read through the getters when the
 * recorder has none it can trust; NULL only when memory ran out. */
struct vr_grec *vr_grec_take(CUgraph graph);
void vr_grec_free(struct vr_grec *r);
size_t vr_grec_nodes(const struct vr_grec *r);
size_t vr_grec_kernels(const struct vr_grec *r);

/* cur: the exec's current graph, whose kernel nodes (in order) are ns's
 * (their fields and intended arguments are the truth, not cur's); upd: the
 * update graph. Returns NULL when both describe the same graph up to kernel
 * arguments, with the indexes (into ns) of the kernel nodes whose arguments
 * differ in changed[0 .. *nchanged) (changed holds ns->n entries); else
 * why the update must go to the driver. */
const char *vr_grec_diff(const struct vr_grec *cur, const struct vr_grec *upd,
                         const struct vr_nodes *ns, uint32_t *changed, size_t *nchanged);

/* vr_grec_diff against graph's own record, without copying it: *known is
 * false (and the result NULL) when the recorder has no record of graph it
 * trusts (vr_grec_take would read the getters), else the result is
 * vr_grec_diff's. One cuGraphGetNodes for the node count. */
const char *vr_grec_diff_graph(const struct vr_grec *cur, CUgraph graph, const struct vr_nodes *ns,
                               uint32_t *changed, size_t *nchanged, size_t *nodes, bool *known);

/* Whether graph's own record and cur describe the same graph with ns's
 * kernel arguments, judged by the packed compare alone (graph_rec_pack.c):
 * true (*nodes set) means vr_grec_diff_graph would find nothing changed;
 * false says nothing (ask it). No allocation; one cuGraphGetNodes. */
bool vr_grec_same_graph(const struct vr_grec *cur, CUgraph graph, const struct vr_nodes *ns,
                        size_t *nodes);

/* The k-th kernel node of r as a params struct; kp is scratch for its
 * argument pointers (layout->nparams entries), pointing into r. */
void vr_grec_kernel_params(const struct vr_grec *r, size_t k, CUDA_KERNEL_NODE_PARAMS_v2 *p,
                           void **kp);

void vr_grec_after_fork(void);

#endif
