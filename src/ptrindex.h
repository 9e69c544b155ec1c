/* ptrindex: which nodes hold a word in an address range.
 *
 * A multiset of (address, node) pairs answering "every pair whose address
 * lies in [lo, hi)" in O(runs x log n + matches). Pairs are appended, then
 * sealed into a sorted run; runs are merged whenever the newer is at least
 * as large as the one before it, so there are O(log n) runs and each pair is
 * merged O(log n) times: adding k pairs costs O(k log n) amortized, never a
 * pass over the whole index. Pairs are never removed: a caller that keeps
 * stale pairs gets extra matches, never missing ones. Not thread-safe.
 */
#ifndef VR_PTRINDEX_H
#define VR_PTRINDEX_H

#include <stddef.h>
#include <stdint.h>

#define VR_PTRINDEX_RUNS 64

struct vr_ptr_pair {
    uint64_t addr;
    uint32_t node;
};

struct vr_ptrindex {
    struct vr_ptr_pair *v;
    size_t n, cap;
    size_t sealed;                      /* v[0 .. sealed) lies in runs */
    size_t run[VR_PTRINDEX_RUNS + 1];   /* run k is v[run[k] .. run[k + 1]) */
    size_t nruns;
};

/* Appends a pair; it is found once sealed. 0 or -ENOMEM. */
int vr_ptrindex_add(struct vr_ptrindex *x, uint64_t addr, uint32_t node);

/* The pairs added since the last seal become findable. 0 or -ENOMEM (the
 * index is then unchanged, the new pairs still pending). */
int vr_ptrindex_seal(struct vr_ptrindex *x);

/* Calls fn(arg, node) for every sealed pair with lo <= addr < hi (a node
 * once per matching pair). Returns the number of calls. */
size_t vr_ptrindex_find(const struct vr_ptrindex *x, uint64_t lo, uint64_t hi,
                        void (*fn)(void *arg, uint32_t node), void *arg);

void vr_ptrindex_free(struct vr_ptrindex *x);

#endif
