#include "variant_internal.h"
#include "setters.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "err.h"
#include "log.h"
#include "policy.h"
#include "profile.h"
#include "setters.h"
#include "stats.h"


/* Node types whose every exec-mutating call is hooked (setters.h) and can
 * be made again on a variant made later: their kept calls hold values only.
 * Not varied: memory allocation and free nodes (an allocation must never
 * exist twice), child graphs (a kept call would have to own a clone of the
 * program's graph, and kernels inside one are not the shim's to translate),
 * conditional nodes (their bodies are set from the device), external
 * semaphores and batch memops (the simulated driver has none to test with). */
static bool other_type(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_MEMCPY || t == CU_GRAPH_NODE_TYPE_MEMSET ||
           t == CU_GRAPH_NODE_TYPE_HOST || t == CU_GRAPH_NODE_TYPE_EVENT_RECORD ||
           t == CU_GRAPH_NODE_TYPE_WAIT_EVENT;
}

/* Whether graph may be varied; then *others (malloc'd, sorted by handle)
 * holds its nodes of other_type(), *nothers of them. */
static bool varies(CUgraph graph, struct other **others, size_t *nothers)
{
    *others = NULL;
    *nothers = 0;
    size_t n = 0;
    if (vr_real.cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS)
        return false;
    CUgraphNode *all = malloc((n ? n : 1) * sizeof *all);
    struct other *o = calloc(n ? n : 1, sizeof *o);
    if (!all || !o) {
        free(all);
        free(o);
        return false;
    }
    size_t no = 0;
    bool ok = vr_real.cuGraphGetNodes(graph, all, &n) == CUDA_SUCCESS;
    for (size_t i = 0; ok && i < n; i++) {
        CUgraphNodeType t;
        ok = vr_real.cuGraphNodeGetType(all[i], &t) == CUDA_SUCCESS &&
             (t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_EMPTY || other_type(t));
        if (ok && other_type(t))
            o[no++] = (struct other){.orig = all[i], .type = t};
        /* A device-updatable node forbids a second instantiation and is
         * changed where the shim cannot see it. A driver without the entry
         * point has no such nodes. */
        CUkernelNodeAttrValue v;
        if (ok && t == CU_GRAPH_NODE_TYPE_KERNEL && vr_real.cuGraphKernelNodeGetAttribute)
            ok = vr_real.cuGraphKernelNodeGetAttribute(
                     all[i], CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v) ==
                     CUDA_SUCCESS &&
                 !v.deviceUpdatableKernelNode.deviceUpdatable;
    }
    free(all);
    if (!ok) {
        free(o);
        return false;
    }
    /* Sized for every node while counting; kept only for the others (a
     * kernel-only graph keeps none: this is per-node memory otherwise). */
    if (no == 0) {
        free(o);
        o = NULL;
    } else {
        struct other *fit = realloc(o, no * sizeof *o);
        if (fit)
            o = fit;
        qsort(o, no, sizeof *o, cmp_other);
    }
    *others = o;
    *nothers = no;
    return true;
}

int vr_variants_new(struct vr_variants **out, CUgraph graph, const struct vr_nodes *ns,
                    unsigned max, unsigned long long flags)
{
    *out = NULL;
    struct other *others;
    size_t nothers;
    if (max < 2 || !vr_real.cuGraphClone || !vr_real.cuGraphNodeFindInClone ||
        (flags & ~(unsigned long long)CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) ||
        !varies(graph, &others, &nothers))
        return 0;
    struct vr_variants *vs = calloc(1, sizeof *vs);
    if (!vs) {
        free(others);
        return -ENOMEM;
    }
    vs->other = others;
    vs->nother = nothers;
    vs->max = max > VR_VARIANTS_MAX ? VR_VARIANTS_MAX : max;
    vs->cap = 2 * vs->max > VR_VARIANTS_MAX ? VR_VARIANTS_MAX : 2 * vs->max;
    vs->flags = flags;
    vs->n = ns->n;
    vs->cnode = calloc(ns->n ? ns->n : 1, sizeof *vs->cnode);
    vs->gen = calloc(ns->n ? ns->n : 1, sizeof *vs->gen);
    vs->log = malloc((ns->n ? ns->n : 1) * sizeof *vs->log);
    vs->nflags = calloc(ns->n ? ns->n : 1, 1);
    if (!vs->cnode || !vs->gen || !vs->log || !vs->nflags ||
        vr_real.cuGraphClone(&vs->clone, graph) != CUDA_SUCCESS) {
        vs->clone = NULL;
        vr_variants_free(vs, NULL);
        return -ENOMEM;
    }
    /* gen 0: the node holds what the clone holds (the graph at
     * instantiation); a new variant is sent only the nodes changed since. */
    vs->clock = 1;
    for (size_t i = 0; i < ns->n; i++) {
        if (vr_real.cuGraphNodeFindInClone(&vs->cnode[i], ns->v[i].handle, vs->clone) !=
            CUDA_SUCCESS) {
            vr_variants_free(vs, NULL);
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < vs->nother; i++) {
        if (vr_real.cuGraphNodeFindInClone(&vs->other[i].clone, vs->other[i].orig, vs->clone) !=
            CUDA_SUCCESS) {
            vr_variants_free(vs, NULL);
            return -EINVAL;
        }
    }
    *out = vs;
    return 0;
}

void vr_var_drop_one(struct vr_variants *vs, const struct vr_var_ctx *cx, unsigned k)
{
    struct variant *v = &vs->v[k];
    VR_ASSERT(k > 0 && k < VR_VARIANTS_MAX && v->handle && vs->nv > 0);
    /* The shim's own: never a reason for a program's capture to fail. */
    vr_capture_relax();
    vr_real.cuGraphExecDestroy(v->handle); /* the driver defers its own teardown */
    vr_capture_restore();
    if (v->slices && cx)
        cx->bury(cx->owner, v->slices, v->last);
    else if (v->slices)
        vr_slices_forget(v->slices);
    memset(v, 0, sizeof *v);
    vs->nv--;
    vr_stat_add(VR_C_variants, -1);
}

void vr_variants_drop(struct vr_variants *vs, const struct vr_var_ctx *cx, bool freeze)
{
    if (!vs)
        return;
    for (unsigned k = 1; k < vs->cap; k++)
        if (vs->v[k].handle)
            vr_var_drop_one(vs, cx, k);
    if (freeze)
        vs->frozen = true;
}

void vr_variants_free(struct vr_variants *vs, const struct vr_var_ctx *cx)
{
    if (!vs)
        return;
    vr_variants_drop(vs, cx, true);
    if (vs->clone)
        vr_real.cuGraphDestroy(vs->clone);
    free(vs->cnode);
    free(vs->gen);
    free(vs->log);
    free(vs->nflags);
    free(vs->weight);
    for (size_t i = 0; i < vs->nother; i++)
        vr_set_free(vs->other[i].last);
    free(vs->other);
    free(vs);
}

bool vr_variants_usable(const struct vr_variants *vs)
{
    return vs && !vs->frozen;
}

/* The clock would wrap: it starts again at 1. Every node changed since the
 * instantiation gets generation 1; a variant that held every change keeps
 * holding them (synced 1), any other is sent every changed node at its next
 * sync, as a new one would be (synced 0): more than it needs, never less.
 * O(nodes), once in 2^32 changes. */
static void restart_clock(struct vr_variants *vs)
{
    for (unsigned k = 1; k < vs->cap; k++)
        if (vs->v[k].handle)
            vs->v[k].synced = vs->v[k].synced == vs->clock ? 1 : 0;
    for (size_t i = 0; i < vs->n; i++)
        vs->gen[i] = vs->gen[i] ? 1 : 0;
    vs->clock = 1;
}

void vr_variants_touch(struct vr_variants *vs, size_t i)
{
    if (!vs || i >= vs->n)
        return;
    if (vs->clock == UINT32_MAX)
        restart_clock(vs);
    vs->gen[i] = ++vs->clock;
    if (!(vs->nflags[i] & VR_IN_LOG)) {
        vs->nflags[i] |= VR_IN_LOG;
        vs->log[vs->nlog++] = (uint32_t)i;
    }
}

/* Node i as variant v must hold it: the installed bytes with every anchor
 * word that points into a slot of the base moved into v's slot. */
static CUresult push(struct vr_variants *vs, const struct vr_var_ctx *cx, struct variant *v,
                     size_t i)
{
    const struct vr_node *n = &cx->ns->v[i];
    const struct vr_layout *l = n->layout;
    memcpy(cx->xlat, vr_installed(cx->ns, n), l->bytes);
    for (uint32_t k = 0; k < l->nwords; k++) {
        if (cx->anchor_slot[n->word0 + k] < 0)
            continue;
        uint64_t w = vr_load_word(cx->xlat + l->words[k]);
        int s = vr_slices_slot_at(cx->base, w);
        if (s >= 0)
            vr_store_word(cx->xlat + l->words[k], w - vr_slices_va(cx->base, (size_t)s) +
                                                      vr_slices_va(v->slices, (size_t)s));
    }
    struct vr_node tmp = *n;
    tmp.handle = vs->cnode[i];
    (*cx->pushes)++;
    vr_stat_inc(VR_C_transition_updates);
    return vr_node_issue(v->handle, &tmp, cx->xlat, cx->kp);
}

/* Keeps in the log only the nodes some variant has not been sent yet. */
static void prune_log(struct vr_variants *vs)
{
    uint32_t min = vs->clock;
    for (unsigned k = 1; k < vs->cap; k++)
        if (vs->v[k].handle && vs->v[k].synced < min)
            min = vs->v[k].synced;
    size_t keep = 0;
    for (size_t j = 0; j < vs->nlog; j++) {
        uint32_t i = vs->log[j];
        if (vs->gen[i] > min)
            vs->log[keep++] = i;
        else
            vs->nflags[i] &= (uint8_t)~VR_IN_LOG;
    }
    vs->nlog = keep;
}

/* Sends v the nodes changed since its last sync: those in the log, or,
 * for a new variant (synced 0: it holds the graph as instantiated), every
 * node changed since the instantiation. */
static int sync_nodes(struct vr_variants *vs, const struct vr_var_ctx *cx, struct variant *v)
{
    if (v->synced == vs->clock)
        return 0;
    bool all = v->synced == 0;
    size_t n = all ? vs->n : vs->nlog;
    for (size_t j = 0; j < n; j++) {
        size_t i = all ? j : vs->log[j];
        if (vs->gen[i] <= v->synced || !cx->ns->v[i].layout)
            continue;
        if (push(vs, cx, v, i) != CUDA_SUCCESS)
            return -EIO;
    }
    v->synced = vs->clock;
    prune_log(vs);
    return 0;
}

/* Slots where v does not hold the base's target (a slot nobody targets
 * needs nothing: no installed word reads it). */
static size_t differing(const struct vr_var_ctx *cx, const struct variant *v)
{
    size_t d = 0;
    for (size_t s = 0; s < vr_slices_count(cx->base); s++) {
        uint64_t want = vr_slices_target(cx->base, s)->id;
        d += want && vr_slices_current(v->slices, s)->id != want;
    }
    return d;
}

/* The first variant from `from` on that holds every target (0: none). */
static unsigned holding(const struct vr_variants *vs, const struct vr_var_ctx *cx, unsigned from)
{
    for (unsigned k = from; k < vs->cap; k++)
        if (vs->v[k].handle && differing(cx, &vs->v[k]) == 0)
            return k;
    return 0;
}

int vr_variants_ready(const struct vr_variants *vs, const struct vr_var_ctx *cx)
{
    if (!vs || vs->frozen || !vr_slices_pending(cx->base))
        return 0;
    unsigned k = holding(vs, cx, 1);
    return k && vs->v[k].synced == vs->clock ? (int)k : 0;
}

/* The variant's slots to the program's exec's targets, in batches so that
 * adjacent slots get their access in one call (vr_slices_remap_many). */
static int remap_to_targets(const struct vr_var_ctx *cx, struct variant *v, bool *vmm,
                            uint64_t *rebinds, bool fresh)
{
    size_t ns = vr_slices_count(cx->base);
    for (size_t s = 0; s < ns;) {
        size_t slot[VR_REMAP_BATCH], n = 0;
        int rc[VR_REMAP_BATCH];
        for (; s < ns && n < VR_REMAP_BATCH; s++) {
            const struct vr_slice_bind *want = vr_slices_target(cx->base, s);
            if (!want->id || vr_slices_current(v->slices, s)->id == want->id)
                continue;
            *vmm = true;
            if (vr_slices_retarget(v->slices, s, want) != 0)
                return -EIO; /* the caller drops the variant, pending slots and all */
            slot[n++] = s;
        }
        vr_slices_remap_many(v->slices, slot, n, rc, cx->remaps);
        for (size_t i = 0; i < n; i++) {
            size_t k = slot[i];
            if (rc[i] != 0 || vr_slices_current(v->slices, k)->id != vr_slices_target(cx->base, k)->id)
                return -EIO;
            /* A new variant's slot counts when the program's exec could not
             * have served it as it is. */
            if (rebinds && (!fresh || vr_slices_current(cx->base, k)->id !=
                                          vr_slices_target(cx->base, k)->id)) {
                (*rebinds)++;
                vr_stat_inc(VR_C_rebinds);
            }
        }
    }
    return 0;
}

static int create(struct vr_variants *vs, const struct vr_var_ctx *cx, bool *vmm)
{
    size_t ns = vr_slices_count(cx->base);
    size_t *sizes = malloc((ns ? ns : 1) * sizeof *sizes);
    if (!sizes)
        return -ENOMEM;
    for (size_t s = 0; s < ns; s++)
        sizes[s] = vr_slices_size(cx->base, s);
    struct variant v = {0};
    *vmm = true;
    int rc = vr_slices_create(&v.slices, sizes, ns);
    free(sizes);
    if (rc != 0)
        return rc;
    vr_capture_relax();
    CUresult r = vr_real.cuGraphInstantiateWithFlags(&v.handle, vs->clone, vs->flags);
    vr_capture_restore();
    if (r != CUDA_SUCCESS) {
        vr_slices_destroy(v.slices);
        return vr_err_cu(r);
    }
    unsigned k = 1;
    while (vs->v[k].handle)
        k++;
    VR_ASSERT(k < vs->cap);
    v.id = ++vs->ids;
    vs->v[k] = v;
    vs->nv++;
    VR_ASSERT_EXPENSIVE(vr_variants_check(vs));
    vr_stat_inc(VR_C_variants);
    struct variant *p = &vs->v[k];
    rc = remap_to_targets(cx, p, vmm, cx->rebinds, true);
    for (size_t i = 0; rc == 0 && i < vs->n; i++)
        if ((vs->nflags[i] & VR_DISABLED) &&
            vr_real.cuGraphNodeSetEnabled(p->handle, vs->cnode[i], 0) != CUDA_SUCCESS)
            rc = -EIO;
    /* The other nodes as the program last set them on its exec. */
    for (size_t i = 0; rc == 0 && i < vs->nother; i++) {
        const struct other *o = &vs->other[i];
        if ((o->last && vr_set_issue(p->handle, o->clone, o->last) != CUDA_SUCCESS) ||
            (o->disabled &&
             vr_real.cuGraphNodeSetEnabled(p->handle, o->clone, 0) != CUDA_SUCCESS))
            rc = -EIO;
    }
    if (rc == 0)
        rc = sync_nodes(vs, cx, p);
    if (rc != 0) {
        vr_var_drop_one(vs, cx, k);
        return rc;
    }
    return (int)k;
}

/* Per slot, the nodes with an anchor in it (what passing it through costs);
 * total: the nodes with any anchor (what a new variant costs). Counted once. */
static int weigh(struct vr_variants *vs, const struct vr_var_ctx *cx)
{
    if (vs->weight)
        return 0;
    size_t n = vr_slices_count(cx->base);
    vs->weight = calloc(n ? n : 1, sizeof *vs->weight);
    uint32_t *seen = calloc(n ? n : 1, sizeof *seen); /* node index + 1 that counted it last */
    if (!vs->weight || !seen) {
        free(vs->weight);
        vs->weight = NULL;
        free(seen);
        return -ENOMEM;
    }
    for (size_t i = 0; i < cx->ns->n; i++) {
        const struct vr_node *nd = &cx->ns->v[i];
        bool any = false;
        uint32_t k = 0;
        int32_t s;
        while ((s = vr_profile_next_home(nd, cx->anchor_slot, n, seen, (uint32_t)i + 1, &k)) >= 0) {
            vs->weight[s]++;
            any = true;
        }
        vs->total += any;
    }
    free(seen);
    return 0;
}

/* The targets, as one number: a periodic pattern comes back to one. */
static uint64_t targets_hash(const struct vr_var_ctx *cx)
{
    uint64_t h = 0;
    for (size_t s = 0; s < vr_slices_count(cx->base); s++)
        h = (h ^ vr_slices_target(cx->base, s)->id) * UINT64_C(0x9e3779b97f4a7c15) + 1;
    return h;
}

int vr_variants_pick(struct vr_variants *vs, struct vr_track *t, const struct vr_var_ctx *cx,
                     uint64_t v0_last, bool *vmm)
{
    *vmm = false;
    if (!vs || vs->frozen || !vr_slices_pending(cx->base))
        return 0;
    /* A variant that holds every target already: no VMM call, and no
     * question to the driver either. */
    for (unsigned k = holding(vs, cx, 1); k; k = holding(vs, cx, k + 1)) {
        if (sync_nodes(vs, cx, &vs->v[k]) == 0)
            return (int)k;
        vr_var_drop_one(vs, cx, k);
    }
    unsigned best = 0;
    size_t bestd = (size_t)-1;
    for (unsigned k = 1; k < vs->cap; k++) {
        struct variant *v = &vs->v[k];
        if (!v->handle)
            continue;
        size_t d = differing(cx, v);
        if (d < bestd && vr_track_complete(t, v->last)) {
            best = k;
            bestd = d;
        }
    }
    bool v0_idle = vr_track_complete(t, v0_last);
    /* A new variant costs an instantiation and an update of every anchored
     * node. It pays when the targets come back (a period: it is reused as it
     * is), or when the moved slots hold most anchored nodes (whenever the
     * program's exec is busy they would all pass through untranslated; made
     * whether or not it is busy now, so the way to a steady state does not
     * depend on what completed when). A buffer read by a few nodes is
     * cheaper to pass through. Otherwise the program's exec, when idle,
     * remaps itself like an idle variant would. */
    uint64_t h = targets_hash(cx);
    bool again = false;
    for (unsigned i = 0; i < vs->nrecent && i < 8; i++)
        again |= vs->recent[i] == h;
    /* Slots whose buffers alternated while profiled (pingpong) will come
     * back: as good as seen again. */
    bool back = cx->slot_back != NULL;
    for (size_t s = 0; back && s < vr_slices_count(cx->base); s++)
        back = !vr_slices_slot_pending(cx->base, s) || cx->slot_back[s];
    again |= back;
    size_t moved = 0;
    if (!again && weigh(vs, cx) == 0)
        for (size_t s = 0; s < vr_slices_count(cx->base); s++)
            moved += vr_slices_slot_pending(cx->base, s) ? vs->weight[s] : 0;
    /* Decided on counts alone (policy.h): whether the program's exec and
     * the variants are still running says how the targets are served now,
     * never whether a variant is made, so the same program makes the same
     * variants in every run. */
    bool pays = vr_policy_variant_pays(again, vs->weight != NULL, moved, vs->total);
    if (vs->nv + 1 < vs->max && pays) {
        int k = create(vs, cx, vmm);
        if (k > 0)
            return k;
        vr_warn("a variant could not be made (%d); this exec is not varied again", k);
        vs->frozen = true;
        return 0;
    }
    size_t pending = 0;
    for (size_t s = 0; s < vr_slices_count(cx->base); s++)
        pending += vr_slices_slot_pending(cx->base, s);
    /* The least recently launched of equals: the others stay idle longer. */
    if (best && (!v0_idle || bestd < pending ||
                 (bestd == pending && vs->v[best].last < v0_last))) {
        struct variant *v = &vs->v[best];
        if (remap_to_targets(cx, v, vmm, cx->rebinds, false) == 0 && sync_nodes(vs, cx, v) == 0)
            return (int)best;
        vr_var_drop_one(vs, cx, best);
    }
    /* Remapped or passed through by the program's exec: remembered, so
     * that these targets coming back get a variant of their own. */
    vs->recent[vs->nrecent++ % 8] = h;
    return 0;
}

CUgraphExec vr_variants_handle(const struct vr_variants *vs, int var)
{
    return vs->v[var].handle;
}

/* The set's invariants, for the checks builds' assertions: here, beside
 * the code that keeps them, so variant.c asserts without calling the
 * file above it (variant_ops.c). */
bool vr_variants_check(const struct vr_variants *vs)
{
    if (!vs)
        return true;
    if (vs->max > vs->cap || vs->cap > VR_VARIANTS_MAX || vs->nlog > vs->n)
        return false;
    unsigned used = 0;
    for (unsigned k = 1; k < VR_VARIANTS_MAX; k++) {
        const struct variant *v = &vs->v[k];
        if (!v->handle)
            continue;
        /* In use only below cap, under an id handed out, never v[0]'s. */
        if (k >= vs->cap || !v->id || v->id > vs->ids)
            return false;
        used++;
    }
    if (used != vs->nv)
        return false;
    for (size_t j = 0; j < vs->nlog; j++)
        if (vs->log[j] >= vs->n || !(vs->nflags[vs->log[j]] & VR_IN_LOG))
            return false;
    for (size_t j = 1; j < vs->nother; j++)
        if (cmp_other(&vs->other[j - 1], &vs->other[j]) >= 0)
            return false;
    return true;
}
