/* policy: the adaptive rules (policy.h). Each function is a pure function
 * of its arguments; the comments give each rule's reason. */
#include "policy.h"

#include "assert.h"

/* A sum stays under eight times the dearest window: no overflow where one
 * window's figures fit. */
static uint64_t discounted(uint64_t sum, uint64_t window) { return sum - sum / 8 + window; }

bool vr_policy_slices_settle(struct vr_slice_ledger *l, uint64_t cost, uint64_t saved)
{
    l->cost = discounted(l->cost, cost);
    l->saved = discounted(l->saved, saved);
    l->windows++;
    return l->windows >= 2 && cost > 0 &&
           vr_policy_cheaper_by(l->saved, l->cost, VR_SETTLE_MARGIN_EIGHTHS);
}

uint64_t vr_policy_compare_ns(const struct vr_buffer_seen *b, const struct vr_prices *p)
{
    return b->moved ? (uint64_t)b->anchors * p->setparams : 0;
}

uint64_t vr_policy_slice_ns(const struct vr_buffer_seen *b, const struct vr_prices *p)
{
    return (b->moved ? p->remap : 0) + p->slot / VR_HORIZON;
}

uint64_t vr_policy_variants_ns(size_t moving_slots, unsigned period, const struct vr_prices *p)
{
    VR_ASSERT(period > 0);
    return period * (p->instantiate + moving_slots * p->slot) / VR_HORIZON;
}

enum vr_slice_verdict vr_policy_slice_verdict(const struct vr_buffer_seen *b,
                                              const struct vr_prices *p, uint64_t moving_ns,
                                              size_t moving_slots, unsigned period,
                                              bool variants)
{
    /* Dedup absorbs every update of a buffer that stays: on its own, a
     * slice would add its VMM work and the transition's updates and save
     * nothing (vr_policy_still_sliced: whether it joins the moving ones). */
    if (!b->moved)
        return VR_SLICE_STILL;
    if (vr_policy_cheaper(vr_policy_slice_ns(b, p), vr_policy_compare_ns(b, p)))
        return VR_SLICE_SELECTED;
    /* A period seen in the profile: its variants end this buffer's updates
     * for good, a bounded one-time cost against a saving at every launch. */
    if (b->renewed)
        return VR_SLICE_NOT_WORTH_IT;
    if (variants && b->back)
        return VR_SLICE_SELECTED;
    /* Variants may serve a recurring set at no cost per launch: worth their
     * instantiations where the moving buffers' updates cost more. */
    if (variants && vr_policy_cheaper(vr_policy_variants_ns(moving_slots, period, p), moving_ns))
        return VR_SLICE_SELECTED;
    return VR_SLICE_NOT_WORTH_IT;
}

bool vr_policy_still_sliced(size_t movers_sliced)
{
    return movers_sliced > 0;
}

unsigned vr_policy_absorb_losing(unsigned losing, uint64_t seen, uint64_t kept)
{
    VR_ASSERT(kept <= seen);
    /* An absorbed update saves one SetParams (230 ns on an H200, 1 us in the
     * cost model); a forwarded one costs about 220 instructions more than
     * passing it (scripts/bench-instr: 294 against 72): under one in eight
     * absorbed, passing costs less on any of them. */
    return seen >= VR_WEIGH_EVERY && kept * 8 < seen ? losing + 1 : 0;
}

uint32_t vr_policy_backoff(uint32_t last)
{
    uint32_t next = !last ? VR_REPROBE_FIRST : last < VR_REPROBE_MAX ? 2 * last : VR_REPROBE_MAX;
    VR_ASSERT(next >= VR_REPROBE_FIRST);
    return next;
}

unsigned vr_policy_brief(unsigned brief, uint64_t lived)
{
    /* Each update undoes the decision: its slices are made again (a map and
     * a set-access per buffer, 20 us on an H200) and the nodes re-pointed.
     * An exec updated every few launches never earns that back. */
    return lived < VR_BRIEF_DECISION ? brief + 1 : 0;
}

bool vr_policy_variant_pays(bool again, bool weighed, size_t moved, size_t total)
{
    /* A new variant costs an instantiation and an update of every anchored
     * node, once; passing the moved slots through costs their nodes at
     * every move. A pipeline bound by the GPU (every variant busy) once
     * made more of them for fewer moved nodes: that made the number of
     * variants, and everything after, depend on what completed when. */
    return again || (weighed && moved * 2 >= total);
}

void vr_policy_ledger_note(struct vr_dedup_ledger *l, uint64_t forwarded,
                           const struct vr_prices *p)
{
    if (!forwarded)
        return;
    l->forwarded += forwarded;
    l->forwarded_ns += forwarded * p->setparams;
    l->moves++;
    /* The first move needs the slots; every move a remap of each. */
    uint64_t movers = l->movers ? l->movers : 1;
    l->slice_ns += movers * (p->remap + (l->moves == 1 ? p->slot : 0));
}

bool vr_policy_ledger_pays(const struct vr_dedup_ledger *l)
{
    return l->moves > 0 && vr_policy_cheaper(l->slice_ns, l->forwarded_ns);
}

uint32_t vr_policy_reprofile_backoff(uint32_t last)
{
    uint32_t next = !last                       ? VR_REPROFILE_FIRST
                    : last < VR_REPROFILE_MAX ? 2 * last
                                              : VR_REPROFILE_MAX;
    VR_ASSERT(next >= VR_REPROFILE_FIRST && next <= VR_REPROFILE_MAX);
    return next;
}
