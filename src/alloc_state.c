/* alloc_state: what every room of the allocation layer reads (its
 * settings, whether the exit work closed it, the fallback events logged,
 * the free observer) and the context check its calls share. It sits at the
 * layer's bottom, so the rooms below alloc.c (the registry, the cache, the
 * release, IPC) reach it without an arrow up to alloc.c.
 */
#include "alloc_int.h"

#include <stdatomic.h>
#include <stdint.h>

#include "assert.h"
#include "driver.h"
#include "err.h"
#include "log.h"

struct vr_config vr_alloc_cfg;
atomic_bool vr_alloc_closed;

static _Atomic unsigned fallback_logged;

static void (*_Atomic free_observer)(uint64_t id, bool synced);

void vr_alloc_observe_free(void (*fn)(uint64_t id, bool synced))
{
    atomic_store_explicit(&free_observer, fn, memory_order_release);
}

void vr_alloc_tell_freed(uint64_t id, bool synced)
{
    void (*fn)(uint64_t, bool) = atomic_load_explicit(&free_observer, memory_order_acquire);
    VR_ASSERT(id != 0);
    if (fn)
        fn(id, synced);
}

/* The driver's answer for a call that needs a current context, asked before
 * the shim touches anything. A query that fails is the shim's own call, not
 * the program's: then *ctx is NULL and the calls that follow (a synchronize
 * first) give the driver's answer about the context. */
int vr_alloc_need_context(CUcontext *ctx)
{
    CUcontext c = NULL;
    CUresult r = vr_real.cuCtxGetCurrent ? vr_real.cuCtxGetCurrent(&c) : CUDA_ERROR_NOT_INITIALIZED;
    if (r != CUDA_SUCCESS) {
        *ctx = NULL;
        return 0;
    }
    if (!c)
        return vr_err_cu(CUDA_ERROR_INVALID_CONTEXT);
    *ctx = c;
    return 0;
}

void vr_alloc_fallback_once(unsigned bit, const char *what, const char *reason)
{
    if (atomic_fetch_or(&fallback_logged, bit) & bit)
        return;
    vr_log_fallback(what, reason);
}
