/* alloc_reg: the registry of device allocations (alloc.h: vr_alloc_find,
 * vr_alloc_changed_since) and the padding budget.
 *
 * Sorted by base; records never overlap (VMM ones over their whole
 * reservation). One rwlock (rank VR_RANK_REG), a leaf: nothing is called
 * under it but memory moves; lookups copy a record out. Every change is
 * checked whole (vr_reg_valid) at VR_CHECK_LEVEL 3.
 */
#include "alloc_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "lockrank.h"

static pthread_rwlock_t reg_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct vr_alloc_info *recs;
static size_t nrecs, caprecs;
static uint64_t next_id = 1;
static uint64_t padding_used; /* under reg_lock; observe mode simulates it too */

static void read_lock(void)
{
    vr_rank_take(VR_RANK_REG);
    pthread_rwlock_rdlock(&reg_lock);
}

static void write_lock(void)
{
    vr_rank_take(VR_RANK_REG);
    pthread_rwlock_wrlock(&reg_lock);
}

static void unlock(void)
{
    pthread_rwlock_unlock(&reg_lock);
    vr_rank_drop(VR_RANK_REG);
}

static bool valid_locked(void);

static size_t span(const struct vr_alloc_info *r)
{
    return r->vmm ? r->reserved : r->size;
}

/* Index of the first record with base > addr. */
static size_t upper_bound(CUdeviceptr addr)
{
    VR_ASSERT_HELD(VR_RANK_REG);
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
    VR_ASSERT_HELD(VR_RANK_REG);
    VR_ASSERT(lo < hi);
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
    read_lock();
    uint64_t g = atomic_load_explicit(&changes_gen, memory_order_relaxed);
    int n = -ENOBUFS;
    if (g - since <= VR_ALLOC_CHANGES) {
        n = (int)(g - since);
        for (int i = 0; i < n; i++)
            out[i] = changes[(since + (uint64_t)i) % VR_ALLOC_CHANGES];
    }
    unlock();
    *now = g;
    return n;
}

static void remove_at_locked(size_t at)
{
    VR_ASSERT_HELD(VR_RANK_REG);
    VR_ASSERT(at < nrecs);
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
    VR_ASSERT_HELD(VR_RANK_REG);
    VR_ASSERT(rec->base != 0 && span(rec) >= rec->size);
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
        rec->serial = rec->id = next_id++;
    else if (rec->serial == 0)
        rec->serial = next_id++; /* the cache's memory under its old id */
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
    read_lock();
    const struct vr_alloc_info *r = holder(addr);
    if (r && addr - r->base < r->size) {
        *out = *r;
        rc = 0;
    }
    unlock();
    return rc;
}

/* Like vr_alloc_find, but addr may lie anywhere in a VMM reservation. */
int vr_reg_find_span(CUdeviceptr addr, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    read_lock();
    const struct vr_alloc_info *r = holder(addr);
    if (r) {
        *out = *r;
        rc = 0;
    }
    unlock();
    return rc;
}

/* Removes the allocation starting at `base`, so no new slice can pick it up. */
int vr_reg_detach(CUdeviceptr base, struct vr_alloc_info *out)
{
    int rc = -ENOENT;
    write_lock();
    struct vr_alloc_info *r = holder(base);
    if (r && r->base == base) {
        *out = *r;
        remove_at_locked((size_t)(r - recs));
        rc = 0;
    }
    VR_ASSERT_EXPENSIVE(valid_locked());
    unlock();
    return rc;
}

void vr_reg_reattach(const struct vr_alloc_info *rec)
{
    struct vr_alloc_info copy = *rec;
    write_lock();
    if (insert_locked(&copy) == 0)
        padding_used += padding_of(&copy);
    VR_ASSERT_EXPENSIVE(valid_locked());
    unlock();
}

/* Reserves the padding budget up front so concurrent allocations cannot
 * overshoot it together. */
bool vr_reg_take_padding(uint64_t pad)
{
    bool ok;
    write_lock();
    ok = padding_used + pad >= padding_used && padding_used + pad <= vr_alloc_cfg.max_padding;
    if (ok)
        padding_used += pad;
    unlock();
    return ok;
}

void vr_reg_give_padding(uint64_t pad)
{
    write_lock();
    VR_ASSERT(pad <= padding_used);
    padding_used -= pad <= padding_used ? pad : padding_used;
    unlock();
}

int vr_reg_insert(struct vr_alloc_info *rec)
{
    write_lock();
    int rc = insert_locked(rec);
    VR_ASSERT_EXPENSIVE(valid_locked());
    unlock();
    return rc;
}

CUdeviceptr vr_reg_vmm_of_context(CUcontext ctx)
{
    CUdeviceptr base = 0;
    read_lock();
    for (size_t i = 0; i < nrecs && !base; i++)
        if (recs[i].vmm && recs[i].ctx == ctx)
            base = recs[i].base;
    unlock();
    return base;
}

struct vr_reg_span *vr_reg_vmm_of_device(int owner, size_t *n)
{
    read_lock();
    *n = 0;
    struct vr_reg_span *out = malloc((nrecs + 1) * sizeof *out);
    for (size_t i = 0; out && i < nrecs; i++)
        if (recs[i].vmm && recs[i].device == owner)
            out[(*n)++] = (struct vr_reg_span){ recs[i].base, recs[i].padded };
    unlock();
    return out;
}

/* Sorted and disjoint over their spans, ids and serials nonzero, below
 * next_id and unique (a cached id comes back, so every pair is compared,
 * up to a bound that keeps the check bounded), each record's own bytes
 * within its span, padding within the sum. */
static bool valid_locked(void)
{
    VR_ASSERT_HELD(VR_RANK_REG);
    uint64_t pad = 0;
    for (size_t i = 0; i < nrecs; i++) {
        const struct vr_alloc_info *r = &recs[i];
        if (r->id == 0 || r->id >= next_id || r->serial == 0 || r->serial >= next_id ||
            r->size > span(r) || r->padded < r->size)
            return false;
        for (size_t j = 0; j < i && i < 1024; j++)
            if (recs[j].id == r->id || recs[j].serial == r->serial)
                return false;
        if (r->vmm && (r->reserved < r->padded || !r->eligible))
            return false;
        if (i > 0 && (recs[i - 1].base + span(&recs[i - 1]) > r->base || recs[i - 1].id == r->id))
            return false;
        pad += padding_of(r);
    }
    return pad <= padding_used;
}

bool vr_reg_valid(void)
{
    read_lock();
    bool ok = valid_locked();
    unlock();
    return ok;
}

void vr_reg_after_fork(void)
{
    reg_lock = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
}
