/* The `varemap` command (build tree): options, the program's exit status and
 * signals, the shim on LD_PRELOAD, the decision log and the summary. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

TestSuite(cli_run, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static const char *varemap(void)
{
    return vr_env_path("VR_VAREMAP");
}

static const char *real(const char *path)
{
    static char buf[4][PATH_MAX];
    static unsigned next;
    char *b = buf[next++ % 4];
    cr_assert(realpath(path, b), "realpath %s: %s", path, strerror(errno));
    return b;
}

/* graph_linked --pattern mixed: stable, rebound and re-allocated buffers. */
/* Buffers of a whole granularity (simcuda: 2 MiB), so they are VMM-backed
 * whatever the padding limits. */
#define APP_ARGS "--pattern", "mixed", "--steps", "20", "--bytes", "2097152"

static void plain_run(struct vr_run *r)
{
    static const char *const args[] = { APP_ARGS, NULL };
    cr_assert_eq(vr_run_app("plain", "graph_linked", args, 0, NULL, r), 0);
    cr_assert_eq(r->proc.status, 0, "plain run failed:\n%s", r->proc.err.p);
    cr_assert(r->parsed, "plain run: no final line:\n%s", r->proc.out.p);
}

static void expect_same_output(const struct vr_run *plain, const struct vr_proc *p,
                               const char *out_path)
{
    struct vr_buf bytes;
    cr_assert(vr_read_file(out_path, &bytes), "no --out file %s", out_path);
    cr_assert_gt(bytes.len, 0);
    cr_assert_eq(bytes.len, plain->bytes.len, "output sizes differ: %zu vs %zu", bytes.len,
                 plain->bytes.len);
    cr_assert(memcmp(bytes.p, plain->bytes.p, bytes.len) == 0, "output bytes differ");
    cr_assert_str_eq(p->out.p, plain->proc.out.p, "stdout differs");
    vr_buf_free(&bytes);
}

Test(cli_run, help_goes_to_stdout_and_exits_0)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *const argv[] = { varemap(), "--help", NULL };
    struct vr_proc p;
    cli_run("help", argv, &e, &p);
    cr_assert_eq(p.status, 0);
    cr_assert(strncmp(p.out.p, "usage: varemap [options] [--] PROGRAM [ARGS...]\n", 48) == 0,
              "%s", p.out.p);
    for (const char *const *o = (const char *const[]){ "--mode", "--log", "--profile-launches",
                                                        "--stats", "--shim", "--quiet",
                                                        "--sim", "--output", "--sim-dir",
                                                        "varemap report", NULL };
         *o; o++)
        cr_assert(strstr(p.out.p, *o), "--help does not mention %s:\n%s", *o, p.out.p);
    cr_assert_eq(p.err.len, 0, "stderr: %s", p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_run, version_names_the_shim_it_would_preload)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *const argv[] = { varemap(), "--version", NULL };
    struct vr_proc p;
    cli_run("version", argv, &e, &p);
    cr_assert_eq(p.status, 0);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "varemap %s\nshim: %s\n", vr_env_path("VR_VERSION"),
             real(vr_env_path("VR_SHIM")));
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_run, a_bad_option_is_one_line_and_the_usage_on_stderr_exit_2)
{
    static const struct {
        const char *args[6];
        const char *line;
    } cases[] = {
        { { "--bogus", "--", "true" }, "varemap: unknown option --bogus" },
        { { "-x", "true" }, "varemap: unknown option -x" },
        { { "--mode" }, "varemap: --mode needs a value" },
        { { "--mode", "fast", "--", "true" },
          "varemap: --mode fast: expected off, observe, dedup or profiled" },
        { { "--mode=", "true" }, "varemap: --mode : expected off, observe, dedup or profiled" },
        { { "--profile-launches", "0", "true" },
          "varemap: --profile-launches 0: expected a whole number from 1 to 1000" },
        { { "--profile-launches", "1001", "true" },
          "varemap: --profile-launches 1001: expected a whole number from 1 to 1000" },
        { { "--profile-launches=3x", "true" },
          "varemap: --profile-launches 3x: expected a whole number from 1 to 1000" },
        { { "--log=", "true" }, "varemap: --log needs a path" },
        { { "--shim" }, "varemap: --shim needs a value" },
        { { "--quiet" }, "varemap: no program given" },
        { { "--" }, "varemap: no program given" },
        { { NULL }, "varemap: no program given" },
    };
    struct cli_env e;
    cli_env_init(&e);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[8] = { varemap() };
        for (size_t k = 0; cases[i].args[k]; k++)
            argv[k + 1] = cases[i].args[k];
        struct vr_proc p;
        cli_run("badopt", argv, &e, &p);
        cr_assert_eq(p.status, 2, "case %zu: exit %d", i, p.status);
        cr_assert_eq(p.out.len, 0, "case %zu: stdout: %s", i, p.out.p);
        size_t n = strlen(cases[i].line);
        cr_assert(strncmp(p.err.p, cases[i].line, n) == 0 && p.err.p[n] == '\n',
                  "case %zu: stderr:\n%s", i, p.err.p);
        cr_assert(strncmp(p.err.p + n + 1, "usage: varemap ", 15) == 0,
                  "case %zu: no usage after the line:\n%s", i, p.err.p);
        vr_proc_free(&p);
    }
    cli_env_free(&e);
}

/* varemap --log TAG.jsonl -- graph_linked APP_ARGS: exit 0, the plain run's
 * output bytes and stdout, and the decision log read into *lb. */
static void run_logged(const char *tag, const struct cli_env *e, const struct vr_run *plain,
                       struct vr_proc *p, struct vr_buf *lb)
{
    char outn[64], logn[64];
    snprintf(outn, sizeof outn, "%s.bin", tag);
    snprintf(logn, sizeof logn, "%s.jsonl", tag);
    const char *out = vr_tmp_path(outn), *log = vr_tmp_path(logn);
    const char *const argv[] = { varemap(), "--log", log, "--", cli_app("graph_linked"), "--out",
                                 out, APP_ARGS, NULL };
    cli_run(tag, argv, e, p);
    cr_assert_eq(p->status, 0, "%s", p->err.p);
    expect_same_output(plain, p, out);
    cr_assert(vr_read_file(log, lb), "no log at %s", log);
}

/* The default: profiled, every output byte as without the shim, and a
 * summary that agrees with the decision log. */
Test(cli_run, runs_the_program_unchanged_and_summarizes_each_exec)
{
    struct vr_run plain;
    plain_run(&plain);
    struct cli_env e;
    cli_env_init(&e);
    struct vr_proc p;
    struct vr_buf lb;
    run_logged("default", &e, &plain, &p, &lb);
    size_t len;
    const char *start = vr_log_event(&lb, "start", 0, &len);
    cr_assert(start);
    char mode[32];
    cr_assert(vr_json_str(start, len, "mode", mode, sizeof mode));
    cr_assert_str_eq(mode, "profiled");
    uint64_t pid, seen, skipped, fwd, rebinds;
    cr_assert(vr_json_u64(start, len, "pid", &pid));
    cr_assert(vr_summary(&lb, "setparams_seen", &seen));
    cr_assert(vr_summary(&lb, "setparams_skipped", &skipped));
    cr_assert(vr_summary(&lb, "setparams_forwarded", &fwd));
    cr_assert(vr_summary(&lb, "rebinds", &rebinds));
    cr_assert_gt(skipped, 0, "nothing absorbed: the run did not exercise the shim");
    char want[256];
    snprintf(want, sizeof want,
             "varemap: pid %llu, mode profiled: %llu of %llu node updates absorbed (%.1f%%), "
             "%llu forwarded, %llu rebinds, 0 VMM fallbacks\n",
             (unsigned long long)pid, (unsigned long long)skipped, (unsigned long long)seen,
             100.0 * (double)skipped / (double)seen, (unsigned long long)fwd,
             (unsigned long long)rebinds);
    cr_assert(strstr(p.err.p, want), "want %s in stderr:\n%s", want, p.err.p);

    /* One line per exec, with what its profile_decision and exec_destroyed
     * said. */
    size_t execs = vr_log_count(&lb, "exec_instantiated");
    cr_assert_gt(execs, 0);
    cr_assert_eq(vr_count_lines(&p.err, "varemap:   exec 0x"), execs, "%s", p.err.p);
    const char *dec = vr_log_event(&lb, "profile_decision", 0, &len);
    cr_assert(dec);
    char exec[40], state[32];
    cr_assert(vr_json_str(dec, len, "exec", exec, sizeof exec));
    cr_assert(vr_json_str(dec, len, "state", state, sizeof state));
    cr_assert_str_eq(state, "active", "nothing remapped: the run did not exercise the slices");
    struct vr_cand cand[64];
    long nc = vr_candidates(dec, len, cand, 64);
    cr_assert_gt(nc, 0);
    unsigned sel = 0;
    for (long i = 0; i < nc; i++)
        sel += strcmp(cand[i].verdict, "selected") == 0;
    const char *destroyed = NULL;
    for (size_t i = 0; (destroyed = vr_log_event(&lb, "exec_destroyed", i, &len)); i++) {
        char h[40];
        if (vr_json_str(destroyed, len, "exec", h, sizeof h) && strcmp(h, exec) == 0)
            break;
    }
    cr_assert(destroyed, "exec %s was not destroyed", exec);
    uint64_t es, ek;
    cr_assert(vr_json_u64(destroyed, len, "setparams_seen", &es));
    cr_assert(vr_json_u64(destroyed, len, "setparams_skipped", &ek));
    snprintf(want, sizeof want, "varemap:   exec %s: %s; buffers %u selected, %ld rejected", exec,
             state, sel, nc - (long)sel);
    cr_assert(strstr(p.err.p, want), "want %s in stderr:\n%s", want, p.err.p);
    snprintf(want, sizeof want, "; updates %llu of %llu absorbed", (unsigned long long)ek,
             (unsigned long long)es);
    cr_assert(strstr(p.err.p, want), "want %s in stderr:\n%s", want, p.err.p);

    vr_buf_free(&lb);
    vr_proc_free(&p);
    vr_run_free(&plain);
    cli_env_free(&e);
}

static void start_fields(const char *log, char *mode, size_t cap, uint64_t *launches)
{
    struct vr_buf lb;
    cr_assert(vr_read_file(log, &lb), "no log at %s", log);
    size_t len;
    const char *start = vr_log_event(&lb, "start", 0, &len);
    cr_assert(start, "no start line in %s", log);
    cr_assert(vr_json_str(start, len, "mode", mode, cap));
    cr_assert(vr_json_u64(start, len, "profile_launches", launches));
    vr_buf_free(&lb);
}

Test(cli_run, options_become_the_shims_settings)
{
    struct vr_run plain;
    plain_run(&plain);
    struct cli_env e;
    cli_env_init(&e);
    char mode[32];
    uint64_t launches;

    const char *log = vr_tmp_path("dedup.jsonl"), *out = vr_tmp_path("dedup.bin");
    const char *const a1[] = { varemap(), "--mode", "dedup", "--profile-launches", "5", "--stats",
                               "--log", log, "--", cli_app("graph_linked"), "--out", out,
                               APP_ARGS, NULL };
    struct vr_proc p;
    cli_run("dedup", a1, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    expect_same_output(&plain, &p, out);
    start_fields(log, mode, sizeof mode, &launches);
    cr_assert_str_eq(mode, "dedup");
    cr_assert_eq(launches, 5);
    cr_assert(strstr(p.err.p, "varemap: mode=dedup setparams_seen=360 "), "--stats: %s", p.err.p);
    cr_assert(strstr(p.err.p, "varemap: pid "), "%s", p.err.p);
    cr_assert(strstr(p.err.p, ", mode dedup: "), "%s", p.err.p);
    vr_proc_free(&p);

    /* --opt=value, and no --stats: no counter line from the shim. */
    log = vr_tmp_path("observe.jsonl");
    out = vr_tmp_path("observe.bin");
    char logopt[PATH_MAX + 8];
    snprintf(logopt, sizeof logopt, "--log=%s", log);
    const char *const a2[] = { varemap(), "--mode=observe", "--profile-launches=2", logopt,
                               cli_app("graph_linked"), "--out", out, APP_ARGS, NULL };
    cli_run("observe", a2, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    expect_same_output(&plain, &p, out);
    start_fields(log, mode, sizeof mode, &launches);
    cr_assert_str_eq(mode, "observe");
    cr_assert_eq(launches, 2);
    cr_assert_null(strstr(p.err.p, "varemap: mode="), "%s", p.err.p);
    cr_assert(strstr(p.err.p, ": observe:"), "observe decisions are marked: %s", p.err.p);
    vr_proc_free(&p);

    /* off: pure pass-through, nothing absorbed. */
    log = vr_tmp_path("off.jsonl");
    out = vr_tmp_path("off.bin");
    const char *const a3[] = { varemap(), "--mode", "off", "--log", log, "--",
                               cli_app("graph_linked"), "--out", out, APP_ARGS, NULL };
    cli_run("off", a3, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    expect_same_output(&plain, &p, out);
    start_fields(log, mode, sizeof mode, &launches);
    cr_assert_str_eq(mode, "off");
    cr_assert(strstr(p.err.p, ", mode off: 0 of 360 node updates absorbed (0.0%), 360 forwarded"),
              "%s", p.err.p);
    vr_proc_free(&p);

    vr_run_free(&plain);
    cli_env_free(&e);
}

/* When every cuMemCreate fails, the buffers stay native: the summary gives
 * each exec's rejects with their reason, the VMM fallbacks and the fallback
 * lines, and the program's output is still unchanged. */
Test(cli_run, the_summary_names_rejects_and_fallbacks)
{
    struct vr_run plain;
    plain_run(&plain);
    struct cli_env e;
    cli_env_init(&e);
    cli_env_set(&e, "SIMCUDA_FAIL=cuMemCreate:*");
    struct vr_proc p;
    struct vr_buf lb;
    run_logged("novmm", &e, &plain, &p, &lb);
    uint64_t fallbacks;
    cr_assert(vr_summary(&lb, "vmm_fallbacks", &fallbacks));
    cr_assert_gt(fallbacks, 1, "no VMM fallback: SIMCUDA_FAIL did not reach the shim");
    char want[256];
    snprintf(want, sizeof want, " rebinds, %llu VMM fallbacks\n", (unsigned long long)fallbacks);
    cr_assert(strstr(p.err.p, want), "want %s in stderr:\n%s", want, p.err.p);
    size_t len;
    const char *dec = vr_log_event(&lb, "profile_decision", 0, &len);
    cr_assert(dec);
    char exec[40];
    cr_assert(vr_json_str(dec, len, "exec", exec, sizeof exec));
    struct vr_cand cand[64];
    long nc = vr_candidates(dec, len, cand, 64);
    cr_assert_gt(nc, 0);
    for (long i = 0; i < nc; i++)
        cr_assert_str_eq(cand[i].verdict, "not_vmm_backed");
    snprintf(want, sizeof want,
             "varemap:   exec %s: disabled; buffers 0 selected, %ld rejected (not_vmm_backed %ld)",
             exec, nc, nc);
    cr_assert(strstr(p.err.p, want), "want %s in stderr:\n%s", want, p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap:   fallback cuMemAlloc: cuMemCreate: "), 1, "%s",
                 p.err.p);
    vr_buf_free(&lb);
    vr_proc_free(&p);
    vr_run_free(&plain);
    cli_env_free(&e);
}

Test(cli_run, quiet_prints_nothing_and_leaves_no_file)
{
    struct vr_run plain;
    plain_run(&plain);
    struct cli_env e;
    cli_env_init(&e);
    const char *out = vr_tmp_path("quiet.bin");
    const char *const argv[] = { varemap(), "--quiet", "--", cli_app("graph_linked"), "--out", out,
                                 APP_ARGS, NULL };
    struct vr_proc p;
    cli_run("quiet", argv, &e, &p);
    cr_assert_eq(p.status, 0);
    expect_same_output(&plain, &p, out);
    cr_assert_eq(p.err.len, 0, "stderr: %s", p.err.p);
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 0, "files left in TMPDIR");
    vr_proc_free(&p);
    vr_run_free(&plain);
    cli_env_free(&e);
}

Test(cli_run, the_private_log_is_removed_after_the_summary)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *const argv[] = { varemap(), cli_app("graph_linked"), APP_ARGS, NULL };
    struct vr_proc p;
    cli_run("private", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap: pid "), 1, "%s", p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap:   exec 0x"), 1, "%s", p.err.p);
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 0, "files left in TMPDIR");
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* VAREMAP_LOG (or a config file's log) is the user's: kept, appended to,
 * and the summary covers only this run's lines. */
Test(cli_run, a_users_log_is_kept_and_only_this_runs_lines_are_summarized)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *log = vr_tmp_path("env.jsonl");
    cli_env_set(&e, "VAREMAP_LOG=%s", log);
    const char *const argv[] = { varemap(), "--", cli_app("graph_linked"), APP_ARGS, NULL };
    struct vr_proc p;
    for (int run = 1; run <= 2; run++) {
        cli_run("envlog", argv, &e, &p);
        cr_assert_eq(p.status, 0, "%s", p.err.p);
        cr_assert_eq(vr_count_lines(&p.err, "varemap: pid "), 1, "run %d:\n%s", run, p.err.p);
        struct vr_buf lb;
        cr_assert(vr_read_file(log, &lb));
        cr_assert_eq(vr_log_count(&lb, "start"), (size_t)run);
        vr_buf_free(&lb);
        vr_proc_free(&p);
    }
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 0);

    const char *conf_log = vr_tmp_path("conf.jsonl");
    const char *conf = vr_tmp_path("varemap.conf");
    char text[PATH_MAX + 64];
    snprintf(text, sizeof text, "# test\nmode = dedup\nLOG = %s   # kept\n", conf_log);
    cli_write(conf, text);
    cli_env_set(&e, "VAREMAP_LOG=");
    cli_env_set(&e, "VAREMAP_CONFIG=%s", conf);
    cli_run("conflog", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert(strstr(p.err.p, ", mode dedup: "), "%s", p.err.p);
    struct vr_buf lb;
    cr_assert(vr_read_file(conf_log, &lb), "the config's log was not written");
    cr_assert_eq(vr_log_count(&lb, "summary"), 1);
    vr_buf_free(&lb);
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 0);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_run, the_shim_is_prepended_to_ld_preload)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *const argv[] = { varemap(), "--quiet", "printenv", "LD_PRELOAD", NULL };
    struct vr_proc p;
    cli_run("preload1", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof want, "%s\n", real(vr_env_path("VR_SHIM")));
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);

    /* An existing preload stays, after the shim (it must exist, or the
     * loader complains on stderr). */
    const char *other = vr_env_path("VR_PROBE_LIB");
    cli_env_set(&e, "LD_PRELOAD=%s", other);
    cli_run("preload2", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    snprintf(want, sizeof want, "%s:%s\n", real(vr_env_path("VR_SHIM")), other);
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);
    cli_env_free(&e);
}

static void copy_file(const char *from, const char *to)
{
    struct vr_buf b;
    cr_assert(vr_read_file(from, &b));
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, b.p, b.len), (ssize_t)b.len);
    close(fd);
    vr_buf_free(&b);
}

Test(cli_run, shim_and_varemap_shim_choose_the_library)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *alt = vr_tmp_path("libalt.so"), *alt2 = vr_tmp_path("libalt2.so");
    copy_file(vr_env_path("VR_SHIM"), alt);
    copy_file(vr_env_path("VR_SHIM"), alt2);
    struct vr_proc p;
    char want[PATH_MAX + 2];

    const char *const a1[] = { varemap(), "--quiet", "--shim", alt, "printenv", "LD_PRELOAD",
                               NULL };
    cli_run("shim1", a1, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    snprintf(want, sizeof want, "%s\n", real(alt));
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);

    cli_env_set(&e, "VAREMAP_SHIM=%s", alt2);
    const char *const a2[] = { varemap(), "--quiet", "printenv", "LD_PRELOAD", NULL };
    cli_run("shim2", a2, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    snprintf(want, sizeof want, "%s\n", real(alt2));
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);

    /* --shim wins over VAREMAP_SHIM. */
    cli_run("shim3", a1, &e, &p);
    snprintf(want, sizeof want, "%s\n", real(alt));
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);

    const char *const a4[] = { varemap(), "--shim", "/nonexistent/libx.so", "true", NULL };
    cli_run("shim4", a4, &e, &p);
    cr_assert_eq(p.status, 125);
    cr_assert(strstr(p.err.p, "varemap: cannot find libvaremap_shim.so (--shim "
                              "/nonexistent/libx.so: no such file)"),
              "%s", p.err.p);
    vr_proc_free(&p);

    cli_env_set(&e, "VAREMAP_SHIM=/nonexistent/liby.so");
    cli_run("shim5", a2, &e, &p);
    cr_assert_eq(p.status, 125);
    cr_assert(strstr(p.err.p, "VAREMAP_SHIM=/nonexistent/liby.so: no such file"), "%s", p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_run, the_programs_exit_status_is_varemaps)
{
    struct cli_env e;
    cli_env_init(&e);
    static const struct {
        const char *script;
        bool quiet;
        int status;
    } cases[] = {
        { "exit 0", false, 0 }, { "exit 7", false, 7 }, { "exit 7", true, 7 },
        { "exit 255", false, 255 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = { varemap(), cases[i].quiet ? "--quiet" : "--", "sh", "-c",
                               cases[i].script, NULL };
        struct vr_proc p;
        cli_run("exit", argv, &e, &p);
        cr_assert_eq(p.status, cases[i].status, "%s: %d\n%s", cases[i].script, p.status, p.err.p);
        if (!cases[i].quiet)
            cr_assert(strstr(p.err.p, "varemap: no decision log was written: sh made no CUDA "
                                      "driver call the shim saw"),
                      "%s", p.err.p);
        vr_proc_free(&p);
    }
    cli_env_free(&e);
}

Test(cli_run, a_program_killed_by_signal_n_makes_varemap_exit_128_plus_n)
{
    struct cli_env e;
    cli_env_init(&e);
    /* Under -Db_sanitize=address the preloaded shim brings ASan into sh,
     * whose handlers would turn the signals into an ASan report and exit 1. */
    const char *asan = getenv("ASAN_OPTIONS");
    cli_env_set(&e, "ASAN_OPTIONS=%s%sverify_asan_link_order=0:detect_leaks=0:handle_segv=0:"
                    "handle_abort=0:handle_sigbus=0", asan ? asan : "", asan && *asan ? ":" : "");
    static const struct {
        const char *script;
        int sig;
    } cases[] = { { "kill -SEGV $$", SIGSEGV }, { "kill -KILL $$", SIGKILL },
                  { "kill -TERM $$", SIGTERM } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int quiet = 0; quiet <= 1; quiet++) {
            const char *argv[] = { varemap(), quiet ? "--quiet" : "--stats", "sh", "-c",
                                   cases[i].script, NULL };
            struct vr_proc p;
            cli_run("signal", argv, &e, &p);
            cr_assert_eq(p.status, 128 + cases[i].sig, "%s: %d\n%s", cases[i].script, p.status,
                         p.err.p);
            char want[128];
            snprintf(want, sizeof want, "varemap: sh was killed by signal %d (", cases[i].sig);
            if (quiet)
                cr_assert_eq(p.err.len, 0, "%s", p.err.p);
            else
                cr_assert(strstr(p.err.p, want), "%s", p.err.p);
            vr_proc_free(&p);
        }
    }
    /* A real crash inside a CUDA program: the summary still comes, from
     * the lines written before it. */
    const char *const argv[] = { varemap(), "sh", "-c",
                                 "\"$0\" --pattern stable --steps 5 --bytes 1048576 && kill -ABRT $$",
                                 cli_app("graph_linked"), NULL };
    struct vr_proc p;
    cli_run("crash", argv, &e, &p);
    cr_assert_eq(p.status, 128 + SIGABRT, "%d\n%s", p.status, p.err.p);
    cr_assert(strstr(p.err.p, ", mode profiled: "), "%s", p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_run, a_program_that_cannot_run_exits_126_or_127)
{
    struct cli_env e;
    cli_env_init(&e);
    struct vr_proc p;
    const char *const a1[] = { varemap(), "/nonexistent/program", NULL };
    cli_run("notfound", a1, &e, &p);
    cr_assert_eq(p.status, 127);
    cr_assert_str_eq(p.err.p, "varemap: cannot run /nonexistent/program: No such file or directory\n");
    vr_proc_free(&p);

    const char *text = vr_tmp_path("not-executable");
    cli_write(text, "data\n");
    chmod(text, 0644);
    const char *const a2[] = { varemap(), text, NULL };
    cli_run("noexec", a2, &e, &p);
    cr_assert_eq(p.status, 126, "%s", p.err.p);
    cr_assert(strstr(p.err.p, "varemap: cannot run "), "%s", p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* SIGTERM sent to varemap alone reaches the program, which decides how it
 * ends; varemap reports that end. */
Test(cli_run, sigterm_to_varemap_is_passed_to_the_program)
{
    struct cli_env e;
    cli_env_init(&e);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        dup2(null, 2);
        char *const argv[] = { (char *)varemap(), "--quiet", "sleep", "60", NULL };
        execve(argv[0], argv, e.v);
        _exit(99);
    }
    /* Wait until varemap has its child, then a moment for its handlers. */
    char children[64];
    snprintf(children, sizeof children, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    bool started = false;
    for (int i = 0; i < 500 && !started; i++) {
        struct vr_buf b;
        started = vr_read_file(children, &b) && b.len > 0;
        vr_buf_free(&b);
        if (!started)
            nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    }
    cr_assert(started, "varemap never started its program");
    nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
    cr_assert_eq(kill(pid, SIGTERM), 0);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "varemap itself died of signal %d", WTERMSIG(st));
    cr_assert_eq(WEXITSTATUS(st), 128 + SIGTERM);
    cli_env_free(&e);
}

/* A job of several processes: every %p log is read, one summary each; the
 * same logs through `varemap report`. */
Test(cli_run, every_process_of_a_job_is_summarized)
{
    struct cli_env e;
    cli_env_init(&e);
    const char *script =
        "\"$0\" --pattern mixed --steps 12 --bytes 2097152 >/dev/null & "
        "\"$0\" --pattern stable --steps 8 --bytes 2097152 --execs 2 >/dev/null; wait";
    const char *pattern = vr_tmp_path("job-%p.jsonl");
    const char *const argv[] = { varemap(), "--log", pattern, "sh", "-c", script,
                                 cli_app("graph_linked"), NULL };
    struct vr_proc p;
    cli_run("job", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap: pid "), 2, "%s", p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap:   exec 0x"), 3, "%s", p.err.p);

    /* The files are named after the pids the summary shows. */
    const char *logs[2];
    size_t nlogs = 0;
    for (const char *at = p.err.p; (at = strstr(at, "varemap: pid ")) != NULL; at += 13) {
        unsigned long pid = strtoul(at + 13, NULL, 10);
        char name[64];
        snprintf(name, sizeof name, "job-%lu.jsonl", pid);
        const char *path = vr_tmp_path(name);
        cr_assert_eq(access(path, R_OK), 0, "no log %s for pid %lu", path, pid);
        cr_assert_lt(nlogs, 2);
        logs[nlogs++] = path;
    }
    cr_assert_eq(nlogs, 2);
    vr_proc_free(&p);

    const char *const r[] = { varemap(), "report", logs[0], logs[1], NULL };
    cli_run("jobreport", r, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert_eq(vr_count_lines(&p.out, "== pid "), 2, "%s", p.out.p);
    cr_assert(strstr(p.out.p, "varemap report: 2 logs, 2 processes, "), "%s", p.out.p);
    vr_proc_free(&p);

    /* Without --log: the private %p logs, read and removed. */
    const char *const argv2[] = { varemap(), "sh", "-c", script, cli_app("graph_linked"), NULL };
    cli_run("job2", argv2, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap: pid "), 2, "%s", p.err.p);
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 0);
    vr_proc_free(&p);
    cli_env_free(&e);
}
