#include "slice.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "capture_guard.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "stats.h"
#include "vmm.h"
#include "xlat.h"

struct slot {
    CUdeviceptr va;
    size_t size;
    struct vr_slice_bind cur;
    struct vr_slice_bind target;
};

/* A view: the ranges of one kind of binding, sorted by lo (xlat.h). */
struct map {
    struct vr_xlat_range *r;
    size_t n;
};

struct vr_slices {
    struct vr_slices_hot hot; /* first: slice.h reads it */
    CUdeviceptr base;
    size_t total;
    size_t n;
    struct slot *slots;
    struct map cur, target; /* sorted by lo */
};

int vr_slices_create(struct vr_slices **out, const size_t *sizes, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (total + sizes[i] < total)
            return -E2BIG;
        total += sizes[i];
    }
    struct vr_slices *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->slots = calloc(n ? n : 1, sizeof *s->slots);
    s->cur.r = calloc(n ? n : 1, sizeof *s->cur.r);
    s->target.r = calloc(n ? n : 1, sizeof *s->target.r);
    if (!s->slots || !s->cur.r || !s->target.r) {
        vr_slices_destroy(s);
        return -ENOMEM;
    }
    /* Every VMM call in this file is the shim's own, made inside an allowed
     * program call (a launch, an update): relaxed (capture_guard.h). */
    vr_capture_relax();
    CUresult r = vr_real.cuMemAddressReserve(&s->base, total, vr_alloc_granularity(), 0, 0);
    vr_capture_restore();
    if (r != CUDA_SUCCESS) {
        s->base = 0;
        vr_slices_destroy(s);
        return vr_err_cu(r);
    }
    VR_ASSERT(s->base != 0);
    s->total = total;
    s->n = n;
    CUdeviceptr va = s->base;
    for (size_t i = 0; i < n; i++) {
        s->slots[i].va = va;
        s->slots[i].size = sizes[i];
        va += sizes[i];
    }
    *out = s;
    return 0;
}

static int unmap_slot(struct slot *sl)
{
    if (!sl->cur.id)
        return 0;
    uint64_t t0 = vr_now_ns();
    vr_capture_relax();
    CUresult r = vr_real.cuMemUnmap(sl->va, sl->cur.padded);
    vr_capture_restore();
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    vr_cost_note(VR_COST_UNMAP, t0);
    memset(&sl->cur, 0, sizeof sl->cur);
    vr_stat_add(VR_C_slices_bound, -1);
    return 0;
}

int vr_slices_destroy(struct vr_slices *s)
{
    if (!s)
        return 0;
    int rc = 0;
    for (size_t i = 0; i < s->n; i++) {
        int u = unmap_slot(&s->slots[i]);
        if (u != 0 && rc == 0)
            rc = u;
    }
    if (rc == 0 && s->base) {
        vr_capture_relax();
        CUresult r = vr_real.cuMemAddressFree(s->base, s->total);
        vr_capture_restore();
        if (r != CUDA_SUCCESS)
            return vr_err_cu(r);
        s->base = 0;
    }
    if (rc != 0)
        return rc;
    vr_slices_forget(s);
    return 0;
}

size_t vr_slices_unmap_gone(struct vr_slices *s, bool (*live)(const struct vr_slice_bind *b),
                            int *rc)
{
    size_t left = 0;
    *rc = 0;
    for (size_t i = 0; i < s->n; i++) {
        struct slot *sl = &s->slots[i];
        if (!sl->cur.id)
            continue;
        int u = live(&sl->cur) ? 1 : unmap_slot(sl);
        if (u < 0 && *rc == 0)
            *rc = u;
        left += u != 0;
    }
    return left;
}

void vr_slices_forget(struct vr_slices *s)
{
    if (!s)
        return;
    free(s->slots);
    free(s->cur.r);
    free(s->target.r);
    free(s);
}

size_t vr_slices_count(const struct vr_slices *s) { return s->n; }
size_t vr_slices_reserved(const struct vr_slices *s) { return s->total; }
CUdeviceptr vr_slices_va(const struct vr_slices *s, size_t slot) { return s->slots[slot].va; }
size_t vr_slices_size(const struct vr_slices *s, size_t slot) { return s->slots[slot].size; }

const struct vr_slice_bind *vr_slices_current(const struct vr_slices *s, size_t slot)
{
    return &s->slots[slot].cur;
}

const struct vr_slice_bind *vr_slices_target(const struct vr_slices *s, size_t slot)
{
    return &s->slots[slot].target;
}

static int by_lo(const void *a, const void *b)
{
    const struct vr_xlat_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Bindings change only on remaps and retargets, never on the hot path. */
static void rebuild(struct vr_slices *s)
{
    s->cur.n = s->target.n = 0;
    s->hot.npending = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct slot *sl = &s->slots[i];
        if (sl->cur.id)
            s->cur.r[s->cur.n++] = (struct vr_xlat_range){sl->cur.base,
                                                          sl->cur.base + sl->cur.size, sl->va, i};
        if (sl->target.id)
            s->target.r[s->target.n++] = (struct vr_xlat_range){sl->target.base,
                                                                sl->target.base + sl->target.size,
                                                                sl->va, i};
        s->hot.npending += sl->cur.id != sl->target.id;
    }
    qsort(s->cur.r, s->cur.n, sizeof *s->cur.r, by_lo);
    qsort(s->target.r, s->target.n, sizeof *s->target.r, by_lo);
    VR_ASSERT_EXPENSIVE(vr_slices_valid(s));
}

/* A view: sorted by lo, disjoint (see below), each range pointing at its
 * own slot's window and matching that slot's binding. */
static bool view_valid(const struct vr_slices *s, const struct map *m, bool target)
{
    if (m->n > s->n)
        return false;
    for (size_t i = 0; i < m->n; i++) {
        const struct vr_xlat_range *r = &m->r[i];
        if (r->slot >= s->n || r->lo > r->hi || r->va != s->slots[r->slot].va)
            return false;
        const struct vr_slice_bind *b = target ? &s->slots[r->slot].target
                                               : &s->slots[r->slot].cur;
        if (!b->id || b->base != r->lo || b->size != r->hi - r->lo)
            return false;
        /* Disjoint but for a shared end point (native allocations may abut:
         * no guard gap between them) or one allocation bound in two slots
         * (anchors are positions, so both hold the same range). */
        const struct vr_xlat_range *p = i > 0 ? &m->r[i - 1] : NULL;
        if (p && p->lo > r->lo)
            return false;
        if (p && p->hi > r->lo && !(p->lo == r->lo && p->hi == r->hi))
            return false;
    }
    return true;
}

bool vr_slices_valid(const struct vr_slices *s)
{
    size_t pending = 0;
    CUdeviceptr va = s->base;
    for (size_t i = 0; i < s->n; i++) {
        const struct slot *sl = &s->slots[i];
        if (sl->va != va || sl->cur.padded > sl->size ||
            (sl->target.id && sl->target.padded > sl->size))
            return false;
        va += sl->size;
        pending += sl->cur.id != sl->target.id;
    }
    return va - s->base == s->total && pending == s->hot.npending &&
           view_valid(s, &s->cur, false) && view_valid(s, &s->target, true);
}

/* The mapping of b into sl, not yet accessible: sl->cur = b on success. */
static int map_only(struct slot *sl, const struct vr_slice_bind *b)
{
    uint64_t t0 = vr_now_ns();
    CUresult r = vr_real.cuMemMap(sl->va, b->padded, 0, b->handle, 0);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    vr_cost_note(VR_COST_MAP, t0);
    sl->cur = *b;
    return 0;
}

/* The access of a just-mapped slot failed: unmapping a mapping nobody can
 * access yet cannot race a kernel; if even that fails the slot keeps it
 * (bound, mapped) and a later remap retries. */
static void access_failed(struct slot *sl)
{
    if (vr_real.cuMemUnmap(sl->va, sl->cur.padded) == CUDA_SUCCESS)
        memset(&sl->cur, 0, sizeof sl->cur);
    else
        vr_stat_add(VR_C_slices_bound, 1);
}

/* cuMemSetAccess of [va, va + bytes) for the device of b. */
static CUresult set_access(CUdeviceptr va, size_t bytes, const struct vr_slice_bind *b)
{
    CUmemAccessDesc access[VR_MAX_DEVICES];
    uint64_t t0 = vr_now_ns();
    CUresult r = vr_real.cuMemSetAccess(va, bytes, access,
                                        vr_alloc_access_for(b->device, access, VR_MAX_DEVICES));
    if (r == CUDA_SUCCESS)
        vr_cost_note(VR_COST_ACCESS, t0);
    return r;
}

/* Access for the n slots from sl on, each just mapped (sl->cur) for one
 * device, each but the last filling its window: adjacent whole mappings,
 * which the driver takes as one range ("a fully mapped address range
 * containing all allocations", cuda.h). Where the one call fails, slot by
 * slot; a slot that still fails is unmapped again and its error is in
 * rc[k]. Returns the calls made. */
static size_t grant(struct slot *sl, size_t n, int *rc)
{
    size_t bytes = 0;
    for (size_t k = 0; k < n; k++) {
        VR_ASSERT_INTERNAL(k + 1 == n || (sl[k].cur.padded == sl[k].size &&
                                          sl[k + 1].va == sl[k].va + sl[k].size &&
                                          sl[k + 1].cur.device == sl[k].cur.device));
        bytes += sl[k].cur.padded;
    }
    CUresult r = set_access(sl->va, bytes, &sl->cur);
    if (r == CUDA_SUCCESS) {
        vr_stat_add(VR_C_slices_bound, (long long)n);
        return 1;
    }
    size_t calls = 1;
    for (size_t k = 0; k < n; k++) {
        if (n > 1) {
            calls++;
            r = set_access(sl[k].va, sl[k].cur.padded, &sl[k].cur);
        }
        if (r == CUDA_SUCCESS) {
            vr_stat_add(VR_C_slices_bound, 1);
            continue;
        }
        access_failed(&sl[k]);
        rc[k] = vr_err_cu(r);
    }
    return calls;
}

int vr_slices_bind(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b)
{
    VR_ASSERT(slot < s->n && b->id != 0);
    struct slot *sl = &s->slots[slot];
    if (sl->cur.id || b->padded > sl->size)
        return -EINVAL;
    vr_capture_relax();
    int rc = map_only(sl, b);
    if (rc == 0)
        grant(sl, 1, &rc);
    vr_capture_restore();
    if (rc == 0)
        sl->target = *b;
    rebuild(s);
    return rc;
}

static const struct vr_xlat_range *lookup(const struct map *m, uint64_t word)
{
    return vr_xlat_lookup(m->r, m->n, word);
}

static const struct vr_xlat_range *lookup_view(const struct vr_slices *s, uint64_t word, enum vr_view view)
{
    if (view == VR_VIEW_TARGET)
        return lookup(&s->target, word);
    const struct vr_xlat_range *r = lookup(&s->cur, word);
    if (r && view == VR_VIEW_STABLE && s->slots[r->slot].target.id != s->slots[r->slot].cur.id)
        return NULL;
    return r;
}

uint64_t vr_slices_translate(const struct vr_slices *s, uint64_t word, enum vr_view view)
{
    const struct vr_xlat_range *r = lookup_view(s, word, view);
    return r ? r->va + (word - r->lo) : word;
}

int vr_slices_slot_of(const struct vr_slices *s, uint64_t word, enum vr_view view)
{
    const struct vr_xlat_range *r = lookup_view(s, word, view);
    return r ? (int)r->slot : -1;
}

int vr_slices_slot_at(const struct vr_slices *s, uint64_t va)
{
    if (va < s->base || va - s->base > s->total)
        return -1;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->slots[mid].va <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 ? (int)(lo - 1) : -1;
}

int vr_slices_retarget(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b)
{
    VR_ASSERT(slot < s->n);
    struct slot *sl = &s->slots[slot];
    if (sl->target.id == b->id)
        return 0;
    if (b->id && b->padded > sl->size)
        return -E2BIG;
    if (b->id)
        sl->target = *b;
    else
        memset(&sl->target, 0, sizeof sl->target);
    rebuild(s);
    return 0;
}

void vr_slices_cancel(struct vr_slices *s, size_t slot)
{
    VR_ASSERT(slot < s->n);
    struct slot *sl = &s->slots[slot];
    if (sl->target.id == sl->cur.id)
        return;
    sl->target = sl->cur;
    rebuild(s);
}

uint64_t vr_slices_home(const struct vr_slices *s, size_t slot, uint64_t word, bool pending_ok)
{
    VR_ASSERT_INTERNAL(slot < s->n);
    const struct slot *sl = &s->slots[slot];
    if (!sl->target.id || word < sl->target.base || word - sl->target.base > sl->target.size ||
        (!pending_ok && sl->target.id != sl->cur.id))
        return 0;
    return sl->va + (word - sl->target.base);
}

bool vr_slices_slot_pending(const struct vr_slices *s, size_t slot)
{
    return s->slots[slot].target.id != s->slots[slot].cur.id;
}

/* One slot's unmap and map (not its access): true when it was mapped anew
 * and waits for grant(). */
static bool remap_begin(struct slot *sl, int *rc)
{
    *rc = 0;
    if (sl->target.id == sl->cur.id)
        return false;
    *rc = unmap_slot(sl);
    if (*rc != 0) {
        /* A rebind is given up. An unbind is not: the allocation is gone and
         * its address may be handed out again, so the slot stays pending,
         * outside the stable view, until a later remap unmaps it. */
        if (sl->target.id)
            sl->target = sl->cur;
        return false;
    }
    if (!sl->target.id)
        return false;
    *rc = map_only(sl, &sl->target);
    if (*rc != 0)
        sl->target = sl->cur; /* unbound */
    return *rc == 0;
}

/* grant() for a run of remap_many: a slot whose access was refused gives
 * its rebind up (unbound, or still holding what it could not unmap). */
static size_t grant_run(struct vr_slices *s, const size_t *slots, size_t len, int *rc)
{
    size_t calls = grant(&s->slots[slots[0]], len, rc);
    for (size_t k = 0; k < len; k++)
        if (rc[k] != 0)
            s->slots[slots[k]].target = s->slots[slots[k]].cur;
    return calls;
}

/* Whether bound slot b continues a run of bound slots that ends at a, for
 * one cuMemSetAccess over both (grant()): adjacent, a's mapping filling its
 * window, one device. */
static bool adjoins(const struct vr_slices *s, size_t a, size_t b)
{
    const struct slot *x = &s->slots[a], *y = &s->slots[b];
    return b == a + 1 && y->cur.id && x->cur.padded == x->size && y->cur.device == x->cur.device;
}

void vr_slices_remap_many(struct vr_slices *s, const size_t *slots, size_t n, int *rc,
                          struct vr_remap_tally *tally)
{
    size_t calls = 0, mapped = 0, run = 0, len = 0; /* waiting for access: slots[run..run+len) */
    vr_capture_relax();
    for (size_t i = 0; i < n; i++) {
        VR_ASSERT(slots[i] < s->n && (i == 0 || slots[i] > slots[i - 1]));
        bool fresh = remap_begin(&s->slots[slots[i]], &rc[i]);
        if (len && !(fresh && adjoins(s, slots[run + len - 1], slots[i]))) {
            calls += grant_run(s, slots + run, len, rc + run);
            len = 0;
        }
        if (fresh) {
            if (!len)
                run = i;
            len++;
            mapped++;
        }
    }
    if (len)
        calls += grant_run(s, slots + run, len, rc + run);
    vr_capture_restore();
    rebuild(s);
    if (tally) {
        tally->slots += mapped;
        tally->calls += calls;
    }
}

int vr_slices_remap(struct vr_slices *s, size_t slot)
{
    int rc;
    vr_slices_remap_many(s, &slot, 1, &rc, NULL);
    return rc;
}

int vr_slices_find(const struct vr_slices *s, uint64_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->slots[i].cur.id == id || s->slots[i].target.id == id)
            return (int)i;
    return -1;
}

void vr_slices_reaccess(struct vr_slices *s)
{
    vr_capture_relax();
    for (size_t i = 0; i < s->n;) {
        if (!s->slots[i].cur.id) {
            i++;
            continue;
        }
        size_t j = i + 1, bytes = s->slots[i].cur.padded;
        for (; j < s->n && adjoins(s, j - 1, j); j++)
            bytes += s->slots[j].cur.padded;
        /* A refused call leaves the access a slot had; slot by slot, each
         * that the driver takes gets the peers. */
        if (set_access(s->slots[i].va, bytes, &s->slots[i].cur) != CUDA_SUCCESS && j > i + 1)
            for (size_t k = i; k < j; k++)
                set_access(s->slots[k].va, s->slots[k].cur.padded, &s->slots[k].cur);
        i = j;
    }
    vr_capture_restore();
}
