/* capture_guard: the shim's own driver calls never break a program's stream
 * capture.
 *
 * Why: cuda.h (cuThreadExchangeStreamCaptureMode) prohibits "potentially
 * unsafe" calls in a thread whose capture mode is not relaxed while that
 * thread holds a capture not begun relaxed, or, for a thread in global mode
 * (the default), while any thread holds a CU_STREAM_CAPTURE_MODE_GLOBAL
 * capture (PyTorch captures so). A prohibited call is refused and the
 * capture invalidated: one made by the shim on its own behalf, inside a
 * program call that is itself allowed (a launch, an update, a stream-ordered
 * free), would end the program's capture with an error it never caused.
 *
 * Contract:
 * - vr_capture_relax() exchanges the calling thread's mode to relaxed;
 *   vr_capture_restore() puts back the mode it found. Pairs nest: only the
 *   outermost pair calls the driver. Pair them on one thread, in one
 *   function, with no return in between.
 * - Wrap the shim's own calls only (housekeeping: event queries, deferred
 *   releases, remaps, teardown), never a call that stands for the
 *   program's own (the VMM calls serving its cuMemAlloc, the synchronize of
 *   its cuMemFree): a program's prohibited call must meet the driver's
 *   refusal, as it would without the shim.
 * - Cost: two calls of cuThreadExchangeStreamCaptureMode (a thread-local
 *   swap in the driver) per outermost pair, one when the thread was already
 *   relaxed; none without the entry point (a driver older than 10.1: no
 *   modes to mind). No lock, no allocation, initial-exec TLS. A failed
 *   exchange leaves the mode as it was and restores nothing.
 * - Calls through the typed table (vr_real) only.
 */
#ifndef VR_CAPTURE_GUARD_H
#define VR_CAPTURE_GUARD_H

void vr_capture_relax(void);
void vr_capture_restore(void);

/* Whether stream s (ptsz: named through a per-thread entry point) is in a
 * capture, or its capture state cannot be told (the driver's own error for
 * the stream: a bad handle, the legacy stream beside a capture): then the
 * program's call goes to the driver as it is, with nothing of the shim's
 * recorded or enqueued on s, so that it meets the driver's own answer and
 * the capture holds only the program's nodes. Asked only while a capture
 * the shim saw runs (graph_rec.h, one relaxed load otherwise); one
 * cuStreamIsCapturing then. */
#include <cuda.h>
#include <stdbool.h>
bool vr_capture_stream_busy(CUstream s, bool ptsz);

/* Whether the calling thread's capture mode is relaxed, so that the driver
 * refuses it no "potentially unsafe" call (a mode read inside a
 * vr_capture_relax pair is the one the pair put aside). Two calls of
 * cuThreadExchangeStreamCaptureMode (none without the entry point: no modes,
 * answered true); ask it only while vr_grec_capturing(), so that the
 * common path makes no driver call. */
bool vr_capture_thread_relaxed(void);

struct vr_driver;
/* Called once, when the driver table is published: every use of
 * vr_real.cuEventQuery is the shim's own (the program's cuEventQuery is not
 * hooked), so the table's entry itself is made relaxed, which covers the
 * completion queries of exec.c/variant.c until they bracket their own calls
 * (nesting makes that harmless). */
void vr_capture_guard_table(struct vr_driver *d);

#endif
