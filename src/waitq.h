/* waitq: the one queue of the shim's things that wait for the GPU.
 *
 * What the program let go but a launch or a stream may still be using is
 * kept here until it is known idle, then returned to the driver: slice
 * reservations of a torn-down exec (tomb.h), freed VMM memory whose release
 * could not finish (alloc_release.c: an event not yet complete, a
 * synchronize or unmap that failed), freed memory the cache keeps whose
 * stream-ordered free is not yet seen complete (alloc_cache.c), and events
 * the driver refused to destroy. Each entry is owned by the module that queued it and carries its
 * kind and its two operations; the queue only keeps, retries and forgets.
 *
 * - vr_waitq_drain retries the entries of some kinds, at the moments the
 *   owners chose before there was one queue (an alloc hook drains the
 *   releases, an allocation of a cached size or cuMemGetInfo the cache's
 *   entries of that size or device, an exec change the teardowns), so no
 *   release happens earlier or later than it did.
 * - The lock (rank VR_RANK_WAIT) is never held across an operation: the
 *   entries a drain retries are taken out first, so no two threads retry
 *   the same entry and no driver call runs under the lock.
 * - Never waits on the GPU except as its caller allows (`how`).
 */
#ifndef VR_WAITQ_H
#define VR_WAITQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

enum vr_wait_kind {
    VR_WAIT_TEARDOWN, /* slice reservations and events of a torn-down exec (tomb.h) */
    VR_WAIT_RELEASE,  /* freed VMM memory whose release is not finished */
    VR_WAIT_CACHE,    /* kept memory whose free's event is not yet seen complete */
    VR_WAIT_LINGER,   /* slots of a torn-down exec whose buffers live on (tomb.h) */
    VR_WAIT_KINDS
};
#define VR_WAIT_MASK(k) (1u << (k))

enum vr_wait_how {
    VR_WAIT_QUERY,    /* never block: query events only */
    VR_WAIT_MAY_SYNC, /* a hook that may block on the device, as the native call does */
    VR_WAIT_FINAL,    /* exit: everything goes, what the driver refuses is logged */
};

struct vr_wait;
struct vr_wait_ops {
    /* Tries to finish; true when done, and then the entry is the op's to
     * free. False keeps it for a later drain (never false under FINAL
     * unless it logged why it gives up: then it frees and returns true). */
    bool (*retry)(struct vr_wait *w, enum vr_wait_how how);
    /* Forgets the entry without a driver call (the driver is gone, or a
     * forked child's copy of the parent's): frees it. `fork`: in a child. */
    void (*forget)(struct vr_wait *w, bool fork);
};

struct vr_wait {
    const struct vr_wait_ops *ops;
    enum vr_wait_kind kind;
    struct vr_wait *next; /* the queue's */
};

/* Queues w (its ops and kind set). */
void vr_waitq_push(struct vr_wait *w);
/* Entries of the kinds in mask, queued now. One relaxed load when none. */
size_t vr_waitq_count(unsigned mask);
/* Entries of one kind, for a caller that asks on every launch: inline, one
 * relaxed load (the counts are read without the queue's lock). */
extern __attribute__((visibility("hidden"))) atomic_size_t vr_waitq_counts[VR_WAIT_KINDS];
static inline bool vr_waitq_none(enum vr_wait_kind k)
{
    return atomic_load_explicit(&vr_waitq_counts[k], memory_order_relaxed) == 0;
}
/* Retries the entries of the kinds in mask. */
void vr_waitq_drain(unsigned mask, enum vr_wait_how how);
/* The same, only the entries `match` accepts. match runs under the
 * queue's lock: it reads the entry it is given and takes no lock. */
typedef bool vr_wait_match(const struct vr_wait *w, const void *arg);
void vr_waitq_drain_if(unsigned mask, enum vr_wait_how how, vr_wait_match *match,
                       const void *arg);
/* At exit after the driver shut down: forgets those entries. */
void vr_waitq_abandon(unsigned mask);
/* In a forked child: the lock starts free; the entries of the kinds in
 * `forget` are the parent's and are forgotten, the others kept. */
void vr_waitq_after_fork(unsigned forget);
/* Every entry's kind in range, counts matching the list. */
bool vr_waitq_valid(void);

#endif
