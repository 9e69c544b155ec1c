#include "profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "log.h"
#include "policy.h"
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

static bool variants_on, slice_still;

void vr_profile_configure(bool variants, bool still)
{
    variants_on = variants;
    slice_still = still;
}

int vr_profile_new(struct vr_profile **out, size_t nwords)
{
    struct vr_profile *p = calloc(1, sizeof *p);
    size_t n = nwords ? nwords : 1;
    if (!p)
        return -ENOMEM;
    p->nwords = nwords;
    p->val = calloc(n, sizeof *p->val);
    p->id = calloc(n, sizeof *p->id);
    p->base = calloc(n, sizeof *p->base);
    p->sig = calloc(n, sizeof *p->sig);
    p->size = calloc(n, sizeof *p->size);
    p->prev = calloc(n, sizeof *p->prev);
    p->back = calloc(n, 1);
    if (!p->val || !p->id || !p->base || !p->sig || !p->size || !p->prev || !p->back) {
        vr_profile_free(p);
        return -ENOMEM;
    }
    *out = p;
    return 0;
}

void vr_profile_free(struct vr_profile *p)
{
    if (!p)
        return;
    free(p->val);
    free(p->id);
    free(p->base);
    free(p->sig);
    free(p->size);
    free(p->prev);
    free(p->back);
    free(p->why);
    free(p->todo);
    vr_ptrindex_free(&p->idx);
    free(p->reads);
    free(p);
}

void vr_profile_touch(struct vr_profile *p, size_t node)
{
    if (!p->why || node >= p->nnodes)
        return;
    if (!p->why[node])
        p->todo[p->ntodo++] = (uint32_t)node;
    p->why[node] |= READ_SET;
}

unsigned vr_profile_launches(const struct vr_profile *p)
{
    return p->launches;
}

int vr_profile_find_alloc(uint64_t word, struct vr_alloc_info *a)
{
    if (vr_alloc_find(word, a) == 0 ||
        (word && vr_alloc_find(word - 1, a) == 0 && word == a->base + a->size))
        return 0;
    return -ENOENT;
}

uint64_t vr_profile_alloc_of(uint64_t word, uint64_t *base)
{
    struct vr_alloc_info a;
    if (vr_profile_find_alloc(word, &a) != 0)
        return 0;
    *base = a.base;
    return a.id;
}

/* A word is an anchor by position: at every profiled launch it pointed at
 * the same offset of an allocation of the same size. The allocation may
 * differ from launch to launch (a buffer replaced every step, from a pool
 * or freshly allocated): positions that saw the same sequence of
 * allocations share one slice, rebound when the program moves them. The
 * sequence is mixed into sig only where the allocation changes, so a node
 * not read again (unchanged) leaves it as reading it would. */
static void observe_node(struct vr_profile *p, const struct vr_node *n, bool first)
{
    if (!n->layout)
        return;
    for (uint32_t k = 0; k < n->layout->nwords; k++) {
        size_t w = n->word0 + k;
        if (!first && !p->id[w])
            continue;
        uint64_t v = vr_load_word(n->intended + n->layout->words[k]);
        struct vr_alloc_info a;
        uint64_t base = 0, id = vr_profile_alloc_of(v, &base);
        if (id && vr_alloc_find(base, &a) != 0)
            id = 0;
        if (first) {
            p->val[w] = v;
            p->id[w] = id;
            p->base[w] = base;
            p->sig[w] = id;
            p->size[w] = id ? a.size : 0;
        } else if (!id || v - base != p->val[w] - p->base[w] || a.size != p->size[w]) {
            p->id[w] = 0;
        } else if (id != p->prev[w]) {
            p->sig[w] = (p->sig[w] ^ id) * UINT64_C(0x9e3779b97f4a7c15) + 1;
            p->back[w] |= id == p->id[w];
        }
        p->prev[w] = id;
    }
}

/* Indexes node i's anchor words by their values now. */
static int index_node(struct vr_profile *p, const struct vr_node *n, uint32_t i)
{
    if (!n->layout)
        return 0;
    for (uint32_t k = 0; k < n->layout->nwords; k++) {
        size_t w = n->word0 + k;
        if (p->id[w] &&
            vr_ptrindex_add(&p->idx, vr_load_word(n->intended + n->layout->words[k]), i) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* Without the bookkeeping every launch reads every node, as it must. */
static void read_all_from_now(struct vr_profile *p)
{
    p->all = true;
    free(p->why);
    free(p->todo);
    p->why = NULL;
    p->todo = NULL;
    p->ntodo = 0;
    vr_ptrindex_free(&p->idx);
    p->indexed = false;
}

static void first_read(struct vr_profile *p, const struct vr_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        observe_node(p, &ns->v[i], true);
    p->nnodes = ns->n;
    p->why = calloc(ns->n ? ns->n : 1, 1);
    p->todo = malloc((ns->n ? ns->n : 1) * sizeof *p->todo);
    if (!p->why || !p->todo || ns->n > UINT32_MAX)
        read_all_from_now(p);
}

/* Made at the first registry change a later launch sees, from the words as
 * they are: a node not re-set since holds what was last read, a re-set one
 * is read at this launch anyway. A profile that sees no change (the common
 * case) never pays for it. */
static int index_all(struct vr_profile *p, const struct vr_nodes *ns)
{
    int rc = 0;
    for (size_t i = 0; i < ns->n && rc == 0; i++)
        rc = index_node(p, &ns->v[i], (uint32_t)i);
    if (rc == 0)
        rc = vr_ptrindex_seal(&p->idx);
    p->indexed = rc == 0;
    return rc;
}

static void mark_freed(void *arg, uint32_t node)
{
    struct vr_profile *p = arg;
    if (!p->why[node])
        p->todo[p->ntodo++] = node;
    p->why[node] |= READ_FREED;
}

/* A later launch reads the nodes the program re-set since the last read,
 * and the nodes whose anchor words the registry changes concern: a node
 * the program did not re-set may point at a new allocation (a buffer freed
 * and re-allocated at the same address changes no byte of it). Every node
 * when too many changes went by to tell. Returns the nodes read. */
static size_t later_read(struct vr_profile *p, const struct vr_nodes *ns)
{
    struct vr_alloc_range r[VR_ALLOC_CHANGES];
    int nr = vr_alloc_changed_since(p->gen, &p->gen, r);
    bool was_indexed = p->indexed;
    if (nr > 0 && !p->indexed && index_all(p, ns) != 0)
        nr = -ENOMEM;
    for (int k = 0; k < nr; k++)
        vr_ptrindex_find(&p->idx, r[k].lo, r[k].hi, mark_freed, p);
    size_t read = p->ntodo;
    if (nr < 0) {
        for (size_t i = 0; i < ns->n; i++)
            observe_node(p, &ns->v[i], false);
        read = ns->n;
    } else {
        for (size_t t = 0; t < p->ntodo; t++)
            observe_node(p, &ns->v[p->todo[t]], false);
    }
    /* Re-set nodes hold new values: indexed again (an index made at this
     * launch has them already). */
    int rc = 0;
    for (size_t t = 0; t < p->ntodo; t++) {
        uint32_t i = p->todo[t];
        if ((p->why[i] & READ_SET) && was_indexed && rc == 0)
            rc = index_node(p, &ns->v[i], i);
        p->why[i] = 0;
    }
    p->ntodo = 0;
    if (rc == 0)
        rc = vr_ptrindex_seal(&p->idx);
    if (rc != 0 || nr == -ENOMEM)
        read_all_from_now(p);
    return read;
}

void vr_profile_observe(struct vr_profile *p, const struct vr_nodes *ns)
{
    size_t read = ns->n;
    if (p->launches == 0) {
        /* Before reading: a change published later is seen next time. */
        p->gen = vr_alloc_generation();
        first_read(p, ns);
    } else if (p->all || ns->n != p->nnodes) {
        for (size_t i = 0; i < ns->n; i++)
            observe_node(p, &ns->v[i], false);
    } else {
        read = later_read(p, ns);
    }
    if (p->launches == p->capreads) {
        size_t cap = p->capreads ? p->capreads * 2 : 4;
        uint32_t *grown = realloc(p->reads, cap * sizeof *grown);
        if (grown) {
            p->reads = grown;
            p->capreads = cap;
        }
    }
    if (p->launches < p->capreads)
        p->reads[p->launches] = read > UINT32_MAX ? UINT32_MAX : (uint32_t)read;
    p->launches++;
}

struct candidate {
    uint64_t id, ptr;
    size_t word;        /* its first anchor */
    bool moved, back;   /* its buffer changed during the profile; and came back */
    bool renewed;       /* the allocation it first held is gone */
    size_t size;
    unsigned anchors;
    const char *verdict;
    struct vr_alloc_info info;
    int slot;
};

static const char *const V_SELECTED = "selected";
static const char *const V_NOT_WORTH_IT = "not_worth_it";
static const char *const V_STILL = "still";

/* The prices the decision weighs with (cost.h). */
static struct vr_prices prices_now(void)
{
    uint64_t map = vr_cost_get(VR_COST_MAP), access = vr_cost_get(VR_COST_ACCESS);
    return (struct vr_prices){.setparams = vr_cost_get(VR_COST_SETPARAMS),
                              .remap = vr_cost_get(VR_COST_UNMAP) + map + access,
                              .slot = VR_PRICE_RESERVE + map + access,
                              .instantiate = VR_PRICE_INSTANTIATE};
}

static struct vr_buffer_seen seen_of(const struct candidate *c)
{
    return (struct vr_buffer_seen){.anchors = c->anchors, .moved = c->moved || c->back,
                                   .back = c->back, .renewed = c->renewed};
}

/* What moving one slice to another buffer costs the host. */
static uint64_t remap_ns(void)
{
    return vr_cost_get(VR_COST_UNMAP) + vr_cost_get(VR_COST_MAP) + vr_cost_get(VR_COST_ACCESS);
}

static void log_decision(const struct vr_profile *p, CUgraphExec exec,
                         const struct candidate *cand, size_t ncand, bool active,
                         size_t reserved, bool observe)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    size_t cap = 2048 + ncand * 160 + (size_t)p->launches * 12;
    char *buf = malloc(cap); /* once per exec: not a hot path */
    if (!buf)
        return;
    struct vr_jw w;
    vr_jw_begin(&w, buf, cap, "profile_decision");
    vr_jw_hex(&w, "exec", (uint64_t)(uintptr_t)exec);
    vr_jw_str(&w, "state", active ? "active" : "disabled");
    vr_jw_u64(&w, "launches", p->launches);
    /* Nodes read at each profile launch: O(changed nodes) after the first. */
    vr_jw_array_begin(&w, "profile_reads");
    for (size_t i = 0; i < p->launches && i < p->capreads; i++)
        vr_jw_u64(&w, NULL, p->reads[i]);
    vr_jw_array_end(&w);
    vr_jw_array_begin(&w, "candidates");
    for (size_t i = 0; i < ncand; i++) {
        vr_jw_object_begin(&w, NULL);
        vr_jw_hex(&w, "ptr", cand[i].ptr);
        vr_jw_u64(&w, "size", cand[i].size);
        vr_jw_u64(&w, "anchors", cand[i].anchors);
        vr_jw_str(&w, "verdict", cand[i].verdict);
        if (cand[i].verdict == V_NOT_WORTH_IT) {
            vr_jw_u64(&w, "saved_ns_per_change", cand[i].anchors * vr_cost_get(VR_COST_SETPARAMS));
            vr_jw_u64(&w, "remap_ns", remap_ns());
        }
        vr_jw_object_end(&w);
    }
    vr_jw_array_end(&w);
    vr_jw_u64(&w, "reserved_bytes", reserved);
    vr_jw_object_begin(&w, "costs_ns");
    for (int c = 0; c < VR_COST_COUNT; c++)
        vr_jw_u64(&w, vr_cost_name((enum vr_cost)c), vr_cost_get((enum vr_cost)c));
    vr_jw_object_end(&w);
    /* What this process timed (0: too few samples), beside what it weighed:
     * in mode model a driver far from the model shows here. */
    vr_jw_object_begin(&w, "measured_ns");
    for (int c = 0; c < VR_COST_COUNT; c++)
        vr_jw_u64(&w, vr_cost_name((enum vr_cost)c), vr_cost_median((enum vr_cost)c));
    vr_jw_object_end(&w);
    /* Why a buffer is missing from the candidates: its pointer moved. */
    vr_jw_array_begin(&w, "unstable");
    uint64_t listed[64];
    size_t nlisted = 0;
    for (size_t i = 0; i < p->nwords && nlisted < 64; i++) {
        if (p->id[i] || !p->base[i])
            continue;
        bool dup = false;
        for (size_t j = 0; j < nlisted && !dup; j++)
            dup = listed[j] == p->base[i];
        if (dup)
            continue;
        listed[nlisted++] = p->base[i];
        vr_jw_hex(&w, NULL, p->base[i]);
    }
    vr_jw_array_end(&w);
    if (observe)
        vr_jw_bool(&w, "observe", true);
    vr_log_emit(&w, VR_LEVEL_INFO);
    free(buf);
}

/* Anchors grouped by allocation id through a transient hash: a graph of many
 * nodes with as many buffers must not cost anchors x candidates. cidx[w] is
 * the candidate of word w or -1. */
static size_t group(const struct vr_profile *p, struct candidate *cand, int32_t *cidx)
{
    size_t hcap = 16, ncand = 0;
    while (hcap < p->nwords * 2)
        hcap *= 2;
    uint64_t *hid = calloc(hcap, sizeof *hid);
    uint32_t *hk = calloc(hcap, sizeof *hk);
    if (!hid || !hk) {
        free(hid);
        free(hk);
        return 0;
    }
    for (size_t w = 0; w < p->nwords; w++) {
        cidx[w] = -1;
        uint64_t id = p->id[w] ? p->sig[w] : 0;
        if (!id)
            continue;
        size_t h = (size_t)(id * UINT64_C(0x9e3779b97f4a7c15) >> 20) & (hcap - 1);
        while (hid[h] && hid[h] != id)
            h = (h + 1) & (hcap - 1);
        if (!hid[h]) {
            hid[h] = id;
            hk[h] = (uint32_t)ncand;
            cand[ncand] = (struct candidate){.id = p->id[w], .ptr = p->base[w], .slot = -1,
                                             .word = w, .moved = p->sig[w] != p->id[w],
                                             .back = p->back[w] != 0};
            ncand++;
        }
        cidx[w] = (int32_t)hk[h];
        cand[hk[h]].anchors++;
    }
    free(hid);
    free(hk);
    return ncand;
}

static void reject_selected(struct candidate *cand, size_t ncand, const char *why)
{
    for (size_t k = 0; k < ncand; k++)
        if (cand[k].verdict == V_SELECTED)
            cand[k].verdict = why;
}

/* The intended value of scanned word w now. */
static bool current_word(const struct vr_nodes *ns, size_t w, uint64_t *out)
{
    size_t lo = 0, hi = ns->n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ns->v[mid].word0 <= w)
            lo = mid;
        else
            hi = mid;
    }
    for (size_t i = lo; i < ns->n && ns->v[i].word0 <= w; i++) {
        const struct vr_node *n = &ns->v[i];
        if (n->layout && w < (size_t)n->word0 + n->layout->nwords) {
            *out = vr_load_word(n->intended + n->layout->words[w - n->word0]);
            return true;
        }
    }
    return false;
}

void vr_profile_decide(struct vr_profile *p, const struct vr_nodes *ns, CUgraphExec exec,
                       bool observe, struct vr_decision *out)
{
    memset(out, 0, sizeof *out);
    size_t nw = p->nwords ? p->nwords : 1;
    struct candidate *cand = calloc(nw, sizeof *cand);
    int32_t *cidx = malloc(nw * sizeof *cidx);
    size_t *sizes = calloc(nw, sizeof *sizes);
    size_t *order = malloc(nw * sizeof *order);
    if (!cand || !cidx || !sizes || !order) {
        free(cand);
        free(cidx);
        free(sizes);
        free(order);
        return;
    }
    size_t ncand = group(p, cand, cidx);
    size_t nsel = 0, reserved = 0;
    /* A moving buffer whose first allocation was freed moves to new ones
     * (freed and re-allocated every step): no variant holds them. */
    for (size_t k = 0; k < ncand; k++) {
        struct vr_alloc_info first = {0};
        cand[k].renewed = cand[k].moved && (vr_alloc_find(cand[k].ptr, &first) != 0 ||
                                            first.id != cand[k].id);
    }
    /* The exec's moving buffers together: what variants would save. */
    struct vr_prices pr = prices_now();
    uint64_t moving_ns = 0;
    size_t moving_slots = 0;
    bool all_back = true;
    for (size_t k = 0; k < ncand; k++) {
        struct vr_buffer_seen b = seen_of(&cand[k]);
        moving_ns += vr_policy_compare_ns(&b, &pr);
        moving_slots += b.moved;
        all_back &= !b.moved || b.back;
    }
    /* Every moving buffer came back within the profile: the period is at
     * most its launches less one. */
    unsigned period = VR_PERIOD_BUDGET;
    if (all_back && p->launches > 1 && p->launches - 1 < period)
        period = (unsigned)p->launches - 1;
    size_t movers_sliced = 0;
    for (size_t k = 0; k < ncand; k++) {
        struct vr_alloc_info *a = &cand[k].info;
        /* A position group is bound to what its words point at now: the
         * buffer may have moved since the last profiled launch. */
        uint64_t now;
        if (current_word(ns, cand[k].word, &now) &&
            vr_profile_alloc_of(now, &cand[k].ptr) != 0)
            cand[k].id = 0;
        if (vr_alloc_find(cand[k].ptr, a) != 0 || (cand[k].id && a->id != cand[k].id)) {
            cand[k].verdict = "freed";
            continue;
        }
        cand[k].size = a->size;
        if (!(observe ? a->eligible : a->vmm)) {
            cand[k].verdict = "not_vmm_backed";
            continue;
        }
        /* policy.h's cost model: a moving buffer gets a slice where a
         * remap, or variants, cost less than its updates; a still one is
         * decided below, once the moving ones are. */
        struct vr_buffer_seen b = seen_of(&cand[k]);
        enum vr_slice_verdict v =
            vr_policy_slice_verdict(&b, &pr, moving_ns, moving_slots, period, variants_on);
        cand[k].verdict = v == VR_SLICE_SELECTED ? V_SELECTED
                          : v == VR_SLICE_STILL  ? V_STILL
                                                 : V_NOT_WORTH_IT;
        movers_sliced += v == VR_SLICE_SELECTED;
    }
    bool still_sliced = slice_still || vr_policy_still_sliced(movers_sliced);
    for (size_t k = 0; k < ncand; k++)
        if (cand[k].verdict == V_STILL && still_sliced)
            cand[k].verdict = V_SELECTED;
    /* The moving buffers' slots first, then the still ones': slots that
     * are remapped together lie side by side, and adjacent slots get their
     * access in one call (vr_slices_remap_many). */
    size_t nord = 0;
    for (int still = 0; still < 2; still++)
        for (size_t k = 0; k < ncand; k++)
            if (cand[k].verdict == V_SELECTED && (cand[k].moved || cand[k].back) == !still)
                order[nord++] = k;
    for (size_t o = 0; o < nord; o++) {
        size_t k = order[o];
        /* Slots are named by two-byte anchor entries: past that many, the
         * reservation would be too large anyway (>= 64 GiB at 2 MiB). */
        if (nsel >= VR_ANCHOR_MAX) {
            cand[k].verdict = "too_large";
            continue;
        }
        sizes[nsel++] = cand[k].info.padded;
        reserved += cand[k].info.padded;
    }
    bool active = nsel > 0;
    if (active && !observe) {
        if (vr_slices_create(&out->slices, sizes, nsel) != 0) {
            reject_selected(cand, ncand, "too_large");
            active = false;
        } else {
            size_t slot = 0, bound = 0;
            for (size_t o = 0; o < nord; o++) {
                size_t k = order[o];
                if (cand[k].verdict != V_SELECTED)
                    continue;
                const struct vr_alloc_info *a = &cand[k].info;
                struct vr_slice_bind b = {a->id, a->base, a->size, a->padded, a->handle,
                                          a->device};
                if (vr_slices_bind(out->slices, slot, &b) == 0) {
                    cand[k].slot = (int)slot;
                    bound++;
                } else {
                    cand[k].verdict = "map_failed";
                }
                slot++;
            }
            out->anchor_slot = malloc(nw * sizeof *out->anchor_slot);
            out->slot_back = calloc(nsel, 1);
            if (bound == 0 || !out->anchor_slot || !out->slot_back) {
                reject_selected(cand, ncand, "map_failed");
                active = false;
            } else {
                for (size_t w = 0; w < p->nwords; w++)
                    out->anchor_slot[w] = (vr_anchor)(cidx[w] >= 0 ? cand[cidx[w]].slot : -1);
                for (size_t k = 0; k < ncand; k++) {
                    if (cand[k].slot < 0)
                        continue;
                    out->slot_back[cand[k].slot] = cand[k].back;
                    out->moved |= cand[k].moved || cand[k].back;
                }
            }
            out->selected = bound;
        }
        if (!active) {
            free(out->anchor_slot);
            out->anchor_slot = NULL;
            free(out->slot_back);
            out->slot_back = NULL;
            if (out->slices && vr_slices_destroy(out->slices) != 0)
                vr_warn("exec %p: a reservation could not be returned", (void *)exec);
            out->slices = NULL;
            reserved = 0;
        }
    }
    out->active = active;
    log_decision(p, exec, cand, ncand, active, active ? reserved : 0, observe);
    free(order);
    free(sizes);
    free(cidx);
    free(cand);
}
