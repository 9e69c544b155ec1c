#include "ptrindex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int vr_ptrindex_add(struct vr_ptrindex *x, uint64_t addr, uint32_t node)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        struct vr_ptr_pair *grown = realloc(x->v, cap * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        x->v = grown;
        x->cap = cap;
    }
    x->v[x->n++] = (struct vr_ptr_pair){addr, node};
    return 0;
}

/* LSD radix sort by address, a byte per pass; bytes every pair shares (the
 * high bytes of addresses, mostly) cost no pass. */
static void sort_pairs(struct vr_ptr_pair *v, size_t n, struct vr_ptr_pair *tmp)
{
    size_t count[8][256];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
        for (unsigned b = 0; b < 8; b++)
            count[b][(v[i].addr >> (8 * b)) & 0xff]++;
    struct vr_ptr_pair *src = v, *dst = tmp;
    for (unsigned b = 0; b < 8; b++) {
        if (count[b][(v[0].addr >> (8 * b)) & 0xff] == n)
            continue;
        size_t at = 0;
        for (unsigned d = 0; d < 256; d++) {
            size_t c = count[b][d];
            count[b][d] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[b][(src[i].addr >> (8 * b)) & 0xff]++] = src[i];
        struct vr_ptr_pair *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* Merges the last two runs into one. */
static void merge_last(struct vr_ptrindex *x, struct vr_ptr_pair *tmp)
{
    size_t a = x->run[x->nruns - 2], m = x->run[x->nruns - 1], end = x->run[x->nruns];
    size_t i = a, j = m, k = 0;
    while (i < m && j < end)
        tmp[k++] = x->v[j].addr < x->v[i].addr ? x->v[j++] : x->v[i++];
    while (i < m)
        tmp[k++] = x->v[i++];
    while (j < end)
        tmp[k++] = x->v[j++];
    memcpy(x->v + a, tmp, k * sizeof *tmp);
    x->nruns--;
    x->run[x->nruns] = end;
}

static size_t run_len(const struct vr_ptrindex *x, size_t k)
{
    return x->run[k + 1] - x->run[k];
}

int vr_ptrindex_seal(struct vr_ptrindex *x)
{
    size_t fresh = x->n - x->sealed;
    if (fresh == 0)
        return 0;
    /* Enough for the sort and for any merge the new run joins. */
    struct vr_ptr_pair *tmp = malloc(x->n * sizeof *tmp);
    if (!tmp)
        return -ENOMEM;
    sort_pairs(x->v + x->sealed, fresh, tmp);
    if (x->nruns == 0)
        x->run[0] = 0;
    x->nruns++;
    x->run[x->nruns] = x->n;
    x->sealed = x->n;
    /* Each run more than twice the next: O(log n) runs. */
    while (x->nruns >= 2 &&
           (run_len(x, x->nruns - 2) <= 2 * run_len(x, x->nruns - 1) ||
            x->nruns == VR_PTRINDEX_RUNS))
        merge_last(x, tmp);
    free(tmp);
    return 0;
}

size_t vr_ptrindex_find(const struct vr_ptrindex *x, uint64_t lo, uint64_t hi,
                        void (*fn)(void *arg, uint32_t node), void *arg)
{
    size_t calls = 0;
    for (size_t k = 0; k < x->nruns && lo < hi; k++) {
        size_t a = x->run[k], b = x->run[k + 1];
        while (a < b) {
            size_t mid = a + (b - a) / 2;
            if (x->v[mid].addr < lo)
                a = mid + 1;
            else
                b = mid;
        }
        for (size_t i = a; i < x->run[k + 1] && x->v[i].addr < hi; i++, calls++)
            fn(arg, x->v[i].node);
    }
    return calls;
}

void vr_ptrindex_free(struct vr_ptrindex *x)
{
    free(x->v);
    memset(x, 0, sizeof *x);
}
