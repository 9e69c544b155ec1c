/* alloc: cuMemAlloc served by VMM backing when it pays (alloc.h), the
 * free-memory estimate, the reclaim after an out-of-memory, exit and fork.
 *
 * The other rooms of the allocation layer are listed in alloc_int.h. The
 * layer calls nothing above it: the exec layer learns of freed allocations
 * through the one observer it registers (vr_alloc_observe_free, kept in
 * alloc_state.c with the layer's settings: the rooms below read them there).
 */
#include "alloc_int.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "graph_rec.h"
#include "err.h"
#include "log.h"
#include "stats.h"
#include "waitq.h"

/* Candidates between two cuMemGetInfo calls at most. */
#define MEM_REFRESH_EVERY 64u
/* An allocation this large next to the estimated free memory asks again. */
#define MEM_REFRESH_SHARE 8u

/* Per device: estimated free bytes (-1: ask the driver), candidates since. */
static _Atomic long long mem_free[VR_MAX_DEVICES];
static _Atomic unsigned mem_since[VR_MAX_DEVICES];

void vr_alloc_configure(const struct vr_config *c)
{
    vr_alloc_cfg = *c;
    for (int d = 0; d < VR_MAX_DEVICES; d++)
        atomic_store(&mem_free[d], -1);
}


CUcontext vr_alloc_current_context(void)
{
    CUcontext c = NULL;
    if (!vr_real.cuCtxGetCurrent || vr_real.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
        return NULL;
    return c;
}

void vr_alloc_fallback(unsigned bit, const char *reason)
{
    vr_stat_inc(VR_C_vmm_fallbacks);
    vr_alloc_fallback_once(bit, "cuMemAlloc", reason);
}

/* ---- free memory ---------------------------------------------------------- */

/* Whether `dev` keeps at least VAREMAP_MAX_PADDING free after `bytes` more.
 * The estimate follows the allocations the shim sees; the driver is asked
 * every MEM_REFRESH_EVERY candidates and whenever `bytes` is large next to
 * the estimate. */
static bool memory_allows(CUdevice dev, size_t bytes)
{
    long long est = atomic_load(&mem_free[dev]);
    unsigned since = atomic_fetch_add(&mem_since[dev], 1);
    if (est < 0 || since >= MEM_REFRESH_EVERY ||
        (unsigned long long)est / MEM_REFRESH_SHARE <= bytes) {
        size_t fr = 0, total = 0;
        if (!vr_real.cuMemGetInfo_v2 || vr_real.cuMemGetInfo_v2(&fr, &total) != CUDA_SUCCESS)
            return true; /* cannot tell: the padding budget still bounds the waste */
        /* Kept memory is released for any allocation that needs it. */
        uint64_t idle = vr_cache_idle_bytes(dev);
        fr = fr + idle < fr ? SIZE_MAX : fr + idle;
        est = fr > (size_t)LLONG_MAX ? LLONG_MAX : (long long)fr;
        atomic_store(&mem_free[dev], est);
        atomic_store(&mem_since[dev], 0);
    }
    return (unsigned long long)est >= bytes &&
           (unsigned long long)est - bytes >= vr_alloc_cfg.max_padding;
}

void vr_alloc_memory_used(int dev, long long delta)
{
    if (!vr_vmm_valid_device(dev))
        return;
    long long est = atomic_load(&mem_free[dev]);
    while (est >= 0) {
        long long next = est - delta < 0 ? 0 : est - delta;
        if (atomic_compare_exchange_weak(&mem_free[dev], &est, next))
            break;
    }
}

/* ---- allocation ----------------------------------------------------------- */

/* Returns 0 and fills rec, or the driver error of the step that failed
 * (*step, *bit say which). Whatever could not be undone is parked. */
static int vmm_create(CUdevice dev, size_t size, size_t padded, struct vr_alloc_info *rec,
                      const char **step, unsigned *bit)
{
    CUmemAllocationProp prop;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    CUmemAccessDesc access[VR_MAX_DEVICES];
    size_t gran = vr_alloc_granularity_for(dev);
    /* the guard gaps, one below and one after: see alloc.h */
    size_t reserved = padded + gran;
    struct parked undo = { .rec = { .padded = padded, .reserved = reserved, .lead = gran,
                                    .size = size, .device = dev } };
    CUresult r;

    if (reserved < padded || reserved + gran < reserved)
        return -EOVERFLOW;
    vr_vmm_device_prop(&prop, dev);
    *step = "cuMemAddressReserve";
    *bit = FB_RESERVE;
    r = vr_real.cuMemAddressReserve(&va, gran + reserved, gran, 0, 0);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    va += gran;
    undo.rec.base = va;
    undo.steps = STEP_ADDRESS_FREE;
    *step = "cuMemCreate";
    *bit = FB_CREATE;
    /* Exportable (cuIpcGetMemHandle, alloc_ipc.c) where the device can;
     * a refusal other than out of memory is asked again without, once. */
    if (vr_vmm_shareable(dev))
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    r = vr_real.cuMemCreate(&h, padded, &prop, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY && prop.requestedHandleTypes) {
        vr_vmm_unshareable(dev);
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        r = vr_real.cuMemCreate(&h, padded, &prop, 0);
    }
    if (r != CUDA_SUCCESS)
        goto undo;
    undo.rec.handle = h;
    undo.steps |= STEP_RELEASE;
    *step = "cuMemMap";
    *bit = FB_MAP;
    r = vr_real.cuMemMap(va, padded, 0, h, 0);
    if (r != CUDA_SUCCESS)
        goto undo;
    undo.steps |= STEP_UNMAP;
    *step = "cuMemSetAccess";
    *bit = FB_ACCESS;
    r = vr_real.cuMemSetAccess(va, padded, access, vr_alloc_access_for(dev, access, VR_MAX_DEVICES));
    if (r != CUDA_SUCCESS)
        goto undo;
    *rec = (struct vr_alloc_info){ .base = va, .size = size, .padded = padded,
                                   .reserved = reserved, .lead = gran, .device = dev, .vmm = true,
                                   .eligible = true, .handle = h,
                                   .shareable = prop.requestedHandleTypes != 0 };
    return 0;
undo:
    vr_park_release(&undo, false, 0);
    return vr_err_cu(r);
}

/* A peer enabled while the access list was being built: grant again. */
static void reaccess_if_changed(const struct vr_alloc_info *rec, unsigned gen)
{
    if (vr_alloc_peer_generation() == gen)
        return;
    CUmemAccessDesc access[VR_MAX_DEVICES];
    vr_real.cuMemSetAccess(rec->base, rec->padded, access,
                           vr_alloc_access_for(rec->device, access, VR_MAX_DEVICES));
}

/* Serves an allocation from the cache with no VMM call: of the freed
 * buffer's size, the freed buffer itself (its id), else a new one (a new
 * id). 0 with *dptr set, or nonzero. */
static int reuse(CUdevice dev, size_t size, size_t padded, CUdeviceptr *dptr)
{
    struct kept k;
    if (vr_cache_take(dev, padded, &k) != 0)
        return -ENOENT;
    VR_ASSERT(!k.done && !k.wait && k.rec.padded == padded); /* idle only (alloc_cache.c) */
    struct vr_alloc_info rec = k.rec;
    /* The same size: the same buffer back (its id, its handle, its bytes at
     * its address), so slots and variants still bound to it stay valid.
     * Another size names other words: a new buffer, and the cached one's
     * id is gone for good. */
    if (size != k.rec.size) {
        vr_alloc_tell_freed(k.rec.id, false);
        rec.id = 0;
    }
    rec.serial = 0; /* a new allocation for the program all the same */
    rec.size = size;
    rec.ctx = vr_alloc_current_context();
    int rc = -ENOSPC;
    if (vr_reg_take_padding(padded - size)) {
        rc = vr_reg_insert(&rec);
        if (rc != 0)
            vr_reg_give_padding(padded - size);
    }
    if (rc != 0) {
        if (!vr_cache_put(&k.rec, k.ctx, NULL, k.gen))
            vr_cache_release_kept(&k, false);
        return rc;
    }
    /* A peer enabled since the free (checked once the record is visible to
     * vr_alloc_enable_peer): grant it too. */
    reaccess_if_changed(&rec, k.gen);
    vr_stat_inc(VR_C_vmm_cache_hits);
    vr_stat_add(VR_C_vmm_bytes, (int64_t)padded);
    vr_stat_add(VR_C_padding_bytes, (int64_t)(padded - size));
    vr_alloc_memory_used(dev, (long long)padded);
    *dptr = rec.base;
    return 0;
}

/* Tries VMM backing; 0 with *dptr set, or nonzero to go native. */
static int try_vmm(CUdevice dev, size_t size, size_t padded, CUdeviceptr *dptr)
{
    struct vr_alloc_info rec;
    const char *step = "";
    unsigned bit = 0;
    unsigned gen = vr_alloc_peer_generation();
    if (vr_alloc_cfg.vmm_cache)
        vr_stat_inc(VR_C_vmm_cache_misses);
    int rc = vmm_create(dev, size, padded, &rec, &step, &bit);
    /* Out of memory while the cache keeps some: it goes first. */
    if (rc != 0 && vr_err_to_cu(rc) == CUDA_ERROR_OUT_OF_MEMORY && vr_cache_release(dev, false) > 0)
        rc = vmm_create(dev, size, padded, &rec, &step, &bit);
    if (rc != 0) {
        char reason[160];
        snprintf(reason, sizeof reason, "%s: %s", step, vr_cu_name(vr_err_to_cu(rc)));
        vr_alloc_fallback(bit, reason);
        if (vr_err_to_cu(rc) == CUDA_ERROR_OUT_OF_MEMORY)
            atomic_store(&mem_free[dev], -1); /* ask again next time */
        return rc;
    }
    VR_ASSERT(rec.padded == padded && rec.reserved > padded && rec.vmm);
    rec.ctx = vr_alloc_current_context();
    rc = vr_reg_insert(&rec);
    if (rc != 0) {
        struct parked undo = { .rec = rec,
                               .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
        vr_park_release(&undo, false, 0);
        vr_alloc_fallback(FB_TRACK, "registry out of memory");
        return rc;
    }
    reaccess_if_changed(&rec, gen);
    vr_stat_add(VR_C_vmm_bytes, (int64_t)padded);
    vr_stat_add(VR_C_padding_bytes, (int64_t)(padded - size));
    vr_alloc_memory_used(dev, (long long)padded);
    *dptr = rec.base;
    return 0;
}

int vr_alloc_create(CUdeviceptr *dptr, size_t size)
{
    struct vr_alloc_info rec = { .device = -1 };
    CUdevice dev = -1;
    bool profiled = vr_alloc_cfg.mode == VR_MODE_PROFILED;

    /* Only profiling reads the registry: dedup needs no record at all. */
    if (!dptr || !(profiled || vr_alloc_cfg.mode == VR_MODE_OBSERVE))
        return vr_err_cu(vr_real.cuMemAlloc_v2(dptr, size));
    vr_park_drain(false);
    if (vr_vmm_current_device(&dev) == 0)
        rec.device = dev;
    /* During a capture, a thread not relaxed may be refused cuMemAlloc while
     * the VMM calls that would serve it are allowed (measured on an H200):
     * the native call, so that the driver answers, and invalidates the
     * capture, itself. Allowed after all (a capture that prohibits nothing
     * here): a native allocation, never a candidate. */
    bool vmm_ok = !vr_grec_capturing() || vr_capture_thread_relaxed();
    bool wants_vmm = vmm_ok && rec.device >= 0 && size > 0 && size >= vr_alloc_cfg.vmm_min_bytes;
    size_t gran = wants_vmm ? vr_alloc_granularity_for(dev) : 0;
    if (wants_vmm && gran == 0 && profiled)
        vr_alloc_fallback(FB_NO_VMM, "device has no VMM support");
    if (gran != 0) {
        size_t padded = (size + gran - 1) / gran * gran;
        size_t pad = padded - size;
        VR_ASSERT(padded < size || padded % gran == 0);
        /* Too much padding for its size: served natively, by design. */
        bool fits = padded >= size && (double)pad <= vr_alloc_cfg.max_padding_ratio * (double)size;
        if (fits && profiled && reuse(dev, size, padded, dptr) == 0)
            return 0;
        if (fits && profiled && !memory_allows(dev, padded)) {
            vr_alloc_fallback(FB_LOW_MEMORY, "free memory below VAREMAP_MAX_PADDING");
            fits = false;
        }
        if (fits && !vr_reg_take_padding(pad)) {
            if (profiled)
                vr_alloc_fallback(FB_PADDING, "VAREMAP_MAX_PADDING exhausted");
            fits = false;
        }
        if (fits && profiled) {
            if (try_vmm(dev, size, padded, dptr) == 0)
                return 0;
            vr_reg_give_padding(pad);
        } else if (fits) {
            rec.eligible = true; /* observe: what profiled would have done */
            rec.padded = padded;
        }
    }

    CUdeviceptr p = 0;
    CUresult r = vr_real.cuMemAlloc_v2(&p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && vr_cache_release(rec.device, false) > 0)
        r = vr_real.cuMemAlloc_v2(&p, size);
    if (r != CUDA_SUCCESS) {
        if (rec.eligible)
            vr_reg_give_padding(rec.padded - size);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && rec.device >= 0)
            atomic_store(&mem_free[rec.device], -1);
        return vr_err_cu(r);
    }
    rec.base = p;
    rec.size = size;
    rec.reserved = size;
    if (!rec.eligible)
        rec.padded = size;
    int rc = vr_reg_insert(&rec);
    if (rc != 0 && rec.eligible)
        vr_reg_give_padding(rec.padded - size);
    vr_alloc_memory_used(rec.device, (long long)size);
    /* An untracked native allocation still works; it is just never a candidate. */
    *dptr = p;
    return 0;
}

/* ---- out of memory, exit, fork ---- */

bool vr_alloc_reclaim(void)
{
    return vr_cache_release(-1, false) > 0;
}

void vr_alloc_drain(void)
{
    atomic_store_explicit(&vr_alloc_closed, true, memory_order_release);
    vr_cache_release(-1, true);
    /* The reminders of what the cache just released, and any entry a
     * thread's settle held busy meanwhile. */
    vr_waitq_drain(VR_WAIT_MASK(VR_WAIT_CACHE), VR_WAIT_FINAL);
    vr_park_drain(true);
}

/* The cache's entries before its reminders: a listed entry's reminder
 * stays counted on the queue (alloc_cache.c). */
void vr_alloc_abandon(void)
{
    atomic_store_explicit(&vr_alloc_closed, true, memory_order_release);
    vr_cache_abandon();
    vr_waitq_abandon(VR_WAIT_MASK(VR_WAIT_RELEASE) | VR_WAIT_MASK(VR_WAIT_CACHE));
}

/* Memory kept or parked by the parent is the parent's to release. */
void vr_alloc_after_fork(void)
{
    vr_reg_after_fork();
    vr_cache_after_fork();
    vr_alloc_ipc_after_fork();
    vr_waitq_after_fork(VR_WAIT_MASK(VR_WAIT_RELEASE) | VR_WAIT_MASK(VR_WAIT_CACHE));
}
