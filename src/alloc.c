#include "alloc.h"

#include <assert.h> /* src/assert.h: VR_ASSERT */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture_guard.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "log.h"
#include "stats.h"

#define VR_MAX_DEVICES 64
/* Candidates between two cuMemGetInfo calls at most. */
#define MEM_REFRESH_EVERY 64u
/* An allocation this large next to the estimated free memory asks again. */
#define MEM_REFRESH_SHARE 8u

static struct vr_config cfg;

/* Sorted by base; records never overlap (VMM ones over their whole
 * reservation). A leaf lock. */
static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct vr_alloc_info *recs;
static size_t nrecs, caprecs;
static uint64_t next_id = 1;
static uint64_t padding_used; /* under reg_lock; observe mode simulates it too */

/* peer_access[D]: a bit per device E that enabled peer access to D. */
static _Atomic uint64_t peer_access[VR_MAX_DEVICES];
static _Atomic unsigned peer_generation;

/* Per device: 0 unknown, 1 supported, 2 not supported. */
static _Atomic int vmm_state[VR_MAX_DEVICES];
static _Atomic size_t granularity[VR_MAX_DEVICES];

/* Per device: estimated free bytes (-1: ask the driver), candidates since. */
static _Atomic long long mem_free[VR_MAX_DEVICES];
static _Atomic unsigned mem_since[VR_MAX_DEVICES];

/* One fallback event per reason: a bit per reason. */
static _Atomic unsigned fallback_logged;

enum {
    FB_NO_VMM = 1u << 0, FB_PADDING = 1u << 1, FB_RESERVE = 1u << 2, FB_CREATE = 1u << 3,
    FB_MAP = 1u << 4, FB_ACCESS = 1u << 5, FB_TRACK = 1u << 6, FB_LOW_MEMORY = 1u << 7,
    FB_SYNC = 1u << 8, FB_UNMAP = 1u << 9, FB_RELEASE = 1u << 10, FB_ADDRESS_FREE = 1u << 11,
    FB_EVENT = 1u << 12,
};

/* Memory the program freed that the shim has not yet returned. */
enum {
    STEP_SYNC = 1, STEP_UNMAP = 2, STEP_RELEASE = 4, STEP_ADDRESS_FREE = 8,
    STEP_EVENT = 16,        /* wait until `done` completed (a stream-ordered free) */
    STEP_EVENT_DESTROY = 32,
};
struct parked {
    struct vr_alloc_info rec;
    CUcontext ctx;   /* to synchronize before unmapping (STEP_SYNC) */
    CUevent done;    /* recorded after the stream's work that may use the memory */
    unsigned steps;  /* still to do */
};
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static struct parked *parked;
static size_t nparked, capparked;
static _Atomic size_t parked_hint; /* nparked, read without the lock */

/* Freed VMM memory kept mapped for reuse (VAREMAP_VMM_CACHE): reservation,
 * handle and access stay as they were. */
struct kept {
    struct vr_alloc_info rec; /* as freed; base, padded, reserved, device, handle matter */
    CUcontext ctx;            /* for a release that must synchronize */
    CUevent done;             /* a stream-ordered free not yet seen complete; NULL: idle */
    unsigned gen;             /* peer generation read before the free: access reflects it */
    uint64_t age;             /* the oldest goes first when the budget is full */
    unsigned seen;            /* the last settle that queried its event */
    bool busy;                /* its event is being queried: nobody else touches it */
};
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static struct kept *kept;
static size_t nkept, capkept;
static uint64_t kept_bytes, kept_age; /* under cache_lock */
static unsigned settle_epoch;         /* under cache_lock */
static _Atomic size_t kept_hint;      /* nkept, read without the lock */
/* Set by the exit work: a free after it (a program's exit handler that
 * runs later) keeps nothing, as nothing would release it any more. */
static atomic_bool closed;

void vr_alloc_configure(const struct vr_config *c)
{
    cfg = *c;
    for (int d = 0; d < VR_MAX_DEVICES; d++)
        atomic_store(&mem_free[d], -1);
}

unsigned vr_alloc_peer_generation(void)
{
    return atomic_load_explicit(&peer_generation, memory_order_acquire);
}

static bool valid_device(int dev)
{
    return dev >= 0 && dev < VR_MAX_DEVICES;
}

static int current_device(CUdevice *dev)
{
    CUresult r = vr_real.cuCtxGetDevice ? vr_real.cuCtxGetDevice(dev) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    return valid_device(*dev) ? 0 : -ERANGE;
}

static CUcontext current_context(void)
{
    CUcontext c = NULL;
    if (!vr_real.cuCtxGetCurrent || vr_real.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
        return NULL;
    return c;
}

/* The driver's answer for a call that needs a current context, asked before
 * the shim touches anything. A query that fails is the shim's own call, not
 * the program's: then *ctx is NULL and the calls that follow (a synchronize
 * first) give the driver's answer about the context. */
static int need_context(CUcontext *ctx)
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

/* Errors a synchronize returns because of the program's own context or
 * stream, which the native free would return too. */
static bool programs_error(CUresult r)
{
    /* STREAM_CAPTURE_UNSUPPORTED: the program's call is prohibited during a
     * capture (capture_guard.h); the native one would be refused too. */
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_CONTEXT_IS_DESTROYED ||
           r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE ||
           r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED ||
           r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* After cuCtxSynchronize failed (`r`) for a reason that is not the
 * program's: the driver's own free of a scrap allocation waits for the
 * context's work as the program's free would have. Returns r when it
 * could not be made, so the memory stays mapped until a later wait. */
static CUresult wait_by_native_free(CUresult r)
{
    CUdeviceptr scrap = 0;
    if (programs_error(r) || vr_real.cuMemAlloc_v2(&scrap, 1) != CUDA_SUCCESS)
        return r;
    return vr_real.cuMemFree_v2(scrap) == CUDA_SUCCESS ? CUDA_SUCCESS : r;
}

/* Waits for the current context's work, as the native free does before it
 * releases. */
static CUresult wait_for_work(void)
{
    CUresult r = vr_real.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? r : wait_by_native_free(r);
}

static void device_prop(CUmemAllocationProp *prop, CUdevice dev)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
}

/* Asks the driver once per device. */
size_t vr_alloc_granularity_for(int dev)
{
    if (!valid_device(dev))
        return 0;
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
    return current_device(&dev) == 0 ? vr_alloc_granularity_for(dev) : 0;
}

bool vr_alloc_vmm_supported(void)
{
    return vr_alloc_granularity() != 0;
}

static void log_fallback(unsigned bit, const char *what, const char *reason)
{
    if (atomic_fetch_or(&fallback_logged, bit) & bit)
        return;
    vr_log_fallback(what, reason);
}

/* A cuMemAlloc served natively although it was a candidate. */
static void alloc_fallback(unsigned bit, const char *reason)
{
    vr_stat_inc(VR_C_vmm_fallbacks);
    log_fallback(bit, "cuMemAlloc", reason);
}

/* ---- registry (callers hold reg_lock) ---------------------------------- */

static size_t span(const struct vr_alloc_info *r)
{
    return r->vmm ? r->reserved : r->size;
}

/* Index of the first record with base > addr. */
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

/* The record whose [base, base + span) holds addr, or NULL. */
static struct vr_alloc_info *holder(CUdeviceptr addr)
{
    size_t at = upper_bound(addr);
    if (at > 0 && addr - recs[at - 1].base < span(&recs[at - 1]))
        return &recs[at - 1];
    return NULL;
}

static uint64_t padding_of(const struct vr_alloc_info *r);

/* ---- what left the registry (vr_alloc_changed_since) ------------------- */

/* The last VR_ALLOC_CHANGES ranges whose lookups changed, oldest first from
 * changes[changes_gen % VR_ALLOC_CHANGES]. Written under the registry's
 * write lock; changes_gen is bumped there too, and read without a lock by
 * the cheap check. */
static struct vr_alloc_range changes[VR_ALLOC_CHANGES];
static _Atomic uint64_t changes_gen;

static void publish_locked(uint64_t lo, uint64_t hi)
{
    uint64_t g = atomic_load_explicit(&changes_gen, memory_order_relaxed);
    changes[g % VR_ALLOC_CHANGES] = (struct vr_alloc_range){lo, hi};
    atomic_store_explicit(&changes_gen, g + 1, memory_order_release);
}

uint64_t vr_alloc_generation(void)
{
    return atomic_load_explicit(&changes_gen, memory_order_acquire);
}

int vr_alloc_changed_since(uint64_t since, uint64_t *now, struct vr_alloc_range *out)
{
    if (vr_alloc_generation() == since) {
        *now = since;
        return 0;
    }
    pthread_rwlock_rdlock(&reg_lock);
    uint64_t g = atomic_load_explicit(&changes_gen, memory_order_relaxed);
    int n = -ENOBUFS;
    if (g - since <= VR_ALLOC_CHANGES) {
        n = (int)(g - since);
        for (int i = 0; i < n; i++)
            out[i] = changes[(since + (uint64_t)i) % VR_ALLOC_CHANGES];
    }
    pthread_rwlock_unlock(&reg_lock);
    *now = g;
    return n;
}

static void remove_at_locked(size_t at)
{
    /* A word naming this allocation, its end included, names another or
     * none from now on; an end where the next record starts named that one
     * and still does. */
    uint64_t end = recs[at].base + recs[at].size;
    publish_locked(recs[at].base, at + 1 < nrecs && recs[at + 1].base == end ? end : end + 1);
    uint64_t pad = padding_of(&recs[at]);
    VR_ASSERT(pad <= padding_used);
    padding_used -= pad <= padding_used ? pad : padding_used;
    memmove(&recs[at], &recs[at + 1], (nrecs - at - 1) * sizeof *recs);
    nrecs--;
}

/* The driver just handed out rec's range, so a record overlapping it is
 * stale: its memory went without a free the shim saw (a destroyed context
 * frees its allocations). It is dropped. */
static int insert_locked(struct vr_alloc_info *rec)
{
    size_t at = upper_bound(rec->base);
    while (at > 0 && recs[at - 1].base + span(&recs[at - 1]) > rec->base)
        remove_at_locked(--at);
    while (at < nrecs && recs[at].base < rec->base + span(rec))
        remove_at_locked(at);
    if (nrecs == caprecs) {
        size_t cap = caprecs ? caprecs * 2 : 256;
        struct vr_alloc_info *grown = realloc(recs, cap * sizeof *recs);
        if (!grown)
            return -ENOMEM;
        recs = grown;
        caprecs = cap;
    }
    memmove(&recs[at + 1], &recs[at], (nrecs - at) * sizeof *recs);
    if (rec->id == 0)
        rec->id = next_id++;
    recs[at] = *rec;
    nrecs++;
    /* A word at the end of the record before named that one until now. */
    if (at > 0 && recs[at - 1].base + recs[at - 1].size == rec->base)
        publish_locked(rec->base, rec->base + 1);
    VR_ASSERT(at == 0 || recs[at - 1].base + span(&recs[at - 1]) <= rec->base);
    return 0;
}

static uint64_t padding_of(const struct vr_alloc_info *r)
{
    return (r->vmm || r->eligible) ? r->padded - r->size : 0;
}

int vr_alloc_find(CUdeviceptr addr, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&reg_lock);
    const struct vr_alloc_info *r = holder(addr);
    if (r && addr - r->base < r->size) {
        *out = *r;
        rc = 0;
    }
    pthread_rwlock_unlock(&reg_lock);
    return rc;
}

/* Like vr_alloc_find, but addr may lie anywhere in a VMM reservation. */
static int find_span(CUdeviceptr addr, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&reg_lock);
    const struct vr_alloc_info *r = holder(addr);
    if (r) {
        *out = *r;
        rc = 0;
    }
    pthread_rwlock_unlock(&reg_lock);
    return rc;
}

/* Removes the allocation starting at `base`, so no new slice can pick it up. */
static int detach(CUdeviceptr base, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    pthread_rwlock_wrlock(&reg_lock);
    struct vr_alloc_info *r = holder(base);
    if (r && r->base == base) {
        *out = *r;
        remove_at_locked((size_t)(r - recs));
        rc = 0;
    }
    pthread_rwlock_unlock(&reg_lock);
    return rc;
}

static void reattach(const struct vr_alloc_info *rec)
{
    struct vr_alloc_info copy = *rec;
    pthread_rwlock_wrlock(&reg_lock);
    if (insert_locked(&copy) == 0)
        padding_used += padding_of(&copy);
    pthread_rwlock_unlock(&reg_lock);
}

/* Reserves the padding budget up front so concurrent allocations cannot
 * overshoot it together. */
static bool take_padding(uint64_t pad)
{
    bool ok;
    pthread_rwlock_wrlock(&reg_lock);
    ok = padding_used + pad >= padding_used && padding_used + pad <= cfg.max_padding;
    if (ok)
        padding_used += pad;
    pthread_rwlock_unlock(&reg_lock);
    return ok;
}

static void give_padding(uint64_t pad)
{
    pthread_rwlock_wrlock(&reg_lock);
    VR_ASSERT(pad <= padding_used);
    padding_used -= pad <= padding_used ? pad : padding_used;
    pthread_rwlock_unlock(&reg_lock);
}

/* ---- access ------------------------------------------------------------- */

size_t vr_alloc_access_for(int dev, CUmemAccessDesc *desc, size_t cap)
{
    size_t n = 0;
    if (cap == 0 || !valid_device(dev))
        return 0;
    desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[n].location.id = dev;
    desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    n++;
    uint64_t peers = atomic_load(&peer_access[dev]);
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

size_t vr_alloc_access(CUmemAccessDesc *desc, size_t cap)
{
    CUdevice dev;
    return current_device(&dev) == 0 ? vr_alloc_access_for(dev, desc, cap) : 0;
}

/* ---- parked memory -------------------------------------------------------- */

/* Physical memory a parked entry could not return (a VA alone is not
 * memory; memory waiting for its stream is on its way, not lost). */
static size_t held(const struct parked *p)
{
    if (p->steps & STEP_EVENT)
        return 0;
    return (p->steps & (STEP_UNMAP | STEP_RELEASE)) ? p->rec.padded : 0;
}

static void park(const struct parked *p)
{
    VR_ASSERT(p->steps != 0);
    pthread_mutex_lock(&park_lock);
    if (nparked == capparked) {
        size_t cap = capparked ? capparked * 2 : 16;
        struct parked *grown = realloc(parked, cap * sizeof *parked);
        if (grown) {
            parked = grown;
            capparked = cap;
        }
    }
    if (nparked < capparked) /* else lost for good: it stays counted */
        parked[nparked++] = *p;
    atomic_store(&parked_hint, nparked);
    pthread_mutex_unlock(&park_lock);
}

static void step_failed(unsigned bit, const char *step, CUresult r, const struct parked *p)
{
    char reason[192];
    snprintf(reason, sizeof reason, "%s: %s; %zu bytes kept, released later", step,
             vr_cu_name(r), p->rec.padded);
    log_fallback(bit, "cuMemFree", reason);
}

/* Does what is left of a release, in an order that never unmaps under a
 * kernel: synchronize (only when allowed to block), unmap, release the
 * handle, free the VA (only once unmapped). Returns the steps still left. */
static unsigned release_steps(struct parked *p, bool may_sync)
{
    const struct vr_alloc_info *rec = &p->rec;
    CUresult r;
    if (p->steps & STEP_EVENT) {
        r = vr_real.cuEventQuery(p->done);
        if (r == CUDA_ERROR_NOT_READY && may_sync)
            r = vr_real.cuEventSynchronize(p->done);
        if (r == CUDA_ERROR_NOT_READY)
            return p->steps;
        /* Done; or the event cannot tell, and the context must (STEP_SYNC). */
        p->steps &= ~(unsigned)STEP_EVENT;
        if (r != CUDA_SUCCESS)
            p->steps |= STEP_SYNC;
    }
    if (p->steps & STEP_EVENT_DESTROY) {
        r = vr_real.cuEventDestroy_v2(p->done);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_EVENT_DESTROY;
        else
            log_fallback(FB_EVENT, "cuMemFreeAsync", "cuEventDestroy failed; retried later");
    }
    if (p->steps & STEP_SYNC) {
        if (!may_sync)
            return p->steps;
        /* Without its context (a failed query at free) the current one. */
        r = p->ctx ? vr_real.cuCtxPushCurrent_v2(p->ctx) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS) {
            CUcontext popped;
            r = wait_for_work();
            if (p->ctx)
                vr_real.cuCtxPopCurrent_v2(&popped);
        }
        /* A context that is gone runs no kernel any more. */
        if (r == CUDA_SUCCESS || r == CUDA_ERROR_INVALID_CONTEXT ||
            r == CUDA_ERROR_CONTEXT_IS_DESTROYED)
            p->steps &= ~(unsigned)STEP_SYNC;
        else
            return p->steps;
    }
    if (p->steps & STEP_UNMAP) {
        r = vr_real.cuMemUnmap(rec->base, rec->padded);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_UNMAP;
        else
            step_failed(FB_UNMAP, "cuMemUnmap", r, p);
    }
    if (p->steps & STEP_RELEASE) {
        r = vr_real.cuMemRelease(rec->handle);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_RELEASE;
        else
            step_failed(FB_RELEASE, "cuMemRelease", r, p);
    }
    if ((p->steps & STEP_ADDRESS_FREE) && !(p->steps & STEP_UNMAP)) {
        r = vr_real.cuMemAddressFree(rec->base, rec->reserved);
        if (r == CUDA_SUCCESS)
            p->steps &= ~(unsigned)STEP_ADDRESS_FREE;
        else
            step_failed(FB_ADDRESS_FREE, "cuMemAddressFree", r, p);
    }
    return p->steps;
}

/* Releases what it can or parks the rest; never fails the caller.
 * `counted`: the bytes of p already in vmm_leaked_bytes. */
static void release_or_park(struct parked *p, bool may_sync, size_t counted)
{
    /* The shim's own: a release deferred or undone, whatever call runs it. */
    vr_capture_relax();
    release_steps(p, may_sync);
    vr_capture_restore();
    size_t now = p->steps ? held(p) : 0;
    vr_stat_add(VR_C_vmm_leaked_bytes, (int64_t)now - (int64_t)counted);
    if (p->steps)
        park(p);
}

/* Retries every parked release. Entries are taken out of the list first, so
 * no lock is held across a driver call and two threads never retry the same
 * one. */
static void drain(bool may_sync)
{
    if (atomic_load_explicit(&parked_hint, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&park_lock);
    struct parked *mine = parked;
    size_t n = nparked;
    parked = NULL;
    nparked = capparked = 0;
    atomic_store(&parked_hint, 0);
    pthread_mutex_unlock(&park_lock);
    for (size_t i = 0; i < n; i++)
        release_or_park(&mine[i], may_sync, held(&mine[i]));
    free(mine);
}

/* ---- the cache of freed VMM memory -------------------------------------- */

/* An entry is taken out of the list before a release touches it, and
 * marked busy while its event is queried, so no lock is held across a
 * driver call and no two threads ever use the same event. */

static void remove_kept_locked(size_t i)
{
    kept_bytes -= kept[i].rec.padded;
    vr_stat_add(VR_C_vmm_cache_bytes, -(int64_t)kept[i].rec.padded);
    kept[i] = kept[--nkept];
    atomic_store(&kept_hint, nkept);
}

/* Appends k, its bytes already counted; false when the list cannot grow. */
static bool append_kept_locked(const struct kept *k)
{
    if (nkept == capkept) {
        size_t cap = capkept ? capkept * 2 : 16;
        struct kept *grown = realloc(kept, cap * sizeof *kept);
        if (!grown)
            return false;
        kept = grown;
        capkept = cap;
    }
    kept[nkept++] = *k;
    atomic_store(&kept_hint, nkept);
    return true;
}

/* Releases an entry as a freed allocation is released: unmapped only once
 * its free's event completed (waited for only when `may_sync`). Returns
 * whether its memory went back to the driver now. */
static bool release_kept(const struct kept *k, bool may_sync)
{
    struct parked p = { .rec = k->rec, .ctx = k->ctx, .done = k->done,
                        .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
    if (k->done)
        p.steps |= STEP_EVENT | STEP_EVENT_DESTROY;
    release_or_park(&p, may_sync, 0);
    return !(p.steps & (STEP_UNMAP | STEP_RELEASE));
}

/* Keeps a freed allocation (its access set for peer generation `gen`),
 * evicting the oldest entries to stay within VAREMAP_VMM_CACHE. False when
 * the cache is off or it does not fit: the caller releases it. */
static bool cache_put(const struct vr_alloc_info *rec, CUcontext ctx, CUevent done, unsigned gen)
{
    if (rec->padded == 0 || rec->padded > cfg.vmm_cache ||
        atomic_load_explicit(&closed, memory_order_acquire))
        return false;
    struct kept k = { .rec = *rec, .ctx = ctx, .done = done, .gen = gen };
    for (;;) {
        struct kept old;
        bool evict = false, stored = false;
        pthread_mutex_lock(&cache_lock);
        size_t o = nkept;
        if (kept_bytes + rec->padded > cfg.vmm_cache) {
            for (size_t i = 0; i < nkept; i++)
                if (!kept[i].busy && (o == nkept || kept[i].age < kept[o].age))
                    o = i;
        }
        if (o < nkept) {
            old = kept[o];
            remove_kept_locked(o);
            evict = true;
        } else if (kept_bytes + rec->padded <= cfg.vmm_cache) {
            k.age = kept_age++;
            k.seen = settle_epoch;
            stored = append_kept_locked(&k);
            if (stored) {
                kept_bytes += rec->padded;
                vr_stat_add(VR_C_vmm_cache_bytes, (int64_t)rec->padded);
            }
        }
        pthread_mutex_unlock(&cache_lock);
        if (!evict)
            return stored;
        release_kept(&old, false);
    }
}

/* Entries of `dev` (-1: any) and `padded` bytes (0: any) whose
 * stream-ordered free completed become idle; a failed query releases the
 * entry (after a synchronize: its event cannot tell). */
static void cache_settle(int dev, size_t padded)
{
    enum { BATCH = 32 };
    struct { CUdeviceptr base; CUevent done; } mine[BATCH];
    pthread_mutex_lock(&cache_lock);
    unsigned epoch = ++settle_epoch;
    pthread_mutex_unlock(&cache_lock);
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&cache_lock);
        for (size_t i = 0; i < nkept && n < BATCH; i++) {
            struct kept *k = &kept[i];
            if (k->done && !k->busy && k->seen != epoch && (dev < 0 || k->rec.device == dev) &&
                (padded == 0 || k->rec.padded == padded)) {
                k->busy = true;
                k->seen = epoch;
                mine[n].base = k->rec.base;
                mine[n++].done = k->done;
            }
        }
        pthread_mutex_unlock(&cache_lock);
        if (n == 0)
            return;
        for (size_t j = 0; j < n; j++) {
            vr_capture_relax();
            CUresult r = vr_real.cuEventQuery(mine[j].done);
            CUresult d = r == CUDA_SUCCESS ? vr_real.cuEventDestroy_v2(mine[j].done) : r;
            vr_capture_restore();
            if (r == CUDA_SUCCESS && d != CUDA_SUCCESS)
                log_fallback(FB_EVENT, "cuMemFreeAsync", "cuEventDestroy failed");
            struct kept bad;
            bool failed = false;
            pthread_mutex_lock(&cache_lock);
            for (size_t i = 0; i < nkept; i++) {
                if (kept[i].rec.base != mine[j].base)
                    continue;
                kept[i].busy = false; /* busy entries stay where they are */
                if (r == CUDA_SUCCESS) {
                    kept[i].done = NULL;
                } else if (r != CUDA_ERROR_NOT_READY) {
                    bad = kept[i];
                    remove_kept_locked(i);
                    failed = true;
                }
                break;
            }
            pthread_mutex_unlock(&cache_lock);
            if (failed)
                release_kept(&bad, false);
        }
    }
}

/* Takes an idle entry of `dev` with `padded` bytes out of the cache:
 * 0, or -ENOENT. */
static int cache_take(int dev, size_t padded, struct kept *out)
{
    for (int round = 0; round < 2; round++) {
        if (atomic_load_explicit(&kept_hint, memory_order_relaxed) == 0)
            return -ENOENT;
        bool pending = false;
        pthread_mutex_lock(&cache_lock);
        for (size_t i = nkept; i-- > 0;) {
            if (kept[i].rec.device != dev || kept[i].rec.padded != padded)
                continue;
            if (kept[i].done || kept[i].busy) {
                pending = pending || !kept[i].busy;
                continue;
            }
            *out = kept[i];
            remove_kept_locked(i);
            pthread_mutex_unlock(&cache_lock);
            return 0;
        }
        pthread_mutex_unlock(&cache_lock);
        if (!pending)
            break;
        cache_settle(dev, padded);
    }
    return -ENOENT;
}

/* Releases the entries of `dev` (-1: all). Returns the bytes that went
 * back to the driver now (entries whose stream is still busy go later). */
static uint64_t cache_release(int dev, bool may_sync)
{
    uint64_t back = 0;
    while (atomic_load_explicit(&kept_hint, memory_order_relaxed) != 0) {
        struct kept k;
        bool found = false;
        pthread_mutex_lock(&cache_lock);
        for (size_t i = 0; i < nkept; i++)
            if (!kept[i].busy && (dev < 0 || kept[i].rec.device == dev)) {
                k = kept[i];
                remove_kept_locked(i);
                found = true;
                break;
            }
        pthread_mutex_unlock(&cache_lock);
        if (!found)
            break;
        if (release_kept(&k, may_sync))
            back += k.rec.padded;
    }
    return back;
}

/* Idle cached bytes of `dev`: free memory as far as the program can tell. */
static uint64_t cache_idle_bytes(int dev)
{
    uint64_t n = 0;
    if (atomic_load_explicit(&kept_hint, memory_order_relaxed) == 0)
        return 0;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < nkept; i++)
        if (kept[i].rec.device == dev && !kept[i].done)
            n += kept[i].rec.padded;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

/* Whether addr lies in memory the cache keeps: freed, as far as the
 * program can tell. */
static bool cache_holds(CUdeviceptr addr)
{
    bool in = false;
    if (atomic_load_explicit(&kept_hint, memory_order_relaxed) == 0)
        return false;
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < nkept && !in; i++)
        in = addr - kept[i].rec.base < kept[i].rec.reserved;
    pthread_mutex_unlock(&cache_lock);
    return in;
}

bool vr_alloc_reclaim(void)
{
    return cache_release(-1, false) > 0;
}

void vr_alloc_drain(void)
{
    atomic_store_explicit(&closed, true, memory_order_release);
    cache_release(-1, true);
    drain(true);
}

void vr_alloc_abandon(void)
{
    atomic_store_explicit(&closed, true, memory_order_release);
    pthread_mutex_lock(&cache_lock);
    vr_stat_add(VR_C_vmm_cache_bytes, -(int64_t)kept_bytes);
    nkept = 0;
    kept_bytes = 0;
    atomic_store(&kept_hint, 0);
    pthread_mutex_unlock(&cache_lock);
    pthread_mutex_lock(&park_lock);
    for (size_t i = 0; i < nparked; i++)
        vr_stat_add(VR_C_vmm_leaked_bytes, -(int64_t)held(&parked[i]));
    nparked = 0;
    atomic_store(&parked_hint, 0);
    pthread_mutex_unlock(&park_lock);
}

void vr_alloc_after_fork(void)
{
    static const pthread_rwlock_t free_rw = PTHREAD_RWLOCK_INITIALIZER;
    static const pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
    reg_lock = free_rw;
    park_lock = free_mu;
    nparked = 0;
    atomic_store(&parked_hint, 0);
    /* Kept memory is the parent's, like parked memory. */
    cache_lock = free_mu;
    vr_stat_add(VR_C_vmm_cache_bytes, -(int64_t)kept_bytes);
    nkept = 0;
    kept_bytes = 0;
    atomic_store(&kept_hint, 0);
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
        uint64_t idle = cache_idle_bytes(dev);
        fr = fr + idle < fr ? SIZE_MAX : fr + idle;
        est = fr > (size_t)LLONG_MAX ? LLONG_MAX : (long long)fr;
        atomic_store(&mem_free[dev], est);
        atomic_store(&mem_since[dev], 0);
    }
    return (unsigned long long)est >= bytes &&
           (unsigned long long)est - bytes >= cfg.max_padding;
}

static void memory_used(int dev, long long delta)
{
    if (!valid_device(dev))
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
    size_t reserved = padded + gran; /* the guard gap: see alloc.h */
    struct parked undo = { .rec = { .padded = padded, .reserved = reserved, .size = size } };
    CUresult r;

    if (reserved < padded)
        return -EOVERFLOW;
    device_prop(&prop, dev);
    *step = "cuMemAddressReserve";
    *bit = FB_RESERVE;
    r = vr_real.cuMemAddressReserve(&va, reserved, gran, 0, 0);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    undo.rec.base = va;
    undo.steps = STEP_ADDRESS_FREE;
    *step = "cuMemCreate";
    *bit = FB_CREATE;
    r = vr_real.cuMemCreate(&h, padded, &prop, 0);
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
                                   .reserved = reserved, .device = dev, .vmm = true,
                                   .eligible = true, .handle = h };
    return 0;
undo:
    release_or_park(&undo, false, 0);
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

/* Serves an allocation from the cache with no VMM call (a new id: for the
 * rest of the shim it is a new buffer). 0 with *dptr set, or nonzero. */
static int reuse(CUdevice dev, size_t size, size_t padded, CUdeviceptr *dptr)
{
    struct kept k;
    if (cache_take(dev, padded, &k) != 0)
        return -ENOENT;
    struct vr_alloc_info rec = k.rec;
    rec.id = 0;
    rec.size = size;
    rec.ctx = current_context();
    int rc = -ENOSPC;
    if (take_padding(padded - size)) {
        pthread_rwlock_wrlock(&reg_lock);
        rc = insert_locked(&rec);
        pthread_rwlock_unlock(&reg_lock);
        if (rc != 0)
            give_padding(padded - size);
    }
    if (rc != 0) {
        if (!cache_put(&k.rec, k.ctx, NULL, k.gen))
            release_kept(&k, false);
        return rc;
    }
    /* A peer enabled since the free (checked once the record is visible to
     * vr_alloc_enable_peer): grant it too. */
    reaccess_if_changed(&rec, k.gen);
    vr_stat_inc(VR_C_vmm_cache_hits);
    vr_stat_add(VR_C_vmm_bytes, (int64_t)padded);
    vr_stat_add(VR_C_padding_bytes, (int64_t)(padded - size));
    memory_used(dev, (long long)padded);
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
    if (cfg.vmm_cache)
        vr_stat_inc(VR_C_vmm_cache_misses);
    int rc = vmm_create(dev, size, padded, &rec, &step, &bit);
    /* Out of memory while the cache keeps some: it goes first. */
    if (rc != 0 && vr_err_to_cu(rc) == CUDA_ERROR_OUT_OF_MEMORY && cache_release(dev, false) > 0)
        rc = vmm_create(dev, size, padded, &rec, &step, &bit);
    if (rc != 0) {
        char reason[160];
        snprintf(reason, sizeof reason, "%s: %s", step, vr_cu_name(vr_err_to_cu(rc)));
        alloc_fallback(bit, reason);
        if (vr_err_to_cu(rc) == CUDA_ERROR_OUT_OF_MEMORY)
            atomic_store(&mem_free[dev], -1); /* ask again next time */
        return rc;
    }
    rec.ctx = current_context();
    pthread_rwlock_wrlock(&reg_lock);
    rc = insert_locked(&rec);
    pthread_rwlock_unlock(&reg_lock);
    if (rc != 0) {
        struct parked undo = { .rec = rec,
                               .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
        release_or_park(&undo, false, 0);
        alloc_fallback(FB_TRACK, "registry out of memory");
        return rc;
    }
    reaccess_if_changed(&rec, gen);
    vr_stat_add(VR_C_vmm_bytes, (int64_t)padded);
    vr_stat_add(VR_C_padding_bytes, (int64_t)(padded - size));
    memory_used(dev, (long long)padded);
    *dptr = rec.base;
    return 0;
}

int vr_alloc_create(CUdeviceptr *dptr, size_t size)
{
    struct vr_alloc_info rec = { .device = -1 };
    CUdevice dev = -1;
    bool profiled = cfg.mode == VR_MODE_PROFILED;

    /* Only profiling reads the registry: dedup needs no record at all. */
    if (!dptr || !(profiled || cfg.mode == VR_MODE_OBSERVE))
        return vr_err_cu(vr_real.cuMemAlloc_v2(dptr, size));
    drain(false);
    if (current_device(&dev) == 0)
        rec.device = dev;
    size_t gran = rec.device >= 0 && size > 0 && size >= cfg.vmm_min_bytes
                      ? vr_alloc_granularity_for(dev) : 0;
    if (rec.device >= 0 && size > 0 && size >= cfg.vmm_min_bytes && gran == 0 && profiled)
        alloc_fallback(FB_NO_VMM, "device has no VMM support");
    if (gran != 0) {
        size_t padded = (size + gran - 1) / gran * gran;
        size_t pad = padded - size;
        VR_ASSERT(padded < size || padded % gran == 0);
        /* Too much padding for its size: served natively, by design. */
        bool fits = padded >= size && (double)pad <= cfg.max_padding_ratio * (double)size;
        if (fits && profiled && reuse(dev, size, padded, dptr) == 0)
            return 0;
        if (fits && profiled && !memory_allows(dev, padded)) {
            alloc_fallback(FB_LOW_MEMORY, "free memory below VAREMAP_MAX_PADDING");
            fits = false;
        }
        if (fits && !take_padding(pad)) {
            if (profiled)
                alloc_fallback(FB_PADDING, "VAREMAP_MAX_PADDING exhausted");
            fits = false;
        }
        if (fits && profiled) {
            if (try_vmm(dev, size, padded, dptr) == 0)
                return 0;
            give_padding(pad);
        } else if (fits) {
            rec.eligible = true; /* observe: what profiled would have done */
            rec.padded = padded;
        }
    }

    CUdeviceptr p = 0;
    CUresult r = vr_real.cuMemAlloc_v2(&p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && cache_release(rec.device, false) > 0)
        r = vr_real.cuMemAlloc_v2(&p, size);
    if (r != CUDA_SUCCESS) {
        if (rec.eligible)
            give_padding(rec.padded - size);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && rec.device >= 0)
            atomic_store(&mem_free[rec.device], -1);
        return vr_err_cu(r);
    }
    rec.base = p;
    rec.size = size;
    rec.reserved = size;
    if (!rec.eligible)
        rec.padded = size;
    pthread_rwlock_wrlock(&reg_lock);
    int rc = insert_locked(&rec);
    pthread_rwlock_unlock(&reg_lock);
    if (rc != 0 && rec.eligible)
        give_padding(rec.padded - size);
    memory_used(rec.device, (long long)size);
    /* An untracked native allocation still works; it is just never a candidate. */
    *dptr = p;
    return 0;
}

/* ---- free ------------------------------------------------------------------ */

/* The program's memory is gone once the registry lost it: from here on the
 * program's call succeeds, whatever the shim's own calls say. Unless
 * `synced`, the memory is unmapped only once `done` completed (when given)
 * or the context was synchronized. Memory whose last use is known (synced,
 * or an event) goes to the cache when it fits: still mapped, but free as
 * far as the program and the free-memory estimate can tell. */
static void forget_and_release(const struct vr_alloc_info *rec, CUcontext ctx, bool synced,
                               CUevent done, unsigned gen)
{
    vr_stat_add(VR_C_vmm_bytes, -(int64_t)rec->padded);
    vr_stat_add(VR_C_padding_bytes, -(int64_t)(rec->padded - rec->size));
    memory_used(rec->device, -(long long)rec->padded);
    vr_exec_forget_alloc(rec->id, synced);
    if ((synced || done) && cache_put(rec, ctx, done, gen))
        return;
    struct parked p = { .rec = *rec, .ctx = ctx, .done = done,
                        .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
    if (done)
        p.steps |= STEP_EVENT | STEP_EVENT_DESTROY;
    else if (!synced)
        p.steps |= STEP_SYNC;
    /* After the exit work no later hook retries: wait now. */
    release_or_park(&p, atomic_load_explicit(&closed, memory_order_acquire), 0);
}

/* A VMM-backed allocation, already detached: the native free waits for the
 * device; so does this one, before any slice or mapping of this memory goes
 * away under running work. */
static int free_vmm(const struct vr_alloc_info *rec, CUcontext ctx, unsigned gen)
{
    CUresult r = vr_real.cuCtxSynchronize();
    if (r != CUDA_SUCCESS && programs_error(r)) {
        reattach(rec); /* the native free would have failed the same way */
        return vr_err_cu(r);
    }
    if (r != CUDA_SUCCESS) {
        CUresult w = wait_by_native_free(r);
        char reason[192];
        snprintf(reason, sizeof reason, "cuCtxSynchronize: %s; %s", vr_cu_name(r),
                 w == CUDA_SUCCESS ? "waited through a native free instead"
                                   : "memory kept mapped, released later");
        log_fallback(FB_SYNC, "cuMemFree", reason);
        r = w;
    }
    forget_and_release(rec, ctx, r == CUDA_SUCCESS, NULL, gen);
    return 0;
}

/* Nothing of a destroyed context runs any more: nothing to wait for, and
 * its events went with it. */
void vr_alloc_context_destroyed(CUcontext ctx)
{
    if (!ctx || cfg.mode != VR_MODE_PROFILED)
        return;
    for (;;) {
        CUdeviceptr base = 0;
        pthread_rwlock_rdlock(&reg_lock);
        for (size_t i = 0; i < nrecs && !base; i++)
            if (recs[i].vmm && recs[i].ctx == ctx)
                base = recs[i].base;
        pthread_rwlock_unlock(&reg_lock);
        struct vr_alloc_info rec;
        if (!base)
            break;
        if (detach(base, &rec) != 0)
            continue; /* freed by another thread meanwhile */
        vr_stat_add(VR_C_vmm_bytes, -(int64_t)rec.padded);
        vr_stat_add(VR_C_padding_bytes, -(int64_t)(rec.padded - rec.size));
        memory_used(rec.device, -(long long)rec.padded);
        vr_exec_forget_alloc(rec.id, false);
        struct parked p = { .rec = rec, .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
        release_or_park(&p, false, 0);
    }
    for (;;) {
        struct kept k;
        bool found = false;
        pthread_mutex_lock(&cache_lock);
        for (size_t i = 0; i < nkept && !found; i++)
            if (!kept[i].busy && kept[i].ctx == ctx) {
                k = kept[i];
                remove_kept_locked(i);
                found = true;
            }
        pthread_mutex_unlock(&cache_lock);
        if (!found)
            break;
        k.done = NULL;
        release_kept(&k, false);
    }
}

int vr_alloc_free(CUdeviceptr dptr)
{
    struct vr_alloc_info rec;
    CUcontext ctx = NULL;
    /* Read before the record leaves the registry: see vr_alloc_enable_peer. */
    unsigned gen = vr_alloc_peer_generation();
    int rc;

    /* Unknown or interior: the driver's own answer. */
    if (dptr == 0 || vr_alloc_find(dptr, &rec) != 0 || rec.base != dptr) {
        rc = vr_err_cu(vr_real.cuMemFree_v2(dptr));
    } else if ((rc = need_context(&ctx)) != 0) {
        /* the driver's answer, and nothing freed */
    } else if (detach(dptr, &rec) != 0) {
        rc = vr_err_cu(vr_real.cuMemFree_v2(dptr)); /* freed by another thread meanwhile */
    } else if (!rec.vmm) {
        CUresult r = vr_real.cuMemFree_v2(dptr);
        if (r != CUDA_SUCCESS)
            reattach(&rec);
        else
            memory_used(rec.device, -(long long)rec.size);
        rc = vr_err_cu(r);
    } else {
        rc = free_vmm(&rec, ctx, gen);
    }
    drain(true); /* a free may block on the device, as the native one does */
    return rc;
}

static CUresult record_in(CUevent ev, CUstream stream, bool per_thread)
{
    return per_thread && vr_real.cuEventRecord_ptsz ? vr_real.cuEventRecord_ptsz(ev, stream)
                                                    : vr_real.cuEventRecord(ev, stream);
}

static void drop_event(CUevent ev)
{
    if (ev && vr_real.cuEventDestroy_v2(ev) != CUDA_SUCCESS)
        vr_warn("an event of a failed cuMemFreeAsync could not be destroyed");
}

/* A new event recorded on the program's stream. cuEventRecord takes only an
 * event of the stream's own context, and the program may free in stream
 * order on a stream of another context than its current one (the native
 * call allows it): refused so, the event is made again in the stream's
 * context. */
static CUresult event_on_stream(CUstream stream, bool per_thread, CUevent *out)
{
    CUevent ev = NULL;
    CUresult r = vr_real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return r;
    r = record_in(ev, stream, per_thread);
    CUresult (*get_ctx)(CUstream, CUcontext *) =
        per_thread && vr_real.cuStreamGetCtx_ptsz ? vr_real.cuStreamGetCtx_ptsz
                                                  : vr_real.cuStreamGetCtx;
    CUcontext sctx = NULL, popped;
    if (r == CUDA_ERROR_INVALID_HANDLE && get_ctx && get_ctx(stream, &sctx) == CUDA_SUCCESS &&
        sctx && vr_real.cuCtxPushCurrent_v2(sctx) == CUDA_SUCCESS) {
        CUevent again = NULL;
        if (vr_real.cuEventCreate(&again, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
            r = record_in(again, stream, per_thread);
            if (r == CUDA_SUCCESS) {
                drop_event(ev);
                ev = again;
            } else {
                drop_event(again);
            }
        }
        vr_real.cuCtxPopCurrent_v2(&popped);
    }
    if (r != CUDA_SUCCESS) {
        drop_event(ev);
        return r;
    }
    *out = ev;
    return CUDA_SUCCESS;
}

/* The driver never saw varemap's VMM allocations as cuMemAlloc memory, so a
 * stream-ordered free of one is done here, without blocking the host (the
 * driver's does not): an event recorded on the stream now, and the memory
 * unmapped and released once it completed, at a later hook or at exit.
 * Anything else is the driver's. */
int vr_alloc_free_async(CUdeviceptr dptr, CUstream stream, bool per_thread)
{
    struct vr_alloc_info rec;
    CUcontext ctx = NULL;
    int rc;
    bool known = vr_alloc_find(dptr, &rec) == 0 && rec.base == dptr;
    if (!known || !rec.vmm) {
        rc = vr_err_cu(per_thread ? vr_real.cuMemFreeAsync_ptsz(dptr, stream)
                                  : vr_real.cuMemFreeAsync(dptr, stream));
        /* Native cuMemAlloc memory freed in stream order: gone for the
         * program now, so no later lookup may name it. */
        if (rc == 0 && known && detach(dptr, &rec) == 0)
            memory_used(rec.device, -(long long)rec.size);
        drain(false);
        return rc;
    }
    if ((rc = need_context(&ctx)) != 0)
        return rc;
    unsigned gen = vr_alloc_peer_generation(); /* before detach: see vr_alloc_enable_peer */
    CUevent done = NULL;
    CUresult r = event_on_stream(stream, per_thread, &done);
    /* The stream is the program's: its errors are the native call's. */
    if (r != CUDA_SUCCESS && programs_error(r))
        return vr_err_cu(r);
    if (detach(dptr, &rec) != 0) {
        drop_event(done);
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE); /* freed by another thread meanwhile */
    }
    if (!done) {
        char reason[160];
        snprintf(reason, sizeof reason,
                 "cuEventCreate/cuEventRecord: %s; memory kept mapped until a later "
                 "synchronizing call", vr_cu_name(r));
        log_fallback(FB_SYNC, "cuMemFreeAsync", reason);
    }
    forget_and_release(&rec, ctx, false, done, gen);
    drain(false);
    return 0;
}

/* ---- queries ---------------------------------------------------------------- */

int vr_alloc_mem_info(size_t *free_bytes, size_t *total)
{
    /* Memory freed in stream order whose stream is done goes back first, so
     * the answer is the one the driver alone would give; memory the cache
     * keeps counts as free, as it would be without the shim (an allocation
     * that needs it gets it: see vr_alloc_create). */
    drain(false);
    CUdevice dev = -1;
    bool kept_some = atomic_load_explicit(&kept_hint, memory_order_relaxed) != 0 &&
                     current_device(&dev) == 0;
    if (kept_some)
        cache_settle(dev, 0);
    CUresult r = vr_real.cuMemGetInfo_v2(free_bytes, total);
    if (r == CUDA_SUCCESS && kept_some && free_bytes && total) {
        uint64_t idle = cache_idle_bytes(dev);
        size_t room = *total > *free_bytes ? *total - *free_bytes : 0;
        *free_bytes += idle < room ? (size_t)idle : room;
    }
    return vr_err_cu(r);
}

int vr_alloc_address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct vr_alloc_info rec = { 0 };
    CUcontext ctx = NULL;
    bool kept_mem = false;
    if ((find_span(dptr, &rec) != 0 || !rec.vmm) && !(kept_mem = cache_holds(dptr)))
        return vr_err_cu(vr_real.cuMemGetAddressRange_v2(pbase, psize, dptr));
    int rc = need_context(&ctx);
    if (rc != 0)
        return rc;
    /* Padding, guard gap and kept memory are the shim's, not memory the
     * program has. */
    if (kept_mem || dptr - rec.base >= rec.size)
        return vr_err_cu(CUDA_ERROR_NOT_FOUND);
    if (pbase)
        *pbase = rec.base;
    if (psize)
        *psize = rec.size;
    return 0;
}

/* Native cuMemAlloc memory has no allocation handle. */
int vr_alloc_retain_handle(CUmemGenericAllocationHandle *handle, void *addr)
{
    struct vr_alloc_info rec;
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)addr;
    if (!handle || ((find_span(at, &rec) != 0 || !rec.vmm) && !cache_holds(at)))
        return vr_err_cu(vr_real.cuMemRetainAllocationHandle(handle, addr));
    return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
}

/* Native memory is not a VMM mapping: the driver's own argument checks
 * first (by asking it), then the answer it gives for unmapped memory. */
int vr_alloc_get_access(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    struct vr_alloc_info rec;
    if ((find_span(ptr, &rec) != 0 || !rec.vmm) && !cache_holds(ptr))
        return vr_err_cu(vr_real.cuMemGetAccess(flags, location, ptr));
    unsigned long long ignored;
    CUresult r = vr_real.cuMemGetAccess(flags ? &ignored : NULL, location, ptr);
    return vr_err_cu(r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE);
}

/* Buffer ids the shim gives its allocations: the driver's id names the
 * physical memory, which a block reused from the cache keeps, while a
 * native cuMemAlloc gets a new one every time (registration caches such as
 * UCX's and NCCL's key on it). The driver counts its ids up from small
 * numbers; the top bit keeps the shim's apart. */
#define VR_BUFFER_ID_BIT (UINT64_C(1) << 63)

/* Overrides, in the driver's answer for a live shim-backed allocation, what
 * would show the padded mapping, the reservation or the cache. The legacy
 * IPC and handle-type answers stay the driver's: they tell what works on
 * this memory (cuIpcGetMemHandle does not). */
static void native_attribute(const struct vr_alloc_info *rec, CUpointer_attribute a, void *data)
{
    uint64_t v;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (!rec->ctx)
            return;
        memcpy(data, &rec->ctx, sizeof rec->ctx);
        return;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        v = rec->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        v = rec->size;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        v = VR_BUFFER_ID_BIT | rec->id;
        break;
    default:
        return;
    }
    memcpy(data, &v, sizeof v); /* each of these is 8 bytes wide */
}

int vr_alloc_pointer_attributes(bool single, unsigned n, CUpointer_attribute *attrs, void **data,
                                CUdeviceptr ptr)
{
    struct vr_alloc_info rec = { 0 };
    bool kept_mem = false;
    bool ours = (find_span(ptr, &rec) == 0 && rec.vmm) || (kept_mem = cache_holds(ptr));
    /* Padding, guard gap and kept memory are no allocation of the
     * program's: the driver's answer for an address that is none (0). */
    CUdeviceptr ask = ours && (kept_mem || ptr - rec.base >= rec.size) ? 0 : ptr;
    CUresult r = single ? vr_real.cuPointerGetAttribute(data[0], attrs[0], ask)
                        : vr_real.cuPointerGetAttributes(n, attrs, data, ask);
    if (r != CUDA_SUCCESS || !ours || ask == 0)
        return vr_err_cu(r);
    for (unsigned i = 0; i < n; i++)
        if (data[i])
            native_attribute(&rec, attrs[i], data[i]);
    return 0;
}

/* ---- peers -------------------------------------------------------------------- */

static int context_device(CUcontext ctx, CUdevice *dev)
{
    CUresult r = vr_real.cuCtxPushCurrent_v2(ctx);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    int rc = current_device(dev);
    CUcontext popped;
    vr_real.cuCtxPopCurrent_v2(&popped);
    return rc;
}

/* Called in the accessor's context with the owner's context as the peer:
 * the accessor's device may now touch the owner device's memory. */
int vr_alloc_enable_peer(CUcontext peer, unsigned int flags)
{
    CUresult r = vr_real.cuCtxEnablePeerAccess(peer, flags);
    if (r != CUDA_SUCCESS || cfg.mode != VR_MODE_PROFILED)
        return vr_err_cu(r);
    CUdevice accessor, owner;
    if (current_device(&accessor) != 0 || context_device(peer, &owner) != 0 ||
        accessor == owner)
        return 0;
    uint64_t bit = UINT64_C(1) << accessor;
    if (atomic_fetch_or(&peer_access[owner], bit) & bit)
        return 0; /* another context of the same device did already */
    atomic_fetch_add_explicit(&peer_generation, 1, memory_order_release);

    /* The owner's VMM allocations: copied out so no driver call runs under
     * the lock. One freed meanwhile only makes cuMemSetAccess fail. */
    pthread_rwlock_rdlock(&reg_lock);
    size_t n = 0;
    struct todo {
        CUdeviceptr base;
        size_t padded;
    } *todo = malloc((nrecs + 1) * sizeof *todo);
    for (size_t i = 0; todo && i < nrecs; i++)
        if (recs[i].vmm && recs[i].device == owner)
            todo[n++] = (struct todo){ recs[i].base, recs[i].padded };
    pthread_rwlock_unlock(&reg_lock);
    CUmemAccessDesc access[VR_MAX_DEVICES];
    size_t na = vr_alloc_access_for(owner, access, VR_MAX_DEVICES);
    vr_capture_relax(); /* the program's call is the peer's enabling, not this */
    for (size_t i = 0; i < n; i++)
        vr_real.cuMemSetAccess(todo[i].base, todo[i].padded, access, na);
    vr_capture_restore();
    free(todo);
    /* Again once done: a free that read the generation before the first
     * bump may have left the registry before the walk above, and its cached
     * memory must see a newer generation when reused (reuse). */
    atomic_fetch_add_explicit(&peer_generation, 1, memory_order_release);
    return 0;
}
