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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "log.h"
#include "stats.h"

#define VR_EXPORT __attribute__((visibility("default")))

static struct vr_config cfg;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Thread_local int in_shim; /* initial-exec (meson: -ftls-model) */
static pid_t start_pid;
static atomic_bool started;
static bool initialized;
/* Set once, at the end of init: mode off, the wrappers' shortest path. */
static atomic_bool passthrough;
static atomic_bool ready;

/* ---- the table of wrappers ------------------------------------------ */

#define VR_HOOK(name, base, off, params, args) static CUresult vr_on_##name params;
#include "hooks.def"

struct hook {
    const char *name;
    const char *base;
    void *wrapper;
    void **real;
};

#define VR_HOOK(name, base, off, params, args) VR_EXPORT CUresult CUDAAPI name params;
#include "hooks.def"

static const struct hook hooks[] = {
#define VR_HOOK(name, base, off, params, args) {#name, #base, __extension__(void *)name, (void **)&vr_real.name},
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

static void finish(void)
{
    if (!initialized || getpid() != start_pid)
        return;
    int saved = in_shim;
    in_shim = 1;
    vr_exec_drain(true);
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
    in_shim = saved;
}

static const char *env_value(const char *name)
{
    return getenv(name);
}

static void init(void)
{
    in_shim = 1;
    start_pid = getpid();
    vr_config_load(&cfg, env_value, start_pid);
    vr_msg_level(cfg.log_level < VR_LEVEL_WARN ? cfg.log_level : VR_LEVEL_WARN);
    vr_log_open(cfg.log_path, cfg.log_level);
    if (vr_driver_load() != 0)
        vr_warn("cannot load libcuda.so.1: every call fails as the driver would be missing");
    vr_alloc_configure(&cfg);
    vr_exec_configure(&cfg);
    /* Every SetParams is forwarded in mode off: counted once, as seen. */
    vr_stats_forward_all(cfg.mode == VR_MODE_OFF);
    initialized = true;
    atexit(finish);
    atomic_store_explicit(&passthrough, cfg.mode == VR_MODE_OFF, memory_order_release);
    atomic_store_explicit(&ready, true, memory_order_release);
    in_shim = 0;
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

/* The exported wrapper holds only mode off's path, so it needs no stack
 * frame; everything else is in wrap_<name>, called as a tail call. */
#define VR_HOOK(name, base, off, params, args)                                  \
    __attribute__((noinline)) static CUresult wrap_##name params                \
    {                                                                           \
        if (in_shim)                                                            \
            return vr_real.name ? vr_real.name args : CUDA_ERROR_NOT_INITIALIZED; \
        if (!atomic_load_explicit(&ready, memory_order_acquire))                \
            pthread_once(&init_once, init);                                     \
        if (!vr_real.name)                                                      \
            return CUDA_ERROR_NOT_INITIALIZED;                                  \
        in_shim = 1;                                                            \
        CUresult r_ = vr_on_##name args;                                        \
        in_shim = 0;                                                            \
        return r_;                                                              \
    }                                                                           \
    VR_EXPORT CUresult CUDAAPI name params                                      \
    {                                                                           \
        if (atomic_load_explicit(&passthrough, memory_order_acquire) &&         \
            !in_shim && vr_real.name) {                                         \
            VR_OFF_##off(name, args)                                            \
        }                                                                       \
        return wrap_##name args;                                                \
    }
#include "hooks.def"

/* ---- memory ----------------------------------------------------------- */

static CUresult vr_on_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!atomic_load_explicit(&started, memory_order_relaxed))
        emit_start(true);
    CUdeviceptr p;
    int rc = vr_alloc_create(dptr ? &p : NULL, bytesize);
    if (rc == 0 && dptr)
        *dptr = p;
    return vr_err_to_cu(rc);
}

/* A VMM-backed allocation: the native free waits for the device; so does
 * this one, before any slice or mapping of this memory goes away under
 * running work. */
static CUresult free_vmm(struct vr_alloc_info *rec)
{
    CUresult r = vr_real.cuCtxSynchronize();
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_CONTEXT) {
        vr_alloc_reattach(rec);
        return r;
    }
    vr_exec_forget_alloc(rec->id, r == CUDA_SUCCESS);
    return vr_err_to_cu(vr_alloc_release(rec));
}

static CUresult vr_on_cuMemFree_v2(CUdeviceptr dptr)
{
    struct vr_alloc_info rec;
    if (dptr == 0 || vr_alloc_detach(dptr, &rec) != 0)
        return vr_real.cuMemFree_v2(dptr); /* unknown or interior: the driver's own answer */
    if (!rec.vmm) {
        CUresult r = vr_real.cuMemFree_v2(dptr);
        if (r != CUDA_SUCCESS)
            vr_alloc_reattach(&rec);
        return r;
    }
    return free_vmm(&rec);
}

/* The driver never saw varemap's VMM allocations as cuMemAlloc memory, so a
 * stream-ordered free of one is done here: after the stream's work, then as
 * cuMemFree. Anything else is the driver's. */
static CUresult free_async(CUdeviceptr dptr, CUstream stream, bool per_thread)
{
    struct vr_alloc_info rec;
    if (vr_alloc_find(dptr, &rec) != 0 || !rec.vmm || rec.base != dptr)
        return per_thread ? vr_real.cuMemFreeAsync_ptsz(dptr, stream)
                          : vr_real.cuMemFreeAsync(dptr, stream);
    CUresult r = per_thread && vr_real.cuStreamSynchronize_ptsz
                     ? vr_real.cuStreamSynchronize_ptsz(stream)
                     : vr_real.cuStreamSynchronize(stream);
    if (r != CUDA_SUCCESS)
        return r;
    if (vr_alloc_detach(dptr, &rec) != 0)
        return CUDA_ERROR_INVALID_VALUE; /* freed by another thread meanwhile */
    return free_vmm(&rec);
}

static CUresult vr_on_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return free_async(dptr, stream, false);
}

static CUresult vr_on_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return free_async(dptr, stream, true);
}

static CUresult vr_on_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct vr_alloc_info rec;
    if (vr_alloc_find(dptr, &rec) != 0 || !rec.vmm)
        return vr_real.cuMemGetAddressRange_v2(pbase, psize, dptr);
    /* The padded mapping is ours; the program asked for `size` bytes. */
    if (pbase)
        *pbase = rec.base;
    if (psize)
        *psize = rec.size;
    return CUDA_SUCCESS;
}

static CUresult vr_on_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    CUresult r = vr_real.cuCtxEnablePeerAccess(peer, flags);
    if (r == CUDA_SUCCESS && cfg.mode == VR_MODE_PROFILED)
        vr_alloc_peer_enabled(peer);
    return r;
}

/* ---- graphs ----------------------------------------------------------- */

static CUresult tracked(CUresult r, CUgraphExec *exec, CUgraph graph)
{
    if (!atomic_load_explicit(&started, memory_order_relaxed))
        emit_start(true);
    if (r == CUDA_SUCCESS && exec)
        vr_exec_track(*exec, graph);
    return r;
}

static CUresult vr_on_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                                  unsigned long long flags)
{
    return tracked(vr_real.cuGraphInstantiateWithFlags(exec, graph, flags), exec, graph);
}

static CUresult vr_on_cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    return tracked(vr_real.cuGraphInstantiateWithParams(exec, graph, params), exec, graph);
}

static CUresult vr_on_cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                                        CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    return tracked(vr_real.cuGraphInstantiateWithParams_ptsz(exec, graph, params), exec, graph);
}

static CUresult vr_on_cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                                     const CUDA_KERNEL_NODE_PARAMS_v1 *params)
{
    return vr_err_to_cu(vr_exec_setparams(exec, node, VR_SP_V1, params));
}

static CUresult vr_on_cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS_v2 *params)
{
    return vr_err_to_cu(vr_exec_setparams(exec, node, VR_SP_V2, params));
}

static CUresult vr_on_cuGraphExecNodeSetParams(CUgraphExec exec, CUgraphNode node,
                                               CUgraphNodeParams *params)
{
    return vr_err_to_cu(vr_exec_setparams(exec, node, VR_SP_NODE, params));
}

static CUresult vr_on_cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
    return vr_err_to_cu(vr_exec_launch(exec, stream, false));
}

static CUresult vr_on_cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream)
{
    return vr_err_to_cu(vr_exec_launch(exec, stream, true));
}

static CUresult vr_on_cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph,
                                           CUgraphExecUpdateResultInfo *info)
{
    return vr_err_to_cu(vr_exec_update(exec, graph, info));
}

static CUresult vr_on_cuGraphExecDestroy(CUgraphExec exec)
{
    return vr_err_to_cu(vr_exec_destroy(exec));
}

/* ---- routing ---------------------------------------------------------- */

/* The driver chose a variant for (symbol, version, flags); answer with the
 * wrapper of exactly that variant, found by its exported name. */
static void route_proc(const char *symbol, void **pfn)
{
    if (!symbol || !pfn || !*pfn)
        return;
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
    for (size_t i = 0; i < VR_NHOOKS; i++) {
        if (strcmp(hooks[i].base, symbol) != 0)
            continue;
        known = true;
        if (*hooks[i].real == *pfn) {
            *pfn = hooks[i].wrapper;
            return;
        }
    }
    /* A named export we do not hook (cuMemAlloc's 32-bit v1 for an old
     * version, say) is deliberately the driver's; only an unnamed answer for
     * a name we hook is a miss worth counting. */
    if (known && !named) {
        vr_stat_inc(VR_C_unrouted_procs);
        char buf[256];
        struct vr_jw w;
        vr_jw_begin(&w, buf, sizeof buf, "fallback");
        vr_jw_str(&w, "what", "cuGetProcAddress");
        vr_jw_str(&w, "reason", symbol);
        vr_log_emit(&w, VR_LEVEL_INFO);
    }
}

static CUresult vr_on_cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    CUresult r = vr_real.cuGetProcAddress(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS)
        route_proc(symbol, pfn);
    return r;
}

static CUresult vr_on_cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    CUresult r = vr_real.cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS)
        route_proc(symbol, pfn);
    return r;
}

/* Reached from the dlsym stub for names starting with "cu" and a handle other
 * than RTLD_NEXT, whose lookup does not depend on the caller. Only the real
 * dlsym and dladdr are used: no locks, no allocation, no dlopen. */
__attribute__((visibility("hidden"))) void *vr_dlsym_cu(void *handle, const char *name)
{
    void *real = vr_real_dlsym_fn(handle, name);
    if (!real)
        return NULL;
    bool in_cuda;
    if (vr_driver_loaded()) {
        in_cuda = vr_driver_owns(real);
    } else {
        Dl_info info;
        const char *base = NULL;
        if (dladdr(real, &info) && info.dli_fname) {
            base = strrchr(info.dli_fname, '/');
            base = base ? base + 1 : info.dli_fname;
        }
        in_cuda = base && strncmp(base, "libcuda.so", 10) == 0;
    }
    if (!in_cuda)
        return real;
    const struct hook *h = hook_named(name);
    return h ? h->wrapper : real;
}
