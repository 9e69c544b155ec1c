#include "layout.h"
#include "lockrank.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "err.h"

/* Kernels are far fewer than calls: a small open-addressing map guarded by
 * a rwlock so lookups from many threads do not serialize. Unloads are rare:
 * eviction deletes in place (backward shift) under the write lock. */
struct entry {
    const void *key;          /* a CUfunction or a CUkernel */
    struct vr_layout *layout;
    const void *owner;        /* its CUmodule / CUlibrary; NULL: unknown */
    int rc;                   /* cached failure: ask the driver once */
    bool kernel;              /* key is a CUkernel */
};

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

static void read_lock(void)
{
    vr_rank_take(VR_RANK_LAYOUT);
    pthread_rwlock_rdlock(&lock);
}

static void write_lock(void)
{
    vr_rank_take(VR_RANK_LAYOUT);
    pthread_rwlock_wrlock(&lock);
}

static void unlock(void)
{
    pthread_rwlock_unlock(&lock);
    vr_rank_drop(VR_RANK_LAYOUT);
}
static struct entry *table;
static size_t cap, used;
/* Bumped by every eviction: a layout read from the driver while an unload
 * ran may describe the handle's previous function, so it is not cached. */
_Atomic uint64_t vr_layout_gen;

/* Evicted layouts, kept reachable until exit (the lifetime rule in
 * layout.h). Guarded by the write side of `lock`. */
static struct vr_layout **retired;
static size_t nretired, retired_cap;

#define VR_MAX_PARAMS 4096

int vr_layout_build(const uint32_t *offset, const uint32_t *size, uint32_t nparams,
                    struct vr_layout **out)
{
    uint32_t nwords = 0, bytes = 0;
    for (uint32_t i = 0; i < nparams; i++) {
        if (offset[i] + size[i] < offset[i])
            return -EINVAL;
        if (size[i] >= 8)
            for (uint32_t w = (offset[i] + 7) & ~7u; w + 8 <= offset[i] + size[i]; w += 8)
                nwords++;
        if (offset[i] + size[i] > bytes)
            bytes = offset[i] + size[i];
    }
    /* Comparison units: whole 8-byte arguments, the 8-byte chunks of larger
     * ones, whole 4-byte arguments, then whatever is left (< 8 bytes each). */
    uint32_t nunits = 0;
    for (uint32_t i = 0; i < nparams; i++)
        nunits += size[i] == 4 ? 1 : size[i] / 8 + (size[i] % 8 != 0);
    struct vr_layout *l = malloc(sizeof *l + nunits * sizeof(struct vr_arg) +
                                 (2 * (size_t)nparams + nwords) * sizeof(uint32_t));
    if (!l)
        return -ENOMEM;
    struct vr_arg *args = (struct vr_arg *)(l + 1);
    uint32_t *off = (uint32_t *)(args + nunits), *sz = off + nparams, *words = sz + nparams;
    uint32_t na = 0, count[3] = {0, 0, 0};
    for (uint32_t cls = 0; cls < 4; cls++)
        for (uint32_t i = 0; i < nparams; i++) {
            uint32_t sz8 = size[i] == 4 ? 0 : size[i] / 8 * 8;
            if (cls == 0 && size[i] == 8)
                args[na++] = (struct vr_arg){i, offset[i], 0, 8};
            for (uint32_t k = 0; cls == 1 && size[i] > 8 && k < sz8; k += 8)
                args[na++] = (struct vr_arg){i, offset[i] + k, k, 8};
            if (cls == 2 && size[i] == 4)
                args[na++] = (struct vr_arg){i, offset[i], 0, 4};
            if (cls == 3 && size[i] != 4 && size[i] % 8)
                args[na++] = (struct vr_arg){i, offset[i] + sz8, sz8, size[i] % 8};
            if (cls < 3)
                count[cls] = na;
        }
    memcpy(off, offset, nparams * sizeof *off);
    memcpy(sz, size, nparams * sizeof *sz);
    uint32_t n = 0;
    for (uint32_t i = 0; i < nparams; i++)
        if (size[i] >= 8)
            for (uint32_t w = (offset[i] + 7) & ~7u; w + 8 <= offset[i] + size[i]; w += 8)
                words[n++] = w;
    uint64_t filled = 0;
    for (uint32_t i = 0; i < nparams; i++)
        filled += size[i];
    l->nparams = nparams;
    l->bytes = bytes;
    l->gaps = filled != bytes;
    l->nwords = nwords;
    l->offset = off;
    l->size = sz;
    l->words = words;
    l->args = args;
    l->end8 = args + count[1];
    l->end4 = args + count[2];
    l->end = args + nunits;
    uint32_t n8 = count[1], n4 = count[2] - count[1];
    l->plan = count[2] != nunits                          ? VR_PLAN_ODD
              : n8 > VR_PLAN_MAX8 || n4 > VR_PLAN_MAX4 ? VR_PLAN_LOOP
                                                        : (uint8_t)VR_PLAN(n8, n4);
    *out = l;
    return 0;
}

void vr_layout_free(struct vr_layout *l)
{
    free(l);
}

static int read_layout(CUfunction func, CUkernel kern, struct vr_layout **out)
{
    uint32_t off[64], sz[64];
    uint32_t *offs = off, *sizes = sz;
    size_t capn = 64;
    uint32_t n = 0;
    int rc = 0;
    for (;; n++) {
        size_t o = 0, s = 0;
        CUresult r;
        if (func)
            r = vr_real.cuFuncGetParamInfo ? vr_real.cuFuncGetParamInfo(func, n, &o, &s)
                                           : CUDA_ERROR_NOT_SUPPORTED;
        else
            r = vr_real.cuKernelGetParamInfo ? vr_real.cuKernelGetParamInfo(kern, n, &o, &s)
                                             : CUDA_ERROR_NOT_SUPPORTED;
        if (r == CUDA_ERROR_INVALID_VALUE && n > 0)
            break; /* past the last argument */
        if (r == CUDA_ERROR_INVALID_VALUE && n == 0) {
            /* Either no arguments or a bad handle: both leave nothing to scan. */
            break;
        }
        if (r != CUDA_SUCCESS) {
            rc = vr_err_cu(r);
            goto out;
        }
        if (n >= VR_MAX_PARAMS || o > UINT32_MAX || s > UINT32_MAX) {
            rc = -E2BIG;
            goto out;
        }
        if (n == capn) {
            capn *= 2;
            uint32_t *no = offs == off ? malloc(capn * sizeof *no) : realloc(offs, capn * sizeof *no);
            if (no && offs == off)
                memcpy(no, off, sizeof off);
            if (!no) { rc = -ENOMEM; goto out; }
            offs = no;
            uint32_t *ns = sizes == sz ? malloc(capn * sizeof *ns) : realloc(sizes, capn * sizeof *ns);
            if (ns && sizes == sz)
                memcpy(ns, sz, sizeof sz);
            if (!ns) { rc = -ENOMEM; goto out; }
            sizes = ns;
        }
        offs[n] = (uint32_t)o;
        sizes[n] = (uint32_t)s;
    }
    rc = vr_layout_build(offs, sizes, n, out);
out:
    if (offs != off)
        free(offs);
    if (sizes != sz)
        free(sizes);
    return rc;
}

static size_t slot_of(const void *key, size_t mask)
{
    uintptr_t k = (uintptr_t)key;
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    return (size_t)k & mask;
}

static struct entry *find_locked(const void *key)
{
    VR_ASSERT_HELD(VR_RANK_LAYOUT);
    if (!cap)
        return NULL;
    for (size_t i = slot_of(key, cap - 1);; i = (i + 1) & (cap - 1)) {
        if (table[i].key == key)
            return &table[i];
        if (!table[i].key)
            return NULL;
    }
}

static int insert_locked(const struct entry *en)
{
    VR_ASSERT_HELD(VR_RANK_LAYOUT);
    if ((used + 1) * 2 > cap) {
        size_t ncap = cap ? cap * 2 : 64;
        struct entry *nt = calloc(ncap, sizeof *nt);
        if (!nt)
            return -ENOMEM;
        for (size_t i = 0; i < cap; i++) {
            if (!table[i].key)
                continue;
            size_t j = slot_of(table[i].key, ncap - 1);
            while (nt[j].key)
                j = (j + 1) & (ncap - 1);
            nt[j] = table[i];
        }
        free(table);
        table = nt;
        cap = ncap;
    }
    size_t j = slot_of(en->key, cap - 1);
    while (table[j].key)
        j = (j + 1) & (cap - 1);
    table[j] = *en;
    used++;
    return 0;
}

/* A layout that may have been handed out: never freed (layout.h). When the
 * list cannot grow the layout is simply kept unreferenced, which is as
 * safe. */
static void retire_locked(struct vr_layout *l)
{
    VR_ASSERT_HELD(VR_RANK_LAYOUT);
    if (!l)
        return;
    if (nretired == retired_cap) {
        size_t ncap = retired_cap ? retired_cap * 2 : 16;
        struct vr_layout **nr = realloc(retired, ncap * sizeof *nr);
        if (!nr)
            return;
        retired = nr;
        retired_cap = ncap;
    }
    retired[nretired++] = l;
}

/* Deletes slot i, shifting back the entries of its probe run that would
 * otherwise become unreachable. */
static void remove_locked(size_t i)
{
    VR_ASSERT_HELD(VR_RANK_LAYOUT);
    size_t mask = cap - 1;
    for (size_t j = (i + 1) & mask; table[j].key; j = (j + 1) & mask) {
        size_t home = slot_of(table[j].key, mask);
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        table[i] = table[j];
        i = j;
    }
    table[i] = (struct entry){0};
    used--;
}

static void evict(bool kernels, const void *owner, bool all_functions)
{
    write_lock();
    vr_layout_gen++;
    for (size_t i = 0; i < cap;) {
        const struct entry *en = &table[i];
        bool drop = en->key && (en->kernel == kernels
                                    ? !en->owner || en->owner == owner
                                    : all_functions && !en->kernel);
        if (!drop) {
            i++;
            continue;
        }
        retire_locked(en->layout);
        remove_locked(i); /* slot i may now hold a shifted entry: look again */
    }
    unlock();
}

void vr_layout_evict_module(CUmodule mod)
{
    evict(false, mod, false);
}

void vr_layout_evict_library(CUlibrary lib)
{
    evict(true, lib, true);
}

/* The module or library the function belongs to, when the driver says. */
static const void *owner_of(CUfunction func, CUkernel kern)
{
    if (func) {
        CUmodule mod = NULL;
        if (vr_real.cuFuncGetModule && vr_real.cuFuncGetModule(&mod, func) == CUDA_SUCCESS)
            return mod;
        return NULL;
    }
    CUlibrary lib = NULL;
    if (vr_real.cuKernelGetLibrary && vr_real.cuKernelGetLibrary(&lib, kern) == CUDA_SUCCESS)
        return lib;
    return NULL;
}

int vr_layout_get(CUfunction func, CUkernel kern, const struct vr_layout **out)
{
    const void *key = func ? (const void *)func : (const void *)kern;
    if (!key)
        return -EINVAL;
    read_lock();
    struct entry *e = find_locked(key);
    struct entry hit = e ? *e : (struct entry){0};
    uint64_t gen = vr_layout_gen;
    unlock();
    if (!e) {
        /* Read outside the lock: the driver calls may be slow. */
        struct entry fresh = {.key = key, .kernel = func == NULL};
        fresh.rc = read_layout(func, kern, &fresh.layout);
        fresh.owner = owner_of(func, kern);
        write_lock();
        e = find_locked(key);
        if (e) {
            vr_layout_free(fresh.layout); /* another thread won; ours was never seen */
            hit = *e;
        } else if (gen != vr_layout_gen || insert_locked(&fresh) != 0) {
            /* An unload ran meanwhile (or no memory): answer without caching,
             * and keep the layout alive as if evicted. */
            retire_locked(fresh.layout);
            hit = fresh;
        } else {
            hit = fresh;
        }
        unlock();
    }
    if (hit.rc != 0)
        return hit.rc;
    *out = hit.layout;
    return 0;
}

void vr_layout_pack(const struct vr_layout *l, void *const *kernelParams, uint8_t *buf)
{
    if (l->gaps) /* buf served other layouts: its padding must compare equal */
        memset(buf, 0, l->bytes);
    /* Most arguments are pointers and scalars: fixed-size copies the compiler
     * turns into single moves, instead of a memcpy call each. */
    for (uint32_t i = 0; i < l->nparams; i++) {
        uint8_t *dst = buf + l->offset[i];
        switch (l->size[i]) {
        case 8: memcpy(dst, kernelParams[i], 8); break;
        case 4: memcpy(dst, kernelParams[i], 4); break;
        default: memcpy(dst, kernelParams[i], l->size[i]); break;
        }
    }
}

static __attribute__((noinline)) void pack2_rest(const struct vr_arg *u, const struct vr_arg *end,
                                                  void *const *kernelParams, uint8_t *a, uint8_t *b)
{
    for (; u != end; u++) {
        const uint8_t *src = (const uint8_t *)kernelParams[u->index] + u->skew;
        memcpy(a + u->offset, src, u->size);
        memcpy(b + u->offset, src, u->size);
    }
}

/* A plan's units (layout.h) into both buffers, in straight-line code when
 * n8 and n4 are constants: each unit its loads and two stores. */
static inline __attribute__((always_inline)) void pack2_units(const struct vr_arg *u, unsigned n8,
                                                              unsigned n4, void *const *kernelParams,
                                                              uint8_t *a, uint8_t *b)
{
#pragma GCC unroll 8
    for (unsigned j = 0; j < n8; j++) {
        uint32_t index = u[j].index, skew = u[j].skew, offset = u[j].offset;
        uint64_t v;
        memcpy(&v, (const uint8_t *)kernelParams[index] + skew, 8);
        memcpy(a + offset, &v, 8);
        memcpy(b + offset, &v, 8);
    }
#pragma GCC unroll 4
    for (unsigned j = n8; j < n8 + n4; j++) {
        uint32_t index = u[j].index, offset = u[j].offset;
        uint32_t v;
        memcpy(&v, kernelParams[index], 4);
        memcpy(a + offset, &v, 4);
        memcpy(b + offset, &v, 4);
    }
}

/* Every forwarded update packs here: by the layout's plan, one dispatch
 * and straight-line code (the forwarded update's largest share: 56
 * instructions for 4 arguments by the loops below, which now serve only
 * the layouts no plan covers). In the loops the ends and each unit's
 * fields are read into locals before the stores (which may alias
 * anything, being bytes), so each unit costs its loads and two stores,
 * and the odd-sized rest, out of line, costs the common case no saved
 * register. */
void vr_layout_pack2(const struct vr_layout *l, void *const *kernelParams, uint8_t *a, uint8_t *b)
{
    const struct vr_arg *u = l->args, *end8 = l->end8, *end4 = l->end4, *end = l->end;
    switch (l->plan) {
    case VR_PLAN(0, 0): pack2_units(u, 0, 0, kernelParams, a, b); return;
    case VR_PLAN(0, 1): pack2_units(u, 0, 1, kernelParams, a, b); return;
    case VR_PLAN(0, 2): pack2_units(u, 0, 2, kernelParams, a, b); return;
    case VR_PLAN(0, 3): pack2_units(u, 0, 3, kernelParams, a, b); return;
    case VR_PLAN(1, 0): pack2_units(u, 1, 0, kernelParams, a, b); return;
    case VR_PLAN(1, 1): pack2_units(u, 1, 1, kernelParams, a, b); return;
    case VR_PLAN(1, 2): pack2_units(u, 1, 2, kernelParams, a, b); return;
    case VR_PLAN(1, 3): pack2_units(u, 1, 3, kernelParams, a, b); return;
    case VR_PLAN(2, 0): pack2_units(u, 2, 0, kernelParams, a, b); return;
    case VR_PLAN(2, 1): pack2_units(u, 2, 1, kernelParams, a, b); return;
    case VR_PLAN(2, 2): pack2_units(u, 2, 2, kernelParams, a, b); return;
    case VR_PLAN(2, 3): pack2_units(u, 2, 3, kernelParams, a, b); return;
    case VR_PLAN(3, 0): pack2_units(u, 3, 0, kernelParams, a, b); return;
    case VR_PLAN(3, 1): pack2_units(u, 3, 1, kernelParams, a, b); return;
    case VR_PLAN(3, 2): pack2_units(u, 3, 2, kernelParams, a, b); return;
    case VR_PLAN(3, 3): pack2_units(u, 3, 3, kernelParams, a, b); return;
    case VR_PLAN(4, 0): pack2_units(u, 4, 0, kernelParams, a, b); return;
    case VR_PLAN(4, 1): pack2_units(u, 4, 1, kernelParams, a, b); return;
    case VR_PLAN(4, 2): pack2_units(u, 4, 2, kernelParams, a, b); return;
    case VR_PLAN(4, 3): pack2_units(u, 4, 3, kernelParams, a, b); return;
    case VR_PLAN(5, 0): pack2_units(u, 5, 0, kernelParams, a, b); return;
    case VR_PLAN(5, 1): pack2_units(u, 5, 1, kernelParams, a, b); return;
    case VR_PLAN(5, 2): pack2_units(u, 5, 2, kernelParams, a, b); return;
    case VR_PLAN(5, 3): pack2_units(u, 5, 3, kernelParams, a, b); return;
    case VR_PLAN(6, 0): pack2_units(u, 6, 0, kernelParams, a, b); return;
    case VR_PLAN(6, 1): pack2_units(u, 6, 1, kernelParams, a, b); return;
    case VR_PLAN(6, 2): pack2_units(u, 6, 2, kernelParams, a, b); return;
    case VR_PLAN(6, 3): pack2_units(u, 6, 3, kernelParams, a, b); return;
    default:
        break;
    }
    for (; u != end8; u++) {
        uint32_t index = u->index, skew = u->skew, offset = u->offset;
        uint64_t v;
        memcpy(&v, (const uint8_t *)kernelParams[index] + skew, 8);
        memcpy(a + offset, &v, 8);
        memcpy(b + offset, &v, 8);
    }
    for (; u != end4; u++) {
        uint32_t index = u->index, offset = u->offset;
        uint32_t v;
        memcpy(&v, kernelParams[index], 4);
        memcpy(a + offset, &v, 4);
        memcpy(b + offset, &v, 4);
    }
    if (u != end)
        pack2_rest(u, end, kernelParams, a, b);
}

bool vr_layout_equal_rest(const struct vr_layout *l, void *const *kernelParams,
                          const uint8_t *buf, const struct vr_arg *a)
{
    for (; a != l->end; a++)
        if (memcmp((const uint8_t *)kernelParams[a->index] + a->skew, buf + a->offset, a->size) != 0)
            return false;
    return true;
}

void vr_layout_point(const struct vr_layout *l, uint8_t *buf, void **params)
{
    for (uint32_t i = 0; i < l->nparams; i++)
        params[i] = buf + l->offset[i];
}

void vr_layout_after_fork(void)
{
    lock = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
}
