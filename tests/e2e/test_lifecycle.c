/* Lifecycle and routing end to end: a rebind that must wait for a launch
 * still in flight, cuGraphExecUpdate restarting the profile, and a
 * cuGetProcAddress answer the shim cannot name. Every case compares every
 * output byte with the same program run without the shim. */
#include <stdio.h>

#include "checks.h"

TestSuite(lifecycle, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static void pair(struct vr_run *plain, struct vr_run *shim, const char *tag, const char *app,
                 const char *const *args, const char *const *env)
{
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "%s_plain", tag);
    snprintf(t2, sizeof t2, "%s_shim", tag);
    run_ok(plain, t1, app, args, 0, env);
    run_ok(shim, t2, app, args, VR_RUN_SHIM, env);
    same_output(plain, shim, tag);
}

/* X is replaced every 3 steps and the old buffer is not freed (no implicit
 * synchronization), while every kernel takes 200 us: the next launch finds
 * the previous one still running on the slice it must remap. */
Test(lifecycle, rebind_waits_for_the_launch_in_flight)
{
    static const char *const args[] = { "--pattern", "swap", "--k", "3", "--bytes", "1048576",
                                        NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=200", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "swap", "graph_linked", args, env);
    uint64_t rebinds = summary(&shim, "rebinds"), waits = summary(&shim, "rebind_waits");
    cr_assert_geq(rebinds, 15, "X replaced 19 times, only %llu rebinds",
                  (unsigned long long)rebinds);
    cr_assert_gt(waits, 0, "no rebind waited although launches were in flight");
    cr_assert_leq(waits, rebinds);
    static const char *const waited[] = { "\"event\":\"slice_rebind\"", "\"waited\":true", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, waited), waits,
                 "slice_rebind events with waited:true must match rebind_waits");
    cr_assert_eq(summary(&shim, "vmm_bytes"), 0, "memory left mapped at exit");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* cuGraphExecUpdate: forwarded, the slices dropped, the profile restarted
 * on the new graph's nodes, and the exec remapped again. */
Test(lifecycle, exec_update_restarts_the_profile)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", "1048576",
                                        "--update-at", "20", "--execs", "2", NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=50", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "update", "graph_linked", args, env);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphExecUpdate_v2"), 2,
                 "each exec is updated once, through the driver");
    cr_assert_eq(vr_log_count(&shim.log, "exec_reset"), 2);
    cr_assert_eq(vr_log_count(&shim.log, "profile_decision"), 4,
                 "one decision before and one after each reset");
    static const char *const active[] = { "\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                          NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, active), 4);
    /* Each exec is launched 30 times, 10 of them before its update; after a
     * reset it profiles 3 launches again, so at most 2 * (4 + 4) launches'
     * worth of SetParams reach the driver from the program. */
    uint64_t fwd = summary(&shim, "setparams_forwarded");
    cr_assert_leq(fwd, 2 * 8 * 18, "%llu SetParams forwarded", (unsigned long long)fwd);
    cr_assert_eq(summary(&shim, "execs_active"), 0);
    cr_assert_eq(summary(&shim, "slices_bound"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* The driver answers cuGetProcAddress("cuGraphLaunch") with an entry that
 * has no exported name and matches no known variant: the shim must hand the
 * program the driver's pointer (so it still works) and make the miss
 * visible. */
Test(lifecycle, unnamed_proc_address_is_counted_and_still_works)
{
    static const char *const args[] = { "--pattern", "rebind", "--bytes", "1048576", NULL };
    static const char *const env[] = { "SIMCUDA_PROC_INTERNAL=1", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "internal", "graph_procaddr", args, env);
    cr_assert_geq(summary(&shim, "unrouted_procs"), 1);
    static const char *const miss[] = { "\"event\":\"fallback\"", "\"what\":\"cuGetProcAddress\"",
                                        "cuGraphLaunch", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, miss), 1);
    cr_assert_eq(summary(&shim, "launches"), 0, "the launches bypassed the shim");
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphLaunch_ptsz"), shim.launches,
                 "the driver still received every launch");
    cr_assert_eq(vr_log_count(&shim.log, "profile_decision"), 0,
                 "without launches there is no profile to decide on");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Without the knob, the same program's launches are routed through the shim. */
Test(lifecycle, named_proc_address_is_routed)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", "1048576", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "named", "graph_procaddr", args, NULL);
    cr_assert_eq(summary(&shim, "unrouted_procs"), 0);
    cr_assert_eq(summary(&shim, "launches"), shim.launches);
    cr_assert_eq(vr_log_count(&shim.log, "profile_decision"), 1);
    vr_run_free(&plain);
    vr_run_free(&shim);
}
