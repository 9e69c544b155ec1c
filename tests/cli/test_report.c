/* `varemap report`: hand-made logs with bad lines, unknown events, fields
 * and verdicts, several logs at once, and --json. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

TestSuite(cli_report, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static const char *varemap(void)
{
    return vr_env_path("VR_VAREMAP");
}

/* Line numbers matter: bad lines are 3 (not JSON), 7 (no event), 14 (cut
 * off, no newline). Line 9 is blank. */
static const char hand_log[] =
    "{\"ts\":1.5,\"pid\":101,\"event\":\"start\",\"mode\":\"profiled\",\"profile_launches\":3,"
    "\"driver_version\":13000,\"vmm_supported\":true}\n"
    "{\"ts\":1.6,\"pid\":101,\"event\":\"exec_instantiated\",\"exec\":\"0xa1\",\"kernel_nodes\":4,"
    "\"opaque_nodes\":1}\n"
    "this is not json\n"
    "{\"ts\":1.7,\"pid\":101,\"event\":\"profile_decision\",\"exec\":\"0xa1\",\"state\":\"active\","
    "\"launches\":3,\"candidates\":[{\"ptr\":\"0x1000\",\"size\":2097152,\"anchors\":2,"
    "\"verdict\":\"selected\"},{\"ptr\":\"0x3000\",\"size\":4096,\"anchors\":1,"
    "\"verdict\":\"not_vmm_backed\"},{\"ptr\":\"0x5000\",\"size\":8388608,\"anchors\":1,"
    "\"verdict\":\"not_worth_it\",\"saved_ns\":120,\"cost_ns\":900},{\"ptr\":\"0x7000\","
    "\"size\":2097152,\"anchors\":3,\"verdict\":\"still\"}],\"reserved_bytes\":2097152,"
    "\"unstable\":[\"0x9000\"],\"costs_ns\":{\"map\":2500,\"setparams\":800}}\n"
    "{\"ts\":1.8,\"pid\":101,\"event\":\"something_new\",\"exec\":\"0xa1\",\"x\":[1,{\"y\":null}]}\n"
    "{\"ts\":1.9,\"pid\":101,\"event\":\"slice_rebind\",\"exec\":\"0xa1\",\"slice\":0,"
    "\"from\":\"0x1000\",\"to\":\"0x7000\",\"waited\":true}\n"
    "{\"ts\":2.0,\"pid\":101}\n"
    "{\"ts\":2.1,\"pid\":101,\"event\":\"fallback\",\"what\":\"cuMemCreate\","
    "\"reason\":\"CUDA_ERROR_OUT_OF_MEMORY\"}\n"
    "\n"
    "{\"ts\":2.2,\"pid\":101,\"event\":\"exec_destroyed\",\"exec\":\"0xa1\",\"setparams_seen\":40,"
    "\"setparams_skipped\":31,\"setparams_forwarded\":9,\"transition_updates\":2,\"launches\":10,"
    "\"rebinds\":1,\"rebind_waits\":1}\n"
    "{\"ts\":2.3,\"pid\":101,\"event\":\"summary\",\"setparams_seen\":40,\"setparams_skipped\":31,"
    "\"setparams_forwarded\":9,\"transition_updates\":2,\"launches\":10,\"execs_active\":0,"
    "\"execs_disabled\":0,\"slices_bound\":0,\"rebinds\":1,\"rebind_waits\":1,\"vmm_bytes\":0,"
    "\"padding_bytes\":0,\"vmm_fallbacks\":1,\"unrouted_procs\":0,\"vmm_leaked_bytes\":4096,"
    "\"variants\":2,\"updates_seen\":10,\"updates_absorbed\":9}\n"
    "{\"ts\":3.0,\"pid\":202,\"event\":\"start\",\"mode\":\"dedup\",\"profile_launches\":3,"
    "\"driver_version\":13000,\"vmm_supported\":false}\n"
    "{\"ts\":3.1,\"pid\":202,\"event\":\"exec_instantiated\",\"exec\":\"0xb2\",\"kernel_nodes\":7,"
    "\"opaque_nodes\":0}\n"
    "{\"ts\":3.2,\"pid\":202,\"event\":\"profile_decision\",\"exec\":\"0xb2\",\"state\":\"disab";

static const char *write_hand_log(void)
{
    const char *path = vr_tmp_path("hand.jsonl");
    cli_write(path, hand_log);
    return path;
}

static void run(const char *tag, const char *const *argv, struct vr_proc *p)
{
    struct cli_env e;
    cli_env_init(&e);
    cli_run(tag, argv, &e, p);
    cli_env_free(&e);
}

Test(cli_report, bad_lines_are_named_and_skipped)
{
    const char *log = write_hand_log();
    const char *const argv[] = { varemap(), "report", log, NULL };
    struct vr_proc p;
    run("hand", argv, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    char want[1024];
    snprintf(want, sizeof want,
             "varemap report: %s:3: unexpected 't' at column 1; skipped\n"
             "varemap report: %s:7: no \"event\" string; skipped\n"
             "varemap report: %s:14: truncated (no newline): unterminated string at the end of "
             "the line (truncated?); skipped\n",
             log, log, log);
    cr_assert_str_eq(p.err.p, want);
    cr_assert(strstr(p.out.p, "varemap report: 1 log, 2 processes, 10 lines (3 bad lines skipped)\n"),
              "%s", p.out.p);
    vr_proc_free(&p);
}

/* pid 101: the row, each candidate with its reason (unknown verdicts and
 * fields shown as they are), the costs, the fallback, the counters. */
Test(cli_report, the_table_per_process_and_exec)
{
    const char *log = write_hand_log();
    const char *const argv[] = { varemap(), "report", log, NULL };
    struct vr_proc p;
    run("table", argv, &p);
    cr_assert_eq(p.status, 0);
    char row[1024];
    snprintf(row, sizeof row, "== pid 101 (%s)", log);
    static const char *const rows[] = {
        "mode profiled, profile window 3 launches, driver 13000, VMM yes",
        "exec nodes state selected rejected updates absorbed forwarded rebinds",
        "0xa1 4 active 1 3 40 31 9 1",
        "decided after 3 launches: active, 2097152 bytes reserved",
        "1 opaque nodes (always passed through)",
        "buffer 0x1000 2097152 B 2 anchors selected: remapped into a slice",
        "buffer 0x3000 4096 B 1 anchors not VMM-backed (native cuMemAlloc, too small, or over the "
        "padding limit)",
        "buffer 0x5000 8388608 B 1 anchors not worth it: the slice would cost more than the "
        "updates it saves saved_ns=120 cost_ns=900",
        "buffer 0x7000 2097152 B 3 anchors still: never moved while profiled, compared as dedup "
        "does (no slice)",
        "moved between profiled launches (not candidates): 0x9000",
        "costs (ns): map=2500 setparams=800",
        "1 rebinds waited for a launch",
        "fallback cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (1 line)",
        "SetParams 40 seen, 31 absorbed (77.5%), 9 forwarded, 2 transition updates",
        "launches 10, execs active 0, disabled 0, rebinds 1 (waited 1), VMM fallbacks 1, unrouted "
        "procs 0",
        "graph updates 10 seen, 9 absorbed (90.0%), 1 sent to the driver",
        "other: vmm_leaked_bytes=4096 variants=2",
        "mode dedup, profile window 3 launches, driver 13000, VMM no",
        "0xb2 7 dedup - - - - - 0",
        "no summary line: the process did not exit normally, or is still running",
    };
    cr_assert(cli_has_row(&p.out, row), "no %s in:\n%s", row, p.out.p);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        cr_assert(cli_has_row(&p.out, rows[i]), "no row '%s' in:\n%s", rows[i], p.out.p);
    /* pid 101 comes first (earlier ts), then 202. */
    const char *a = strstr(p.out.p, "== pid 101"), *b = strstr(p.out.p, "== pid 202");
    cr_assert(a && b && a < b, "%s", p.out.p);
    vr_proc_free(&p);
}

Test(cli_report, json_for_machines)
{
    const char *log = write_hand_log();
    const char *const argv[] = { varemap(), "report", "--json", log, NULL };
    struct vr_proc p;
    run("json", argv, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    struct vj doc;
    char err[200];
    cr_assert_eq(vj_parse(p.out.p, p.out.len, &doc, err, sizeof err), 0, "not JSON (%s):\n%s", err,
                 p.out.p);

    const struct vj *bads = vj_get(&doc, "bad_lines");
    cr_assert(bads && bads->type == VJ_ARR && bads->n == 3);
    static const uint64_t bad_at[] = { 3, 7, 14 };
    for (size_t i = 0; i < 3; i++) {
        uint64_t line;
        const char *file;
        cr_assert(vj_get_u64(&bads->items[i], "line", &line));
        cr_assert_eq(line, bad_at[i]);
        cr_assert(vj_get_str(&bads->items[i], "file", &file));
        cr_assert_str_eq(file, log);
    }
    const struct vj *logs = vj_get(&doc, "logs");
    cr_assert(logs && logs->type == VJ_ARR && logs->n == 1);
    uint64_t lines;
    cr_assert(vj_get_u64(&logs->items[0], "lines", &lines));
    cr_assert_eq(lines, 10);

    const struct vj *procs = vj_get(&doc, "processes");
    cr_assert(procs && procs->type == VJ_ARR && procs->n == 2);
    const struct vj *p101 = &procs->items[0], *p202 = &procs->items[1];
    uint64_t v;
    const char *s;
    cr_assert(vj_get_u64(p101, "pid", &v) && v == 101);
    cr_assert(vj_get_u64(p202, "pid", &v) && v == 202);
    cr_assert(vj_get_str(p101, "mode", &s) && !strcmp(s, "profiled"));
    const struct vj *execs = vj_get(p101, "execs");
    cr_assert(execs && execs->type == VJ_ARR && execs->n == 1);
    const struct vj *x = &execs->items[0];
    cr_assert(vj_get_str(x, "exec", &s) && !strcmp(s, "0xa1"));
    cr_assert(vj_get_str(x, "state", &s) && !strcmp(s, "active"));
    cr_assert(vj_get_u64(x, "selected", &v) && v == 1);
    cr_assert(vj_get_u64(x, "rejected", &v) && v == 3);
    const struct vj *verdicts = vj_get(x, "verdicts");
    cr_assert(vj_get_u64(verdicts, "not_worth_it", &v) && v == 1);
    cr_assert(vj_get_u64(verdicts, "not_vmm_backed", &v) && v == 1);
    cr_assert(vj_get_u64(verdicts, "still", &v) && v == 1);
    const struct vj *cand = vj_get(x, "candidates");
    cr_assert(cand && cand->type == VJ_ARR && cand->n == 4);
    cr_assert(vj_get_u64(&cand->items[2], "cost_ns", &v) && v == 900, "unknown fields kept");
    cr_assert(vj_get_u64(vj_get(x, "costs_ns"), "map", &v) && v == 2500);
    const struct vj *counters = vj_get(x, "counters");
    cr_assert(vj_get_u64(counters, "setparams_skipped", &v) && v == 31);
    cr_assert(vj_get_u64(x, "slice_rebinds", &v) && v == 1);
    const struct vj *summary = vj_get(p101, "summary");
    cr_assert(vj_get_u64(summary, "vmm_leaked_bytes", &v) && v == 4096);
    cr_assert(vj_get_u64(summary, "setparams_seen", &v) && v == 40);
    cr_assert_null(vj_get(summary, "event"));
    cr_assert(vj_get_u64(vj_get(p101, "fallbacks"), "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY", &v) &&
              v == 1);
    const struct vj *s202 = vj_get(p202, "summary");
    cr_assert(s202 && s202->type == VJ_NULL);
    const struct vj *e202 = vj_get(p202, "execs");
    cr_assert(e202 && e202->n == 1);
    cr_assert(vj_get_str(&e202->items[0], "state", &s) && !strcmp(s, "dedup"));
    const struct vj *c202 = vj_get(&e202->items[0], "counters");
    cr_assert(c202 && c202->type == VJ_NULL);
    vj_free(&doc);
    vr_proc_free(&p);
}

Test(cli_report, several_logs_at_once_with_their_pids)
{
    char a[2048], b[2048];
    snprintf(a, sizeof a,
             "{\"ts\":5.0,\"pid\":31,\"event\":\"start\",\"mode\":\"profiled\",\"profile_launches\":3,"
             "\"driver_version\":13000,\"vmm_supported\":true}\n"
             "{\"ts\":5.1,\"pid\":31,\"event\":\"exec_instantiated\",\"exec\":\"0xc3\","
             "\"kernel_nodes\":2,\"opaque_nodes\":0}\n"
             "{\"ts\":5.2,\"pid\":31,\"event\":\"profile_decision\",\"exec\":\"0xc3\","
             "\"state\":\"disabled\",\"launches\":3,\"candidates\":[],\"reserved_bytes\":0}\n"
             "{\"ts\":5.3,\"pid\":31,\"event\":\"summary\",\"setparams_seen\":10,"
             "\"setparams_skipped\":0}\n");
    snprintf(b, sizeof b,
             "{\"ts\":4.0,\"pid\":32,\"event\":\"start\",\"mode\":\"profiled\",\"profile_launches\":3,"
             "\"driver_version\":13000,\"vmm_supported\":true}\n"
             "{\"ts\":4.5,\"pid\":32,\"event\":\"summary\",\"setparams_seen\":0}\n"
             /* pid 32 again after its summary: another process (pid reuse). */
             "{\"ts\":6.0,\"pid\":32,\"event\":\"start\",\"mode\":\"off\",\"profile_launches\":3,"
             "\"driver_version\":13000,\"vmm_supported\":true}\n");
    const char *pa = vr_tmp_path("job-31.jsonl"), *pb = vr_tmp_path("job-32.jsonl");
    cli_write(pa, a);
    cli_write(pb, b);
    const char *const argv[] = { varemap(), "report", pa, pb, NULL };
    struct vr_proc p;
    run("several", argv, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert_eq(p.err.len, 0, "%s", p.err.p);
    cr_assert(strstr(p.out.p, "varemap report: 2 logs, 3 processes, 7 lines\n"), "%s", p.out.p);
    char r31[1024], r32[1024];
    snprintf(r31, sizeof r31, "== pid 31 (%s)", pa);
    snprintf(r32, sizeof r32, "== pid 32 (%s)", pb);
    const char *x = strstr(p.out.p, r32), *y = strstr(p.out.p, r31);
    cr_assert(x && y && x < y, "ordered by time:\n%s", p.out.p);
    cr_assert(strstr(y + 1, r32), "pid 32 twice:\n%s", p.out.p);
    cr_assert(cli_has_row(&p.out, "0xc3 2 disabled 0 0 - - - 0"), "%s", p.out.p);
    cr_assert(cli_has_row(&p.out, "no stable pointer argument"), "%s", p.out.p);
    cr_assert(cli_has_row(&p.out, "SetParams 10 seen, 0 absorbed (0.0%), 0 forwarded, 0 transition "
                                  "updates"),
              "%s", p.out.p);
    cr_assert(cli_has_row(&p.out, "mode off, profile window 3 launches, driver 13000, VMM yes"),
              "%s", p.out.p);
    vr_proc_free(&p);
}

Test(cli_report, exit_1_only_when_no_line_could_be_read)
{
    const char *junk = vr_tmp_path("junk.jsonl"), *empty = vr_tmp_path("empty.jsonl");
    cli_write(junk, "garbage\n{\"no\":\"event\"}\n[1,2]\n{\"pid\":1,\"event\":\"x\"");
    cli_write(empty, "");
    struct vr_proc p;
    const char *const a1[] = { varemap(), "report", junk, empty, "/nonexistent/log.jsonl", NULL };
    run("none", a1, &p);
    cr_assert_eq(p.status, 1);
    cr_assert_eq(p.out.len, 0, "%s", p.out.p);
    cr_assert_eq(vr_count_lines(&p.err, "varemap report: "), 6, "%s", p.err.p);
    cr_assert(strstr(p.err.p, ":4: truncated (no newline): "), "%s", p.err.p);
    cr_assert(strstr(p.err.p, ":3: not a JSON object; skipped\n"), "%s", p.err.p);
    cr_assert(strstr(p.err.p, "varemap report: cannot read /nonexistent/log.jsonl: No such file or "
                              "directory\n"),
              "%s", p.err.p);
    cr_assert(strstr(p.err.p, "varemap report: no decision-log line could be read\n"), "%s",
              p.err.p);
    vr_proc_free(&p);

    /* --json: the document all the same, with every bad line. */
    const char *const aj[] = { varemap(), "report", "--json", junk, NULL };
    run("nonejson", aj, &p);
    cr_assert_eq(p.status, 1);
    struct vj doc;
    char err[200];
    cr_assert_eq(vj_parse(p.out.p, p.out.len, &doc, err, sizeof err), 0, "%s:\n%s", err, p.out.p);
    const struct vj *bads = vj_get(&doc, "bad_lines"), *procs = vj_get(&doc, "processes");
    cr_assert(bads && bads->type == VJ_ARR && bads->n == 4, "%s", p.out.p);
    cr_assert(procs && procs->type == VJ_ARR && procs->n == 0, "%s", p.out.p);
    vj_free(&doc);
    vr_proc_free(&p);

    /* One readable line among them is enough. */
    const char *one = vr_tmp_path("one.jsonl");
    cli_write(one, "{\"ts\":1,\"pid\":5,\"event\":\"start\",\"mode\":\"profiled\"}\n");
    const char *const a2[] = { varemap(), "report", junk, "/nonexistent/log.jsonl", one, NULL };
    run("one", a2, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert(strstr(p.out.p, "== pid 5 ("), "%s", p.out.p);
    vr_proc_free(&p);
}

Test(cli_report, usage)
{
    struct vr_proc p;
    const char *const a1[] = { varemap(), "report", "--help", NULL };
    run("rhelp", a1, &p);
    cr_assert_eq(p.status, 0);
    cr_assert(strncmp(p.out.p, "usage: varemap report [--json] LOG...\n", 38) == 0, "%s", p.out.p);
    cr_assert_eq(p.err.len, 0);
    vr_proc_free(&p);

    const char *const a2[] = { varemap(), "report", NULL };
    run("rnone", a2, &p);
    cr_assert_eq(p.status, 2);
    cr_assert(strncmp(p.err.p, "varemap report: no log given\nusage: varemap report", 50) == 0,
              "%s", p.err.p);
    vr_proc_free(&p);

    const char *const a3[] = { varemap(), "report", "--csv", "x", NULL };
    run("rbad", a3, &p);
    cr_assert_eq(p.status, 2);
    cr_assert(strncmp(p.err.p, "varemap report: unknown option --csv\nusage: varemap report", 58) == 0,
              "%s", p.err.p);
    cr_assert_eq(p.out.len, 0);
    vr_proc_free(&p);
}
