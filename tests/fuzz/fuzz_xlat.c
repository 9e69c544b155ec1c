/* Fuzz target: the argument-word translator (src/xlat.c), as exec.c and
 * slice.c use it. The input describes a view (allocations bound to slots of
 * a reservation), a node's argument layout with its anchor positions, and
 * the argument bytes; words may be built relative to an allocation (its
 * base, its end, one byte around either) so the edges are reached often.
 *
 * Checked for every input:
 *   - the lookup agrees with a linear scan of the view;
 *   - a word that is not an anchor, and every byte outside the anchor words,
 *     is passed exactly as written;
 *   - an anchor word inside [base, base + size] of a bound allocation (its
 *     end included) becomes the same offset in that allocation's slot;
 *   - an anchor word outside every allocation is passed as written.
 *
 * Input layout (missing bytes read as zero):
 *   [0]      number of allocations (mod 9)
 *   per allocation: 8 bytes base, 4 bytes size (mod 16 MiB)
 *   [n]      number of words (mod 33), then per word one flags byte:
 *            bit 0 anchor; bits 1-2 how the value is made (0 raw 8 bytes,
 *            1 base + offset, 2 end + delta, 3 base - 1); bits 4-7 which
 *            allocation; then 8 (raw) or 2 (offset/delta) bytes
 *   the rest  trailing argument bytes (not words) */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xlat.h"

#define MAX_RANGES 8
#define MAX_WORDS 32
#define SLOT_GAP 4096

struct in {
    const uint8_t *p;
    size_t n, at;
};

static uint64_t take(struct in *in, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; i++) {
        uint8_t b = in->at < in->n ? in->p[in->at] : 0;
        in->at++;
        v |= (uint64_t)b << (8 * i);
    }
    return v;
}

static void fail(const char *what, uint64_t a, uint64_t b)
{
    fprintf(stderr, "fuzz_xlat: %s (0x%llx, 0x%llx)\n", what, (unsigned long long)a,
            (unsigned long long)b);
    abort();
}

struct view {
    struct vr_xlat_range r[MAX_RANGES];
    size_t n;
};

static uint64_t through_view(void *ctx, int32_t anchor, uint64_t w)
{
    const struct view *v = ctx;
    if (anchor < 0)
        fail("a word that is not an anchor was handed to the translation", w, 0);
    return vr_xlat_word(v->r, v->n, w);
}

static int by_lo(const void *a, const void *b)
{
    const struct vr_xlat_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The allocations as the registry keeps them: sorted, disjoint, each end
 * followed by a gap (the guard gap), so [lo, hi] never touch. Slots are
 * packed in a reservation placed above every allocation. */
static void make_view(struct in *in, struct view *v)
{
    size_t want = (size_t)(take(in, 1) % (MAX_RANGES + 1));
    struct vr_xlat_range cand[MAX_RANGES];
    size_t n = 0;
    for (size_t i = 0; i < want; i++) {
        uint64_t base = take(in, 8) >> 8; /* keep room above for the reservation */
        uint64_t size = take(in, 4) % (16u << 20);
        cand[n++] = (struct vr_xlat_range){ base, base + size, 0, i };
    }
    qsort(cand, n, sizeof cand[0], by_lo);
    v->n = 0;
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (v->n && cand[i].lo <= v->r[v->n - 1].hi + 1)
            continue; /* would touch its neighbour: not a registry's view */
        v->r[v->n++] = cand[i];
        top = cand[i].hi;
    }
    uint64_t va = (top | 0xffff) + 1 + ((uint64_t)1 << 40);
    for (size_t i = 0; i < v->n; i++) {
        v->r[i].va = va;
        va += v->r[i].hi - v->r[i].lo + SLOT_GAP;
    }
}

static const struct vr_xlat_range *scan(const struct view *v, uint64_t w)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->r[i].lo <= w && w <= v->r[i].hi)
            return &v->r[i];
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = { data, size, 0 };
    struct view v;
    make_view(&in, &v);

    uint32_t nwords = (uint32_t)(take(&in, 1) % (MAX_WORDS + 1));
    uint32_t offs[MAX_WORDS];
    vr_anchor anchor[MAX_WORDS];
    uint8_t src[MAX_WORDS * 8 + 64], dst[sizeof src];
    for (uint32_t k = 0; k < nwords; k++) {
        unsigned flags = (unsigned)take(&in, 1);
        const struct vr_xlat_range *r = v.n ? &v.r[(flags >> 4) % v.n] : NULL;
        uint64_t w;
        switch (r ? (flags >> 1) & 3 : 0) {
        case 1: w = r->lo + take(&in, 2); break;
        case 2: w = r->hi + (uint64_t)(int16_t)take(&in, 2); break;
        case 3: w = r->lo - 1; break;
        default: w = take(&in, 8); break;
        }
        offs[k] = k * 8;
        anchor[k] = (flags & 1) ? (int32_t)(flags >> 4) : -1;
        memcpy(src + offs[k], &w, sizeof w);
    }
    size_t bytes = nwords * 8;
    while (bytes < sizeof src && in.at < in.n)
        src[bytes++] = (uint8_t)take(&in, 1);

    /* the lookup, against a scan, for every word and the edges of the view */
    for (uint32_t k = 0; k < nwords; k++) {
        uint64_t w;
        memcpy(&w, src + offs[k], sizeof w);
        if (vr_xlat_lookup(v.r, v.n, w) != scan(&v, w))
            fail("lookup disagrees with a scan", w, 0);
    }
    for (size_t i = 0; i < v.n; i++) {
        const uint64_t edges[] = { v.r[i].lo, v.r[i].hi, v.r[i].lo - 1, v.r[i].hi + 1 };
        for (size_t j = 0; j < 4; j++)
            if (vr_xlat_lookup(v.r, v.n, edges[j]) != scan(&v, edges[j]))
                fail("lookup disagrees with a scan at an edge", edges[j], i);
    }

    memset(dst, 0xa5, sizeof dst);
    vr_xlat_args(offs, anchor, nwords, bytes, src, dst, through_view, &v);

    bool is_word[sizeof src] = { false };
    for (uint32_t k = 0; k < nwords; k++) {
        uint64_t w, t;
        memcpy(&w, src + offs[k], sizeof w);
        memcpy(&t, dst + offs[k], sizeof t);
        for (unsigned b = 0; b < 8; b++)
            is_word[offs[k] + b] = true;
        const struct vr_xlat_range *r = scan(&v, w);
        if (anchor[k] < 0 && t != w)
            fail("a word that is not an anchor changed", w, t);
        if (anchor[k] >= 0 && !r && t != w)
            fail("an anchor outside every allocation changed", w, t);
        if (anchor[k] >= 0 && r && t != r->va + (w - r->lo))
            fail("an anchor inside an allocation is not at the same offset of its slot", w, t);
        if (anchor[k] >= 0 && r && (t < r->va || t - r->va > r->hi - r->lo))
            fail("a translated anchor left its slot", w, t);
    }
    for (size_t b = 0; b < bytes; b++)
        if (!is_word[b] && dst[b] != src[b])
            fail("a byte outside the words changed", b, dst[b]);
    for (size_t b = bytes; b < sizeof dst; b++)
        if (dst[b] != 0xa5)
            fail("written past the argument bytes", b, dst[b]);
    return 0;
}
