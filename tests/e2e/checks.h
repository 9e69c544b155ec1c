/* checks: Criterion assertions shared by the e2e suites. */
#ifndef VR_CHECKS_H
#define VR_CHECKS_H

#include <criterion/criterion.h>
#include <stdio.h>
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

/* APP --case WHICH without and with the shim: both exit 0 (142: the app's
 * alarm, a hang) with the same stdout; the run with the shim is kept. */
static inline void case_pair(const char *app, const char *which, struct vr_run *shim)
{
    const char *args[] = {"--case", which, NULL};
    char t1[64], t2[64];
    struct vr_run plain;
    snprintf(t1, sizeof t1, "%s_plain", which);
    snprintf(t2, sizeof t2, "%s_shim", which);
    cr_assert_eq(vr_run_app(t1, app, args, 0, NULL, &plain), 0);
    cr_assert_eq(plain.proc.status, 0, "%s without the shim: %s", which, plain.proc.err.p);
    cr_assert_eq(vr_run_app(t2, app, args, VR_RUN_SHIM, NULL, shim), 0);
    cr_assert_eq(shim->proc.status, 0, "%s with the shim (status %d; 142 = hung): %s", which,
                 shim->proc.status, shim->proc.err.p);
    cr_assert_str_eq(plain.proc.out.p, shim->proc.out.p);
    vr_run_free(&plain);
}

/* graph_bench's `"checksum": "..."` into out (cap bytes, NUL-terminated). */
static inline void bench_checksum(const char *tag, const char *stdout_text, char *out, size_t cap)
{
    const char *c = strstr(stdout_text, "\"checksum\": \"");
    cr_assert(c, "%s: no checksum in:\n%s", tag, stdout_text);
    c += strlen("\"checksum\": \"");
    size_t n = 0;
    while (c[n] && c[n] != '"' && n + 1 < cap)
        n++;
    memcpy(out, c, n);
    out[n] = '\0';
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

/* One program run without and with the shim. */
struct pair {
    struct vr_run plain, shim;
};

/* Runs `app args` without and with the shim; `env` goes to both (at most 8),
 * `shim_env` to the shim run only (after `shim_mode`, when not NULL, e.g.
 * "VAREMAP_MODE=profiled"). Both must exit with `status`. */
static inline void pair_run_app(struct pair *p, const char *tag, const char *app,
                                const char *const *args, const char *const *env,
                                const char *shim_mode, const char *const *shim_env, int status)
{
    const char *e[16];
    size_t n = 0;
    for (size_t i = 0; env && env[i] && n < 8; i++)
        e[n++] = env[i];
    e[n] = NULL;
    char t1[96], t2[96];
    snprintf(t1, sizeof t1, "%s_plain", tag);
    snprintf(t2, sizeof t2, "%s_shim", tag);
    cr_assert_eq(vr_run_app(t1, app, args, 0, e, &p->plain), 0);
    if (shim_mode)
        e[n++] = shim_mode;
    for (size_t i = 0; shim_env && shim_env[i] && n < 15; i++)
        e[n++] = shim_env[i];
    e[n] = NULL;
    cr_assert_eq(vr_run_app(t2, app, args, VR_RUN_SHIM, e, &p->shim), 0);
    cr_assert_eq(p->plain.proc.status, status, "%s: without the shim: status %d; stderr:\n%s",
                 tag, p->plain.proc.status, p->plain.proc.err.p);
    cr_assert_eq(p->shim.proc.status, status, "%s: with the shim: status %d; stderr:\n%s", tag,
                 p->shim.proc.status, p->shim.proc.err.p);
}

static inline void pair_free(struct pair *p)
{
    vr_run_free(&p->plain);
    vr_run_free(&p->shim);
}

#endif
