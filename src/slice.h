/* slice: one exec's VA reservation and the allocations bound into it.
 *
 * Each slot is a granularity-aligned window of the reservation. A slot has a
 * *current* binding (the handle mapped there now) and a *target* (what it
 * should hold after the next remap). Translation looks through one of three
 * views: what is mapped now, the targets, or only the stable slots (mapped
 * and not about to change). A word equal to a binding's end (base + size)
 * translates to the slot's end: [begin, end) pairs stay pairs.
 * Nothing here waits for GPU work: the caller must know that no launch that
 * could read a slot is still running before remapping or unmapping it. A
 * failed unmap leaves the slot as it was (still mapped), so nothing claims a
 * mapping is gone while it is not. Not thread-safe: the owning exec's lock
 * serializes every call.
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
    int device;         /* the allocation's device */
};

enum vr_view { VR_VIEW_MAPPED, VR_VIEW_TARGET, VR_VIEW_STABLE };

/* Reserves one range for slots of the given sizes (granularity multiples),
 * packed in order. Returns 0, or the driver's error from the reservation. */
int vr_slices_create(struct vr_slices **out, const size_t *sizes, size_t n);
/* Unmaps every slot and frees the reservation. Returns 0 when everything
 * was returned (s is freed), or the first error (s stays, holding what is
 * left: call again later). */
int vr_slices_destroy(struct vr_slices *s);

/* Unmaps the slots whose binding `live` says is gone (no longer the
 * allocation it was bound to); for a reservation nothing translates
 * through any more (torn down: its maps are not kept). Returns the slots
 * still mapped, and in *rc the first unmap error (0: none). */
size_t vr_slices_unmap_gone(struct vr_slices *s, bool (*live)(const struct vr_slice_bind *b),
                            int *rc);

/* Frees the host-side record only: for a driver that can no longer be asked
 * (its context is gone at exit). */
void vr_slices_forget(struct vr_slices *s);

/* The structure's invariants: slots packed in order from the base, each
 * binding within its slot, the pending count right, and both views sorted
 * and disjoint: ranges meet at most at an end point, or are one
 * allocation bound in two slots. Called after every change at
 * VR_CHECK_LEVEL 3. */
bool vr_slices_valid(const struct vr_slices *s);

size_t vr_slices_count(const struct vr_slices *s);
size_t vr_slices_reserved(const struct vr_slices *s);
CUdeviceptr vr_slices_va(const struct vr_slices *s, size_t slot);
size_t vr_slices_size(const struct vr_slices *s, size_t slot);
const struct vr_slice_bind *vr_slices_current(const struct vr_slices *s, size_t slot);
const struct vr_slice_bind *vr_slices_target(const struct vr_slices *s, size_t slot);

/* Maps b into an unbound slot now (current = target = b). */
int vr_slices_bind(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b);

/* word -> slice address when it lies in [base, base + size] of a binding
 * of the view, else word. */
uint64_t vr_slices_translate(const struct vr_slices *s, uint64_t word, enum vr_view view);
/* The slice address of word through slot's own window when word lies in
 * [base, base + size] of the slot's target and, unless pending_ok, the slot
 * is not about to be remapped; else 0 (no slice address is 0). */
uint64_t vr_slices_home(const struct vr_slices *s, size_t slot, uint64_t word, bool pending_ok);
/* The slot whose binding of the view holds word, or -1. */
int vr_slices_slot_of(const struct vr_slices *s, uint64_t word, enum vr_view view);
/* The slot whose window contains the slice address va (end included), or -1. */
int vr_slices_slot_at(const struct vr_slices *s, uint64_t va);

/* Makes b the slot's target. -E2BIG when it does not fit. One allocation may
 * be the target of several slots (anchors are positions: two groups of
 * positions may point at one buffer for a while). b->id 0 means "unbind at
 * the next remap". */
int vr_slices_retarget(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b);
/* Forgets a slot's pending change: target = current. */
void vr_slices_cancel(struct vr_slices *s, size_t slot);

/* The count every launch reads, first in slice.c's struct so that the
 * test below is inline. */
struct vr_slices_hot {
    size_t npending;
};

/* True when some slot's target differs from what is mapped. */
static inline bool vr_slices_pending(const struct vr_slices *s)
{
    return ((const struct vr_slices_hot *)(const void *)s)->npending != 0;
}
bool vr_slices_slot_pending(const struct vr_slices *s, size_t slot);

/* Makes the slot hold its target: unmap, map, set access. A failed unmap
 * keeps the old binding and cancels a rebind, but not an unbind (target id
 * 0: the allocation was freed), which stays pending; a failed map leaves
 * the slot unbound. Returns 0 or the driver's error. */
int vr_slices_remap(struct vr_slices *s, size_t slot);
/* How far remaps batched their access: slots mapped anew, and the
 * cuMemSetAccess calls that made them accessible. */
struct vr_remap_tally {
    uint64_t slots, calls;
};

/* How many slots a caller hands vr_slices_remap_many at once (its arrays
 * stay on the stack). */
#define VR_REMAP_BATCH 32

/* vr_slices_remap of slots[0..n) (ascending), with one cuMemSetAccess per
 * run of adjacent slots mapped anew for one device, each but the last
 * filling its window (cuda.h: the range may hold several whole mappings);
 * where that call fails, slot by slot. rc[i]: slots[i]'s result; the
 * tally (NULL: none) grows by what was mapped and called. */
void vr_slices_remap_many(struct vr_slices *s, const size_t *slots, size_t n, int *rc,
                          struct vr_remap_tally *tally);

/* The slot bound to or targeting allocation id, or -1. */
int vr_slices_find(const struct vr_slices *s, uint64_t id);

/* Sets access again on every mapped slot (a peer was enabled since): one
 * call per run of adjacent bound slots, as remaps do. */
void vr_slices_reaccess(struct vr_slices *s);

#endif
