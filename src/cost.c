#include "cost.h"

#include <stdatomic.h>
#include <stdlib.h>

/* conf/cost-model.conf's figures (the H200's, measured by cost_probe;
 * instantiate an estimate); tests/unit/test_cost.c checks them against the
 * file. Written only before the shim is ready (vr_cost_load). */
static uint64_t prior[VR_COST_COUNT] = {228, 529, 13116, 18948, 478, 1000000, 2600};
static const char *const names[VR_COST_COUNT] = {"setparams", "map",         "unmap", "set_access",
                                                 "reserve",   "instantiate", "launch"};
static const char *const entries[VR_COST_COUNT] = {
    "cuGraphExecKernelNodeSetParams_v2", "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
    "cuMemAddressReserve", "cuGraphInstantiateWithFlags", "cuGraphLaunch"};

void vr_cost_set_prior(enum vr_cost c, uint64_t ns)
{
    if (ns >= 1 && ns <= VR_COST_MAX_NS)
        prior[c] = ns;
}

static _Atomic uint32_t ring[VR_COST_COUNT][VR_COST_RING];
static _Atomic unsigned samples[VR_COST_COUNT];
/* Mode measured: each price's level (the model's figure times 2^level). */
static _Atomic int level[VR_COST_COUNT];
static atomic_bool follows;

void vr_cost_configure(bool measured)
{
    atomic_store_explicit(&follows, measured, memory_order_relaxed);
}

bool vr_cost_follows(void)
{
    return atomic_load_explicit(&follows, memory_order_relaxed);
}

void vr_cost_note(enum vr_cost c, uint64_t since_ns)
{
    uint64_t ns = vr_now_ns() - since_ns;
    /* A sample over 4 s is a stopped process, not a call; 0 marks an empty
     * slot. */
    uint32_t v = ns > UINT32_MAX / 2 ? UINT32_MAX / 2 : ns ? (uint32_t)ns : 1;
    unsigned n = atomic_fetch_add_explicit(&samples[c], 1, memory_order_relaxed);
    atomic_store_explicit(&ring[c][n % VR_COST_RING], v, memory_order_relaxed);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A median, not a mean: one call preempted for milliseconds moves it by
 * one place, never to milliseconds. */
static uint64_t median(enum vr_cost c)
{
    uint32_t v[VR_COST_RING];
    size_t n = 0;
    for (size_t i = 0; i < VR_COST_RING; i++) {
        uint32_t s = atomic_load_explicit(&ring[c][i], memory_order_relaxed);
        if (s)
            v[n++] = s;
    }
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_u32);
    return v[n / 2];
}

uint64_t vr_cost_median(enum vr_cost c)
{
    return vr_cost_measured(c) ? median(c) : 0;
}

/* The model's figure times 2^k. */
static uint64_t at_level(enum vr_cost c, int k)
{
    uint64_t p = k >= 0 ? prior[c] << k : prior[c] >> -k;
    return p ? p : 1;
}

/* The level whose price lies nearest `m` on a log scale: m within a factor
 * sqrt(2) of it (compared squared: m < 2^31, a level's price < 2^30, at
 * most VR_COST_MAX_NS << VR_COST_LEVELS). */
static int nearest_level(enum vr_cost c, uint64_t m, int k)
{
    while (k < VR_COST_LEVELS && m * m > 2 * at_level(c, k) * at_level(c, k))
        k++;
    while (k > -VR_COST_LEVELS && 2 * m * m <= at_level(c, k) * at_level(c, k))
        k--;
    return k;
}

uint64_t vr_cost_get(enum vr_cost c)
{
    if (!vr_cost_follows())
        return prior[c];
    int k = atomic_load_explicit(&level[c], memory_order_relaxed);
    uint64_t m = vr_cost_median(c), p = at_level(c, k);
    /* Within a factor 2.5 of the current price, either way: the price
     * stands, whatever noise moved the median there. */
    if (m == 0 || (m * 10 <= p * VR_COST_STEP_TENTHS && m * VR_COST_STEP_TENTHS >= p * 10))
        return p;
    k = nearest_level(c, m, k);
    atomic_store_explicit(&level[c], k, memory_order_relaxed);
    return at_level(c, k);
}

uint64_t vr_cost_prior(enum vr_cost c)
{
    return prior[c];
}

const char *vr_cost_name(enum vr_cost c)
{
    return names[c];
}

const char *vr_cost_entry(enum vr_cost c)
{
    return entries[c];
}

bool vr_cost_measured(enum vr_cost c)
{
    return atomic_load_explicit(&samples[c], memory_order_relaxed) >= VR_COST_MIN;
}
