/* checks: Criterion assertions shared by the e2e suites. */
#ifndef VR_CHECKS_H
#define VR_CHECKS_H

#include <criterion/criterion.h>
#include <string.h>

#include "harness.h"

static const char *const setparams_syms[] = {
    "cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2",
    "cuGraphExecNodeSetParams", NULL,
};
static const char *const launch_syms[] = { "cuGraphLaunch", "cuGraphLaunch_ptsz", NULL };

static inline uint64_t sim_sum(const struct vr_run *r, const char *const *syms)
{
    uint64_t n = 0;
    for (size_t i = 0; syms[i]; i++)
        n += vr_sim_calls(&r->stats, syms[i]);
    return n;
}

/* Runs an app and requires a clean exit with the final line and simcuda's
 * call counts. */
static inline void run_ok(struct vr_run *r, const char *tag, const char *app,
                          const char *const *args, unsigned flags, const char *const *env)
{
    int rc = vr_run_app(tag, app, args, flags, env, r);
    cr_assert_eq(rc, 0, "%s: cannot start %s: %s", tag, app, strerror(-rc));
    cr_assert_eq(r->proc.status, 0, "%s: %s exited with %d; stderr:\n%s", tag, app,
                 r->proc.status, r->proc.err.p);
    cr_assert(r->parsed, "%s: no final line on stdout:\n%s", tag, r->proc.out.p);
    cr_assert_eq(vr_count_lines(&r->proc.out, ""), 1, "%s: stdout is not one line:\n%s", tag,
                 r->proc.out.p);
    cr_assert(vr_sim_ok(&r->stats), "%s: no simcuda call counts (SIMCUDA_STATS)", tag);
}

/* Every output byte and the final line must match. */
static inline void same_output(const struct vr_run *a, const struct vr_run *b, const char *what)
{
    cr_assert_gt(a->bytes.len, 0, "%s: the reference run wrote no output", what);
    cr_assert_eq(a->bytes.len, b->bytes.len, "%s: output sizes differ: %zu vs %zu", what,
                 a->bytes.len, b->bytes.len);
    size_t i = 0;
    while (i < a->bytes.len && a->bytes.p[i] == b->bytes.p[i])
        i++;
    cr_assert_eq(i, a->bytes.len, "%s: output bytes differ first at offset %zu of %zu", what, i,
                 a->bytes.len);
    cr_assert_str_eq(a->proc.out.p, b->proc.out.p, "%s: stdout differs", what);
}

static inline uint64_t summary(const struct vr_run *r, const char *key)
{
    uint64_t v = 0;
    cr_assert(vr_log_count(&r->log, "summary") == 1,
              "expected one summary event in the log, found %zu; log:\n%s",
              vr_log_count(&r->log, "summary"), r->log.p);
    cr_assert(vr_summary(&r->log, key, &v), "summary has no numeric %s", key);
    return v;
}

#endif
