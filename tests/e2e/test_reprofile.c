/* Re-deciding from the ledger (issue 31 item 1): an exec decided against
 * slices while its buffers were still profiles again once its forwarded
 * updates would have paid for slices (`exec_reprofile`, then a
 * `profile_decision`), and one whose slices never pay at the H200's prices
 * stays dedup, with a wait that doubles after each profile again. graph_bench
 * on simcuda, every run's checksum against the run without the shim. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

TestSuite(reprofile, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* graph_bench `args` (2 MiB buffers: VMM-backed), with the shim when
 * `shim`; its checksum into out. */
static void gb(struct vr_run *r, const char *tag, const char *const *args, bool shim,
               const char *const *env, char *checksum)
{
    const char *argv[32];
    size_t n = 0;
    for (; args[n]; n++)
        argv[n] = args[n];
    const char *const common[] = {"--bytes", "2M", "--elems", "64", NULL};
    for (size_t i = 0; common[i]; i++)
        argv[n++] = common[i];
    argv[n] = NULL;
    cr_assert_eq(vr_run_app(tag, "bench/graph_bench", argv, shim ? VR_RUN_SHIM : 0, env, r), 0,
                 "%s: could not run graph_bench", tag);
    cr_assert_eq(r->proc.status, 0, "%s: graph_bench exited with %d (3: wrong values): %s", tag,
                 r->proc.status, r->proc.err.p);
    bench_checksum(tag, r->proc.out.p, checksum, 40);
}

/* The nth profile_decision's state, and whether it was a profile again. */
static void decision(const struct vr_run *r, size_t nth, char *state, bool *again)
{
    size_t len = 0;
    const char *d = vr_log_event(&r->log, "profile_decision", nth, &len);
    cr_assert(d, "no profile_decision #%zu; log:\n%s", nth, r->log.p);
    cr_assert(vr_json_str(d, len, "state", state, 16));
    const char *key = "\"reprofile\":true";
    *again = false;
    for (size_t i = 0; i + strlen(key) <= len && !*again; i++)
        *again = strncmp(d + i, key, strlen(key)) == 0;
}

static uint64_t event_u64(const struct vr_run *r, const char *event, size_t nth, const char *key)
{
    size_t len = 0;
    uint64_t v = 0;
    const char *d = vr_log_event(&r->log, event, nth, &len);
    cr_assert(d && vr_json_u64(d, len, key, &v), "%s #%zu has no %s; log:\n%s", event, nth, key,
              r->log.p);
    return v;
}

/* `rebind` (X replaced every 10 steps) at SetParams 20 us, the cost model
 * and simcuda agreeing: the profile sees X still and decides against
 * slices; the first rebind's forwarded updates would have paid for a slice
 * many times over, so the exec profiles again, sees X move and takes a
 * slice for it. From then on X's moves are remaps: the forwarded updates
 * stay within those of two rebinds (the one that showed the ledger, the
 * one the profile again saw). A synchronization after every step leaves
 * the exec idle at each rebind (no variant serves a profile again). */
Test(reprofile, rebind_at_dear_setparams_takes_a_slice)
{
    const char *model = vr_tmp_path("sp20.conf");
    FILE *f = fopen(model, "w");
    cr_assert(f);
    fprintf(f, "cuGraphExecKernelNodeSetParams_v2 20000  # the test's price\n");
    fclose(f);
    char model_env[4096];
    snprintf(model_env, sizeof model_env, "VAREMAP_COST_MODEL=%s", model);
    const char *const env[] = {model_env, "SIMCUDA_COST=cuGraphExecKernelNodeSetParams_v2:20000",
                               "VAREMAP_MODE=profiled", NULL};
    const char *const args[] = {"--pattern", "rebind", "--nodes", "200", "--steps", "80",
                                "--warmup", "5", "--sync-every", "1", NULL};
    struct vr_run plain, shim;
    char c0[40], c1[40];
    gb(&plain, "rebind_plain", args, false, env, c0);
    gb(&shim, "rebind_shim", args, true, env, c1);
    cr_assert_str_eq(c0, c1, "checksums differ with the shim");

    char state[16];
    bool again;
    decision(&shim, 0, state, &again);
    cr_assert_str_eq(state, "disabled", "X is still while first profiled");
    cr_assert_not(again);
    cr_assert_eq(vr_log_count(&shim.log, "exec_reprofile"), 1, "log:\n%s", shim.log.p);
    uint64_t moved = event_u64(&shim, "exec_reprofile", 0, "forwarded");
    cr_assert_gt(moved, 0);
    cr_assert_gt(event_u64(&shim, "exec_reprofile", 0, "forwarded_ns"),
                 event_u64(&shim, "exec_reprofile", 0, "slice_ns"));
    /* The event comes before the decision it leads to. */
    cr_assert(strstr(shim.log.p, "\"exec_reprofile\"") <
              vr_log_event(&shim.log, "profile_decision", 1, &(size_t){0}));
    decision(&shim, 1, state, &again);
    cr_assert_str_eq(state, "active", "the profile again takes a slice for X");
    cr_assert(again);
    uint64_t forwarded = summary(&shim, "setparams_forwarded");
    cr_assert_leq(forwarded, 2 * moved, "%llu updates forwarded, %llu nodes move per rebind",
                  (unsigned long long)forwarded, (unsigned long long)moved);
    cr_assert_gt(summary(&shim, "rebinds"), 0);
    cr_assert_eq(summary(&shim, "rebind_waits"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* At the H200's prices (the built-in model): `rebind`'s forwarded updates
 * never pay a remap, so the exec never profiles again. fanout whose 8
 * buffers (25 nodes each) start moving at step 20, after the profile saw
 * them still: the ledger's floor (one remap per launch: the profile saw no
 * buffer move) calls for one profile again; it sees 8 buffers move, each
 * not worth a remap, and decides against slices; the ledger then prices 8
 * remaps per launch and never calls again. No more SetParams reach the
 * driver than in mode dedup. */
Test(reprofile, h200_prices_stay_dedup)
{
    const char *const env[] = {"VAREMAP_MODE=profiled", NULL};
    const char *const rebind[] = {"--pattern", "rebind", "--nodes", "200", "--steps", "80",
                                  "--warmup", "5", "--sync-every", "1", NULL};
    struct vr_run plain, shim, dedup;
    char c0[40], c1[40], c2[40];
    gb(&plain, "h200_rebind_plain", rebind, false, env, c0);
    gb(&shim, "h200_rebind_shim", rebind, true, env, c1);
    cr_assert_str_eq(c0, c1, "rebind: checksums differ with the shim");
    cr_assert_eq(vr_log_count(&shim.log, "exec_reprofile"), 0, "log:\n%s", shim.log.p);
    cr_assert_eq(vr_log_count(&shim.log, "profile_decision"), 1);
    vr_run_free(&plain);
    vr_run_free(&shim);

    const char *const fanout[] = {"--pattern", "fanout", "--nodes", "200", "--steps", "200",
                                  "--warmup", "5", "--moving-from", "20", NULL};
    const char *const dedup_env[] = {"VAREMAP_MODE=dedup", NULL};
    gb(&plain, "h200_fanout_plain", fanout, false, env, c0);
    gb(&shim, "h200_fanout_shim", fanout, true, env, c1);
    gb(&dedup, "h200_fanout_dedup", fanout, true, dedup_env, c2);
    cr_assert_str_eq(c0, c1, "fanout: checksums differ with the shim");
    cr_assert_str_eq(c0, c2, "fanout: checksums differ in mode dedup");
    cr_assert_eq(vr_log_count(&shim.log, "exec_reprofile"), 1, "log:\n%s", shim.log.p);
    cr_assert_eq(event_u64(&shim, "exec_reprofile", 0, "movers"), 1);
    cr_assert_eq(vr_log_count(&shim.log, "profile_decision"), 2);
    char state[16];
    bool again;
    decision(&shim, 1, state, &again);
    cr_assert_str_eq(state, "disabled", "8 buffers of 25 nodes: none worth a remap");
    cr_assert(again);
    cr_assert_eq(summary(&shim, "execs_disabled"), 1, "an exec counted once");
    static const char *const sp[] = {"cuGraphExecKernelNodeSetParams_v2", NULL};
    uint64_t mine = sim_sum(&shim, sp), theirs = sim_sum(&dedup, sp);
    cr_assert_leq(mine, theirs, "SetParams: %llu in mode profiled, %llu in mode dedup",
                  (unsigned long long)mine, (unsigned long long)theirs);
    vr_run_free(&plain);
    vr_run_free(&shim);
    vr_run_free(&dedup);
}
