/* Profiled mode end to end: every case compares every output byte with the
 * same program run without the shim, then reads the decision log, the
 * shim's counters and simcuda's call counts. Buffers are 1 MiB, the default
 * VAREMAP_VMM_MIN_BYTES, so they are VMM-backed unless a case says not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

TestSuite(profiled, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

#define BIG "1048576"
#define MAXCAND 256

/* The same run without and with the shim; `mode` is VAREMAP_MODE, `env` goes
 * to both (SIMCUDA_* knobs must apply to the reference run too). */
static void compare(struct pair *p, const char *tag, const char *app, const char *const *args,
                    const char *mode, const char *const *env)
{
    const char *e[16];
    size_t n = 0;
    for (size_t i = 0; env && env[i] && n < 14; i++)
        e[n++] = env[i];
    e[n] = NULL;
    char t1[96], t2[96], m[64];
    snprintf(t1, sizeof t1, "%s_plain", tag);
    snprintf(t2, sizeof t2, "%s_shim", tag);
    run_ok(&p->plain, t1, app, args, 0, e);
    snprintf(m, sizeof m, "VAREMAP_MODE=%s", mode);
    e[n] = m;
    e[n + 1] = NULL;
    run_ok(&p->shim, t2, app, args, VR_RUN_SHIM, e);
    same_output(&p->plain, &p->shim, tag);
}

/* The exec's one profile_decision line. */
static const char *decision(const struct vr_run *r, size_t *len)
{
    size_t n = vr_log_count(&r->log, "profile_decision");
    cr_assert_eq(n, 1, "expected one profile_decision, found %zu; log:\n%s", n, r->log.p);
    const char *d = vr_log_event(&r->log, "profile_decision", 0, len);
    cr_assert(d != NULL);
    return d;
}

static long candidates(const char *d, size_t len, struct vr_cand *c)
{
    long n = vr_candidates(d, len, c, MAXCAND);
    cr_assert_geq(n, 0, "profile_decision without a readable candidates array: %.*s", (int)len, d);
    cr_assert_leq(n, MAXCAND);
    return n;
}

static const char *state(const char *d, size_t len)
{
    static char s[32];
    cr_assert(vr_json_str(d, len, "state", s, sizeof s), "profile_decision without state");
    return s;
}

static uint64_t field(const char *line, size_t len, const char *key)
{
    uint64_t v = 0;
    cr_assert(vr_json_u64(line, len, key, &v), "no numeric %s in %.*s", key, (int)len, line);
    return v;
}

/* Is address p inside a candidate with verdict `verdict`? */
static bool in_cand(const struct vr_cand *c, long n, uint64_t p, const char *verdict)
{
    for (long i = 0; i < n; i++)
        if (p >= c[i].ptr && p < c[i].ptr + c[i].size && !strcmp(c[i].verdict, verdict))
            return true;
    return false;
}

static long count_verdict(const struct vr_cand *c, long n, const char *verdict)
{
    long k = 0;
    for (long i = 0; i < n; i++)
        k += !strcmp(c[i].verdict, verdict);
    return k;
}

/* After the transition, >= 99% of SetParams must be absorbed, by the shim's
 * counters and by what the driver really received, and the two must agree. */
static void check_skipping(const struct vr_run *r)
{
    size_t len, ilen;
    const char *d = decision(r, &len);
    cr_assert_str_eq(state(d, len), "active", "exec not remapped: %.*s", (int)len, d);
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    cr_assert_gt(count_verdict(c, nc, "selected"), 0, "nothing selected: %.*s", (int)len, d);

    uint64_t at = field(d, len, "launches");
    cr_assert_eq(at, 3, "decision after %llu profiled launches", (unsigned long long)at);
    const char *inst = vr_log_event(&r->log, "exec_instantiated", 0, &ilen);
    cr_assert(inst != NULL, "no exec_instantiated event");
    uint64_t nodes = field(inst, ilen, "kernel_nodes");
    cr_assert_eq(nodes * r->steps, r->setparams, "shim saw %llu kernel nodes",
                 (unsigned long long)nodes);

    /* SetParams before the transition launch: every node, before each
     * profiled launch and before the launch that decides. */
    uint64_t pre = (at + 1) * nodes;
    uint64_t seen = summary(r, "setparams_seen");
    uint64_t skipped = summary(r, "setparams_skipped");
    uint64_t fwd = summary(r, "setparams_forwarded");
    uint64_t trans = summary(r, "transition_updates");
    cr_assert_eq(seen, r->setparams);
    cr_assert_eq(summary(r, "launches"), r->launches);
    cr_assert_eq(seen, skipped + fwd, "seen %llu != skipped %llu + forwarded %llu",
                 (unsigned long long)seen, (unsigned long long)skipped, (unsigned long long)fwd);
    cr_assert_gt(seen, pre);
    cr_assert_geq(skipped * 100, 99 * (seen - pre), "skipped %llu of %llu after the transition",
                  (unsigned long long)skipped, (unsigned long long)(seen - pre));

    uint64_t drv = sim_sum(r, setparams_syms);
    cr_assert_eq(drv, fwd + trans, "driver got %llu SetParams; shim forwarded %llu + %llu "
                 "transition updates", (unsigned long long)drv, (unsigned long long)fwd,
                 (unsigned long long)trans);
    cr_assert_leq(drv, pre + trans + (seen - pre) / 100, "driver got %llu SetParams",
                  (unsigned long long)drv);
}

/* The cases below check the slices themselves (translation, rebinding) on
 * patterns whose buffers do not move while profiled, or whose one moving
 * buffer is not worth a slice: by default such an exec stays compared
 * (stable_stays_compared), so they ask for slices for still buffers. */
static const char *const slice_still[] = { "VAREMAP_SLICE_STILL=1", NULL };

/* Issue 17 item 2: an exec whose buffers never move stays on the compare
 * path. No slot: the shim's only VMM calls back the allocations (one
 * reservation, creation and mapping each), no transition update, every
 * candidate `still`; the updates after the profile are absorbed as dedup
 * would, and the bytes are the run without the shim's. */
Test(profiled, stable_stays_compared)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", BIG, NULL };
    static const char *const reserve[] = { "cuMemAddressReserve", NULL };
    static const char *const create[] = { "cuMemCreate", NULL };
    static const char *const map[] = { "cuMemMap", NULL };
    struct pair p;
    compare(&p, "stable_compared", "graph_linked", args, "profiled", NULL);
    size_t len;
    const char *d = decision(&p.shim, &len);
    cr_assert_str_eq(state(d, len), "disabled", "a still exec got slices: %.*s", (int)len, d);
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    cr_assert_gt(nc, 0, "no candidate: %.*s", (int)len, d);
    cr_assert_eq(count_verdict(c, nc, "still"), nc, "a candidate not `still`: %.*s", (int)len, d);
    cr_assert_eq(field(d, len, "reserved_bytes"), 0);
    uint64_t allocs = sim_sum(&p.shim, create);
    cr_assert_gt(allocs, 0, "no VMM-backed allocation: the case checks nothing");
    cr_assert_eq(sim_sum(&p.shim, reserve), allocs, "a reservation beyond the allocations'");
    cr_assert_eq(sim_sum(&p.shim, map), allocs, "a mapping beyond the allocations'");
    cr_assert_eq(summary(&p.shim, "transition_updates"), 0);
    cr_assert_eq(summary(&p.shim, "slices_bound"), 0);
    uint64_t seen = summary(&p.shim, "setparams_seen");
    uint64_t skipped = summary(&p.shim, "setparams_skipped");
    uint64_t pre = 4 * (seen / p.shim.steps); /* every node, before each profiled launch and the deciding one */
    cr_assert_gt(seen, pre);
    cr_assert_geq(skipped * 100, 99 * (seen - pre), "skipped %llu of %llu after the profile",
                  (unsigned long long)skipped, (unsigned long long)(seen - pre));
    cr_assert_eq(sim_sum(&p.shim, setparams_syms), seen - skipped);
    pair_free(&p);
}

/* (a) */
Test(profiled, stable)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", BIG,
                                        "--trace-decision", NULL };
    struct pair p;
    compare(&p, "stable", "graph_linked", args, "profiled", slice_still);
    check_skipping(&p.shim);
    static const char *const at4[] = { "decided_after_launch=4", NULL };
    cr_assert_eq(vr_count_lines_with(&p.shim.proc.err, at4), 1,
                 "the decision must come with the 4th launch:\n%s", p.shim.proc.err.p);
    pair_free(&p);
}

/* (b) the pointers inside the by-value struct are found, remapped, skipped */
Test(profiled, struct_pointers)
{
    static const char *const args[] = { "--pattern", "struct", "--bytes", BIG, NULL };
    struct pair p;
    compare(&p, "struct", "graph_procaddr", args, "profiled", slice_still);
    check_skipping(&p.shim);
    size_t len;
    const char *d = decision(&p.shim, &len);
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    uint64_t ptrs[64];
    size_t n = vr_map_ptrs(&p.shim.map, NULL, "struct", ptrs, 64);
    cr_assert_gt(n, 0, "the map names no buffer reached through the struct:\n%s", p.shim.map.p);
    cr_assert_leq(n, 64);
    for (size_t i = 0; i < n; i++)
        cr_assert(in_cand(c, nc, ptrs[i], "selected"), "struct buffer 0x%llx not selected: %.*s",
                  (unsigned long long)ptrs[i], (int)len, d);
    pair_free(&p);
}

/* (c) an input replaced by a new allocation every 5 steps: the slice is
 * rebound to the new allocation, and the bytes stay right. */
Test(profiled, rebind)
{
    static const char *const args[] = { "--pattern", "rebind", "--k", "5", "--bytes", BIG, NULL };
    struct pair p;
    compare(&p, "rebind", "graph_linked", args, "profiled", slice_still);
    size_t len;
    const char *d = decision(&p.shim, &len);
    cr_assert_str_eq(state(d, len), "active");
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    uint64_t x[64];
    size_t nx = vr_map_ptrs(&p.shim.map, "X", NULL, x, 64);
    cr_assert_gt(nx, 1, "X was never replaced:\n%s", p.shim.map.p);
    cr_assert_leq(nx, 64);
    cr_assert(in_cand(c, nc, x[0], "selected"), "the first X (0x%llx) is not selected: %.*s",
              (unsigned long long)x[0], (int)len, d);

    size_t nr = vr_log_count(&p.shim.log, "slice_rebind");
    cr_assert_gt(nr, 0, "no slice_rebind event; log:\n%s", p.shim.log.p);
    cr_assert_gt(summary(&p.shim, "rebinds"), 0);
    for (size_t i = 0; i < nr; i++) {
        size_t l;
        const char *e = vr_log_event(&p.shim.log, "slice_rebind", i, &l);
        uint64_t to = field(e, l, "to");
        bool known = false;
        for (size_t k = 0; k < nx; k++)
            known |= to == x[k];
        cr_assert(known, "slice rebound to 0x%llx, which is no X: %.*s", (unsigned long long)to,
                  (int)l, e);
    }
    pair_free(&p);
}

/* (c) an output re-allocated every step at new addresses is never
 * selected, while the stable buffers still are. The freed-memory cache
 * gives a re-allocation the lowest address freed (issue 17 item 4), so O
 * may recur at two addresses: then it came back within the profile and
 * may be selected (variants serve a period). */
Test(profiled, realloc)
{
    static const char *const args[] = { "--pattern", "realloc", "--bytes", BIG, NULL };
    struct pair p;
    compare(&p, "realloc", "graph_dlsym", args, "profiled", slice_still);
    size_t len;
    const char *d = decision(&p.shim, &len);
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    cr_assert_gt(count_verdict(c, nc, "selected"), 0, "nothing selected: %.*s", (int)len, d);
    uint64_t o[128];
    size_t no = vr_map_ptrs(&p.shim.map, "O", NULL, o, 128);
    cr_assert_gt(no, 2, "O was not re-allocated:\n%s", p.shim.map.p);
    cr_assert_leq(no, 128);
    size_t distinct = 0;
    for (size_t i = 0; i < no; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = o[j] == o[i];
        distinct += !seen;
    }
    for (size_t i = 0; i < no && distinct > 2; i++)
        cr_assert(!in_cand(c, nc, o[i], "selected"),
                  "re-allocated O 0x%llx (%zu addresses) was selected: %.*s",
                  (unsigned long long)o[i], distinct, (int)len, d);
    pair_free(&p);
}

/* (d) two inputs alternating: same bytes; the positions that read them are
 * anchored by position, bound at the decision to the one they hold then. */
Test(profiled, pingpong)
{
    static const char *const args[] = { "--pattern", "pingpong", "--bytes", BIG, NULL };
    struct pair p;
    compare(&p, "pingpong", "graph_linked", args, "profiled", NULL);
    size_t len;
    const char *d = decision(&p.shim, &len);
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    static const char *const names[] = { "P0", "P1" };
    size_t selected = 0;
    for (size_t i = 0; i < 2; i++) {
        uint64_t ptr;
        cr_assert_eq(vr_map_ptrs(&p.shim.map, names[i], NULL, &ptr, 1), 1);
        selected += in_cand(c, nc, ptr, "selected");
    }
    cr_assert_eq(selected, 1, "the alternating positions are not one slice: %.*s", (int)len, d);
    pair_free(&p);
}

/* (e) a failed launch does not count toward the profile: the decision
 * needs three successful launches, so it comes with the 5th call. */
Test(profiled, failed_launch)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", BIG,
                                        "--tolerate-launch-failure", "--trace-decision", NULL };
    static const char *const env[] = { "SIMCUDA_FAIL=cuGraphLaunch:2", NULL };
    struct pair p;
    compare(&p, "fail", "graph_linked", args, "profiled", env);
    static const char *const failed[] = { "launch", "failed", NULL };
    cr_assert_eq(vr_count_lines_with(&p.plain.proc.err, failed), 1,
                 "the reference run must see one failed launch:\n%s", p.plain.proc.err.p);
    cr_assert_eq(vr_count_lines_with(&p.shim.proc.err, failed), 1,
                 "the shim run must see one failed launch:\n%s", p.shim.proc.err.p);
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuGraphLaunch"), p.shim.launches);
    size_t len;
    const char *d = decision(&p.shim, &len);
    cr_assert_eq(field(d, len, "launches"), 3, "%.*s", (int)len, d);
    static const char *const at5[] = { "decided_after_launch=5", NULL };
    static const char *const any[] = { "decided_after_launch=", NULL };
    cr_assert_eq(vr_count_lines_with(&p.shim.proc.err, at5), 1,
                 "the decision must come after the 4th launch call, with the 5th:\n%s",
                 p.shim.proc.err.p);
    cr_assert_eq(vr_count_lines_with(&p.plain.proc.err, any), 0,
                 "no shim, no varemap_get_stats:\n%s", p.plain.proc.err.p);
    pair_free(&p);
}

/* (f) nothing VMM-backed: every candidate is rejected as such, the exec
 * stays disabled (dedup only), the bytes stay right. */
static void not_vmm(const char *tag, const char *bytes, const char *const *env)
{
    const char *const args[] = { "--pattern", "stable", "--bytes", bytes, NULL };
    struct pair p;
    compare(&p, tag, "graph_linked", args, "profiled", env);
    size_t len;
    const char *d = decision(&p.shim, &len);
    cr_assert_str_eq(state(d, len), "disabled", "%.*s", (int)len, d);
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c);
    cr_assert_gt(nc, 0, "no candidates at all: %.*s", (int)len, d);
    cr_assert_eq(count_verdict(c, nc, "not_vmm_backed"), nc, "%.*s", (int)len, d);
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 0);
    pair_free(&p);
}

Test(profiled, no_vmm_support)
{
    static const char *const env[] = { "SIMCUDA_VMM=0", NULL };
    not_vmm("novmm", BIG, env);
}

Test(profiled, below_vmm_min)
{
    not_vmm("small", "262144", NULL);
}

Test(profiled, padding_budget)
{
    /* not a multiple of the 2 MiB granularity: backing it needs padding */
    static const char *const env[] = { "VAREMAP_MAX_PADDING=0", NULL };
    not_vmm("padding", "1048588", env);
}

/* (g) kernels that take a while: launches are in flight while the host
 * re-sets parameters, allocates and frees. */
static void delayed(const char *tag, const char *app, const char *pattern, const char *extra)
{
    const char *const args[] = { "--pattern", pattern, "--bytes", BIG, extra, NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=200", NULL };
    struct pair p;
    compare(&p, tag, app, args, "profiled", env);
    cr_assert_eq(vr_log_count(&p.shim.log, "profile_decision"), 1);
    pair_free(&p);
}

Test(profiled, delay_stable)
{
    delayed("d_stable", "graph_linked", "stable", NULL);
}

Test(profiled, delay_struct)
{
    delayed("d_struct", "graph_procaddr", "struct", NULL);
}

Test(profiled, delay_rebind)
{
    delayed("d_rebind", "graph_linked", "rebind", NULL);
}

Test(profiled, delay_realloc)
{
    delayed("d_realloc", "graph_dlsym", "realloc", NULL);
}

Test(profiled, delay_pingpong)
{
    delayed("d_pingpong", "graph_linked", "pingpong", NULL);
}

Test(profiled, delay_mixed_threads)
{
    delayed("d_mixed", "graph_procaddr", "mixed", "--stream-threads");
}

/* (h) two execs of one graph, each destroyed and re-instantiated 3 times:
 * 8 execs in all, all torn down, nothing left backed at exit. */
static void execs_cycles(const char *tag, const char *pattern)
{
    const char *const args[] = { "--pattern", pattern, "--bytes", BIG, "--execs", "2",
                                 "--cycles", "3", NULL };
    struct pair p;
    compare(&p, tag, "graph_linked", args, "profiled", NULL);
    cr_assert_eq(vr_log_count(&p.shim.log, "exec_instantiated"), 8);
    cr_assert_eq(vr_log_count(&p.shim.log, "exec_destroyed"), 8);
    cr_assert_eq(vr_log_count(&p.shim.log, "profile_decision"), 8,
                 "each exec is profiled on its own");
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0, "the program freed everything");
    cr_assert_eq(summary(&p.shim, "execs_active"), 0, "every exec was destroyed");
    cr_assert_eq(summary(&p.shim, "slices_bound"), 0, "every exec was destroyed");
    pair_free(&p);
}

Test(profiled, execs_cycles_stable)
{
    execs_cycles("cycles", "stable");
}

Test(profiled, execs_cycles_rebind)
{
    execs_cycles("cycles_rb", "rebind");
}

/* Two execs of one graph under the mixed pattern (a buffer re-allocated
 * every step, often at the same address): a node whose bytes did not
 * change may point at a new allocation, so a profiled launch must read the
 * nodes naming a freed buffer too, not only those the program re-set
 * (reading only those crashed here: a kernel read an unmapped slice;
 * gpu-check --sim's graph_procaddr row). */
Test(profiled, mixed_two_execs)
{
    static const char *const args[] = { "--pattern", "mixed", "--execs", "2", "--bytes", BIG,
                                        NULL };
    struct pair p;
    compare(&p, "mixed_execs", "graph_procaddr", args, "profiled", NULL);
    cr_assert_eq(vr_log_count(&p.shim.log, "profile_decision"), 2);
    pair_free(&p);
}

/* profile_probe --case WHICH without and with the shim: the same output
 * bytes and final line. */
static void probe_pair(struct pair *p, const char *which)
{
    struct vr_run *runs[2] = { &p->plain, &p->shim };
    for (int i = 0; i < 2; i++) {
        char tag[64], out[80], map[80];
        snprintf(tag, sizeof tag, "probe_%s_%s", which, i ? "shim" : "plain");
        snprintf(out, sizeof out, "%s.bin", tag); /* the files the harness reads back */
        snprintf(map, sizeof map, "%s.map", tag);
        const char *args[] = { "--case", which, "--out", vr_tmp_path(out), "--map",
                               vr_tmp_path(map), NULL };
        run_ok(runs[i], tag, "profile_probe", args, i ? VR_RUN_SHIM : 0, NULL);
    }
    same_output(&p->plain, &p->shim, which);
}

/* The log's nodes read per profile launch (profile_reads): their count. */
static size_t profile_reads(const char *d, size_t len, uint64_t *v, size_t cap)
{
    const char *key = "\"profile_reads\":[";
    const char *at = strstr(d, key);
    cr_assert(at && at < d + len, "profile_decision without profile_reads: %.*s", (int)len, d);
    at += strlen(key);
    size_t n = 0;
    while (n < cap && *at >= '0' && *at <= '9') {
        char *end;
        v[n++] = strtoull(at, &end, 10);
        at = *end == ',' ? end + 1 : end;
    }
    cr_assert_eq(*at, ']', "profile_reads does not parse: %.*s", (int)len, d);
    return n;
}

/* The profile_probe graph: fill(out), fill(a), 32 x axpy(out, a). */
#define PROBE_NODES 34

/* A buffer freed and made again at the same address between two profile
 * launches while the program re-sets every node with the same bytes (all
 * absorbed but the one whose value changes): the next launch reads exactly
 * the nodes naming the buffer, and the profile sees every position of it
 * move together, one candidate (reading only re-set nodes: 1 node read, and
 * the absorbed nodes' positions a candidate of their own). */
Test(profiled, realloc_same_address_while_profiled)
{
    struct pair p;
    probe_pair(&p, "realloc");
    uint64_t a[4];
    cr_assert_eq(vr_map_ptrs(&p.shim.map, "a", NULL, a, 4), 2, "map:\n%s", p.shim.map.p);
    cr_assert_eq(a[0], a[1], "the shim re-allocated `a` elsewhere: the case tests nothing");
    size_t len;
    const char *d = decision(&p.shim, &len);
    uint64_t reads[8];
    cr_assert_eq(profile_reads(d, len, reads, 8), 3);
    cr_assert_eq(reads[0], PROBE_NODES, "%.*s", (int)len, d);
    cr_assert_eq(reads[1], PROBE_NODES - 1, "%.*s", (int)len, d); /* all but fill(out) */
    cr_assert_eq(reads[2], 1, "%.*s", (int)len, d);               /* fill(a): a new value */
    struct vr_cand c[MAXCAND];
    long nc = candidates(d, len, c), of_a = 0;
    for (long i = 0; i < nc; i++)
        of_a += c[i].ptr == a[1];
    cr_assert_eq(of_a, 1, "`a` is not one candidate: %.*s", (int)len, d);
    pair_free(&p);
}

/* Buffers no node names, made and freed between profile launches: no node
 * is read for them, only the one the program re-set. */
Test(profiled, unrelated_free_while_profiled)
{
    struct pair p;
    probe_pair(&p, "unrelated");
    uint64_t u[4];
    cr_assert_eq(vr_map_ptrs(&p.shim.map, "unrelated", NULL, u, 4), 2);
    size_t len;
    const char *d = decision(&p.shim, &len);
    uint64_t reads[8];
    cr_assert_eq(profile_reads(d, len, reads, 8), 3);
    cr_assert_eq(reads[0], PROBE_NODES, "%.*s", (int)len, d);
    cr_assert_eq(reads[1], 1, "%.*s", (int)len, d);
    cr_assert_eq(reads[2], 1, "%.*s", (int)len, d);
    pair_free(&p);
}

/* (i) observe decides but changes nothing the driver sees. */
Test(profiled, observe)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", BIG, NULL };
    static const char *const syms[] = {
        "cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2",
        "cuGraphExecNodeSetParams", "cuGraphLaunch", "cuGraphLaunch_ptsz", "cuMemAlloc_v2",
        "cuMemFree_v2", "cuMemAddressReserve", "cuMemAddressFree", "cuMemCreate", "cuMemRelease",
        "cuMemMap", "cuMemUnmap", "cuMemSetAccess", NULL,
    };
    struct pair p;
    compare(&p, "observe", "graph_linked", args, "observe", NULL);
    for (size_t i = 0; syms[i]; i++)
        cr_assert_eq(vr_sim_calls(&p.plain.stats, syms[i]), vr_sim_calls(&p.shim.stats, syms[i]),
                     "observe changed the %s calls: %llu vs %llu", syms[i],
                     (unsigned long long)vr_sim_calls(&p.plain.stats, syms[i]),
                     (unsigned long long)vr_sim_calls(&p.shim.stats, syms[i]));
    cr_assert_gt(vr_sim_calls(&p.plain.stats, "cuMemAlloc_v2"), 0);
    cr_assert_eq(vr_log_count(&p.shim.log, "profile_decision"), 1, "observe must log its decision");
    cr_assert_eq(summary(&p.shim, "setparams_skipped"), 0);
    pair_free(&p);
}

/* (i) dedup skips the byte-identical updates without any VMM. */
Test(profiled, dedup)
{
    static const char *const args[] = { "--pattern", "stable", "--bytes", BIG, NULL };
    struct pair p;
    compare(&p, "dedup", "graph_linked", args, "dedup", NULL);
    uint64_t skipped = summary(&p.shim, "setparams_skipped");
    cr_assert_gt(skipped, 0);
    cr_assert_eq(sim_sum(&p.shim, setparams_syms), p.shim.setparams - skipped,
                 "the driver must get exactly the updates not skipped");
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 0);
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    pair_free(&p);
}
