/* route: dlsym and cuGetProcAddress answered with the shim's wrappers.
 *
 * The top of the hook layer: it exports the resolvers themselves
 * (hooks.def's PROC), and hooks.def expands here into the table of every
 * wrapper (interpose.c's and absorb.c's, below this file): each
 * exported name, the entry point it stands for and where its real function
 * lies in the driver table. A program that resolves an intercepted entry point, by
 * either way, gets the wrapper of exactly the variant the driver chose; an
 * entry point that launches or sets parameters and cannot be routed
 * degrades every exec to dedup, since calls the shim cannot see would
 * leave its slices and shadows wrong.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "driver.h"
#include "exec.h"
#include "hook.h"
#include "log.h"
#include "stats.h"

/* ---- the table of wrappers ------------------------------------------ */

struct hook {
    const char *name;
    const char *base;
    void *wrapper;
    size_t real;    /* offset of the real function in struct vr_driver */
};

#define VR_HOOK(name, base, off, params, args) VR_EXPORT CUresult CUDAAPI name params;
#include "hooks.def"

static const struct hook hooks[] = {
#define VR_HOOK(name, base, off, params, args) \
    {#name, #base, __extension__(void *)name, offsetof(struct vr_driver, name)},
#include "hooks.def"
};
#define VR_NHOOKS (sizeof hooks / sizeof hooks[0])

static const struct hook *hook_named(const char *name)
{
    for (size_t i = 0; i < VR_NHOOKS; i++)
        if (strcmp(hooks[i].name, name) == 0)
            return &hooks[i];
    return NULL;
}

static void *real_of(const struct vr_driver *d, const struct hook *h)
{
    void *fn;
    memcpy(&fn, (const char *)d + h->real, sizeof fn);
    return fn;
}

/* ---- routing ---------------------------------------------------------- */

/* An entry point whose calls must all pass through the shim for profiled
 * mode to be right: a launch it cannot see cannot be ordered against a
 * rebind, a SetParams it cannot see leaves its shadows stale. */
static bool exec_critical(const char *base)
{
    return strncmp(base, "cuGraphLaunch", 13) == 0 ||
           (strncmp(base, "cuGraphExec", 11) == 0 && strstr(base, "SetParams") != NULL);
}

static void handed_out_unrouted(const char *symbol, bool named)
{
    if (!named) {
        vr_stat_inc(VR_C_unrouted_procs);
        vr_log_fallback("cuGetProcAddress", symbol);
    }
    if (exec_critical(symbol)) {
        char why[160];
        snprintf(why, sizeof why,
                 "%s handed out unrouted: its calls bypass the shim; dedup from now on", symbol);
        vr_exec_degrade(why);
    }
}

/* cuGetProcAddress asked for itself: the program resolves everything else
 * through the answer, so it is always our resolver, whatever the driver
 * returned. The variant is the one the driver chose when it can be told,
 * else the one the requested version implies (the five-argument _v2 from
 * 12.0, PFN_cuGetProcAddress_v12000). */
static void route_self(void **pfn, int version)
{
    const struct hook *v1 = hook_named("cuGetProcAddress");
    const struct hook *v2 = hook_named("cuGetProcAddress_v2");
    const struct vr_driver *d = &vr_real;
    Dl_info info;
    const struct hook *pick = NULL;
    if (dladdr(*pfn, &info) && info.dli_saddr == *pfn && info.dli_sname) {
        if (strcmp(info.dli_sname, v1->name) == 0)
            pick = v1;
        else if (strcmp(info.dli_sname, v2->name) == 0)
            pick = v2;
    }
    if (!pick && *pfn == real_of(d, v1))
        pick = v1;
    if (!pick && *pfn == real_of(d, v2))
        pick = v2;
    if (!pick)
        pick = version >= 12000 ? v2 : v1;
    if (!real_of(d, pick)) {
        /* Our wrapper would have nothing to call. */
        handed_out_unrouted("cuGetProcAddress", false);
        return;
    }
    *pfn = pick->wrapper;
}

/* The driver chose a variant for (symbol, version, flags); answer with the
 * wrapper of exactly that variant, found by its exported name. */
static void route_proc(const char *symbol, void **pfn, int version)
{
    if (!symbol || !pfn || !*pfn)
        return;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        route_self(pfn, version);
        return;
    }
    Dl_info info;
    bool named = dladdr(*pfn, &info) && info.dli_saddr == *pfn && info.dli_sname;
    if (named) {
        const struct hook *h = hook_named(info.dli_sname);
        if (h) {
            *pfn = h->wrapper;
            return;
        }
    }
    /* No exported name we hook: an internal entry, or an alias of one of
     * ours under another name. Compare with the real addresses of the
     * variants of the requested name. */
    bool known = false;
    const struct vr_driver *d = &vr_real;
    for (size_t i = 0; i < VR_NHOOKS; i++) {
        if (strcmp(hooks[i].base, symbol) != 0)
            continue;
        known = true;
        if (real_of(d, &hooks[i]) == *pfn) {
            *pfn = hooks[i].wrapper;
            return;
        }
    }
    /* A named export we do not hook (cuMemAlloc's 32-bit v1 for an old
     * version, say) is deliberately the driver's, unless it launches or
     * sets parameters (a variant newer than this shim); only an unnamed
     * answer for a name we hook is a miss worth counting. */
    if (known)
        handed_out_unrouted(symbol, named);
}

CUresult vr_on_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    CUresult r = vr_real.cuGetProcAddress(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS)
        route_proc(symbol, pfn, version);
    return r;
}

CUresult vr_on_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    CUresult r = vr_real.cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS)
        route_proc(symbol, pfn, version);
    return r;
}

/* Before the shim has its driver: does `real` lie in the libcuda.so.1 that
 * init will open, the default namespace's? A driver another namespace holds
 * (dlmopen) is not the one the wrappers call. dladdr1 and dlinfo only read
 * the loader's maps: no lock, no allocation, no dlopen. */
static bool in_default_driver(void *real)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(real, &info, (void **)&map, RTLD_DL_LINKMAP) || !info.dli_fname || !map)
        return false;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strncmp(base, "libcuda.so", 10) != 0)
        return false;
    Lmid_t ns = LM_ID_NEWLM; /* a handle is its link_map in glibc */
    return dlinfo(map, RTLD_DI_LMID, &ns) == 0 && ns == LM_ID_BASE;
}

/* Reached from the dlsym stub for names starting with "cu" and a handle other
 * than RTLD_NEXT, whose lookup does not depend on the caller. Only the real
 * dlsym, dladdr1 and dlinfo are used: no locks, no allocation, no dlopen.
 * The answer is the wrapper only when the program, without the shim, would
 * have got the entry point of the driver the wrappers call. */
__attribute__((visibility("hidden"))) void *vr_dlsym_cu(void *handle, const char *name)
{
    void *real = vr_real_dlsym_fn(handle, name);
    if (!real)
        return NULL;
    const struct hook *h = hook_named(name);
    if (!h)
        return real;
    if (real == h->wrapper) {
        /* The search met the shim's own export (RTLD_DEFAULT, the program's
         * own handle): without the shim it would have gone on past it, and
         * found the driver's entry point, someone else's, or nothing (no
         * driver loaded, or one that lacks the entry point: a program
         * probing for a feature must not see one). RTLD_NEXT from here is
         * that rest of the search. */
        real = vr_real_dlsym_fn(RTLD_NEXT, name);
        if (!real)
            return NULL;
    }
    bool ours = vr_driver_loaded() ? vr_driver_owns(real) : in_default_driver(real);
    return ours ? h->wrapper : real;
}

/* ---- the exported resolvers ------------------------------------------- */

/* hooks.def's PROC entries, exported here because they hand out every
 * other wrapper. Mode off routes too (hooks.def), so there is no pass-through
 * shortcut: the guard, init once, the hook body. */
#define VR_EXPORT_PROC(name, params, args)                                      \
    VR_EXPORT CUresult CUDAAPI name params                                      \
    {                                                                           \
        if (vr_in_shim)                                                         \
            return vr_real.name ? vr_real.name args : CUDA_ERROR_NOT_INITIALIZED; \
        vr_hook_ready();                                                        \
        if (!vr_real.name)                                                      \
            return CUDA_ERROR_NOT_INITIALIZED;                                  \
        vr_in_shim = 1;                                                         \
        CUresult r_ = vr_on_##name args;                                        \
        vr_in_shim = 0;                                                         \
        return r_;                                                              \
    }
#define VR_EXPORT_FWD(name, params, args)
#define VR_EXPORT_SEEN(name, params, args)
#define VR_EXPORT_LAUNCH(name, params, args)
#define VR_EXPORT_FULL(name, params, args)
#define VR_EXPORT_ALLOC(name, params, args)
#define VR_HOOK(name, base, off, params, args) VR_EXPORT_##off(name, params, args)
#include "hooks.def"
