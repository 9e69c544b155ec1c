/* capture_guard over a fake driver: the thread's mode is relaxed inside a
 * guard and as it was after, nested guards make one exchange pair, and a
 * driver without the entry point (or refusing it) is left alone. */
#include <criterion/criterion.h>

#include "capture_guard.h"
#include "driver.h"

static _Thread_local CUstreamCaptureMode mode; /* the fake driver's per-thread mode */
static int exchanges, queries;
static CUresult exchange_answer;
static CUstreamCaptureMode mode_at_query;

static CUresult CUDAAPI f_exchange(CUstreamCaptureMode *m)
{
    exchanges++;
    if (exchange_answer != CUDA_SUCCESS)
        return exchange_answer;
    CUstreamCaptureMode prev = mode;
    mode = *m;
    *m = prev;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI f_query(CUevent ev)
{
    (void)ev;
    queries++;
    mode_at_query = mode;
    return CUDA_SUCCESS;
}

static void reset(void)
{
    mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    exchanges = queries = 0;
    exchange_answer = CUDA_SUCCESS;
    vr_real.cuThreadExchangeStreamCaptureMode = f_exchange;
    vr_real.cuEventQuery = f_query;
}

TestSuite(capture_guard, .init = reset);

Test(capture_guard, relaxed_inside_and_restored_after)
{
    vr_capture_relax();
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
    vr_capture_restore();
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(exchanges, 2);
}

Test(capture_guard, nested_guards_make_one_pair)
{
    mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    vr_capture_relax();
    vr_capture_relax();
    vr_capture_restore();
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_RELAXED, "the outer guard still holds");
    vr_capture_restore();
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cr_assert_eq(exchanges, 2);
}

Test(capture_guard, a_relaxed_thread_costs_one_call)
{
    mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    vr_capture_relax();
    vr_capture_restore();
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
    cr_assert_eq(exchanges, 1);
}

Test(capture_guard, a_refused_exchange_restores_nothing)
{
    exchange_answer = CUDA_ERROR_UNKNOWN;
    vr_capture_relax();
    vr_capture_restore();
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(exchanges, 1);
}

Test(capture_guard, no_entry_point_no_call)
{
    vr_real.cuThreadExchangeStreamCaptureMode = NULL;
    vr_capture_relax();
    vr_capture_restore();
    cr_assert_eq(exchanges, 0);
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

Test(capture_guard, the_tables_event_query_is_relaxed)
{
    struct vr_driver d = vr_real;
    vr_capture_guard_table(&d);
    vr_capture_guard_table(&d); /* once only */
    cr_assert_neq((void *)d.cuEventQuery, (void *)f_query);
    cr_assert_eq(d.cuEventQuery(NULL), CUDA_SUCCESS);
    cr_assert_eq(queries, 1);
    cr_assert_eq(mode_at_query, CU_STREAM_CAPTURE_MODE_RELAXED);
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(exchanges, 2);
}

/* vr_capture_stream_busy: no driver question while no capture the shim saw
 * runs; then the stream's status, and "busy" where the driver will not
 * tell (its own error is the program's call's to meet). */
static int is_capturing_calls;
static CUresult is_capturing_answer;
static CUstreamCaptureStatus is_capturing_status;

static CUresult CUDAAPI f_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    is_capturing_calls++;
    if (is_capturing_answer == CUDA_SUCCESS)
        *st = is_capturing_status;
    return is_capturing_answer;
}

#include "graph_rec.h"

Test(capture_guard, stream_busy_asks_only_while_capturing)
{
    CUstream s = (CUstream)(void *)0x77;
    vr_real.cuStreamIsCapturing = f_is_capturing;
    vr_real.cuStreamIsCapturing_ptsz = f_is_capturing;
    is_capturing_calls = 0;
    is_capturing_answer = CUDA_SUCCESS;
    is_capturing_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    cr_assert_not(vr_capture_stream_busy(s, false));
    cr_assert_eq(is_capturing_calls, 0, "asked while no capture ran");
    vr_grec_capture_begin((CUstream)(void *)0x78, false);
    cr_assert(vr_capture_stream_busy(s, false));
    is_capturing_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    cr_assert(vr_capture_stream_busy(s, true));
    is_capturing_status = CU_STREAM_CAPTURE_STATUS_NONE;
    cr_assert_not(vr_capture_stream_busy(s, false));
    is_capturing_answer = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    cr_assert(vr_capture_stream_busy(NULL, false));
    cr_assert_eq(is_capturing_calls, 4);
    vr_grec_capture_end((CUstream)(void *)0x78, false, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                        NULL);
    cr_assert_not(vr_capture_stream_busy(s, false));
    cr_assert_eq(is_capturing_calls, 4);
}
