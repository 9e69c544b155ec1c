/* exec: per-exec state machine, the SetParams and launch hot paths, and the
 * exec's lifecycle.
 *
 * Every CUgraphExec instantiated through the shim gets a record (nodes and
 * their shadows: node.h; profile and decision: profile.h; reservation:
 * slice.h). Modes decide what happens to a SetParams: off forwards, dedup
 * skips byte-identical updates, observe profiles and logs but forwards
 * everything, profiled profiles, remaps stable buffers into slices and
 * absorbs updates whose translation the driver already holds.
 *
 * Invariant (active): every installed word is either the word the program
 * intended or the slice address that maps, at that moment, the same byte of
 * the same allocation. A slot is remapped only when the exec's last launch is
 * known complete (its event queried, never assumed, never waited for), after
 * every node that would read it wrongly was re-issued.
 *
 * Locks, in rank order (lockrank.h): the exec table (rwlock, only to find
 * or unlink a record), then one exec's mutex, then the pool, then alloc.c's
 * registry lock. No thread holding the table lock ever waits on an exec's
 * mutex: records are type-stable (recycled, never freed before exit) and
 * carry a serial, so a record found under the table lock is locked after
 * releasing it and checked. The one exception to the order, vr_exec_track
 * holding a new record (in no table yet, so nobody can wait on it) while it
 * takes the table lock, is kept out of the witness (exec.c).
 * No lock is held across a loader call; the one wait on the GPU is the
 * launch ordering's last resort (track.h), made under the exec's lock.
 * Each function returns 0 or a negative code (err.h).
 */
#ifndef VR_EXEC_H
#define VR_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#include "config.h"
#include "node.h"
#include "setters.h"
#include "varemap/varemap.h"

void vr_exec_configure(const struct vr_config *cfg);

/* After a successful instantiate with these flags: reads the graph, keeps a
 * clone of it when the exec may get variants (variant.h), starts the
 * profile. */
void vr_exec_track(CUgraphExec exec, CUgraph graph, unsigned long long flags);

/* cuGraphNodeSetEnabled through the shim: the program's exec and every
 * variant of it. */
int vr_exec_set_enabled(CUgraphExec exec, CUgraphNode node, unsigned enabled);
/* cuGraphNodeGetEnabled: the driver's, or its refusal for an exec whose
 * graph the program destroyed (kept by the shim: vr_exec_graph_destroyed). */
int vr_exec_get_enabled(CUgraphExec exec, CUgraphNode node, unsigned *enabled);

/* A setter of a node that is not a kernel (setters.h) through the shim: the
 * program's exec, then every variant of it; the result is the driver's for
 * the program's exec. */
int vr_exec_set_node(CUgraphExec exec, CUgraphNode node, const struct vr_set *s);

/* One SetParams through entry point `entry`; params is the program's struct.
 * Complete on its own, but it does not try the absorbed path's shortcut
 * first: the exported wrapper has tried vr_absorb_* (absorb.c) already. One
 * function per entry point, so the hook's constant picks it at compile time
 * and the absorbed path does not test it. */
int vr_exec_setparams_v1(CUgraphExec exec, CUgraphNode node, const void *params);
int vr_exec_setparams_v2(CUgraphExec exec, CUgraphNode node, const void *params);
int vr_exec_setparams_node(CUgraphExec exec, CUgraphNode node, const void *params);

static inline int vr_exec_setparams(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                                    const void *params)
{
    switch (entry) {
    case VR_SP_V1: return vr_exec_setparams_v1(exec, node, params);
    case VR_SP_V2: return vr_exec_setparams_v2(exec, node, params);
    default: return vr_exec_setparams_node(exec, node, params);
    }
}

int vr_exec_launch(CUgraphExec exec, CUstream stream, bool per_thread);
/* cuGraphUpload through the shim: ordered like a launch of the program's
 * exec, then every variant is uploaded too. */
int vr_exec_upload(CUgraphExec exec, CUstream stream, bool per_thread);

/* cuGraphExecUpdate_v2 (info) and v1 (error_node, result) through the shim
 * (issue 19). The update graph is compared with the exec's current graph
 * (graph_rec.h): nothing changed: no driver call, SUCCESS and the driver's
 * success result, the exec keeps its state; only kernel arguments changed:
 * each changed node goes through the SetParams path (absorbed or forwarded
 * there, named by the exec's own node handle), no update is sent; anything
 * else, or a SetParams that fails: the update goes to the driver and the
 * program gets its answer unchanged; on success the shadows are read again,
 * the slices dropped and the profile restarted (exec_reset). Mode observe,
 * a degraded shim, an opaque exec and one whose record a non-kernel setter
 * made stale always forward; one whose graph could not be kept forwards
 * every update that changes something (its nodes cannot be named). Each decision is logged
 * (`update_absorbed`, or `update_forwarded` at debug). */
int vr_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info);
int vr_exec_update_v1(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                      CUgraphExecUpdateResult *result);

int vr_exec_destroy(CUgraphExec exec);
/* The program is about to destroy `stream` (track.h). */
void vr_exec_stream_destroyed(CUstream stream);
/* The program destroys `graph`. True: live execs were instantiated from it,
 * and it is kept (not destroyed in the driver) until the last of them is
 * destroyed, because the driver names their nodes by its node handles; the
 * program's calls naming those nodes get CUDA_ERROR_INVALID_VALUE from the
 * shim, as from the driver after a real destroy. The caller answers
 * CUDA_SUCCESS then. False: the caller destroys it in the driver now. */
bool vr_exec_graph_destroyed(CUgraph graph);
/* Whether the program destroyed `graph` and the shim keeps it. */
bool vr_exec_graph_kept(CUgraph graph);
/* At exit: the kept graphs are destroyed in the driver. */
void vr_exec_release_graphs(void);
/* A VMM-backed allocation is being freed; `synced`: the caller synchronized
 * the current context, so its launches are complete. Unbinds it from every
 * slice now, or once the launches that may read it are done. */
void vr_exec_forget_alloc(uint64_t id, bool synced);

/* Launches or updates may bypass the shim from now on (an entry point was
 * handed out unrouted): no slot is ever remapped again; execs not yet
 * decided stay in dedup. Logs one `fallback`. */
void vr_exec_degrade(const char *why);

/* Adds the per-exec counters (live and retired execs) to s. */
void vr_exec_add_stats(struct varemap_stats *s);

/* In a forked child: every lock of the module starts free. */
void vr_exec_after_fork(void);

#endif
