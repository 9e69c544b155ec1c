/* slice: one exec's VA reservation and the allocations bound into it.
 *
 * Each slot is a granularity-aligned window of the reservation. A slot has a
 * *current* binding (the handle mapped there now) and a *target* binding
 * (what it will hold after the next apply). Translation always uses the
 * targets, so a SetParams can be translated as if a pending rebind had
 * already happened. Nothing here waits for GPU work: the caller (exec.c)
 * must make sure no launch that could read a slot is still running before
 * vr_slices_apply or vr_slices_drop unmaps it. Not thread-safe: the owning
 * exec's lock serializes every call.
 */
#ifndef VR_SLICE_H
#define VR_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

struct vr_slices;

struct vr_slice_bind {
    uint64_t id;        /* allocation id; 0 = nothing */
    CUdeviceptr base;   /* the program's address of the allocation */
    size_t size;        /* logical size: the translated range */
    size_t padded;      /* mapped bytes */
    CUmemGenericAllocationHandle handle;
};

/* Reserves one range for slots of the given sizes (granularity multiples),
 * packed in order. Returns 0, or the driver's error from the reservation. */
int vr_slices_create(struct vr_slices **out, const size_t *sizes, size_t n);
void vr_slices_destroy(struct vr_slices *s);

size_t vr_slices_count(const struct vr_slices *s);
size_t vr_slices_reserved(const struct vr_slices *s);
CUdeviceptr vr_slices_va(const struct vr_slices *s, size_t slot);

/* Maps b into an unbound slot now (current = target = b). */
int vr_slices_bind(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b);

/* word -> slice address when it lies in a target binding, else word. */
uint64_t vr_slices_translate(const struct vr_slices *s, uint64_t word);
/* Slot whose target binding holds word, or -1. */
int vr_slices_target_slot(const struct vr_slices *s, uint64_t word);
/* True when word lies inside the reservation. */
bool vr_slices_covers(const struct vr_slices *s, uint64_t word);

/* Makes b the slot's target. -E2BIG when it does not fit, -EBUSY when the
 * slot already waits for another allocation, -EEXIST when b is the target of
 * another slot. */
int vr_slices_retarget(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b);

/* True when some slot's target differs from what is mapped. */
bool vr_slices_pending(const struct vr_slices *s);

typedef void (*vr_slice_change_fn)(void *ctx, size_t slot, const struct vr_slice_bind *from,
                                   const struct vr_slice_bind *to, int rc);

/* Makes every slot hold its target: unmap, map, set access. A slot whose map
 * fails ends unbound (its target cleared). Calls `changed` once per slot
 * changed. Returns the number of slots changed. */
size_t vr_slices_apply(struct vr_slices *s, vr_slice_change_fn changed, void *ctx);

/* Forgets allocation id: unmaps it now if mapped, clears it as a target.
 * Returns true when something changed. */
bool vr_slices_drop(struct vr_slices *s, uint64_t id);

/* Sets access again on every mapped slot (a peer was enabled since). */
void vr_slices_reaccess(struct vr_slices *s);

/* True when id is bound or targeted anywhere. */
bool vr_slices_holds(const struct vr_slices *s, uint64_t id);

#endif
