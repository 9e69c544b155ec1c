#include "capture_guard.h"

#include <stdbool.h>

#include "driver.h"
#include "graph_rec.h"

static _Thread_local unsigned depth;
static _Thread_local bool exchanged;
static _Thread_local CUstreamCaptureMode saved;

void vr_capture_relax(void)
{
    if (depth++ != 0 || !vr_real.cuThreadExchangeStreamCaptureMode)
        return;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    exchanged = vr_real.cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
    saved = mode;
}

static CUresult(CUDAAPI *real_event_query)(CUevent);

static CUresult CUDAAPI relaxed_event_query(CUevent ev)
{
    vr_capture_relax();
    CUresult r = real_event_query(ev);
    vr_capture_restore();
    return r;
}

void vr_capture_guard_table(struct vr_driver *d)
{
    if (!d->cuEventQuery || !d->cuThreadExchangeStreamCaptureMode ||
        d->cuEventQuery == relaxed_event_query)
        return;
    real_event_query = d->cuEventQuery;
    d->cuEventQuery = relaxed_event_query;
}

void vr_capture_restore(void)
{
    if (depth == 0 || --depth != 0 || !exchanged)
        return;
    exchanged = false;
    /* Relaxed before, relaxed now: nothing to put back. */
    if (saved == CU_STREAM_CAPTURE_MODE_RELAXED)
        return;
    CUstreamCaptureMode mode = saved;
    vr_real.cuThreadExchangeStreamCaptureMode(&mode);
}

bool vr_capture_stream_busy(CUstream s, bool ptsz)
{
    if (!vr_grec_capturing())
        return false;
    CUresult (*is)(CUstream, CUstreamCaptureStatus *) =
        ptsz && vr_real.cuStreamIsCapturing_ptsz ? vr_real.cuStreamIsCapturing_ptsz
                                                 : vr_real.cuStreamIsCapturing;
    if (!is)
        return false;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return is(s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool vr_capture_thread_relaxed(void)
{
    if (depth != 0 && exchanged)
        return saved == CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!vr_real.cuThreadExchangeStreamCaptureMode)
        return true;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (vr_real.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS)
        return false; /* unknown: the driver is asked, not the shim's guess */
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        CUstreamCaptureMode back = mode;
        vr_real.cuThreadExchangeStreamCaptureMode(&back);
    }
    return mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}
