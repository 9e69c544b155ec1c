/* lockrank: every lock of the shim, its rank, and a witness that checks them.
 *
 * A thread takes locks in increasing rank only; a lock of rank r may be taken
 * while holding only locks of lower rank. At VR_CHECK_LEVEL >= 2 each take
 * and drop is recorded in a thread-local mask and a take out of order aborts,
 * as jemalloc's witness does in malloc_mutex_lock; below that the calls
 * compile to nothing, so the absorbed hot path pays for none of it.
 *
 * The table below is the one statement of the order (docs/design.md copies
 * it). Each line: the lock, where it lives, what it guards, and what may be
 * taken or called while it is held. "Leaf": nothing of a higher rank is
 * taken under it in practice, although the order would allow it.
 *
 *   1 EXEC    exec.c, one per exec record (vr_mutex). Guards the record, its
 *             nodes, slices, variants and track (track.h, slice.h and
 *             variant.h are not thread-safe: this lock serializes them).
 *             Under it: TABLE (to insert or unlink the record), POOL (retire),
 *             REG (vr_alloc_find, changed_since), LAYOUT, WAIT (tombs), LOG;
 *             and driver calls: cuGraphExecKernelNodeSetParams(_v2) /
 *             cuGraphExecNodeSetParams, cuGraphNodeSetEnabled, cuGraphLaunch
 *             (_ptsz), cuGraphUpload(_ptsz), cuGraphInstantiateWithFlags,
 *             cuGraphExecUpdate_v2, cuGraphClone, cuGraphNodeFindInClone,
 *             cuGraphGetNodes, cuGraphNodeGetType, cuGraphKernelNodeGet*,
 *             cuGraphNodeGetDependencies (graph_rec's read of a graph it did
 *             not see made, at an update),
 *             cuGraphExecDestroy, cuGraphDestroy; cuEventCreate / Record /
 *             Query / Destroy, cuStreamWaitEvent; cuCtxGetCurrent,
 *             cuCtxPush/PopCurrent; the slices' VMM calls (cuMemAddressReserve,
 *             cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemAddressFree); and
 *             one blocking call, cuCtxSynchronize, only as the launch
 *             ordering's last resort (track.h; counted in rebind_waits).
 *             Never a loader call. Two records are held together only when
 *             one is not yet published (instantiate: the new record and a
 *             stale one the driver's reused handle names).
 *   2 TABLE   exec.c, the exec handle table (vr_rwlock). A leaf: a record
 *             found under it is locked after it is dropped and checked again
 *             (lookup), and it is taken under EXEC only to insert or unlink.
 *   3 POOL    exec.c, the record free list, the retired counters and the kept
 *             graphs (exec_table.c). A leaf.
 *   3a GREC   graph_rec.c, the graph records, the capture state of streams
 *             and events (vr_mutex). A leaf: memory only, no driver call
 *             (layouts are looked up before it is taken). Taken under EXEC
 *             by cuGraphExecUpdate and instantiate (vr_grec_take).
 *   4 REG     alloc_reg.c, the allocation registry (pthread rwlock). A leaf:
 *             memory moves only, no driver call.
 *   5 LAYOUT  layout.c, kernel parameter layouts (pthread rwlock). A leaf:
 *             the driver is asked for a layout outside it.
 *   6 CACHE   alloc_cache.c, the freed-memory cache (pthread mutex). Under
 *             it only WAIT, to queue a not-idle entry's reminder; entries
 *             are taken out (or marked busy) before a driver call.
 *   7 WAIT    waitq.c, the queue of things waiting for the GPU (vr_mutex).
 *             A leaf: a drain takes entries out before retrying them.
 *   7a IPC    alloc_ipc.c, the exported fds and the opened IPC mappings
 *             (vr_mutex). A leaf: memory, close and dup only; the fd
 *             server's socket calls and every driver call outside it.
 *   8 LOG     log.c, the log file's reopen (pthread mutex). Only open,
 *             fstat, close and the log's own bookkeeping under it.
 *
 * Nothing is held across the free observer (alloc.h), which takes EXEC.
 * The witness checks the locks of the lower layer (REG, LAYOUT, CACHE,
 * WAIT, LOG); the exec layer's three take the same calls.
 */
#ifndef VR_LOCKRANK_H
#define VR_LOCKRANK_H

#include <stdbool.h>

#include "assert.h"

enum vr_rank {
    VR_RANK_EXEC = 1,  /* one exec record */
    VR_RANK_TABLE,     /* exec handle table (rwlock) */
    VR_RANK_POOL,      /* exec record free list and retired counters */
    VR_RANK_GREC,      /* graph_rec.c: graph records and capture state */
    VR_RANK_REG,       /* allocation registry (rwlock) */
    VR_RANK_LAYOUT,    /* kernel parameter layouts (rwlock) */
    VR_RANK_CACHE,     /* freed-memory cache */
    VR_RANK_WAIT,      /* the queue of things waiting for the GPU */
    VR_RANK_IPC,       /* alloc_ipc.c: exported fds, opened IPC mappings */
    VR_RANK_LOG,       /* log file reopen */
    VR_RANK_COUNT
};

#if VR_CHECK_LEVEL >= 2
void vr_rank_take(enum vr_rank r);
void vr_rank_drop(enum vr_rank r);
bool vr_rank_held(enum vr_rank r);
#else
static inline void vr_rank_take(enum vr_rank r) { (void)r; }
static inline void vr_rank_drop(enum vr_rank r) { (void)r; }
static inline bool vr_rank_held(enum vr_rank r) { (void)r; return true; }
#endif

/* For functions that require a lock held by their caller. */
#define VR_ASSERT_HELD(r) VR_ASSERT_INTERNAL(vr_rank_held(r))

#endif
