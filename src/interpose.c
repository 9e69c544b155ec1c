/* interpose: the exported face of the shim.
 *
 * hooks.def expands here into one exported wrapper per intercepted entry
 * point. A wrapper initializes the shim once, keeps the shim's own calls out
 * of its hooks with a thread-local guard, and turns the module's internal
 * code into a CUresult: the only place that conversion happens. dlsym and
 * cuGetProcAddress requests for intercepted names are answered with the
 * wrappers, so every way a program can reach the driver leads through here.
 */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "hook.h"
#include "exec.h"
#include "graph_rec.h"
#include "layout.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"

#define VR_EXPORT __attribute__((visibility("default")))

static struct vr_config cfg;
static pid_t start_pid;
static atomic_bool started;
static bool initialized;
/* Set once, at the end of init: mode off, the wrappers' shortest path. */
static atomic_bool passthrough;

/* INIT_NONE (0): nothing published; threads may be resolving the driver,
 * each for itself. A pid: a thread of that process is setting the shim up
 * from its resolution (the pid tells a forked child that the publisher
 * stayed behind in the parent). INIT_READY, stored with release once
 * config, driver table, address range, log and modules are all set: a
 * wrapper that acquires it sees all of them. See init_once() for why nobody
 * waits in the loader. */
enum { INIT_NONE = 0, INIT_READY = -1, INIT_CHILD = -2 };
static atomic_int init_state;

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

/* ---- start and end ---------------------------------------------------- */

/* `start` needs the device for vmm_supported, so it waits for the first
 * hook that runs with a context; at exit without one, it says false. */
static void emit_start(bool ask_device)
{
    if (atomic_exchange(&started, true) || !vr_log_enabled(VR_LEVEL_INFO))
        return; /* without a log, no query the program did not make */
    int version = 0;
    if (vr_real.cuDriverGetVersion)
        vr_real.cuDriverGetVersion(&version);
    char buf[512];
    struct vr_jw w;
    vr_jw_begin(&w, buf, sizeof buf, "start");
    vr_jw_str(&w, "mode", vr_mode_name(cfg.mode));
    vr_jw_u64(&w, "profile_launches", cfg.profile_launches);
    vr_jw_i64(&w, "driver_version", version);
    vr_jw_bool(&w, "vmm_supported", ask_device && vr_alloc_vmm_supported());
    vr_jw_u64(&w, "vmm_min_bytes", cfg.vmm_min_bytes);
    vr_jw_u64(&w, "max_padding", cfg.max_padding);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

void vr_hook_note_start(void)
{
    if (!atomic_load_explicit(&started, memory_order_relaxed))
        emit_start(true);
}

static void finish(void)
{
    static atomic_bool finished; /* a forked child registers it twice */
    if (!initialized || getpid() != start_pid || atomic_exchange(&finished, true))
        return;
    int saved = vr_in_shim;
    vr_in_shim = 1;
    CUcontext cur;
    if (vr_real.cuCtxGetCurrent && vr_real.cuCtxGetCurrent(&cur) == CUDA_ERROR_DEINITIALIZED) {
        /* The driver's exit handler ran first (it registers one at cuInit,
         * after ours): its teardown took the device memory with it, and no
         * call would succeed. Nothing is left to release or leaked. */
        vr_tomb_abandon();
        vr_alloc_abandon();
        if (vr_log_enabled(VR_LEVEL_DEBUG)) { /* normal, not a fallback */
            char buf[192];
            struct vr_jw w;
            vr_jw_begin(&w, buf, sizeof buf, "teardown");
            vr_jw_str(&w, "reason", "the driver shut down first and reclaimed the memory");
            vr_log_emit(&w, VR_LEVEL_DEBUG);
        }
    } else {
        vr_tomb_drain(true);
        vr_alloc_drain(); /* before the counters are read: parked memory may go now */
    }
    struct varemap_stats s;
    vr_stats_snapshot(&s);
    if (vr_log_enabled(VR_LEVEL_INFO)) {
        emit_start(false);
        char buf[1024];
        struct vr_jw w;
        vr_jw_begin(&w, buf, sizeof buf, "summary");
        vr_stats_json(&w, &s);
        vr_jw_u64(&w, "log_lines_dropped", vr_log_dropped());
        vr_log_emit(&w, VR_LEVEL_INFO);
    }
    if (cfg.stats) {
        char line[1024];
        int n = snprintf(line, sizeof line, "varemap: mode=%s", vr_mode_name(cfg.mode));
        size_t len = n > 0 ? (size_t)n : 0;
        len += vr_stats_text(line + len, sizeof line - len - 1, &s);
        line[len++] = '\n';
        ssize_t wr = write(2, line, len);
        (void)wr;
    }
    vr_in_shim = saved;
}

/* The child of a fork has only the forking thread. It takes its own
 * identity (adopt_child) only at its first CUDA call, so a child that makes
 * none (fork + exec) opens no log and writes no summary: init_state and
 * passthrough send that call to init_once. */
static void vr_after_fork_child(void)
{
    vr_layout_after_fork();
    vr_grec_after_fork();
    vr_alloc_after_fork();
    vr_exec_after_fork();
    vr_tomb_after_fork();
    if (atomic_load_explicit(&init_state, memory_order_acquire) == INIT_READY) {
        atomic_store_explicit(&passthrough, false, memory_order_relaxed);
        atomic_store_explicit(&init_state, INIT_CHILD, memory_order_release);
    }
}

/* A forked child's first CUDA call: from now on the process is its own,
 * with its pid's log (%p), its counters and its summary at exit (finish
 * runs only in the process that set the shim up). */
static void adopt_child(void)
{
    vr_in_shim = 1;
    vr_log_after_fork();
    start_pid = getpid();
    vr_stats_reset();
    atomic_store(&started, false);
    atomic_store_explicit(&passthrough, cfg.mode == VR_MODE_OFF, memory_order_release);
    atomic_store_explicit(&init_state, INIT_READY, memory_order_release);
    /* Registered again (after READY, as in publish): the child's cuInit may
     * have come after the fork, and the driver's exit handler, registered
     * there, would otherwise run first and leave nothing to release. */
    atexit(finish);
    vr_in_shim = 0;
}

/* Sets the shim up from a resolved driver. Makes no loader call and takes
 * no lock a hook's caller could hold (a thread may be spinning for it in
 * init_once). */
static void publish(const struct vr_driver_image *img, bool resolved)
{
    vr_in_shim = 1;
    start_pid = getpid();
    vr_config_load(&cfg, NULL, start_pid); /* secure_getenv */
    vr_msg_level(cfg.log_level < VR_LEVEL_WARN ? cfg.log_level : VR_LEVEL_WARN);
    vr_log_start(&cfg);
    if (!resolved)
        vr_warn("cannot load libcuda.so.1: every call fails as the driver would be missing");
    vr_driver_publish(img);
    if (cfg.cost_model[0])
        vr_cost_load(cfg.cost_model);
    vr_cost_configure(cfg.cost_measured);
    vr_alloc_configure(&cfg);
    vr_exec_configure(&cfg);
    /* Every SetParams is forwarded in mode off: counted once, as seen. */
    vr_stats_forward_all(cfg.mode == VR_MODE_OFF);
    initialized = true;
    atomic_store_explicit(&passthrough, cfg.mode == VR_MODE_OFF, memory_order_release);
    atomic_store_explicit(&init_state, INIT_READY, memory_order_release);
    /* After READY: atexit and pthread_atfork take libc locks that a thread
     * spinning above (a fork handler calling a hook, say) may hold. */
    static atomic_bool registered;
    if (!atomic_exchange(&registered, true)) {
        atexit(finish);
        pthread_atfork(NULL, NULL, vr_after_fork_child);
    }
    vr_in_shim = 0;
}

/* Called by a hook until the shim is ready; returns when it is.
 *
 * Why not pthread_once: init calls dlopen and dlsym, which take the
 * loader's lock. If thread A is inside dlopen (running a library
 * constructor) and thread B's first hook holds a once-lock while it waits
 * for A's loader lock, A's next hook waits for B's once-lock and the two
 * wait for each other forever. So the loader part and the waiting part
 * never overlap:
 *  1. every thread that finds the shim not ready resolves the driver for
 *     itself (vr_driver_resolve: loader calls only, no shim lock, no
 *     global written; dlopen is refcounted and the loader lets a thread that
 *     already holds its lock in, so this finishes whatever the thread
 *     holds);
 *  2. the first to finish resolving (NONE -> its pid) publishes its
 *     image; the others drop theirs (their extra libcuda reference is
 *     harmless: the shim keeps libcuda loaded for good anyway);
 *  3. a thread that finds another publishing spins until READY. The
 *     publisher has finished its loader calls and waits for nothing a
 *     spinner can hold, so the spin ends; a spinner in a forked child whose
 *     publisher stayed in the parent starts over.
 * A thread therefore only ever waits in the loader (like any dlsym call)
 * and never on another thread's progress through the shim. */
static void init_once(void)
{
    int child = INIT_CHILD;
    if (atomic_compare_exchange_strong(&init_state, &child, (int)getpid())) {
        adopt_child();
        return;
    }
    for (;;) {
        struct vr_driver_image img;
        vr_in_shim = 1; /* a driver constructor run by this dlopen stays out of the hooks */
        bool resolved = vr_driver_resolve(&img) == 0;
        vr_in_shim = 0;
        int me = (int)getpid();
        int state = INIT_NONE;
        if (atomic_compare_exchange_strong_explicit(&init_state, &state, me, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            publish(&img, resolved);
            return;
        }
        for (unsigned spins = 0; state != INIT_READY; spins++) {
            if (state != me) {
                /* A fork copied a publisher that is not here: start over
                 * (the pid makes this immune to a new publisher's claim). */
                atomic_compare_exchange_strong(&init_state, &state, INIT_NONE);
                break;
            }
            if (spins % 64 == 63) {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
            }
            state = atomic_load_explicit(&init_state, memory_order_acquire);
        }
        if (state == INIT_READY)
            return;
    }
}

/* Only records the pid: the real work waits for the first hook. */
__attribute__((constructor)) static void record_pid(void)
{
    start_pid = getpid();
}

/* ---- the exported wrappers -------------------------------------------- */

/* What a wrapper does in mode off (hooks.def's `off` column). */
#define VR_OFF_FWD(name, args) return vr_real.name args;
#define VR_OFF_SEEN(name, args) vr_stat_inc(VR_C_setparams_seen); return vr_real.name args;
#define VR_OFF_LAUNCH(name, args) vr_stat_inc(VR_C_launches); return vr_real.name args;
#define VR_OFF_FULL(name, args)
#define VR_OFF_ALLOC VR_OFF_FWD

/* What a wrapper tries first (hooks.def's `off` column again): a SetParams
 * goes straight to the absorbed path, which makes no driver call, needs no
 * guard and tests vr_in_shim itself (absorb.c); mode off keeps no exec in
 * its cache, so there it misses at once and tail-calls the complete path
 * (vr_hook_setparams_*, below), which starts with mode off's test. The
 * common case pays no second call, no stack frame and no mode test. */
#define VR_FAST_FWD(name, args)
#define VR_FAST_LAUNCH(name, args)
#define VR_FAST_FULL(name, args)
#define VR_FAST_ALLOC(name, args)
#define VR_FAST_SEEN(name, args) return absorb_##name args;

#define absorb_cuGraphExecKernelNodeSetParams vr_absorb_v1
#define absorb_cuGraphExecKernelNodeSetParams_v2 vr_absorb_v2
#define absorb_cuGraphExecNodeSetParams vr_absorb_node

/* The exported wrapper holds only mode off's path (front_<name>), so it
 * needs no stack frame; everything else is in wrap_<name>, called as a tail
 * call. */
#define VR_HOOK(name, base, off, params, args)                                  \
    __attribute__((noinline)) static CUresult wrap_##name params                \
    {                                                                           \
        if (vr_in_shim)                                                         \
            return vr_real.name ? vr_real.name args : CUDA_ERROR_NOT_INITIALIZED; \
        if (atomic_load_explicit(&init_state, memory_order_acquire) != INIT_READY) \
            init_once();                                                        \
        if (!vr_real.name)                                                      \
            return CUDA_ERROR_NOT_INITIALIZED;                                  \
        vr_in_shim = 1;                                                         \
        CUresult r_ = vr_on_##name args;                                        \
        vr_in_shim = 0;                                                         \
        return r_;                                                              \
    }                                                                           \
    static inline __attribute__((always_inline, unused)) CUresult front_##name params \
    {                                                                           \
        if (atomic_load_explicit(&passthrough, memory_order_acquire) &&         \
            !vr_in_shim && vr_real.name) {                                      \
            VR_OFF_##off(name, args)                                            \
        }                                                                       \
        return wrap_##name args;                                                \
    }                                                                           \
    VR_EXPORT CUresult CUDAAPI name params                                      \
    {                                                                           \
        VR_FAST_##off(name, args)                                               \
        return front_##name args;                                               \
    }
#include "hooks.def"

/* The full paths the absorbed path falls back to (hook.h). */
CUresult vr_hook_setparams_v1(CUgraphExec exec, CUgraphNode node,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *params)
{
    return front_cuGraphExecKernelNodeSetParams(exec, node, params);
}

CUresult vr_hook_setparams_v2(CUgraphExec exec, CUgraphNode node,
                              const CUDA_KERNEL_NODE_PARAMS_v2 *params)
{
    return front_cuGraphExecKernelNodeSetParams_v2(exec, node, params);
}

CUresult vr_hook_setparams_node(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *params)
{
    return front_cuGraphExecNodeSetParams(exec, node, params);
}

/* ---- the hot graph hooks, beside their wrappers --------------------- */

CUresult vr_on_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_KERNEL_NODE_PARAMS_v1 *params)
{
    return vr_err_to_cu(vr_exec_setparams(exec, node, VR_SP_V1, params));
}

CUresult vr_on_cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS_v2 *params)
{
    return vr_err_to_cu(vr_exec_setparams(exec, node, VR_SP_V2, params));
}

CUresult vr_on_cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                               CUgraphNodeParams *params)
{
    return vr_err_to_cu(vr_exec_setparams(exec, node, VR_SP_NODE, params));
}

/* The captured launch (issue 19: <= 50 ns of the shim's work per kernel)
 * beside its wrapper, so wrap_cuLaunchKernel inlines it: one call level
 * fewer re-passing eleven arguments, five of them on the stack. While no
 * capture the shim saw runs, a launch costs one relaxed load. */
#define LAUNCH_BODY(real, ptsz)                                                             \
    CUresult r = vr_real.real(f, gx, gy, gz, bx, by, bz, shmem, s, kp, extra);              \
    if (vr_grec_capturing()) {                                                              \
        const unsigned dims[7] = {gx, gy, gz, bx, by, bz, shmem};                           \
        if (extra)                                                                          \
            vr_grec_launch(s, ptsz, r, f, dims, kp, extra, false);                          \
        else                                                                                \
            vr_grec_launch_kp(s, ptsz, r, f, dims, kp);                                     \
    }                                                                                       \
    return r;

inline __attribute__((always_inline)) CUresult
vr_on_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                     unsigned bz, unsigned shmem, CUstream s, void **kp, void **extra)
{
    LAUNCH_BODY(cuLaunchKernel, false)
}

inline __attribute__((always_inline)) CUresult
vr_on_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, CUstream s, void **kp,
                          void **extra)
{
    LAUNCH_BODY(cuLaunchKernel_ptsz, true)
}

CUresult vr_on_cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    return vr_err_to_cu(vr_exec_launch(exec, stream, false));
}

CUresult vr_on_cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream)
{
    return vr_err_to_cu(vr_exec_launch(exec, stream, true));
}

/* The exec's variants are uploaded with it. */
CUresult vr_on_cuGraphUpload(CUgraphExec exec, CUstream stream)
{
    return vr_err_to_cu(vr_exec_upload(exec, stream, false));
}

CUresult vr_on_cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream)
{
    return vr_err_to_cu(vr_exec_upload(exec, stream, true));
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
