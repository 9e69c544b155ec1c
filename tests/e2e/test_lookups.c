/* The real client's lookup sequence: every cuGetProcAddress request NVIDIA's
 * CUDA runtime makes (tests/data/cudart-*-lookups.txt, recorded by
 * scripts/record-cudart-lookups), replayed through the preloaded shim on
 * simcuda by lookup_replay, which checks every answer against the driver's
 * (see lookup_replay.c for the per-request checks). Also the list the build
 * directory holds when scripts/record-cudart-lookups has written one there,
 * so a toolkit that asks for a new variant fails here first.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"

TestSuite(lookups, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

struct replay {
    struct vr_proc p;
    unsigned long requests, answered, intercepted, resolver, zero_calls, unrouted, failures;
};

/* Lists named cudart-*-lookups.txt in dir, as argv entries; returns the count. */
static size_t lists_in(const char *dir, char **argv, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        size_t len = strlen(e->d_name);
        if (len < 20 || strncmp(e->d_name, "cudart-", 7) ||
            strcmp(e->d_name + len - 12, "-lookups.txt"))
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        argv[n] = strdup(path);
        cr_assert(argv[n]);
        n++;
    }
    closedir(d);
    return n;
}

static void run_replay(const char *tag, const char *mode, bool strict, char **lists, size_t nlists,
                       struct replay *r)
{
    char exe[1024], ld[1024], pre[1024], vm[64], path[4096];
    snprintf(exe, sizeof exe, "%s/lookup_replay", vr_env_path("VR_E2E_DIR"));
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", vr_env_path("VR_SIMCUDA_DIR"));
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", vr_env_path("VR_SHIM"));
    snprintf(vm, sizeof vm, "VAREMAP_MODE=%s", mode);
    const char *p = getenv("PATH");
    snprintf(path, sizeof path, "PATH=%s", p ? p : "/usr/bin:/bin");
    char *env[] = { ld, pre, vm, path, (char *)"ASAN_OPTIONS=verify_asan_link_order=0", NULL };
    char *argv[40];
    size_t a = 0;
    argv[a++] = exe;
    if (strict)
        argv[a++] = (char *)"--strict";
    for (size_t i = 0; i < nlists && a + 1 < sizeof argv / sizeof argv[0]; i++)
        argv[a++] = lists[i];
    argv[a] = NULL;
    *r = (struct replay){ 0 };
    int rc = vr_spawn(tag, argv, env, false, &r->p);
    cr_assert_eq(rc, 0, "cannot start %s: %s", exe, strerror(-rc));
    const char *last = strstr(r->p.out.p, "requests=");
    cr_assert(last, "%s: no summary line (exit %d); stdout:\n%s\nstderr:\n%s", tag, r->p.status,
              r->p.out.p, r->p.err.p);
    cr_assert_eq(sscanf(last,
                        "requests=%lu answered=%lu intercepted=%lu resolver=%lu zero_calls=%lu "
                        "unrouted=%lu failures=%lu",
                        &r->requests, &r->answered, &r->intercepted, &r->resolver, &r->zero_calls,
                        &r->unrouted, &r->failures),
                 7, "%s: bad summary: %s", tag, last);
    cr_expect_eq(r->failures, 0, "%s: %lu failed checks:\n%s", tag, r->failures, r->p.out.p);
    cr_expect_eq(r->unrouted, 0, "%s: unrouted_procs = %lu", tag, r->unrouted);
    cr_expect_eq(r->p.status, 0, "%s: exit %d; stderr:\n%s", tag, r->p.status, r->p.err.p);
}

static void checked_in(const char *mode)
{
    char *lists[16];
    size_t n = lists_in(vr_env_path("VR_LOOKUPS_DATA"), lists, 16);
    cr_assert_gt(n, 0, "no cudart-*-lookups.txt in %s", vr_env_path("VR_LOOKUPS_DATA"));
    struct replay r;
    run_replay(mode, mode, false, lists, n, &r);
    /* A CUDA 13 runtime asks for ~440 entry points, cuGetProcAddress among
     * them, and for many the shim intercepts. */
    cr_expect_geq(r.requests, 400 * n, "only %lu requests in %zu lists", r.requests, n);
    cr_expect_geq(r.resolver, 1, "no cuGetProcAddress request was answered");
    cr_expect_geq(r.intercepted, 10, "only %lu of %lu answered requests were intercepted",
                  r.intercepted, r.answered);
    cr_expect_eq(r.zero_calls, r.intercepted);
    vr_proc_free(&r.p);
    for (size_t i = 0; i < n; i++)
        free(lists[i]);
}

Test(lookups, checked_in_profiled)
{
    checked_in("profiled");
}

Test(lookups, checked_in_off)
{
    checked_in("off");
}

/* The variants the CUDA 13 runtime depends on, by name (DESIGN.md). */
Test(lookups, key_variants)
{
    const char *list = vr_tmp_path("cudart-key-lookups.txt");
    FILE *f = fopen(list, "w");
    cr_assert(f);
    fputs("# NAME VERSION FLAGS the variant the shim must answer with\n"
          "cuGraphLaunch 10000 0 cuGraphLaunch\n"
          "cuGraphLaunch 10000 2 cuGraphLaunch_ptsz\n"
          "cuGraphExecKernelNodeSetParams 12000 0 cuGraphExecKernelNodeSetParams_v2\n"
          "cuGraphExecKernelNodeSetParams 10010 0 cuGraphExecKernelNodeSetParams\n"
          "cuGraphInstantiateWithParams 12000 2 cuGraphInstantiateWithParams_ptsz\n"
          "cuMemAlloc 3020 0 cuMemAlloc_v2\n"
          "cuGetProcAddress 12000 0 cuGetProcAddress_v2\n"
          "cuGetProcAddress 11030 0 cuGetProcAddress\n"
          "cuMemcpyHtoD 3020 0 cuMemcpyHtoD_v2\n",
          f);
    fclose(f);
    char *lists[] = { (char *)list };
    struct replay r;
    run_replay("key", "profiled", true, lists, 1, &r);
    cr_expect_eq(r.requests, 9);
    cr_expect_eq(r.intercepted, 8);
    vr_proc_free(&r.p);
}

/* Its own suite, scratch directory made after the skip check: a skipped test
 * does not reach .fini, which left an empty directory in $TMPDIR each run. */
Test(lookups_build, build_dir)
{
    char *lists[16];
    size_t n = lists_in(vr_env_path("VR_LOOKUPS_BUILD"), lists, 16);
    if (!n)
        cr_skip_test("nothing in %s: scripts/record-cudart-lookups writes the toolkit's list there",
                     vr_env_path("VR_LOOKUPS_BUILD"));
    vr_tmp_setup();
    struct replay r;
    run_replay("build", "profiled", false, lists, n, &r);
    cr_expect_geq(r.resolver, 1);
    vr_proc_free(&r.p);
    for (size_t i = 0; i < n; i++)
        free(lists[i]);
    vr_tmp_teardown();
}
