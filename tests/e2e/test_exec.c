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
    case_pair("exec_edge", which, shim);
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

/* The program destroys its graph once the exec is active: the shim can no
 * longer re-point a node (the driver refuses the graph's nodes), launches go
 * on right, and the program's update gets the driver's own refusal. */
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
