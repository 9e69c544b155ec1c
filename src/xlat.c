#include "xlat.h"

#include <string.h>

/* The last range starting at or below w; few ranges per exec. */
const struct vr_xlat_range *vr_xlat_lookup(const struct vr_xlat_range *r, size_t n, uint64_t w)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].lo <= w)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && w <= r[lo - 1].hi)
        return &r[lo - 1];
    return NULL;
}

uint64_t vr_xlat_word(const struct vr_xlat_range *r, size_t n, uint64_t w)
{
    const struct vr_xlat_range *x = vr_xlat_lookup(r, n, w);
    return x ? x->va + (w - x->lo) : w;
}

void vr_xlat_args(const uint32_t *offs, const vr_anchor *anchor, uint32_t nwords, size_t bytes,
                  const uint8_t *src, uint8_t *dst, vr_xlat_fn fn, void *ctx)
{
    memcpy(dst, src, bytes);
    for (uint32_t k = 0; k < nwords; k++) {
        if (anchor[k] < 0)
            continue;
        uint64_t w, t;
        memcpy(&w, src + offs[k], sizeof w);
        t = fn(ctx, anchor[k], w);
        if (t != w)
            memcpy(dst + offs[k], &t, sizeof t);
    }
}

static uint64_t word_at(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

void vr_xlat_keep_pairs(const uint32_t *offs, uint32_t nwords, const uint8_t *src, uint8_t *dst,
                        vr_xlat_range_fn range, void *ctx)
{
    for (uint32_t k = 0; k < nwords; k++) {
        uint64_t w = word_at(src + offs[k]), t = word_at(dst + offs[k]);
        uint64_t lo, hi;
        if (t == w || !range(ctx, w, t, &lo, &hi))
            continue;
        bool split = false;
        for (uint32_t j = 0; j < nwords && !split; j++) {
            uint64_t wj = word_at(src + offs[j]);
            split = wj >= lo && wj <= hi && word_at(dst + offs[j]) - wj != t - w;
        }
        for (uint32_t j = 0; split && j < nwords; j++) {
            uint64_t wj = word_at(src + offs[j]);
            if (wj >= lo && wj <= hi)
                memcpy(dst + offs[j], &wj, sizeof wj);
        }
    }
}
