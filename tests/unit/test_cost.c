/* cost: the running estimates follow the driver, not the scheduler. */
#include <criterion/criterion.h>

#include "cost.h"

/* One measured call that took about `ns` (the test's own instructions add a
 * few dozen nanoseconds, a preemption of this test more: every bound below
 * leaves room for that, or is the clamp's own). */
static void took(enum vr_cost c, uint64_t ns)
{
    vr_cost_note(c, vr_now_ns() - ns);
}

Test(cost, prior_until_measured)
{
    cr_assert_not(vr_cost_measured(VR_COST_SETPARAMS));
    cr_assert_eq(vr_cost_get(VR_COST_SETPARAMS), 1000);
    took(VR_COST_SETPARAMS, 300);
    cr_assert(vr_cost_measured(VR_COST_SETPARAMS));
    cr_assert_geq(vr_cost_get(VR_COST_SETPARAMS), 300);
    cr_assert_leq(vr_cost_get(VR_COST_SETPARAMS), 4 * 1000);
}

/* A first sample preempted for 50 ms does not make SetParams look 50 ms
 * dear (a profile then selects buffers dedup would serve better). */
Test(cost, a_preempted_first_call_is_no_verdict)
{
    took(VR_COST_SETPARAMS, 50000000);
    uint64_t m = vr_cost_get(VR_COST_SETPARAMS);
    cr_assert_leq(m, 4 * 1000 + 1, "estimate %llu ns after one 50 ms sample",
                  (unsigned long long)m);
}

Test(cost, one_outlier_moves_a_settled_estimate_a_little)
{
    for (int i = 0; i < 64; i++)
        took(VR_COST_SETPARAMS, 2000);
    uint64_t before = vr_cost_get(VR_COST_SETPARAMS);
    cr_assert(before >= 1750 && before <= 4000, "settled at %llu", (unsigned long long)before);
    took(VR_COST_SETPARAMS, 10000000);
    uint64_t after = vr_cost_get(VR_COST_SETPARAMS);
    cr_assert_leq(after, before + before * 3 / 8 + 8, "%llu -> %llu after one 10 ms sample",
                  (unsigned long long)before, (unsigned long long)after);
}

/* The first samples decide a profile: one preempted among them is not its
 * verdict. */
Test(cost, the_least_of_the_first_samples)
{
    took(VR_COST_SETPARAMS, 3000000);
    for (int i = 0; i < 4; i++)
        took(VR_COST_SETPARAMS, 900);
    took(VR_COST_SETPARAMS, 3000000);
    uint64_t m = vr_cost_get(VR_COST_SETPARAMS);
    cr_assert(m >= 900 && m < 2000, "estimate %llu ns from 3 ms, 4 x 0.9 us, 3 ms",
              (unsigned long long)m);
}

/* A driver really slower than the prior is still learned. */
Test(cost, a_slow_driver_is_learned)
{
    for (int i = 0; i < 48; i++)
        took(VR_COST_UNMAP, 400000);
    uint64_t m = vr_cost_get(VR_COST_UNMAP);
    cr_assert(m >= 300000 && m <= 1600000, "estimate %llu ns for 400 us calls",
              (unsigned long long)m);
}
