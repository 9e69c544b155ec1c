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

/* Slices that cost twice what they saved from the start settle at the
 * second window (one window is no verdict). */
Test(policy, slices_settle_after_two_losing_windows)
{
    struct vr_slice_ledger l = {0};
    cr_assert_not(vr_policy_slices_settle(&l, 2000, 1000));
    cr_assert(vr_policy_slices_settle(&l, 2000, 1000));
}

/* A winning window among losing ones keeps the slices while the ledger is
 * not short by the margin. */
Test(policy, a_winning_window_weighs_in)
{
    struct vr_slice_ledger l = {0};
    cr_assert_not(vr_policy_slices_settle(&l, 3000, 1000));
    cr_assert_not(vr_policy_slices_settle(&l, 1000, 2000));
    cr_assert_not(vr_policy_slices_settle(&l, 0, 0), "an idle window is no loss");
}

/* fanout at N = 1000 on simcuda at the measured prices, a loaded machine
 * (check_bench.py repeat fanout): windows of 32 launches whose savings
 * (31,936 updates absorbed at 228 ns) faced 0.64-0.84 of them in remaps and
 * re-pointing updates, then busy windows at 1.16-1.39. Counting losing
 * windows in a row, two such settled the exec in 2 runs of 10; a ledger
 * discounted by a quarter a window, short by a quarter, in 1 run of 10 in
 * CI. A run of five windows at 1.6 keeps the slices as well. A pipeline
 * bound by the GPU (e2e alloc/busy_pipeline: 3.3 then 2.3 of its savings)
 * settles at its second window; one that becomes so (3x, window after
 * window) after a good history within six. */
Test(policy, busy_windows_flip_no_verdict_a_lasting_loss_does)
{
    static const unsigned hundredths[] = {77, 64, 65, 67, 73, 82, 64, 139, 139,
                                          116, 160, 160, 160, 160, 160, 64};
    const uint64_t saved = 31936ull * 228;
    struct vr_slice_ledger l = {0};
    for (size_t i = 0; i < sizeof hundredths / sizeof *hundredths; i++)
        cr_assert_not(vr_policy_slices_settle(&l, saved * hundredths[i] / 100, saved),
                      "window %zu", i);
    unsigned more = 0;
    while (!vr_policy_slices_settle(&l, saved * 3, saved))
        cr_assert_lt(++more, 6u, "a lasting loss settles");
    struct vr_slice_ledger busy = {0};
    cr_assert_not(vr_policy_slices_settle(&busy, 1363415, 408348));
    cr_assert(vr_policy_slices_settle(&busy, 419748, 181488), "the GPU-bound pipeline");
}

/* Nothing is decided where both sides are 0 (issue 17: "slices cost 0 us
 * (0 updates, 0 remaps) for 0 us saved" settled an exec), nor where they
 * differ by less than the margin: a price that noise moves a little never
 * flips a verdict. */
Test(policy, no_verdict_on_zero_against_zero_or_within_the_margin)
{
    struct vr_slice_ledger zero = {0}, near = {0}, short_by_margin = {0};
    cr_assert_not(vr_policy_slices_settle(&zero, 0, 0));
    cr_assert_not(vr_policy_slices_settle(&zero, 0, 0));
    struct vr_slice_ledger losing = {.cost = 4000, .saved = 1000, .windows = 4};
    cr_assert_not(vr_policy_slices_settle(&losing, 0, 0), "a window that cost nothing");
    for (int i = 0; i < 2; i++) {
        cr_assert_not(vr_policy_slices_settle(&near, 4000, 2100), "saved 0.525 of the cost");
        cr_assert_eq(vr_policy_slices_settle(&short_by_margin, 4000, 2000), i == 1,
                     "saved half the cost, window %d", i);
    }
    cr_assert_not(vr_policy_cheaper(0, 0));
    cr_assert(vr_policy_cheaper(0, 1));
}

/* The cost model's prices: the H200's measured (conf/cost-model.conf) and
 * the first estimates (conf/cost-model.setparams-4x.conf). */
static const struct vr_prices h200 = {.setparams = 228,
                                      .remap = 13116 + 529 + 18948,
                                      .slot = 478 + 529 + 18948,
                                      .instantiate = 1000000};
static const struct vr_prices dear = {.setparams = 1000,
                                      .remap = 20000 + 1500 + 30000,
                                      .slot = 15000 + 1500 + 30000,
                                      .instantiate = 1000000};

/* graph_bench's buffers at N=1000, 2 MiB: what the profile sees of each. */
static enum vr_slice_verdict verdict(const struct vr_prices *p, unsigned anchors, bool moved,
                                     bool back, uint64_t moving_ns, size_t moving_slots,
                                     unsigned period)
{
    struct vr_buffer_seen b = {.anchors = anchors, .moved = moved, .back = back};
    return vr_policy_slice_verdict(&b, p, moving_ns, moving_slots, period, true);
}

/* stable: no buffer moves: every one stays compared, no VMM work, at any
 * price. */
Test(policy, a_still_buffer_gets_no_slice)
{
    enum vr_slice_verdict want = VR_SLICE_STILL;
    cr_assert_eq(verdict(&h200, 1000, false, false, 0, 0, VR_PERIOD_BUDGET), want);
    cr_assert_eq(verdict(&dear, 1000, false, false, 0, 0, VR_PERIOD_BUDGET), want);
    struct vr_buffer_seen b = {.anchors = 1000};
    cr_assert_eq(vr_policy_compare_ns(&b, &h200), 0);
}

/* An exec none of whose moving buffers got a slice (none moved, or none is
 * worth it) makes no slot for its still ones either; one that got a slice
 * gives its still buffers slots too. */
Test(policy, still_buffers_join_only_the_slices_of_moving_ones)
{
    cr_assert_not(vr_policy_still_sliced(0));
    cr_assert(vr_policy_still_sliced(1));
    cr_assert(vr_policy_still_sliced(8));
}

/* realloc: one node's buffer moves every step, to new memory: its update
 * (228 ns) is cheaper than a remap and than the variants of an unknown
 * period (4 instantiations over the horizon: 408 ns). */
Test(policy, one_moving_node_is_not_worth_a_slice)
{
    uint64_t moving = 1 * h200.setparams;
    cr_assert_eq(verdict(&h200, 1, true, false, moving, 1, VR_PERIOD_BUDGET),
                 VR_SLICE_NOT_WORTH_IT);
    struct vr_buffer_seen b = {.anchors = 1, .moved = true};
    cr_assert_eq(vr_policy_slice_verdict(&b, &dear, dear.setparams, 1, VR_PERIOD_BUDGET, false),
                 VR_SLICE_NOT_WORTH_IT, "at 1 us a SetParams, still no remap for one node");
}

/* fanout and periodic: 8 buffers of 125 nodes each. At the H200's prices
 * one buffer's updates (28.5 us) cost less than its remap (32.6 us), but
 * the exec's moving updates (228 us a step) cost far more than the
 * variants of a period of 4 (4 instantiations and 32 slots over the
 * horizon: under 1 us); at the dearer prices a remap pays on its own. */
Test(policy, many_moving_nodes_pay_for_slices_or_variants)
{
    struct vr_buffer_seen b = {.anchors = 125, .moved = true};
    cr_assert(vr_policy_compare_ns(&b, &h200) < vr_policy_slice_ns(&b, &h200));
    uint64_t moving = 8 * vr_policy_compare_ns(&b, &h200);
    cr_assert_eq(verdict(&h200, 125, true, false, moving, 8, VR_PERIOD_BUDGET), VR_SLICE_SELECTED);
    cr_assert_eq(vr_policy_slice_verdict(&b, &h200, moving, 8, VR_PERIOD_BUDGET, false),
                 VR_SLICE_NOT_WORTH_IT, "without variants a remap costs more than 125 updates");
    cr_assert_eq(vr_policy_slice_verdict(&b, &dear, 8 * 125 * dear.setparams, 8, VR_PERIOD_BUDGET,
                                         false),
                 VR_SLICE_SELECTED, "at 1 us a SetParams a remap pays on its own");
}

/* pingpong: a buffer seen to come back within the profile (a period) is
 * served by variants whatever its nodes: the variants end its updates for
 * good. Not seen to come back, the variants of an unknown period are
 * weighed against the horizon, and the period the profile saw is what they
 * cost. */
Test(policy, a_period_seen_in_the_profile_pays_for_variants)
{
    cr_assert_eq(verdict(&h200, 1, true, true, h200.setparams, 1, 2), VR_SLICE_SELECTED);
    cr_assert_eq(verdict(&h200, 1, true, false, h200.setparams, 1, VR_PERIOD_BUDGET),
                 VR_SLICE_NOT_WORTH_IT);
    struct vr_buffer_seen b = {.anchors = 1, .moved = true, .back = true};
    cr_assert_eq(vr_policy_slice_verdict(&b, &h200, h200.setparams, 1, 2, false),
                 VR_SLICE_NOT_WORTH_IT, "no variants: a remap for one update does not pay");
    cr_assert_lt(vr_policy_variants_ns(2, 2, &h200), vr_policy_variants_ns(2, 4, &h200));
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
    cr_assert(vr_policy_variant_pays(true, false, 0, 100));
    cr_assert(vr_policy_variant_pays(false, true, 50, 100));
    cr_assert_not(vr_policy_variant_pays(false, true, 49, 100));
    cr_assert_not(vr_policy_variant_pays(false, false, 100, 100),
                  "unweighed: the counts are unknown");
}

/* churn: buffers freed and re-allocated every step move to new
 * allocations: no variant made earlier holds them, so only a remap per
 * move is weighed: at the H200's prices 125 updates (28.5 us) are cheaper
 * than a remap (32.6 us), at the dearer ones a remap pays. */
Test(policy, a_renewed_buffer_is_weighed_without_variants)
{
    struct vr_buffer_seen b = {.anchors = 125, .moved = true, .renewed = true};
    uint64_t moving = 8 * vr_policy_compare_ns(&b, &h200);
    cr_assert_eq(vr_policy_slice_verdict(&b, &h200, moving, 8, VR_PERIOD_BUDGET, true),
                 VR_SLICE_NOT_WORTH_IT);
    b.back = true;
    cr_assert_eq(vr_policy_slice_verdict(&b, &h200, moving, 8, 2, true), VR_SLICE_NOT_WORTH_IT);
    cr_assert_eq(vr_policy_slice_verdict(&b, &dear, 8 * 125 * dear.setparams, 8, VR_PERIOD_BUDGET,
                                         true),
                 VR_SLICE_SELECTED);
}

/* A rebind's access at the window's share: two calls for six slots mapped
 * price a third each; nothing mapped, the whole call. Fails if the share
 * divides the wrong way or drops the call where nothing was counted. */
Test(policy, a_shared_access_call_is_priced_per_slot)
{
    cr_assert_eq(vr_policy_share(18948, 2, 6), 6316);
    cr_assert_eq(vr_policy_share(18948, 6, 6), 18948);
    cr_assert_eq(vr_policy_share(18948, 0, 0), 18948);
    cr_assert_eq(vr_policy_share(18948, 4, 3), 25264, "a refused run: the retries count");
}

/* ---- re-deciding from the ledger ---- */

/* rebind at SetParams 20 us (16 nodes read X): the first rebind's updates
 * cost 320 us, a slot and a remap about 53: a profile again at once. At the
 * H200's 228 ns the same moves never pay a remap, however many come. */
Test(policy, the_ledger_pays_at_dear_setparams_only)
{
    struct vr_prices dear20 = h200;
    dear20.setparams = 20000;
    struct vr_dedup_ledger l = {0};
    cr_assert_not(vr_policy_ledger_pays(&l), "nothing forwarded: nothing to weigh");
    vr_policy_ledger_note(&l, 0, &dear20);
    cr_assert_eq(l.moves, 0);
    vr_policy_ledger_note(&l, 16, &dear20);
    cr_assert_eq(l.forwarded, 16);
    cr_assert_eq(l.forwarded_ns, 320000);
    cr_assert_eq(l.slice_ns, h200.remap + h200.slot);
    cr_assert(vr_policy_ledger_pays(&l));
    cr_assert(vr_policy_reprofile_due(&l, 7, 0));
    cr_assert_not(vr_policy_reprofile_due(&l, 7, VR_REPROFILE_FIRST));

    struct vr_dedup_ledger c = {0};
    for (int i = 0; i < 1000; i++)
        vr_policy_ledger_note(&c, 16, &h200);
    cr_assert_not(vr_policy_ledger_pays(&c), "%llu ns of updates against %llu of remaps",
                  (unsigned long long)c.forwarded_ns, (unsigned long long)c.slice_ns);
}

/* fanout at the H200's prices, 8 buffers of 25 nodes: the floor of one
 * remap a launch would call for a profile; once a profile saw the 8 move
 * together, 8 remaps a launch never pay for 200 updates. */
Test(policy, the_ledger_prices_the_buffers_seen_moving)
{
    struct vr_dedup_ledger one = {0}, eight = {.movers = 8};
    for (int i = 0; i < 100; i++) {
        vr_policy_ledger_note(&one, 200, &h200);
        vr_policy_ledger_note(&eight, 200, &h200);
    }
    cr_assert(vr_policy_ledger_pays(&one));
    cr_assert_not(vr_policy_ledger_pays(&eight));
    cr_assert_eq(eight.slice_ns, 8 * (100 * h200.remap + h200.slot));
}

Test(policy, reprofile_waits_double_up_to_the_cap)
{
    uint32_t w = vr_policy_reprofile_backoff(0);
    cr_assert_eq(w, VR_REPROFILE_FIRST);
    cr_assert_eq(vr_policy_reprofile_backoff(w), 2 * VR_REPROFILE_FIRST);
    unsigned steps = 1;
    while (w < VR_REPROFILE_MAX) {
        w = vr_policy_reprofile_backoff(w);
        steps++;
    }
    cr_assert_eq(w, VR_REPROFILE_MAX);
    cr_assert_lt(steps, 16, "a bounded number of doublings");
    cr_assert_eq(vr_policy_reprofile_backoff(VR_REPROFILE_MAX), VR_REPROFILE_MAX);
}

/* A profile again decides once it saw a move, never before the profile's
 * least launches, and at most VR_REPROFILE_LAUNCHES without one. */
Test(policy, a_profile_again_waits_for_a_move)
{
    cr_assert_not(vr_policy_reprofile_done(3, 3, false));
    cr_assert_not(vr_policy_reprofile_done(2, 3, true));
    cr_assert(vr_policy_reprofile_done(3, 3, true));
    cr_assert(vr_policy_reprofile_done(VR_REPROFILE_LAUNCHES, 3, false));
}
