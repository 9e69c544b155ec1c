/* remap: an active exec's slots and the words that point into them: anchors
 * to slots, translation of a node's arguments, the transition that points
 * the nodes at the slices, fixing the nodes a slot change would make read
 * wrongly, applying the pending remaps at an idle launch, unpointing, and
 * forgetting a freed allocation. Keeps the invariant of exec.h: every
 * installed word is the intended one or a slice address mapping the same
 * byte of the same allocation.
 */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"

struct burial {
    struct vr_slices *s[2 * VR_VARIANTS_MAX + 1];
    size_t n;
};

/* A reservation leaves: destroyed now when launches up to `last` are known
 * complete, else buried with an event after the last launch (gathered into
 * the exec's burial while drop_slices runs); never waits. */
void vr_ex_bury_after(void *owner, struct vr_slices *sl, uint64_t last)
{
    struct vr_exec *e = owner;
    if (vr_track_known(&e->t, last)) {
        vr_tomb_retire(sl, e->ctx);
        return;
    }
    if (e->burial && e->burial->n < sizeof e->burial->s / sizeof *e->burial->s) {
        e->burial->s[e->burial->n++] = sl;
        return;
    }
    vr_tomb_bury(sl, vr_track_event_after(&e->t), e->ctx, false);
}

/* Hands the slices (the variants' too) to the tomb list, to be unmapped
 * once the launches that could read them are known complete; never waits.
 * `freeze`: no variant is made again (the clone no longer matches). */
void vr_ex_drop_slices(struct vr_exec *e, bool freeze)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    struct burial burial = {.n = 0};
    e->burial = &burial;
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_drop(e->vars, &cx, freeze);
    free(e->anchor_slot);
    free(e->slot_back);
    e->slot_back = NULL;
    free(e->anchored);
    e->anchor_slot = NULL;
    e->anchored = NULL;
    e->nanchored = 0;
    free(e->home_first);
    free(e->home_node);
    free(e->dirty);
    free(e->is_dirty);
    free(e->cross);
    free(e->in_cross);
    free(e->mark);
    e->home_first = e->home_node = e->dirty = e->cross = NULL;
    e->is_dirty = e->in_cross = e->mark = NULL;
    e->ndirty = e->ncross = 0;
    e->cross_lost = false;
    if (e->slices)
        vr_ex_bury_after(e, e->slices, e->v0_last);
    e->slices = NULL;
    e->burial = NULL;
    if (burial.n)
        vr_tomb_bury_many(burial.s, burial.n, vr_track_event_after(&e->t), e->ctx, false);
    VR_ASSERT(!e->slices && !e->anchor_slot && !e->ndirty && !e->ncross);
}
/* ---- slot changes --------------------------------------------------------- */

/* Every change of a slot's target goes through these: the nodes that may
 * read the slot are re-checked at the next fix_nodes, and only those. */
static void mark_slot(struct vr_exec *e, size_t s)
{
    VR_ASSERT_INTERNAL(s < vr_slices_count(e->slices));
    if (!e->is_dirty[s]) {
        e->is_dirty[s] = 1;
        e->dirty[e->ndirty++] = (uint32_t)s;
        /* Room for twice the slots (fix_nodes). */
        VR_ASSERT_INTERNAL(e->ndirty <= 2 * vr_slices_count(e->slices));
    }
}

int vr_ex_retarget(struct vr_exec *e, size_t s, const struct vr_slice_bind *b)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    mark_slot(e, s);
    return vr_slices_retarget(e->slices, s, b);
}

void vr_ex_cancel(struct vr_exec *e, size_t s)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    mark_slot(e, s);
    vr_slices_cancel(e->slices, s);
}

/* Remaps the pending slots[0..n) (ascending) in one batch; a failed remap
 * may change the target too (the slot left unbound), so such a slot's
 * nodes are checked again. rc[i]: slots[i]'s result. */
static void remap_slots(struct vr_exec *e, const size_t *slots, size_t n, int *rc,
                        struct vr_remap_tally *tally)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT_INTERNAL(n <= VR_REMAP_BATCH);
    uint64_t want[VR_REMAP_BATCH];
    for (size_t i = 0; i < n; i++) {
        VR_ASSERT(vr_slices_slot_pending(e->slices, slots[i]));
        want[i] = vr_slices_target(e->slices, slots[i])->id;
    }
    vr_slices_remap_many(e->slices, slots, n, rc, tally);
    for (size_t i = 0; i < n; i++)
        if (rc[i] != 0 || vr_slices_target(e->slices, slots[i])->id != want[i])
            mark_slot(e, slots[i]);
}

int vr_ex_remap(struct vr_exec *e, size_t s)
{
    int rc;
    remap_slots(e, &s, 1, &rc, NULL);
    return rc;
}

/* Whether a slice address lies in slot s's window, its end included. */
static bool in_window(const struct vr_exec *e, size_t s, uint64_t va)
{
    VR_ASSERT_INTERNAL(s < vr_slices_count(e->slices));
    uint64_t lo = vr_slices_va(e->slices, s);
    return va >= lo && va - lo <= vr_slices_size(e->slices, s);
}

/* A node whose word was translated into a slot other than its anchor's
 * home: fix_nodes checks it whenever any slot changed. */
static void note_cross(struct vr_exec *e, int32_t home, uint64_t w, uint64_t t)
{
    VR_ASSERT_INTERNAL(e->xnode < e->ns.n && home >= 0);
    if (t == w || in_window(e, (size_t)home, t))
        return;
    /* Made at the first such node: most execs never have one, and the
     * lists cost 5 bytes per node. */
    if (!e->in_cross && !e->cross_lost) {
        size_t n = e->ns.n ? e->ns.n : 1;
        e->cross = malloc(n * sizeof *e->cross);
        e->in_cross = calloc(n, 1);
        if (!e->cross || !e->in_cross) {
            free(e->cross);
            free(e->in_cross);
            e->cross = NULL;
            e->in_cross = NULL;
            e->cross_lost = true;
        }
    }
    if (e->cross_lost || e->in_cross[e->xnode])
        return;
    e->in_cross[e->xnode] = 1;
    e->cross[e->ncross++] = e->xnode;
}

/* ---- translation -------------------------------------------------------- */

/* Allocation a word points into (its end included), as a slice binding. */
static bool binding_of(uint64_t word, struct vr_slice_bind *b)
{
    struct vr_alloc_info a;
    if (vr_profile_find_alloc(word, &a) != 0 || !a.vmm)
        return false;
    *b = (struct vr_slice_bind){a.id, a.base, a.size, a.padded, a.handle, a.device};
    return true;
}

/* The translation of one anchor word for a SetParams: through a stable slot;
 * through a slot about to be remapped only while the exec is idle (the next
 * launch remaps it before running); else as the program wrote it. `*at_home`:
 * the result lies in the anchor's home slot (or is w). */
static uint64_t translate_anchor(struct vr_exec *e, int32_t home, uint64_t w, bool *at_home)
{
    VR_ASSERT_INTERNAL(home >= 0 && (size_t)home < vr_slices_count(e->slices));
    /* Its own slot first: a position keeps its slot, so a buffer that comes
     * back (pingpong, periodic) changes no installed word. With variants a
     * slot may move while the program's exec is busy: the launch picks a
     * variant that holds the targets. */
    bool vary = e->xvary;
    uint64_t t = vr_slices_home(e->slices, (size_t)home, w, vary);
    *at_home = true;
    if (t)
        return t;
    int s = vr_slices_slot_of(e->slices, w, VR_VIEW_TARGET);
    if (!vary && s >= 0 && !vr_slices_slot_pending(e->slices, (size_t)s)) {
        *at_home = false;
        return vr_slices_translate(e->slices, w, VR_VIEW_STABLE);
    }
    if (atomic_load_explicit(&vr_ex_degraded, memory_order_relaxed) || e->settled ||
        (!vary && !exec_idle(e)))
        return w;
    if ((t = vr_slices_home(e->slices, (size_t)home, w, true)))
        return t;
    if (s < 0 || vary) {
        struct vr_slice_bind b;
        if (!binding_of(w, &b) || vr_ex_retarget(e, (size_t)home, &b) != 0)
            return w;
        e->retargeted = true;
        return vr_slices_va(e->slices, (size_t)home) + (w - b.base);
    }
    *at_home = false;
    return vr_slices_translate(e->slices, w, VR_VIEW_TARGET);
}

static uint64_t xlat_setparams(void *ctx, int32_t home, uint64_t w)
{
    bool at_home;
    uint64_t t = translate_anchor(ctx, home, w, &at_home);
    if (!at_home)
        note_cross(ctx, home, w, t);
    return t;
}

static uint64_t xlat_stable(void *ctx, int32_t home, uint64_t w)
{
    struct vr_exec *e = ctx;
    uint64_t t = vr_slices_translate(e->slices, w, VR_VIEW_STABLE);
    note_cross(e, home, w, t);
    return t;
}

/* The program addresses [lo, hi] that the slice address t, translated from
 * w, stands for: the window t lies in moved back to w. A window's start
 * may also be the end of the window before it (a binding that fills its
 * slot): then both. False when t lies in no window. */
static bool range_of(void *ctx, uint64_t w, uint64_t t, uint64_t *lo, uint64_t *hi)
{
    const struct vr_exec *e = ctx;
    int s = vr_slices_slot_at(e->slices, t);
    if (s < 0)
        return false;
    uint64_t va = vr_slices_va(e->slices, (size_t)s);
    *lo = w - (t - va);
    *hi = *lo + vr_slices_size(e->slices, (size_t)s);
    if (t == va && s > 0 &&
        vr_slices_va(e->slices, (size_t)s - 1) + vr_slices_size(e->slices, (size_t)s - 1) == t)
        *lo = w - vr_slices_size(e->slices, (size_t)s - 1);
    return true;
}

/* dst = src with the anchors translated; only anchors: any other word is
 * passed as the program wrote it, whatever its bits look like. Words into
 * one allocation are translated together or not at all (vr_xlat_keep_pairs). */
void vr_ex_translate_node(struct vr_exec *e, const struct vr_node *n, const uint8_t *src,
                           uint8_t *dst, bool setparams)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT_INTERNAL(e->slices && n->layout && n >= e->ns.v && n < e->ns.v + e->ns.n);
    e->xnode = (uint32_t)(n - e->ns.v);
    e->xvary = may_vary(e) && !e->stuck;
    vr_xlat_args(n->layout->words, e->anchor_slot + n->word0, n->layout->nwords,
                 n->layout->bytes, src, dst, setparams ? xlat_setparams : xlat_stable, e);
    vr_xlat_keep_pairs(n->layout->words, n->layout->nwords, src, dst, range_of, e);
}

/* ---- decision and transition --------------------------------------------- */

/* Where an installed anchor word reads: its home slot when it lies in that
 * window (an end pointer of a binding that fills its slot equals the next
 * slot's start, and means the home's end), else the slot it lies in, or -1
 * (the program's own address). */
static int slot_read(const struct vr_exec *e, int32_t home, uint64_t have)
{
    VR_ASSERT_INTERNAL(home >= 0);
    return in_window(e, (size_t)home, have) ? home : vr_slices_slot_at(e->slices, have);
}

bool vr_ex_check(const struct vr_exec *e)
{
    if (e->state != ST_ACTIVE || !e->slices)
        return true;
    for (size_t i = 0; i < e->ns.n; i++) {
        const struct vr_node *n = &e->ns.v[i];
        for (uint32_t k = 0; n->layout && k < n->layout->nwords; k++) {
            int32_t home = e->anchor_slot[n->word0 + k];
            if (home < 0)
                continue;
            uint32_t off = n->layout->words[k];
            uint64_t have = vr_load_word(vr_installed(&e->ns, n) + off);
            uint64_t want = vr_load_word(n->intended + off);
            if (have == want)
                continue;
            int s = slot_read(e, home, have);
            if (s < 0)
                return false;
            /* Mapped now, or by the remap the next launch makes first. */
            uint64_t at = have - vr_slices_va(e->slices, (size_t)s);
            const struct vr_slice_bind *c = vr_slices_current(e->slices, (size_t)s);
            const struct vr_slice_bind *t = vr_slices_target(e->slices, (size_t)s);
            if (!(c->id && want == c->base + at) && !(t->id && want == t->base + at))
                return false;
        }
    }
    return true;
}

/* The shim's own update of node n to e->xlat (the transition's, a fix's, a
 * settle's): not one of the program's calls, counted as a transition
 * update; what the driver holds follows on success. */
CUresult vr_ex_reissue(struct vr_exec *e, struct vr_node *n)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(n->layout);
    CUresult r = vr_node_issue(e->handle, n, e->xlat, e->kp);
    e->c.transition++;
    vr_stat_inc(VR_C_transition_updates);
    if (r == CUDA_SUCCESS)
        memcpy(vr_installed(&e->ns, n), e->xlat, n->layout->bytes);
    return r;
}

/* Re-issues node i when an installed anchor word would not mean what it
 * intends once the pending remaps are made (pending slots are treated as
 * holding their targets), with only stable slots translated. A refused
 * re-issue marks its home slots again, so the next fix retries it. */
static int fix_node(struct vr_exec *e, uint32_t i, int rc)
{
    VR_ASSERT_INTERNAL(i < e->ns.n && e->mark);
    if (e->mark[i] == e->round)
        return rc;
    e->mark[i] = e->round;
    struct vr_node *n = &e->ns.v[i];
    if (!n->layout)
        return rc;
    bool wrong = false;
    for (uint32_t k = 0; k < n->layout->nwords && !wrong; k++) {
        int32_t home = e->anchor_slot[n->word0 + k];
        if (home < 0)
            continue;
        uint32_t off = n->layout->words[k];
        uint64_t have = vr_load_word(vr_installed(&e->ns, n) + off);
        uint64_t want = vr_load_word(n->intended + off);
        int s = slot_read(e, home, have);
        if (s < 0)
            continue;
        const struct vr_slice_bind *b = vr_slices_target(e->slices, (size_t)s);
        wrong = !b->id || want != b->base + (have - vr_slices_va(e->slices, (size_t)s));
    }
    if (!wrong)
        return rc;
    vr_ex_translate_node(e, n, n->intended, e->xlat, false);
    CUresult r = vr_ex_reissue(e, n);
    if (r == CUDA_SUCCESS) {
        vr_variants_touch(e->vars, i);
        return rc;
    }
    for (uint32_t k = 0; k < n->layout->nwords; k++)
        if (e->anchor_slot[n->word0 + k] >= 0)
            mark_slot(e, (size_t)e->anchor_slot[n->word0 + k]);
    return rc ? rc : vr_err_cu(r);
}

/* Whether node i still has an installed anchor word in a slot other than
 * its home. */
static bool has_cross(const struct vr_exec *e, uint32_t i)
{
    VR_ASSERT_INTERNAL(i < e->ns.n);
    const struct vr_node *n = &e->ns.v[i];
    for (uint32_t k = 0; n->layout && k < n->layout->nwords; k++) {
        int32_t home = e->anchor_slot[n->word0 + k];
        if (home < 0)
            continue;
        int s = slot_read(e, home, vr_load_word(vr_installed(&e->ns, n) + n->layout->words[k]));
        if (s >= 0 && s != home)
            return true;
    }
    return false;
}

/* Re-issues every node that may read a slot whose target changed since the
 * last fix and would read it wrongly: the nodes homed in those slots and
 * the few that point across slots. Returns the first driver error. */
int vr_ex_fix_nodes(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_ACTIVE && e->slices);
    if (!e->ndirty)
        return 0;
    if (++e->round == 0) {
        memset(e->mark, 0, (e->ns.n ? e->ns.n : 1) * sizeof *e->mark);
        e->round = 1;
    }
    size_t nd = e->ndirty;
    for (size_t d = 0; d < nd; d++)
        e->is_dirty[e->dirty[d]] = 0;
    /* A refused re-issue marks slots again: appended after the nd taken now
     * (room for twice the slots), and left for the next fix. */
    int rc = 0;
    for (size_t d = 0; d < nd; d++) {
        uint32_t s = e->dirty[d];
        for (uint32_t j = e->home_first[s]; j < e->home_first[s + 1]; j++)
            rc = fix_node(e, e->home_node[j], rc);
    }
    /* Out of memory for the cross list once: every node is a suspect. */
    for (uint32_t i = 0; e->cross_lost && i < e->ns.n; i++)
        rc = fix_node(e, i, rc);
    for (size_t j = 0; j < e->ncross;) {
        uint32_t i = e->cross[j];
        rc = fix_node(e, i, rc);
        if (has_cross(e, i)) {
            j++;
            continue;
        }
        e->in_cross[i] = 0;
        e->cross[j] = e->cross[--e->ncross];
    }
    VR_ASSERT(e->ndirty >= nd);
    memmove(e->dirty, e->dirty + nd, (e->ndirty - nd) * sizeof *e->dirty);
    e->ndirty -= nd;
    VR_ASSERT_EXPENSIVE(rc != 0 || vr_ex_check(e));
    return rc;
}

static void log_rebind(struct vr_exec *e, size_t slot, uint64_t from, uint64_t to, int rc)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[512];
    struct vr_jw w;
    vr_ex_begin_exec_event(&w, buf, sizeof buf, "slice_rebind", e->handle);
    vr_jw_u64(&w, "slice", slot);
    vr_jw_hex(&w, "from", from);
    vr_jw_hex(&w, "to", rc == 0 ? to : 0);
    vr_jw_bool(&w, "waited", false);
    if (rc != 0)
        vr_jw_str(&w, "error", vr_cu_name(vr_err_to_cu(rc)));
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* Gives up the pending rebinds, but never the unbinding of a freed
 * allocation (target id 0): its address may be handed out again, and a slot
 * still bound to it would translate the new allocation's words into the old
 * memory. It stays pending (outside the stable view) until the exec is idle. */
void vr_ex_cancel_all(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->slices);
    static const struct vr_slice_bind none = {0};
    for (size_t s = 0; s < vr_slices_count(e->slices); s++) {
        if (!vr_slices_slot_pending(e->slices, s) || vr_slices_target(e->slices, s)->id == 0)
            continue;
        /* A retarget may have replaced a pending unbind (a new buffer at the
         * freed one's address): giving it up must not bring the freed
         * buffer back. */
        const struct vr_slice_bind *cur = vr_slices_current(e->slices, s);
        struct vr_alloc_info a;
        if (cur->id && (vr_alloc_find(cur->base, &a) != 0 || a.id != cur->id))
            vr_ex_retarget(e, s, &none);
        else
            vr_ex_cancel(e, s);
    }
}

/* Makes the pending remaps before a launch, or gives them up: only when the
 * exec is idle, and only after every node that would read a remapped slot
 * wrongly was re-issued; a refused re-issue cancels the remaps. Returns a
 * driver error only when the graph cannot be made to mean what the program
 * asked for. */
int vr_ex_apply_pending(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_ACTIVE && e->slices);
    if (atomic_load_explicit(&vr_ex_degraded, memory_order_relaxed) || !exec_idle(e)) {
        vr_ex_cancel_all(e);
        return vr_ex_fix_nodes(e);
    }
    if (vr_ex_fix_nodes(e) != 0) {
        vr_log_fallback("rebind", "a node could not be re-issued before a remap; remap cancelled");
        vr_ex_cancel_all(e);
        return vr_ex_fix_nodes(e);
    }
    int rc = 0;
    /* In batches, so that adjacent slots get their access in one call. */
    size_t ns = vr_slices_count(e->slices);
    for (size_t s = 0; s < ns;) {
        size_t slot[VR_REMAP_BATCH], n = 0;
        uint64_t from[VR_REMAP_BATCH], to[VR_REMAP_BATCH];
        int r[VR_REMAP_BATCH];
        for (; s < ns && n < VR_REMAP_BATCH; s++) {
            if (!vr_slices_slot_pending(e->slices, s))
                continue;
            slot[n] = s;
            from[n] = vr_slices_current(e->slices, s)->base;
            to[n++] = vr_slices_target(e->slices, s)->base;
        }
        remap_slots(e, slot, n, r, &e->c.remaps);
        for (size_t i = 0; i < n; i++) {
            e->c.rebinds++;
            vr_stat_inc(VR_C_rebinds);
            log_rebind(e, slot[i], from[i], to[i], r[i]);
            if (r[i] != 0)
                rc = r[i];
        }
    }
    if (rc != 0) {
        vr_log_fallback("rebind", "a slice could not be remapped; its nodes pass through");
        return vr_ex_fix_nodes(e);
    }
    VR_ASSERT_INTERNAL(!vr_slices_pending(e->slices));
    VR_ASSERT_EXPENSIVE(vr_ex_check(e) && vr_variants_check(e->vars));
    return 0;
}

/* Points every node whose anchors fall into a bound slice at it, once. A
 * refused update leaves the node as the program set it, which is correct. */
void vr_ex_transition(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_ACTIVE && (e->anchored || !e->nanchored));
    for (size_t i = 0; i < e->nanchored; i++) {
        struct vr_node *n = &e->ns.v[e->anchored[i]];
        vr_ex_translate_node(e, n, n->intended, e->xlat, false);
        if (memcmp(e->xlat, vr_installed(&e->ns, n), n->layout->bytes) == 0)
            continue;
        if (vr_ex_reissue(e, n) == CUDA_SUCCESS)
            vr_variants_touch(e->vars, e->anchored[i]);
    }
    VR_ASSERT_EXPENSIVE(vr_ex_check(e) && vr_variants_check(e->vars));
}

/* The anchored nodes, and per slot the nodes with an anchor homed there
 * (fix_nodes' lists); e->anchor_slot is set. */
int vr_ex_index_anchors(struct vr_exec *e, size_t nslots)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->anchor_slot && !e->anchored && !e->home_first && !e->nanchored);
    size_t n = e->ns.n ? e->ns.n : 1, ns = nslots ? nslots : 1;
    e->anchored = malloc(n * sizeof *e->anchored);
    e->home_first = calloc(ns + 1, sizeof *e->home_first);
    e->dirty = malloc(2 * ns * sizeof *e->dirty);
    e->is_dirty = calloc(ns, 1);
    e->mark = calloc(n, sizeof *e->mark);
    uint32_t *last = calloc(ns, sizeof *last); /* node index + 1 that counted it last */
    if (!e->anchored || !e->home_first || !e->dirty || !e->is_dirty || !e->mark || !last) {
        free(last);
        return -ENOMEM;
    }
    /* Two passes: count per slot, then fill (home_first ends as starts). */
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        memset(last, 0, ns * sizeof *last);
        for (size_t i = 0; i < e->ns.n; i++) {
            const struct vr_node *nd = &e->ns.v[i];
            bool any = false;
            uint32_t k = 0;
            int32_t h;
            while ((h = vr_profile_next_home(nd, e->anchor_slot, nslots, last, (uint32_t)i + 1,
                                             &k)) >= 0) {
                any = true;
                if (pass == 0)
                    e->home_first[h + 1]++;
                else
                    e->home_node[e->home_first[h]++] = (uint32_t)i;
            }
            if (pass == 0 && any)
                e->anchored[e->nanchored++] = (uint32_t)i;
        }
        if (pass == 0) {
            for (size_t k = 0; k < nslots; k++)
                e->home_first[k + 1] += e->home_first[k];
            total = e->home_first[nslots];
            e->home_node = malloc((total ? total : 1) * sizeof *e->home_node);
            if (!e->home_node) {
                free(last);
                return -ENOMEM;
            }
        }
    }
    /* The fill moved every start to the next slot's: shift back. */
    for (size_t k = nslots; k > 0; k--)
        e->home_first[k] = e->home_first[k - 1];
    e->home_first[0] = 0;
    VR_ASSERT(e->home_first[nslots] == total && e->nanchored <= e->ns.n);
    free(last);
    return 0;
}
