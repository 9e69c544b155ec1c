/* nvcc-built CUDA-runtime programs (tests/rtapps, -cudart shared) on simcuda
 * through the test-only runtime tests/simcudart: each without the shim and
 * with it in every mode, every output byte and the stdout line compared, and
 * the skip counts read from the shim's log and simcuda's call counts.
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"

TestSuite(cudart, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static char app_path[1024], ld_path[2048], proc_env[1024];

/* vr_run_app looks in VR_APPS_DIR; the rt programs live next door. */
static const char *rtapp(const char *name)
{
    snprintf(app_path, sizeof app_path, "../rtapps/%s", name);
    return app_path;
}

static const char *ld_env(void)
{
    snprintf(ld_path, sizeof ld_path, "LD_LIBRARY_PATH=%s:%s", vr_env_path("VR_SIMCUDART_DIR"),
             vr_env_path("VR_SIMCUDA_DIR"));
    return ld_path;
}

/* one_line: the program's stdout is its final line only (run_ok's check);
 * else it may print more before it. */
static void run_rt_any(struct vr_run *r, const char *tag, const char *name,
                       const char *const *args, const char *mode, bool one_line)
{
    char out[64], vm[64];
    snprintf(vm, sizeof vm, "VAREMAP_MODE=%s", mode ? mode : "");
    const char *argv[24];
    size_t n = 0;
    snprintf(out, sizeof out, "%s.bin", tag);
    argv[n++] = "--out";
    argv[n++] = vr_tmp_path(out); /* the file vr_run_app reads back as r->bytes */
    for (size_t i = 0; args && args[i] && n + 1 < sizeof argv / sizeof argv[0]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    /* LD_BIND_NOW: a runtime symbol the program needs and simcudart lacks
     * fails at start, not halfway. */
    const char *env[] = { ld_env(), "LD_BIND_NOW=1", mode ? vm : NULL, NULL };
    if (one_line) {
        run_ok(r, tag, rtapp(name), argv, mode ? VR_RUN_SHIM : 0, env);
        return;
    }
    int rc = vr_run_app(tag, rtapp(name), argv, mode ? VR_RUN_SHIM : 0, env, r);
    cr_assert_eq(rc, 0, "%s: cannot start %s: %s", tag, name, strerror(-rc));
    cr_assert_eq(r->proc.status, 0, "%s: %s exited with %d; stderr:\n%s", tag, name,
                 r->proc.status, r->proc.err.p);
    cr_assert(r->parsed, "%s: no final line on stdout:\n%s", tag, r->proc.out.p);
}

static void run_rt(struct vr_run *r, const char *tag, const char *name, const char *const *args,
                   const char *mode)
{
    run_rt_any(r, tag, name, args, mode, true);
}

struct expect {
    bool all_stable;   /* every update after the first launches repeats what is installed */
};

static void each_mode(const char *name, const char *const *args, struct expect ex)
{
    static const char *const modes[] = { "off", "observe", "dedup", "profiled" };
    struct vr_run base;
    char tag[96];
    snprintf(tag, sizeof tag, "%s-none", name);
    run_rt(&base, tag, name, args, NULL);
    cr_assert_gt(base.setparams, 0);
    cr_assert_gt(base.launches, 0);
    /* Without the shim every update reaches the driver. */
    cr_expect_eq(sim_sum(&base, setparams_syms), base.setparams, "%s: driver saw %llu of %llu",
                 tag, (unsigned long long)sim_sum(&base, setparams_syms), base.setparams);
    cr_expect_eq(sim_sum(&base, launch_syms), base.launches);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        struct vr_run r;
        snprintf(tag, sizeof tag, "%s-%s", name, modes[m]);
        run_rt(&r, tag, name, args, modes[m]);
        same_output(&base, &r, tag);
        uint64_t seen = summary(&r, "setparams_seen"), skipped = summary(&r, "setparams_skipped"),
                 fwd = summary(&r, "setparams_forwarded"),
                 trans = summary(&r, "transition_updates");
        cr_expect_eq(seen, r.setparams, "%s: the shim saw %llu of %llu updates", tag,
                     (unsigned long long)seen, r.setparams);
        cr_expect_eq(summary(&r, "launches"), r.launches, "%s: launches", tag);
        cr_expect_eq(summary(&r, "unrouted_procs"), 0, "%s: unrouted_procs", tag);
        cr_expect_eq(skipped + fwd, seen, "%s: skipped %llu + forwarded %llu != seen %llu", tag,
                     (unsigned long long)skipped, (unsigned long long)fwd,
                     (unsigned long long)seen);
        /* What the driver received is what the shim says it forwarded:
         * the program's, the transitions', and those of the graph updates
         * it applied through SetParams (issue 19). */
        uint64_t by_updates = vr_log_sum(&r.log, "update_absorbed", "setparams");
        cr_expect_eq(sim_sum(&r, setparams_syms), fwd + trans + by_updates,
                     "%s: the driver got %llu updates, the shim forwarded %llu + %llu + %llu", tag,
                     (unsigned long long)sim_sum(&r, setparams_syms), (unsigned long long)fwd,
                     (unsigned long long)trans, (unsigned long long)by_updates);
        cr_expect_eq(sim_sum(&r, launch_syms), r.launches, "%s: driver launches", tag);
        if (m < 2) {
            cr_expect_eq(skipped, 0, "%s skipped %llu updates", tag, (unsigned long long)skipped);
        } else {
            cr_expect_gt(skipped, 0, "%s skipped nothing", tag);
            if (ex.all_stable && m == 3)
                cr_expect_geq(skipped * 10, seen * 8, "%s: only %llu of %llu skipped", tag,
                              (unsigned long long)skipped, (unsigned long long)seen);
        }
        vr_run_free(&r);
    }
    vr_run_free(&base);
}

Test(cudart, capture_stable)
{
    const char *args[] = { "--nodes", "64", "--steps", "30", NULL };
    each_mode("rt_capture", args, (struct expect){ .all_stable = true });
}

Test(cudart, capture_rebind)
{
    const char *args[] = { "--pattern", "rebind", "--nodes", "64", "--steps", "30", "--k", "7", NULL };
    each_mode("rt_capture", args, (struct expect){ .all_stable = true });
}

Test(cudart, capture_pingpong)
{
    const char *args[] = { "--pattern", "pingpong", "--nodes", "64", "--steps", "30", NULL };
    each_mode("rt_capture", args, (struct expect){ 0 });
}

Test(cudart, explicit_update)
{
    const char *args[] = { "--nodes", "48", "--steps", "40", "--update-every", "12", NULL };
    each_mode("rt_explicit", args, (struct expect){ 0 });
}

/* The runtime calls besides kernel nodes (pinned memory, device and
 * function attributes, dynamic shared memory, memset/memcpy/host nodes, host
 * functions, events, a bad call's error): the program checks itself against
 * a host reference (exit 3) and every mode gives the same bytes. */
Test(cudart, runtime_features)
{
    const char *args[] = { "--steps", "12", NULL };
    each_mode("rt_features", args, (struct expect){ 0 });
}

/* Managed and stream-ordered allocations, a cloned graph updated every
 * step, a profiler range (issue 32): the program checks itself against a
 * host reference (exit 3) and every mode gives the same bytes. */
Test(cudart, managed_async_clone_profiler)
{
    const char *args[] = { "--steps", "12", NULL };
    each_mode("rt_alloc_kinds", args, (struct expect){ 0 });
}

/* Graph memory nodes (issue 32, item 4): a graph built with
 * cudaGraphAddMemAllocNode/FreeNode and updated every step, and one
 * captured from cudaMallocAsync/cudaFreeAsync; the program checks itself
 * against a host reference and the graph memory footprint (exit 3), and
 * every mode gives the same bytes. */
Test(cudart, graph_memory_nodes_built_and_captured)
{
    const char *args[] = { "--steps", "12", NULL };
    each_mode("rt_graph_mem", args, (struct expect){ 0 });
}

/* Device variables (__constant__, __device__ with an initializer, a
 * counter) set and read through cudaMemcpyToSymbol(Async)/FromSymbol(Async)
 * and cudaGetSymbolAddress, read by a graph's kernel updated every step
 * (issue 32): checked against a host reference (exit 3), the same bytes in
 * every mode. */
Test(cudart, device_variables_and_symbol_copies)
{
    const char *args[] = { "--steps", "12", NULL };
    each_mode("rt_symbols", args, (struct expect){ 0 });
}

/* Conditional nodes (issue 32 item 4): IF with its else body, SWITCH and
 * WHILE, values set from device code, a WHILE body filled by capture into
 * the node's graph; the graph's kernel node updated every step. Checked
 * against a host reference (exit 3), the same bytes in every mode. */
Test(cudart, conditional_nodes_if_while_switch)
{
    const char *args[] = { "--steps", "12", NULL };
    each_mode("rt_conditional", args, (struct expect){ 0 });
}

/* The same graph made again every 4 steps (its IF body adding another
 * value, its kernels setting the new graph's handles) and the exec updated
 * from it: the shim marks a graph with a conditional node stale
 * (cuGraphAddNode of a type it does not record), so each update reaches the
 * driver whole, and every mode gives the bytes of the run without it. */
Test(cudart, conditional_nodes_remade_and_updated)
{
    const char *args[] = { "--steps", "12", "--remake-every", "4", NULL };
    each_mode("rt_conditional", args, (struct expect){ 0 });
}

/* Device printf (issue 32): a plain launch's threads and a graph's kernel
 * node (updated every step) print; the output reaches stdout at the
 * synchronization after it, so it follows the host's line printed before
 * that synchronization, thread by thread and step by step, and is
 * byte-identical without the shim and in every mode. */
Test(cudart, device_printf_at_synchronization)
{
    static const char *const modes[] = { "off", "observe", "dedup", "profiled" };
    const char *args[] = { "--steps", "6", NULL };
    static const char want[] =
        "host: launched\n"
        "thread 0: hello  0.25 a 0%\n"
        "thread 1: hello  1.25 b -1000000000000%\n"
        "thread 2: hello  2.25 c -2000000000000%\n"
        "thread 3: hello  3.25 d -3000000000000%\n"
        "host: graph steps queued\n"
        "step 0: in[0]=0 in[n-1]=0.0\n"
        "step 1: in[0]=1 in[n-1]=1.0\n"
        "step 2: in[0]=2 in[n-1]=2.0\n"
        "step 3: in[0]=3 in[n-1]=3.0\n"
        "step 4: in[0]=4 in[n-1]=4.0\n"
        "step 5: in[0]=5 in[n-1]=5.0\n"
        "host: done\n"
        "steps=6 launches=6 setparams=6 checksum=";
    struct vr_run base;
    run_rt_any(&base, "printf-none", "rt_printf", args, NULL, false);
    cr_assert(strncmp(base.proc.out.p, want, strlen(want)) == 0, "stdout:\n%s", base.proc.out.p);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        struct vr_run r;
        char tag[64];
        snprintf(tag, sizeof tag, "printf-%s", modes[m]);
        run_rt_any(&r, tag, "rt_printf", args, modes[m], false);
        same_output(&base, &r, tag);
        cr_expect_eq(summary(&r, "setparams_seen"), r.setparams, "%s: setparams", tag);
        vr_run_free(&r);
    }
    vr_run_free(&base);
}

/* An exec updated every few launches: each update used to undo the
 * decision, and its slices were made again every time (an H200 ran the
 * program 1.7x slower in CPU time under the shim). The updates change
 * kernel arguments only, so none reaches the driver now (issue 19): the exec
 * keeps its one decision and its slices, no reset, no churn fallback. */
Test(cudart, frequent_updates_stop_remaking_slices)
{
    const char *args[] = { "--nodes", "48", "--steps", "60", "--update-every", "6", NULL };
    static const char *const update_syms[] = { "cuGraphExecUpdate_v2", "cuGraphExecUpdate", NULL };
    struct vr_run base, r;
    run_rt(&base, "churn-none", "rt_explicit", args, NULL);
    run_rt(&r, "churn-profiled", "rt_explicit", args, "profiled");
    same_output(&base, &r, "churn-profiled");
    uint64_t updates = sim_sum(&base, update_syms);
    cr_assert_gt(updates, 5);
    cr_assert_eq(sim_sum(&r, update_syms), 0);
    cr_assert_eq(vr_log_count(&r.log, "update_absorbed"), updates);
    cr_assert_eq(vr_log_count(&r.log, "exec_reset"), 0);
    cr_assert_leq(vr_log_count(&r.log, "profile_decision"), 1,
                  "a decision after every update:\n%s", r.log.p);
    static const char *const stop[] = { "\"event\":\"fallback\"", "keeps no slices", NULL };
    cr_assert_eq(vr_count_lines_with(&r.log, stop), 0, "%s", r.log.p);
    cr_assert_eq(summary(&r, "setparams_skipped"), summary(&r, "setparams_seen"),
                 "every update repeats what the exec holds: all absorbed");
    vr_run_free(&base);
    vr_run_free(&r);
}

Test(cudart, threads_per_thread_stream)
{
    const char *args[] = { "--threads", "3", "--nodes", "32", "--steps", "30", NULL };
    each_mode("rt_threads", args, (struct expect){ 0 });
}

/* simcudart asks the driver only what NVIDIA's runtime asks: every request
 * it makes (SIMCUDA_PROC_LOG) is in the recorded list, same version and
 * flags. And the per-thread program really calls per-thread entry points. */
Test(cudart, requests_are_nvidias)
{
    char pat[2048];
    snprintf(pat, sizeof pat, "%s/cudart-*-lookups.txt", vr_env_path("VR_LOOKUPS_DATA"));
    glob_t g;
    cr_assert_eq(glob(pat, 0, NULL, &g), 0, "no %s", pat);
    struct vr_buf recorded; /* the newest toolkit's list: the last in glob order */
    cr_assert(vr_read_file(g.gl_pathv[g.gl_pathc - 1], &recorded), "cannot read %s",
              g.gl_pathv[g.gl_pathc - 1]);
    globfree(&g);
    snprintf(proc_env, sizeof proc_env, "SIMCUDA_PROC_LOG=%s", vr_tmp_path("proc.log"));
    const char *args[] = { "--threads", "2", "--nodes", "8", "--steps", "4", NULL };
    struct vr_run r;
    const char *env[] = { ld_env(), proc_env, NULL };
    const char *argv[] = { "--out", vr_tmp_path("req.bin"), args[0], args[1], args[2], args[3],
                           args[4], args[5], NULL };
    run_ok(&r, "req", rtapp("rt_threads"), argv, 0, env);
    struct vr_buf log;
    cr_assert(vr_read_file(vr_tmp_path("proc.log"), &log) && log.len > 0, "no SIMCUDA_PROC_LOG");
    size_t n = 0;
    for (char *line = strtok(log.p, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128], answer[128], key[300];
        int version;
        unsigned long long flags;
        cr_assert_eq(sscanf(line, "%127s %d %llu %127s", name, &version, &flags, answer), 4);
        snprintf(key, sizeof key, "\n%s %d %llu ", name, version, flags);
        cr_expect(strstr(recorded.p, key), "simcudart asked for %s@%d flags %llu, which NVIDIA's "
                  "runtime does not", name, version, flags);
        n++;
    }
    cr_expect_gt(n, 30, "only %zu requests", n);
    cr_expect_gt(vr_sim_calls(&r.stats, "cuLaunchKernel_ptsz"), 0, "no per-thread kernel launch");
    cr_expect_gt(vr_sim_calls(&r.stats, "cuStreamBeginCapture_v2_ptsz"), 0, "no per-thread capture");
    cr_expect_eq(vr_sim_calls(&r.stats, "cuGetProcAddress"), 0);
    vr_buf_free(&log);
    vr_buf_free(&recorded);
    vr_run_free(&r);
}

/* Programs shaped like applications (issue 18, item 5), with kernels of
 * their own that simcuda runs from their PTX: each checks itself against a
 * host reference (exit 3), and every mode gives the same bytes. */
Test(cudart, app_jacobi_setparams)
{
    const char *args[] = { "--method", "setparams", "--iters", "24", NULL };
    each_mode("rt_jacobi", args, (struct expect){ 0 });
}

/* Shaped like NVIDIA's Jacobi graph sample (issue 32 item 2): a dense
 * system, two kernel nodes re-set every iteration; its blocks run on
 * several workers (no atomics), and the bytes stay the same in every mode. */
Test(cudart, app_jacobi_dense_setparams)
{
    const char *args[] = { "--n", "256", "--iters", "30", NULL };
    each_mode("rt_jacobi_dense", args, (struct expect){ 0 });
}

Test(cudart, app_stencil_three_rotating_buffers)
{
    const char *args[] = { "--steps", "30", NULL };
    each_mode("rt_stencil", args, (struct expect){ 0 });
}

Test(cudart, app_conjugate_gradients)
{
    const char *args[] = { "--iters", "20", NULL };
    each_mode("rt_cg", args, (struct expect){ 0 });
}

/* The same solver re-captured every iteration and applied with
 * cudaGraphExecUpdate: no SetParams from the program. Without the shim (and
 * in modes off and observe) every update reaches the driver; in dedup and
 * profiled none does (issue 19): each changes the one kernel's arguments
 * only (ping-pong vectors, this iteration's error slot), so it costs at most
 * that node's SetParams. The bytes stay the same. */
Test(cudart, app_jacobi_recapture)
{
    static const char *const modes[] = { "off", "observe", "dedup", "profiled" };
    static const char *const update_syms[] = { "cuGraphExecUpdate_v2", "cuGraphExecUpdate", NULL };
    const char *args[] = { "--method", "recapture", "--iters", "24", NULL };
    struct vr_run base;
    run_rt(&base, "recapture-none", "rt_jacobi", args, NULL);
    cr_assert_eq(base.setparams, 0);
    cr_assert_eq(sim_sum(&base, update_syms), 23, "updates: %llu",
                 (unsigned long long)sim_sum(&base, update_syms));
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        struct vr_run r;
        char tag[64];
        snprintf(tag, sizeof tag, "recapture-%s", modes[m]);
        run_rt(&r, tag, "rt_jacobi", args, modes[m]);
        same_output(&base, &r, tag);
        bool absorbs = m >= 2;
        cr_expect_eq(sim_sum(&r, update_syms), absorbs ? 0 : 23, "%s: updates", tag);
        cr_expect_leq(sim_sum(&r, setparams_syms),
                      (absorbs ? 23 : 0) + summary(&r, "transition_updates"), "%s: SetParams", tag);
        cr_expect_eq(sim_sum(&r, setparams_syms),
                     vr_log_sum(&r.log, "update_absorbed", "setparams") +
                         summary(&r, "transition_updates"), "%s: SetParams", tag);
        cr_expect_eq(vr_log_count(&r.log, "update_absorbed"), absorbs ? 23 : 0, "%s: absorbed",
                     tag);
        vr_run_free(&r);
    }
    vr_run_free(&base);
}
