/* policy: every adaptive rule of the exec layer, as pure functions of
 * numbers: no driver call, no lock, no clock, no state of their own. The
 * callers (launch.c, exec.c, variant.c) gather the numbers, ask, and act on
 * the verdict; the unit suite (tests/unit/test_policy.c) checks each rule
 * with numbers in and a verdict out.
 *
 * The units: costs in nanoseconds (cost.h's estimates), windows and ages in
 * launches of the program's exec, counts in updates or nodes.
 */
#ifndef VR_POLICY_H
#define VR_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every this many launches an exec weighs what its slices cost against what
 * they saved, or what comparing its updates absorbed. */
#define VR_WEIGH_EVERY 32

/* A passing exec compares again after this many launches (a reprobe), and
 * after twice as many each time it found its updates still changing, up to
 * VR_REPROBE_MAX: a program whose buffers settle after a while absorbs
 * again, one whose buffers never do pays a short window of compares now and
 * then. */
#define VR_REPROBE_FIRST 256
#define VR_REPROBE_MAX 65536
/* A reprobe is judged on one window this short: its first launch's updates
 * all go to the driver, and settled buffers are absorbed from the second
 * (7 in 8), moving ones not at all. A long window would cost an exec whose
 * buffers never settle a window of compares at each reprobe. */
#define VR_REPROBE_WINDOW 8

/* A decision undone by cuGraphExecUpdate within this many launches did not
 * pay for its slices. */
#define VR_BRIEF_DECISION 64

/* Launches that SetParams pass moved buffers through after one that no
 * variant could serve. */
#define VR_STUCK_LAUNCHES 4

/* Whether `since` launches after the last weighing close a window; a
 * reprobe's window is the short one. Inline: asked at every launch. */
static inline bool vr_policy_window_closed(uint64_t since, bool probing)
{
    return since >= (probing ? VR_REPROBE_WINDOW : VR_WEIGH_EVERY);
}

/* What an exec's slices cost and saved, in ns, over the windows since they
 * were made: each window's figures are added after the sums so far lost an
 * eighth of their weight, so that about the last eight windows speak.
 * Zero: no window weighed yet. */
struct vr_slice_ledger {
    uint64_t cost, saved;
    unsigned windows;
};
/* The ledger settles the slices when it saved at most 1 - 4/8 of its cost:
 * a wider margin than a choice's (VR_MARGIN_EIGHTHS), because a window's
 * figures follow the host's load, not only the program. On simcuda at the
 * measured prices, fanout's windows cost 0.61-0.76 of their savings on an
 * idle machine, up to 1.16-1.39 on a loaded one (a window or two), and CI
 * saw a ledger with a quarter's discount and a 1/4 margin settle it in 1
 * run of 10; a pipeline bound by the GPU (e2e alloc/busy_pipeline) cost
 * 2.3-3.3 of its savings, window after window. */
#define VR_SETTLE_MARGIN_EIGHTHS 4u
/* Enters one window (cost = the shim's own updates re-pointing nodes and
 * its remaps, at their prices; saved = the updates absorbed only because
 * the slices made them identical to what the driver holds, at the
 * SetParams price; an update forwarded costs the same with slices and
 * without, and is not weighed). Returns whether the exec settles (goes on
 * without slices): from the second window on, a window that cost something
 * and a ledger short by VR_SETTLE_MARGIN_EIGHTHS. Whether the stream was
 * behind (a busy slice: its new buffer passed as written, re-pointed later)
 * moves one window's figures with the host's load; the discounted sums and
 * the margin follow only a lasting loss (a pipeline bound by the GPU). */
bool vr_policy_slices_settle(struct vr_slice_ledger *l, uint64_t cost, uint64_t saved);

/* The compares' window: `kept` of `seen` updates absorbed. Returns the
 * losing windows in a row after this one (fewer than one in eight absorbed,
 * over a window of at least VR_WEIGH_EVERY updates). */
unsigned vr_policy_absorb_losing(unsigned losing, uint64_t seen, uint64_t kept);
/* Whether the exec passes from now on: two losing windows, or one after a
 * reprobe. */
static inline bool vr_policy_passes(unsigned losing, bool probing)
{
    return losing >= (probing ? 1u : 2u);
}
/* The launches of passing before the next reprobe, given the last back-off
 * (0: none since the exec last absorbed). */
uint32_t vr_policy_backoff(uint32_t last);
/* Whether a passing exec reprobes, `passed` launches after it began to
 * pass. */
static inline bool vr_policy_reprobe_due(uint64_t passed, uint32_t after)
{
    return passed >= after;
}

/* After a cuGraphExecUpdate that came `lived` launches after the last one:
 * the updates in a row that came too soon (`brief` before this one). */
unsigned vr_policy_brief(unsigned brief, uint64_t lived);
/* Two brief decisions in a row: the exec churns and keeps no slices. */
static inline bool vr_policy_churns(unsigned brief) { return brief >= 2; }

/* ---- the cost model ------------------------------------------------------
 *
 * Every choice below is priced in host nanoseconds per launch of the
 * program's exec, from counts (what the profile and the windows observed)
 * times prices (cost.h: the model's figures unless measured well outside
 * them), never from a wall clock directly: the same program at the same
 * prices decides the same way in every run. One-time work (a slot, a
 * variant's instantiation) is spread over VR_HORIZON launches. A choice
 * changes only when the other side is cheaper by VR_MARGIN_EIGHTHS/8
 * (hysteresis): a price that noise moves a little never flips it, and where
 * both sides cost nothing nothing is decided. */

/* Launches one-time work is spread over: a program that replays a graph
 * replays it for thousands of steps (a training run, a solver); a shorter
 * run pays its one-time work once, at most a few milliseconds. */
#define VR_HORIZON 10000u
/* A choice changes when the other side costs at most 1 - 2/8 of it. */
#define VR_MARGIN_EIGHTHS 2u
/* Recurring buffer sets the decision budgets variants for (the setting's
 * default): the one-time price of serving a period with variants. */
#define VR_PERIOD_BUDGET 4u


struct vr_prices {
    uint64_t setparams; /* one update reaching the driver */
    uint64_t remap;     /* moving one slot: unmap + map + set-access */
    uint64_t slot;      /* a new slot: reserve + map + set-access */
    uint64_t instantiate;
};

/* What the profile saw of one buffer its nodes point at. */
struct vr_buffer_seen {
    unsigned anchors; /* nodes homed in it */
    bool moved;       /* its allocation changed between profiled launches */
    bool back;        /* and an earlier one came back (a period) */
    bool renewed;     /* the one it first held was freed: it moves to new
                       * allocations, which no variant made earlier holds */
};

enum vr_slice_verdict {
    VR_SLICE_SELECTED,
    VR_SLICE_STILL,         /* never moved: compared, absorbed, no VMM work */
    VR_SLICE_NOT_WORTH_IT,  /* a remap per move costs more than its updates */
};

/* True when `b` costs at most 1 - eighths/8 of `a`; never when b is 0 and
 * a is 0. */
static inline bool vr_policy_cheaper_by(uint64_t b, uint64_t a, unsigned eighths)
{
    return a > 0 && b * 8 <= a * (8 - eighths);
}
/* A per-slot price of a call that `calls` calls served for `slots` slots
 * (one cuMemSetAccess over adjacent slots): price * calls / slots; the
 * whole price where nothing was counted. */
static inline uint64_t vr_policy_share(uint64_t price, uint64_t calls, uint64_t slots)
{
    return slots ? price * calls / slots : price;
}

/* True when `b` is cheaper than `a` by a choice's margin. */
static inline bool vr_policy_cheaper(uint64_t b, uint64_t a)
{
    return vr_policy_cheaper_by(b, a, VR_MARGIN_EIGHTHS);
}

/* Host ns per launch of serving one buffer that moves every launch by
 * comparing (its updates forwarded: dedup), by a slice (a remap per move),
 * and by variants (one executable graph per recurring set: its slot once
 * per variant, spread over the horizon; the instantiation is the exec's,
 * counted in vr_policy_variants_ns). */
uint64_t vr_policy_compare_ns(const struct vr_buffer_seen *b, const struct vr_prices *p);
uint64_t vr_policy_slice_ns(const struct vr_buffer_seen *b, const struct vr_prices *p);
/* The exec's variants, all its moving buffers together: one instantiation
 * and its slots per buffer set of the `period` (the profile's when every
 * moving buffer came back in it, VR_PERIOD_BUDGET otherwise), spread over
 * the horizon. */
uint64_t vr_policy_variants_ns(size_t moving_slots, unsigned period, const struct vr_prices *p);

/* One buffer's verdict at the decision (variants count only for a buffer
 * that moves among live allocations: a renewed one is served by a remap
 * per move or not at all). `moving_ns`: what comparing every
 * moving buffer of the exec costs per launch (vr_policy_compare_ns summed);
 * `variants`: whether the exec may get variants. A still buffer gets no
 * slice; a moving one gets one when its remaps are cheaper than its
 * updates, or when variants would serve the exec's moving buffers cheaper
 * than comparing them. */
enum vr_slice_verdict vr_policy_slice_verdict(const struct vr_buffer_seen *b,
                                              const struct vr_prices *p, uint64_t moving_ns,
                                              size_t moving_slots, unsigned period,
                                              bool variants);

/* Whether the exec's still buffers (VR_SLICE_STILL) get slices too, given
 * how many of its moving buffers did. Where none did, an exec whose buffers
 * never moved stays on the compare path: no reservation, no mapping, no
 * transition, dedup's price (issue 17). Where the exec gets slices anyway,
 * its still buffers join them: the one-time work of a slot is small beside
 * the reservation and transition already paid, and a buffer still while
 * profiled that moves later (a buffer rebound every few hundred steps) is
 * then served by a remap instead of passing its updates through. */
bool vr_policy_still_sliced(size_t movers_sliced);

/* ---- re-deciding from the ledger ------------------------------------------
 *
 * A profile sees a few launches; a program's buffers may start moving after
 * them (warm-up steps, then a cache that grows, an optimizer that swaps
 * buffers). An exec decided against slices keeps a ledger of what its
 * forwarded updates cost, at the model's prices, beside what slices would
 * have cost for the same moves: per launch whose updates were forwarded, a
 * remap for each buffer the last profile saw move together (at least one:
 * which buffers moved since is not known without a profile, so this is a
 * floor), plus their slots once. When the floor is cheaper by a
 * choice's margin, the exec profiles again; that profile, not the ledger,
 * decides. Each profile again that decides against slices doubles the wait
 * before the next (launches since that decision), up to a cap: a program
 * whose moves never pay a slice (the floor underestimates it) pays a short
 * profile now and then, never a profile per window. */

/* The wait after the first profile again that decided against slices; the
 * first is due as soon as the ledger shows the slices paid (the profile's
 * own window already passed). */
#define VR_REPROFILE_FIRST 32u
#define VR_REPROFILE_MAX 8192u
/* A profile again ends at the first launch after it saw a buffer move (the
 * ledger saw moves: a window of still launches would decide on nothing),
 * or after this many launches without one. */
#define VR_REPROFILE_LAUNCHES 64u

struct vr_dedup_ledger {
    /* Buffers that moved together while last profiled (at least 1): a
     * launch that forwarded updates needs that many remaps. */
    unsigned movers;
    uint64_t forwarded;    /* updates that reached the driver since the decision */
    uint64_t forwarded_ns; /* their price */
    uint64_t moves;        /* launches after which some were forwarded */
    uint64_t slice_ns;     /* the floor of what slices would have cost for them */
};
/* One launch's forwarded updates enter the ledger (none: nothing moved). */
void vr_policy_ledger_note(struct vr_dedup_ledger *l, uint64_t forwarded,
                           const struct vr_prices *p);
/* Whether the ledger shows slices paid: the floor of their cost cheaper
 * than the forwarded updates by a choice's margin. */
bool vr_policy_ledger_pays(const struct vr_dedup_ledger *l);
/* The wait (launches after a decision) before the next profile again,
 * given the last one (0: no profile again decided against slices yet). */
uint32_t vr_policy_reprofile_backoff(uint32_t last);
/* Whether a profile again is due `since` launches after the decision. */
static inline bool vr_policy_reprofile_due(const struct vr_dedup_ledger *l, uint64_t since,
                                           uint32_t wait)
{
    return since >= wait && vr_policy_ledger_pays(l);
}
/* Whether a profile again decides now: after `launches` of its launches,
 * `moved`: it saw a buffer move (and launched once since). */
static inline bool vr_policy_reprofile_done(unsigned launches, unsigned least, bool moved)
{
    return launches >= least && (moved || launches >= VR_REPROFILE_LAUNCHES);
}

/* Whether a new variant pays (variant.c): the targets come back (`again`),
 * or the moved slots hold at least half the `total` anchored nodes
 * (`weighed`: moved and total are known). Counts only: whether the exec
 * and its variants are still running when the question is asked (the
 * simulated or real GPU's timing) never decides. */
bool vr_policy_variant_pays(bool again, bool weighed, size_t moved, size_t total);

#endif
