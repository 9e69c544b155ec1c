/* alloc_cache: freed VMM memory kept mapped for reuse (VAREMAP_VMM_CACHE).
 *
 * A freed VMM-backed allocation whose last use is known stays reserved,
 * created, mapped and accessible, keyed by (device, padded size), until a
 * cuMemAlloc of that size on that device takes it (alloc.h says what the
 * program sees of it). An entry freed in stream order keeps its free's
 * event until a settle sees it complete; only idle entries are reused.
 *
 * One mutex (rank VR_RANK_CACHE), a leaf: an entry is taken out of the list
 * before a release touches it, and marked busy while its event is queried,
 * so no lock is held across a driver call and no two threads ever use the
 * same event.
 */
#include "alloc_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "lockrank.h"
#include "stats.h"

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;
static size_t nkept, capkept;
static uint64_t kept_bytes, kept_age; /* under cache_lock */
static unsigned settle_epoch;         /* under cache_lock */
static _Atomic size_t kept_hint;      /* nkept, read without the lock */

static void lock(void)
{
    vr_rank_take(VR_RANK_CACHE);
    pthread_mutex_lock(&cache_lock);
}

static void unlock(void)
{
    pthread_mutex_unlock(&cache_lock);
    vr_rank_drop(VR_RANK_CACHE);
}

static bool valid_locked(void);

static void remove_kept_locked(size_t i)
{
    VR_ASSERT_HELD(VR_RANK_CACHE);
    VR_ASSERT(i < nkept && kept[i].rec.padded <= kept_bytes);
    kept_bytes -= kept[i].rec.padded;
    vr_stat_add(VR_C_vmm_cache_bytes, -(int64_t)kept[i].rec.padded);
    kept[i] = kept[--nkept];
    atomic_store(&kept_hint, nkept);
}

/* Appends k, its bytes already counted; false when the list cannot grow. */
static bool append_kept_locked(const struct kept *k)
{
    VR_ASSERT_HELD(VR_RANK_CACHE);
    VR_ASSERT(k->rec.vmm && k->rec.padded > 0);
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
bool vr_cache_release_kept(const struct kept *k, bool may_sync)
{
    struct parked p = { .rec = k->rec, .ctx = k->ctx, .done = k->done,
                        .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
    if (k->done)
        p.steps |= STEP_EVENT | STEP_EVENT_DESTROY;
    vr_park_release(&p, may_sync, 0);
    return !(p.steps & (STEP_UNMAP | STEP_RELEASE));
}

/* Keeps a freed allocation (its access set for peer generation `gen`),
 * evicting the oldest entries to stay within VAREMAP_VMM_CACHE. False when
 * the cache is off or it does not fit: the caller releases it. */
bool vr_cache_put(const struct vr_alloc_info *rec, CUcontext ctx, CUevent done, unsigned gen)
{
    if (rec->padded == 0 || rec->padded > vr_alloc_cfg.vmm_cache ||
        atomic_load_explicit(&vr_alloc_closed, memory_order_acquire))
        return false;
    struct kept k = { .rec = *rec, .ctx = ctx, .done = done, .gen = gen };
    for (;;) {
        struct kept old;
        bool evict = false, stored = false;
        lock();
        size_t o = nkept;
        if (kept_bytes + rec->padded > vr_alloc_cfg.vmm_cache) {
            for (size_t i = 0; i < nkept; i++)
                if (!kept[i].busy && (o == nkept || kept[i].age < kept[o].age))
                    o = i;
        }
        if (o < nkept) {
            old = kept[o];
            remove_kept_locked(o);
            evict = true;
        } else if (kept_bytes + rec->padded <= vr_alloc_cfg.vmm_cache) {
            k.age = kept_age++;
            k.seen = settle_epoch;
            stored = append_kept_locked(&k);
            if (stored) {
                kept_bytes += rec->padded;
                vr_stat_add(VR_C_vmm_cache_bytes, (int64_t)rec->padded);
            }
        }
        VR_ASSERT_EXPENSIVE(valid_locked());
        unlock();
        if (!evict)
            return stored;
        vr_cache_release_kept(&old, false);
    }
}

/* Entries of `dev` (-1: any) and `padded` bytes (0: any) whose
 * stream-ordered free completed become idle; a failed query releases the
 * entry (after a synchronize: its event cannot tell). */
void vr_cache_settle(int dev, size_t padded)
{
    enum { BATCH = 32 };
    struct { CUdeviceptr base; CUevent done; } mine[BATCH];
    lock();
    unsigned epoch = ++settle_epoch;
    unlock();
    for (;;) {
        size_t n = 0;
        lock();
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
        unlock();
        if (n == 0)
            return;
        for (size_t j = 0; j < n; j++) {
            vr_capture_relax();
            CUresult r = vr_real.cuEventQuery(mine[j].done);
            CUresult d = r == CUDA_SUCCESS ? vr_real.cuEventDestroy_v2(mine[j].done) : r;
            vr_capture_restore();
            if (r == CUDA_SUCCESS && d != CUDA_SUCCESS)
                vr_alloc_fallback_once(FB_EVENT, "cuMemFreeAsync", "cuEventDestroy failed");
            struct kept bad;
            bool failed = false;
            lock();
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
            unlock();
            if (failed)
                vr_cache_release_kept(&bad, false);
        }
    }
}

/* Takes an idle entry of `dev` with `padded` bytes out of the cache:
 * 0, or -ENOENT. Of the idle entries, the one at the lowest address: a
 * program that frees and re-allocates its buffers every step then gets
 * them back at the addresses it had, in the order it allocates them (its
 * k-th allocation of a step the k-th lowest of those it freed), so its
 * addresses recur with a short period, which variants absorb, instead of
 * wandering with the list's order. */
int vr_cache_take(int dev, size_t padded, struct kept *out)
{
    for (int round = 0; round < 2; round++) {
        if (atomic_load_explicit(&kept_hint, memory_order_relaxed) == 0)
            return -ENOENT;
        bool pending = false;
        size_t pick = SIZE_MAX;
        lock();
        for (size_t i = 0; i < nkept; i++) {
            if (kept[i].rec.device != dev || kept[i].rec.padded != padded)
                continue;
            if (kept[i].done || kept[i].busy) {
                pending = pending || !kept[i].busy;
                continue;
            }
            if (pick == SIZE_MAX || kept[i].rec.base < kept[pick].rec.base)
                pick = i;
        }
        if (pick != SIZE_MAX) {
            *out = kept[pick];
            remove_kept_locked(pick);
            unlock();
            return 0;
        }
        unlock();
        if (!pending)
            break;
        vr_cache_settle(dev, padded);
    }
    return -ENOENT;
}

/* Releases the entries of `dev` (-1: all). Returns the bytes that went
 * back to the driver now (entries whose stream is still busy go later). */
uint64_t vr_cache_release(int dev, bool may_sync)
{
    uint64_t back = 0;
    while (atomic_load_explicit(&kept_hint, memory_order_relaxed) != 0) {
        struct kept k;
        bool found = false;
        lock();
        for (size_t i = 0; i < nkept; i++)
            if (!kept[i].busy && (dev < 0 || kept[i].rec.device == dev)) {
                k = kept[i];
                remove_kept_locked(i);
                found = true;
                break;
            }
        unlock();
        if (!found)
            break;
        if (vr_cache_release_kept(&k, may_sync))
            back += k.rec.padded;
    }
    return back;
}

/* Idle cached bytes of `dev`: free memory as far as the program can tell. */
uint64_t vr_cache_idle_bytes(int dev)
{
    uint64_t n = 0;
    if (atomic_load_explicit(&kept_hint, memory_order_relaxed) == 0)
        return 0;
    lock();
    for (size_t i = 0; i < nkept; i++)
        if (kept[i].rec.device == dev && !kept[i].done)
            n += kept[i].rec.padded;
    unlock();
    return n;
}

/* Whether addr lies in memory the cache keeps: freed, as far as the
 * program can tell. */
bool vr_cache_holds(CUdeviceptr addr)
{
    bool in = false;
    if (atomic_load_explicit(&kept_hint, memory_order_relaxed) == 0)
        return false;
    lock();
    for (size_t i = 0; i < nkept && !in; i++)
        in = addr - kept[i].rec.base < kept[i].rec.reserved;
    unlock();
    return in;
}

bool vr_cache_any(void)
{
    return atomic_load_explicit(&kept_hint, memory_order_relaxed) != 0;
}

bool vr_cache_take_context(CUcontext ctx, struct kept *out)
{
    bool found = false;
    lock();
    for (size_t i = 0; i < nkept && !found; i++)
        if (!kept[i].busy && kept[i].ctx == ctx) {
            *out = kept[i];
            remove_kept_locked(i);
            found = true;
        }
    unlock();
    return found;
}

/* Forgotten without a release: the driver took it back (abandon), or it is
 * the parent's (a forked child). */
static void forget_all(void)
{
    vr_stat_add(VR_C_vmm_cache_bytes, -(int64_t)kept_bytes);
    nkept = 0;
    kept_bytes = 0;
    atomic_store(&kept_hint, 0);
}

void vr_cache_abandon(void)
{
    lock();
    forget_all();
    unlock();
}

void vr_cache_after_fork(void)
{
    cache_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    forget_all();
}

/* Bytes summed right, each entry within the budget, no base twice. */
static bool valid_locked(void)
{
    VR_ASSERT_HELD(VR_RANK_CACHE);
    uint64_t sum = 0;
    for (size_t i = 0; i < nkept; i++) {
        if (!kept[i].rec.vmm || kept[i].rec.padded == 0 || kept[i].age >= kept_age)
            return false;
        for (size_t j = i + 1; j < nkept; j++)
            if (kept[j].rec.base == kept[i].rec.base)
                return false;
        sum += kept[i].rec.padded;
    }
    return sum == kept_bytes && kept_bytes <= vr_alloc_cfg.vmm_cache &&
           atomic_load(&kept_hint) == nkept;
}

bool vr_cache_valid(void)
{
    lock();
    bool ok = valid_locked();
    unlock();
    return ok;
}
