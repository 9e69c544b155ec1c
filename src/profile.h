/* profile: what an exec's first launches show, and the decision taken on it.
 *
 * Every scanned argument word is observed at each successful profile launch.
 * A word that held the same value every time and pointed into (or exactly at
 * the end of) the same tracked allocation every time is an *anchor*. Only
 * the nodes the program touched are read again at later launches; an
 * allocation freed and made again at the same address meanwhile is caught
 * at the decision (verdict `freed`). The
 * allocations holding anchors are the candidates; each is selected or
 * rejected with a reason, the selected ones get slots of one reservation,
 * and the decision is logged (`profile_decision`). The profile's arrays are
 * freed with it, right after the decision. Not thread-safe: the owning
 * exec's lock serializes every call.
 */
#ifndef VR_PROFILE_H
#define VR_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "node.h"
#include "slice.h"
#include "xlat.h"

struct vr_profile;

/* Whether execs may get variants (variant.h): a buffer that alternates is
 * then worth a slice whatever its anchors. */
void vr_profile_configure(bool variants);

int vr_profile_new(struct vr_profile **out, size_t nwords);
void vr_profile_free(struct vr_profile *p);
unsigned vr_profile_launches(const struct vr_profile *p);

/* One successful launch: reads every node's intended words. */
void vr_profile_observe(struct vr_profile *p, const struct vr_nodes *ns);

struct vr_decision {
    bool active;
    struct vr_slices *slices; /* active: the selected allocations, bound */
    vr_anchor *anchor_slot;   /* active: per word, the anchor's slot or -1 */
    uint8_t *slot_back;       /* active: per slot, its buffer came back while profiled */
    size_t selected;
    bool moved;               /* active: a selected buffer moved while profiled */
};

/* Decides, binds the selected allocations and logs the decision. `observe`:
 * decide as if eligible allocations were VMM-backed, bind nothing. */
void vr_profile_decide(struct vr_profile *p, const struct vr_nodes *ns, CUgraphExec exec,
                       bool observe, struct vr_decision *out);

/* The allocation a word points into, its end included: 0 when none. */
uint64_t vr_profile_alloc_of(uint64_t word, uint64_t *base);

#endif
