/* Several processes, one job (issue 18, item 8): an MPI program of four
 * ranks, one simulated device each (SIMCUDA_DEVICES=4), run under
 * `varemap -- mpirun ...`. Every rank gets the shim and writes its own log
 * (%p); `varemap report` reads them as one job. The bytes equal the run
 * without the shim. */
#include <criterion/criterion.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

TestSuite(cli_mpi, .init = vr_tmp_setup, .fini = vr_tmp_teardown, .timeout = 240);

#define RANKS "4"
#define NODES 16
#define STEPS 20

static void mpi_env(struct cli_env *e)
{
    cli_env_init(e);
    cli_env_set(e, "SIMCUDA_DEVICES=" RANKS);
    /* Open MPI refuses root without both; CI runs as root. */
    cli_env_set(e, "OMPI_ALLOW_RUN_AS_ROOT=1");
    cli_env_set(e, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    /* one machine, whatever its core count */
    cli_env_set(e, "OMPI_MCA_rmaps_base_oversubscribe=1");
}

static uint64_t job_u64(const struct vj *job, const char *key, const char *doc)
{
    uint64_t v = 0;
    cr_assert(vj_get_u64(job, key, &v), "job has no %s:\n%s", key, doc);
    return v;
}

static void run_job(const char *tag, const char *out, const char *log, struct vr_proc *p)
{
    struct cli_env e;
    mpi_env(&e);
    char nodes[16], steps[16], logarg[1024];
    snprintf(nodes, sizeof nodes, "%d", NODES);
    snprintf(steps, sizeof steps, "%d", STEPS);
    snprintf(logarg, sizeof logarg, "%s", log ? log : "");
    const char *mpi[] = { vr_env_path("VR_MPIRUN"), "-n", RANKS, cli_app("mpi_ranks"), "--out",
                          out, "--nodes", nodes, "--steps", steps, NULL };
    const char *with[24];
    size_t n = 0;
    if (log) {
        with[n++] = vr_env_path("VR_VAREMAP");
        with[n++] = "--shim";
        with[n++] = vr_env_path("VR_SHIM");
        with[n++] = "--mode";
        with[n++] = "profiled";
        with[n++] = "--log";
        with[n++] = logarg;
        with[n++] = "--";
    }
    for (size_t i = 0; mpi[i]; i++)
        with[n++] = mpi[i];
    with[n] = NULL;
    cli_run(tag, with, &e, p);
    cli_env_free(&e);
    cr_assert(!p->timed_out, "%s timed out", tag);
    cr_assert_eq(p->status, 0, "%s: status %d\nstdout:\n%s\nstderr:\n%s", tag, p->status, p->out.p,
                 p->err.p);
}

Test(cli_mpi, four_ranks_under_the_shim_give_the_same_bytes_and_one_job_report)
{
    struct vr_proc base, shim;
    const char *out0 = vr_tmp_path("none.bin"), *out1 = vr_tmp_path("shim.bin");
    run_job("none", out0, NULL, &base);
    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s", vr_tmp_path("rank.%p.jsonl"));
    run_job("shim", out1, pattern, &shim);

    /* Each rank on its own device, the job verified against the host. */
    for (int r = 0; r < 4; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d device %d checksum", r, r);
        cr_assert(strstr(shim.out.p, want), "%s missing:\n%s", want, shim.out.p);
    }
    cr_assert(strstr(shim.out.p, " verified\n"), "%s", shim.out.p);
    cr_assert_str_eq(shim.out.p, base.out.p, "stdout differs with the shim");
    struct vr_buf b0 = { 0 }, b1 = { 0 };
    cr_assert(vr_read_file(out0, &b0) && vr_read_file(out1, &b1));
    cr_assert_eq(b0.len, (size_t)4 * 512 * sizeof(float), "result size %zu", b0.len);
    cr_assert(b0.len == b1.len && memcmp(b0.p, b1.p, b0.len) == 0, "bytes differ with the shim");

    /* One log per rank: mpirun and its daemons make no driver call, so
     * they leave none. */
    glob_t g;
    snprintf(pattern, sizeof pattern, "%s", vr_tmp_path("rank.*.jsonl"));
    cr_assert_eq(glob(pattern, 0, NULL, &g), 0);
    cr_assert_eq(g.gl_pathc, 4, "%zu logs", g.gl_pathc);
    const char *rep[8] = { vr_env_path("VR_VAREMAP"), "report", "--json" };
    for (size_t i = 0; i < 4; i++)
        rep[3 + i] = g.gl_pathv[i];
    rep[7] = NULL;
    struct cli_env e;
    cli_env_init(&e);
    struct vr_proc r;
    cli_run("report", rep, &e, &r);
    cr_assert_eq(r.status, 0, "%s", r.err.p);
    struct vj doc;
    char err[256];
    cr_assert(vj_parse(r.out.p, r.out.len, &doc, err, sizeof err) == 0, "%s: %s", err, r.out.p);
    const struct vj *job = vj_get(&doc, "job");
    cr_assert_not_null(job, "%s", r.out.p);
#define JOB(key) job_u64(job, key, r.out.p)
    const uint64_t updates = 4 * NODES * STEPS;
    cr_assert_eq(JOB("processes"), 4, "%s", r.out.p);
    cr_assert_eq(JOB("summaries"), 4, "%s", r.out.p);
    cr_assert_eq(JOB("setparams_seen"), updates, "%s", r.out.p);
    cr_assert_eq(JOB("launches"), 4 * STEPS, "%s", r.out.p);
    uint64_t skipped = JOB("setparams_skipped");
    cr_assert_gt(skipped, updates / 2, "the job absorbed %llu of %llu", (unsigned long long)skipped,
                 (unsigned long long)updates);
    cr_assert_eq(skipped + JOB("setparams_forwarded"), updates, "%s", r.out.p);
    /* The table says the same in words. */
    const char *tab[8] = { vr_env_path("VR_VAREMAP"), "report" };
    for (size_t i = 0; i < 4; i++)
        tab[2 + i] = g.gl_pathv[i];
    tab[6] = NULL;
    struct vr_proc t;
    cli_run("table", tab, &e, &t);
    cr_assert(strstr(t.out.p, "== job: 4 processes (4 exited with a summary), 4 execs\n"), "%s",
              t.out.p);
    globfree(&g);
    vj_free(&doc);
    cli_env_free(&e);
}
