/* The harness's readers, on fixed text: a reader that silently finds
 * nothing would make the e2e assertions vacuous. */
#include <stdio.h>

#include "checks.h"

static struct vr_buf text(const char *s)
{
    return (struct vr_buf){ .p = (char *)s, .len = strlen(s) };
}

Test(harness, json_numbers)
{
    const char *l = "{\"ts\":1.5,\"event\":\"x\",\"n\":42,\"h\":\"0x1f\",\"s\":\"seen\","
                    "\"seen\":7,\"f\":2.5,\"neg\":\"abc\"}";
    size_t len = strlen(l);
    uint64_t v = 0;
    cr_assert(vr_json_u64(l, len, "n", &v));
    cr_assert_eq(v, 42);
    cr_assert(vr_json_u64(l, len, "h", &v));
    cr_assert_eq(v, 0x1f);
    /* "seen" first occurs as a value; the key comes later */
    cr_assert(vr_json_u64(l, len, "seen", &v));
    cr_assert_eq(v, 7);
    cr_assert_not(vr_json_u64(l, len, "f", &v), "a float is no counter");
    cr_assert_not(vr_json_u64(l, len, "ts", &v), "a float is no counter");
    cr_assert_not(vr_json_u64(l, len, "neg", &v), "\"abc\" is no number");
    cr_assert_not(vr_json_u64(l, len, "missing", &v));
    /* bounded by len: the field after the cut is not seen */
    cr_assert_not(vr_json_u64(l, (size_t)(strstr(l, "\"seen\":") - l), "seen", &v));
    char s[16];
    cr_assert(vr_json_str(l, len, "event", s, sizeof s));
    cr_assert_str_eq(s, "x");
    cr_assert_not(vr_json_str(l, len, "n", s, sizeof s), "42 is no string");
    cr_assert_not(vr_json_str(l, len, "s", s, 4), "too long for the buffer");
}

static const char log_text[] =
    "{\"ts\":0.1,\"pid\":9,\"event\":\"start\",\"mode\":\"profiled\"}\n"
    "{\"ts\":0.2,\"pid\":9,\"event\":\"profile_decision\",\"exec\":\"0x10\",\"state\":\"active\","
    "\"launches\":3,\"candidates\":[{\"ptr\":\"0x7000\",\"size\":4096,\"anchors\":2,"
    "\"verdict\":\"selected\"},{\"ptr\":\"0x9000\",\"size\":64,\"anchors\":1,"
    "\"verdict\":\"not_vmm_backed\"}],\"reserved_bytes\":2097152}\n"
    "{\"ts\":0.3,\"pid\":9,\"event\":\"summary\",\"setparams_seen\":1,\"launches\":2}\n"
    "{\"ts\":0.4,\"pid\":9,\"event\":\"summary\",\"setparams_seen\":5,\"launches\":6}\n";

Test(harness, log_events)
{
    struct vr_buf log = text(log_text);
    cr_assert_eq(vr_log_count(&log, "start"), 1);
    cr_assert_eq(vr_log_count(&log, "summary"), 2);
    cr_assert_eq(vr_log_count(&log, "slice_rebind"), 0);
    size_t len;
    cr_assert_null(vr_log_event(&log, "summary", 2, &len));
    const char *d = vr_log_event(&log, "profile_decision", 0, &len);
    cr_assert_not_null(d);
    cr_assert_eq(d[len], '\n');
    struct vr_cand c[4];
    cr_assert_eq(vr_candidates(d, len, c, 4), 2);
    cr_assert_eq(c[0].ptr, 0x7000);
    cr_assert_eq(c[0].size, 4096);
    cr_assert_eq(c[0].anchors, 2);
    cr_assert_str_eq(c[0].verdict, "selected");
    cr_assert_eq(c[1].ptr, 0x9000);
    cr_assert_str_eq(c[1].verdict, "not_vmm_backed");
    cr_assert_eq(vr_candidates(d, len, c, 1), 2, "counts past cap");
    const char *s = vr_log_event(&log, "start", 0, &len);
    cr_assert_eq(vr_candidates(s, len, c, 4), -1);
    uint64_t v = 0;
    cr_assert(vr_summary(&log, "setparams_seen", &v));
    cr_assert_eq(v, 5, "the last summary wins");
    cr_assert_not(vr_summary(&log, "rebinds", &v));
    struct vr_buf empty = text("");
    cr_assert_not(vr_summary(&empty, "launches", &v));
}

Test(harness, sim_stats)
{
    struct vr_buf st = text("{\"calls\": {\"cuGraphLaunch_ptsz\": 3, \"cuGraphLaunch\": 60, "
                            "\"cuMemAlloc_v2\": 19}}\n");
    cr_assert(vr_sim_ok(&st));
    cr_assert_eq(vr_sim_calls(&st, "cuGraphLaunch"), 60);
    cr_assert_eq(vr_sim_calls(&st, "cuGraphLaunch_ptsz"), 3);
    cr_assert_eq(vr_sim_calls(&st, "cuMemAlloc"), 0, "no prefix matches");
    cr_assert_eq(vr_sim_calls(&st, "cuMemCreate"), 0);
    struct vr_buf bad = text("{}");
    cr_assert_not(vr_sim_ok(&bad));
}

Test(harness, map_and_lines)
{
    struct vr_buf map = text("buf X 0x1000 64 struct\nbuf Y 0x2000 64 plain\n"
                             "buf X 0x3000 64 struct\nnode junk\n");
    uint64_t p[4];
    cr_assert_eq(vr_map_ptrs(&map, "X", NULL, p, 4), 2);
    cr_assert_eq(p[0], 0x1000);
    cr_assert_eq(p[1], 0x3000);
    cr_assert_eq(vr_map_ptrs(&map, NULL, "plain", p, 4), 1);
    cr_assert_eq(p[0], 0x2000);
    cr_assert_eq(vr_map_ptrs(&map, NULL, NULL, p, 1), 3, "counts past cap");

    struct vr_buf err = text("varemap: warning: VAREMAP_MODE=bogus is not valid\n"
                             "other varemap: warning:\nvaremap: warning: x");
    cr_assert_eq(vr_count_lines(&err, "varemap: warning:"), 2);
    static const char *const both[] = { "warning", "bogus", NULL };
    cr_assert_eq(vr_count_lines_with(&err, both), 1);
}
