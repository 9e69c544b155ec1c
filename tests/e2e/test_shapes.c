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
