/* What a captured graph holds, node for node, and what a capture refuses
 * (issue 30, items 3 and 7): capture_nodes with and without the shim, the
 * same stdout, and simcuda's counts. Each case failed on the shim before
 * its fix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

TestSuite(captured, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static const char *const update_syms[] = {"cuGraphExecUpdate_v2", "cuGraphExecUpdate", NULL};

/* capture_nodes ARGS without and with the shim (in `mode`): the same
 * stdout; both runs kept. */
static void pair(const char *tag, const char *const *args, const char *mode, struct vr_run *plain,
                 struct vr_run *shim)
{
    char t1[96], t2[96];
    snprintf(t1, sizeof t1, "%s_plain", tag);
    snprintf(t2, sizeof t2, "%s_shim", tag);
    const char *env[] = {mode, NULL};
    cr_assert_eq(vr_run_app(t1, "capture_nodes", args, 0, NULL, plain), 0);
    cr_assert_eq(plain->proc.status, 0, "%s without the shim: %s", tag, plain->proc.err.p);
    cr_assert_eq(vr_run_app(t2, "capture_nodes", args, VR_RUN_SHIM, env, shim), 0);
    cr_assert_eq(shim->proc.status, 0, "%s with the shim: %s", tag, shim->proc.err.p);
    cr_assert_str_eq(plain->proc.out.p, shim->proc.out.p, "%s", tag);
    cr_assert(vr_sim_ok(&shim->stats), "%s: no simcuda call counts", tag);
}

/* A zero-byte captured op and an event record node added after the
 * capture: the record the shim kept for the zero-byte call and the node it
 * did not see cancel out in a count. Every update changes the event, so
 * every one reaches the driver (an absorbed one leaves the exec recording
 * the old event: cuEventElapsedTime on the new one fails). */
static void zero_node(const char *which, const char *op, const char *mode)
{
    const char *args[] = {"--case", which, "--op", op, "--steps", "6", NULL};
    char tag[64];
    snprintf(tag, sizeof tag, "%s_%s_%s", which, op, mode + strlen("VAREMAP_MODE="));
    struct vr_run plain, shim;
    pair(tag, args, mode, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 5, "%s", tag);
    cr_assert_eq(sim_sum(&shim, update_syms), 5, "%s: %llu updates reached the driver", tag,
                 (unsigned long long)sim_sum(&shim, update_syms));
    if (!strcmp(which, "zero_event")) /* every event recorded */
        cr_assert(strstr(shim.proc.out.p, "CUDA_ERROR") == NULL, "%s:\n%s", tag, shim.proc.out.p);
    else /* every launch held by its gate */
        cr_assert_eq(vr_count_lines_with(&shim.proc.out,
                                         (const char *const[]){"gated CUDA_ERROR_NOT_READY", NULL}),
                     6, "%s:\n%s", tag, shim.proc.out.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

static void zero_event(const char *op, const char *mode)
{
    zero_node("zero_event", op, mode);
}

Test(captured, zero_memset8_and_event_node_forwarded) { zero_event("memset8", "VAREMAP_MODE=profiled"); }
Test(captured, zero_memset32_and_event_node_forwarded) { zero_event("memset32", "VAREMAP_MODE=profiled"); }
Test(captured, zero_memcpy_and_event_node_forwarded) { zero_event("memcpy", "VAREMAP_MODE=profiled"); }
Test(captured, zero_memset8_and_event_node_dedup) { zero_event("memset8", "VAREMAP_MODE=dedup"); }
/* The same with an event wait node: the exec that kept the old (complete)
 * event would not wait for the gated one. */
Test(captured, zero_memset8_and_wait_node_forwarded) { zero_node("zero_wait", "memset8", "VAREMAP_MODE=profiled"); }
Test(captured, zero_memcpy_and_wait_node_observe) { zero_node("zero_wait", "memcpy", "VAREMAP_MODE=observe"); }

/* Zero-byte ops alone: the recorder adds no node for them, as the driver
 * does not (docs/design.md), so its records stay exact: every update
 * absorbed, and no graph read through the getters (the one user of
 * cuGraphNodeGetDependencies). */
static void zero_only(const char *op)
{
    const char *args[] = {"--case", "zero_only", "--op", op, "--steps", "6", NULL};
    char tag[64];
    snprintf(tag, sizeof tag, "zero_only_%s", op);
    struct vr_run plain, shim;
    pair(tag, args, "VAREMAP_MODE=profiled", &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 5, "%s", tag);
    cr_assert_eq(sim_sum(&shim, update_syms), 0, "%s", tag);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0,
                 "%s: a graph was read through the getters (its record was not trusted)", tag);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 5, "%s", tag);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(captured, zero_memset8_records_no_node) { zero_only("memset8"); }
Test(captured, zero_memset32_records_no_node) { zero_only("memset32"); }
Test(captured, zero_memcpy_records_no_node) { zero_only("memcpy"); }

/* cuMemFreeAsync of a shim-backed buffer into a capturing stream: the
 * driver's refusal (an H200: CUDA_ERROR_INVALID_VALUE, the capture not
 * invalidated), the buffer still the program's (the captured kernel reads
 * it, then it is read back and freed once), and no event of the shim's
 * recorded on the capturing stream. */
static void free_in_capture(const char *extra)
{
    const char *args[] = {"--case", "free_in_capture", extra, NULL};
    struct vr_run plain, shim;
    pair(extra ? "free_in_capture_ptsz" : "free_in_capture", args, "VAREMAP_MODE=profiled",
         &plain, &shim);
    static const char *const want[] = {"free in capture: CUDA_ERROR_INVALID_VALUE\n",
                                       "launch after it: CUDA_SUCCESS\n",
                                       "end capture: CUDA_SUCCESS graph yes\n",
                                       "y[0] 6.0 y[63] 6.0\n",
                                       "x[0] 3.0 x[last] 3.0\n", "x[7] 5.0\n",
                                       "free: CUDA_SUCCESS\n", NULL};
    for (size_t i = 0; want[i]; i++)
        cr_assert(strstr(shim.proc.out.p, want[i]), "missing %s in:\n%s", want[i],
                  shim.proc.out.p);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuEventRecord"), 0);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuEventRecord_ptsz"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(captured, free_async_in_capture_refused) { free_in_capture(NULL); }
Test(captured, free_async_ptsz_in_capture_refused) { free_in_capture("--ptsz"); }

/* An exec launched into a capturing stream, and beside one: the driver's
 * answers, and the captured graph holds the program's nodes only. */
Test(captured, launch_into_capture_gets_the_drivers_answer)
{
    const char *args[] = {"--case", "launch_in_capture", NULL};
    struct vr_run plain, shim;
    pair("launch_in_capture", args, "VAREMAP_MODE=profiled", &plain, &shim);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(captured, launch_beside_capture_adds_no_node)
{
    const char *args[] = {"--case", "launch_beside_capture", NULL};
    static const char *const still[] = {"VAREMAP_SLICE_STILL=1", NULL};
    vr_shim_env = still;
    struct vr_run plain, shim;
    pair("launch_beside_capture", args, "VAREMAP_MODE=profiled", &plain, &shim);
    vr_shim_env = NULL;
    cr_assert(strstr(shim.proc.out.p, "captured nodes 1"), "%s", shim.proc.out.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* An active exec destroyed while the stream of its launches captures
 * (relaxed): the event after its last launch that lets its slices go must
 * be recorded outside the capture. One recorded into it stood for nothing
 * and the slices were unmapped under the launches still running (simcuda
 * crashed in the kernel). */
Test(captured, exec_destroyed_while_its_stream_captures)
{
    const char *args[] = {"--case", "destroy_in_capture", NULL};
    static const char *const still[] = {"VAREMAP_SLICE_STILL=1", NULL};
    vr_shim_env = still;
    struct vr_run plain, shim;
    pair("destroy_in_capture", args, "VAREMAP_MODE=profiled", &plain, &shim);
    vr_shim_env = NULL;
    static const char *const active[] = {"\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                         NULL};
    cr_assert_geq(vr_count_lines_with(&shim.log, active), 1, "no slices:\n%s", shim.log.p);
    cr_assert(strstr(shim.proc.out.p, "captured nodes 1"), "%s", shim.proc.out.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}
