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
    uint8_t *back;   /* the first allocation came back after another (pingpong) */

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
};

#endif
