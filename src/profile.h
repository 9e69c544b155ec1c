/* profile: what an exec's first launches show, and the decision taken on it.
 *
 * Every scanned argument word is observed at each successful profile launch.
 * A word that held the same value every time and pointed into (or exactly at
 * the end of) the same tracked allocation every time is an *anchor*. The
 * first launch reads every node; a later one reads only the nodes whose
 * reading could differ from the last: those the program re-set
 * (vr_profile_touch), and those with an anchor word in a range the
 * allocation registry reported changed (vr_alloc_changed_since: a buffer
 * freed, maybe re-allocated at the same address, changes no byte of the
 * node), found through an index of anchor values (ptrindex.h). When more
 * changes went by than the registry keeps, every node. So a profile launch
 * costs O(changed nodes); the log's `profile_reads` says how many it read.
 * The allocations holding anchors are the candidates; each is selected or
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

#include "alloc.h"
#include "node.h"
#include "policy.h"
#include "slice.h"
#include "xlat.h"

struct vr_profile;

/* Whether execs may get variants (variant.h): a buffer that alternates is
 * then worth a slice whatever its anchors; and whether still buffers get
 * slices in every exec (VAREMAP_SLICE_STILL). */
void vr_profile_configure(bool variants, bool slice_still);

int vr_profile_new(struct vr_profile **out, size_t nwords);
void vr_profile_free(struct vr_profile *p);
unsigned vr_profile_launches(const struct vr_profile *p);

/* The profile is one again, of an exec decided against slices whose
 * forwarded updates would have paid for them (policy.h's ledger): its
 * exec has no variants any more, so none are budgeted; and its still
 * buffers stay on the compare path (the ledger will call for another
 * profile if they start moving): the transition re-points the moving
 * buffers' nodes only. */
void vr_profile_again(struct vr_profile *p);
/* Whether an anchor's buffer moved at a launch after the first. */
bool vr_profile_moved(const struct vr_profile *p);

/* The prices a decision weighs with (cost.h's, now). */
struct vr_prices vr_profile_prices(void);

/* The program changed node `node`'s intended words (index into the exec's
 * nodes): the next launch reads them again. */
void vr_profile_touch(struct vr_profile *p, size_t node);

/* One successful launch: reads the intended words of every node the first
 * time, then of the nodes that may read differently (above). */
void vr_profile_observe(struct vr_profile *p, const struct vr_nodes *ns);

struct vr_decision {
    bool active;
    struct vr_slices *slices; /* active: the selected allocations, bound */
    vr_anchor *anchor_slot;   /* active: per word, the anchor's slot or -1 */
    uint8_t *slot_back;       /* active: per slot, its buffer came back while profiled */
    size_t selected;
    bool moved;               /* active: a selected buffer moved while profiled */
    size_t moving;            /* candidates whose buffer moved while profiled */
};

/* Decides, binds the selected allocations and logs the decision. `observe`:
 * decide as if eligible allocations were VMM-backed, bind nothing. */
void vr_profile_decide(struct vr_profile *p, const struct vr_nodes *ns, CUgraphExec exec,
                       bool observe, struct vr_decision *out);

/* The allocation a word points into, its end included (an end pointer
 * means the allocation it ends): 0 and *a set, or -ENOENT. The one rule of
 * "which allocation does this word name", for the profile and remap.c. */
int vr_profile_find_alloc(uint64_t word, struct vr_alloc_info *a);
/* The same as an id (0 when none) and *base. */
uint64_t vr_profile_alloc_of(uint64_t word, uint64_t *base);

/* The homes of node nd's anchors, each slot once per node: the next slot
 * (below nslots) from word *k on that last[] does not already hold `tag`
 * for, marked with it; -1 when none is left. The one walk that counts the
 * nodes homed in each slot (remap.c's index, the variants' weights). */
static inline int32_t vr_profile_next_home(const struct vr_node *nd, const vr_anchor *anchor_slot,
                                           size_t nslots, uint32_t *last, uint32_t tag,
                                           uint32_t *k)
{
    for (; nd->layout && *k < nd->layout->nwords; (*k)++) {
        int32_t s = anchor_slot[nd->word0 + *k];
        if (s < 0 || (size_t)s >= nslots || last[s] == tag)
            continue;
        last[s] = tag;
        (*k)++;
        return s;
    }
    return -1;
}

#endif
