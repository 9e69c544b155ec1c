/* tomb: reservations torn down while a launch may still read them.
 *
 * A slice reservation (slice.h) leaves an exec when its slices are dropped,
 * but a launch already queued may still read through it: it is kept here,
 * with an event recorded after the last launch that used it, and destroyed
 * at a later drain once that event has completed. Never waits, except at
 * exit (`final`), when a reservation whose completion is unknown is released
 * after its context finished its work. The shim's own events that the
 * driver refused to destroy wait here too (they must not outlive the shim).
 * Thread-safe: the entries are the waiting queue's (waitq.h), whose lock
 * is never held across a driver call.
 */
#ifndef VR_TOMB_H
#define VR_TOMB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "slice.h"
#include "waitq.h"

/* Keeps s (NULL: only `done` is left to destroy) until `done` completes;
 * done NULL: completion unknown, released at exit. ctx: the exec's,
 * synchronized at exit when completion is unknown. unused: no launch ever
 * read the slices (destroyed at the next drain). */
void vr_tomb_bury(struct vr_slices *s, CUevent done, CUcontext ctx, bool unused);
/* The same for n reservations that one event stands for (an exec's and its
 * variants', torn down together). */
void vr_tomb_bury_many(struct vr_slices *const *s, size_t n, CUevent done, CUcontext ctx,
                       bool unused);

/* The launches that could read s are complete (its exec is torn down):
 * the slots whose buffers were freed are unmapped now, the others stay
 * mapped until their buffers are freed (a kernel may have stored a slice
 * address in device memory: it stays valid as long as the program's own
 * address; vr_tomb_buffer_freed), then the reservation goes. */
void vr_tomb_retire(struct vr_slices *s, CUcontext ctx);
/* The allocation id is freed (the free observer): the slots that still map
 * it in torn-down reservations are unmapped, and a reservation whose last
 * slot went is freed. */
void vr_tomb_buffer_freed(uint64_t id);

/* Destroys an event of the shim's, or keeps it for a later drain when the
 * driver refuses. */
void vr_tomb_drop_event(CUevent ev);

/* Releases what is known idle; at exit (`final`), everything, logging a
 * `fallback` for what the driver would not take back. */
void vr_tomb_drain(bool final);
/* At exit, after the allocator's drain: every lingering reservation goes
 * (the program's buffers are gone with the process). */
void vr_tomb_drain_lingering(void);
/* vr_tomb_drain(false) for a caller on every launch: nothing but a load
 * when no teardown waits. */
static inline void vr_tomb_drain_some(void)
{
    if (!vr_waitq_none(VR_WAIT_TEARDOWN))
        vr_tomb_drain(false);
}

/* At exit after the driver shut down: forgets everything without a driver
 * call (vr_alloc_abandon says why). */
void vr_tomb_abandon(void);

/* In a forked child: the list's lock starts free. */
void vr_tomb_after_fork(void);

#endif
