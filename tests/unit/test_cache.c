/* The freed-memory cache over a fake driver: an entry freed in stream order
 * is served only once its event is seen complete, through its reminder on
 * the waiting queue; the event stays the entry's (eviction takes it to the
 * release, the reminder then frees itself without a query); a settle asks
 * only the entries of its size; a failed query releases the entry; abandon
 * and after-fork forget entries and reminders without a driver call. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "alloc_int.h"
#include "driver.h"
#include "fake_driver.h"
#include "waitq.h"

#define EVENTS 4
static CUresult ev_state[EVENTS]; /* what a query of event i says */
static int queries[EVENTS], destroys[EVENTS];
static int ev_waits;

static int index_of(CUevent e)
{
    int i = (int)((uintptr_t)e - 0x10);
    cr_assert(i >= 0 && i < EVENTS, "an event the test never made");
    return i;
}
#define EV(i) ((CUevent)(uintptr_t)(0x10 + (i)))

static CUresult CUDAAPI f_query(CUevent e)
{
    int i = index_of(e);
    cr_assert_eq(destroys[i], 0, "queried after its destroy");
    queries[i]++;
    return ev_state[i];
}
static CUresult CUDAAPI f_ev_sync(CUevent e)
{
    (void)index_of(e);
    ev_waits++;
    return CUDA_ERROR_UNKNOWN;
}
static CUresult CUDAAPI f_destroy(CUevent e)
{
    int i = index_of(e);
    cr_assert_eq(destroys[i], 0, "destroyed twice");
    destroys[i]++;
    return CUDA_SUCCESS;
}
#define MB ((size_t)1 << 20)
#define CACHE VR_WAIT_MASK(VR_WAIT_CACHE)

static void setup(void)
{
    fake_vmm_install();
    vr_real.cuEventQuery = f_query;
    vr_real.cuEventSynchronize = f_ev_sync;
    vr_real.cuEventDestroy_v2 = f_destroy;
    for (int i = 0; i < EVENTS; i++)
        ev_state[i] = CUDA_ERROR_NOT_READY;
    struct vr_config cfg = { .mode = VR_MODE_PROFILED, .vmm_cache = 4 * MB };
    vr_alloc_configure(&cfg);
}

TestSuite(cache, .init = setup);

static struct vr_alloc_info freed(CUdeviceptr base, size_t padded)
{
    return (struct vr_alloc_info){ .id = base >> 20, .base = base, .size = padded,
                                   .padded = padded, .reserved = padded + MB, .device = 0,
                                   .vmm = true, .eligible = true, .handle = base + 1 };
}

Test(cache, a_stream_ordered_free_is_served_only_once_its_event_completed)
{
    struct vr_alloc_info a = freed(0x10000000, 2 * MB);
    cr_assert(vr_cache_put(&a, NULL, EV(0), 0));
    cr_assert_eq(vr_waitq_count(CACHE), 1, "its reminder waits on the queue");
    cr_assert_eq(vr_cache_idle_bytes(0), 0, "not free as far as the program can tell yet");
    struct kept k;
    cr_assert_eq(vr_cache_take(0, 2 * MB, &k), -ENOENT, "its free's work may still run");
    cr_assert_geq(queries[0], 1, "asked");
    cr_assert_eq(ev_waits + fk.syncs, 0, "never waited on");
    ev_state[0] = CUDA_SUCCESS;
    cr_assert_eq(vr_cache_take(0, 2 * MB, &k), 0);
    cr_assert_eq(k.rec.base, a.base);
    cr_assert_null(k.done);
    cr_assert_eq(destroys[0], 1, "the event went once it said done");
    cr_assert_eq(vr_waitq_count(CACHE), 0, "and its reminder with it");
    cr_assert_eq(fk.unmaps, 0, "served still mapped");
    cr_assert(vr_cache_valid());
}

Test(cache, eviction_takes_the_event_with_it_and_the_reminder_only_goes)
{
    struct vr_alloc_info a = freed(0x10000000, 2 * MB), b = freed(0x20000000, 3 * MB);
    cr_assert(vr_cache_put(&a, NULL, EV(0), 0));
    cr_assert(vr_cache_put(&b, NULL, NULL, 0), "evicts a: 5 MB would not fit in 4");
    cr_assert_eq(fk.unmaps, 0, "a's free's work may still run: its release waits");
    cr_assert_eq(vr_waitq_count(VR_WAIT_MASK(VR_WAIT_RELEASE)), 1);
    int asked = queries[0];
    vr_cache_settle(-1, 0);
    cr_assert_eq(queries[0], asked, "the reminder finds its entry gone: no query");
    cr_assert_eq(vr_waitq_count(CACHE), 0);
    ev_state[0] = CUDA_SUCCESS;
    vr_park_drain(false);
    cr_assert_eq(fk.unmaps, 1, "released once its event completed");
    cr_assert_eq(destroys[0], 1, "by the release, once");
    cr_assert(vr_cache_valid());
}

Test(cache, a_settle_asks_only_the_entries_of_its_size)
{
    struct vr_alloc_info a = freed(0x10000000, 1 * MB), b = freed(0x20000000, 2 * MB);
    cr_assert(vr_cache_put(&a, NULL, EV(0), 0));
    cr_assert(vr_cache_put(&b, NULL, EV(1), 0));
    vr_cache_settle(0, 2 * MB);
    cr_assert_eq(queries[0], 0);
    cr_assert_eq(queries[1], 1);
    vr_cache_settle(0, 0);
    cr_assert_eq(queries[0], 1, "any size");
    cr_assert_eq(queries[1], 2);
    vr_cache_settle(1, 0);
    cr_assert_eq(queries[0] + queries[1], 3, "another device's: none");
}

Test(cache, a_failed_query_releases_the_entry)
{
    struct vr_alloc_info a = freed(0x10000000, 2 * MB);
    cr_assert(vr_cache_put(&a, NULL, EV(0), 0));
    ev_state[0] = CUDA_ERROR_LAUNCH_FAILED;
    struct kept k;
    cr_assert_eq(vr_cache_take(0, 2 * MB, &k), -ENOENT, "its event cannot tell: never served");
    cr_assert_not(vr_cache_any());
    cr_assert_eq(vr_waitq_count(CACHE), 0);
    cr_assert_eq(destroys[0], 1, "the release destroyed it");
    cr_assert_eq(fk.unmaps, 0, "after a synchronize only, which a query-only drain cannot make");
    vr_park_drain(true);
    cr_assert_eq(fk.syncs, 1);
    cr_assert_eq(fk.unmaps, 1);
}

Test(cache, exit_releases_every_entry_and_reminder)
{
    struct vr_alloc_info a = freed(0x10000000, 2 * MB), b = freed(0x20000000, 1 * MB);
    cr_assert(vr_cache_put(&a, NULL, EV(0), 0));
    cr_assert(vr_cache_put(&b, NULL, NULL, 0));
    ev_state[0] = CUDA_SUCCESS;
    vr_alloc_drain();
    cr_assert_not(vr_cache_any());
    cr_assert_eq(vr_waitq_count(~0u), 0);
    cr_assert_eq(fk.unmaps, 2);
    cr_assert_eq(destroys[0], 1);
}

Test(cache, abandon_and_after_fork_forget_without_a_driver_call)
{
    struct vr_alloc_info a = freed(0x10000000, 2 * MB), b = freed(0x20000000, 1 * MB);
    cr_assert(vr_cache_put(&a, NULL, EV(0), 0));
    vr_alloc_after_fork();
    cr_assert_not(vr_cache_any());
    cr_assert_eq(vr_waitq_count(CACHE), 0, "the parent's reminder is forgotten");
    cr_assert(vr_cache_put(&b, NULL, EV(1), 0));
    vr_alloc_abandon();
    cr_assert_not(vr_cache_any());
    cr_assert_eq(vr_waitq_count(~0u), 0);
    cr_assert_eq(queries[0] + queries[1] + destroys[0] + destroys[1] + fk.unmaps, 0);
}
