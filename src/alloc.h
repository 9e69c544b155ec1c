/* alloc: the registry of device allocations and varemap's VMM backing.
 *
 * Every cuMemAlloc the shim sees (modes profiled and observe) is recorded
 * (base, size, device, unique id). In mode profiled an allocation is served
 * by reserve + create + map + set-access, so its physical handle can be
 * mapped a second time, when all of these hold:
 *   - its size is at least VAREMAP_VMM_MIN_BYTES and its device supports VMM;
 *   - its granularity padding is at most VAREMAP_MAX_PADDING_RATIO of its
 *     size, and the padding of all live VMM allocations stays within
 *     VAREMAP_MAX_PADDING;
 *   - the device's free memory after it stays at least VAREMAP_MAX_PADDING
 *     (near a full device padding would make allocations fail that succeed
 *     without the shim). Free memory is estimated from the allocations the
 *     shim sees and asked of the driver (cuMemGetInfo) only now and then:
 *     every 64th candidate, or when the allocation is large next to the
 *     last known free memory.
 * Any VMM failure, out of memory included, falls back to the native call.
 * An id names one physical handle at one base with one size: it
 * is never reused for other memory, so "the same allocation" survives a
 * freed address being handed out again, and the cache's memory served to
 * an allocation of the freed size keeps the freed buffer's id (below). Lookups copy a record out: callers never hold a
 * pointer into the registry.
 *
 * Layout of a VMM-backed allocation (device D = the current context's
 * device at cuMemAlloc; the handle is made on D with D's granularity):
 *
 *   base-lead            base            base+size     base+padded         base+reserved
 *   | guard gap (unmapped) | program's bytes | padding     | guard gap (unmapped) |
 *   |<-- one granularity ->|<------ mapped, one handle --->|<-- one granularity -->|
 *
 * The guard gaps are reserved but never mapped. The one after: one-past-
 * the-end (base+size, even when size == padded) lies inside this
 * allocation's own reservation and never inside another allocation. The one
 * below: no other allocation (the driver's native ones included) can end
 * where this one starts, so its start never equals another's end pointer.
 * Either way a [begin, end) pointer pair names exactly one allocation, and
 * a word at base names this one only (issue 30: pairs stay pairs).
 * Addresses in the padding or the gaps are not the program's:
 * cuMemGetAddressRange says CUDA_ERROR_NOT_FOUND, as it would for memory
 * the driver never handed out.
 *
 * Access follows native cuMemAlloc semantics per (owner, accessor) pair:
 * memory owned by device D is accessible from D, and from every device E
 * whose context enabled peer access to a context of D
 * (cuCtxEnablePeerAccess(ctx of D) called in a context of E).
 *
 * cuMemFreeAsync of a VMM-backed allocation does not block (nor does the
 * driver's): an event is recorded on the stream, and the memory is unmapped
 * and released once it completed, at a later alloc, free or cuMemGetInfo
 * hook, or at exit; cuMemGetInfo answers after returning what is done.
 *
 * The cache of freed memory (VAREMAP_VMM_CACHE bytes at most): a freed
 * VMM-backed allocation whose last use is known (the free synchronized, or
 * a stream-ordered free's event) stays reserved, created, mapped and
 * accessible, keyed by (device, padded size). A cuMemAlloc of that padded
 * size on that device takes one whose event (if any) completed, with no VMM
 * call: of the freed buffer's size, as that buffer again (its id: slots and
 * variants still bound to it map the same bytes at the same address, so
 * the exec sees the buffer come back); of another size as a new allocation
 * (a new id, the old one told to the observer first); either way a new
 * buffer id for the program (serial). Kept memory is the shim's, not the
 * program's: no lookup finds it (cuMemGetAddressRange:
 * CUDA_ERROR_NOT_FOUND, as for freed memory),
 * cuMemGetInfo and the free-memory estimate count it as free, an allocation
 * that runs out of memory releases the device's kept memory and tries again,
 * the oldest entries go when the budget is full, everything goes at exit,
 * and a forked child forgets the parent's. Counters vmm_cache_hits,
 * vmm_cache_misses, vmm_cache_bytes. A slot of a busy exec may still map
 * memory the cache released (it unmaps it at the exec's next launch):
 * until then that memory is the driver's to count as used.
 *
 * Freeing: cuMemFree needs a current context (else the driver's
 * CUDA_ERROR_INVALID_CONTEXT and nothing is freed), synchronizes it like
 * the native free, unbinds the allocation from every slice (the observer,
 * vr_alloc_observe_free; for memory the cache keeps, when it lets it go),
 * then unmaps, releases and frees the VA. When one
 * of the shim's own calls fails the program's free still succeeds: the
 * memory is parked (counted in vmm_leaked_bytes, one `fallback` event per
 * reason) and its release retried at later alloc and free hooks and at
 * exit. When the shim's synchronize fails, the driver's own free of a
 * scrap allocation waits for the work instead (it synchronizes as the
 * program's free would); when that fails too the mapping stays alive, a
 * kernel may still be using it, until a wait at a later free or at exit
 * succeeds (an allocation never waits: the native one does not).
 *
 * Locks (lockrank.h): the registry lock and the cache lock are never held
 * together and never across a driver call that can block on the GPU or a
 * loader call (the cache lock takes only the queue's, to queue a
 * reminder); parked releases and not-idle cache entries wait on the one
 * waiting queue (waitq.h). The files of this layer: alloc_int.h.
 */
#ifndef VR_ALLOC_H
#define VR_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "config.h"
#include "vmm.h" /* granularity, access lists, peer generation */

struct vr_alloc_info {
    uint64_t id;        /* the memory: its handle at its base with its size (never 0);
                         * a same-size cache hit takes the freed buffer's back */
    uint64_t serial;    /* the allocation: new at every cuMemAlloc, never reused, never 0
                         * (what CU_POINTER_ATTRIBUTE_BUFFER_ID tells the program) */
    CUdeviceptr base;   /* what the program sees */
    size_t size;        /* what the program asked for */
    size_t padded;      /* mapped bytes (granularity multiple) for VMM, else size */
    size_t reserved;    /* VMM: reserved VA from base: padded + one granularity of guard gap;
                         * else size */
    size_t lead;        /* VMM: reserved VA below base, the guard gap there (one granularity) */
    int device;         /* the current context's device at cuMemAlloc; -1 when unknown */
    bool vmm;           /* backed by varemap's own cuMemCreate */
    bool eligible;      /* would have been VMM-backed (what mode observe assumes) */
    bool shareable;     /* VMM: created with a POSIX fd handle type (IPC export, alloc_ipc.c) */
    CUmemGenericAllocationHandle handle; /* VMM only */
    CUcontext ctx;      /* VMM only: current at cuMemAlloc (NULL when unknown) */
};

void vr_alloc_configure(const struct vr_config *cfg);

/* The hooks' bodies. Each returns 0 or a negative code (err.h); driver
 * results come back unchanged. */
int vr_alloc_create(CUdeviceptr *dptr, size_t size);                       /* cuMemAlloc */
int vr_alloc_free(CUdeviceptr dptr);                                       /* cuMemFree */
/* The driver destroyed ctx (NULL: none): its VMM-backed allocations go as
 * its native ones did, and memory kept from it is released. */
void vr_alloc_context_destroyed(CUcontext ctx);
int vr_alloc_free_async(CUdeviceptr dptr, CUstream stream, bool per_thread); /* cuMemFreeAsync */
int vr_alloc_address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
int vr_alloc_mem_info(size_t *free_bytes, size_t *total);                  /* cuMemGetInfo */
/* cuMemRetainAllocationHandle / cuMemGetAccess: on shim-backed cuMemAlloc
 * memory they fail as they do on native memory. */
int vr_alloc_retain_handle(CUmemGenericAllocationHandle *handle, void *addr);
int vr_alloc_get_access(unsigned long long *flags, const CUmemLocation *location,
                        CUdeviceptr ptr);
int vr_alloc_enable_peer(CUcontext peer, unsigned int flags);              /* cuCtxEnablePeerAccess */
/* cuPointerGetAttribute(s): shim-backed memory answers as native cuMemAlloc
 * memory would. data holds n pointers to the values; `single`: the one
 * attribute of cuPointerGetAttribute (n is 1). */
int vr_alloc_pointer_attributes(bool single, unsigned n, CUpointer_attribute *attrs, void **data,
                                CUdeviceptr ptr);

/* Legacy IPC (alloc_ipc.c): cuIpcGetMemHandle on a VMM-backed allocation
 * exports the shim's own handle; cuIpcOpenMemHandle maps such a handle of
 * another process (any other goes to the driver), cuIpcCloseMemHandle
 * unmaps it. The driver's answers elsewhere. */
int vr_alloc_ipc_get(CUipcMemHandle *out, CUdeviceptr dptr);
int vr_alloc_ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned flags);
int vr_alloc_ipc_close(CUdeviceptr dptr);

/* After an allocation ran out of device memory: the kept memory of every
 * device goes back. Returns whether any did (then a retry may succeed). */
bool vr_alloc_reclaim(void);

/* At exit: a last try at releasing parked memory. From then on freed
 * memory goes straight back to the driver (nothing is kept): a program's
 * exit handler may still free after the shim's. */
void vr_alloc_drain(void);
/* At exit after the driver shut down: forgets the cached and parked memory
 * without a driver call (the driver reclaimed it; none would succeed), so
 * none of it counts as leaked. */
void vr_alloc_abandon(void);

/* In a forked child: the locks start free, and memory parked by the parent
 * is the parent's to release, not the child's. */
void vr_alloc_after_fork(void);

/* Looks up the allocation containing addr ([base, base+size)).
 * Returns 0 or -ENOENT. */
int vr_alloc_find(CUdeviceptr addr, struct vr_alloc_info *out);

/* Changes of the registry that change what a word names (vr_alloc_find,
 * and a word at an allocation's end naming that allocation): every record
 * that leaves it (cuMemFree*, cuMemFreeAsync*, VMM-backed or native, and a
 * stale record an allocation over it drops), and the start of a record
 * placed right at the end of another. Each is published as a range [lo, hi)
 * of word values after the registry changed, and bumps a generation; the
 * last VR_ALLOC_CHANGES ranges are kept. A reader that remembers the
 * generation it last saw learns which words may name something else now,
 * or that too many changed to tell. Modes off and dedup keep no registry:
 * nothing is published. */
#define VR_ALLOC_CHANGES 128

struct vr_alloc_range {
    uint64_t lo, hi;
};

/* The current generation: one atomic load. */
uint64_t vr_alloc_generation(void);

/* The ranges published after generation `since` into out (room for
 * VR_ALLOC_CHANGES), the generation they reach into *now. Returns how many,
 * or -ENOBUFS when some are no longer kept. */
int vr_alloc_changed_since(uint64_t since, uint64_t *now, struct vr_alloc_range *out);

/* The exec layer's observer of freed allocations: told of every id whose
 * memory goes, once: a record that leaves the registry as freed
 * (cuMemFree*, cuMemFreeAsync*, a destroyed context) after it left and
 * before its memory is released; a freed record the cache keeps only when
 * the cache releases it (eviction, out of memory, exit, a destroyed
 * context) or serves it at another size. Until then its memory stays
 * mapped at its address with its handle, so what a slot bound to it maps
 * stays the bytes the address maps. `synced`: the free waited for the
 * device. One observer; NULL stops. It runs with no lock of this layer
 * held. */
void vr_alloc_observe_free(void (*fn)(uint64_t id, bool synced));

#endif
