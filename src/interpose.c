/* interpose: the exported face of the shim.
 *
 * hooks.def expands here into one exported wrapper per intercepted entry
 * point (absorb.c exports the SetParams ones, above the full path here).
 * A wrapper initializes the shim once, keeps the shim's own calls out
 * of its hooks with a thread-local guard, and turns the module's internal
 * code into a CUresult: the only place that conversion happens. route.c
 * answers dlsym and cuGetProcAddress requests for intercepted names with
 * these wrappers, so every way a program can reach the driver leads here.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "capture_guard.h"
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

static struct vr_config cfg;
static pid_t start_pid;
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

/* ---- start and end ---------------------------------------------------- */

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
        vr_exec_release_graphs();
        vr_alloc_drain(); /* before the counters are read: parked memory may go now */
        vr_tomb_drain_lingering(); /* after it: its releases take their slices first */
    }
    struct varemap_stats s;
    vr_stats_snapshot(&s);
    if (vr_log_enabled(VR_LEVEL_INFO)) {
        vr_hook_emit_start(false);
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
    vr_hook_start_forget();
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
    vr_hook_start_configure(&cfg);
    if (!resolved)
        vr_warn("cannot load libcuda.so.1: every call fails as the driver would be missing");
    /* The guard wraps the table before any thread can read it. */
    struct vr_driver_image guarded = *img;
    vr_capture_guard_table(&guarded.fns);
    vr_driver_publish(&guarded);
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

/* The exported wrapper of each entry point but the SetParams (hooks.def's
 * `off` column again): those of SEEN are absorb.c's, whose absorbed path
 * comes first and falls back to the full path here (vr_hook_setparams_*),
 * so the file that exports them sits above this one. */
#define VR_EXPORT_FRONT(name, params, args)                                     \
    VR_EXPORT CUresult CUDAAPI name params                                      \
    {                                                                           \
        return front_##name args;                                               \
    }
#define VR_EXPORT_FWD VR_EXPORT_FRONT
#define VR_EXPORT_LAUNCH VR_EXPORT_FRONT
#define VR_EXPORT_FULL VR_EXPORT_FRONT
#define VR_EXPORT_ALLOC VR_EXPORT_FRONT
#define VR_EXPORT_SEEN(name, params, args)

/* The exported wrapper holds only mode off's path (front_<name>), so it
 * needs no stack frame; everything else is in wrap_<name>, called as a tail
 * call. The resolvers (PROC) are route.c's, whole. */
#define VR_WRAP(name, off, params, args)                                        \
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
    VR_EXPORT_##off(name, params, args)
#define VR_WRAP_FWD VR_WRAP
#define VR_WRAP_SEEN VR_WRAP
#define VR_WRAP_LAUNCH VR_WRAP
#define VR_WRAP_FULL VR_WRAP
#define VR_WRAP_ALLOC VR_WRAP
#define VR_WRAP_PROC(name, off, params, args)
#define VR_HOOK(name, base, off, params, args) VR_WRAP_##off(name, off, params, args)
#include "hooks.def"

/* For the wrappers exported elsewhere that make a driver call of their own
 * (route.c's resolvers): the shim initialized, once. */
void vr_hook_ready(void)
{
    if (atomic_load_explicit(&init_state, memory_order_acquire) != INIT_READY)
        init_once();
}

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
