/* profile_internal: the profile's record, shared by its two halves only:
 * profile.c observes the launches, profile_decide.c decides on what they
 * showed. Nothing else includes this.
 */
#ifndef VR_PROFILE_INTERNAL_H
#define VR_PROFILE_INTERNAL_H

#include "profile.h"
#include "ptrindex.h"

/* Why a node is read at the next profile launch. */
enum { READ_SET = 1, READ_FREED = 2 };

struct vr_profile {
    size_t nwords;
    unsigned launches;
    /* per word: first value, its allocation (0: none, or not an anchor any
     * more) and base; sig: the sequence of allocations seen there (equal to
     * id while it never changed), size: the first allocation's size */
    uint64_t *val, *id, *base, *sig, *size, *prev;
    uint64_t *alt;   /* the first allocation other than id seen there (0: none yet) */
    uint8_t *back;   /* the first allocation came back after another (pingpong) */

    /* Allocations a word that is no anchor pointed into (or ended) at some
     * profiled launch, and both sides of a word that was one allocation's
     * end and another's start: their words cannot all be translated
     * together, so none is sliced (pairs stay pairs). Appended, sorted and
     * made unique when full and at the decision; `lost`: out of memory
     * once, every candidate is rejected. */
    uint64_t *loose;
    size_t nloose, caploose;
    bool loose_lost;

    /* What the next launch reads (made at the first launch; without them
     * every launch reads every node, `all`): per node READ_* bits, and the
     * nodes that have any, once each. */
    uint8_t *why;
    uint32_t *todo;
    size_t nnodes, ntodo;
    /* (value, node) of every anchor word as last read, once a registry
     * change needs it: the nodes the change may concern. Entries of values
     * since re-set stay (an extra read, never a missed one). */
    struct vr_ptrindex idx;
    bool indexed;    /* idx made (at the first change seen: index_all) */
    uint64_t gen;    /* vr_alloc_generation() before the last read */
    bool all;        /* every launch reads every node */
    uint32_t *reads; /* nodes read, per launch (the log's profile_reads) */
    size_t capreads;
    /* A profile again (vr_profile_again): no variants, no still buffer
     * sliced unless configured; and whether an anchor's buffer moved at a
     * launch after the first. */
    bool again, moved;
};

/* Allocation `id` (0: none) holds a word that cannot be anchored. */
void vr_profile_loosen(struct vr_profile *p, uint64_t id);
/* The allocation word v names for the profile (0: none), *base and *size
 * set: a word where one allocation starts and another ends names either
 * (a start or an end pointer), so it names none, and both are loosened. */
uint64_t vr_profile_named_by(struct vr_profile *p, uint64_t v, uint64_t *base, uint64_t *size);
/* Sorts p->loose and drops its duplicates (profile.c). */
void vr_profile_loose_compact(struct vr_profile *p);
/* Whether `id` was loosened; p->loose compacted since the last loosen. */
bool vr_profile_loose(const struct vr_profile *p, uint64_t id);

#endif
