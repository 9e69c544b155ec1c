/* Pass-through: with VAREMAP_MODE=off (and with bad or missing settings)
 * the shim must be invisible: same bytes, same stdout, same driver calls,
 * and its counters must agree with what the program says it did. */
#include <stdio.h>

#include "checks.h"

TestSuite(passthrough, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static const char *const small[] = { "--bytes", "65536", NULL };

static void off_matches_plain(const char *app, const char *const *args, const char *tag)
{
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "%s_plain", tag);
    snprintf(t2, sizeof t2, "%s_off", tag);
    static const char *const off[] = { "VAREMAP_MODE=off", NULL };
    struct vr_run a, b;
    run_ok(&a, t1, app, args, 0, NULL);
    run_ok(&b, t2, app, args, VR_RUN_SHIM, off);
    same_output(&a, &b, tag);

    /* The program really used all three SetParams entry points, and the
     * driver saw exactly the calls the program made. */
    for (size_t i = 0; setparams_syms[i]; i++)
        cr_assert_gt(vr_sim_calls(&a.stats, setparams_syms[i]), 0, "%s never called %s", app,
                     setparams_syms[i]);
    cr_assert_eq(sim_sum(&a, setparams_syms), a.setparams, "%s: driver saw %llu SetParams, "
                 "program made %llu", app, (unsigned long long)sim_sum(&a, setparams_syms),
                 a.setparams);
    cr_assert_eq(sim_sum(&a, launch_syms), a.launches);
    const char *launch = strcmp(app, "graph_procaddr") ? "cuGraphLaunch" : "cuGraphLaunch_ptsz";
    cr_assert_eq(vr_sim_calls(&a.stats, launch), a.launches, "%s must launch through %s", app,
                 launch);

    for (size_t i = 0; setparams_syms[i]; i++)
        cr_assert_eq(vr_sim_calls(&a.stats, setparams_syms[i]),
                     vr_sim_calls(&b.stats, setparams_syms[i]), "%s: %s calls differ with the shim",
                     app, setparams_syms[i]);
    for (size_t i = 0; launch_syms[i]; i++)
        cr_assert_eq(vr_sim_calls(&a.stats, launch_syms[i]), vr_sim_calls(&b.stats, launch_syms[i]),
                     "%s: %s calls differ with the shim", app, launch_syms[i]);

    cr_assert_eq(summary(&b, "setparams_seen"), b.setparams);
    cr_assert_eq(summary(&b, "setparams_forwarded"), b.setparams);
    cr_assert_eq(summary(&b, "setparams_skipped"), 0);
    cr_assert_eq(summary(&b, "launches"), b.launches);
    vr_run_free(&a);
    vr_run_free(&b);
}

Test(passthrough, linked)
{
    off_matches_plain("graph_linked", small, "linked");
}

Test(passthrough, procaddr)
{
    off_matches_plain("graph_procaddr", small, "procaddr");
}

Test(passthrough, dlsym)
{
    off_matches_plain("graph_dlsym", small, "dlsym");
}

/* A captured graph holds the same nodes in the same order, so it must also
 * compute the same bytes as the one built node by node. */
Test(passthrough, capture)
{
    static const char *const cap[] = { "--bytes", "65536", "--capture", NULL };
    off_matches_plain("graph_linked", cap, "capture");
    struct vr_run a, b;
    run_ok(&a, "built", "graph_linked", small, 0, NULL);
    run_ok(&b, "captured", "graph_linked", cap, 0, NULL);
    same_output(&a, &b, "capture vs nodes");
    vr_run_free(&a);
    vr_run_free(&b);
}

Test(passthrough, stream_threads)
{
    static const char *const thr[] = { "--bytes", "65536", "--stream-threads", "--pattern",
                                       "mixed", NULL };
    off_matches_plain("graph_procaddr", thr, "threads");
}

/* No VAREMAP_* at all: the defaults (profiled) must keep the bytes. */
Test(passthrough, no_settings)
{
    static const char *const apps[] = { "graph_linked", "graph_procaddr", "graph_dlsym" };
    static const char *const args[] = { "--bytes", "1048576", "--steps", "30", NULL };
    for (size_t i = 0; i < 3; i++) {
        char t1[64], t2[64];
        snprintf(t1, sizeof t1, "plain%zu", i);
        snprintf(t2, sizeof t2, "default%zu", i);
        struct vr_run a, b;
        run_ok(&a, t1, apps[i], args, 0, NULL);
        run_ok(&b, t2, apps[i], args, VR_RUN_SHIM | VR_RUN_NOLOG, NULL);
        same_output(&a, &b, apps[i]);
        cr_assert_eq(vr_count_lines(&b.proc.err, "varemap: warning:"), 0,
                     "%s warned without settings:\n%s", apps[i], b.proc.err.p);
        vr_run_free(&a);
        vr_run_free(&b);
    }
}

Test(passthrough, bad_values)
{
    static const char *const bad[] = { "VAREMAP_MODE=bogus", "VAREMAP_PROFILE_LAUNCHES=0",
                                       NULL };
    struct vr_run a, b;
    run_ok(&a, "plain", "graph_linked", small, 0, NULL);
    run_ok(&b, "bad", "graph_linked", small, VR_RUN_SHIM | VR_RUN_NOLOG, bad);
    same_output(&a, &b, "bad values");
    cr_assert_eq(vr_count_lines(&b.proc.err, "varemap: warning:"), 2,
                 "expected one warning per bad variable:\n%s", b.proc.err.p);
    static const char *const mode[] = { "varemap: warning:", "VAREMAP_MODE", "bogus", NULL };
    static const char *const prof[] = { "varemap: warning:", "VAREMAP_PROFILE_LAUNCHES", NULL };
    cr_assert_eq(vr_count_lines_with(&b.proc.err, mode), 1, "no warning naming VAREMAP_MODE=bogus:"
                 "\n%s", b.proc.err.p);
    cr_assert_eq(vr_count_lines_with(&b.proc.err, prof), 1,
                 "no warning naming VAREMAP_PROFILE_LAUNCHES:\n%s", b.proc.err.p);
    vr_run_free(&a);
    vr_run_free(&b);
}

Test(passthrough, unwritable_log)
{
    /* A regular file where a directory should be: unwritable even for root. */
    const char *file = vr_tmp_path("not_a_dir");
    FILE *f = fopen(file, "w");
    cr_assert(f != NULL);
    fclose(f);
    char log[600];
    snprintf(log, sizeof log, "VAREMAP_LOG=%s/varemap.log", file);
    const char *const env[] = { log, NULL };
    struct vr_run a, b;
    run_ok(&a, "plain", "graph_linked", small, 0, NULL);
    run_ok(&b, "nolog", "graph_linked", small, VR_RUN_SHIM | VR_RUN_NOLOG, env);
    same_output(&a, &b, "unwritable log");
    cr_assert_eq(vr_count_lines(&b.proc.err, "varemap: warning:"), 1,
                 "expected one warning about the log:\n%s", b.proc.err.p);
    static const char *const names[] = { "varemap: warning:", "not_a_dir", NULL };
    cr_assert_eq(vr_count_lines_with(&b.proc.err, names), 1, "the warning must name the path:\n%s",
                 b.proc.err.p);
    vr_run_free(&a);
    vr_run_free(&b);
}

/* A driver error reaches the program unchanged: same exit, same message. */
static void same_error(const char *fail, const char *name, const char *tag)
{
    char f[96];
    snprintf(f, sizeof f, "SIMCUDA_FAIL=%s", fail);
    const char *const plain_env[] = { f, NULL };
    const char *const off_env[] = { f, "VAREMAP_MODE=off", NULL };
    struct vr_run a, b;
    cr_assert_eq(vr_run_app("err_plain", "graph_linked", small, 0, plain_env, &a), 0);
    cr_assert_eq(vr_run_app("err_off", "graph_linked", small, VR_RUN_SHIM, off_env, &b), 0);
    cr_assert_eq(a.proc.status, 1, "%s: expected exit 1, got %d:\n%s", tag, a.proc.status,
                 a.proc.err.p);
    const char *const want[] = { name, NULL };
    cr_assert_eq(vr_count_lines_with(&a.proc.err, want), 1, "%s: no %s on stderr:\n%s", tag, name,
                 a.proc.err.p);
    cr_assert_eq(b.proc.status, a.proc.status, "%s under the shim: exit %d:\n%s", tag,
                 b.proc.status, b.proc.err.p);
    cr_assert_str_eq(b.proc.err.p, a.proc.err.p, "%s: stderr differs under the shim", tag);
    vr_run_free(&a);
    vr_run_free(&b);
}

Test(passthrough, driver_errors)
{
    same_error("cuGraphLaunch:3", "CUDA_ERROR_LAUNCH_FAILED", "launch");
    same_error("cuMemAlloc_v2:5", "CUDA_ERROR_OUT_OF_MEMORY", "alloc");
    same_error("cuGraphExecKernelNodeSetParams_v2:7", "cuGraphExecKernelNodeSetParams_v2",
               "setparams");
}

/* dlsym(RTLD_NEXT) from libvr_probe_a must find libvr_probe_b's symbol,
 * also when the shim's dlsym hook sits in between. */
Test(passthrough, rtld_next)
{
    struct vr_run a, b;
    int rc = vr_run_app("probe_plain", "probe_next", NULL, 0, NULL, &a);
    cr_assert_eq(rc, 0);
    cr_assert_eq(a.proc.status, 0, "probe_next exited %d:\n%s", a.proc.status, a.proc.err.p);
    cr_assert_str_eq(a.proc.out.p, "2\n");
    rc = vr_run_app("probe_shim", "probe_next", NULL, VR_RUN_SHIM, NULL, &b);
    cr_assert_eq(rc, 0);
    cr_assert_eq(b.proc.status, 0, "probe_next exited %d under the shim:\n%s", b.proc.status,
                 b.proc.err.p);
    cr_assert_str_eq(b.proc.out.p, "2\n", "RTLD_NEXT resolved from the wrong frame under the shim");
    vr_run_free(&a);
    vr_run_free(&b);
}

/* simcuda runs the standard kernels through its PTX interpreter unless a
 * run asks for the host versions (the benchmarks do): with SIMCUDA_KERNELS
 * unset every launch is interpreted, with and without the shim, and the
 * bytes are the host versions' bytes, over the whole of every buffer (not
 * the suites' VR_EXTENT). */
Test(passthrough, standard_kernels_interpreted_by_default)
{
    static const char *const args[] = { "--bytes", "65536", "--extent", "65536", "--steps", "6",
                                        NULL };
    static const char *const dflt[] = { "SIMCUDA_KERNELS=", NULL };
    static const char *const host[] = { "SIMCUDA_KERNELS=host", NULL };
    struct vr_run p, s, h;
    run_ok(&p, "interp_plain", "graph_linked", args, 0, dflt);
    run_ok(&s, "interp_shim", "graph_linked", args, VR_RUN_SHIM, dflt);
    run_ok(&h, "interp_host", "graph_linked", args, 0, host);
    const struct vr_run *rs[] = { &p, &s };
    for (int i = 0; i < 2; i++) {
        uint64_t nh = 1, np = 0, ti = 0;
        cr_assert(vr_json_u64(rs[i]->stats.p, rs[i]->stats.len, "host", &nh) &&
                      vr_json_u64(rs[i]->stats.p, rs[i]->stats.len, "ptx", &np) &&
                      vr_json_u64(rs[i]->stats.p, rs[i]->stats.len, "ptx_thread_instructions",
                                  &ti),
                  "no kernel paths in %s", rs[i]->stats.p);
        cr_assert_eq(nh, 0, "%llu launches ran a host version by default",
                     (unsigned long long)nh);
        cr_assert_gt(np, 0, "no launch went through the interpreter");
        cr_assert_gt(ti, np, "the interpreter counted no work");
    }
    uint64_t nh = 0, np = 1;
    cr_assert(vr_json_u64(h.stats.p, h.stats.len, "host", &nh) &&
              vr_json_u64(h.stats.p, h.stats.len, "ptx", &np));
    cr_assert(nh > 0 && np == 0, "SIMCUDA_KERNELS=host: %llu host, %llu interpreted",
              (unsigned long long)nh, (unsigned long long)np);
    same_output(&p, &s, "interpreted");
    same_output(&p, &h, "interpreted against host versions");
    vr_run_free(&p);
    vr_run_free(&s);
    vr_run_free(&h);
}
