/* exec: per-exec state — shadows, profile, decision, translation.
 *
 * Every CUgraphExec instantiated through the shim gets a record: for each
 * kernel node the parameters the program *intended* and those the driver has
 * *installed*. Modes decide what happens to a SetParams: off forwards,
 * dedup skips byte-identical updates, observe profiles and logs but forwards
 * everything, profiled profiles, remaps stable buffers into slices and
 * absorbs updates whose translation the driver already holds.
 * Invariant (profiled, active): when a launch starts, every node's installed
 * parameters equal the translation of its intended ones.
 * Locks: the exec table lock, then one exec's lock, then (inside alloc.c)
 * the registry lock. Each function returns 0 or a negative code (err.h);
 * driver errors come back unchanged.
 */
#ifndef VR_EXEC_H
#define VR_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#include "config.h"

enum vr_sp_entry { VR_SP_V1, VR_SP_V2, VR_SP_NODE };

void vr_exec_configure(const struct vr_config *cfg);

/* After a successful instantiate: reads the graph and starts the profile. */
void vr_exec_track(CUgraphExec exec, CUgraph graph);

/* One SetParams through entry point `entry`; params is the program's struct. */
int vr_exec_setparams(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry, const void *params);

int vr_exec_launch(CUgraphExec exec, CUstream stream, bool per_thread);

int vr_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info);

int vr_exec_destroy(CUgraphExec exec);

/* The driver accepted an update of exec from graph through an entry point
 * that did the update itself (cuGraphExecUpdate v1): refresh what
 * vr_exec_update refreshes after a successful update. */
void vr_exec_updated(CUgraphExec exec, CUgraph graph);

/* Some launch or SetParams entry point was handed to the program unrouted
 * (its calls bypass the shim, `why` says which): from now on the process
 * behaves as in dedup, which needs no view of launches. Logs one
 * `fallback` event, the first time. Callable before configuration, from
 * any thread, without locks. */
void vr_exec_degrade(const char *why);

/* A VMM-backed allocation is being freed and the context synchronized:
 * unbind it from every slice. */
void vr_exec_forget_alloc(uint64_t id);

#endif
