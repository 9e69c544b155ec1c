/* Launch completion over a fake driver: an event after the last launch,
 * queried, never waited on; a query that says "not yet" is not repeated
 * until there is a newer launch; HOT records after every launch. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "driver.h"
#include "track.h"

static uintptr_t next_ev = 0x1000;
static int creates, records, queries, waits;
static bool ready;
static CUevent last_recorded;

static CUresult CUDAAPI f_current(CUcontext *c) { *c = (CUcontext)0x1; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_create(CUevent *e, unsigned f)
{
    (void)f;
    creates++;
    *e = (CUevent)(next_ev++);
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_record(CUevent e, CUstream s)
{
    (void)s;
    records++;
    last_recorded = e;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_query(CUevent e)
{
    (void)e;
    queries++;
    return ready ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult CUDAAPI f_destroy(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_wait(void) { waits++; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_ev_wait(CUevent e) { (void)e; waits++; return CUDA_SUCCESS; }

#define STREAM ((CUstream)0x500)
static struct vr_track t;

static void setup(void)
{
    vr_real.cuCtxGetCurrent = f_current;
    vr_real.cuEventCreate = f_create;
    vr_real.cuEventRecord = f_record;
    vr_real.cuEventQuery = f_query;
    vr_real.cuEventDestroy_v2 = f_destroy;
    vr_real.cuCtxSynchronize = f_wait;
    vr_real.cuEventSynchronize = f_ev_wait;
    vr_track_init(&t, (CUcontext)0x1);
}

TestSuite(track, .init = setup);

Test(track, completion_is_queried_never_assumed_nor_waited_for)
{
    vr_track_launched(&t, 0, STREAM, false, VR_TRACK_NORMAL);
    cr_assert_eq(records, 0, "a settled launch records only now and then");
    cr_assert_not(vr_track_complete(&t, 1));
    cr_assert_eq(records, 1, "asked: an event after the last launch");
    cr_assert_eq(queries, 1);
    ready = true;
    cr_assert_not(vr_track_complete(&t, 1), "no new launch: not asked again");
    cr_assert_eq(queries, 1);
    vr_track_launched(&t, 0, STREAM, false, VR_TRACK_NORMAL);
    cr_assert(vr_track_complete(&t, 1));
    cr_assert_eq(queries, 2);
    cr_assert(vr_track_complete(&t, 1), "known complete: no further query");
    cr_assert_eq(queries, 2);
    cr_assert_eq(waits, 0);
    vr_track_free(&t);
}

Test(track, known_asks_only_an_event_already_recorded)
{
    vr_track_launched(&t, 0, STREAM, false, VR_TRACK_NORMAL);
    ready = true;
    cr_assert_not(vr_track_known(&t, 1));
    cr_assert_eq(records, 0);
    cr_assert_eq(queries, 0);
    vr_track_synced(&t);
    cr_assert(vr_track_known(&t, 1), "a synchronized context completed everything");
    cr_assert_eq(waits, 0);
}

Test(track, hot_records_after_every_launch)
{
    for (int i = 0; i < 4; i++)
        vr_track_launched(&t, 0, STREAM, false, VR_TRACK_HOT);
    cr_assert_eq(records, 4);
    ready = true;
    cr_assert(vr_track_complete(&t, 4));
    cr_assert_eq(queries, 1);
    vr_track_free(&t);
}

Test(track, the_event_after_the_last_launch_is_handed_over)
{
    vr_track_launched(&t, 0, STREAM, false, VR_TRACK_NORMAL);
    CUevent ev = vr_track_event_after(&t);
    cr_assert_not_null(ev);
    cr_assert_eq(ev, last_recorded, "recorded after the last launch");
    cr_assert_eq(waits, 0);
}

Test(track, quiet_launches_record_nothing)
{
    vr_track_launched(&t, 0, NULL, false, VR_TRACK_QUIET);
    cr_assert_eq(records, 0);
    cr_assert_eq(creates, 0);
    cr_assert_null(vr_track_event_after(&t), "a relative stream of unknown identity");
}
