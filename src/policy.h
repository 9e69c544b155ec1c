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

/* The slices' window, in ns (cost = the shim's own updates re-pointing
 * nodes at `sp` each and remaps at `remap` each; saved = the updates
 * absorbed only because the slices made them identical to what the driver
 * holds, at `sp` each). Returns the losing windows in a row after this one:
 * slices that cost more than they saved, or saved nothing while updates
 * still went to the driver, lose. */
unsigned vr_policy_slices_losing(unsigned losing, uint64_t cost, uint64_t saved, uint64_t kept,
                                 uint64_t forwarded);
/* Two losing windows in a row settle the exec (one busy stretch is no
 * verdict). */
static inline bool vr_policy_settles(unsigned losing) { return losing >= 2; }

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

/* Whether a new variant pays (variant.c): the targets come back (`again`),
 * or the moved slots hold at least half the `total` anchored nodes
 * (`weighed`: moved and total are known), or, while every variant and the
 * program's exec are busy (`stuck`), a share that shrinks with the `nv`
 * variants made already. */
bool vr_policy_variant_pays(bool again, bool weighed, size_t moved, size_t total, bool stuck,
                            unsigned nv);

#endif
