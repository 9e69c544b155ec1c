/* The profile again's window, adversarially (issue 31, item 1):
 * reprofile_probe's exec decides against slices while X is still, X's
 * first rebind (at a dear SetParams price) calls for a profile again, and
 * inside its window the program frees and reallocates the buffers, destroys
 * the exec, updates it from a new graph, makes calls the driver refuses,
 * launches from two threads, or has a kernel store X's address; or the
 * shim's own VMM calls fail from then on. Every run: the same output bytes
 * and stdout as without the shim, the same launches reaching the driver,
 * and a profile again in the decision log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"

TestSuite(reprofile_edge, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* reprofile_probe --case `which` without and with the shim (mode profiled,
 * SetParams at 20 us in simcuda and the cost model alike), plus `extra`
 * (both runs); every byte compared. */
static void probe(struct pair *p, const char *which, const char *extra)
{
    const char *model = vr_tmp_path("sp20.conf");
    FILE *f = fopen(model, "w");
    cr_assert(f);
    fprintf(f, "cuGraphExecKernelNodeSetParams_v2 20000  # the test's price\n");
    fclose(f);
    static char model_env[4096];
    snprintf(model_env, sizeof model_env, "VAREMAP_COST_MODEL=%s", model);
    const char *env[] = {"SIMCUDA_COST=cuGraphExecKernelNodeSetParams_v2:20000",
                         "VAREMAP_MODE=profiled", model_env, extra, NULL};
    struct vr_run *runs[2] = {&p->plain, &p->shim};
    for (unsigned shim = 0; shim < 2; shim++) {
        char tag[96], name[128];
        snprintf(tag, sizeof tag, "%s_%s", which, shim ? "shim" : "plain");
        snprintf(name, sizeof name, "%s.out", tag);
        const char *out = vr_tmp_path(name);
        unlink(out);
        const char *args[] = {"--case", which, "--out", out, NULL};
        cr_assert_eq(vr_run_app(tag, "reprofile_probe", args, shim ? VR_RUN_SHIM : 0, env,
                                runs[shim]),
                     0);
        cr_assert_eq(runs[shim]->proc.status, 0, "%s: status %d; stderr:\n%s", tag,
                     runs[shim]->proc.status, runs[shim]->proc.err.p);
        vr_read_file(out, &runs[shim]->bytes);
    }
    same_output(&p->plain, &p->shim, which);
    cr_assert(p->plain.parsed && p->shim.parsed, "%s: no final line:\n%s", which,
              p->shim.proc.out.p);
    cr_assert(vr_sim_ok(&p->shim.stats), "%s: no simcuda call counts", which);
    cr_assert_eq(sim_sum(&p->plain, launch_syms), sim_sum(&p->shim, launch_syms),
                 "%s: the shim changed how many launches reached the driver", which);
    cr_assert_geq(vr_log_count(&p->shim.log, "exec_reprofile"), 1,
                  "%s: no profile again; log:\n%s", which, p->shim.log.p);
    cr_assert_eq(vr_log_count(&p->shim.log, "summary"), 1, "%s: log:\n%s", which,
                 p->shim.log.p);
}

/* The reference: the first profile decides against slices, the profile
 * again (its `profile_decision` marked) takes a slice for X. */
Test(reprofile_edge, plain_profiles_again_and_slices)
{
    struct pair p;
    probe(&p, "plain", NULL);
    size_t len = 0;
    const char *d = vr_log_event(&p.shim.log, "profile_decision", 1, &len);
    cr_assert(d, "no second profile_decision; log:\n%s", p.shim.log.p);
    char state[16];
    cr_assert(vr_json_str(d, len, "state", state, sizeof state));
    cr_assert_str_eq(state, "active", "log:\n%s", p.shim.log.p);
    cr_assert_gt(summary(&p.shim, "rebinds"), 0);
    pair_free(&p);
}

Test(reprofile_edge, buffers_freed_and_reallocated_in_the_window)
{
    struct pair p;
    probe(&p, "free_reuse", NULL);
    pair_free(&p);
}

/* The same without the shim's cache of freed VMM memory: each free goes to
 * the driver and the new allocation is memory of its own. */
Test(reprofile_edge, buffers_freed_and_reallocated_uncached)
{
    struct pair p;
    probe(&p, "free_reuse", "VAREMAP_VMM_CACHE=0");
    pair_free(&p);
}

Test(reprofile_edge, exec_destroyed_and_made_again_in_the_window)
{
    struct pair p;
    probe(&p, "destroy_reuse", NULL);
    pair_free(&p);
}

Test(reprofile_edge, exec_updated_from_a_new_graph_in_the_window)
{
    struct pair p;
    probe(&p, "update", NULL);
    pair_free(&p);
}

/* The driver's own errors reach the program unchanged (stdout compared),
 * and the program keeps running. */
Test(reprofile_edge, refused_setparams_in_the_window)
{
    struct pair p;
    probe(&p, "bad_calls", NULL);
    cr_assert(strstr(p.shim.proc.out.p, "NULL params: CUDA_ERROR_INVALID_VALUE"), "%s",
              p.shim.proc.out.p);
    pair_free(&p);
}

Test(reprofile_edge, two_threads_two_streams_in_the_window)
{
    struct pair p;
    probe(&p, "two_threads", "SIMCUDA_KERNEL_DELAY_US=200");
    pair_free(&p);
}

/* A kernel stores X's address once the profile again took a slice for X;
 * a later kernel reads X through it after X was rebound. The program reads
 * the buffer it stored; with the slice remapped under the stored address it
 * reads the buffer X is now (bytes differ from offset 65536, Y's 17th
 * block). Slices cannot tell a stored argument from a passed one: a known
 * limit (docs/design.md, "Stored slice addresses"), kept here disabled so
 * that a fix turns it on. */
Test(reprofile_edge, stored_pointer_read_after_a_rebind, .disabled = true)
{
    struct pair p;
    probe(&p, "stored_ptr", NULL);
    pair_free(&p);
}

/* The shim's own VMM calls fail from the profile again on (the 9th launch:
 * step 8's, which calls for it): the program's calls all succeed. */
static void vmm_fails(const char *call)
{
    char fail[128];
    snprintf(fail, sizeof fail, "SIMCUDA_FAIL=%s:*@cuGraphLaunch:9", call);
    struct pair p;
    probe(&p, "plain", fail);
    size_t len = 0;
    const char *d = vr_log_event(&p.shim.log, "profile_decision", 1, &len);
    cr_assert(d, "%s failing: no second decision; log:\n%s", call, p.shim.log.p);
    char state[16];
    cr_assert(vr_json_str(d, len, "state", state, sizeof state));
    cr_assert_str_neq(state, "active", "%s failing: a slice anyway; log:\n%s", call,
                      p.shim.log.p);
    cr_assert_eq(summary(&p.shim, "execs_active"), 0);
    pair_free(&p);
}

Test(reprofile_edge, address_reserve_fails_at_the_re_decision)
{
    vmm_fails("cuMemAddressReserve");
}

Test(reprofile_edge, map_fails_at_the_re_decision)
{
    vmm_fails("cuMemMap");
}

Test(reprofile_edge, set_access_fails_at_the_re_decision)
{
    vmm_fails("cuMemSetAccess");
}
