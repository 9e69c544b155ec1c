/* alloc_cache: freed VMM memory kept mapped for reuse (VAREMAP_VMM_CACHE).
 *
 * A freed VMM-backed allocation whose last use is known stays reserved,
 * created, mapped and accessible, keyed by (device, padded size), until a
 * cuMemAlloc of that size on that device takes it (alloc.h says what the
 * program sees of it).
 *
 * Idle and not idle. An entry is idle when nothing the program queued can
 * still use its memory: its free synchronized (cuMemFree), or the event its
 * stream-ordered free recorded (cuMemFreeAsync) was seen complete. An entry
 * that is not idle holds that event (`done`) and has one reminder on the
 * waiting queue (waitq.h, kind VR_WAIT_CACHE, `wait`); draining the
 * reminders (vr_cache_settle: an allocation of a cached size, cuMemGetInfo)
 * queries the events, never waits on one.
 *
 * Invariants (checked by valid_locked, asserted where they matter):
 * - An entry serves a new allocation only when idle. Nothing else makes
 *   reuse legal: a cuMemAlloc is not ordered after the stream of a pending
 *   cuMemFreeAsync, so its memory may only go once that free's work is
 *   done. (A picker that one day serves a not-idle entry because the
 *   program's own order makes it safe must say so here and in the assertion
 *   of serve_locked, together.)
 * - The event belongs to the entry, not to its reminder. The reminder finds
 *   its entry by identity (kept.wait) and touches the event only while it
 *   marked the entry busy; whoever takes a non-busy entry out of the list
 *   (reuse cannot: it is not idle; eviction, out of memory, exit, a
 *   destroyed context) takes the event with it to the release
 *   (alloc_release.c: STEP_EVENT, STEP_EVENT_DESTROY), and the reminder,
 *   finding its entry gone at its next retry, only frees itself.
 * - done set exactly when wait is; busy only with wait; every reminder of
 *   an entry still listed is counted on the queue (pushed under the cache
 *   lock). The queue may hold more: reminders of entries already gone.
 *
 * One mutex (rank VR_RANK_CACHE): no driver call under it (an entry is
 * taken out of the list before a release touches it, marked busy while its
 * event is queried), and under it only the queue's lock, to push a
 * reminder. The queue's drain, abandon and after-fork are the reminders':
 * at exit the cache releases every entry first and the FINAL drain frees
 * the reminders left (it releases an entry it still finds, waiting for its
 * event); a forked child forgets the parent's entries and reminders.
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
#include "waitq.h"

/* The queue's reminder of a not-idle entry. device and padded are copies,
 * read by the drain's match under the queue's lock. */
struct cache_wait {
    struct vr_wait w; /* first: the queue hands this back */
    int device;
    size_t padded;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;
static size_t nkept, capkept;
static uint64_t kept_bytes, kept_age; /* under cache_lock */
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

/* Takes entry i out of the list into *out, its event with it (the
 * reminder stays on the queue and finds the entry gone). */
static void take_out_locked(size_t i, struct kept *out)
{
    VR_ASSERT(i < nkept && !kept[i].busy);
    *out = kept[i];
    out->wait = NULL;
    remove_kept_locked(i);
}

/* The one way an entry serves an allocation: idle only (the header's
 * first invariant). */
static void serve_locked(size_t i, struct kept *out)
{
    VR_ASSERT(i < nkept && !kept[i].done && !kept[i].wait && !kept[i].busy);
    take_out_locked(i, out);
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
    /* The observer takes EXEC: nothing of this layer may be held. */
    VR_ASSERT_INTERNAL(VR_CHECK_LEVEL < 2 || !vr_rank_held(VR_RANK_CACHE));
    vr_alloc_tell_freed(k->rec.id, false); /* the memory goes now: no slot may keep its id */
    struct parked p = { .rec = k->rec, .ctx = k->ctx, .done = k->done,
                        .steps = STEP_UNMAP | STEP_RELEASE | STEP_ADDRESS_FREE };
    if (k->done)
        p.steps |= STEP_EVENT | STEP_EVENT_DESTROY;
    vr_park_release(&p, may_sync, 0);
    return !(p.steps & (STEP_UNMAP | STEP_RELEASE));
}

static const struct vr_wait_ops wait_ops;

/* Keeps a freed allocation (its access set for peer generation `gen`),
 * evicting the oldest entries to stay within VAREMAP_VMM_CACHE. `done`
 * (NULL when the free synchronized): the stream-ordered free's event, the
 * entry's from here on. False when the cache is off or it does not fit: the
 * caller releases it, done and all. */
bool vr_cache_put(const struct vr_alloc_info *rec, CUcontext ctx, CUevent done, unsigned gen)
{
    if (rec->padded == 0 || rec->padded > vr_alloc_cfg.vmm_cache ||
        atomic_load_explicit(&vr_alloc_closed, memory_order_acquire))
        return false;
    struct cache_wait *cw = NULL;
    if (done) {
        cw = malloc(sizeof *cw);
        if (!cw)
            return false; /* nothing could remind the cache to query it */
        *cw = (struct cache_wait){ .w = { .ops = &wait_ops, .kind = VR_WAIT_CACHE },
                                   .device = rec->device, .padded = rec->padded };
    }
    struct kept k = { .rec = *rec, .ctx = ctx, .done = done, .wait = cw, .gen = gen };
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
            take_out_locked(o, &old);
            evict = true;
        } else if (kept_bytes + rec->padded <= vr_alloc_cfg.vmm_cache) {
            k.age = kept_age++;
            stored = append_kept_locked(&k);
            if (stored) {
                kept_bytes += rec->padded;
                vr_stat_add(VR_C_vmm_cache_bytes, (int64_t)rec->padded);
                if (cw)
                    vr_waitq_push(&cw->w); /* under the lock: counted while listed */
            }
        }
        VR_ASSERT_EXPENSIVE(valid_locked());
        unlock();
        if (!evict) {
            if (!stored)
                free(cw);
            return stored;
        }
        vr_cache_release_kept(&old, false);
    }
}

/* The index of the entry whose reminder is cw, or nkept: gone. */
static size_t find_wait_locked(const struct cache_wait *cw)
{
    VR_ASSERT_HELD(VR_RANK_CACHE);
    for (size_t i = 0; i < nkept; i++)
        if (kept[i].wait == cw)
            return i;
    return nkept;
}

/* A reminder's retry: its entry's event queried (never waited on: only an
 * allocation or cuMemGetInfo drains these, and neither blocks natively);
 * complete, the entry is idle; a failed query releases the entry (after a
 * synchronize: its event cannot tell). */
static bool wait_retry(struct vr_wait *w, enum vr_wait_how how)
{
    struct cache_wait *cw = (struct cache_wait *)w;
    lock();
    size_t i = find_wait_locked(cw);
    if (i == nkept) {
        unlock();
        free(cw); /* its entry left, its event with it */
        return true;
    }
    VR_ASSERT(kept[i].done && !kept[i].busy);
    if (how == VR_WAIT_FINAL) {
        struct kept last;
        take_out_locked(i, &last);
        unlock();
        free(cw);
        vr_cache_release_kept(&last, true);
        return true;
    }
    kept[i].busy = true;
    CUevent ev = kept[i].done;
    unlock();
    vr_capture_relax();
    CUresult r = vr_real.cuEventQuery(ev);
    CUresult d = r == CUDA_SUCCESS ? vr_real.cuEventDestroy_v2(ev) : r;
    vr_capture_restore();
    if (r == CUDA_SUCCESS && d != CUDA_SUCCESS)
        vr_alloc_fallback_once(FB_EVENT, "cuMemFreeAsync", "cuEventDestroy failed");
    struct kept bad;
    bool failed = false, listed;
    lock();
    i = find_wait_locked(cw);
    listed = i < nkept; /* not when abandoned meanwhile */
    if (listed) {
        kept[i].busy = false;
        if (r == CUDA_SUCCESS) {
            kept[i].done = NULL;
            kept[i].wait = NULL;
        } else if (r != CUDA_ERROR_NOT_READY) {
            take_out_locked(i, &bad);
            failed = true;
        }
    }
    VR_ASSERT_EXPENSIVE(valid_locked());
    unlock();
    if (listed && r == CUDA_ERROR_NOT_READY)
        return false;
    free(cw);
    if (failed)
        vr_cache_release_kept(&bad, false);
    return true;
}

/* Abandon and after-fork: the entries are the cache's to forget
 * (vr_cache_abandon, vr_cache_after_fork), the reminder only goes. */
static void wait_forget(struct vr_wait *w, bool fork)
{
    (void)fork;
    free(w);
}

static const struct vr_wait_ops wait_ops = { wait_retry, wait_forget };

struct settle_key {
    int dev;
    size_t padded;
};

static bool settle_match(const struct vr_wait *w, const void *arg)
{
    const struct cache_wait *cw = (const struct cache_wait *)w;
    const struct settle_key *key = arg;
    return (key->dev < 0 || cw->device == key->dev) && (key->padded == 0 || cw->padded == key->padded);
}

/* Entries of `dev` (-1: any) and `padded` bytes (0: any) whose
 * stream-ordered free completed become idle. */
void vr_cache_settle(int dev, size_t padded)
{
    struct settle_key key = { dev, padded };
    vr_waitq_drain_if(VR_WAIT_MASK(VR_WAIT_CACHE), VR_WAIT_QUERY, settle_match, &key);
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
            serve_locked(pick, out);
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
                take_out_locked(i, &k);
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
            take_out_locked(i, out);
            found = true;
        }
    unlock();
    return found;
}

/* Forgotten without a release: the driver took it back (abandon), or it is
 * the parent's (a forked child). The reminders go with the queue's abandon
 * or after-fork, after this (alloc.c): they never look at the entries. */
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

/* Bytes summed right, each entry within the budget, no base or reminder
 * twice, an event exactly with a reminder, every listed reminder queued. */
static bool valid_locked(void)
{
    VR_ASSERT_HELD(VR_RANK_CACHE);
    uint64_t sum = 0;
    size_t waiting = 0;
    for (size_t i = 0; i < nkept; i++) {
        const struct kept *k = &kept[i];
        if (!k->rec.vmm || k->rec.padded == 0 || k->age >= kept_age ||
            !k->done != !k->wait || (k->busy && !k->wait))
            return false;
        for (size_t j = i + 1; j < nkept; j++)
            if (kept[j].rec.base == k->rec.base || (k->wait && kept[j].wait == k->wait))
                return false;
        sum += k->rec.padded;
        waiting += k->wait != NULL;
    }
    return sum == kept_bytes && kept_bytes <= vr_alloc_cfg.vmm_cache &&
           atomic_load(&kept_hint) == nkept &&
           waiting <= vr_waitq_count(VR_WAIT_MASK(VR_WAIT_CACHE));
}

bool vr_cache_valid(void)
{
    lock();
    bool ok = valid_locked();
    unlock();
    return ok;
}
