/* `varemap --sim`: the program on simcuda without and with the shim, and
 * the one last line that says whether the runs agree. Every run here clears
 * LD_LIBRARY_PATH, so a program finds the simulated driver only because the
 * command put it there. */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

TestSuite(cli_sim, .init = vr_tmp_setup, .fini = vr_tmp_teardown, .timeout = 240);

#define APP_ARGS "--pattern", "mixed", "--steps", "20", "--bytes", "2097152"

static void sim_env(struct cli_env *e)
{
    cli_env_init(e);
    cli_env_set(e, "LD_LIBRARY_PATH=");
}

/* The last line of text (without its newline). */
static const char *last_line(const struct vr_buf *text)
{
    static char line[4096];
    size_t end = text->len;
    while (end > 0 && text->p[end - 1] == '\n')
        end--;
    size_t start = end;
    while (start > 0 && text->p[start - 1] != '\n')
        start--;
    snprintf(line, sizeof line, "%.*s", (int)(end - start), text->p + start);
    return line;
}

static void run_sim(const char *tag, const char *const *argv, const struct cli_env *e,
                    struct vr_proc *p)
{
    cli_run(tag, argv, e, p);
    cr_assert(!p->timed_out, "%s timed out", tag);
}

/* A shell program whose behaviour depends on whether the shim is preloaded. */
static const char *script(const char *name, const char *body)
{
    const char *path = vr_tmp_path(name);
    char text[8192];
    snprintf(text, sizeof text,
             "shim=without\ncase \"$LD_PRELOAD\" in *libvaremap_shim*) shim=with ;; esac\n%s\n", body);
    cli_write(path, text);
    return path;
}

Test(cli_sim, a_program_that_gives_the_same_bytes_is_identical)
{
    struct cli_env e;
    sim_env(&e);
    const char *out = vr_tmp_path("same.bin");
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--output", out, "--",
                                 cli_app("graph_linked"), "--out", out, APP_ARGS, NULL };
    struct vr_proc p;
    run_sim("same", argv, &e, &p);
    cr_assert_eq(p.status, 0, "stdout:\n%s\nstderr:\n%s", p.out.p, p.err.p);
    const char *last = last_line(&p.out);
    cr_assert(strstr(last, "identical"), "last line: %s\n%s", last, p.out.p);
    cr_assert(strstr(last, "1 --output file"), "last line: %s", last);
    /* What the shim absorbed and decided, from the decision log. */
    cr_assert(strstr(p.out.p, "varemap: with the shim (mode profiled): exit status 0\n"), "%s",
              p.out.p);
    cr_assert(strstr(p.out.p, " node updates absorbed ("), "%s", p.out.p);
    cr_assert(strstr(p.out.p, ": active; buffers "), "%s", p.out.p);
    cr_assert_null(strstr(p.out.p, " 0 of "), "nothing absorbed:\n%s", p.out.p);
    /* What that would save at the built-in model's prices, per exec and in
     * all (simcuda's call counts of both runs). */
    cr_assert(strstr(p.out.p, "varemap: what the shim would save at the cost model's prices (the "
                              "built-in model, conf/cost-model.conf: an H200's):\n"), "%s", p.out.p);
    cr_assert(strstr(p.out.p, " node updates absorbed per launch, "), "%s", p.out.p);
    cr_assert(strstr(p.out.p, "varemap:   in all: "), "%s", p.out.p);
    cr_assert(strstr(p.out.p, "; per graph launch (20): "), "%s", p.out.p);
    /* The program's own output is compared, never shown. */
    cr_assert_null(strstr(p.out.p, "graph_linked:"), "%s", p.out.p);
    cr_assert_null(strstr(p.err.p, "graph_linked:"), "%s", p.err.p);
    cr_assert_eq(p.err.len, 0, "stderr: %s", p.err.p);
    struct stat st;
    cr_assert(stat(out, &st) == 0 && st.st_size > 0, "the run with the shim left no %s", out);
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 0, "left behind in TMPDIR");
    vr_proc_free(&p);

    /* A mode given is the one the shim runs in. */
    const char *const dedup[] = { vr_env_path("VR_VAREMAP"), "--sim", "--mode", "dedup", "--output",
                                  out, "--", cli_app("graph_linked"), "--out", out, APP_ARGS, NULL };
    run_sim("dedup", dedup, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(p.out.p, "varemap: with the shim (mode dedup): "), "%s", p.out.p);
    cr_assert(strstr(p.out.p, ", mode dedup: "), "%s", p.out.p);
    cr_assert(strstr(last_line(&p.out), "identical"), "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* An nvcc -cudart shared program finds simcudart's libcudart.so.13. */
Test(cli_sim, a_runtime_program_runs_on_simcudart)
{
    struct cli_env e;
    sim_env(&e);
    char app[PATH_MAX];
    snprintf(app, sizeof app, "%s/rt_capture", vr_env_path("VR_RTAPPS_DIR"));
    const char *out = vr_tmp_path("rt.bin");
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--output", out, "--", app,
                                 "--out", out, "--nodes", "16", "--steps", "12", NULL };
    struct vr_proc p;
    run_sim("rt", argv, &e, &p);
    cr_assert_eq(p.status, 0, "stdout:\n%s\nstderr:\n%s", p.out.p, p.err.p);
    cr_assert(strstr(last_line(&p.out), "identical"), "%s", p.out.p);
    cr_assert(strstr(p.out.p, " node updates absorbed ("), "%s", p.out.p);
    char want[PATH_MAX * 2];
    char rt_dir[PATH_MAX];
    cr_assert(realpath(vr_env_path("VR_SIMCUDART_DIR"), rt_dir));
    snprintf(want, sizeof want, "%s", rt_dir);
    cr_assert(strstr(p.out.p, want), "simcudart's directory not used:\n%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, a_different_stdout_is_named_with_its_first_byte)
{
    struct cli_env e;
    sim_env(&e);
    const char *sh = script("stdout.sh", "echo same; echo \"run $shim\"");
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--", "sh", sh, NULL };
    struct vr_proc p;
    run_sim("stdout", argv, &e, &p);
    cr_assert_eq(p.status, 1, "%s\n%s", p.out.p, p.err.p);
    const char *last = last_line(&p.out);
    cr_assert_str_eq(last, "varemap: differs: stdout: first difference at byte 13 (17 bytes "
                           "without the shim, 14 with it)", "%s", p.out.p);
    cr_assert_null(strstr(p.out.p, "identical"), "%s", p.out.p);
    cr_assert(!cli_has_row(&p.out, "same") && !cli_has_row(&p.out, "run with"), "%s", p.out.p);
    /* Both runs' output stays for a look, in the directory it names. */
    cr_assert(strstr(p.out.p, "are kept in "), "%s", p.out.p);
    cr_assert_eq(cli_dir_entries(cli_tmpdir()), 1);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, a_different_output_file_is_named_with_its_first_byte)
{
    struct cli_env e;
    sim_env(&e);
    const char *out = vr_tmp_path("differs.txt");
    char body[PATH_MAX + 64];
    snprintf(body, sizeof body, "echo same\nprintf 'header %%s\\n' $shim > '%s'", out);
    const char *sh = script("file.sh", body);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--output", out, "--", "sh",
                                 sh, NULL };
    struct vr_proc p;
    run_sim("file", argv, &e, &p);
    cr_assert_eq(p.status, 1, "%s\n%s", p.out.p, p.err.p);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof want, "varemap: differs: --output %s: first difference at byte 11 (15 "
                                "bytes without the shim, 12 with it)", out);
    cr_assert_str_eq(last_line(&p.out), want, "%s", p.out.p);
    /* The run with the shim's file is the one left in place. */
    struct vr_buf b;
    cr_assert(vr_read_file(out, &b));
    cr_assert_str_eq(b.p, "header with\n");
    vr_buf_free(&b);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, a_different_exit_status_is_named)
{
    struct cli_env e;
    sim_env(&e);
    const char *sh = script("status.sh", "[ $shim = with ] && exit 3; exit 0");
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "sh", sh, NULL };
    struct vr_proc p;
    run_sim("status", argv, &e, &p);
    cr_assert_eq(p.status, 1, "%s\n%s", p.out.p, p.err.p);
    cr_assert_str_eq(last_line(&p.out), "varemap: differs: exit status 0 without the shim, exit "
                                        "status 3 with it", "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* Both runs start from the files as they were, so a program that appends
 * gives the same bytes twice. */
Test(cli_sim, both_runs_start_from_the_same_files)
{
    struct cli_env e;
    sim_env(&e);
    const char *out = vr_tmp_path("append.txt");
    cli_write(out, "old\n");
    char body[PATH_MAX + 64];
    snprintf(body, sizeof body, "echo new >> '%s'", out);
    const char *sh = script("append.sh", body);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--output", out, "--", "sh",
                                 sh, NULL };
    struct vr_proc p;
    run_sim("append", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(last_line(&p.out), "identical"), "%s", p.out.p);
    struct vr_buf b;
    cr_assert(vr_read_file(out, &b));
    cr_assert_str_eq(b.p, "old\nnew\n");
    vr_buf_free(&b);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, the_build_trees_simulated_driver_is_found)
{
    struct cli_env e;
    sim_env(&e);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "true", NULL };
    struct vr_proc p;
    run_sim("found", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    char dir[PATH_MAX], want[PATH_MAX * 2];
    cr_assert(realpath(vr_env_path("VR_SIMCUDA_DIR"), dir));
    snprintf(want, sizeof want, "varemap: --sim: simulated driver from %s:", dir);
    cr_assert(strncmp(p.out.p, want, strlen(want)) == 0, "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, no_simulated_driver_is_a_one_line_error_and_125)
{
    struct cli_env e;
    sim_env(&e);
    const char *empty = vr_tmp_path("empty");
    mkdir(empty, 0700);
    const char *const a1[] = { vr_env_path("VR_VAREMAP"), "--sim", "--sim-dir", "/nonexistent/sim",
                               "--", "true", NULL };
    struct vr_proc p;
    run_sim("nodir", a1, &e, &p);
    cr_assert_eq(p.status, 125, "%s\n%s", p.out.p, p.err.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap: "), 1, "%s", p.err.p);
    cr_assert(strstr(p.err.p, "--sim-dir /nonexistent/sim"), "%s", p.err.p);
    cr_assert_eq(p.out.len, 0, "%s", p.out.p);
    vr_proc_free(&p);

    cli_env_set(&e, "VAREMAP_SIM_DIR=%s", empty);
    const char *const a2[] = { vr_env_path("VR_VAREMAP"), "--sim", "true", NULL };
    run_sim("emptydir", a2, &e, &p);
    cr_assert_eq(p.status, 125, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(p.err.p, "VAREMAP_SIM_DIR="), "%s", p.err.p);
    vr_proc_free(&p);

    /* --sim-dir wins over the environment. */
    const char *const a3[] = { vr_env_path("VR_VAREMAP"), "--sim", "--sim-dir",
                               vr_env_path("VR_SIMCUDA_DIR"), "true", NULL };
    run_sim("simdir", a3, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, output_without_sim_is_a_usage_error)
{
    struct cli_env e;
    sim_env(&e);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--output", "x", "true", NULL };
    struct vr_proc p;
    run_sim("nosim", argv, &e, &p);
    cr_assert_eq(p.status, 2, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(p.err.p, "--output only goes with --sim"), "%s", p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* A program that prints its timing: only numbers differ, the verdict names
 * the line and the --ignore that leaves it out; with it, identical. */
static const char timing_body[] =
    "echo start\n"
    "[ $shim = with ] && n=53042.3 || n=51877.9\n"
    "echo \"Processing time: $n (ms)\"\n"
    "echo end";

Test(cli_sim, numbers_only_differences_suggest_an_ignore)
{
    struct cli_env e;
    sim_env(&e);
    const char *sh = script("timing.sh", timing_body);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--", "sh", sh, NULL };
    struct vr_proc p;
    run_sim("timing", argv, &e, &p);
    cr_assert_eq(p.status, 1, "%s\n%s", p.out.p, p.err.p);
    cr_assert(cli_has_row(&p.out, "varemap: stdout: only numbers differ, on 1 line; the first, "
                                  "line 2: \"Processing time: 51877.9 (ms)\" without the shim, "
                                  "\"Processing time: 53042.3 (ms)\" with it"), "%s", p.out.p);
    cr_assert(cli_has_row(&p.out, "varemap: --ignore '^Processing time: ' would leave it out of "
                                  "the compare"), "%s", p.out.p);
    cr_assert_str_eq(last_line(&p.out), "varemap: differs: stdout: first difference at byte 24 "
                                        "(40 bytes without the shim, 40 with it)", "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

Test(cli_sim, ignore_leaves_matching_lines_out)
{
    struct cli_env e;
    sim_env(&e);
    const char *sh = script("timing.sh", timing_body);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--ignore", "time", "--",
                                 "sh", sh, NULL };
    struct vr_proc p;
    run_sim("ignored", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    cr_assert_str_eq(last_line(&p.out), "varemap: identical: exit status 0, stdout and 0 --output "
                                        "files agree without and with the shim (lines matching "
                                        "--ignore left out)", "%s", p.out.p);
    vr_proc_free(&p);

    /* The rest still counts, named by line; an --output file too. */
    const char *out = vr_tmp_path("timing.txt");
    char body[PATH_MAX + 256];
    snprintf(body, sizeof body, "%s\necho \"run $shim\"\necho \"took $$ ms\" > '%s'",
             timing_body, out);
    const char *sh2 = script("timing2.sh", body);
    const char *const a2[] = { vr_env_path("VR_VAREMAP"), "--sim", "--ignore", "time",
                               "--ignore=^run ", "--output", out, "--", "sh", sh2, NULL };
    run_sim("ignored2", a2, &e, &p);
    cr_assert_eq(p.status, 1, "%s\n%s", p.out.p, p.err.p);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof want, "varemap: differs: --output %s: first difference at line 1 "
                                "without the shim, line 1 with it (lines matching --ignore left "
                                "out)", out);
    cr_assert_str_eq(last_line(&p.out), want, "%s", p.out.p);
    cr_assert(cli_has_row(&p.out, "varemap: --ignore '^took ' would leave it out of the compare"),
              "%s", p.out.p);
    vr_proc_free(&p);

    /* A REGEX that does not compile is a usage error. */
    const char *const bad[] = { vr_env_path("VR_VAREMAP"), "--sim", "--ignore", "(", "true", NULL };
    run_sim("badre", bad, &e, &p);
    cr_assert_eq(p.status, 2, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(p.err.p, "varemap: --ignore (: "), "%s", p.err.p);
    vr_proc_free(&p);
    const char *const nosim[] = { vr_env_path("VR_VAREMAP"), "--ignore", "x", "true", NULL };
    run_sim("ignore-nosim", nosim, &e, &p);
    cr_assert_eq(p.status, 2, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(p.err.p, "--ignore only goes with --sim"), "%s", p.err.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* "identical" is for runs that succeeded: two that fail alike say so, with
 * an exit status of their own. */
Test(cli_sim, both_runs_failing_alike_is_not_identical)
{
    struct cli_env e;
    sim_env(&e);
    const char *sh = script("fails.sh", "echo 'libfoo.so: not found' >&2; exit 127");
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--", "sh", sh, NULL };
    struct vr_proc p;
    run_sim("fails", argv, &e, &p);
    cr_assert_eq(p.status, 3, "%s\n%s", p.out.p, p.err.p);
    cr_assert_str_eq(last_line(&p.out), "varemap: both runs failed: exit status 127 without and "
                                        "with the shim (stdout and 0 --output files agree); a dry "
                                        "run needs a run that succeeds", "%s", p.out.p);
    cr_assert_null(strstr(p.out.p, "identical"), "%s", p.out.p);
    vr_proc_free(&p);

    /* Differing failures are a difference, as ever. */
    const char *sh2 = script("fails2.sh", "[ $shim = with ] && exit 4; exit 127");
    const char *const a2[] = { vr_env_path("VR_VAREMAP"), "--sim", "--", "sh", sh2, NULL };
    run_sim("fails2", a2, &e, &p);
    cr_assert_eq(p.status, 1, "%s\n%s", p.out.p, p.err.p);
    vr_proc_free(&p);

    /* A program that cannot start is not compared, and the last line says so. */
    const char *const a3[] = { vr_env_path("VR_VAREMAP"), "--sim", "--", "/nonexistent/app", NULL };
    run_sim("notfound", a3, &e, &p);
    cr_assert_eq(p.status, 127, "%s\n%s", p.out.p, p.err.p);
    cr_assert_str_eq(last_line(&p.out), "varemap: not compared: /nonexistent/app could not be "
                                        "started (exit status 127)", "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* --prices FILE: the savings at another model's prices, named. */
Test(cli_sim, prices_file_prices_the_savings)
{
    struct cli_env e;
    sim_env(&e);
    const char *prices = vr_tmp_path("dear.conf");
    cli_write(prices, "# SetParams very dear, everything else free\n"
                      "cuGraphExecKernelNodeSetParams_v2 1000000  # 1 ms\n\n");
    const char *out = vr_tmp_path("p.bin");
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--prices", prices,
                                 "--output", out, "--", cli_app("graph_linked"), "--out", out,
                                 APP_ARGS, NULL };
    struct vr_proc p;
    run_sim("prices", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "varemap: what the shim would save at the cost model's prices "
                                "(%s):\n", prices);
    cr_assert(strstr(p.out.p, want), "%s", p.out.p);
    /* Only SetParams is priced: every absorbed one saves 1 ms. */
    cr_assert(strstr(p.out.p, " ms saved per launch over 20 launches\n"), "%s", p.out.p);
    cr_assert(strstr(p.out.p, "varemap:     cuGraphExecKernelNodeSetParams_v2: "), "%s", p.out.p);
    cr_assert(strstr(last_line(&p.out), "identical"), "%s", p.out.p);
    vr_proc_free(&p);

    cli_write(prices, "cuGraphLaunch fast\n");
    run_sim("badprices", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    snprintf(want, sizeof want, "varemap: --prices %s: line 1: expected \"name ns\"; no savings",
             prices);
    cr_assert(cli_has_row(&p.out, want), "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}

/* A run that goes on: a progress line on stderr from simcuda's counters
 * (VAREMAP_PROGRESS_S brings the first line forward from 10 s). */
Test(cli_sim, a_long_run_shows_its_progress_on_stderr)
{
    struct cli_env e;
    sim_env(&e);
    /* The first line is due at 2 s and the next only 10 s later (off a
     * terminal): the 30 launches must be done by then, on a loaded CI
     * machine too (at 0.5 s they were not, under a load of 19). */
    cli_env_set(&e, "VAREMAP_PROGRESS_S=2");
    char body[PATH_MAX + 256];
    snprintf(body, sizeof body, "'%s' --pattern stable --steps 30 --bytes 2097152 --out /dev/null\n"
                                "sleep 2.8", cli_app("graph_linked"));
    const char *sh = script("slow.sh", body);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--sim", "--quiet", "--", "sh", sh,
                                 NULL };
    struct vr_proc p;
    run_sim("progress", argv, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    cr_assert(strstr(p.err.p, "varemap: run 1 of 2 (without the shim): "), "%s", p.err.p);
    cr_assert(strstr(p.err.p, "varemap: run 2 of 2 (with the shim): "), "%s", p.err.p);
    cr_assert(strstr(p.err.p, " s, 30 graph launches, "), "%s", p.err.p);
    cr_assert(strstr(p.err.p, " kernels so far\n"), "%s", p.err.p);
    cr_assert(strstr(last_line(&p.out), "identical"), "%s", p.out.p);
    vr_proc_free(&p);
    cli_env_free(&e);
}
