#include "alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "err.h"
#include "log.h"
#include "stats.h"

#define VR_MAX_DEVICES 64

static struct vr_config cfg;

/* Sorted by base. Lock order: the registry lock is a leaf. */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct vr_alloc_info *recs;
static size_t nrecs, caprecs;
static uint64_t next_id = 1;
static uint64_t padding_used; /* under reg_lock; observe mode simulates it too */

/* Peers granted access; a bit per device ordinal. */
static _Atomic uint64_t peer_mask;
static _Atomic unsigned peer_generation;

unsigned vr_alloc_peer_generation(void)
{
    return atomic_load_explicit(&peer_generation, memory_order_relaxed);
}

/* Per device: 0 unknown, 1 supported, 2 not supported. */
static _Atomic int vmm_state[VR_MAX_DEVICES];
static _Atomic size_t granularity[VR_MAX_DEVICES];

/* One fallback event per reason: a bit per reason. */
static _Atomic unsigned fallback_logged;

void vr_alloc_configure(const struct vr_config *c)
{
    cfg = *c;
}

static int current_device(CUdevice *dev)
{
    CUresult r = vr_real.cuCtxGetDevice ? vr_real.cuCtxGetDevice(dev) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    if (*dev < 0 || *dev >= VR_MAX_DEVICES)
        return -ERANGE;
    return 0;
}

static void device_prop(CUmemAllocationProp *prop, CUdevice dev)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
}

/* Asks the driver once per device. */
static size_t device_granularity(CUdevice dev)
{
    int state = atomic_load(&vmm_state[dev]);
    if (state == 0) {
        int supported = 0;
        size_t gran = 0;
        if (vr_real.cuDeviceGetAttribute &&
            vr_real.cuDeviceGetAttribute(&supported,
                CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS)
            supported = 0;
        if (supported && vr_real.cuMemGetAllocationGranularity) {
            CUmemAllocationProp prop;
            device_prop(&prop, dev);
            if (vr_real.cuMemGetAllocationGranularity(&gran, &prop,
                    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS || gran == 0)
                supported = 0;
        }
        atomic_store(&granularity[dev], supported ? gran : 0);
        atomic_store(&vmm_state[dev], supported ? 1 : 2);
        state = supported ? 1 : 2;
    }
    return state == 1 ? atomic_load(&granularity[dev]) : 0;
}

size_t vr_alloc_granularity(void)
{
    CUdevice dev;
    return current_device(&dev) == 0 ? device_granularity(dev) : 0;
}

bool vr_alloc_vmm_supported(void)
{
    return vr_alloc_granularity() != 0;
}

static void log_fallback(unsigned bit, const char *what, const char *reason)
{
    vr_stat_inc(VR_C_vmm_fallbacks);
    if (atomic_fetch_or(&fallback_logged, bit) & bit)
        return;
    char buf[512];
    struct vr_jw w;
    vr_jw_begin(&w, buf, sizeof buf, "fallback");
    vr_jw_str(&w, "what", what);
    vr_jw_str(&w, "reason", reason);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* Registry (callers hold reg_lock for writing). */
static size_t upper_bound(CUdeviceptr addr)
{
    size_t lo = 0, hi = nrecs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (recs[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int insert_locked(struct vr_alloc_info *rec)
{
    if (nrecs == caprecs) {
        size_t cap = caprecs ? caprecs * 2 : 256;
        struct vr_alloc_info *grown = realloc(recs, cap * sizeof *recs);
        if (!grown)
            return -ENOMEM;
        recs = grown;
        caprecs = cap;
    }
    size_t at = upper_bound(rec->base);
    memmove(&recs[at + 1], &recs[at], (nrecs - at) * sizeof *recs);
    if (rec->id == 0)
        rec->id = next_id++;
    recs[at] = *rec;
    nrecs++;
    return 0;
}

int vr_alloc_find(CUdeviceptr addr, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&reg_lock);
    size_t at = upper_bound(addr);
    if (at > 0 && addr - recs[at - 1].base < recs[at - 1].size) {
        *out = recs[at - 1];
        rc = 0;
    }
    pthread_rwlock_unlock(&reg_lock);
    return rc;
}

int vr_alloc_detach(CUdeviceptr base, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_wrlock(&reg_lock);
    size_t at = upper_bound(base);
    if (at > 0 && base - recs[at - 1].base < recs[at - 1].size) {
        if (recs[at - 1].base != base) {
            rc = -EINVAL;
        } else {
            *out = recs[at - 1];
            memmove(&recs[at - 1], &recs[at], (nrecs - at) * sizeof *recs);
            nrecs--;
            if (out->vmm || out->eligible)
                padding_used -= out->padded - out->size;
            rc = 0;
        }
    }
    pthread_rwlock_unlock(&reg_lock);
    return rc;
}

void vr_alloc_reattach(const struct vr_alloc_info *rec)
{
    struct vr_alloc_info copy = *rec;
    pthread_rwlock_wrlock(&reg_lock);
    if (insert_locked(&copy) == 0 && (copy.vmm || copy.eligible))
        padding_used += copy.padded - copy.size;
    pthread_rwlock_unlock(&reg_lock);
}

/* Reserves the padding budget up front so concurrent allocations cannot
 * overshoot it together. */
static bool take_padding(uint64_t pad)
{
    bool ok;
    pthread_rwlock_wrlock(&reg_lock);
    ok = padding_used + pad <= cfg.max_padding;
    if (ok)
        padding_used += pad;
    pthread_rwlock_unlock(&reg_lock);
    return ok;
}

static void give_padding(uint64_t pad)
{
    pthread_rwlock_wrlock(&reg_lock);
    padding_used -= pad;
    pthread_rwlock_unlock(&reg_lock);
}

static size_t access_for(CUdevice dev, CUmemAccessDesc *desc, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[n].location.id = dev;
    desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    n++;
    uint64_t peers = atomic_load(&peer_mask);
    for (int d = 0; d < VR_MAX_DEVICES && n < cap; d++) {
        if (d == dev || !(peers & (UINT64_C(1) << d)))
            continue;
        desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc[n].location.id = d;
        desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        n++;
    }
    return n;
}

size_t vr_alloc_access_for(int device, CUmemAccessDesc *desc, size_t cap)
{
    (void)device;
    return vr_alloc_access(desc, cap);
}

size_t vr_alloc_access(CUmemAccessDesc *desc, size_t cap)
{
    CUdevice dev;
    return current_device(&dev) == 0 ? access_for(dev, desc, cap) : 0;
}

/* Returns 0 and fills rec, or the step that failed with its driver error. */
enum { FB_NO_VMM = 1, FB_PADDING = 2, FB_RESERVE = 4, FB_CREATE = 8, FB_MAP = 16, FB_ACCESS = 32,
       FB_TRACK = 64 };

static int vmm_create(CUdevice dev, size_t size, size_t padded, struct vr_alloc_info *rec,
                      const char **step, unsigned *bit)
{
    CUmemAllocationProp prop;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    CUmemAccessDesc access[VR_MAX_DEVICES];
    size_t gran = device_granularity(dev);
    CUresult r;

    device_prop(&prop, dev);
    *step = "cuMemAddressReserve";
    *bit = FB_RESERVE;
    r = vr_real.cuMemAddressReserve(&va, padded, gran, 0, 0);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    *step = "cuMemCreate";
    *bit = FB_CREATE;
    r = vr_real.cuMemCreate(&h, padded, &prop, 0);
    if (r != CUDA_SUCCESS)
        goto free_va;
    *step = "cuMemMap";
    *bit = FB_MAP;
    r = vr_real.cuMemMap(va, padded, 0, h, 0);
    if (r != CUDA_SUCCESS)
        goto release;
    *step = "cuMemSetAccess";
    *bit = FB_ACCESS;
    r = vr_real.cuMemSetAccess(va, padded, access, access_for(dev, access, VR_MAX_DEVICES));
    if (r != CUDA_SUCCESS)
        goto unmap;
    rec->base = va;
    rec->size = size;
    rec->padded = padded;
    rec->vmm = true;
    rec->eligible = true;
    rec->handle = h;
    return 0;
unmap:
    vr_real.cuMemUnmap(va, padded);
release:
    vr_real.cuMemRelease(h);
free_va:
    vr_real.cuMemAddressFree(va, padded);
    return vr_err_cu(r);
}

int vr_alloc_create(CUdeviceptr *dptr, size_t size)
{
    struct vr_alloc_info rec = {0};
    CUdevice dev;
    bool want_vmm = cfg.mode == VR_MODE_PROFILED || cfg.mode == VR_MODE_OBSERVE;
    size_t gran = 0;

    /* Only profiling reads the registry: dedup needs no record at all. */
    if (!dptr || !want_vmm)
        return vr_err_cu(vr_real.cuMemAlloc_v2(dptr, size));
    if (want_vmm && size > 0 && size >= cfg.vmm_min_bytes && current_device(&dev) == 0) {
        gran = device_granularity(dev);
        if (gran == 0) {
            if (cfg.mode == VR_MODE_PROFILED)
                log_fallback(FB_NO_VMM, "cuMemAlloc", "device has no VMM support");
        } else {
            size_t padded = (size + gran - 1) / gran * gran;
            if (padded < size || !take_padding(padded - size)) {
                if (cfg.mode == VR_MODE_PROFILED)
                    log_fallback(FB_PADDING, "cuMemAlloc", "VAREMAP_MAX_PADDING exhausted");
            } else if (cfg.mode == VR_MODE_OBSERVE) {
                rec.eligible = true;
                rec.padded = padded;
            } else {
                const char *step = "";
                unsigned bit = 0;
                int rc = vmm_create(dev, size, padded, &rec, &step, &bit);
                if (rc == 0) {
                    pthread_rwlock_wrlock(&reg_lock);
                    rc = insert_locked(&rec);
                    pthread_rwlock_unlock(&reg_lock);
                    if (rc == 0) {
                        vr_stat_add(VR_C_vmm_bytes, (int64_t)padded);
                        vr_stat_add(VR_C_padding_bytes, (int64_t)(padded - size));
                        *dptr = rec.base;
                        return 0;
                    }
                    vr_alloc_release(&rec);
                    log_fallback(FB_TRACK, "cuMemAlloc", "registry out of memory");
                } else {
                    char reason[160];
                    snprintf(reason, sizeof reason, "%s: %s", step, vr_cu_name(vr_err_to_cu(rc)));
                    log_fallback(bit, "cuMemAlloc", reason);
                }
                give_padding(padded - size);
                memset(&rec, 0, sizeof rec);
            }
        }
    }

    CUdeviceptr p = 0;
    CUresult r = vr_real.cuMemAlloc_v2(&p, size);
    if (r != CUDA_SUCCESS) {
        if (rec.eligible)
            give_padding(rec.padded - size);
        return vr_err_cu(r);
    }
    rec.base = p;
    rec.size = size;
    if (!rec.eligible)
        rec.padded = size;
    pthread_rwlock_wrlock(&reg_lock);
    int rc = insert_locked(&rec);
    pthread_rwlock_unlock(&reg_lock);
    if (rc != 0 && rec.eligible)
        give_padding(rec.padded - size);
    /* An untracked native allocation still works; it is just never a candidate. */
    *dptr = p;
    return 0;
}

int vr_alloc_release(const struct vr_alloc_info *rec)
{
    if (!rec->vmm)
        return vr_err_cu(vr_real.cuMemFree_v2(rec->base));
    CUresult r = vr_real.cuMemUnmap(rec->base, rec->padded);
    CUresult r2 = vr_real.cuMemRelease(rec->handle);
    CUresult r3 = vr_real.cuMemAddressFree(rec->base, rec->padded);
    vr_stat_add(VR_C_vmm_bytes, -(int64_t)rec->padded);
    vr_stat_add(VR_C_padding_bytes, -(int64_t)(rec->padded - rec->size));
    if (r == CUDA_SUCCESS)
        r = r2;
    if (r == CUDA_SUCCESS)
        r = r3;
    return vr_err_cu(r);
}

void vr_alloc_peer_enabled(CUcontext peer)
{
    CUdevice dev = -1;
    if (vr_real.cuCtxPushCurrent_v2(peer) != CUDA_SUCCESS)
        return;
    CUresult r = vr_real.cuCtxGetDevice(&dev);
    CUcontext popped;
    vr_real.cuCtxPopCurrent_v2(&popped);
    if (r != CUDA_SUCCESS || dev < 0 || dev >= VR_MAX_DEVICES)
        return;
    atomic_fetch_or(&peer_mask, UINT64_C(1) << dev);
    atomic_fetch_add(&peer_generation, 1);

    /* Existing VMM allocations: copy the list out so no driver call runs under the lock. */
    pthread_rwlock_rdlock(&reg_lock);
    size_t n = 0;
    struct { CUdeviceptr base; size_t padded; } *todo = malloc((nrecs + 1) * sizeof *todo);
    for (size_t i = 0; todo && i < nrecs; i++)
        if (recs[i].vmm) {
            todo[n].base = recs[i].base;
            todo[n].padded = recs[i].padded;
            n++;
        }
    pthread_rwlock_unlock(&reg_lock);
    CUmemAccessDesc access[VR_MAX_DEVICES];
    size_t na = vr_alloc_access(access, VR_MAX_DEVICES);
    for (size_t i = 0; i < n; i++)
        vr_real.cuMemSetAccess(todo[i].base, todo[i].padded, access, na);
    free(todo);
}
