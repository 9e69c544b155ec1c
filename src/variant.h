/* variant: an active exec's other executable graphs, and the order and
 * completion of all its launches.
 *
 * A rebind would otherwise remap a slice only once the exec's last launch is
 * known complete, or pass the nodes through untranslated. Instead, up to
 * VAREMAP_VARIANTS - 1 further execs (twice that many while every one is
 * still running when a launch needs one) are instantiated from a clone of
 * the program's graph (cloned at instantiation: programs destroy their graph
 * right after), each with its own reservation laid out like the program's
 * exec's (same slot sizes, same order). Every variant holds the same node
 * parameters as the program's exec, except that an anchor word pointing into
 * slot s of the program's exec's reservation points into slot s of the
 * variant's. So a launch may use any variant whose slots hold the bindings
 * the program's exec's slots target: a periodic pattern settles with one
 * variant per phase and no VMM call (stale aliases are reused); otherwise a
 * variant whose last launch is complete is remapped, or a new one made.
 *
 * The program's exec is variant 0 and keeps its own path (exec.c); this
 * module only ever returns it when no other variant can run. Node changes
 * reach the variants lazily: exec.c reports every change to a node's
 * installed parameters (vr_variants_touch) and a variant is brought up to
 * date right before it is launched (O(changed nodes) between its launches,
 * and nothing when nothing changed). A change the shim cannot replay (a
 * node passed through raw, an update of the whole exec) freezes the set:
 * its variants go and none is made again.
 *
 * Ordering and completion of all the exec's launches: track.h.
 *
 * Not thread-safe: the owning exec's lock serializes every call.
 */
#ifndef VR_VARIANT_H
#define VR_VARIANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "node.h"
#include "slice.h"
#include "track.h"
#include "xlat.h"

#define VR_VARIANTS_MAX 16

/* ---- the variants ----------------------------------------------------- */

struct vr_variants;

/* What a variant is made of, lent by the exec for one call. */
struct vr_var_ctx {
    const struct vr_nodes *ns;
    const vr_anchor *anchor_slot; /* per word: the anchor's slot, or -1 */
    const uint8_t *slot_back;     /* per slot: its buffer came back while profiled */
    const struct vr_slices *base; /* the program's exec's: targets = what to launch */
    uint8_t *xlat;                /* scratch of ns->max_bytes */
    void **kp;                    /* scratch of ns->max_params */
    /* a reservation leaves: destroyed once launches up to `last` completed */
    void (*bury)(void *owner, struct vr_slices *s, uint64_t last);
    void *owner;
    uint64_t *pushes;             /* counts the node updates sent to variants */
    uint64_t *rebinds;            /* counts the slots of variants remapped */
    struct vr_remap_tally *remaps; /* their mappings and access calls */
};

/* At instantiation, for an exec that may be varied (max > 1, no
 * instantiation flag but node priorities: never device launch): clones
 * graph when it holds only kernel (none device-updatable), empty, memcpy,
 * memset, host and event record/wait nodes.
 * Returns 0 or a negative code; *out NULL: never varied. */
int vr_variants_new(struct vr_variants **out, CUgraph graph, const struct vr_nodes *ns,
                    unsigned max, unsigned long long flags);
/* Destroys the variants (their reservations through cx->bury) and the clone. */
void vr_variants_free(struct vr_variants *vs, const struct vr_var_ctx *cx);
/* Drops the variants; `freeze`: none is made again. */
void vr_variants_drop(struct vr_variants *vs, const struct vr_var_ctx *cx, bool freeze);
bool vr_variants_usable(const struct vr_variants *vs);
/* The variants checker (VR_ASSERT_EXPENSIVE): in-use entries counted by nv,
 * below cap, with ids handed out; the change log's entries flagged; the
 * other-type nodes sorted. NULL is consistent. */
bool vr_variants_check(const struct vr_variants *vs);

/* Node i's installed parameters changed (in the program's exec). */
void vr_variants_touch(struct vr_variants *vs, size_t i);

/* What vr_variants_pick would answer when it can tell with no driver call
 * (a variant holds every target and every node is up to date there), else
 * 0: a variant switch of a period asks the driver nothing, not even the
 * current context. */
int vr_variants_ready(const struct vr_variants *vs, const struct vr_var_ctx *cx);

/* The variant to launch for the base's targets: 0 = the program's exec
 * (its own path: it holds them, or it is the only choice left), else a
 * variant that holds them now, with every node up to date. `v0_last`: the
 * program's exec's last launch (t's numbering); *vmm: VMM calls were made. */
int vr_variants_pick(struct vr_variants *vs, struct vr_track *t, const struct vr_var_ctx *cx,
                     uint64_t v0_last, bool *vmm);
CUgraphExec vr_variants_handle(const struct vr_variants *vs, int var);
/* A variant's id for vr_track (never reused; 0 for the program's exec). */
uint64_t vr_variants_id(const struct vr_variants *vs, int var);
void vr_variants_launched(struct vr_variants *vs, int var, uint64_t seq);

/* cuGraphUpload of every variant in (stream, ptsz); a refusal is ignored
 * (an upload only prepares: the launch uploads what it needs). */
void vr_variants_upload(const struct vr_variants *vs, CUstream stream, bool ptsz);

/* An allocation is going away: every variant slot holding it is unmapped
 * now when the variant is idle, else the variant is dropped. */
void vr_variants_forget_alloc(struct vr_variants *vs, struct vr_track *t,
                              const struct vr_var_ctx *cx, uint64_t id);
/* Whether a variant maps allocation id. */
bool vr_variants_holds(const struct vr_variants *vs, uint64_t id);
/* A peer was enabled: access again on every variant's slots. */
void vr_variants_reaccess(struct vr_variants *vs);

/* cuGraphNodeSetEnabled succeeded on the program's exec: the same on every
 * variant, and on those made later; kernel node index i, or SIZE_MAX and the
 * program's node handle (a node of another type; one the set does not know
 * freezes it). */
void vr_variants_set_enabled(struct vr_variants *vs, const struct vr_var_ctx *cx, size_t i,
                             CUgraphNode node, unsigned enabled);

struct vr_set;
/* A setter of a node that is not a kernel (setters.h) succeeded on the
 * program's exec for its node `node`: the same call on every variant's
 * node, kept for the variants made later. A node the set does not know, a
 * call it cannot keep, or a variant refusing what the program's exec took:
 * the variants go, and none is made again. */
void vr_variants_set_node(struct vr_variants *vs, const struct vr_var_ctx *cx, CUgraphNode node,
                          const struct vr_set *set);

#endif
