/* policy: each adaptive rule with numbers in and a verdict out (policy.h).
 * The numbers are those the bench suites' checks exercise end to end. */
#include <criterion/criterion.h>

#include "policy.h"

Test(policy, window_is_short_only_while_probing)
{
    cr_assert_not(vr_policy_window_closed(VR_WEIGH_EVERY - 1, false));
    cr_assert(vr_policy_window_closed(VR_WEIGH_EVERY, false));
    cr_assert_not(vr_policy_window_closed(VR_REPROBE_WINDOW - 1, true));
    cr_assert(vr_policy_window_closed(VR_REPROBE_WINDOW, true));
    cr_assert_lt(VR_REPROBE_WINDOW, VR_WEIGH_EVERY);
}

/* Slices that cost more than they saved lose; two losing windows settle. */
Test(policy, slices_settle_after_two_losing_windows)
{
    unsigned l = vr_policy_slices_losing(0, 2000, 1000, 1, 0);
    cr_assert_eq(l, 1);
    cr_assert_not(vr_policy_settles(l));
    l = vr_policy_slices_losing(l, 2000, 1000, 1, 0);
    cr_assert(vr_policy_settles(l));
}

/* One winning window in between is a fresh start. */
Test(policy, a_winning_window_resets_the_count)
{
    unsigned l = vr_policy_slices_losing(0, 2000, 1000, 1, 0);
    l = vr_policy_slices_losing(l, 1000, 2000, 2, 0);
    cr_assert_eq(l, 0);
    cr_assert_eq(vr_policy_slices_losing(0, 0, 0, 0, 0), 0, "an idle window is no loss");
}

/* Saving nothing while updates still went to the driver loses even when
 * the slices cost nothing (graph_bench_settle_*: "slices cost 0 us"). */
Test(policy, slices_that_saved_nothing_lose)
{
    cr_assert_eq(vr_policy_slices_losing(0, 0, 0, 0, 32), 1);
    cr_assert_eq(vr_policy_slices_losing(0, 0, 0, 1, 32), 0);
}

/* Under one in eight absorbed over a full window loses. */
Test(policy, absorbing_under_one_in_eight_loses)
{
    cr_assert_eq(vr_policy_absorb_losing(0, 64, 7), 1);
    cr_assert_eq(vr_policy_absorb_losing(0, 64, 8), 0);
    cr_assert_eq(vr_policy_absorb_losing(0, VR_WEIGH_EVERY - 1, 0), 0,
                 "too few updates to judge");
    cr_assert_eq(vr_policy_absorb_losing(1, VR_WEIGH_EVERY, 0), 2);
}

Test(policy, pass_after_two_windows_or_one_reprobe)
{
    cr_assert_not(vr_policy_passes(1, false));
    cr_assert(vr_policy_passes(2, false));
    cr_assert(vr_policy_passes(1, true));
    cr_assert_not(vr_policy_passes(0, true));
}

/* The back-off doubles from VR_REPROBE_FIRST and stops at VR_REPROBE_MAX. */
Test(policy, reprobe_backoff_doubles_to_a_cap)
{
    uint32_t a = vr_policy_backoff(0);
    cr_assert_eq(a, VR_REPROBE_FIRST);
    cr_assert_eq(vr_policy_backoff(a), 2 * VR_REPROBE_FIRST);
    uint32_t x = 0;
    for (int i = 0; i < 40; i++)
        x = vr_policy_backoff(x);
    cr_assert_eq(x, VR_REPROBE_MAX);
    cr_assert(vr_policy_reprobe_due(VR_REPROBE_FIRST, VR_REPROBE_FIRST));
    cr_assert_not(vr_policy_reprobe_due(VR_REPROBE_FIRST - 1, VR_REPROBE_FIRST));
}

/* Two decisions in a row undone within VR_BRIEF_DECISION launches churn. */
Test(policy, churn_after_two_brief_decisions)
{
    unsigned b = vr_policy_brief(0, VR_BRIEF_DECISION - 1);
    cr_assert_not(vr_policy_churns(b));
    b = vr_policy_brief(b, 3);
    cr_assert(vr_policy_churns(b));
    cr_assert_eq(vr_policy_brief(b, VR_BRIEF_DECISION), 0, "a decision that lived resets");
}

Test(policy, a_variant_pays_when_targets_come_back_or_most_nodes_moved)
{
    cr_assert(vr_policy_variant_pays(true, false, 0, 100, false, 0));
    cr_assert(vr_policy_variant_pays(false, true, 50, 100, false, 0));
    cr_assert_not(vr_policy_variant_pays(false, true, 49, 100, false, 0));
    cr_assert_not(vr_policy_variant_pays(false, false, 100, 100, false, 0),
                  "unweighed: the counts are unknown");
}

/* While stuck the share needed shrinks with each variant made (below half
 * once three are made: moved * (2 + nv) >= 2 * total). */
Test(policy, a_stuck_exec_makes_variants_for_fewer_moved_nodes)
{
    cr_assert_not(vr_policy_variant_pays(false, true, 34, 100, false, 4));
    cr_assert(vr_policy_variant_pays(false, true, 34, 100, true, 4));
    cr_assert_not(vr_policy_variant_pays(false, true, 33, 100, true, 4));
    cr_assert(vr_policy_variant_pays(false, true, 40, 100, true, 3));
    cr_assert_not(vr_policy_variant_pays(false, true, 39, 100, true, 3));
}
