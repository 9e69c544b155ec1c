/* alloc: the registry of device allocations and varemap's VMM backing.
 *
 * Every cuMemAlloc the shim sees is recorded (base, size, unique id). In mode
 * profiled, allocations of at least VAREMAP_VMM_MIN_BYTES are served by
 * reserve + create + map + set-access so their physical handle can be mapped a
 * second time; any VMM failure falls back to the native call. Ids are never
 * reused, so "the same allocation" survives a freed address being handed out
 * again. Lookups copy a record out: callers never hold a pointer into the
 * registry. The registry lock is a leaf: no driver call that can block on the
 * GPU is made while it is held.
 */
#ifndef VR_ALLOC_H
#define VR_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "config.h"

struct vr_alloc_info {
    uint64_t id;        /* unique for the life of the process, never 0 */
    CUdeviceptr base;   /* what the program sees */
    size_t size;        /* what the program asked for */
    size_t padded;      /* mapped bytes (granularity multiple) for VMM, else size */
    bool vmm;           /* backed by varemap's own cuMemCreate */
    bool eligible;      /* would have been VMM-backed (what mode observe assumes) */
    CUmemGenericAllocationHandle handle; /* VMM only */
    int device;         /* the device whose memory it is */
};

void vr_alloc_configure(const struct vr_config *cfg);

/* The cuMemAlloc hook: VMM-backed when eligible, else native. */
int vr_alloc_create(CUdeviceptr *dptr, size_t size);

/* Looks up the allocation containing addr ([base, base+size)).
 * Returns 0 or -ENOENT. */
int vr_alloc_find(CUdeviceptr addr, struct vr_alloc_info *out);

/* Removes `base` from the registry before it is released, so no new slice
 * can pick it up. Returns 0 with the record, -ENOENT when unknown, or
 * -EINVAL when base is inside but not at the start of an allocation. */
int vr_alloc_detach(CUdeviceptr base, struct vr_alloc_info *out);

/* Returns the memory of a detached record (VMM: unmap, release, free VA;
 * native: cuMemFree). */
int vr_alloc_release(const struct vr_alloc_info *rec);

/* Re-registers a record that was detached but could not be released. */
void vr_alloc_reattach(const struct vr_alloc_info *rec);

/* Access descriptors for the current device and every enabled peer.
 * Returns how many were written (at most cap). */
size_t vr_alloc_access(CUmemAccessDesc *desc, size_t cap);
/* The same for memory owned by `device`. */
size_t vr_alloc_access_for(int device, CUmemAccessDesc *desc, size_t cap);

/* cuCtxEnablePeerAccess succeeded for peer: remember its device and give it
 * access to every VMM-backed allocation. */
void vr_alloc_peer_enabled(CUcontext peer);

/* Bumped by every vr_alloc_peer_enabled: mappings made before a newer
 * generation must be given access again. */
unsigned vr_alloc_peer_generation(void);

/* Granularity of the current device, or 0 when VMM is unsupported. */
size_t vr_alloc_granularity(void);
bool vr_alloc_vmm_supported(void);

#endif
