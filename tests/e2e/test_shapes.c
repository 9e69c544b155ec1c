/* Real programs' shapes (issue 30): a graph destroyed once its exec exists
 * (PyTorch, TensorRT-LLM), a slice outliving its exec while its buffer
 * lives (a pointer a kernel stored), and the app-shaped programs of
 * tests/apps (pytorch_like, trtllm_like), each run on simcuda with and
 * without the shim in every mode and compared byte for byte. */
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"

TestSuite(shapes, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static const char *const update_syms[] = {"cuGraphExecUpdate_v2", "cuGraphExecUpdate", NULL};

/* ---- graph_bench --destroy-graph ---------------------------------------- */

struct gb {
    struct vr_proc proc;
    struct vr_buf stats;
    char checksum[40];
};

static void gb_run(struct gb *b, const char *tag, const char *moves, const char *destroy,
                   bool shim)
{
    char exe[4096], ld[4096], ptx[4096], stats[4096], pre[4096], name[128];
    snprintf(exe, sizeof exe, "%s/bench/graph_bench", vr_env_path("VR_APPS_DIR"));
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", vr_env_path("VR_SIMCUDA_DIR"));
    snprintf(ptx, sizeof ptx, "VR_PTX=%s", vr_env_path("VR_PTX"));
    snprintf(name, sizeof name, "%s.stats.json", tag);
    snprintf(stats, sizeof stats, "SIMCUDA_STATS=%s", vr_tmp_path(name));
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", vr_env_path("VR_SHIM"));
    char *argv[] = {exe, "--pattern", "recapture", "--moves", (char *)moves, "--nodes", "49",
                    "--steps", "60", "--warmup", "5", "--bytes", "2M", "--destroy-graph",
                    (char *)destroy, NULL};
    const char *asan = getenv("ASAN_OPTIONS"), *l = getenv("LSAN_OPTIONS");
    char aopt[1024], lsan[1024];
    snprintf(aopt, sizeof aopt, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    snprintf(lsan, sizeof lsan, "LSAN_OPTIONS=%s", l ? l : "");
    char *env[] = {ld, ptx, stats, aopt, lsan, shim ? pre : NULL, NULL};
    memset(b, 0, sizeof *b);
    cr_assert_eq(vr_spawn(tag, argv, env, false, &b->proc), 0);
    cr_assert_eq(b->proc.status, 0, "%s: graph_bench exited with %d (3: wrong values): %s", tag,
                 b->proc.status, b->proc.err.p);
    cr_assert(vr_read_file(vr_tmp_path(name), &b->stats), "%s: no SIMCUDA_STATS", tag);
    bench_checksum(tag, b->proc.out.p, b->checksum, sizeof b->checksum);
}

static uint64_t gb_calls(const struct gb *b, const char *const *syms)
{
    uint64_t n = 0;
    for (size_t i = 0; syms[i]; i++)
        n += vr_sim_calls(&b->stats, syms[i]);
    return n;
}

/* A re-capture loop of 49 kernels over 60 steps, the graph the exec is
 * instantiated from and every update graph destroyed as soon as used: at
 * most 4 updates reach the driver, and no more SetParams than when the
 * program keeps its graph (only the nodes whose buffers moved and no slice
 * serves); the same bytes as without the shim. */
static void destroyed_graph_costs_nothing(const char *moves)
{
    char t[64];
    struct gb plain, shim, kept;
    snprintf(t, sizeof t, "gb_%s_plain", moves);
    gb_run(&plain, t, moves, "yes", false);
    snprintf(t, sizeof t, "gb_%s_shim", moves);
    gb_run(&shim, t, moves, "yes", true);
    snprintf(t, sizeof t, "gb_%s_kept", moves);
    gb_run(&kept, t, moves, "no", true);
    cr_assert_str_eq(plain.checksum, shim.checksum, "%s", moves);
    cr_assert_eq(gb_calls(&plain, update_syms), 60, "%s", moves);
    uint64_t upd = gb_calls(&shim, update_syms);
    cr_assert_leq(upd, 4, "%s: %llu of 60 updates reached the driver", moves,
                  (unsigned long long)upd);
    uint64_t sp = gb_calls(&shim, setparams_syms), sp_kept = gb_calls(&kept, setparams_syms);
    cr_assert_leq(sp, sp_kept, "%s: %llu SetParams, %llu when the graph is kept", moves,
                  (unsigned long long)sp, (unsigned long long)sp_kept);
    /* the graph kept for the exec is destroyed in the driver, as the program's
     * others are (and the shim's own clones) */
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphDestroy"),
                 vr_sim_calls(&plain.stats, "cuGraphDestroy") +
                     vr_sim_calls(&shim.stats, "cuGraphClone"),
                 "%s", moves);
    vr_proc_free(&plain.proc);
    vr_proc_free(&shim.proc);
    vr_proc_free(&kept.proc);
    vr_buf_free(&plain.stats);
    vr_buf_free(&shim.stats);
    vr_buf_free(&kept.stats);
}

Test(shapes, destroyed_graph_recapture_stable) { destroyed_graph_costs_nothing("stable"); }
Test(shapes, destroyed_graph_recapture_pingpong) { destroyed_graph_costs_nothing("pingpong"); }
Test(shapes, destroyed_graph_recapture_rebind) { destroyed_graph_costs_nothing("rebind"); }
Test(shapes, destroyed_graph_recapture_realloc) { destroyed_graph_costs_nothing("realloc"); }

/* ---- the app-shaped programs, in every mode ----------------------------- */

enum { OFF, OBSERVE, DEDUP, PROFILED, NMODES };
static const char *const modes[NMODES] = {"off", "observe", "dedup", "profiled"};

/* `app` without the shim, then under it in each mode with `env` (NULL-
 * terminated, may be NULL) added: every run exits 0 with the same stdout
 * and the same --out bytes. runs[m] is mode m's run (the caller frees). */
/* One run of `app --out FILE args...`; FILE's bytes into r->bytes. */
static void run_out(const char *tag, const char *app, const char *const *args, unsigned flags,
                    const char *const *env, struct vr_run *r)
{
    char name[128];
    snprintf(name, sizeof name, "%s.out", tag);
    const char *path = vr_tmp_path(name);
    const char *a[32] = {"--out", path};
    size_t k = 2;
    for (size_t i = 0; args && args[i] && k + 1 < 32; i++)
        a[k++] = args[i];
    a[k] = NULL;
    cr_assert_eq(vr_run_app(tag, app, a, flags, env, r), 0);
    cr_assert_eq(r->proc.status, 0, "%s: status %d: %s", tag, r->proc.status, r->proc.err.p);
    cr_assert(vr_read_file(path, &r->bytes), "%s: no output bytes", tag);
}

static void all_modes(const char *tag, const char *app, const char *const *args,
                      const char *const *env, struct vr_run *plain, struct vr_run runs[NMODES])
{
    char t[96];
    snprintf(t, sizeof t, "%s_plain", tag);
    run_out(t, app, args, 0, env, plain);
    cr_assert_gt(plain->bytes.len, 0, "%s: no output bytes", tag);
    for (int m = 0; m < NMODES; m++) {
        const char *e[16];
        size_t k = 0;
        for (size_t i = 0; env && env[i] && k + 2 < 16; i++)
            e[k++] = env[i];
        char mode[64];
        snprintf(mode, sizeof mode, "VAREMAP_MODE=%s", modes[m]);
        e[k++] = mode;
        e[k] = NULL;
        snprintf(t, sizeof t, "%s_%s", tag, modes[m]);
        run_out(t, app, args, VR_RUN_SHIM, e, &runs[m]);
        cr_assert_str_eq(plain->proc.out.p, runs[m].proc.out.p, "%s: stdout differs", t);
        cr_assert_eq(plain->bytes.len, runs[m].bytes.len, "%s", t);
        cr_assert(memcmp(plain->bytes.p, runs[m].bytes.p, plain->bytes.len) == 0,
                  "%s: output bytes differ", t);
    }
}

static void free_modes(struct vr_run *plain, struct vr_run runs[NMODES])
{
    vr_run_free(plain);
    for (int m = 0; m < NMODES; m++)
        vr_run_free(&runs[m]);
}

static bool went_active(const struct vr_run *r)
{
    static const char *const active[] = {"\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                         NULL};
    return vr_count_lines_with(&r->log, active) > 0;
}

/* ---- a stored pointer outlives the exec (item 4) ------------------------- */

/* A set-up kernel stores its pointer argument (a slice address under the
 * shim); the exec and its graph go; a plain kernel follows the stored
 * pointers while the buffer lives: the slice stays mapped until the buffer
 * is freed (before: SIGSEGV, the exec's teardown unmapped it). */
Test(shapes, stored_pointer_outlives_the_exec)
{
    static const char *const env[] = {"VAREMAP_SLICE_STILL=1", NULL};
    struct vr_run plain, runs[NMODES];
    all_modes("stored", "stored_ptr", NULL, env, &plain, runs);
    cr_assert(went_active(&runs[PROFILED]), "no slices: %s", runs[PROFILED].log.p);
    free_modes(&plain, runs);
}

/* Without the cache of freed memory, each slice goes with its buffer's
 * free: none is left once the program freed the three buffers. */
Test(shapes, stored_pointer_slice_goes_with_its_buffer)
{
    static const char *const env[] = {"VAREMAP_SLICE_STILL=1", "VAREMAP_VMM_CACHE=0", NULL};
    struct vr_run shim;
    cr_assert_eq(vr_run_app("stored_nocache", "stored_ptr", NULL, VR_RUN_SHIM, env, &shim), 0);
    cr_assert_eq(shim.proc.status, 0, "status %d: %s", shim.proc.status, shim.proc.err.p);
    cr_assert(went_active(&shim), "no slices: %s", shim.log.p);
    cr_assert(strstr(shim.proc.err.p, "slices_bound 0\n"), "%s", shim.proc.err.p);
    uint64_t bound;
    cr_assert(vr_summary(&shim.log, "slices_bound", &bound));
    cr_assert_eq(bound, 0);
    vr_run_free(&shim);
}

/* ---- PyTorch-like (item 8) ------------------------------------------------ */

static const char *const vmm_syms[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
                                       "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
                                       NULL};

/* No fallback of the old orphan kind: the destroyed graph is kept. */
static void no_destroyed_graph_fallback(const struct vr_run *r, const char *tag)
{
    static const char *const orphaned[] = {"\"event\":\"fallback\"", "graph", NULL};
    cr_assert_eq(vr_count_lines_with(&r->log, orphaned), 0, "%s:\n%s", tag, r->log.p);
}

/* Static buffers, the graph destroyed right after the instantiate, replay
 * only: the same bytes in every mode; the steady state (the steps after
 * the profile) sends no SetParams and no VMM call to the driver. */
Test(shapes, pytorch_like_stable)
{
    static const char *const shorter[] = {"--steps", "12", NULL};
    static const char *const longer[] = {"--steps", "36", NULL};
    struct vr_run plain, runs[NMODES], plain12, runs12[NMODES];
    all_modes("pt12", "pytorch_like", shorter, NULL, &plain12, runs12);
    all_modes("pt36", "pytorch_like", longer, NULL, &plain, runs);
    for (int m = OBSERVE; m < NMODES; m++) {
        cr_assert_eq(vr_log_count(&runs[m].log, "exec_instantiated"), 1, "%s", modes[m]);
        no_destroyed_graph_fallback(&runs[m], modes[m]);
        /* 24 more steps: nothing more reaches the driver than replays */
        cr_assert_eq(sim_sum(&runs[m], setparams_syms), sim_sum(&runs12[m], setparams_syms),
                     "%s: SetParams in the steady state", modes[m]);
        cr_assert_eq(sim_sum(&runs[m], vmm_syms), sim_sum(&runs12[m], vmm_syms),
                     "%s: VMM calls in the steady state", modes[m]);
        cr_assert_eq(sim_sum(&runs[m], launch_syms), 36, "%s", modes[m]);
    }
    cr_assert_eq(vr_log_count(&runs[PROFILED].log, "profile_decision"), 1);
    free_modes(&plain, runs);
    free_modes(&plain12, runs12);
}

/* The same with the static buffers reallocated every 8 steps (a new pool:
 * captured, instantiated and its graph destroyed again): the same bytes,
 * each exec profiled and decided, no fallback. */
Test(shapes, pytorch_like_realloc)
{
    static const char *const args[] = {"--steps", "32", "--realloc", "8", NULL};
    struct vr_run plain, runs[NMODES];
    all_modes("ptre", "pytorch_like", args, NULL, &plain, runs);
    for (int m = OBSERVE; m < NMODES; m++) {
        cr_assert_eq(vr_log_count(&runs[m].log, "exec_instantiated"), 4, "%s", modes[m]);
        cr_assert_eq(vr_log_count(&runs[m].log, "exec_destroyed"), 4, "%s", modes[m]);
        no_destroyed_graph_fallback(&runs[m], modes[m]);
    }
    cr_assert_eq(vr_log_count(&runs[PROFILED].log, "profile_decision"), 4);
    cr_assert_eq(sim_sum(&runs[PROFILED], setparams_syms),
                 summary(&runs[PROFILED], "transition_updates"));
    free_modes(&plain, runs);
}

/* ---- TensorRT-LLM-like (item 8) ------------------------------------------- */

/* Re-capture, cuGraphExecUpdate and destroy every step, a cache of three
 * execs keyed by batch shape (four shapes: misses evict), ping-pong inputs
 * and a changing scalar: the same bytes and the same cache hits in every
 * mode; under the shim the updates are absorbed (no update reaches the
 * driver: each changed node goes as its SetParams), none falls back for a
 * destroyed graph. */
Test(shapes, trtllm_like)
{
    static const char *const args[] = {"--steps", "48", NULL};
    struct vr_run plain, runs[NMODES];
    all_modes("trt", "trtllm_like", args, NULL, &plain, runs);
    static const char *const hit[] = {" hit ", NULL};
    size_t hits = vr_count_lines_with(&plain.proc.out, hit);
    cr_assert_geq(hits, 24, "%s", plain.proc.out.p);
    cr_assert_eq(sim_sum(&plain, update_syms), hits);
    for (int m = DEDUP; m < NMODES; m++) {
        no_destroyed_graph_fallback(&runs[m], modes[m]);
        cr_assert_eq(vr_log_count(&runs[m].log, "update_absorbed"), hits, "%s", modes[m]);
        cr_assert_eq(sim_sum(&runs[m], update_syms), 0, "%s", modes[m]);
    }
    free_modes(&plain, runs);
}
