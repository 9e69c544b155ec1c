/* ptrindex: the (address, node) index profile launches use to find the nodes
 * a freed range concerns. Every query is checked against a brute-force scan
 * of the same pairs. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ptrindex.h"

struct hits {
    uint32_t *v;
    size_t n, cap;
};

static void collect(void *arg, uint32_t node)
{
    struct hits *h = arg;
    cr_assert_lt(h->n, h->cap, "more matches than pairs");
    h->v[h->n++] = node;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The nodes of the pairs in [lo, hi), sorted (a node once per pair). */
static size_t find_sorted(const struct vr_ptrindex *x, uint64_t lo, uint64_t hi, uint32_t *out,
                          size_t cap)
{
    struct hits h = {out, 0, cap};
    size_t calls = vr_ptrindex_find(x, lo, hi, collect, &h);
    cr_assert_eq(calls, h.n);
    qsort(out, h.n, sizeof *out, cmp_u32);
    return h.n;
}

static size_t brute(const struct vr_ptr_pair *p, size_t n, uint64_t lo, uint64_t hi,
                    uint32_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].addr >= lo && p[i].addr < hi)
            out[k++] = p[i].node;
    qsort(out, k, sizeof *out, cmp_u32);
    return k;
}

Test(ptrindex, empty_finds_nothing)
{
    struct vr_ptrindex x = {0};
    uint32_t out[1];
    cr_assert_eq(find_sorted(&x, 0, UINT64_MAX, out, 1), 0);
    cr_assert_eq(vr_ptrindex_seal(&x), 0);
    cr_assert_eq(find_sorted(&x, 0, UINT64_MAX, out, 1), 0);
    vr_ptrindex_free(&x);
}

/* [lo, hi): lo found, hi not; a pair is findable only once sealed. */
Test(ptrindex, bounds_and_seal)
{
    struct vr_ptrindex x = {0};
    cr_assert_eq(vr_ptrindex_add(&x, 0x1000, 1), 0);
    cr_assert_eq(vr_ptrindex_add(&x, 0x2000, 2), 0);
    cr_assert_eq(vr_ptrindex_add(&x, 0x2000, 3), 0);
    uint32_t out[8];
    cr_assert_eq(find_sorted(&x, 0, UINT64_MAX, out, 8), 0, "found before the seal");
    cr_assert_eq(vr_ptrindex_seal(&x), 0);
    cr_assert_eq(find_sorted(&x, 0x1000, 0x1001, out, 8), 1);
    cr_assert_eq(out[0], 1);
    cr_assert_eq(find_sorted(&x, 0x1001, 0x2000, out, 8), 0);
    cr_assert_eq(find_sorted(&x, 0x2000, 0x2001, out, 8), 2);
    cr_assert_eq(out[0], 2);
    cr_assert_eq(out[1], 3);
    cr_assert_eq(find_sorted(&x, 0x2000, 0x2000, out, 8), 0, "an empty range");
    cr_assert_eq(vr_ptrindex_add(&x, 0x1800, 4), 0);
    cr_assert_eq(find_sorted(&x, 0x1000, 0x3000, out, 8), 3);
    cr_assert_eq(vr_ptrindex_seal(&x), 0);
    cr_assert_eq(find_sorted(&x, 0x1000, 0x3000, out, 8), 4);
    cr_assert_eq(find_sorted(&x, 0x17ff, 0x1801, out, 8), 1);
    cr_assert_eq(out[0], 4);
    vr_ptrindex_free(&x);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Addresses as a process has them (a few regions, many buffers) and as any
 * 64-bit value: every byte of the key must sort. */
static uint64_t addr(int kind)
{
    if (kind == 0)
        return UINT64_C(0x7f0000000000) + (next() % 64) * (UINT64_C(1) << 21) + next() % 4096 * 8;
    return next();
}

/* One large run (the first full read) then many small ones (the launches
 * after it), queried against a scan after every seal; the runs stay few. */
static void random_rounds(int kind)
{
    enum { MAXP = 20000 };
    struct vr_ptr_pair *all = malloc(MAXP * sizeof *all);
    uint32_t *got = malloc(MAXP * sizeof *got), *want = malloc(MAXP * sizeof *want);
    cr_assert(all && got && want);
    struct vr_ptrindex x = {0};
    size_t n = 0;
    for (int round = 0; round < 40; round++) {
        size_t add = round == 0 ? 8000 : next() % (round % 7 == 0 ? 2000 : 40);
        for (size_t i = 0; i < add && n < MAXP; i++, n++) {
            /* Repeat an earlier address now and then: re-set nodes. */
            uint64_t a = n && next() % 4 == 0 ? all[next() % n].addr : addr(kind);
            all[n] = (struct vr_ptr_pair){a, (uint32_t)n};
            cr_assert_eq(vr_ptrindex_add(&x, a, (uint32_t)n), 0);
        }
        cr_assert_eq(vr_ptrindex_seal(&x), 0);
        size_t bound = 2;
        for (size_t m = n; m > 1; m /= 2)
            bound++;
        cr_assert_leq(x.nruns, bound, "%zu runs for %zu pairs", x.nruns, n);
        for (int q = 0; q < 50; q++) {
            uint64_t lo = q % 2 ? all[next() % n].addr : addr(kind);
            uint64_t span = q % 3 == 0 ? 1 : (q % 3 == 1 ? (UINT64_C(1) << 20) + 1 : next());
            uint64_t hi = lo + span < lo ? UINT64_MAX : lo + span;
            size_t k = brute(all, n, lo, hi, want);
            cr_assert_eq(find_sorted(&x, lo, hi, got, MAXP), k, "round %d: [%#llx, %#llx)",
                         round, (unsigned long long)lo, (unsigned long long)hi);
            cr_assert_eq(memcmp(got, want, k * sizeof *got), 0);
        }
    }
    cr_assert_eq(find_sorted(&x, 0, UINT64_MAX, got, MAXP), n, "every pair once");
    vr_ptrindex_free(&x);
    free(all);
    free(got);
    free(want);
}

Test(ptrindex, random_process_addresses)
{
    random_rounds(0);
}

Test(ptrindex, random_64bit_keys)
{
    random_rounds(1);
}
