/* Entry points end to end: a function handle reused after its module's
 * unload, cuGetProcAddress answers the shim cannot name, and the shim's
 * first-time setup racing a library constructor. Each case compares the
 * program's output with and without the shim. */
#include <stdio.h>

#include "checks.h"

TestSuite(entry, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* A program that is not a graph_* scenario: only exit status and stdout. */
static void run_plain_app(struct vr_run *r, const char *tag, const char *app,
                          const char *const *args, unsigned flags, const char *const *env)
{
    int rc = vr_run_app(tag, app, args, flags, env, r);
    cr_assert_eq(rc, 0, "%s: cannot start %s: %s", tag, app, strerror(-rc));
    cr_assert_eq(r->proc.status, 0, "%s: %s exited with %d; stderr:\n%s", tag, app,
                 r->proc.status, r->proc.err.p);
    cr_assert_gt(r->proc.out.len, 0, "%s: no output", tag);
}

/* Item 5: the add kernel inherits the copy kernel's handle; its SetParams
 * change only `n`, the argument the copy kernel does not have. With a layout
 * cached across the unload they all look identical and are absorbed. */
static void reused_handle(const char *mode, bool library)
{
    char tag[64], env_mode[64];
    snprintf(env_mode, sizeof env_mode, "VAREMAP_MODE=%s", mode);
    const char *const env[] = { env_mode, NULL };
    const char *const lib_args[] = { "--library", NULL };
    const char *const *args = library ? lib_args : NULL;
    struct vr_run plain, shim;
    snprintf(tag, sizeof tag, "reuse_plain_%s%s", mode, library ? "_lib" : "");
    run_plain_app(&plain, tag, "module_reuse", args, 0, NULL);
    /* simcuda reuses unloaded handles last-in first-out (its README). */
    cr_assert(strstr(plain.proc.out.p, "reused=1\n"), "no handle reused: nothing tested:\n%s",
              plain.proc.out.p);
    snprintf(tag, sizeof tag, "reuse_shim_%s%s", mode, library ? "_lib" : "");
    run_plain_app(&shim, tag, "module_reuse", args, VR_RUN_SHIM, env);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p, "mode %s: output differs", mode);
    static const char *const widths[] = { "add step=7 n=88 written=88 ", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.proc.out, widths), 1,
                 "the last step must use its own n:\n%s", shim.proc.out.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(entry, reused_function_handle_rereads_its_layout_profiled)
{
    reused_handle("profiled", false);
}

Test(entry, reused_function_handle_rereads_its_layout_dedup)
{
    reused_handle("dedup", false);
}

/* The same through cuLibraryUnload and CUkernel nodes. */
Test(entry, reused_kernel_handle_rereads_its_layout)
{
    reused_handle("profiled", true);
}

/* cuGraphExecUpdate v1: the exec's shadows follow the update, so setting
 * the pre-update value again reaches the driver. The update changes one
 * argument only, so it is applied as that node's SetParams (issue 19). */
Test(entry, exec_update_v1_refreshes_the_shadows)
{
    struct vr_run plain, shim;
    run_plain_app(&plain, "v1_plain", "update_v1", NULL, 0, NULL);
    run_plain_app(&shim, "v1_shim", "update_v1", NULL, VR_RUN_SHIM, NULL);
    static const char *const after[] = { "after first=1.0 last=1.0", NULL };
    cr_assert_eq(vr_count_lines_with(&plain.proc.out, after), 2, "%s", plain.proc.out.p);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 1, "the update went unseen:\n%s",
                 shim.log.p);
    cr_assert_eq(vr_log_sum(&shim.log, "update_absorbed", "changed"), 1);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphExecUpdate"), 0);
    cr_assert_eq(vr_log_count(&shim.log, "exec_reset"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Item 6: simcuda answers cuGetProcAddress (and cuGraphLaunch) with
 * unexported entries. graph_procaddr resolves half its table through the
 * resolver cuGetProcAddress returned for itself: that must be the shim's,
 * or those calls bypass it. */
Test(entry, own_resolver_whatever_the_driver_answers)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", "1048576", NULL };
    static const char *const env[] = { "SIMCUDA_PROC_INTERNAL=1", NULL };
    struct vr_run plain, shim;
    run_ok(&plain, "self_plain", "graph_procaddr", args, 0, env);
    run_ok(&shim, "self_shim", "graph_procaddr", args, VR_RUN_SHIM, env);
    same_output(&plain, &shim, "internal resolver");
    cr_assert_gt(shim.setparams, 0);
    cr_assert_eq(summary(&shim, "setparams_seen"), shim.setparams,
                 "SetParams resolved through the returned resolver bypassed the shim");
    static const char *const self[] = { "\"event\":\"fallback\"",
                                        "\"reason\":\"cuGetProcAddress\"", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, self), 0,
                 "cuGetProcAddress was handed out unrouted:\n%s", shim.log.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Item 6: the launch entry point itself is unexported, so launches bypass
 * the shim: it must say once that it falls back to dedup, and the program's
 * bytes stay the same. */
Test(entry, unrouted_launch_falls_back_to_dedup)
{
    static const char *const args[] = { "--pattern", "rebind", "--bytes", "1048576", NULL };
    static const char *const env[] = { "SIMCUDA_PROC_INTERNAL=1", NULL };
    struct vr_run plain, shim;
    run_ok(&plain, "unrouted_plain", "graph_procaddr", args, 0, env);
    run_ok(&shim, "unrouted_shim", "graph_procaddr", args, VR_RUN_SHIM, env);
    same_output(&plain, &shim, "unrouted launch");
    static const char *const degrade[] = { "\"event\":\"fallback\"",
                                           "\"reason\":\"cuGraphLaunch handed out unrouted",
                                           "dedup from now on", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, degrade), 1,
                 "expected one fallback to dedup naming cuGraphLaunch:\n%s", shim.log.p);
    static const char *const any[] = { "\"event\":\"fallback\"", "dedup from now on", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, any), 1, "the fallback is logged once");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Without the knob every entry point is routed: no fallback at all. */
Test(entry, routed_entry_points_keep_the_mode)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", "1048576", NULL };
    struct vr_run shim;
    run_ok(&shim, "routed_shim", "graph_procaddr", args, VR_RUN_SHIM, NULL);
    cr_assert_eq(vr_log_count(&shim.log, "fallback"), 0, "%s", shim.log.p);
    /* The driver, loaded after the shim, shuts down before the shim's exit
     * handler: what the shim still held went with it, not leaked. */
    static const char *const clean[] = {"\"event\":\"summary\"", "\"vmm_leaked_bytes\":0,",
                                        NULL};
    cr_assert_eq(vr_count_lines_with(&shim.log, clean), 1, "%s", shim.log.p);
    vr_run_free(&shim);
}

/* Item 10: a library constructor (inside the program's dlopen, holding the
 * loader's lock) starts a thread whose first driver call enters the shim's
 * setup and blocks on the loader; the constructor then calls the driver
 * itself. The app dies by SIGALRM after 10 s if the two wait for each
 * other. */
Test(entry, constructor_racing_a_first_call_does_not_hang)
{
    char lib[1024];
    snprintf(lib, sizeof lib, "%s/libvr_ctor_race.so", vr_env_path("VR_APPS_DIR"));
    const char *const args[] = { lib, NULL };
    struct vr_run plain, shim;
    run_plain_app(&plain, "ctor_plain", "ctor_race", args, 0, NULL);
    run_plain_app(&shim, "ctor_shim", "ctor_race", args, VR_RUN_SHIM, NULL);
    cr_assert_str_eq(plain.proc.out.p, "ctor=0 thread=0\n");
    cr_assert_str_eq(shim.proc.out.p, plain.proc.out.p);
    /* Under the shim the thread's first call needs the loader, held by the
     * constructor's dlopen: the race really happened. */
    cr_assert(strstr(shim.proc.err.p, "thread_blocked=1"), "the thread never blocked:\n%s",
              shim.proc.err.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Issue 8: cuGraphLaunch handed out unrouted after the shim made variants
 * for an exec (variant_probe --case degrade: pingpong, then launches through
 * the unnamed entry and the exported one by turns). The program's exec may
 * now run behind the shim's back: its variants must go, none be made again,
 * and its own nodes must mean what the program asked for at every launch. */
Test(entry, unrouted_launch_drops_the_variants)
{
    static const char *const args[] = { "--case", "degrade", NULL };
    static const char *const env[] = { "SIMCUDA_PROC_INTERNAL=1", NULL };
    struct vr_run plain, shim;
    run_plain_app(&plain, "degrade_plain", "variant_probe", args, 0, env);
    run_plain_app(&shim, "degrade_shim", "variant_probe", args, VR_RUN_SHIM, env);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p, "bytes differ after the degradation");
    cr_assert(strstr(shim.proc.err.p, "variants_before="), "no stats:\n%s", shim.proc.err.p);
    cr_assert_null(strstr(shim.proc.err.p, "variants_before=0\n"),
                   "no variant before the degradation: nothing tested:\n%s", shim.proc.err.p);
    cr_assert(strstr(shim.proc.err.p, "variants_after=0\n"),
              "variants kept after the degradation:\n%s", shim.proc.err.p);
    cr_assert_eq(summary(&shim, "variants"), 0);
    static const char *const degrade[] = { "\"event\":\"fallback\"", "dedup from now on", NULL };
    cr_assert_eq(vr_count_lines_with(&shim.log, degrade), 1, "%s", shim.log.p);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* A SetParams the driver refuses leaves the node as the driver holds it:
 * the same arguments again reach the driver (and the launch writes them),
 * under dedup and while still profiled, through each entry point. Fails if
 * the shim records the refused arguments (the retry is absorbed: the
 * launch writes 2.0, and the driver sees one call fewer). */
static void refused_update(const char *mode, const char *entry_point, const char *sym)
{
    char tag[64], env_mode[64], env_fail[96];
    snprintf(env_mode, sizeof env_mode, "VAREMAP_MODE=%s", mode);
    snprintf(env_fail, sizeof env_fail, "SIMCUDA_FAIL=%s:2", sym);
    const char *const env[] = { env_mode, env_fail, NULL };
    const char *const args[] = { "--entry", entry_point, NULL };
    struct vr_run plain, shim;
    snprintf(tag, sizeof tag, "retry_plain_%s_%s", mode, entry_point);
    run_plain_app(&plain, tag, "update_retry", args, 0, env);
    static const char *const refused[] = { "set 3.0: CUDA_ERROR_", NULL };
    cr_assert_eq(vr_count_lines_with(&plain.proc.out, refused), 1,
                 "the second update was not refused: nothing tested:\n%s", plain.proc.out.p);
    static const char *const retried[] = { "retried first=3.0 last=3.0", NULL };
    cr_assert_eq(vr_count_lines_with(&plain.proc.out, retried), 1, "%s", plain.proc.out.p);
    snprintf(tag, sizeof tag, "retry_shim_%s_%s", mode, entry_point);
    run_plain_app(&shim, tag, "update_retry", args, VR_RUN_SHIM, env);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p, "mode %s, entry %s: output differs",
                     mode, entry_point);
    /* Every update but the last (the driver holds 3.0 then) reaches it. */
    cr_assert_geq(vr_sim_calls(&shim.stats, sym), 3, "mode %s, entry %s: the retry was absorbed",
                  mode, entry_point);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(entry, refused_update_is_retried_dedup)
{
    refused_update("dedup", "v2", "cuGraphExecKernelNodeSetParams_v2");
    refused_update("dedup", "v1", "cuGraphExecKernelNodeSetParams");
    refused_update("dedup", "node", "cuGraphExecNodeSetParams");
}

Test(entry, refused_update_is_retried_profiled)
{
    refused_update("profiled", "v2", "cuGraphExecKernelNodeSetParams_v2");
    refused_update("profiled", "v1", "cuGraphExecKernelNodeSetParams");
    refused_update("profiled", "node", "cuGraphExecNodeSetParams");
}
