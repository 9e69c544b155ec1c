/* The fault matrix (issue 7): every driver call the shim makes itself, made
 * to fail at three moments (its first call; from the profile's decision on,
 * which covers the transition and everything after it; every call), under
 * four workloads (stable buffers, rebinds, reallocation, buffers freed while
 * a launch that reads them is in flight), a fifth that updates the exec
 * (cuGraphExecUpdate) after the transition, one that captures its step and
 * updates the exec from the capture every step after the transition
 * (recapture), and two served by variants (pingpong in two streams, and in
 * two threads' per-thread streams). Each cell runs the scenario
 * without the shim and with it, under the same fault (SIMCUDA_FAIL).
 *
 * A cell holds when the run with the shim
 *   - ends by itself (no signal, no hang), and
 *   - behaves exactly as the run without the shim under the same fault (a
 *     fault in a call the program makes itself hits that run too: same exit
 *     status, same error line, same bytes), or succeeds with the bytes of
 *     the run without any fault (the shim stepped aside), and
 *   - when it succeeds, leaves nothing alive at exit (simcuda's "live"
 *     counts): no mapping, handle, reservation, allocation, event or exec.
 *     The one exception is a call without which nothing can be returned
 *     failing every time (cuMemUnmap:*, ...): then the shim must have said
 *     so (vmm_leaked_bytes or a `fallback` in its log).
 *
 * The cells are generated from the three tables below; a further test
 * checks that the table of calls covers every entry point the shim calls
 * more often than the program does on its own. */
#include <stdio.h>

#include "checks.h"

#include <criterion/parameterized.h>

/* ---- the matrix ---------------------------------------------------------- */

struct call {
    const char *name;
    /* With every call failing, the shim cannot return what it holds. */
    bool needed_to_release;
};

static const struct call calls[] = {
    /* VMM backing (alloc.c) and slices (slice.c) */
    { "cuMemAddressReserve", false },
    { "cuMemCreate", false },
    { "cuMemMap", false },
    { "cuMemSetAccess", false },
    { "cuMemUnmap", true },
    { "cuMemRelease", true },
    { "cuMemAddressFree", true },
    { "cuMemGetAllocationGranularity", false },
    { "cuDeviceGetAttribute", false },
    { "cuMemGetInfo_v2", false },
    { "cuMemAlloc_v2", false },
    { "cuMemFree_v2", false },
    /* contexts */
    { "cuCtxGetCurrent", false },
    { "cuCtxGetDevice", false },
    { "cuCtxSynchronize", true },
    { "cuCtxPushCurrent_v2", false },
    { "cuCtxPopCurrent_v2", false },
    /* completion of launches (exec.c) */
    { "cuEventCreate", false },
    { "cuEventRecord", false },
    { "cuEventQuery", false },
    { "cuEventDestroy_v2", true },
    /* reading graphs and layouts (node.c, layout.c) */
    { "cuGraphGetNodes", false },
    { "cuGraphNodeGetType", false },
    { "cuGraphKernelNodeGetParams_v2", false },
    { "cuFuncGetParamInfo", false },
    { "cuFuncGetModule", false },
    /* the transition and re-issues, and the launch itself */
    { "cuGraphExecKernelNodeSetParams_v2", false },
    { "cuGraphLaunch", false },
    { "cuGraphExecDestroy", false },
    /* variants (variant.c): the clone kept at instantiation, the execs made
     * from it, and what tells whether a graph may be varied */
    { "cuGraphClone", false },
    { "cuGraphDestroy", true },
    { "cuGraphNodeFindInClone", false },
    { "cuGraphKernelNodeGetAttribute", false },
    { "cuGraphInstantiateWithFlags", false },
    { "cuStreamWaitEvent", false },
    /* node setters made again on variants (setters.c): graph_linked's graph
     * has kernel nodes only, so these cells check that a fault there leaves
     * a kernel-only program alone; e2e_variant's `nodes` case reaches them */
    { "cuGraphExecMemsetNodeSetParams", false },
    { "cuGraphExecMemcpyNodeSetParams", false },
    { "cuGraphExecHostNodeSetParams", false },
    /* the shim's own calls in relaxed capture mode (capture_guard.c) */
    { "cuThreadExchangeStreamCaptureMode", false },
    /* start-up and logging */
    { "cuDriverGetVersion", false },
    { "cuGetErrorName", false },
};
#define NCALLS (sizeof calls / sizeof calls[0])

struct moment {
    const char *name;
    const char *fmt; /* SIMCUDA_FAIL value, %s = the call */
    bool every;
};

/* VAREMAP_PROFILE_LAUNCHES=3: the decision and the transition run in the
 * hook of the 4th launch, after the driver's 3rd; "@cuGraphLaunch:3" is the
 * same moment of the program with and without the shim. */
static const struct moment moments[] = {
    { "first", "%s:1", false },
    { "transition", "%s:1@cuGraphLaunch:3", false },
    { "every", "%s:*", true },
};
#define NMOMENTS (sizeof moments / sizeof moments[0])

struct pattern {
    const char *name;
    const char *args[8];
    const char *env; /* or NULL */
    bool rebinds;    /* a slice is rebound in the clean run */
    bool variants;   /* a variant is made in the clean run */
};

/* X is replaced every 4th step: stable over the profile (selected), then
 * rebound twice. mixed: pingpong, those rebinds, a reallocation every step,
 * by-value structs; with slow kernels every free finds a launch in flight. */
static const struct pattern patterns[] = {
    { "stable", { "--pattern", "stable", NULL }, NULL, false, false },
    { "rebind", { "--pattern", "rebind", "--k", "4", NULL }, NULL, true, false },
    { "realloc", { "--pattern", "realloc", NULL }, NULL, false, false },
    { "free_in_flight", { "--pattern", "mixed", "--k", "4", NULL }, "SIMCUDA_KERNEL_DELAY_US=40",
      true, false },
    /* beyond the four: cuGraphExecUpdate after the transition (the shim
     * reads the update graph and profiles again) */
    { "update", { "--pattern", "rebind", "--k", "4", "--update-at", "6", NULL }, NULL, true,
      false },
    /* issue 19: from step 5 on, every step is captured (global mode) with
     * its buffers and the exec updated from the capture (X replaced at
     * steps 4 and 8: the rebind before, a moved pointer in the update) */
    { "recapture", { "--pattern", "rebind", "--k", "4", "--recapture-from", "5", NULL }, NULL,
      true, false },
    /* with variants (issue 15): pingpong launched alternately in two
     * streams, and by two threads into their per-thread default streams;
     * the variants' launches are ordered behind the program's exec's */
    { "pingpong_streams", { "--pattern", "pingpong", "--two-streams", NULL },
      "SIMCUDA_KERNEL_DELAY_US=40", false, true },
    { "pingpong_ptds", { "--pattern", "pingpong", "--ptds-threads", NULL },
      "SIMCUDA_KERNEL_DELAY_US=40", false, true },
};
#define NPATTERNS (sizeof patterns / sizeof patterns[0])

/* Small and short: the matrix has NCALLS * NMOMENTS * NPATTERNS cells. */
static const char *const common_args[] = { "--steps", "10", "--bytes", "65536", NULL };

/* A run that takes longer than this hung. */
#define HANG_SECONDS 30

struct cell {
    unsigned call, moment, pattern;
};

/* ---- running ------------------------------------------------------------- */

static void run(struct vr_run *r, const char *tag, const struct pattern *p, const char *fail,
                unsigned flags)
{
    const char *args[16];
    size_t n = 0;
    for (size_t i = 0; common_args[i]; i++)
        args[n++] = common_args[i];
    for (size_t i = 0; p->args[i]; i++)
        args[n++] = p->args[i];
    args[n] = NULL;
    const char *env[8];
    size_t k = 0;
    env[k++] = "VAREMAP_PROFILE_LAUNCHES=3";
    /* 64 KiB buffers, VMM-backed without padding. */
    env[k++] = "SIMCUDA_GRANULARITY=64K";
    env[k++] = "VAREMAP_VMM_MIN_BYTES=64K";
    if (p->env)
        env[k++] = p->env;
    if (fail)
        env[k++] = fail;
    env[k] = NULL;
    vr_spawn_timeout_s = HANG_SECONDS;
    int rc = vr_run_app(tag, "graph_linked", args, flags, env, r);
    cr_assert_eq(rc, 0, "%s: cannot start graph_linked: %s", tag, strerror(-rc));
}

/* The program's own complaint ("graph_linked: cuX: ERROR (n)"), without
 * what the shim or simcuda wrote. */
static void app_lines(const struct vr_buf *err, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = err->p; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 13 && !strncmp(p, "graph_linked:", 13) && n + len + 2 < cap) {
            memcpy(out + n, p, len);
            n += len;
            out[n++] = '\n';
            out[n] = '\0';
        }
        p = nl ? nl + 1 : p + len;
    }
}

/* The log's fallback and summary lines: what a failure message needs. */
static void log_gist(const struct vr_buf *log, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = log->p; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        bool keep = memmem(p, len, "\"fallback\"", 10) || memmem(p, len, "\"summary\"", 9);
        if (keep && n + len + 2 < cap) {
            memcpy(out + n, p, len);
            n += len;
            out[n++] = '\n';
            out[n] = '\0';
        }
        p = nl ? nl + 1 : p + len;
    }
}

static bool same_bytes(const struct vr_buf *a, const struct vr_buf *b)
{
    return a->len == b->len && (a->len == 0 || !memcmp(a->p, b->p, a->len));
}

static uint64_t live(const struct vr_run *r, const char *what)
{
    uint64_t v = 0;
    cr_assert(vr_json_u64(r->stats.p, r->stats.len, what, &v), "no live %s in %s", what,
              r->stats.p);
    return v;
}

static const char *const live_kinds[] = { "mappings", "handles", "reservations", "allocations",
                                          "events", "execs", NULL };

static void check_cell(const struct cell *c)
{
    const struct call *call = &calls[c->call];
    const struct moment *m = &moments[c->moment];
    const struct pattern *p = &patterns[c->pattern];
    char what[160], fail[160], value[128];
    snprintf(value, sizeof value, m->fmt, call->name);
    snprintf(fail, sizeof fail, "SIMCUDA_FAIL=%s", value);
    snprintf(what, sizeof what, "[%s x %s x %s] SIMCUDA_FAIL=%s", call->name, m->name, p->name,
             value);

    struct vr_run plain, shim;
    run(&plain, "plain", p, fail, 0);
    run(&shim, "shim", p, fail, VR_RUN_SHIM);
    cr_assert(!plain.proc.timed_out, "%s: hung without the shim", what);
    cr_assert(!shim.proc.timed_out, "%s: hung with the shim (killed after %d s); stderr:\n%s",
              what, HANG_SECONDS, shim.proc.err.p);
    cr_assert(shim.proc.status >= 0 && shim.proc.status < 128,
              "%s: crashed with the shim (status %d); stderr:\n%s", what, shim.proc.status,
              shim.proc.err.p);

    char plain_err[1024], shim_err[1024];
    app_lines(&plain.proc.err, plain_err, sizeof plain_err);
    app_lines(&shim.proc.err, shim_err, sizeof shim_err);
    bool same = shim.proc.status == plain.proc.status && !strcmp(shim_err, plain_err) &&
                !strcmp(shim.proc.out.p, plain.proc.out.p) && same_bytes(&shim.bytes, &plain.bytes);
    if (!same) {
        struct vr_run clean;
        run(&clean, "clean", p, NULL, 0);
        cr_assert_eq(clean.proc.status, 0, "%s: the run without fault failed: %s", what,
                     clean.proc.err.p);
        bool as_clean = shim.proc.status == 0 && !strcmp(shim.proc.out.p, clean.proc.out.p) &&
                        same_bytes(&shim.bytes, &clean.bytes);
        cr_assert(as_clean,
                  "%s: with the shim the program neither behaves as without it under the same "
                  "fault nor runs clean.\nwithout the shim: status %d, %s%s\nwith the shim: "
                  "status %d, %s%s\nclean: %s\nshim stderr:\n%s",
                  what, plain.proc.status, plain_err, plain.proc.out.p, shim.proc.status,
                  shim_err, shim.proc.out.p, clean.proc.out.p, shim.proc.err.p);
        vr_run_free(&clean);
    }

    if (shim.proc.status == 0) {
        bool excused = m->every && call->needed_to_release;
        for (size_t i = 0; live_kinds[i]; i++) {
            uint64_t n = live(&shim, live_kinds[i]);
            if (n == 0)
                continue;
            uint64_t leaked = 0;
            bool said = vr_summary(&shim.log, "vmm_leaked_bytes", &leaked) && leaked > 0;
            said = said || vr_log_count(&shim.log, "fallback") > 0;
            char gist[4096];
            log_gist(&shim.log, gist, sizeof gist);
            cr_assert(excused && said, "%s: %llu %s left alive at exit by the shim%s\nlog:\n%s",
                      what, (unsigned long long)n, live_kinds[i],
                      excused ? " without a word in its log" : "", gist);
        }
    }
    vr_run_free(&plain);
    vr_run_free(&shim);
}

/* ---- the generated cells -------------------------------------------------- */

/* The suite checks every driver call the shim makes itself, the slices' VMM calls among them on scenarios whose buffers do not move
 * while profiled: their execs get slices only when still buffers do. */
static const char *const slice_still[] = {"VAREMAP_SLICE_STILL=1", NULL};

static void setup(void)
{
    vr_tmp_setup();
    vr_shim_env = slice_still;
}

TestSuite(faults, .init = setup, .fini = vr_tmp_teardown);

ParameterizedTestParameters(faults, cell)
{
    static struct cell cells[NCALLS * NMOMENTS * NPATTERNS];
    size_t n = 0;
    for (unsigned c = 0; c < NCALLS; c++)
        for (unsigned m = 0; m < NMOMENTS; m++)
            for (unsigned p = 0; p < NPATTERNS; p++)
                cells[n++] = (struct cell){ c, m, p };
    return cr_make_param_array(struct cell, cells, n);
}

ParameterizedTest(struct cell *c, faults, cell)
{
    check_cell(c);
}

/* The matrix covers the shim: any entry point it calls (more often than the
 * program alone does, in a clean run of any pattern) is in `calls`; and each
 * pattern remaps (and rebinds) when nothing fails. */
Test(faults, matrix_covers_the_shim)
{
    static const char *const names[] = {
#define SIM_ENTRY(sym, base, ver, flav, fail) #sym,
#include "entries.def"
#undef SIM_ENTRY
    };
    for (size_t p = 0; p < NPATTERNS; p++) {
        struct vr_run plain, shim;
        run(&plain, "plain", &patterns[p], NULL, 0);
        run(&shim, "shim", &patterns[p], NULL, VR_RUN_SHIM);
        cr_assert_eq(plain.proc.status, 0, "%s: %s", patterns[p].name, plain.proc.err.p);
        cr_assert_eq(shim.proc.status, 0, "%s: %s", patterns[p].name, shim.proc.err.p);
        cr_assert(vr_sim_ok(&shim.stats));
        size_t extra = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (vr_sim_calls(&shim.stats, names[i]) <= vr_sim_calls(&plain.stats, names[i]))
                continue;
            extra++;
            size_t k = 0;
            while (k < NCALLS && strcmp(calls[k].name, names[i]))
                k++;
            cr_expect_lt(k, NCALLS, "%s: the shim calls %s, which the fault matrix leaves out",
                         patterns[p].name, names[i]);
        }
        cr_assert_gt(extra, 5, "%s: the shim made no calls of its own", patterns[p].name);
        /* The cells exercise what they are named after. */
        static const char *const active[] = { "\"event\":\"profile_decision\"",
                                              "\"state\":\"active\"", NULL };
        /* At least one: `update` profiles again after the update, and that
         * second decision weighs the costs measured so far (timing: a loaded
         * machine may tip it either way). */
        cr_assert_geq(vr_count_lines_with(&shim.log, active), 1, "%s: nothing was remapped",
                      patterns[p].name);
        if (patterns[p].rebinds)
            cr_assert_gt(vr_log_count(&shim.log, "slice_rebind"), 0, "%s: no slice was rebound",
                         patterns[p].name);
        if (patterns[p].variants)
            cr_assert_gt(vr_sim_calls(&shim.stats, "cuGraphInstantiateWithFlags"),
                         vr_sim_calls(&plain.stats, "cuGraphInstantiateWithFlags"),
                         "%s: no variant was made", patterns[p].name);
        vr_run_free(&plain);
        vr_run_free(&shim);
    }
}
