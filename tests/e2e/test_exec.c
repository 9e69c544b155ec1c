/* The exec core against what used to go wrong: a scalar whose bits equal a
 * selected buffer's address, [begin, end) pairs, launches gated by a host
 * function while the program rebinds, destroys or updates, and completion
 * queries or waits that fail. Each case failed on the shim before its fix. */
#include <stdio.h>

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
    cr_assert_eq(vr_log_count(&shim.log, "exec_reset"), 1);
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
