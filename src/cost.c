#include "cost.h"

#include <stdatomic.h>

/* Priors: conf/cost-model.conf's figures for the entry points the shim uses. */
static const uint64_t prior[VR_COST_COUNT] = {1000, 1500, 20000, 30000};
static const char *const names[VR_COST_COUNT] = {"setparams", "map", "unmap", "set_access"};
static _Atomic uint64_t mean[VR_COST_COUNT];
static _Atomic unsigned samples[VR_COST_COUNT];

/* A sample counts for at most this many times the estimate (the prior for
 * the first): a thread preempted inside the call (milliseconds on a loaded
 * machine) measured the scheduler, not the driver, and one such sample would
 * otherwise decide for the next dozens of calls. A driver that is really
 * slower still gets there: each sample may raise the estimate by 3/8. */
#define VR_COST_CLAMP 4

/* The first samples decide a profile (a few forwarded updates before the
 * decision): the least of them, since being preempted only ever adds time;
 * the running mean from then on. */
#define VR_COST_FIRST 8

void vr_cost_note(enum vr_cost c, uint64_t since_ns)
{
    uint64_t ns = vr_now_ns() - since_ns;
    uint64_t m = atomic_load_explicit(&mean[c], memory_order_relaxed);
    unsigned n = atomic_fetch_add_explicit(&samples[c], 1, memory_order_relaxed);
    uint64_t cap = VR_COST_CLAMP * (m ? m : prior[c]);
    if (ns > cap)
        ns = cap;
    if (ns == 0)
        ns = 1; /* 0 means "not measured" */
    uint64_t next = !m ? ns : n < VR_COST_FIRST ? (ns < m ? ns : m) : m - m / 8 + ns / 8;
    atomic_store_explicit(&mean[c], next ? next : 1, memory_order_relaxed);
}

uint64_t vr_cost_get(enum vr_cost c)
{
    uint64_t m = atomic_load_explicit(&mean[c], memory_order_relaxed);
    return m ? m : prior[c];
}

const char *vr_cost_name(enum vr_cost c)
{
    return names[c];
}

bool vr_cost_measured(enum vr_cost c)
{
    return atomic_load_explicit(&mean[c], memory_order_relaxed) != 0;
}
