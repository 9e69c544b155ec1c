/* The exec core against what used to go wrong: a scalar whose bits equal a
 * selected buffer's address, [begin, end) pairs, launches gated by a host
 * function while the program rebinds, destroys or updates, and completion
 * queries or waits that fail. Each case failed on the shim before its fix. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

TestSuite(exec, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* exec_edge checks its own values; with and without the shim it must say
 * "ok". */
static void edge(const char *which, struct vr_run *shim)
{
    /* Its buffers do not move while profiled: the slices it checks are
     * made only when still buffers get them too. */
    static const char *const slice_still[] = {"VAREMAP_SLICE_STILL=1", NULL};
    vr_shim_env = slice_still;
    case_pair("exec_edge", which, shim);
    vr_shim_env = NULL;
}

static void selected_something(const struct vr_run *r)
{
    static const char *const active[] = {"\"event\":\"profile_decision\"", "\"state\":\"active\"",
                                         NULL};
    cr_assert_geq(vr_count_lines_with(&r->log, active), 1, "nothing was remapped:\n%s", r->log.p);
}

Test(exec, scalar_with_address_bits_is_not_translated)
{
    struct vr_run shim;
    edge("scalar", &shim);
    selected_something(&shim);
    vr_run_free(&shim);
}

/* The program destroys its graph once the exec is active: launches go on
 * right, and every call naming the graph's node (SetParams, get and set
 * enabled) gets the driver's refusal, also under the shim, which keeps the
 * graph for its own calls. */
Test(exec, destroyed_graph_leaves_the_exec_running_and_updates_refused)
{
    struct vr_run shim;
    edge("orphan", &shim);
    selected_something(&shim);
    cr_assert(strstr(shim.proc.out.p, "update after destroy: CUDA_ERROR_INVALID_VALUE"),
              "%s", shim.proc.out.p);
    vr_run_free(&shim);
}

Test(exec, whole_buffer_range_is_translated_as_a_pair)
{
    struct vr_run shim;
    edge("range", &shim);
    selected_something(&shim);
    vr_run_free(&shim);
}

Test(exec, rebind_behind_a_host_function_does_not_block)
{
    struct vr_run shim;
    edge("gate", &shim);
    selected_something(&shim);
    cr_assert_eq(summary(&shim, "rebind_waits"), 0);
    vr_run_free(&shim);
}

Test(exec, destroy_behind_a_host_function_does_not_block)
{
    struct vr_run shim;
    edge("gate-destroy", &shim);
    selected_something(&shim);
    cr_assert_eq(summary(&shim, "slices_bound"), 0, "the slice was not unmapped by exit");
    vr_run_free(&shim);
}

Test(exec, update_behind_a_host_function_does_not_block)
{
    struct vr_run shim;
    edge("gate-update", &shim);
    selected_something(&shim);
    /* The update moves one argument only (issue 19): applied through the
     * SetParams path while the launch waits, no cuGraphExecUpdate sent, the
     * exec not reset. */
    cr_assert_eq(vr_log_count(&shim.log, "exec_reset"), 0);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 1);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphExecUpdate_v2"), 0);
    vr_run_free(&shim);
}

/* A SetParams changed the node's launch shape: the update from a graph
 * with the first shape must reach the driver (the exec's record of its
 * instantiated graph no longer says what the driver holds), and the
 * updates after it change nothing and are absorbed. */
Test(exec, update_restoring_a_launch_shape_reaches_the_driver)
{
    struct vr_run shim;
    edge("reshape", &shim);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphExecUpdate_v2"), 1, "log:\n%s", shim.log.p);
    cr_assert_eq(summary(&shim, "updates_absorbed"), 4, "log:\n%s", shim.log.p);
    vr_run_free(&shim);
}

/* Completion can never be proven: every query fails. The shim must not
 * remap anything (a remap under a running kernel changes its bytes) and the
 * output stays the program's. */
static void failing_completion(const char *fail)
{
    static const char *const args[] = {"--pattern", "swap", "--k", "3", "--bytes", "1048576",
                                       NULL};
    const char *env[] = {"SIMCUDA_KERNEL_DELAY_US=200", fail, NULL};
    struct vr_run plain, shim;
    run_ok(&plain, "fail_plain", "graph_linked", args, 0, env);
    run_ok(&shim, "fail_shim", "graph_linked", args, VR_RUN_SHIM, env);
    same_output(&plain, &shim, fail);
    cr_assert_eq(summary(&shim, "rebind_waits"), 0);
    cr_assert_eq(summary(&shim, "vmm_bytes"), 0, "memory left mapped at exit");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(exec, failed_event_queries_never_lead_to_a_remap)
{
    failing_completion("SIMCUDA_FAIL=cuEventQuery:*");
}

Test(exec, failed_event_waits_never_lead_to_a_remap)
{
    failing_completion("SIMCUDA_FAIL=cuEventSynchronize:*");
}

/* The lines of text that are not comments, in order. */
static void answers_only(const char *text, struct vr_buf *out)
{
    size_t n = strlen(text);
    out->p = calloc(n + 1, 1);
    cr_assert_not_null(out->p);
    out->len = 0;
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l + 1) : strlen(l);
        if (*l != '#') {
            memcpy(out->p + out->len, l, len);
            out->len += len;
        }
        l += len;
    }
}

/* simcuda answers the questions cuda.h leaves open as a GPU did
 * (driver-answers.txt, recorded by gpu-check), and a program under the shim
 * gets the same answers: the driver's own errors, also for exec calls that
 * name the nodes of a destroyed graph (which the shim could otherwise absorb)
 * and for calls at exit, after the driver shut down. */
static void probe_answers(unsigned flags, const char *tag)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/../tests/simcuda/driver-answers.txt", vr_env_path("VR_SCRIPTS"));
    struct vr_buf recorded, want, got;
    cr_assert(vr_read_file(path, &recorded), "cannot read %s", path);
    answers_only(recorded.p, &want);
    struct vr_run r;
    cr_assert_eq(vr_run_app(tag, "driver_probe", NULL, flags, NULL, &r), 0);
    cr_assert_eq(r.proc.status, 0, "%s: driver_probe exited %d: %s", tag, r.proc.status,
                 r.proc.err.p);
    answers_only(r.proc.out.p, &got);
    cr_assert_str_eq(got.p, want.p, "%s: driver_probe's answers differ from %s", tag, path);
    vr_buf_free(&recorded);
    vr_buf_free(&want);
    vr_buf_free(&got);
    vr_run_free(&r);
}

Test(exec, simcuda_answers_as_the_gpu_did)
{
    probe_answers(0, "probe_plain");
}

Test(exec, the_shim_passes_the_drivers_answers_on)
{
    probe_answers(VR_RUN_SHIM, "probe_shim");
}

/* ---- capture-and-update programs (issue 19) ---- */

static const char *const update_syms[] = {"cuGraphExecUpdate_v2", "cuGraphExecUpdate", NULL};

/* recapture with and without the shim: the same stdout (every update's
 * CUresult, result and error node, every step's sums). */
static void recapture(const char *tag, const char *const *args, struct vr_run *plain,
                      struct vr_run *shim)
{
    char t1[96], t2[96];
    snprintf(t1, sizeof t1, "%s_plain", tag);
    snprintf(t2, sizeof t2, "%s_shim", tag);
    cr_assert_eq(vr_run_app(t1, "recapture", args, 0, NULL, plain), 0);
    cr_assert_eq(plain->proc.status, 0, "%s without the shim: %s", tag, plain->proc.err.p);
    cr_assert_eq(vr_run_app(t2, "recapture", args, VR_RUN_SHIM, NULL, shim), 0);
    cr_assert_eq(shim->proc.status, 0, "%s with the shim: %s", tag, shim->proc.err.p);
    cr_assert_str_eq(plain->proc.out.p, shim->proc.out.p, "%s", tag);
}

static void recapture_case(const char *pattern, const char *mode, const char *extra)
{
    const char *args[] = {"--pattern", pattern, "--mode", mode, "--steps", "10", "--nodes", "8",
                          extra, NULL};
    char tag[96];
    snprintf(tag, sizeof tag, "recap_%s_%s_%s", pattern, mode, extra ? extra + 2 : "capture");
    struct vr_run plain, shim;
    recapture(tag, args, &plain, &shim);
    uint64_t updates = sim_sum(&plain, update_syms);
    cr_assert_eq(updates, 10, "%s: %llu updates without the shim", tag,
                 (unsigned long long)updates);
    /* The recorder knew every graph: the getters' read (the one user of
     * cuGraphNodeGetDependencies) never ran. */
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0, "%s", tag);
    uint64_t sp = sim_sum(&shim, setparams_syms), trans = summary(&shim, "transition_updates");
    if (!strcmp(pattern, "stable")) {
        /* Nothing changes: nothing reaches the driver. */
        cr_assert_eq(sim_sum(&shim, update_syms), 0, "%s", tag);
        cr_assert_eq(sp, trans, "%s: %llu SetParams", tag, (unsigned long long)sp);
        cr_assert_eq(vr_log_sum(&shim.log, "update_absorbed", "changed"), 0, "%s", tag);
    } else if (!strcmp(pattern, "pingpong") || !strcmp(pattern, "move")) {
        /* Pointer-only changes: no update, at most the changed nodes'
         * SetParams (8 per step). */
        cr_assert_eq(sim_sum(&shim, update_syms), 0, "%s", tag);
        cr_assert_leq(sp, trans + 10 * 8, "%s: %llu SetParams", tag, (unsigned long long)sp);
        /* pingpong's first step writes where the exec's graph did */
        uint64_t moved = !strcmp(pattern, "move") ? 10 * 8 : 9 * 8;
        cr_assert_eq(vr_log_sum(&shim.log, "update_absorbed", "changed"), moved, "%s", tag);
    } else {
        /* The middle step's topology change reaches the driver (the same
         * answer: stdout); the exec instantiated again from a graph that is
         * destroyed at once is orphaned, and its unchanged updates are
         * absorbed all the same. */
        cr_assert_eq(sim_sum(&shim, update_syms), 1, "%s", tag);
        cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 9, "%s", tag);
    }
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(exec, recapture_stable_global) { recapture_case("stable", "global", NULL); }
Test(exec, recapture_stable_thread) { recapture_case("stable", "thread", NULL); }
Test(exec, recapture_stable_relaxed) { recapture_case("stable", "relaxed", NULL); }
Test(exec, recapture_pingpong_global) { recapture_case("pingpong", "global", NULL); }
Test(exec, recapture_pingpong_thread) { recapture_case("pingpong", "thread", NULL); }
Test(exec, recapture_pingpong_relaxed) { recapture_case("pingpong", "relaxed", NULL); }
Test(exec, recapture_move_global) { recapture_case("move", "global", NULL); }
Test(exec, recapture_move_relaxed) { recapture_case("move", "relaxed", NULL); }
Test(exec, recapture_topology_global) { recapture_case("topology", "global", NULL); }
Test(exec, recapture_topology_thread) { recapture_case("topology", "thread", NULL); }
Test(exec, recapture_topology_relaxed) { recapture_case("topology", "relaxed", NULL); }
Test(exec, rebuild_stable) { recapture_case("stable", "global", "--explicit"); }
Test(exec, rebuild_pingpong) { recapture_case("pingpong", "global", "--explicit"); }
Test(exec, rebuild_topology) { recapture_case("topology", "global", "--explicit"); }
/* Adversarial: the middle node joined from a second stream by events; v1;
 * another thread capturing and updating its own exec meanwhile. */
Test(exec, recapture_joined_by_event) { recapture_case("pingpong", "global", "--join"); }
Test(exec, recapture_stable_joined_by_event) { recapture_case("stable", "global", "--join"); }
Test(exec, recapture_v1) { recapture_case("pingpong", "global", "--v1"); }
/* cudart's --default-stream per-thread: the capture on the per-thread
 * default stream through the _ptsz entry points (stream 0) and
 * CU_STREAM_PER_THREAD, both one stream to the recorder. */
Test(exec, recapture_per_thread_stream_stable) { recapture_case("stable", "global", "--ptds"); }
Test(exec, recapture_per_thread_stream_pingpong) { recapture_case("pingpong", "thread", "--ptds"); }

Test(exec, recapture_while_another_thread_captures)
{
    const char *args[] = {"--pattern", "stable", "--mode", "thread", "--steps", "10", "--nodes",
                          "8", "--thread", NULL};
    struct vr_run plain, shim;
    recapture("recap_thread", args, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 20);
    /* main's stable updates absorbed, the other thread's pingpong ones too */
    cr_assert_eq(sim_sum(&shim, update_syms), 0);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 20);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Captures that begin with an async memset and copy (memset and memcpy
 * nodes): recorded like the kernels, so an unchanged step sends no update;
 * a changed memset value is forwarded once, and the steps after it, equal
 * to the updated exec, are absorbed again. Same bytes (the copy's result
 * is in the sums). */
static void recapture_memset(const char *pattern, uint64_t want_updates)
{
    const char *args[] = {"--pattern", pattern, "--steps", "10", "--nodes", "8", "--memset", NULL};
    char tag[96];
    snprintf(tag, sizeof tag, "recap_memset_%s", pattern);
    struct vr_run plain, shim;
    recapture(tag, args, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 10, "%s", tag);
    /* the first capture (the instantiate's) and one per step */
    cr_assert_eq(vr_sim_calls(&plain.stats, "cuMemsetD32Async"), 11, "%s", tag);
    cr_assert_eq(sim_sum(&shim, update_syms), want_updates, "%s", tag);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 10 - want_updates, "%s", tag);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0, "%s", tag);
    /* the public counters (summary event = varemap_get_stats) */
    cr_assert_eq(summary(&shim, "updates_seen"), 10, "%s", tag);
    cr_assert_eq(summary(&shim, "updates_absorbed"), 10 - want_updates, "%s", tag);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(exec, recapture_memset_stable) { recapture_memset("stable", 0); }
Test(exec, recapture_memset_value_changes) { recapture_memset("memset_value", 1); }

/* A graph the shim never saw made (a clone): read once through the getters
 * at each update; the pointer-only updates are still absorbed. */
Test(exec, recapture_update_from_an_unseen_graph)
{
    const char *args[] = {"--pattern", "pingpong", "--steps", "10", "--nodes", "8", "--clone",
                          NULL};
    struct vr_run plain, shim;
    recapture("recap_clone", args, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 10);
    cr_assert_eq(sim_sum(&shim, update_syms), 0);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 10);
    cr_assert_gt(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0,
                 "the getters were not read");
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* Each update meets the exec's last launch still running (kernels take
 * 200 us, nothing waited for until the end): same bytes, no update sent. */
Test(exec, recapture_update_while_a_launch_runs)
{
    const char *args[] = {"--pattern", "pingpong", "--steps", "10", "--nodes", "8", "--async",
                          NULL};
    static const char *const env[] = {"SIMCUDA_KERNEL_DELAY_US=200", NULL};
    struct vr_run plain, shim;
    cr_assert_eq(vr_run_app("recap_async_plain", "recapture", args, 0, env, &plain), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    cr_assert_eq(vr_run_app("recap_async_shim", "recapture", args, VR_RUN_SHIM, env, &shim), 0);
    cr_assert_eq(shim.proc.status, 0, "%s", shim.proc.err.p);
    cr_assert_str_eq(plain.proc.out.p, shim.proc.out.p);
    cr_assert_eq(sim_sum(&shim, update_syms), 0);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 10);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* The instantiate graph destroyed right after the instantiate (TensorRT-
 * LLM's way): the shim keeps it until the exec goes (the driver names the
 * exec's nodes by its node handles), so the exec is served as any other:
 * no update reaches the driver, only the moved nodes' SetParams. */
Test(exec, recapture_orphan_stable)
{
    const char *args[] = {"--pattern", "stable", "--steps", "10", "--nodes", "8", "--orphan", NULL};
    struct vr_run plain, shim;
    recapture("recap_orphan_stable", args, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 10);
    cr_assert_eq(sim_sum(&shim, update_syms), 0);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 10);
    /* every graph the program destroyed is destroyed in the driver too
     * (and the shim's own clones) */
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphDestroy"),
                 vr_sim_calls(&plain.stats, "cuGraphDestroy") +
                     vr_sim_calls(&shim.stats, "cuGraphClone"));
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(exec, recapture_orphan_pingpong)
{
    const char *args[] = {"--pattern", "pingpong", "--steps", "10", "--nodes", "8", "--orphan",
                          NULL};
    struct vr_run plain, shim;
    recapture("recap_orphan_pingpong", args, &plain, &shim);
    /* step 0 changes nothing; every later one moves all outputs (64 KiB
     * buffers: no slices), each as the moved node's SetParams */
    cr_assert_eq(sim_sum(&shim, update_syms), 0);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 10);
    cr_assert_leq(sim_sum(&shim, setparams_syms), 9 * 8);
    cr_assert_eq(vr_log_count(&shim.log, "fallback"), 0, "%s", shim.log.p);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphDestroy"),
                 vr_sim_calls(&plain.stats, "cuGraphDestroy") +
                     vr_sim_calls(&shim.stats, "cuGraphClone"));
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* A capture whose fork is never joined back: the driver refuses its end
 * (the same answer with the shim), and the recorder forgets it: the next
 * captures on that stream are recorded (no getters' read). */
Test(exec, recapture_after_an_unjoined_capture)
{
    const char *args[] = {"--pattern", "pingpong", "--steps", "6", "--nodes", "4", "--unjoined",
                          NULL};
    struct vr_run plain, shim;
    recapture("recap_unjoined", args, &plain, &shim);
    static const char *const refused[] = {"unjoined capture r=904", NULL};
    cr_assert_eq(vr_count_lines_with(&plain.proc.out, refused), 1, "%s", plain.proc.out.p);
    cr_assert_eq(sim_sum(&shim, update_syms), 0);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* One more node kind in each capture (recapture --node): recorded from the
 * call's own parameters, so an unchanged step sends no update and the
 * bytes are the run's without the shim; node_change changes that node from
 * the middle step on (a copy's source, a memset's value, a host function's
 * userData, a launch attribute): not a kernel argument, so that one update
 * goes to the driver, and the steps after it, equal to the updated exec,
 * are absorbed again. */
static void recapture_node(const char *kind, const char *pattern, const char *extra,
                           uint64_t want_updates)
{
    const char *args[] = {"--pattern", pattern, "--steps", "10", "--nodes", "8", "--node", kind,
                          extra, NULL};
    char tag[96];
    snprintf(tag, sizeof tag, "recap_node_%s_%s%s", kind, pattern, extra ? "_explicit" : "");
    struct vr_run plain, shim;
    recapture(tag, args, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 10, "%s", tag);
    cr_assert_eq(sim_sum(&shim, update_syms), want_updates, "%s", tag);
    cr_assert_eq(vr_log_count(&shim.log, "update_absorbed"), 10 - want_updates, "%s", tag);
    cr_assert_eq(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0, "%s", tag);
    vr_run_free(&plain);
    vr_run_free(&shim);
}

Test(exec, recapture_uva_copy_stable) { recapture_node("memcpy", "stable", NULL, 0); }
Test(exec, recapture_uva_copy_source_moves) { recapture_node("memcpy", "node_change", NULL, 1); }
Test(exec, recapture_memset16_stable) { recapture_node("memset16", "stable", NULL, 0); }
Test(exec, recapture_memset16_value_changes) { recapture_node("memset16", "node_change", NULL, 1); }
Test(exec, recapture_memset2d_stable) { recapture_node("memset2d", "stable", NULL, 0); }
Test(exec, recapture_memset2d_value_changes) { recapture_node("memset2d", "node_change", NULL, 1); }
Test(exec, recapture_host_func_stable) { recapture_node("host", "stable", NULL, 0); }
Test(exec, recapture_host_func_data_changes) { recapture_node("host", "node_change", NULL, 1); }
Test(exec, rebuild_host_node_stable) { recapture_node("host", "stable", "--explicit", 0); }
Test(exec, rebuild_host_node_data_changes)
{
    recapture_node("host", "node_change", "--explicit", 1);
}
Test(exec, recapture_launch_attrs_stable) { recapture_node("attrs", "stable", NULL, 0); }
Test(exec, recapture_launch_attr_changes) { recapture_node("attrs", "node_change", NULL, 1); }

/* The program changes a node of a captured graph (found with
 * cuGraphGetNodes) before the update: the recorder keeps no handles of
 * captured nodes, so the graph's record must not be trusted any more. The
 * update reads the graph through the getters and applies the changed
 * argument; the bytes are the run's without the shim. */
Test(exec, recapture_node_set_after_capture)
{
    const char *args[] = {"--pattern", "set_captured", "--steps", "10", "--nodes", "8", NULL};
    struct vr_run plain, shim;
    recapture("recap_set_captured", args, &plain, &shim);
    cr_assert_eq(sim_sum(&plain, update_syms), 10);
    cr_assert_gt(vr_sim_calls(&shim.stats, "cuGraphNodeGetDependencies"), 0,
                 "the changed graph's record was trusted");
    vr_run_free(&plain);
    vr_run_free(&shim);
}
