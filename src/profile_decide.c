/* profile_decide: the decision on what an exec's profile showed (profile.h):
 * the candidates, each selected or rejected with policy.h's cost model, the
 * selected ones' slots in one reservation, and the `profile_decision` event.
 */
#include "profile_internal.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "jw.h"
#include "log.h"
#include "policy.h"

static bool variants_on, slice_still;

void vr_profile_configure(bool variants, bool still)
{
    variants_on = variants;
    slice_still = still;
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
/* A word pointing into the buffer (or at its end) could not be anchored: a
 * slice would translate its other words and not that one (issue 30). */
static const char *const V_UNANCHORED = "unanchored_word";

struct vr_prices vr_profile_prices(void)
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
    /* The prices the decision weighed: a rejected buffer shows both sides. */
    struct vr_prices pr = vr_profile_prices();
    vr_jw_array_begin(&w, "candidates");
    for (size_t i = 0; i < ncand; i++) {
        vr_jw_object_begin(&w, NULL);
        vr_jw_hex(&w, "ptr", cand[i].ptr);
        vr_jw_u64(&w, "size", cand[i].size);
        vr_jw_u64(&w, "anchors", cand[i].anchors);
        vr_jw_str(&w, "verdict", cand[i].verdict);
        if (cand[i].verdict == V_NOT_WORTH_IT) {
            vr_jw_u64(&w, "saved_ns_per_change", cand[i].anchors * pr.setparams);
            vr_jw_u64(&w, "remap_ns", pr.remap);
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
    if (p->again)
        vr_jw_bool(&w, "reprofile", true);
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

/* Every word that is no anchor, as it is now: the program may have re-set
 * it since the last profiled launch. */
static void loosen_current(struct vr_profile *p, const struct vr_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        const struct vr_node *n = &ns->v[i];
        for (uint32_t k = 0; n->layout && k < n->layout->nwords; k++) {
            if (p->id[n->word0 + k])
                continue;
            uint64_t base, size;
            vr_profile_loosen(p, vr_profile_named_by(
                                     p, vr_load_word(n->intended + n->layout->words[k]), &base,
                                     &size));
        }
    }
    vr_profile_loose_compact(p);
}

/* Whether any allocation candidate k held (its first word's first, second
 * and last allocation: every one of a default profile's three launches, a
 * pingpong's two; and the one it holds now) has a word no anchor can stand
 * for: its anchors cannot be translated without splitting a pair. */
static bool unanchored(const struct vr_profile *p, const struct candidate *c)
{
    return p->loose_lost || vr_profile_loose(p, c->id) || vr_profile_loose(p, p->id[c->word]) ||
           vr_profile_loose(p, p->alt[c->word]) || vr_profile_loose(p, p->prev[c->word]);
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
    loosen_current(p, ns);
    /* A moving buffer whose first allocation was freed moves to new ones
     * (freed and re-allocated every step): no variant holds them. */
    for (size_t k = 0; k < ncand; k++) {
        struct vr_alloc_info first = {0};
        cand[k].renewed = cand[k].moved && (vr_alloc_find(cand[k].ptr, &first) != 0 ||
                                            first.id != cand[k].id);
    }
    /* The exec's moving buffers together: what variants would save. */
    struct vr_prices pr = vr_profile_prices();
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
        if (unanchored(p, &cand[k])) {
            cand[k].verdict = V_UNANCHORED;
            continue;
        }
        /* policy.h's cost model: a moving buffer gets a slice where a
         * remap, or variants, cost less than its updates; a still one is
         * decided below, once the moving ones are. */
        struct vr_buffer_seen b = seen_of(&cand[k]);
        enum vr_slice_verdict v = vr_policy_slice_verdict(&b, &pr, moving_ns, moving_slots,
                                                          period, variants_on && !p->again);
        cand[k].verdict = v == VR_SLICE_SELECTED ? V_SELECTED
                          : v == VR_SLICE_STILL  ? V_STILL
                                                 : V_NOT_WORTH_IT;
        movers_sliced += v == VR_SLICE_SELECTED;
    }
    bool still_sliced = slice_still || (!p->again && vr_policy_still_sliced(movers_sliced));
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
    out->moving = moving_slots;
    log_decision(p, exec, cand, ncand, active, active ? reserved : 0, observe);
    free(order);
    free(sizes);
    free(cidx);
    free(cand);
}
