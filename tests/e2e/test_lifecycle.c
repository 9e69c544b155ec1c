/* Lifecycle and routing end to end: a rebind that must wait for a launch
 * still in flight, cuGraphExecUpdate restarting the profile, and a
 * cuGetProcAddress answer the shim cannot name. Every case compares every
 * output byte with the same program run without the shim. */
#include <stdio.h>

#include "checks.h"

/* The suite checks an exec's life with slices (made, updated, destroyed, shared between threads and captures) on scenarios whose buffers do not move
 * while profiled: their execs get slices only when still buffers do. */
static const char *const slice_still[] = {"VAREMAP_SLICE_STILL=1", NULL};

static void setup(void)
{
    vr_tmp_setup();
    vr_shim_env = slice_still;
}

TestSuite(lifecycle, .init = setup, .fini = vr_tmp_teardown);

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
 * synchronization), while every kernel takes 200 us: the next launch often
 * finds the previous one still running on the slice it would remap. The shim
 * never waits for it: the nodes are passed through as the program set them
 * and the slice is remapped at a launch that finds the exec idle. */
Test(lifecycle, rebind_never_waits_for_the_launch_in_flight)
{
    static const char *const args[] = { "--pattern", "swap", "--k", "3", "--bytes", "1048576",
                                        NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=200", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "swap", "graph_linked", args, env);
    cr_assert_eq(summary(&shim, "rebind_waits"), 0);
    static const char *const waited[] = { "\"event\":\"slice_rebind\"", "\"waited\":true", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, waited), 0);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuEventSynchronize"), 0, "the shim waited on an event");
    /* Never more driver updates than the program made, besides the one-time
     * transition. */
    uint64_t sp_plain = sim_sum(&plain, setparams_syms), sp_shim = sim_sum(&shim, setparams_syms);
    cr_assert_leq(sp_shim, sp_plain + summary(&shim, "transition_updates"),
                  "%llu driver updates with the shim, %llu without",
                  (unsigned long long)sp_shim, (unsigned long long)sp_plain);
    cr_assert_eq(summary(&shim, "vmm_bytes"), 0, "memory left mapped at exit");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* cuGraphExecUpdate from a graph of the same topology with this step's
 * arguments (issue 19): no update reaches the driver; the changed nodes go
 * through the SetParams path, the exec keeps its slices and its decision. */
Test(lifecycle, exec_update_keeps_the_profile)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", "1048576",
                                        "--update-at", "20", "--execs", "2", NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=50", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "update", "graph_linked", args, env);
    cr_assert_eq(vr_sim_calls(&plain.stats, "cuGraphExecUpdate_v2"), 2);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphExecUpdate_v2"), 0,
                 "each exec's update absorbed");
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 2);
    cr_assert_eq(vr_log_count(&shim.log, "exec_reset"), 0);
    cr_assert_eq(vr_log_count(&shim.log, "profile_decision"), 2, "one decision per exec");
    static const char *const active[] = { "\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                          NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, active), 2);
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

/* cuMemAlloc served by VMM behaves like the native allocation: the logical
 * range, the driver's own errors for interior, double and unknown frees, and
 * memory really returned on free. */
Test(lifecycle, vmm_backed_allocation_looks_native)
{
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app("probe_plain", "alloc_probe", NULL, 0, NULL, &plain), 0);
    cr_assert_eq(vr_run_app("probe_shim", "alloc_probe", NULL, VR_RUN_SHIM, NULL, &shim), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    cr_assert_eq(shim.proc.status, 0, "%s", shim.proc.err.p);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p);
    cr_assert(strstr(plain.proc.out.p, "range base_ok=1 size=3149824\n"), "%s", plain.proc.out.p);
    cr_assert(strstr(plain.proc.out.p, "free_interior=CUDA_ERROR_INVALID_VALUE\n"));
    cr_assert(strstr(plain.proc.out.p, "free_again=CUDA_ERROR_INVALID_VALUE\n"));
    cr_assert(strstr(plain.proc.out.p, "shrunk=1 returned=1\n"));
    cr_assert(strstr(plain.proc.out.p, "free_async=CUDA_SUCCESS\nreturned_async=1\n"));
    /* 3 MiB + 4 KiB padded to the 2 MiB granularity: VMM really served it. */
    cr_assert(strstr(shim.proc.err.p, "vmm_bytes_live=4194304 padding_bytes_live=1044480\n"),
              "stderr: %s", shim.proc.err.p);
    /* The second allocation may reuse the first one's memory (the cache of
     * freed VMM memory); everything created is released by exit. */
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuMemCreate") + summary(&shim, "vmm_cache_hits"), 2);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuMemRelease"),
                 vr_sim_calls(&shim.stats, "cuMemCreate"));
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuMemFreeAsync"), 0,
                 "a VMM-backed allocation never reaches the driver's stream-ordered free");
    cr_assert_eq(vr_sim_calls(&plain.stats, "cuMemCreate"), 0);
    cr_assert_eq(summary(&shim, "vmm_bytes"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* A changed launch shape is not an argument: it must reach the driver, and
 * going back to the old shape too. Steps 7, 14, ..., 56 launch half the
 * blocks: 8 steps, each forwarding all 18 nodes and the next step again. */
Test(lifecycle, launch_shape_changes_are_forwarded)
{
    static const char *const args[] = { "--regrid", "7", "--bytes", "1048576", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "regrid", "graph_procaddr", args, NULL);
    uint64_t fwd = summary(&shim, "setparams_forwarded");
    uint64_t trans = summary(&shim, "transition_updates");
    cr_assert_eq(fwd, 8 * 2 * 18, "%llu forwarded", (unsigned long long)fwd);
    cr_assert_eq(sim_sum(&shim, setparams_syms), fwd + trans);
    cr_assert_eq(vr_log_count(&shim.log, "setparams_forwarded"), 0,
                 "per-update events are for log level debug only");
    vr_run_free(&plain);
    vr_run_free(&shim);

    /* At debug level every forwarded update says why. */
    static const char *const debug[] = { "VAREMAP_LOG_LEVEL=debug", NULL };
    struct vr_run dbg;
    run_ok(&dbg, "regrid_debug", "graph_procaddr", args, VR_RUN_SHIM, debug);
    static const char *const shape[] = { "\"event\":\"setparams_forwarded\"",
                                         "\"reason\":\"shape\"", NULL };
    cr_assert_eq(vr_count_lines_with(&dbg.log, shape), fwd);
    cr_assert_eq(vr_log_count(&dbg.log, "setparams_forwarded"), fwd);
    vr_run_free(&dbg);
}

/* cuGraphInstantiateWithParams is tracked like cuGraphInstantiateWithFlags. */
Test(lifecycle, instantiate_with_params_is_tracked)
{
    static const char *const args[] = { "--instantiate-with-params", "--pattern", "rebind",
                                         "--bytes", "1048576", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "withparams", "graph_procaddr", args, NULL);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphInstantiateWithParams"), 1);
    cr_assert_eq(vr_log_count(&shim.log, "exec_instantiated"), 1);
    static const char *const active[] = { "\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                          NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, active), 1);
    cr_assert_gt(summary(&shim, "rebinds"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Bad input to every hook gets the driver's own error, in every mode, and
 * the program carries on correctly afterwards. */
Test(lifecycle, bad_input_gets_the_drivers_errors)
{
    static const char *const modes[] = { "VAREMAP_MODE=profiled", "VAREMAP_MODE=off",
                                         "VAREMAP_MODE=dedup", "VAREMAP_MODE=observe" };
    struct vr_run plain;
    cr_assert_eq(vr_run_app("bad_plain", "bad_calls", NULL, 0, NULL, &plain), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    cr_assert(strstr(plain.proc.out.p, "value 1\n"), "%s", plain.proc.out.p);
    cr_assert_geq(vr_count_lines(&plain.proc.out, "cu"), 25);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        const char *const env[] = { modes[i], NULL };
        char tag[32];
        snprintf(tag, sizeof tag, "bad_shim%zu", i);
        struct vr_run shim;
        cr_assert_eq(vr_run_app(tag, "bad_calls", NULL, VR_RUN_SHIM, env, &shim), 0);
        cr_assert_eq(shim.proc.status, 0, "%s: %s", modes[i], shim.proc.err.p);
        cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p, "%s", modes[i]);
        cr_assert_eq(vr_log_count(&shim.log, "summary"), 1, "%s", modes[i]);
        vr_run_free(&shim);
    }
    vr_run_free(&plain);
}

/* Threads replaying their own graphs while re-allocating and freeing at once:
 * every thread's result as without the shim, slices rebound concurrently. */
Test(lifecycle, concurrent_threads_replaying_and_reallocating)
{
    static const char *const args[] = { "--threads", "4", "--steps", "40", "--k", "4", NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=100", NULL };
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app("storm_plain", "thread_storm", args, 0, env, &plain), 0);
    cr_assert_eq(vr_run_app("storm_shim", "thread_storm", args, VR_RUN_SHIM, env, &shim), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    cr_assert_eq(shim.proc.status, 0, "%s", shim.proc.err.p);
    cr_assert_eq(vr_count_lines(&plain.proc.out, "thread "), 4);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p);
    static const char *const active[] = { "\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                          NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, active), 4, "every thread's exec remapped");
    cr_assert_geq(summary(&shim, "rebinds"), 4 * 8, "Y is replaced 9 times per thread");
    cr_assert_eq(summary(&shim, "launches"), 160);
    cr_assert_eq(summary(&shim, "vmm_bytes"), 0);
    cr_assert_eq(summary(&shim, "slices_bound"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* dlsym(handle, "cu...") is the shim's wrapper only when the real answer lies
 * in libcuda: a mock library's own cuGraphLaunch stays its own. */
Test(lifecycle, dlsym_of_a_foreign_library_is_untouched)
{
    char lib[1024];
    snprintf(lib, sizeof lib, "%s/libvr_fake_cu.so", vr_env_path("VR_APPS_DIR"));
    const char *const args[] = { lib, NULL };
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app("foreign_plain", "probe_foreign", args, 0, NULL, &plain), 0);
    cr_assert_eq(vr_run_app("foreign_shim", "probe_foreign", args, VR_RUN_SHIM, NULL, &shim), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    cr_assert_eq(shim.proc.status, 0, "%s", shim.proc.err.p);
    cr_assert_str_eq(plain.proc.out.p, "777\n");
    cr_assert_str_eq(shim.proc.out.p, "777\n");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* The loader's answers stay the loader's (issue 15, item 9): a driver
 * opened with dlmopen(LM_ID_NEWLM) is used through its own symbols, not
 * through wrappers that would call the default namespace's driver; and
 * dlsym(RTLD_DEFAULT, "cu...") finds no entry point the loaded driver lacks,
 * nor any before a driver is loaded. */
static void loader_pair(const char *which, const char *const *must_have)
{
    const char *const args[] = { which, NULL };
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "loader_%s_plain", which);
    snprintf(t2, sizeof t2, "loader_%s_shim", which);
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app(t1, "loader_probe", args, 0, NULL, &plain), 0);
    /* A sanitized build: the driver's copy in the new namespace brings a
     * second sanitizer runtime, which cannot start (nothing of the shim's
     * runs yet); there is nothing to compare. */
    if (plain.proc.status != 0 && strstr(plain.proc.err.p, "ASan cannot proceed")) {
        vr_run_free(&plain);
        cr_skip_test("dlmopen of a sanitized driver: a second ASan runtime cannot start");
    }
    cr_assert_eq(vr_run_app(t2, "loader_probe", args, VR_RUN_SHIM, NULL, &shim), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    cr_assert_eq(shim.proc.status, 0, "%s", shim.proc.err.p);
    for (size_t i = 0; must_have[i]; i++)
        cr_assert(strstr(plain.proc.out.p, must_have[i]), "%s without the shim: no %s in\n%s",
                  which, must_have[i], plain.proc.out.p);
    cr_assert_str_eq(shim.proc.out.p, plain.proc.out.p, "%s: the shim changed the answers", which);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(lifecycle, a_driver_in_a_private_namespace_is_its_own)
{
    static const char *const want[] = { "private.copies CUDA_SUCCESS CUDA_SUCCESS same-bytes",
                                        NULL };
    loader_pair("newlm", want);
}

Test(lifecycle, rtld_default_finds_only_what_the_driver_has)
{
    /* Whole lines: "unloaded.X" holds "loaded.X". */
    static const char *const want[] = { "\nloaded.cuGraphExecKernelNodeSetParams_v3 absent\n",
                                        "unloaded.cuGraphLaunch absent\n",
                                        "\nloaded.cuGraphLaunch present\n", NULL };
    loader_pair("default", want);
}

/* One thread holds a global-mode stream capture (PyTorch's default) while
 * another replays graphs with calls the capture allows: the shim's own work
 * inside them (the profile decision's reservation and mappings, completion
 * queries, an exec's teardown, a stream-ordered free) must not invalidate
 * the capture (issue 15, item 12a); the program's bytes are the same. */
Test(lifecycle, the_shim_never_breaks_a_global_capture)
{
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app("capture_plain", "capture_threads", NULL, 0, NULL, &plain), 0);
    cr_assert_eq(vr_run_app("capture_shim", "capture_threads", NULL, VR_RUN_SHIM, NULL, &shim), 0);
    cr_assert_eq(plain.proc.status, 0, "%s%s", plain.proc.out.p, plain.proc.err.p);
    cr_assert(strstr(plain.proc.out.p, "capture.end CUDA_SUCCESS\n"), "%s", plain.proc.out.p);
    cr_assert_eq(shim.proc.status, 0, "%s%s", shim.proc.out.p, shim.proc.err.p);
    cr_assert_str_eq(shim.proc.out.p, plain.proc.out.p);
    static const char *const active[] = { "\"event\":\"profile_decision\"",
                                          "\"state\":\"active\"", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, active), 2,
                 "both execs remapped while the capture was held:\n%s", shim.log.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* capture_mem with and without the shim: the same bytes, and `want` in them
 * (the driver's answer, measured on an H200). */
static void capture_mem(const char *what, const char *const *want)
{
    const char *args[] = { what, NULL };
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "capmem_%s_plain", what);
    snprintf(t2, sizeof t2, "capmem_%s_shim", what);
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app(t1, "capture_mem", args, 0, NULL, &plain), 0);
    cr_assert_eq(vr_run_app(t2, "capture_mem", args, VR_RUN_SHIM, NULL, &shim), 0);
    cr_assert_eq(plain.proc.status, 0, "%s%s", plain.proc.out.p, plain.proc.err.p);
    for (size_t i = 0; want[i]; i++)
        cr_assert(strstr(plain.proc.out.p, want[i]), "%s not in:\n%s", want[i], plain.proc.out.p);
    cr_assert_eq(shim.proc.status, 0, "%s%s", shim.proc.out.p, shim.proc.err.p);
    cr_assert_str_eq(shim.proc.out.p, plain.proc.out.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Beside another thread's global capture, a global-mode cuMemAlloc of 2 MiB
 * is refused and invalidates the capture, though the VMM calls that would
 * serve it under the shim are allowed: the program meets the driver's own
 * refusal, not the shim's success. */
Test(lifecycle, an_alloc_beside_a_global_capture_meets_the_drivers_refusal)
{
    static const char *const want[] = {
        "worker.mem_alloc CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED\n",
        "capture.end CUDA_ERROR_STREAM_CAPTURE_INVALIDATED\n", NULL };
    capture_mem("alloc", want);
}

/* A relaxed thread frees 2 MiB (VMM-backed under the shim) right after a
 * kernel that reads it, beside a global capture: allowed, and the capture
 * holds; the shim neither synchronizes the context (refused then, and
 * invalidating) nor unmaps under the kernel. */
Test(lifecycle, a_relaxed_free_beside_a_global_capture_keeps_it)
{
    static const char *const want[] = { "worker.relaxed.mem_free CUDA_SUCCESS\n",
                                        "capture.end CUDA_SUCCESS\n", NULL };
    capture_mem("free", want);
}

/* A program that never touches CUDA: the shim loads, stays silent, and its
 * dlsym hook serves the program's own lookups (the shell's, the loader's). */
Test(lifecycle, program_without_cuda_is_untouched)
{
    char preload[1100];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", vr_env_path("VR_SHIM"));
    char *const argv[] = { "sh", "-c", "echo one; echo two >&2", NULL };
    char *const env[] = { preload, "VAREMAP_STATS=1", "PATH=/usr/bin:/bin",
                          "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0", NULL };
    struct vr_proc p;
    cr_assert_eq(vr_spawn("nocuda", argv, env, true, &p), 0);
    cr_assert_eq(p.status, 0);
    cr_assert_str_eq(p.out.p, "one\n");
    cr_assert_str_eq(p.err.p, "two\n", "the shim wrote to stderr: %s", p.err.p);
    vr_proc_free(&p);
}

/* A graph built by stream capture is profiled and remapped like one built
 * node by node. */
Test(lifecycle, captured_graph_is_remapped)
{
    static const char *const args[] = { "--capture", "--pattern", "rebind", "--bytes", "1048576",
                                        NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=50", NULL };
    struct vr_run plain, shim;
    pair(&plain, &shim, "capture", "graph_linked", args, env);
    static const char *const active[] = { "\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                          NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, active), 1);
    cr_assert_gt(summary(&shim, "rebinds"), 0);
    uint64_t seen = summary(&shim, "setparams_seen"), skipped = summary(&shim, "setparams_skipped");
    cr_assert_geq(skipped * 100, 95 * seen, "%llu of %llu absorbed", (unsigned long long)skipped,
                  (unsigned long long)seen);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* VAREMAP_STATS=1: exactly one summary line on stderr at exit, naming every
 * counter with the same value as the log's summary. */
Test(lifecycle, stats_line_at_exit)
{
    static const char *const args[] = { "--bytes", "1048576", NULL };
    static const char *const env[] = { "VAREMAP_STATS=1", NULL };
    struct vr_run r;
    run_ok(&r, "stats", "graph_linked", args, VR_RUN_SHIM, env);
    cr_assert_eq(vr_count_lines(&r.proc.err, "varemap:"), 1, "stderr: %s", r.proc.err.p);
    const char *line = strstr(r.proc.err.p, "varemap: mode=profiled ");
    cr_assert(line, "stderr: %s", r.proc.err.p);
    static const char *const names[] = {
        "setparams_seen", "setparams_skipped", "setparams_forwarded", "transition_updates",
        "launches", "execs_active", "execs_disabled", "slices_bound", "rebinds", "rebind_waits",
        "vmm_bytes", "padding_bytes", "vmm_fallbacks", "unrouted_procs",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, " %s=%llu", names[i], (unsigned long long)summary(&r, names[i]));
        cr_assert(strstr(line, want), "%s missing from: %s", want, line);
    }
    vr_run_free(&r);
}

/* scripts/varemap: options become settings, the shim is preloaded, and the
 * program's own arguments pass through untouched. */
Test(lifecycle, varemap_wrapper_runs_the_program_under_the_shim)
{
    char wrapper[1100], shim[1100], app[1100], simdir[1100], ptx[1100];
    snprintf(wrapper, sizeof wrapper, "%s/varemap", vr_env_path("VR_SCRIPTS"));
    snprintf(shim, sizeof shim, "%s", vr_env_path("VR_SHIM"));
    snprintf(app, sizeof app, "%s/graph_linked", vr_env_path("VR_APPS_DIR"));
    snprintf(simdir, sizeof simdir, "LD_LIBRARY_PATH=%s", vr_env_path("VR_SIMCUDA_DIR"));
    snprintf(ptx, sizeof ptx, "VR_PTX=%s", vr_env_path("VR_PTX"));
    char *const argv[] = { "bash", wrapper, "--mode", "dedup", "--stats", "--shim", shim, "--",
                           app, "--steps", "12", "--bytes", "1048576", NULL };
    char *const env[] = { simdir, ptx, "PATH=/usr/bin:/bin",
                          "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0", NULL };
    struct vr_proc p;
    cr_assert_eq(vr_spawn("wrapper", argv, env, true, &p), 0);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert(strstr(p.out.p, "steps=12 launches=12 setparams=216 "), "%s", p.out.p);
    cr_assert(strstr(p.err.p, "varemap: mode=dedup setparams_seen=216 "), "%s", p.err.p);
    vr_proc_free(&p);
}
