/* The shim's dynamic symbol table: only the intercepted driver entry points,
 * dlsym and varemap_get_stats, and no link-time dependency on libcuda (it
 * must load, and do nothing, in programs without CUDA). */
#include <stdio.h>
#include <stdlib.h>

#include "checks.h"

TestSuite(exports, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static void tool(const char *tag, const char *prog, const char *opt, const char *opt2,
                 struct vr_proc *p)
{
    char path[4096];
    const char *env_path = getenv("PATH");
    snprintf(path, sizeof path, "PATH=%s", env_path ? env_path : "/usr/bin:/bin");
    char *const env[] = { path, (char *)"LC_ALL=C", NULL };
    char *const argv[] = { (char *)prog, (char *)opt, (char *)opt2, (char *)vr_env_path("VR_SHIM"),
                           NULL };
    int rc = vr_spawn(tag, argv, env, true, p);
    cr_assert_eq(rc, 0, "cannot run %s: %s", prog, strerror(-rc));
    cr_assert_eq(p->status, 0, "%s %s failed (%d):\n%s", prog, opt, p->status, p->err.p);
}

/* Exactly the intercepted entry points: the ONE list the shim is built from. */
static const char *const hooked[] = {
#define VR_HOOK(name, base, off, params, args) #name,
#include "../../src/hooks.def"
};
enum { NHOOKED = sizeof hooked / sizeof hooked[0] };

static long hook_index(const char *name)
{
    for (size_t i = 0; i < NHOOKED; i++)
        if (!strcmp(hooked[i], name))
            return (long)i;
    return -1;
}

static bool allowed(const char *name)
{
    return hook_index(name) >= 0 || !strcmp(name, "dlsym") ||
           !strcmp(name, "varemap_get_stats") || !strcmp(name, "_init") ||
           !strcmp(name, "_fini");
}

Test(exports, only_driver_names)
{
    static const char *const required[] = {
        "cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetAddressRange_v2",
        "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams",
        "cuGraphInstantiateWithParams_ptsz", "cuGraphExecKernelNodeSetParams",
        "cuGraphExecKernelNodeSetParams_v2", "cuGraphExecNodeSetParams", "cuGraphLaunch",
        "cuGraphLaunch_ptsz", "cuGraphExecUpdate_v2", "cuGraphExecDestroy",
        "cuCtxEnablePeerAccess", "cuGetProcAddress", "cuGetProcAddress_v2", "dlsym",
        "varemap_get_stats", "cuGraphExecUpdate", "cuModuleUnload", "cuLibraryUnload",
        /* every allocator that draws device memory, and the pointer queries */
        "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync",
        "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocManaged", "cuMemAllocPitch_v2", "cuMemCreate",
        "cuArrayCreate_v2", "cuArray3DCreate_v2", "cuMipmappedArrayCreate",
        "cuPointerGetAttribute", "cuPointerGetAttributes",
    };
    enum { NREQ = sizeof required / sizeof required[0] };
    bool found[NREQ] = { false };
    bool exported[NHOOKED] = { false };
    struct vr_proc p;
    tool("nm", "nm", "--dynamic", "--defined-only", &p);
    size_t defined = 0;
    char *save = NULL;
    for (char *line = strtok_r(p.out.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char a[64], b[64], c[512];
        int n = sscanf(line, "%63s %63s %511s", a, b, c);
        const char *type = n == 3 ? b : a, *name = n == 3 ? c : b;
        if (n < 2 || !strcmp(type, "U"))
            continue;
        char clean[512];
        snprintf(clean, sizeof clean, "%s", name);
        clean[strcspn(clean, "@")] = '\0'; /* symbol versions */
        defined++;
        cr_expect(allowed(clean), "the shim exports %s", clean);
        for (size_t i = 0; i < NREQ; i++)
            if (!strcmp(clean, required[i]))
                found[i] = true;
        long h = hook_index(clean);
        if (h >= 0)
            exported[h] = true;
    }
    for (size_t i = 0; i < NHOOKED; i++)
        cr_expect(exported[i], "hooks.def lists %s but the shim does not export it", hooked[i]);
    cr_assert_gt(defined, 0, "nm listed no defined symbols:\n%s", p.out.p);
    for (size_t i = 0; i < NREQ; i++)
        cr_expect(found[i], "the shim does not export %s", required[i]);
    vr_proc_free(&p);
}

Test(exports, no_libcuda_needed)
{
    struct vr_proc p;
    tool("readelf", "readelf", "--dynamic", "--wide", &p);
    static const char *const needed[] = { "(NEEDED)", NULL };
    static const char *const cuda[] = { "(NEEDED)", "libcuda", NULL };
    cr_assert_gt(vr_count_lines_with(&p.out, needed), 0, "no NEEDED entries parsed:\n%s",
                 p.out.p);
    cr_assert_eq(vr_count_lines_with(&p.out, cuda), 0, "the shim links libcuda:\n%s", p.out.p);
    vr_proc_free(&p);
}

/* The stats ABI: a caller's struct smaller than the shim's (a program built
 * against an older header) is never written past its size. */
Test(exports, stats_never_written_past_the_callers_size)
{
    struct vr_run r;
    cr_assert_eq(vr_run_app("stats_abi", "stats_abi", NULL, VR_RUN_SHIM | VR_RUN_NOLOG, NULL, &r),
                 0);
    cr_assert_eq(r.proc.status, 0, "%s", r.proc.err.p);
    cr_assert_str_eq(r.proc.out.p, "ok\n");
    vr_run_free(&r);
}
