/* alloc_int: what the files of the allocation layer share (private to them).
 *
 *   alloc.c          cuMemAlloc: VMM backing, the free-memory estimate, OOM
 *                    reclaim, exit and fork
 *   alloc_free.c     cuMemFree / cuMemFreeAsync / a destroyed context
 *   alloc_query.c    lookups the program makes (address range, attributes,
 *                    access, handles, memory info) and peer access
 *   alloc_reg.c      the registry of allocations (reg_lock, rank REG)
 *   alloc_release.c  releasing freed VMM memory, and what waits to be
 *                    released (parked, on the waiting queue: waitq.h)
 *   alloc_cache.c    freed VMM memory kept for reuse (cache_lock, rank CACHE);
 *                    what is not idle yet waits on the queue too
 *   alloc_ipc.c      legacy IPC of VMM-backed allocations, the fd server
 *   alloc_state.c    the layer's bottom: settings, closed flag, fallback
 *                    events, the free observer, the context check
 *
 * Each room calls only rooms after it in this order (tools/circles checks):
 * alloc_free.c, alloc_query.c, alloc.c, cache, release, IPC, registry, state.
 *
 * Each lock is private to its file (lockrank.h): never held across a
 * driver call that can block on the GPU, never two of them together (the
 * cache's takes only the queue's, to queue a reminder).
 */
#ifndef VR_ALLOC_INT_H
#define VR_ALLOC_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "alloc.h"
#include "vmm.h"

extern struct vr_config vr_alloc_cfg;
/* Set by the exit work: a free after it (a program's exit handler that
 * runs later) keeps nothing, as nothing would release it any more. */
extern atomic_bool vr_alloc_closed;

/* One fallback event per reason: a bit per reason. */
enum {
    FB_NO_VMM = 1u << 0, FB_PADDING = 1u << 1, FB_RESERVE = 1u << 2, FB_CREATE = 1u << 3,
    FB_MAP = 1u << 4, FB_ACCESS = 1u << 5, FB_TRACK = 1u << 6, FB_LOW_MEMORY = 1u << 7,
    FB_SYNC = 1u << 8, FB_UNMAP = 1u << 9, FB_RELEASE = 1u << 10, FB_ADDRESS_FREE = 1u << 11,
    FB_EVENT = 1u << 12, FB_IPC = 1u << 13,
};
void vr_alloc_fallback_once(unsigned bit, const char *what, const char *reason);
/* A cuMemAlloc served natively although it was a candidate. */
void vr_alloc_fallback(unsigned bit, const char *reason);

CUcontext vr_alloc_current_context(void);
/* The driver's answer for a call that needs a current context (alloc_state.c). */
int vr_alloc_need_context(CUcontext *ctx);
/* The estimate of `dev`'s free memory moves by -delta. */
void vr_alloc_memory_used(int dev, long long delta);
/* The observer registered with vr_alloc_observe_free, told of a freed id. */
void vr_alloc_tell_freed(uint64_t id, bool synced);

/* ---- registry (alloc_reg.c) ---- */
int vr_reg_insert(struct vr_alloc_info *rec);       /* new id when rec->id == 0 */
int vr_reg_find_span(CUdeviceptr addr, struct vr_alloc_info *out);
int vr_reg_detach(CUdeviceptr base, struct vr_alloc_info *out);
void vr_reg_reattach(const struct vr_alloc_info *rec);
bool vr_reg_take_padding(uint64_t pad);
void vr_reg_give_padding(uint64_t pad);
/* The base of a VMM-backed allocation made in ctx, or 0. */
CUdeviceptr vr_reg_vmm_of_context(CUcontext ctx);
struct vr_reg_span {
    CUdeviceptr base;
    size_t padded;
};
/* The VMM-backed allocations of `owner`, copied out (malloc'd, caller
 * frees; NULL with *n 0 when out of memory). */
struct vr_reg_span *vr_reg_vmm_of_device(int owner, size_t *n);
/* Sorted, disjoint, ids unique and nonzero, padding within the sums. */
bool vr_reg_valid(void);
void vr_reg_after_fork(void);

/* ---- release (alloc_release.c) ---- */
enum {
    STEP_SYNC = 1, STEP_UNMAP = 2, STEP_RELEASE = 4, STEP_ADDRESS_FREE = 8,
    STEP_EVENT = 16,        /* wait until `done` completed (a stream-ordered free) */
    STEP_EVENT_DESTROY = 32,
};
/* Memory the program freed that the shim has not yet returned. */
struct parked {
    struct vr_alloc_info rec;
    CUcontext ctx;   /* to synchronize before unmapping (STEP_SYNC) */
    CUevent done;    /* recorded after the stream's work that may use the memory */
    unsigned steps;  /* still to do */
};
/* Errors a synchronize returns because of the program's own context or
 * stream, which the native free would return too. */
bool vr_alloc_programs_error(CUresult r);
CUresult vr_alloc_wait_by_native_free(CUresult r);
/* Releases what it can and queues the rest; never fails the caller.
 * `counted`: the bytes of p already in vmm_leaked_bytes. */
void vr_park_release(struct parked *p, bool may_sync, size_t counted);
/* Retries every queued release (blocking on the device only when may_sync). */
void vr_park_drain(bool may_sync);

/* ---- IPC (alloc_ipc.c) ---- */
/* The handle was released: its exported fd (if any) goes. */
void vr_ipc_released(CUmemGenericAllocationHandle h);
/* p inside memory this process opened with the shim's IPC handle: 1 (its
 * base and the exporter's size in *base, *size), -1 in its padding, 0 not. */
int vr_alloc_ipc_range(CUdeviceptr p, CUdeviceptr *base, size_t *size);
void vr_alloc_ipc_after_fork(void);

/* ---- cache (alloc_cache.c) ---- */
struct cache_wait;
/* An entry of the cache. Idle: done and wait NULL. alloc_cache.c's header
 * states who owns `done` and when an entry may serve an allocation. */
struct kept {
    struct vr_alloc_info rec; /* as freed; base, padded, reserved, device, handle matter */
    CUcontext ctx;            /* for a release that must synchronize */
    CUevent done;             /* a stream-ordered free not yet seen complete; NULL: idle */
    struct cache_wait *wait;  /* its reminder on the waiting queue while done is set */
    unsigned gen;             /* peer generation read before the free: access reflects it */
    uint64_t age;             /* the oldest goes first when the budget is full */
    bool busy;                /* its event is being queried: nobody else touches it */
};
bool vr_cache_put(const struct vr_alloc_info *rec, CUcontext ctx, CUevent done, unsigned gen);
/* Queries the events of the not-idle entries of `dev` (-1: any) and
 * `padded` bytes (0: any): a drain of their VR_WAIT_CACHE reminders. */
void vr_cache_settle(int dev, size_t padded);
int vr_cache_take(int dev, size_t padded, struct kept *out);
/* Takes any entry of ctx out (a destroyed context); false when none. */
bool vr_cache_take_context(CUcontext ctx, struct kept *out);
uint64_t vr_cache_release(int dev, bool may_sync);
bool vr_cache_release_kept(const struct kept *k, bool may_sync);
uint64_t vr_cache_idle_bytes(int dev);
bool vr_cache_holds(CUdeviceptr addr);
bool vr_cache_any(void);
/* At exit: the reminders of entries already released go (waitq FINAL). */
void vr_cache_drain_final(void);
void vr_cache_abandon(void);
void vr_cache_after_fork(void);
/* Entries sorted by nothing, bytes summed right, none twice, a reminder
 * exactly for each entry not idle. */
bool vr_cache_valid(void);

#endif
