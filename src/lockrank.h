/* lockrank: every lock of the shim, its rank, and a witness that checks them.
 *
 * A thread takes locks in increasing rank only; a lock of rank r may be taken
 * while holding only locks of lower rank. At VR_CHECK_LEVEL >= 2 each take
 * and drop is recorded in a thread-local mask and a take out of order aborts,
 * as jemalloc's witness does in malloc_mutex_lock; below that the calls
 * compile to nothing, so the absorbed hot path pays for none of it.
 *
 * The table (rank: lock, what may run under it) is the one statement of the
 * order; docs/design.md copies it.
 */
#ifndef VR_LOCKRANK_H
#define VR_LOCKRANK_H

#include <stdbool.h>

#include "assert.h"

enum vr_rank {
    VR_RANK_TABLE = 1, /* exec handle table (rwlock): lookup, insert, unlink */
    VR_RANK_EXEC,      /* one exec record: its driver calls (SetParams, launch, events, VMM) */
    VR_RANK_POOL,      /* exec record free list and retired counters */
    VR_RANK_REG,       /* allocation registry (rwlock) */
    VR_RANK_LAYOUT,    /* kernel parameter layouts (rwlock) */
    VR_RANK_CACHE,     /* freed-memory cache */
    VR_RANK_WAIT,      /* the queue of things waiting for the GPU */
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
