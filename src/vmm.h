/* vmm: what a device offers for VMM mappings: support, granularity, and
 * which devices may access memory it owns.
 *
 * Below both alloc.c (which backs allocations by VMM) and slice.c (which
 * maps them a second time): neither asks the other for these. Per device,
 * support and granularity are asked of the driver once; peer access is a
 * bit per (owner, accessor) pair, set when a context of the accessor
 * enabled peer access to a context of the owner, and every new pair bumps
 * a generation so a mapping made before it can be given access again.
 * Lock-free: atomics only.
 */
#ifndef VR_VMM_H
#define VR_VMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <cuda.h>

#define VR_MAX_DEVICES 64

static inline bool vr_vmm_valid_device(int dev)
{
    return dev >= 0 && dev < VR_MAX_DEVICES;
}

/* The current context's device: 0, a driver error, or -ERANGE when the
 * shim cannot track that device. */
int vr_vmm_current_device(CUdevice *dev);

/* A pinned device allocation on dev, as cuMemCreate wants it. */
void vr_vmm_device_prop(CUmemAllocationProp *prop, CUdevice dev);

/* Whether the shim's cuMemCreate on dev asks for a POSIX fd handle type
 * (what its IPC export needs, alloc_ipc.c): until the driver refused it
 * once, then never again on that device. */
bool vr_vmm_shareable(int dev);
void vr_vmm_unshareable(int dev);

/* Recommended granularity of `device` / the current device, or 0 when VMM
 * is unsupported or the device unknown. */
size_t vr_alloc_granularity_for(int device);
size_t vr_alloc_granularity(void);
bool vr_alloc_vmm_supported(void);

/* Access descriptors for memory owned by `device`: the device itself and
 * every device that enabled peer access to it. Returns how many were
 * written (at most cap; 0 for an unknown device). */
size_t vr_alloc_access_for(int device, CUmemAccessDesc *desc, size_t cap);

/* Bumped by every peer access the shim learns of: mappings made before a
 * newer generation must be given access again (vr_alloc_access_for).
 * Inline: every launch of an active exec reads it. */
extern __attribute__((visibility("hidden"))) _Atomic unsigned vr_peer_generation_;
static inline unsigned vr_alloc_peer_generation(void)
{
    return atomic_load_explicit(&vr_peer_generation_, memory_order_acquire);
}

/* Records that `accessor` may now access memory of `owner`. True when the
 * pair is new (the generation was bumped once; the caller bumps it again
 * with vr_vmm_peer_bump once it gave existing mappings access). */
bool vr_vmm_peer_add(int owner, int accessor);
void vr_vmm_peer_bump(void);

#endif
