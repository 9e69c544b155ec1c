/* cost: the prices start as the cost model's, and follow the driver only
 * by a median of many samples outside a band: neither one preempted call
 * nor the noise around a modelled cost moves them. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"

/* One measured call that took about `ns` (the test's own instructions add a
 * few dozen nanoseconds, a preemption of this test more: every bound below
 * leaves room for that). */
static void took(enum vr_cost c, uint64_t ns)
{
    vr_cost_note(c, vr_now_ns() - ns);
}

Test(cost, prior_until_many_samples)
{
    cr_assert_eq(vr_cost_get(VR_COST_SETPARAMS), vr_cost_prior(VR_COST_SETPARAMS));
    for (int i = 0; i < VR_COST_MIN - 1; i++)
        took(VR_COST_SETPARAMS, 5000);
    cr_assert_not(vr_cost_measured(VR_COST_SETPARAMS));
    cr_assert_eq(vr_cost_get(VR_COST_SETPARAMS), vr_cost_prior(VR_COST_SETPARAMS),
                 "fewer than VR_COST_MIN samples are no measurement");
    took(VR_COST_SETPARAMS, 5000);
    cr_assert(vr_cost_measured(VR_COST_SETPARAMS));
    uint64_t m = vr_cost_get(VR_COST_SETPARAMS);
    cr_assert(m >= 5000 && m < 6000, "median %llu ns of 5 us calls", (unsigned long long)m);
}

/* The priors are conf/cost-model.conf's figures (the file's first price
 * per entry point). */
Test(cost, priors_are_the_cost_model_file)
{
    const char *src = getenv("VR_SRC");
    cr_assert(src, "VR_SRC names the source tree");
    char path[4096];
    snprintf(path, sizeof path, "%s/conf/cost-model.conf", src);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[1024];
    unsigned found = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128];
        unsigned long long ns;
        if (line[0] == '#' || sscanf(line, "%127s %llu", name, &ns) != 2)
            continue;
        for (int c = 0; c < VR_COST_COUNT; c++) {
            if (strcmp(name, vr_cost_entry((enum vr_cost)c)))
                continue;
            cr_assert_eq(vr_cost_prior((enum vr_cost)c), ns, "%s: cost.c %llu, %s %llu", name,
                         (unsigned long long)vr_cost_prior((enum vr_cost)c), path, ns);
            found |= 1u << c;
        }
        if (!strcmp(name, "cuGraphInstantiateWithFlags"))
            cr_assert_eq(VR_PRICE_INSTANTIATE, ns);
        if (!strcmp(name, "cuMemAddressReserve"))
            cr_assert_eq(VR_PRICE_RESERVE, ns);
        if (!strcmp(name, "cuGraphLaunch"))
            cr_assert_eq(VR_PRICE_LAUNCH, ns);
    }
    fclose(f);
    cr_assert_eq(found, (1u << VR_COST_COUNT) - 1, "every price found in %s", path);
}

/* Noise around the model's figure (here 1.3x of it, simcuda's overhead
 * around a modelled cost) keeps the model's figure: two runs weigh with
 * the same number. */
Test(cost, inside_the_band_the_model_stands)
{
    uint64_t prior = vr_cost_prior(VR_COST_UNMAP);
    for (int i = 0; i < VR_COST_RING; i++)
        took(VR_COST_UNMAP, prior + prior * 3 / 10 - prior * (uint64_t)(i % 5) / 100);
    cr_assert(vr_cost_measured(VR_COST_UNMAP));
    cr_assert_eq(vr_cost_get(VR_COST_UNMAP), prior);
}

/* One call in four preempted for 50 ms does not move the median. */
Test(cost, preempted_calls_are_no_verdict)
{
    for (int i = 0; i < 32; i++)
        took(VR_COST_MAP, i % 4 == 0 ? 50000000 : 40000);
    uint64_t m = vr_cost_get(VR_COST_MAP);
    cr_assert(m >= 40000 && m < 45000, "median %llu ns of 40 us calls, a quarter of 50 ms",
              (unsigned long long)m);
}

/* A driver really slower than the model is learned, and the last samples
 * count: a driver that became cheap again is followed back. */
Test(cost, a_slow_driver_is_learned_and_unlearned)
{
    for (int i = 0; i < 48; i++)
        took(VR_COST_ACCESS, 400000);
    uint64_t m = vr_cost_get(VR_COST_ACCESS);
    cr_assert(m >= 400000 && m <= 450000, "median %llu ns of 400 us calls",
              (unsigned long long)m);
    for (int i = 0; i < VR_COST_RING; i++)
        took(VR_COST_ACCESS, vr_cost_prior(VR_COST_ACCESS));
    cr_assert_eq(vr_cost_get(VR_COST_ACCESS), vr_cost_prior(VR_COST_ACCESS));
}
