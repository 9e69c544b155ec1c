/* Never worse, third round (issue 15): the adversarial programs of
 * tests/apps/order_probe.c, each run without and with the shim. Every case
 * holds a launch behind a host function while the program does the thing
 * under test, so a shim that fails to order, keeps a slot mapped, or
 * records its events in the wrong stream or context gives a wrong value, a
 * crash or a failed call, deterministically. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

TestSuite(order, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* One case with and without the shim: equal output, the shim's run clean
 * (no warning: losing variants or an error of its own is a difference
 * too), and nothing of the shim's left alive. */
static void order_case(const char *which, const char *const *env)
{
    const char *args[] = {"--case", which, NULL};
    char t1[64], t2[64];
    struct vr_run plain, shim;
    snprintf(t1, sizeof t1, "%s_plain", which);
    snprintf(t2, sizeof t2, "%s_shim", which);
    cr_assert_eq(vr_run_app(t1, "order_probe", args, 0, env, &plain), 0);
    cr_assert_eq(plain.proc.status, 0, "%s without the shim: %s", which, plain.proc.err.p);
    cr_assert_eq(vr_run_app(t2, "order_probe", args, VR_RUN_SHIM, env, &shim), 0);
    cr_assert_eq(shim.proc.status, 0, "%s with the shim (status %d; 139 = SIGSEGV, 142 = hung): %s",
                 which, shim.proc.status, shim.proc.err.p);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p);
    cr_assert_null(strstr(shim.proc.err.p, "varemap: warning"), "%s: %s", which, shim.proc.err.p);
    cr_assert_eq(summary(&shim, "vmm_leaked_bytes"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Item 1: the scratch buffer freed and made again at the same address while
 * the exec is active; the node set again, or left alone, or freed with
 * cuMemFreeAsync. */
Test(order, buffer_freed_and_made_again_set_again) { order_case("realloc-set", NULL); }
Test(order, buffer_freed_and_made_again_graph_untouched) { order_case("realloc-keep", NULL); }
Test(order, buffer_freed_async_and_made_again) { order_case("realloc-async", NULL); }
Test(order, buffer_freed_and_made_again_with_variants) { order_case("realloc-vary", NULL); }

/* Item 2: two threads launch one exec into their per-thread default
 * streams: two streams to the driver, whatever the handle says. */
Test(order, per_thread_streams_of_two_threads_are_ordered) { order_case("ptds", NULL); }
Test(order, null_stream_through_ptsz_in_two_threads_is_ordered) { order_case("ptsz", NULL); }

/* Item 3: an update while a variant's launch runs; the next launch is the
 * program's exec's, in another state, and still ordered behind it. */
Test(order, update_v2_while_a_variant_runs) { order_case("update", NULL); }
Test(order, update_v1_while_a_variant_runs) { order_case("update-v1", NULL); }

/* Item 4: the exec destroyed by another thread while its last launch,
 * in a worker's per-thread stream, is held. */
Test(order, destroyed_from_another_thread_while_running) { order_case("destroy", NULL); }

/* Item 5: the exec's variants and events live in its own context. */
static const char *const two_devices[] = {"SIMCUDA_DEVICES=2", NULL};
Test(order, variants_live_in_the_execs_context) { order_case("ctx", two_devices); }
Test(order, variants_made_in_a_thread_without_a_context) { order_case("ctx-none", two_devices); }

/* Item 6: the stream of the previous launch destroyed (its handle perhaps
 * reused by the next stream made): no error of the shim's, still ordered. */
Test(order, stream_of_the_last_launch_destroyed) { order_case("dead-stream", NULL); }
