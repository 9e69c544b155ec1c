/* App-shaped programs (issue 30, item 8): each runs without the shim and
 * with it in all four modes, compared byte for byte (the app's --out and its
 * final line), and the decision log is checked.
 *   pair_probe    a [begin, end) pair into one buffer, begin moving (item 2)
 *   llama_like    execs compared node by node, updated on change, instantiated
 *                 again when the update fails, several in an LRU
 *   gromacs_like  two graphs, one for even steps, one for odd ones
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

TestSuite(apps, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

#define MAXCAND 64

static const char *const modes[] = {"off", "observe", "dedup", "profiled"};
#define NMODES 4

/* Runs one of the single-file apps: they take --out and --map from the
 * command line, named as the harness reads them back. */
static void run_app_ok(struct vr_run *r, const char *tag, const char *app,
                       const char *const *args, unsigned flags, const char *const *env)
{
    const char *a[24];
    char out[112], map[112];
    size_t n = 0;
    snprintf(out, sizeof out, "%s.bin", tag);
    snprintf(map, sizeof map, "%s.map", tag);
    for (size_t i = 0; args && args[i] && n < 18; i++)
        a[n++] = args[i];
    a[n++] = "--out";
    a[n++] = vr_tmp_path(out);
    a[n++] = "--map";
    a[n++] = vr_tmp_path(map);
    a[n] = NULL;
    run_ok(r, tag, app, a, flags, env);
}

/* Runs `app args` without the shim and with it in every mode; runs[0] is
 * the reference, runs[1 + m] mode m. `env` goes to every run (SIMCUDA_*
 * knobs apply to the reference too), `shim_env` to the shim's. */
static void every_mode(const char *tag, const char *app, const char *const *args,
                       const char *const *env, const char *const *shim_env,
                       struct vr_run runs[1 + NMODES])
{
    const char *e[16];
    size_t n = 0;
    for (size_t i = 0; env && env[i] && n < 8; i++)
        e[n++] = env[i];
    e[n] = NULL;
    char t[96];
    snprintf(t, sizeof t, "%s_plain", tag);
    run_app_ok(&runs[0], t, app, args, 0, e);
    for (int m = 0; m < NMODES; m++) {
        char mode[48];
        size_t k = n;
        snprintf(mode, sizeof mode, "VAREMAP_MODE=%s", modes[m]);
        e[k++] = mode;
        for (size_t i = 0; shim_env && shim_env[i] && k < 15; i++)
            e[k++] = shim_env[i];
        e[k] = NULL;
        snprintf(t, sizeof t, "%s_%s", tag, modes[m]);
        run_app_ok(&runs[1 + m], t, app, args, VR_RUN_SHIM, e);
        same_output(&runs[0], &runs[1 + m], t);
    }
}

static void free_runs(struct vr_run runs[1 + NMODES])
{
    for (int i = 0; i < 1 + NMODES; i++)
        vr_run_free(&runs[i]);
}

/* The verdict of the candidate holding address p in the nth profile_decision
 * line ("" when no candidate holds it). */
static const char *verdict_of(const struct vr_run *r, size_t nth, uint64_t p)
{
    static char v[32];
    size_t len;
    const char *d = vr_log_event(&r->log, "profile_decision", nth, &len);
    cr_assert(d, "no profile_decision #%zu; log:\n%s", nth, r->log.p);
    struct vr_cand c[MAXCAND];
    long nc = vr_candidates(d, len, c, MAXCAND);
    cr_assert_geq(nc, 0, "unreadable candidates: %.*s", (int)len, d);
    v[0] = '\0';
    for (long i = 0; i < nc && i < MAXCAND; i++)
        if (p >= c[i].ptr && p < c[i].ptr + c[i].size)
            snprintf(v, sizeof v, "%s", c[i].verdict);
    return v;
}

/* ---- pair_probe ----------------------------------------------------------- */

/* Both buffers of a pair whose begin moves are refused a slice with the
 * verdict unanchored_word (the decision of modes observe and profiled), and
 * every sum is right in every mode (the app checks each and exits 3 on a
 * wrong one: before the fix, profiled summed 0 from step 3 on). */
static void pair_case(const char *tag, const char *which, const char *size,
                      const char *const *env, const char *const *shim_env)
{
    const char *args[] = {"--case", which, "--size", size, NULL};
    struct vr_run runs[1 + NMODES];
    every_mode(tag, "pair_probe", args, env, shim_env, runs);
    bool pingpong = !strcmp(which, "pingpong");
    for (int m = 1; m < NMODES; m += 2) { /* observe, profiled */
        const struct vr_run *r = &runs[1 + m];
        uint64_t bufs[4];
        size_t nb = vr_map_ptrs(&r->map, NULL, NULL, bufs, 4);
        cr_assert_eq(nb, pingpong ? 3u : 2u, "map:\n%s", r->map.p);
        cr_assert_eq(vr_log_count(&r->log, "profile_decision"), 1, "log:\n%s", r->log.p);
        /* a (and b; out is last): one candidate stands for both when its
         * anchors alternate between them. */
        size_t refused = 0;
        for (size_t i = 0; i + 1 < nb; i++) {
            const char *v = verdict_of(r, 0, bufs[i]);
            cr_assert(!*v || !strcmp(v, "unanchored_word"), "%s %s: buffer %zu is %s; log:\n%s",
                      tag, modes[m], i, v, r->log.p);
            refused += *v != '\0';
        }
        cr_assert_geq(refused, 1, "%s %s: no candidate refused; log:\n%s", tag, modes[m],
                      r->log.p);
        size_t len;
        const char *d = vr_log_event(&r->log, "profile_decision", 0, &len);
        char st[16];
        cr_assert(vr_json_str(d, len, "state", st, sizeof st));
        cr_assert_str_eq(st, "disabled", "%.*s", (int)len, d);
    }
    free_runs(runs);
}

Test(apps, pair_into_alternating_buffers_stays_a_pair)
{
    pair_case("pair_pp", "pingpong", "2097152", NULL, NULL);
}

/* A still buffer is sliced only when asked (VAREMAP_SLICE_STILL): then too. */
Test(apps, pair_into_a_still_buffer_stays_a_pair)
{
    static const char *const shim_env[] = {"VAREMAP_SLICE_STILL=1", NULL};
    pair_case("pair_still", "stable", "2097152", NULL, shim_env);
}

/* The 64 KiB buffers, VMM-backed on a 64 KiB granularity: their end
 * is their mapping's end. */
Test(apps, pair_into_granule_sized_buffers_stays_a_pair)
{
    static const char *const env[] = {"SIMCUDA_GRANULARITY=65536", NULL};
    static const char *const shim_env[] = {"VAREMAP_VMM_MIN_BYTES=64K", NULL};
    pair_case("pair_64k", "pingpong", "65536", env, shim_env);
}

/* ---- llama_like ----------------------------------------------------------- */

static uint64_t log_events(const struct vr_run *r, const char *event)
{
    return vr_log_count(&r->log, event);
}

/* 40 steps: 7 instantiations (first use of a shape or after an eviction),
 * 9 updates the driver grants, 9 it refuses (a step with a node more or
 * less: the program instantiates again), 15 plain relaunches; the paths are
 * in --out, so every mode took the same ones. The shim sees every exec made
 * and destroyed, and every update. */
static void llama_case(const char *tag, const char *which, const char *const *shim_env)
{
    const char *args[] = {"--case", which, NULL};
    struct vr_run runs[1 + NMODES];
    every_mode(tag, "llama_like", args, NULL, shim_env, runs);
    for (int m = 0; m < NMODES; m++) {
        const struct vr_run *r = &runs[1 + m];
        cr_assert_eq(vr_sim_calls(&r->stats, "cuGraphInstantiateWithFlags"),
                     vr_sim_calls(&runs[0].stats, "cuGraphInstantiateWithFlags"), "%s %s", tag,
                     modes[m]);
        cr_assert_leq(vr_sim_calls(&r->stats, "cuGraphExecUpdate_v2"),
                      vr_sim_calls(&runs[0].stats, "cuGraphExecUpdate_v2"), "%s %s", tag,
                      modes[m]);
        if (m == 0)
            continue; /* mode off keeps no exec */
        cr_assert_eq(log_events(r, "exec_instantiated"), 16, "%s %s; log:\n%s", tag, modes[m],
                     r->log.p);
        cr_assert_eq(log_events(r, "exec_destroyed"), 16, "%s %s", tag, modes[m]);
        cr_assert_eq(summary(r, "updates_seen"), 18, "%s %s", tag, modes[m]);
        cr_assert_eq(summary(r, "launches"), 40, "%s %s", tag, modes[m]);
    }
    free_runs(runs);
}

/* The graph replaced at each capture is destroyed (llama.cpp's way). */
Test(apps, llama_like_destroying_replaced_graphs)
{
    llama_case("llama_destroy", "destroy", NULL);
}

/* Every graph kept until its exec goes: the shim profiles each exec and
 * absorbs every update the driver would grant (9), forwarding the 9 it
 * refuses; with VAREMAP_SLICE_STILL the still buffers get slices too. */
Test(apps, llama_like_keeping_graphs)
{
    static const char *const still[] = {"VAREMAP_SLICE_STILL=1", NULL};
    for (int s = 0; s < 2; s++) {
        const char *args[] = {"--case", "keep", NULL};
        const char *tag = s ? "llama_keep_still" : "llama_keep";
        struct vr_run runs[1 + NMODES];
        every_mode(tag, "llama_like", args, NULL, s ? still : NULL, runs);
        const struct vr_run *r = &runs[1 + 3]; /* profiled */
        cr_assert_eq(summary(r, "updates_absorbed"), 9, "%s; log:\n%s", tag, r->log.p);
        cr_assert_eq(vr_sim_calls(&r->stats, "cuGraphExecUpdate_v2"), 9, "%s", tag);
        size_t nd = log_events(r, "profile_decision");
        cr_assert_geq(nd, 1, "%s: no exec was profiled; log:\n%s", tag, r->log.p);
        uint64_t x[2];
        cr_assert_eq(vr_map_ptrs(&r->map, "x", NULL, x, 2), 1);
        for (size_t i = 0; i < nd; i++)
            cr_assert_str_eq(verdict_of(r, i, x[0]), s ? "selected" : "still", "%s", tag);
        free_runs(runs);
    }
}

/* ---- gromacs_like --------------------------------------------------------- */

/* Two execs (even and odd steps) made once, both updated once when the pair
 * list is reallocated; 30 launches. */
static void gromacs_case(const char *tag, const char *which, const char *const *shim_env,
                         struct vr_run runs[1 + NMODES])
{
    const char *args[] = {"--case", which, NULL};
    every_mode(tag, "gromacs_like", args, NULL, shim_env, runs);
    for (int m = 1; m < NMODES; m++) {
        const struct vr_run *r = &runs[1 + m];
        cr_assert_eq(log_events(r, "exec_instantiated"), 2, "%s %s; log:\n%s", tag, modes[m],
                     r->log.p);
        cr_assert_eq(log_events(r, "exec_destroyed"), 2, "%s %s", tag, modes[m]);
        cr_assert_eq(summary(r, "updates_seen"), 2, "%s %s", tag, modes[m]);
        cr_assert_eq(summary(r, "launches"), 30, "%s %s", tag, modes[m]);
    }
}

Test(apps, gromacs_like_two_graphs_alternating)
{
    struct vr_run runs[1 + NMODES];
    gromacs_case("gromacs_keep", "keep", NULL, runs);
    /* Both execs profiled; the reallocation's updates change one pointer
     * each: absorbed, no update reaches the driver. */
    const struct vr_run *r = &runs[1 + 3];
    cr_assert_eq(log_events(r, "profile_decision"), 2, "log:\n%s", r->log.p);
    cr_assert_eq(summary(r, "updates_absorbed"), 2, "log:\n%s", r->log.p);
    cr_assert_eq(vr_sim_calls(&r->stats, "cuGraphExecUpdate_v2"), 0);
    free_runs(runs);
}

/* Every buffer in slices (VAREMAP_SLICE_STILL): the pair list reallocated
 * larger than its slot. */
Test(apps, gromacs_like_two_graphs_alternating_sliced)
{
    static const char *const still[] = {"VAREMAP_SLICE_STILL=1", NULL};
    struct vr_run runs[1 + NMODES];
    gromacs_case("gromacs_still", "keep", still, runs);
    const struct vr_run *r = &runs[1 + 3];
    cr_assert_eq(log_events(r, "profile_decision"), 2, "log:\n%s", r->log.p);
    for (size_t i = 0; i < 2; i++) {
        size_t len;
        const char *d = vr_log_event(&r->log, "profile_decision", i, &len);
        char st[16];
        cr_assert(vr_json_str(d, len, "state", st, sizeof st));
        cr_assert_str_eq(st, "active", "%.*s", (int)len, d);
    }
    free_runs(runs);
}

/* Each graph destroyed right after its instantiate or update. */
Test(apps, gromacs_like_graphs_destroyed_after_use)
{
    struct vr_run runs[1 + NMODES];
    gromacs_case("gromacs_destroy", "destroy", NULL, runs);
    free_runs(runs);
}

/* A buffer allocated after the decision where the address space has room:
 * right below a sliced buffer's start, so its end pointer equals that
 * start. Before each VMM-backed allocation kept a guard gap below it as
 * well as after, the end was translated into the slice and its begin not
 * (profiled summed 0 from step 5 on). */
Test(apps, an_end_pointer_at_a_sliced_buffers_start_stays_a_pair)
{
    static const char *const still[] = {"VAREMAP_SLICE_STILL=1", NULL};
    const char *args[] = {"--case", "late", "--size", "2097152", NULL};
    struct vr_run runs[1 + NMODES];
    every_mode("pair_late", "pair_probe", args, NULL, still, runs);
    const struct vr_run *r = &runs[1 + 3];
    uint64_t a[2];
    cr_assert_eq(vr_map_ptrs(&r->map, "a", NULL, a, 2), 1);
    cr_assert_str_eq(verdict_of(r, 0, a[0]), "selected", "log:\n%s", r->log.p);
    free_runs(runs);
}

/* ---- mem_nodes ------------------------------------------------------------- */

/* A graph with memory alloc and free nodes (issue 32, item 4): the shim's
 * record of it is stale (hooks_capture_stale.c), so each of its 3 updates
 * from a graph reaches the driver, in every mode; SetParams and launches
 * go through as the program made them, the bytes the same. */
static void mem_nodes_case(const char *tag, const char *which)
{
    const char *args[] = {"--case", which, NULL};
    struct vr_run runs[1 + NMODES];
    every_mode(tag, "mem_nodes", args, NULL, NULL, runs);
    const struct vr_run *ref = &runs[0];
    cr_assert_eq(vr_sim_calls(&ref->stats, "cuGraphExecUpdate_v2"), 3, "%s", tag);
    for (int m = 0; m < NMODES; m++) {
        const struct vr_run *r = &runs[1 + m];
        static const char *const same[] = {
            "cuGraphExecUpdate_v2", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
            "cuGraphAddMemAllocNode", "cuGraphAddMemFreeNode", "cuMemAllocAsync",
            "cuMemFreeAsync", "cuDeviceGraphMemTrim", NULL};
        for (size_t i = 0; same[i]; i++)
            cr_assert_eq(vr_sim_calls(&r->stats, same[i]), vr_sim_calls(&ref->stats, same[i]),
                         "%s %s: %s", tag, modes[m], same[i]);
        if (m == 0)
            continue; /* mode off keeps no exec */
        cr_assert_eq(summary(r, "updates_seen"), 3, "%s %s; log:\n%s", tag, modes[m], r->log.p);
        cr_assert_eq(summary(r, "updates_absorbed"), 0, "%s %s", tag, modes[m]);
        cr_assert_eq(summary(r, "launches"), 12, "%s %s", tag, modes[m]);
    }
    free_runs(runs);
}

Test(apps, mem_nodes_added_graph_allocates_at_launch)
{
    mem_nodes_case("mem_nodes_added", "added");
}

Test(apps, mem_nodes_captured_alloc_async_and_free_async)
{
    mem_nodes_case("mem_nodes_captured", "captured");
}
