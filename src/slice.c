#include "slice.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "driver.h"
#include "err.h"
#include "stats.h"

struct slot {
    CUdeviceptr va;
    size_t size;
    struct vr_slice_bind cur;
    struct vr_slice_bind target;
};

struct range {
    CUdeviceptr lo, hi, va;
    size_t slot;
};

struct vr_slices {
    CUdeviceptr base;
    size_t total;
    size_t n;
    struct slot *slots;
    struct range *map; /* sorted by lo: the target bindings */
    size_t nmap;
    bool retargeted;   /* some target may differ from what is mapped */
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
    s->map = calloc(n ? n : 1, sizeof *s->map);
    if (!s->slots || !s->map) {
        vr_slices_destroy(s);
        return -ENOMEM;
    }
    size_t gran = vr_alloc_granularity();
    CUresult r = vr_real.cuMemAddressReserve(&s->base, total, gran, 0, 0);
    if (r != CUDA_SUCCESS) {
        s->base = 0;
        vr_slices_destroy(s);
        return vr_err_cu(r);
    }
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

static void unmap_slot(struct slot *sl)
{
    if (!sl->cur.id)
        return;
    vr_real.cuMemUnmap(sl->va, sl->cur.padded);
    memset(&sl->cur, 0, sizeof sl->cur);
    vr_stat_add(VR_C_slices_bound, -1);
}

void vr_slices_destroy(struct vr_slices *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        unmap_slot(&s->slots[i]);
    if (s->base)
        vr_real.cuMemAddressFree(s->base, s->total);
    free(s->slots);
    free(s->map);
    free(s);
}

size_t vr_slices_count(const struct vr_slices *s) { return s->n; }
size_t vr_slices_reserved(const struct vr_slices *s) { return s->total; }
CUdeviceptr vr_slices_va(const struct vr_slices *s, size_t slot) { return s->slots[slot].va; }

static int by_lo(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void rebuild_map(struct vr_slices *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct vr_slice_bind *t = &s->slots[i].target;
        if (t->id)
            s->map[n++] = (struct range){t->base, t->base + t->size, s->slots[i].va, i};
    }
    qsort(s->map, n, sizeof *s->map, by_lo);
    s->nmap = n;
}

static int map_slot(struct slot *sl, const struct vr_slice_bind *b)
{
    CUmemAccessDesc access[64];
    CUresult r = vr_real.cuMemMap(sl->va, b->padded, 0, b->handle, 0);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    r = vr_real.cuMemSetAccess(sl->va, b->padded, access, vr_alloc_access(access, 64));
    if (r != CUDA_SUCCESS) {
        vr_real.cuMemUnmap(sl->va, b->padded);
        return vr_err_cu(r);
    }
    sl->cur = *b;
    vr_stat_add(VR_C_slices_bound, 1);
    return 0;
}

int vr_slices_bind(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b)
{
    struct slot *sl = &s->slots[slot];
    if (sl->cur.id || b->padded > sl->size)
        return -EINVAL;
    int rc = map_slot(sl, b);
    if (rc == 0) {
        sl->target = *b;
        rebuild_map(s);
    }
    return rc;
}

/* Few slots per exec: a binary search over a short sorted array. */
static const struct range *lookup(const struct vr_slices *s, uint64_t word)
{
    size_t lo = 0, hi = s->nmap;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->map[mid].lo <= word)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && word < s->map[lo - 1].hi)
        return &s->map[lo - 1];
    return NULL;
}

uint64_t vr_slices_translate(const struct vr_slices *s, uint64_t word)
{
    const struct range *r = lookup(s, word);
    return r ? r->va + (word - r->lo) : word;
}

int vr_slices_target_slot(const struct vr_slices *s, uint64_t word)
{
    const struct range *r = lookup(s, word);
    return r ? (int)r->slot : -1;
}

bool vr_slices_covers(const struct vr_slices *s, uint64_t word)
{
    return word >= s->base && word - s->base < s->total;
}

int vr_slices_retarget(struct vr_slices *s, size_t slot, const struct vr_slice_bind *b)
{
    struct slot *sl = &s->slots[slot];
    if (sl->target.id == b->id)
        return 0;
    if (b->padded > sl->size)
        return -E2BIG;
    if (sl->target.id != sl->cur.id)
        return -EBUSY;
    for (size_t i = 0; i < s->n; i++)
        if (s->slots[i].target.id == b->id)
            return -EEXIST;
    sl->target = *b;
    s->retargeted = true;
    rebuild_map(s);
    return 0;
}

/* Asked at every launch: a flag, not a walk over the slots. */
bool vr_slices_pending(const struct vr_slices *s)
{
    return s->retargeted;
}

size_t vr_slices_apply(struct vr_slices *s, vr_slice_change_fn changed, void *ctx)
{
    size_t n = 0;
    bool remap = false;
    for (size_t i = 0; i < s->n; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->target.id == sl->cur.id)
            continue;
        struct vr_slice_bind from = sl->cur;
        unmap_slot(sl);
        int rc = 0;
        if (sl->target.id) {
            rc = map_slot(sl, &sl->target);
            if (rc != 0) {
                memset(&sl->target, 0, sizeof sl->target);
                remap = true;
            }
        }
        if (changed)
            changed(ctx, i, &from, &sl->target, rc);
        n++;
    }
    if (remap)
        rebuild_map(s);
    s->retargeted = false;
    return n;
}

bool vr_slices_drop(struct vr_slices *s, uint64_t id)
{
    bool hit = false;
    for (size_t i = 0; i < s->n; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->cur.id == id) {
            unmap_slot(sl);
            hit = true;
        }
        if (sl->target.id == id) {
            /* A pending rebind to a freed allocation: keep what is mapped. */
            sl->target = sl->cur;
            hit = true;
        }
    }
    if (hit) {
        rebuild_map(s);
        s->retargeted = false; /* frees are rare: recount exactly */
        for (size_t i = 0; i < s->n; i++)
            s->retargeted |= s->slots[i].target.id != s->slots[i].cur.id;
    }
    return hit;
}

void vr_slices_reaccess(struct vr_slices *s)
{
    CUmemAccessDesc access[64];
    size_t n = vr_alloc_access(access, 64);
    for (size_t i = 0; i < s->n; i++)
        if (s->slots[i].cur.id)
            vr_real.cuMemSetAccess(s->slots[i].va, s->slots[i].cur.padded, access, n);
}

bool vr_slices_holds(const struct vr_slices *s, uint64_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->slots[i].cur.id == id || s->slots[i].target.id == id)
            return true;
    return false;
}
